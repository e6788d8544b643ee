// gradus/data/tfrecord.hpp — TFRecord files as a Dataset source (tf.data.TFRecordDataset) and
// the map function that parses tf.train.Example records (tf.io.parse_single_example in a map).
//
//   auto files = gd::data::list_files(dir + "/train.tfrecord-*-of-00004");
//   auto ds = gd::data::Dataset::from_strings(files)
//                 .interleave([](const gd::data::Example& f) {
//                   return gd::data::tfrecord({f.string(0)}, gd::io::Compression::gzip); }, 4)
//                 .map(gd::data::parse_example({
//                     {"image", gd::io::FixedLen{.shape = {}, .dtype = gd::io::FeatureDtype::bytes}},
//                     {"label", gd::io::FixedLen{.shape = {}, .dtype = gd::io::FeatureDtype::int64}}}))
//                 .batch(128);
//
// Records are read with gd::io::TFRecordReader: both checksums of every record are checked and a
// corrupt or truncated file is an io_error naming the file, the record and its byte offset.
// Skipping (Dataset::iterator(state), skip) reads and checks the skipped records without making
// elements of them. Needs zlib: link gradus::data (or gradus::io).
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "gradus/core/compiled.hpp"
#include "gradus/core/error.hpp"
#include "gradus/data/dataset.hpp"
#include "gradus/data/example.hpp"
#include "gradus/io/example.hpp"
#include "gradus/io/tfrecord.hpp"

namespace gradus::data {

namespace detail {

class TFRecordSource final : public Source {
 public:
  TFRecordSource(std::vector<std::string> files, io::Compression compression);
  GRADUS_INLINE_DECL std::unique_ptr<Stream> open(uint64_t) const override;

 private:
  std::vector<std::string> files_;
  io::Compression compression_;
};

/// A parsed feature as an Example field: floats and int64s as tensors; bytes of shape [] as a
/// string, other bytes as Strings (row-major).
Value feature_value(io::FeatureTensor t);

}  // namespace detail

/// The records of the TFRecord `files`, one file after the other, each an element of one
/// (unnamed) string field holding the record's bytes. Every file is compressed as `compression`
/// says. A missing file is an io_error now (and when a pass reaches it); a corrupt one an
/// io_error, naming the file, when the pass reaches the bad record.
///   auto ds = gd::data::tfrecord(gd::data::list_files("shards/train-*"), gd::io::Compression::zlib);
Dataset tfrecord(std::vector<std::string> files, io::Compression compression = io::Compression::none);

/// A map function (for Dataset::map and parallel_map) that parses field `field` of an element, a
/// serialized tf.train.Example, with gd::io::parse_single_example against `spec`. The result has
/// one named field per feature of `spec`, in the spec's (name) order: float32 features as
/// Tensor<float>, int64 as Tensor<int64_t> (both of the spec's shape; VarLen: 1-D), bytes of
/// shape [] as a string and other bytes features as Strings (row-major). The other fields of the
/// element are dropped. io_error on malformed bytes, value_error when the record does not fit
/// `spec` (naming the feature).
///   ds.map(gd::data::parse_example({{"label", gd::io::FixedLen{.dtype = gd::io::FeatureDtype::int64}}}))
std::function<Example(Example)> parse_example(io::ParseSpec spec, int field = 0);

}  // namespace gradus::data

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::data::detail {
GRADUS_INLINE TFRecordSource::TFRecordSource(std::vector<std::string> files, io::Compression compression)
    : files_(std::move(files)), compression_(compression) {
  for (const auto& f : files_) check_readable(f, "tfrecord");
}

GRADUS_INLINE std::unique_ptr<Stream> TFRecordSource::open(uint64_t) const {
  struct S final : Stream {
    const std::vector<std::string>& files;
    io::Compression compression;
    size_t f = 0;
    std::optional<io::TFRecordReader> reader;
    std::string record;
    S(const std::vector<std::string>& fs, io::Compression c) : files(fs), compression(c) {}
    // Reads the next record into `record`; false after the last file.
    bool advance() {
      for (;;) {
        if (!reader) {
          if (f >= files.size()) return false;
          reader.emplace(files[f], compression);
        }
        if (reader->next(record)) return true;
        reader.reset();
        ++f;
      }
    }
    std::optional<Example> next() override {
      if (!advance()) return std::nullopt;
      return Example(std::move(record));
    }
    int64_t skip(int64_t n) override {
      int64_t k = 0;
      while (k < n && advance()) ++k;
      return k;
    }
  };
  return std::make_unique<S>(files_, compression_);
}

GRADUS_INLINE Value feature_value(io::FeatureTensor t) {
  if (auto* f = std::get_if<Tensor<float>>(&t)) return Value(std::move(*f));
  if (auto* i = std::get_if<Tensor<int64_t>>(&t)) return Value(std::move(*i));
  auto& b = std::get<io::BytesTensor>(t);
  if (b.shape.rank() == 0 && b.values.size() == 1) return Value(std::move(b.values[0]));
  return Value(Strings(std::move(b.values)));
}
}  // namespace gradus::data::detail
namespace gradus::data {
GRADUS_INLINE Dataset tfrecord(std::vector<std::string> files, io::Compression compression) {
  return Dataset(std::make_shared<detail::TFRecordSource>(std::move(files), compression));
}

GRADUS_INLINE std::function<Example(Example)> parse_example(io::ParseSpec spec, int field) {
  return [spec = std::make_shared<const io::ParseSpec>(std::move(spec)), field](Example e) {
    io::ParsedFeatures p = io::parse_single_example(e.string(field), *spec);
    Example out;
    for (auto& [name, t] : p.values) out.add(name, detail::feature_value(std::move(t)));
    return out;
  };
}
}  // namespace gradus::data
#endif  // GRADUS_DEFINE_COMPILED
