// gradus/summary/writer.hpp — FileWriter: TensorBoard event files written by a background thread.
//
// A FileWriter owns one file `<logdir>/events.out.tfevents.<seconds>.<host><suffix>`
// (<seconds> since the epoch, zero-padded to 10 digits as TF does; <host> from gethostname;
// should that name already exist, ".1", ".2", ... is appended rather than overwrite it).
// The file is a TFRecord file (tfrecord.hpp) of Event messages (event.hpp), starting with
// the file_version event "brain.Event:2".
//
// Summary calls encode their event on the calling thread (so bad input throws right there)
// and queue it. A background thread writes queued events out when `max_queue` are pending,
// when `flush_secs` have passed since the last flush, on flush() and on close(); written
// batches are fflush'ed, and the periodic flush, flush() and close() also fsync the file.
// A caller waits only when the thread falls 4 * max_queue events behind. Every call may come
// from any thread. A write error on the background thread is rethrown (as io_error) by the
// next call, by flush() and by close(); the destructor closes and prints an error that was
// never reported to stderr instead of throwing. Events are in the file in the order their
// calls returned.
//
// Summary kinds (tags as TensorFlow 1 writes them):
//  - scalar: simple_value (a float).
//  - histogram: TF's default exponential buckets (histogram.hpp); NaN/inf values are rejected.
//  - image: PNG; with max_outputs == 1 the tag is "<tag>/image", else "<tag>/image/<i>" for the
//    first min(N, max_outputs) images (TF1's rule: it depends on max_outputs, not on N).
//  - labelled_images: like image, each image copied to RGB (alpha kept), magnified by nearest
//    neighbour by f = clamp(ceil(96 / min(H, W)), 1, 4) (28x28 -> 112x112, 32x32 -> 96x96),
//    and its label drawn in white on a black box at the top-left corner, in the 5x7 font
//    magnified max(1, min(H*f, W*f) / 128) times.
//  - audio: 16-bit PCM WAV (wav.hpp), tags "<tag>/audio/<i>" ("<tag>/audio" if max_outputs == 1)
//    as for images.
//  - text: the text plugin's DT_STRING scalar tensor, metadata plugin_name "text".
// And the Graphs tab's two events (graph.hpp): graph() (Event.graph_def) and run_metadata()
// (Event.tagged_run_metadata: per-node compute time and memory of one step).
#pragma once
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

#include "gradus/core/compiled.hpp"
#include "gradus/core/error.hpp"
#include "gradus/core/tensor.hpp"
#include "gradus/image/draw.hpp"
#include "gradus/image/png.hpp"
#include "gradus/summary/event.hpp"
#include "gradus/summary/graph.hpp"
#include "gradus/summary/histogram.hpp"
#include "gradus/io/tfrecord.hpp"
#include "gradus/summary/wav.hpp"

namespace gradus::summary {

/// Options of a FileWriter: `{.max_queue = 100, .flush_secs = 30}`.
struct WriterOptions {
  int max_queue = 10;           // pending events that make the writer write and flush (>= 1)
  double flush_secs = 120;      // longest time between flushes to disk, in seconds (> 0)
  std::string filename_suffix = {};  // appended to the event file's name
};

namespace detail {

/// Seconds since the epoch, with the clock's sub-second precision.
double wall_time_now();

std::string host_name();

}  // namespace detail

/// Writes TensorBoard summaries to a new event file in `logdir` (see the file comment).
///   gd::summary::FileWriter w("runs/mnist", {.flush_secs = 30});
///   w.scalar("loss", 0.25, step);  w.histogram("dense/kernel", kernel.value(), step);
class FileWriter {
 public:
  /// Creates logdir and events.out.tfevents.<seconds>.<host><suffix>; writes the file_version event.
  explicit FileWriter(std::filesystem::path logdir, WriterOptions options = {});

  FileWriter(const FileWriter&) = delete;
  FileWriter& operator=(const FileWriter&) = delete;

  /// Flushes everything and closes; an error nobody saw yet is printed to stderr (never thrown).
  ~FileWriter();

  /// A scalar (stored as a float simple_value) at `step`.
  void scalar(std::string_view tag, double value, int64_t step);

  /// The histogram of every element of `values` (TF's default buckets); value_error on NaN/inf.
  template <Element T>
  void histogram(std::string_view tag, const Tensor<T>& values, int64_t step) {
    check_tag(tag, "histogram");
    queue_values(step, {encode_histogram_value(tag, make_histogram(values.data(), values.size(), tag))}, "histogram");
  }

  /// The first min(N, max_outputs) images of `images` ([N, H, W, C] or [H, W, C], C in {1, 3, 4},
  /// values in [0, 1], clamped) as PNGs tagged "<tag>/image/<i>" ("<tag>/image" if max_outputs == 1),
  /// in one event; nothing is written for an empty batch.
  void image(std::string_view tag, const Tensor<float>& images, int64_t step, int max_outputs = 3);

  /// Like image(), each image magnified and labelled with labels[i] (one label per image of the
  /// batch; see the file comment for the scaling and the drawing).
  void labelled_images(std::string_view tag, const Tensor<float>& images, const std::vector<std::string>& labels,
                       int64_t step, int max_outputs = 3);

  /// The first min(N, max_outputs) clips of `audio` ([N, frames] or [N, frames, channels], values in
  /// [-1, 1], clamped) at `sample_rate` Hz as WAVs tagged "<tag>/audio/<i>" ("<tag>/audio" if
  /// max_outputs == 1), in one event (tf.summary.audio); nothing is written for an empty batch.
  ///   w.audio("voice", clips /*[2, 16000]*/, 16000, step);
  /// shape_error for another rank, value_error for NaN/inf samples or sample_rate <= 0.
  void audio(std::string_view tag, const Tensor<float>& audio, double sample_rate, int64_t step, int max_outputs = 3);

  /// `text` (UTF-8, shown as Markdown by TensorBoard's text plugin) at `step`.
  void text(std::string_view tag, std::string_view text, int64_t step);

  /// The graph TensorBoard's Graphs tab draws (Event{wall_time = now, graph_def}); a later call
  /// replaces it there.
  ///   w.graph(gd::profile::graph_def(profiler.events(), profiler.parameters()));
  void graph(const GraphDef& g);

  /// Per-node compute time and memory of one step, joined by TensorBoard to the graph's nodes by
  /// name; the Graphs tab offers each `tag` as a run to colour the graph by
  /// (Event{wall_time = now, step, tagged_run_metadata{tag, RunMetadata{step_stats}}}).
  ///   w.run_metadata("step_100", 100, gd::profile::step_stats(profiler.events()));
  void run_metadata(std::string_view tag, int64_t step, const StepStats& stats);

  /// Queues Event{wall_time = now, step, summary{values}}; `values` are encoded Summary.Values
  /// (event.hpp), for summary kinds this class has no method for.
  void add_values(int64_t step, const std::vector<std::string>& values) { queue_values(step, values, "add_values"); }

  /// Queues an encoded Event message (not framed) as it is.
  void add_event(std::string_view event);

  /// Blocks until everything queued before the call is written, fflush'ed and fsync'ed;
  /// io_error if a write failed. A no-op after close().
  void flush();

  /// Writes everything queued, fsyncs and closes the file; later summary calls throw
  /// value_error. Idempotent; io_error if a write failed and that was not reported yet.
  void close();

  /// The event file's path.
  const std::filesystem::path& path() const { return path_; }
  /// The log directory given at construction.
  const std::filesystem::path& logdir() const { return logdir_; }

 private:
  struct Batch {
    int64_t n, h, w, c, count;
    Tensor<float> at(const Tensor<float>& images, int64_t i) const {
      return Tensor<float>::wrap(const_cast<float*>(images.data()) + i * h * w * c, {h, w, c});
    }
  };

  static void check_tag(std::string_view tag, const char* who);

  static Batch batch(const Tensor<float>& images, int max_outputs, const char* who);

  static std::string image_value(std::string_view tag, int64_t i, int max_outputs, const Tensor<float>& im);

  void queue_values(int64_t step, const std::vector<std::string>& values, const char* who);

  void throw_if_failed(const char* who);

  void enqueue(std::string record, const char* who);

  /// Writes `batch`, fflushes, and fsyncs when `sync`; returns an error message or "".
  std::string write_batch(const std::vector<std::string>& batch, bool sync);

  void run();

  std::filesystem::path logdir_, path_;
  WriterOptions options_;
  std::FILE* file_ = nullptr;

  std::mutex close_mu_;                // serialises close()
  std::mutex mu_;                      // guards everything below
  std::condition_variable work_cv_;    // wakes the writer thread
  std::condition_variable done_cv_;    // a batch was written (flush waits)
  std::condition_variable space_cv_;   // the queue has room again
  std::deque<std::string> pending_;    // framed records not yet handed to the writer thread
  uint64_t queued_ = 1, written_ = 1;  // counts of events queued / written (the file_version one included)
  uint64_t synced_ = 0, sync_target_ = 0;
  bool closing_ = false;
  std::string error_;                  // the first write error, "" if none
  bool error_reported_ = false;
  std::thread worker_;
};

}  // namespace gradus::summary

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::summary {
namespace detail {

GRADUS_INLINE double wall_time_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

GRADUS_INLINE std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "localhost";
  std::string h(buf);
  std::replace(h.begin(), h.end(), '/', '_');
  return h;
}

}  // namespace detail

GRADUS_INLINE FileWriter::FileWriter(std::filesystem::path logdir, WriterOptions options)
    : logdir_(std::move(logdir)), options_(std::move(options)) {
  GRADUS_CHECK(value_error, options_.max_queue >= 1, "FileWriter: max_queue must be >= 1, got ", options_.max_queue);
  GRADUS_CHECK(value_error, options_.flush_secs > 0, "FileWriter: flush_secs must be > 0, got ",
               options_.flush_secs);
  std::error_code ec;
  std::filesystem::create_directories(logdir_, ec);
  GRADUS_CHECK(io_error, !ec, "FileWriter: cannot create log directory '", logdir_.string(), "': ", ec.message());
  const double now = detail::wall_time_now();
  char base[64];
  std::snprintf(base, sizeof base, "events.out.tfevents.%010lld.", static_cast<long long>(now));
  const std::string name = base + detail::host_name() + options_.filename_suffix;
  for (int n = 0; !file_; ++n) {
    path_ = logdir_ / (n == 0 ? name : name + "." + std::to_string(n));
    errno = 0;
    file_ = std::fopen(path_.c_str(), "wbx");
    GRADUS_CHECK(io_error, file_ || (errno == EEXIST && n < 1000), "FileWriter: cannot create '", path_.string(),
                 "': ", std::strerror(errno));
  }
  const std::string first = io::encode_tfrecord(encode_file_version_event(now));
  if (std::fwrite(first.data(), 1, first.size(), file_) != first.size() || std::fflush(file_) != 0) {
    const int err = errno;
    std::fclose(file_);
    gradus::detail::throw_error<io_error>({"FileWriter: cannot write '", path_.string(), "': ", std::strerror(err)});
  }
  try {
    worker_ = std::thread([this] { run(); });
  } catch (...) {
    std::fclose(file_);
    throw;
  }
}

GRADUS_INLINE FileWriter::~FileWriter() {
  try {
    close();
  } catch (const std::exception& e) {
    std::cerr << "gradus::summary::FileWriter: " << e.what() << '\n';
  }
}

GRADUS_INLINE void FileWriter::scalar(std::string_view tag, double value, int64_t step) {
  check_tag(tag, "scalar");
  queue_values(step, {encode_scalar_value(tag, float(value))}, "scalar");
}

GRADUS_INLINE void FileWriter::image(std::string_view tag, const Tensor<float>& images, int64_t step, int max_outputs) {
  check_tag(tag, "image");
  const Batch b = batch(images, max_outputs, "image");
  std::vector<std::string> values;
  for (int64_t i = 0; i < b.count; ++i) values.push_back(image_value(tag, i, max_outputs, b.at(images, i)));
  if (!values.empty()) queue_values(step, values, "image");
}

GRADUS_INLINE void FileWriter::labelled_images(std::string_view tag, const Tensor<float>& images,
                                               const std::vector<std::string>& labels, int64_t step, int max_outputs) {
  check_tag(tag, "labelled_images");
  const Batch b = batch(images, max_outputs, "labelled_images");
  GRADUS_CHECK(value_error, int64_t(labels.size()) == b.n, "FileWriter::labelled_images: '", tag, "': ",
               labels.size(), " labels for ", b.n, " images");
  const int64_t f = std::clamp<int64_t>((96 + std::min(b.h, b.w) - 1) / std::min(b.h, b.w), 1, 4);
  const int font = int(std::max<int64_t>(1, std::min(b.h, b.w) * f / 128));
  std::vector<std::string> values;
  for (int64_t i = 0; i < b.count; ++i) {
    Tensor<float> im = image::upscale_nearest(image::to_rgb(b.at(images, i)), int(f));
    const auto [tw, th] = image::measure_text(labels[size_t(i)], font);
    if (tw > 0) {
      image::fill_rect(im, 0, 0, tw + 2 * font + 2, th + 2 * font + 2, {0, 0, 0});
      image::draw_text(im, labels[size_t(i)], font + 1, font + 1, {1, 1, 1}, font);
    }
    values.push_back(image_value(tag, i, max_outputs, im));
  }
  if (!values.empty()) queue_values(step, values, "labelled_images");
}

GRADUS_INLINE void FileWriter::audio(std::string_view tag, const Tensor<float>& audio, double sample_rate, int64_t step,
                                     int max_outputs) {
  check_tag(tag, "audio");
  const Shape& s = audio.shape();
  GRADUS_CHECK(shape_error, s.rank() == 2 || s.rank() == 3,
               "FileWriter::audio: expected audio [N, frames] or [N, frames, channels], got shape ", s);
  GRADUS_CHECK(value_error, std::isfinite(sample_rate) && sample_rate > 0,
               "FileWriter::audio: sample_rate must be > 0 and finite, got ", sample_rate);
  GRADUS_CHECK(value_error, max_outputs >= 1, "FileWriter::audio: max_outputs must be >= 1, got ", max_outputs);
  const int64_t frames = s[1], channels = s.rank() == 3 ? s[2] : 1;
  const int64_t count = std::min<int64_t>(s[0], max_outputs);
  std::vector<std::string> values;
  for (int64_t i = 0; i < count; ++i) {
    const Tensor<float> clip =
        Tensor<float>::wrap(const_cast<float*>(audio.data()) + i * frames * channels, {frames, channels});
    const std::string name =
        max_outputs > 1 ? gradus::detail::str(tag, "/audio/", i) : gradus::detail::str(tag, "/audio");
    values.push_back(encode_audio_value(
        name, {float(sample_rate), channels, frames, encode_wav(clip, sample_rate), "audio/wav"}));
  }
  if (!values.empty()) queue_values(step, values, "audio");
}

GRADUS_INLINE void FileWriter::text(std::string_view tag, std::string_view text, int64_t step) {
  check_tag(tag, "text");
  queue_values(step, {encode_text_value(tag, text)}, "text");
}

GRADUS_INLINE void FileWriter::graph(const GraphDef& g) {
  enqueue(io::encode_tfrecord(encode_graph_event(detail::wall_time_now(), g)), "graph");
}

GRADUS_INLINE void FileWriter::run_metadata(std::string_view tag, int64_t step, const StepStats& stats) {
  check_tag(tag, "run_metadata");
  enqueue(io::encode_tfrecord(encode_run_metadata_event(detail::wall_time_now(), step, tag, stats)), "run_metadata");
}

GRADUS_INLINE void FileWriter::add_event(std::string_view event) { enqueue(io::encode_tfrecord(event), "add_event"); }

GRADUS_INLINE void FileWriter::flush() {
  std::unique_lock lk(mu_);
  throw_if_failed("flush");
  if (closing_) return;
  const uint64_t target = queued_;
  if (synced_ >= target) return;
  sync_target_ = std::max(sync_target_, target);
  work_cv_.notify_one();
  done_cv_.wait(lk, [&] { return synced_ >= target || !error_.empty(); });
  throw_if_failed("flush");
}

GRADUS_INLINE void FileWriter::close() {
  std::lock_guard close_lock(close_mu_);
  {
    std::lock_guard lk(mu_);
    if (closing_) return;
    closing_ = true;
  }
  work_cv_.notify_one();
  space_cv_.notify_all();
  worker_.join();
  std::unique_lock lk(mu_);
  if (std::fclose(file_) != 0 && error_.empty())
    error_ = gradus::detail::str("cannot close '", path_.string(), "': ", std::strerror(errno));
  file_ = nullptr;
  if (!error_.empty() && !error_reported_) {
    error_reported_ = true;
    throw io_error("FileWriter::close: " + error_);
  }
}

GRADUS_INLINE void FileWriter::check_tag(std::string_view tag, const char* who) {
  GRADUS_CHECK(value_error, !tag.empty(), "FileWriter::", who, ": the tag is empty");
}

GRADUS_INLINE FileWriter::Batch FileWriter::batch(const Tensor<float>& images, int max_outputs, const char* who) {
  const Shape& s = images.shape();
  const bool single = s.rank() == 3;
  GRADUS_CHECK(shape_error, (single || s.rank() == 4) && (s[s.rank() - 1] == 1 || s[s.rank() - 1] == 3 ||
                                                          s[s.rank() - 1] == 4),
               "FileWriter::", who, ": expected images [N, H, W, C] or [H, W, C] with C in {1, 3, 4}, got shape ",
               s);
  GRADUS_CHECK(value_error, max_outputs >= 1, "FileWriter::", who, ": max_outputs must be >= 1, got ", max_outputs);
  Batch b{single ? 1 : s[0], s[s.rank() - 3], s[s.rank() - 2], s[s.rank() - 1], 0};
  GRADUS_CHECK(value_error, b.h >= 1 && b.w >= 1, "FileWriter::", who, ": empty images, shape ", s);
  b.count = std::min<int64_t>(b.n, max_outputs);
  return b;
}

GRADUS_INLINE std::string FileWriter::image_value(std::string_view tag, int64_t i, int max_outputs,
                                                  const Tensor<float>& im) {
  const std::string name =
      max_outputs > 1 ? gradus::detail::str(tag, "/image/", i) : gradus::detail::str(tag, "/image");
  return encode_image_value(name, {im.shape()[0], im.shape()[1], int(im.shape()[2]), image::encode_png(im)});
}

GRADUS_INLINE void FileWriter::queue_values(int64_t step, const std::vector<std::string>& values, const char* who) {
  enqueue(io::encode_tfrecord(encode_summary_event(detail::wall_time_now(), step, values)), who);
}

GRADUS_INLINE void FileWriter::throw_if_failed(const char* who) {
  if (error_.empty()) return;
  error_reported_ = true;
  gradus::detail::throw_error<io_error>({"FileWriter::", who, ": ", error_});
}

GRADUS_INLINE void FileWriter::enqueue(std::string record, const char* who) {
  std::unique_lock lk(mu_);
  throw_if_failed(who);
  GRADUS_CHECK(value_error, !closing_, "FileWriter::", who, ": the writer of '", path_.string(), "' is closed");
  const size_t cap = 4 * size_t(options_.max_queue);
  space_cv_.wait(lk, [&] { return pending_.size() < cap || closing_ || !error_.empty(); });
  throw_if_failed(who);
  GRADUS_CHECK(value_error, !closing_, "FileWriter::", who, ": the writer of '", path_.string(), "' is closed");
  pending_.push_back(std::move(record));
  ++queued_;
  if (pending_.size() >= size_t(options_.max_queue)) work_cv_.notify_one();
}

GRADUS_INLINE std::string FileWriter::write_batch(const std::vector<std::string>& batch, bool sync) {
  for (const std::string& rec : batch)
    if (std::fwrite(rec.data(), 1, rec.size(), file_) != rec.size())
      return gradus::detail::str("cannot write '", path_.string(), "': ", std::strerror(errno));
  if (std::fflush(file_) != 0)
    return gradus::detail::str("cannot write '", path_.string(), "': ", std::strerror(errno));
  if (sync && ::fsync(fileno(file_)) != 0)
    return gradus::detail::str("cannot fsync '", path_.string(), "': ", std::strerror(errno));
  return {};
}

GRADUS_INLINE void FileWriter::run() {
  using clock = std::chrono::steady_clock;
  const auto period = std::chrono::duration_cast<clock::duration>(
      std::chrono::duration<double>(std::min(options_.flush_secs, 1e8)));
  auto next_sync = clock::now() + period;
  std::unique_lock lk(mu_);
  for (;;) {
    work_cv_.wait_until(lk, next_sync, [&] {
      return closing_ || sync_target_ > synced_ || pending_.size() >= size_t(options_.max_queue);
    });
    const bool timer = clock::now() >= next_sync;
    const bool finishing = closing_;
    const bool sync = finishing || timer || sync_target_ > synced_;
    std::vector<std::string> batch(std::make_move_iterator(pending_.begin()),
                                   std::make_move_iterator(pending_.end()));
    pending_.clear();
    space_cv_.notify_all();
    const uint64_t upto = written_ + batch.size();
    const bool work = !batch.empty() || (sync && upto > synced_);
    std::string err;
    if (work && error_.empty()) {
      lk.unlock();
      err = write_batch(batch, sync);
      lk.lock();
    }
    if (!err.empty() && error_.empty()) error_ = err;
    written_ = upto;
    if (sync) synced_ = written_;
    if (sync || timer) next_sync = clock::now() + period;
    done_cv_.notify_all();
    space_cv_.notify_all();
    if (finishing) return;
  }
}

}  // namespace gradus::summary
#endif  // GRADUS_DEFINE_COMPILED
