// gradus/data/pipeline.hpp — the pieces every input pipeline is made of: Stream (one pass),
// Source (what a pass is opened from), Iterator and its resumable state, and the Dataset handle
// with its factory functions and transformations (declared here, defined in
// gradus/data/dataset.hpp, which is the header to include; see its comment for the semantics).
#pragma once
#include <glob.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gradus/core/compiled.hpp"
#include "gradus/core/error.hpp"
#include "gradus/core/rng.hpp"
#include "gradus/core/shape.hpp"
#include "gradus/core/tensor.hpp"
#include "gradus/data/example.hpp"
#include "gradus/data/idx.hpp"
#include "gradus/data/queue.hpp"

namespace gradus::data {

/// One pass over a source: `next()` gives the next element, nullopt at the end (and after it).
class Stream {
 public:
  virtual ~Stream() = default;
  virtual std::optional<Example> next() = 0;
  /// Drops up to `n` elements; returns how many there were. Override when it can be done
  /// without producing them.
  GRADUS_INLINE_DECL virtual int64_t skip(int64_t n);
  /// Called from another thread to end the pass early: a stream that may block (on a queue, on
  /// its input) must wake and end. Streams with inputs forward it to them. Must be thread-safe.
  virtual void cancel() {}
};

/// What a Dataset is made of: opening it starts a pass, `key` identifies the pass (the epoch,
/// mixed with the repetition by repeat): a source with randomness seeds it from `key`.
class Source {
 public:
  virtual ~Source() = default;
  virtual std::unique_ptr<Stream> open(uint64_t key) const = 0;
};

/// Where an iterator stands: the epoch it runs and how many elements it has given.
struct IteratorState {
  int64_t epoch = 0;
  int64_t consumed = 0;
  friend bool operator==(const IteratorState&, const IteratorState&) = default;
};

/// One pass over a Dataset. `next()` gives elements until nullopt; it is also an input
/// iterator for range-for (`*it` is the current Example). Destroying it ends the pass (and
/// joins the pipeline's threads).
class Iterator {
 public:
  Iterator(std::shared_ptr<const Source> source, int64_t epoch, int64_t skip = 0);
  Iterator(Iterator&&) noexcept = default;
  Iterator& operator=(Iterator&& o) noexcept;

  /// The next element, or nullopt at the end of the epoch.
  std::optional<Example> next();
  /// (epoch, elements given so far): `Dataset::iterator(state)` resumes right after them.
  IteratorState state() const { return {epoch_, consumed_}; }

  // Range-for protocol.
  Example& operator*() { return *current_; }
  Example* operator->() { return &*current_; }
  Iterator& operator++() {
    current_ = next();
    return *this;
  }
  friend bool operator==(const Iterator& it, std::default_sentinel_t) { return !it.current_; }

 private:
  friend class Dataset;
  std::shared_ptr<const Source> source_;
  std::unique_ptr<Stream> stream_;
  int64_t epoch_ = 0, consumed_ = 0;
  std::optional<Example> current_;
};

/// Options of Dataset::padded_batch.
struct PaddedBatchOptions {
  /// The shape each field is padded to (batch axis excluded), in field order; -1 in a dimension,
  /// or no shape given for a field, pads that dimension to the longest in the batch.
  std::vector<std::vector<int64_t>> padded_shapes = {};
  double padding_value = 0;  ///< written in the padding, converted to each field's type
  bool drop_remainder = false;
};

/// The most worker threads one parallel_map starts: more is a value_error naming the parameter,
/// not a std::system_error from the system's thread limit.
inline constexpr int kMaxPipelineThreads = 1024;
/// The most elements one stage holds ahead: parallel_map's buffer and prefetch's (and
/// prefetch_to's) n.
inline constexpr int64_t kMaxPipelineBuffer = int64_t(1) << 20;

/// A pipeline of Examples: a source and the transformations applied to it. A Dataset is a cheap
/// handle; transformations return a new Dataset and leave this one as it was. One Dataset object
/// counts its own epochs and is for one thread at a time; the iterators it makes are independent.
class Dataset {
 public:
  /// A map function: any callable taking an Example and returning an Example (or a tensor).
  using MapFn = std::function<Example(Example)>;
  using Predicate = std::function<bool(const Example&)>;

  Dataset() = default;
  explicit Dataset(std::shared_ptr<const Source> source);

  // --- sources -------------------------------------------------------------------------------

  /// The rows of `columns`' fields: element i holds row i of every field, with its name. Every
  /// field is a tensor [N, ...] (the element gets [...]) or Strings of N (the element gets a
  /// string), with the same N.
  ///   Dataset::from_tensor_slices({{"image", x}, {"label", y}})   // {image: [28,28], label: []}
  static Dataset from_tensor_slices(Example columns);
  /// Element i is (t[i], ...) for one or more tensors [N, ...] of the same N.
  ///   Dataset::from_tensor_slices(x)  ·  Dataset::from_tensor_slices(x, y)
  template <gradus::Element... T>
    requires(sizeof...(T) >= 1)
  static Dataset from_tensor_slices(const Tensor<T>&... columns) {
    return from_tensor_slices(Example::tuple(columns...));
  }
  /// The same with the tensors in braces, as TensorFlow's from_tensor_slices((x, y)); their
  /// element types may differ (float images, int64 labels). Fields are unnamed, numbered from 0.
  ///   Dataset::from_tensor_slices({images, labels})   // element i: (images[i], labels[i])
  static Dataset from_tensor_slices(std::initializer_list<Value> columns);
  /// One string per element.
  static Dataset from_strings(Strings values) { return from_tensor_slices(Example::tuple(std::move(values))); }
  /// begin, begin + step, ... before end (after end when step < 0), as int64 scalars.
  static Dataset range(int64_t begin, int64_t end, int64_t step = 1);
  static Dataset range(int64_t end) { return range(0, end, 1); }
  /// fn(0), fn(1), ... until it returns nullopt; a new pass calls again from 0. For exact
  /// resume, fn(i) must depend on i alone.
  static Dataset generator(std::function<std::optional<Example>(int64_t index)> fn);
  /// The images of an IDX file [N, rows, cols] as float [rows, cols] in [0, 1] (read once, now).
  static Dataset idx_images(const std::string& path);
  /// The labels of an IDX file [N] as int64 scalars (read once, now).
  static Dataset idx_labels(const std::string& path);
  /// The lines of `files`, one after the other, each a string without its "\n" (or "\r\n").
  /// A missing file is an io_error (now, and when a pass opens it).
  static Dataset text_lines(std::vector<std::string> files);
  /// The elements of several datasets side by side: element i has the fields of every
  /// dataset's element i, in order (names must not clash); ends with the shortest.
  static Dataset zip(std::vector<Dataset> datasets);

  // --- transformations -------------------------------------------------------------------------

  /// fn applied to every element: `ds.map([](gd::data::Example e) { ...; return e; })`.
  template <class F>
  Dataset map(F fn) const {
    return map_impl(MapFn([f = std::move(fn)](Example e) -> Example { return Example(f(std::move(e))); }));
  }
  /// As map, with `threads` worker threads calling fn at once (it must be safe for that);
  /// elements come out in input order. At most `buffer` (default 2 * threads) are in flight.
  /// threads <= kMaxPipelineThreads, buffer <= kMaxPipelineBuffer.
  template <class F>
  Dataset parallel_map(F fn, int threads, int buffer = 0) const {
    return parallel_map_impl(MapFn([f = std::move(fn)](Example e) -> Example { return Example(f(std::move(e))); }),
                             threads, buffer);
  }
  /// The elements for which pred is true.
  Dataset filter(Predicate pred) const;
  /// Shuffles with a buffer of `buffer` elements, seeded from (seed, epoch): a new order every
  /// epoch, the same every run. Each element out is drawn uniformly from the buffer and the next
  /// input takes its place. When the whole pass fits in the buffer (buffer >= the dataset's
  /// size n), epoch e is given in epoch_permutation(n, seed, e) order (data/order.hpp), uniform
  /// over all orders: the order in which gd::train::fit visits in-memory Data with that seed.
  Dataset shuffle(int64_t buffer, uint64_t seed) const;
  /// Stacks `n` consecutive elements field by field on a new leading axis: tensors [n, ...]
  /// (their shapes must be equal: use padded_batch otherwise), strings into Strings. The last
  /// batch holds the rest, or is dropped with drop_remainder.
  Dataset batch(int64_t n, bool drop_remainder = false) const;
  /// As batch, padding every tensor field up to `padded_shapes` (or the longest in the batch).
  Dataset padded_batch(int64_t n, PaddedBatchOptions options = {}) const;
  /// The dataset `count` times (each repetition a new key: shuffle reshuffles); forever when < 0.
  Dataset repeat(int64_t count = -1) const;
  /// All but the first n elements.
  Dataset skip(int64_t n) const;
  /// The first n elements (all when n < 0).
  Dataset take(int64_t n) const;
  /// Elements `index`, index + num_shards, ... (one worker's part of the data; data::Shard).
  Dataset shard(int64_t num_shards, int64_t index) const;
  /// Produces up to `n` (<= kMaxPipelineBuffer) elements ahead on a background thread.
  Dataset prefetch(int64_t n = 1) const;
  /// As prefetch, delivering every tensor field on `device`: the background thread also starts
  /// each element's copy there (on a GPU through pinned staging buffers and a copy stream, while
  /// the GPU computes on the elements before it); the element handed out is ready to use. String
  /// fields stay on the host.
  ///   auto train = gd::data::fashion_mnist_train(dir).batch(128).prefetch_to(gd::cuda(0), 2);
  Dataset prefetch_to(Device device, int64_t n = 1) const;
  /// fn maps each element (a file name, say) to a dataset; `cycle_length` of them are read
  /// round-robin, `block_length` elements from each in turn, a finished one replaced by the
  /// next input's (tf.data.Dataset.interleave).
  Dataset interleave(std::function<Dataset(const Example&)> fn, int64_t cycle_length, int64_t block_length = 1) const;
  /// Keeps the elements of the first complete pass in memory; later passes replay them (a pass
  /// that stops early caches nothing).
  Dataset cache() const;
  /// As cache(), in the file `path`: written by the first complete pass (to a temporary file
  /// renamed at the end), read by later passes and later runs. A corrupt file is an io_error.
  Dataset cache(const std::string& path) const;

  // --- iteration -------------------------------------------------------------------------------

  /// Starts the next epoch (0, 1, 2, ...).
  Iterator iterator() {
    check_source();
    return Iterator(source_, next_epoch_++);
  }
  /// Resumes at `state`: epoch state.epoch with its first state.consumed elements skipped;
  /// the epoch after it comes next.
  Iterator iterator(const IteratorState& state);
  /// Range-for: each loop is the next epoch.
  Iterator begin() {
    Iterator it = iterator();
    ++it;
    return it;
  }
  std::default_sentinel_t end() const { return {}; }
  /// The next epoch's elements in a vector (at most `limit` when limit >= 0).
  std::vector<Example> collect(int64_t limit = -1);
  /// The number of the epoch the next pass gets.
  int64_t epoch() const { return next_epoch_; }
  void set_epoch(int64_t e);
  const std::shared_ptr<const Source>& source() const { return source_; }

 private:
  Dataset map_impl(MapFn fn) const;
  Dataset parallel_map_impl(MapFn fn, int threads, int buffer) const;
  void check_source() const;
  const Source& src() const {
    check_source();
    return *source_;
  }

  std::shared_ptr<const Source> source_;
  int64_t next_epoch_ = 0;
};

/// The names matching a glob pattern (`*`, `?`, `[...]`), sorted bytewise — the shards
/// "train.tfrecord-00000-of-00004" ... in order. io_error when nothing matches.
///   auto files = gd::data::list_files("data/train.tfrecord-*-of-00004");
std::vector<std::string> list_files(const std::string& pattern);

// ================================================================================================
// Implementation: one Source and one Stream per source and transformation.
namespace detail {

inline uint64_t mix_key(uint64_t key, uint64_t salt) {
  uint64_t z = key ^ (salt * 0xD1B54A32D192ED03ull + 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// A stream with one input, to which cancel() is forwarded.
class UnaryStream : public Stream {
 public:
  explicit UnaryStream(std::unique_ptr<Stream> in) : in_(std::move(in)) {}
  void cancel() override { in_->cancel(); }

 protected:
  std::unique_ptr<Stream> in_;
};

/// A source with one input dataset.
class UnarySource : public Source {
 public:
  explicit UnarySource(std::shared_ptr<const Source> in) : in_(std::move(in)) {}

 protected:
  std::shared_ptr<const Source> in_;
};

}  // namespace detail
}  // namespace gradus::data

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::data {
GRADUS_INLINE int64_t Stream::skip(int64_t n) {
  int64_t k = 0;
  while (k < n && next()) ++k;
  return k;
}

GRADUS_INLINE Iterator::Iterator(std::shared_ptr<const Source> source, int64_t epoch, int64_t skip)
    : source_(std::move(source)), epoch_(epoch) {
  stream_ = source_->open(uint64_t(epoch));
  if (skip > 0) consumed_ = stream_->skip(skip);
}

GRADUS_INLINE Iterator& Iterator::operator=(Iterator&& o) noexcept {
  if (this != &o) {
    stream_.reset();  // before the source it may read goes
    current_.reset();
    source_ = std::move(o.source_);
    stream_ = std::move(o.stream_);
    epoch_ = o.epoch_;
    consumed_ = o.consumed_;
    current_ = std::move(o.current_);
  }
  return *this;
}

GRADUS_INLINE std::optional<Example> Iterator::next() {
  if (!stream_) return std::nullopt;
  std::optional<Example> e = stream_->next();
  if (e)
    ++consumed_;
  else
    stream_.reset();  // the end: threads are joined now, not when the iterator goes
  return e;
}

GRADUS_INLINE Dataset::Dataset(std::shared_ptr<const Source> source) : source_(std::move(source)) {
  GRADUS_CHECK(value_error, source_ != nullptr, "Dataset: null source");
}

GRADUS_INLINE Dataset Dataset::from_tensor_slices(std::initializer_list<Value> columns) {
  Example e;
  for (const Value& v : columns) e.add("", v);
  return from_tensor_slices(std::move(e));
}

GRADUS_INLINE Iterator Dataset::iterator(const IteratorState& state) {
  check_source();
  GRADUS_CHECK(value_error, state.epoch >= 0 && state.consumed >= 0, "Dataset::iterator: bad state (epoch ",
               state.epoch, ", consumed ", state.consumed, ")");
  next_epoch_ = state.epoch + 1;
  return Iterator(source_, state.epoch, state.consumed);
}

GRADUS_INLINE std::vector<Example> Dataset::collect(int64_t limit) {
  std::vector<Example> out;
  Iterator it = iterator();
  while (limit < 0 || int64_t(out.size()) < limit) {
    auto e = it.next();
    if (!e) break;
    out.push_back(std::move(*e));
  }
  return out;
}

GRADUS_INLINE void Dataset::set_epoch(int64_t e) {
  GRADUS_CHECK(value_error, e >= 0, "Dataset::set_epoch: epoch must be >= 0, got ", e);
  next_epoch_ = e;
}

GRADUS_INLINE void Dataset::check_source() const {
  GRADUS_CHECK(value_error, source_ != nullptr, "Dataset: iterating a default-constructed (empty) Dataset");
}

GRADUS_INLINE std::vector<std::string> list_files(const std::string& pattern) {
  glob_t g{};
  const int rc = ::glob(pattern.c_str(), 0, nullptr, &g);
  std::vector<std::string> out;
  if (rc == 0)
    for (size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
  ::globfree(&g);
  GRADUS_CHECK(io_error, rc != GLOB_NOSPACE, "list_files: out of memory while matching '", pattern, "'");
  GRADUS_CHECK(io_error, rc != GLOB_ABORTED, "list_files: cannot read a directory while matching '", pattern, "'");
  GRADUS_CHECK(io_error, rc == 0 && !out.empty(), "list_files: no file matches '", pattern, "'");
  std::sort(out.begin(), out.end());
  return out;
}
}  // namespace gradus::data
#endif  // GRADUS_DEFINE_COMPILED
