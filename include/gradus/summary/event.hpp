// gradus/summary/event.hpp — encoding and decoding TensorBoard `Event` messages.
//
// The messages (tensorflow/core/util/event.proto, framework/summary.proto, tensor.proto),
// only the fields written here:
//   Event            wall_time=1 double, step=2 int64, file_version=3 string, graph_def=4 bytes,
//                    summary=5 Summary, tagged_run_metadata=8 {tag=1 string, run_metadata=2 bytes}
//                    (graph.hpp encodes the GraphDef and RunMetadata messages)
//   Summary          repeated Value value=1
//   Value            tag=1, simple_value=2 float, image=4 Image, histo=5 HistogramProto, audio=6 Audio,
//                    tensor=8 TensorProto, metadata=9 SummaryMetadata
//   Image            height=1, width=2, colorspace=3 (1 gray, 3 RGB, 4 RGBA), encoded_image_string=4
//   Audio            sample_rate=1 float, num_channels=2, length_frames=3, encoded_audio_string=4,
//                    content_type=5 ("audio/wav")
//   HistogramProto   min=1 max=2 num=3 sum=4 sum_squares=5 (double), bucket_limit=6, bucket=7 (packed double)
//   TensorProto      dtype=1 (DT_STRING = 7), tensor_shape=2 {dim=2 {size=1}}, string_val=8
//   SummaryMetadata  plugin_data=1 {plugin_name=1, content=2}
// Fields are written in field order; as in proto3, a plain scalar equal to 0 is left out
// (step 0, wall_time 0), while members of a oneof (simple_value, file_version) always go out.
// The first event of a file is the file_version event "brain.Event:2". Text summaries are
// the text plugin's form: a DT_STRING scalar tensor with metadata plugin_name "text".
#pragma once
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gradus/core/compiled.hpp"
#include "gradus/detail/protobuf.hpp"
#include "gradus/io/tfrecord.hpp"
#include "gradus/summary/histogram.hpp"

namespace gradus::summary {

namespace detail {
namespace proto = ::gradus::detail::proto;  // the protocol-buffer wire format, shared with gd::io
}  // namespace detail

/// An encoded image as stored in an Image summary (colorspace = channels: 1, 3 or 4).
struct EncodedImage {
  int64_t height = 0, width = 0;
  int colorspace = 0;
  std::string encoded;  // PNG bytes
};

// ---------------------------------------------------------------------------------------
// Encoders. A `Value` encoder returns one encoded Summary.Value; an event encoder returns an
// encoded Event (not framed: pass it to io::encode_tfrecord to get the bytes of a file record).

/// Summary.Value {tag, simple_value}.
std::string encode_scalar_value(std::string_view tag, float value);

/// Encoded audio as stored in an Audio summary.
struct EncodedAudio {
  float sample_rate = 0;
  int64_t num_channels = 0, length_frames = 0;
  std::string encoded;       // WAV bytes
  std::string content_type;  // "audio/wav"
};

/// Summary.Value {tag, audio}.
std::string encode_audio_value(std::string_view tag, const EncodedAudio& audio);

/// Summary.Value {tag, histo}.
std::string encode_histogram_value(std::string_view tag, const Histogram& h);

/// Summary.Value {tag, image}.
std::string encode_image_value(std::string_view tag, const EncodedImage& image);

/// Summary.Value {tag, tensor = DT_STRING scalar holding `text`, metadata plugin "text"}.
std::string encode_text_value(std::string_view tag, std::string_view text);

/// Event {wall_time, step, summary {values...}}; `values` are encoded Summary.Values.
std::string encode_summary_event(double wall_time, int64_t step, const std::vector<std::string>& values);

/// Event {wall_time, file_version}, the first record of every event file.
std::string encode_file_version_event(double wall_time, std::string_view version = "brain.Event:2");

/// One scalar as an Event: encode_scalar_event(256.5, 1, "v/1", 1.5f).
std::string encode_scalar_event(double wall_time, int64_t step, std::string_view tag, float value);

// ---------------------------------------------------------------------------------------
// Decoder (for tests and tools): the fields above, unknown fields skipped.

/// One decoded Summary.Value; the optionals say which kind of value it held.
struct Value {
  std::string tag;
  std::string plugin_name;                // metadata.plugin_data.plugin_name ("" when absent)
  std::optional<float> simple_value;
  std::optional<Histogram> histo;
  std::optional<EncodedImage> image;
  std::optional<EncodedAudio> audio;
  std::optional<std::string> text;        // string_val[0] of a DT_STRING tensor
  std::vector<int64_t> tensor_shape;      // dims of the tensor, when there is one
};

/// One decoded Event.
struct Event {
  double wall_time = 0;
  int64_t step = 0;
  std::string file_version;               // "" unless this is the file_version event
  bool has_summary = false;
  std::vector<Value> values;
  std::optional<std::string> graph_def;     // the encoded GraphDef of a graph event
  std::optional<std::string> run_metadata;  // the encoded RunMetadata of a tagged_run_metadata event
  std::string run_metadata_tag;             // its tag
};

namespace detail {

/// The wire-format reader with decode_event's error messages: EventReader(data, "Event").
class EventReader : public proto::ProtoReader {
 public:
  EventReader(std::string_view data, std::string_view what) : proto::ProtoReader(data, what, "decode_event") {}
};

Histogram decode_histogram(std::string_view data);

EncodedImage decode_image(std::string_view data);

EncodedAudio decode_audio(std::string_view data);

void decode_tensor(std::string_view data, Value& v);

Value decode_value(std::string_view data);

}  // namespace detail

/// Decodes one Event message (a record's data); io_error on malformed bytes.
Event decode_event(std::string_view data);

/// Every event of the event file at `path`, CRCs verified; io_error names the file on a corrupt
/// record. A file whose last record was cut short (a full disk, a killed writer) gives the complete
/// events before the tear, as TensorBoard does, and reports the tear: into `torn_tail` when given
/// (empty when the file is whole), else as a warning on std::cerr.
///   std::string tear;
///   auto events = gd::summary::read_events(path, &tear);   // tear: "... record 41 at byte 9120: is truncated ..."
std::vector<Event> read_events(const std::filesystem::path& path, std::string* torn_tail = nullptr);

}  // namespace gradus::summary

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::summary {
GRADUS_INLINE std::string encode_scalar_value(std::string_view tag, float value) {
  std::string v;
  detail::proto::put_bytes(v, 1, tag);
  detail::proto::put_float(v, 2, value);
  return v;
}

GRADUS_INLINE std::string encode_audio_value(std::string_view tag, const EncodedAudio& audio) {
  std::string m;
  detail::proto::put_float(m, 1, audio.sample_rate);
  detail::proto::put_int(m, 2, audio.num_channels);
  detail::proto::put_int(m, 3, audio.length_frames);
  detail::proto::put_bytes(m, 4, audio.encoded);
  detail::proto::put_bytes(m, 5, audio.content_type);
  std::string v;
  detail::proto::put_bytes(v, 1, tag);
  detail::proto::put_bytes(v, 6, m);
  return v;
}

GRADUS_INLINE std::string encode_histogram_value(std::string_view tag, const Histogram& h) {
  std::string p;
  if (h.min != 0) detail::proto::put_double(p, 1, h.min);
  if (h.max != 0) detail::proto::put_double(p, 2, h.max);
  if (h.num != 0) detail::proto::put_double(p, 3, h.num);
  if (h.sum != 0) detail::proto::put_double(p, 4, h.sum);
  if (h.sum_squares != 0) detail::proto::put_double(p, 5, h.sum_squares);
  if (!h.bucket_limit.empty()) detail::proto::put_packed_doubles(p, 6, h.bucket_limit);
  if (!h.bucket.empty()) detail::proto::put_packed_doubles(p, 7, h.bucket);
  std::string v;
  detail::proto::put_bytes(v, 1, tag);
  detail::proto::put_bytes(v, 5, p);
  return v;
}

GRADUS_INLINE std::string encode_image_value(std::string_view tag, const EncodedImage& image) {
  std::string m;
  detail::proto::put_int(m, 1, image.height);
  detail::proto::put_int(m, 2, image.width);
  detail::proto::put_int(m, 3, image.colorspace);
  detail::proto::put_bytes(m, 4, image.encoded);
  std::string v;
  detail::proto::put_bytes(v, 1, tag);
  detail::proto::put_bytes(v, 4, m);
  return v;
}

GRADUS_INLINE std::string encode_text_value(std::string_view tag, std::string_view text) {
  std::string tensor;
  detail::proto::put_int(tensor, 1, 7);        // DT_STRING
  detail::proto::put_bytes(tensor, 2, "");     // TensorShapeProto of a scalar: no dims
  detail::proto::put_bytes(tensor, 8, text);
  std::string plugin;
  detail::proto::put_bytes(plugin, 1, "text");
  std::string metadata;
  detail::proto::put_bytes(metadata, 1, plugin);
  std::string v;
  detail::proto::put_bytes(v, 1, tag);
  detail::proto::put_bytes(v, 8, tensor);
  detail::proto::put_bytes(v, 9, metadata);
  return v;
}

GRADUS_INLINE std::string encode_summary_event(double wall_time, int64_t step, const std::vector<std::string>& values) {
  std::string summary;
  for (const std::string& v : values) detail::proto::put_bytes(summary, 1, v);
  std::string e;
  if (wall_time != 0) detail::proto::put_double(e, 1, wall_time);
  if (step != 0) detail::proto::put_int(e, 2, step);
  detail::proto::put_bytes(e, 5, summary);
  return e;
}

GRADUS_INLINE std::string encode_file_version_event(double wall_time, std::string_view version) {
  std::string e;
  if (wall_time != 0) detail::proto::put_double(e, 1, wall_time);
  detail::proto::put_bytes(e, 3, version);
  return e;
}

GRADUS_INLINE std::string encode_scalar_event(double wall_time, int64_t step, std::string_view tag, float value) {
  return encode_summary_event(wall_time, step, {encode_scalar_value(tag, value)});
}
}  // namespace gradus::summary

namespace gradus::summary::detail {
GRADUS_INLINE Histogram decode_histogram(std::string_view data) {
  Histogram h;
  EventReader r(data, "HistogramProto");
  while (r.next()) {
    switch (r.field()) {
      case 1: h.min = r.double_value(); break;
      case 2: h.max = r.double_value(); break;
      case 3: h.num = r.double_value(); break;
      case 4: h.sum = r.double_value(); break;
      case 5: h.sum_squares = r.double_value(); break;
      case 6: r.append_doubles(h.bucket_limit); break;
      case 7: r.append_doubles(h.bucket); break;
      default: r.skip();
    }
  }
  GRADUS_CHECK(io_error, h.bucket.size() == h.bucket_limit.size(), "decode_event: HistogramProto: ", h.bucket.size(),
               " bucket counts but ", h.bucket_limit.size(), " bucket limits");
  return h;
}

GRADUS_INLINE EncodedImage decode_image(std::string_view data) {
  EncodedImage im;
  EventReader r(data, "Image");
  while (r.next()) {
    switch (r.field()) {
      case 1: im.height = r.int_value(); break;
      case 2: im.width = r.int_value(); break;
      case 3: im.colorspace = int(r.int_value()); break;
      case 4: im.encoded = std::string(r.bytes_value()); break;
      default: r.skip();
    }
  }
  return im;
}

GRADUS_INLINE EncodedAudio decode_audio(std::string_view data) {
  EncodedAudio a;
  EventReader r(data, "Audio");
  while (r.next()) {
    switch (r.field()) {
      case 1: a.sample_rate = r.float_value(); break;
      case 2: a.num_channels = r.int_value(); break;
      case 3: a.length_frames = r.int_value(); break;
      case 4: a.encoded = std::string(r.bytes_value()); break;
      case 5: a.content_type = std::string(r.bytes_value()); break;
      default: r.skip();
    }
  }
  return a;
}

GRADUS_INLINE void decode_tensor(std::string_view data, Value& v) {
  int64_t dtype = 0;
  std::optional<std::string> first;
  EventReader r(data, "TensorProto");
  while (r.next()) {
    switch (r.field()) {
      case 1: dtype = r.int_value(); break;
      case 2: {
        EventReader shape(r.bytes_value(), "TensorShapeProto");
        while (shape.next()) {
          if (shape.field() != 2) {
            shape.skip();
            continue;
          }
          EventReader dim(shape.bytes_value(), "TensorShapeProto.Dim");
          int64_t size = 0;
          while (dim.next()) dim.field() == 1 ? void(size = dim.int_value()) : dim.skip();
          v.tensor_shape.push_back(size);
        }
        break;
      }
      case 8: {
        const std::string_view s = r.bytes_value();
        if (!first) first = std::string(s);
        break;
      }
      default: r.skip();
    }
  }
  if (dtype == 7) v.text = first.value_or("");
}

GRADUS_INLINE Value decode_value(std::string_view data) {
  Value v;
  EventReader r(data, "Summary.Value");
  while (r.next()) {
    switch (r.field()) {
      case 1: v.tag = std::string(r.bytes_value()); break;
      case 2: v.simple_value = r.float_value(); break;
      case 4: v.image = decode_image(r.bytes_value()); break;
      case 5: v.histo = decode_histogram(r.bytes_value()); break;
      case 6: v.audio = decode_audio(r.bytes_value()); break;
      case 8: decode_tensor(r.bytes_value(), v); break;
      case 9: {
        EventReader m(r.bytes_value(), "SummaryMetadata");
        while (m.next()) {
          if (m.field() != 1) {
            m.skip();
            continue;
          }
          EventReader p(m.bytes_value(), "SummaryMetadata.PluginData");
          while (p.next()) p.field() == 1 ? void(v.plugin_name = std::string(p.bytes_value())) : p.skip();
        }
        break;
      }
      default: r.skip();
    }
  }
  return v;
}
}  // namespace gradus::summary::detail

namespace gradus::summary {
GRADUS_INLINE Event decode_event(std::string_view data) {
  Event e;
  detail::EventReader r(data, "Event");
  while (r.next()) {
    switch (r.field()) {
      case 1: e.wall_time = r.double_value(); break;
      case 2: e.step = r.int_value(); break;
      case 3: e.file_version = std::string(r.bytes_value()); break;
      case 5: {
        e.has_summary = true;
        detail::EventReader s(r.bytes_value(), "Summary");
        while (s.next()) s.field() == 1 ? e.values.push_back(detail::decode_value(s.bytes_value())) : s.skip();
        break;
      }
      case 4: e.graph_def = std::string(r.bytes_value()); break;
      case 8: {
        detail::EventReader t(r.bytes_value(), "TaggedRunMetadata");
        e.run_metadata.emplace();
        while (t.next()) {
          switch (t.field()) {
            case 1: e.run_metadata_tag = std::string(t.bytes_value()); break;
            case 2: e.run_metadata = std::string(t.bytes_value()); break;
            default: t.skip();
          }
        }
        break;
      }
      default: r.skip();
    }
  }
  return e;
}

GRADUS_INLINE std::vector<Event> read_events(const std::filesystem::path& path, std::string* torn_tail) {
  std::vector<Event> out;
  io::TFRecordReader reader(path);
  std::string rec, tear;
  for (;;) {
    try {
      if (!reader.next(rec)) break;
    } catch (const io_error& e) {
      if (!reader.truncated()) throw;  // a corrupt record is an error, wherever it is
      tear = e.what();
      break;
    }
    try {
      out.push_back(decode_event(rec));
    } catch (const io_error& e) {
      gradus::detail::throw_error<io_error>(
          {"read_events: '", path.string(), "': record ", out.size(), ": ", e.what()});
    }
  }
  if (torn_tail)
    *torn_tail = tear;
  else if (!tear.empty())
    std::cerr << "gd::summary::read_events: " << tear << "; returning the " << out.size()
              << " complete events before it" << std::endl;
  return out;
}
}  // namespace gradus::summary
#endif  // GRADUS_DEFINE_COMPILED
