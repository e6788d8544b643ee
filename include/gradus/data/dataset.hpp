// gradus/data/dataset.hpp — input pipelines, the C++ form of tf.data: a Dataset is a recipe of
// sources and transformations over Examples (data/example.hpp); iterating it runs the recipe
// once, as one epoch.
//
//   auto ds = gd::data::Dataset::from_tensor_slices(x, y)      // examples (x[i], y[i])
//                 .shuffle(10000, /*seed=*/1)                   // reshuffled every epoch
//                 .parallel_map(augment, 2)                     // order kept
//                 .batch(128)                                   // [128, ...] tensors
//                 .prefetch(2);                                 // a background thread
//   for (int epoch = 0; epoch < 10; ++epoch)
//     for (const gd::data::Example& b : ds) { auto [xb, yb] = b.as<float, int64_t>(); ... }
//
// Epochs and determinism. Every pass over a Dataset (a range-for, `iterator()`) is an epoch
// with a number: 0, 1, 2, ... in the order the passes start (`epoch()`, `set_epoch()`). The
// number is the pass's *key*; `repeat` gives each repetition its own key and `interleave` each
// opened child, mixed from the key above. Random transformations (shuffle) seed themselves from
// (their seed, the key), so epoch e's order is a pure function of the seeds and e: it changes
// from epoch to epoch and is the same in every run. parallel_map keeps the input order, so a
// pipeline whose functions are deterministic yields the same stream whatever the thread timing.
//
// Resuming. `Iterator::state()` is (epoch, elements consumed). `Dataset::iterator(state)` opens
// that epoch again and skips that many elements, re-creating the exact rest of the stream —
// guaranteed for deterministic pipelines only (sources that read the same data, functions
// without hidden state; a generator must give the same element for the same index). Sources,
// map and batch skip without producing the skipped elements (map does not call its function on
// them); other transformations produce and drop them.
//
// Training loops. A batch of (x, y) is an Example of two fields, `auto [x, y] = b.as<float,
// int64_t>()` (or named: `b.tensor<float>("image")`). A loop that checkpoints stores
// `it.state()` (two int64: epoch and batches consumed) beside the model and, after a restart,
// continues with `ds.iterator(state)`; the epochs after it follow as usual.
//
// Threads. prefetch and parallel_map run background threads; an exception thrown there (in a
// map function, a source, a reader) is re-thrown to the consumer by `next()` with its type and
// message. Destroying an iterator half-way (a `break` out of the loop) cancels its queues and
// joins its threads at once.
//
// Writing a source. A source is one class deriving from gd::data::Source whose `open(key)`
// returns a gd::data::Stream (`next()` gives the next Example or nullopt at the end):
//   struct Countdown : gd::data::Source {
//     std::unique_ptr<gd::data::Stream> open(uint64_t) const override {
//       struct S : gd::data::Stream {
//         int64_t i = 3;
//         std::optional<gd::data::Example> next() override {
//           if (i == 0) return std::nullopt;
//           return gd::data::Example(gd::Tensor<int64_t>::scalar(i--)); }
//       };
//       return std::make_unique<S>();
//     }
//   };
//   gd::data::Dataset ds(std::make_shared<Countdown>());
// A stream may keep a reference to its source (the pipeline keeps sources alive while any of
// their streams is open); `open` is const and may run on several threads at once.
// Needs zlib (the IDX sources) and threads: link gradus::data.
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
  virtual int64_t skip(int64_t n) {
    int64_t k = 0;
    while (k < n && next()) ++k;
    return k;
  }
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
  Iterator(std::shared_ptr<const Source> source, int64_t epoch, int64_t skip = 0)
      : source_(std::move(source)), epoch_(epoch) {
    stream_ = source_->open(uint64_t(epoch));
    if (skip > 0) consumed_ = stream_->skip(skip);
  }
  Iterator(Iterator&&) noexcept = default;
  Iterator& operator=(Iterator&& o) noexcept {
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

  /// The next element, or nullopt at the end of the epoch.
  std::optional<Example> next() {
    if (!stream_) return std::nullopt;
    std::optional<Example> e = stream_->next();
    if (e)
      ++consumed_;
    else
      stream_.reset();  // the end: threads are joined now, not when the iterator goes
    return e;
  }
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

/// A pipeline of Examples: a source and the transformations applied to it. A Dataset is a cheap
/// handle; transformations return a new Dataset and leave this one as it was. One Dataset object
/// counts its own epochs and is for one thread at a time; the iterators it makes are independent.
class Dataset {
 public:
  /// A map function: any callable taking an Example and returning an Example (or a tensor).
  using MapFn = std::function<Example(Example)>;
  using Predicate = std::function<bool(const Example&)>;

  Dataset() = default;
  explicit Dataset(std::shared_ptr<const Source> source) : source_(std::move(source)) {
    GRADUS_CHECK(value_error, source_ != nullptr, "Dataset: null source");
  }

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
  static Dataset from_tensor_slices(std::initializer_list<Value> columns) {
    Example e;
    for (const Value& v : columns) e.add("", v);
    return from_tensor_slices(std::move(e));
  }
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
  template <class F>
  Dataset parallel_map(F fn, int threads, int buffer = 0) const {
    return parallel_map_impl(MapFn([f = std::move(fn)](Example e) -> Example { return Example(f(std::move(e))); }),
                             threads, buffer);
  }
  /// The elements for which pred is true.
  Dataset filter(Predicate pred) const;
  /// Shuffles with a buffer of `buffer` elements (uniform over all orders when buffer >= the
  /// dataset's size), seeded from (seed, epoch): a new order every epoch, the same every run.
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
  /// Elements `index`, index + num_shards, ... (one worker's part of the data).
  Dataset shard(int64_t num_shards, int64_t index) const;
  /// Produces up to `n` elements ahead on a background thread.
  Dataset prefetch(int64_t n = 1) const;
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
  Iterator iterator(const IteratorState& state) {
    check_source();
    GRADUS_CHECK(value_error, state.epoch >= 0 && state.consumed >= 0, "Dataset::iterator: bad state (epoch ",
                 state.epoch, ", consumed ", state.consumed, ")");
    next_epoch_ = state.epoch + 1;
    return Iterator(source_, state.epoch, state.consumed);
  }
  /// Range-for: each loop is the next epoch.
  Iterator begin() {
    Iterator it = iterator();
    ++it;
    return it;
  }
  std::default_sentinel_t end() const { return {}; }
  /// The next epoch's elements in a vector (at most `limit` when limit >= 0).
  std::vector<Example> collect(int64_t limit = -1) {
    std::vector<Example> out;
    Iterator it = iterator();
    while (limit < 0 || int64_t(out.size()) < limit) {
      auto e = it.next();
      if (!e) break;
      out.push_back(std::move(*e));
    }
    return out;
  }
  /// The number of the epoch the next pass gets.
  int64_t epoch() const { return next_epoch_; }
  void set_epoch(int64_t e) {
    GRADUS_CHECK(value_error, e >= 0, "Dataset::set_epoch: epoch must be >= 0, got ", e);
    next_epoch_ = e;
  }
  const std::shared_ptr<const Source>& source() const { return source_; }

 private:
  Dataset map_impl(MapFn fn) const;
  Dataset parallel_map_impl(MapFn fn, int threads, int buffer) const;
  void check_source() const {
    GRADUS_CHECK(value_error, source_ != nullptr, "Dataset: iterating a default-constructed (empty) Dataset");
  }
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
inline std::vector<std::string> list_files(const std::string& pattern) {
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

// --- from_tensor_slices --------------------------------------------------------------------------

template <class T>
Tensor<T> row_of(const Tensor<T>& t, int64_t i) {
  Shape s = t.shape();
  s.erase(0);
  Tensor<T> r(s);
  const int64_t n = r.size();
  if (n) std::memcpy(r.data(), t.data() + i * n, size_t(n) * sizeof(T));
  return r;
}

inline Value slice_value(const Value& v, int64_t i) {
  if (const auto* s = std::get_if<Strings>(&v)) return (*s)[size_t(i)];
  return std::visit(
      [&](const auto& x) -> Value {
        if constexpr (std::is_same_v<std::decay_t<decltype(x)>, std::string> ||
                      std::is_same_v<std::decay_t<decltype(x)>, Strings>)
          return x;  // unreachable: checked when the source is made
        else
          return row_of(x, i);
      },
      v);
}

class SlicesSource final : public Source {
 public:
  explicit SlicesSource(Example columns) : cols_(std::make_shared<Example>(std::move(columns))) {
    GRADUS_CHECK(value_error, !cols_->empty(), "from_tensor_slices: no fields");
    for (int f = 0; f < cols_->size(); ++f) {
      const Value& v = (*cols_)[f];
      int64_t rows = 0;
      if (const auto* s = std::get_if<Strings>(&v)) {
        rows = int64_t(s->size());
      } else {
        GRADUS_CHECK(value_error, v.index() < 3, "from_tensor_slices: field ", f,
                     " is a single string; slice a tensor [N, ...] or Strings of N");
        std::visit(
            [&](const auto& t) {
              if constexpr (!std::is_same_v<std::decay_t<decltype(t)>, std::string> &&
                            !std::is_same_v<std::decay_t<decltype(t)>, Strings>) {
                GRADUS_CHECK(value_error, t.defined() && t.rank() >= 1, "from_tensor_slices: field ", f,
                             " must be a tensor of rank >= 1 ([N, ...]), got ", describe(v));
                GRADUS_CHECK(device_error, t.device().is_cpu(), "from_tensor_slices: field ", f, " is on ",
                             t.device(), "; pipelines read host memory (copy it with .to(gd::cpu))");
                rows = t.dim(0);
              }
            },
            v);
      }
      if (f == 0) n_ = rows;
      GRADUS_CHECK(shape_error, rows == n_, "from_tensor_slices: fields have different lengths: field 0 has ", n_,
                   " rows, field ", f, " (", describe(v), ") has ", rows);
    }
  }
  std::unique_ptr<Stream> open(uint64_t) const override {
    struct S final : Stream {
      std::shared_ptr<const Example> cols;
      int64_t n, i = 0;
      S(std::shared_ptr<const Example> c, int64_t n_) : cols(std::move(c)), n(n_) {}
      std::optional<Example> next() override {
        if (i >= n) return std::nullopt;
        Example e;
        for (const auto& f : cols->fields()) e.fields().push_back({f.name, slice_value(f.value, i)});
        ++i;
        return e;
      }
      int64_t skip(int64_t k) override {
        const int64_t d = std::clamp<int64_t>(n - i, 0, std::max<int64_t>(k, 0));
        i += d;
        return d;
      }
    };
    return std::make_unique<S>(cols_, n_);
  }

 private:
  std::shared_ptr<const Example> cols_;
  int64_t n_ = 0;
};

// --- range, generator, text lines ---------------------------------------------------------------

class RangeSource final : public Source {
 public:
  RangeSource(int64_t b, int64_t e, int64_t s) : b_(b), e_(e), s_(s) {
    GRADUS_CHECK(value_error, s != 0, "range: step must not be 0");
  }
  std::unique_ptr<Stream> open(uint64_t) const override {
    struct S final : Stream {
      int64_t v, e, s;
      S(int64_t b, int64_t e_, int64_t s_) : v(b), e(e_), s(s_) {}
      bool more() const { return s > 0 ? v < e : v > e; }
      std::optional<Example> next() override {
        if (!more()) return std::nullopt;
        Example out(Tensor<int64_t>::scalar(v));
        v = (s > 0 ? e - v <= s : v - e <= -s) ? e : v + s;  // no overflow past e
        return out;
      }
      int64_t skip(int64_t k) override {
        int64_t d = 0;
        if (k > 0 && more()) {
          const uint64_t span = s > 0 ? uint64_t(e) - uint64_t(v) : uint64_t(v) - uint64_t(e);
          const uint64_t step = s > 0 ? uint64_t(s) : uint64_t(0) - uint64_t(s);
          const uint64_t left = (span + step - 1) / step;
          d = int64_t(std::min<uint64_t>(left, uint64_t(k)));
          v = uint64_t(d) == left ? e : int64_t(uint64_t(v) + uint64_t(d) * uint64_t(s));
        }
        return d;
      }
    };
    return std::make_unique<S>(b_, e_, s_);
  }

 private:
  int64_t b_, e_, s_;
};

class GeneratorSource final : public Source {
 public:
  using Fn = std::function<std::optional<Example>(int64_t)>;
  explicit GeneratorSource(Fn fn) : fn_(std::make_shared<Fn>(std::move(fn))) {
    GRADUS_CHECK(value_error, *fn_, "generator: empty function");
  }
  std::unique_ptr<Stream> open(uint64_t) const override {
    struct S final : Stream {
      std::shared_ptr<const Fn> fn;
      int64_t i = 0;
      bool done = false;
      explicit S(std::shared_ptr<const Fn> f) : fn(std::move(f)) {}
      std::optional<Example> next() override {
        if (done) return std::nullopt;
        std::optional<Example> e = (*fn)(i++);
        done = !e;
        return e;
      }
    };
    return std::make_unique<S>(fn_);
  }

 private:
  std::shared_ptr<const Fn> fn_;
};

inline void check_readable(const std::string& path, const char* who) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto st = fs::status(path, ec);
  GRADUS_CHECK(io_error, fs::exists(st), who, ": cannot open '", path, "': no such file");
  GRADUS_CHECK(io_error, !fs::is_directory(st), who, ": cannot open '", path, "': it is a directory");
}

class TextLinesSource final : public Source {
 public:
  explicit TextLinesSource(std::vector<std::string> files) : files_(std::move(files)) {
    for (const auto& f : files_) check_readable(f, "text_lines");
  }
  std::unique_ptr<Stream> open(uint64_t) const override {
    struct S final : Stream {
      const std::vector<std::string>& files;
      size_t f = 0;
      std::ifstream in;
      bool open = false;
      explicit S(const std::vector<std::string>& fs) : files(fs) {}
      std::optional<Example> next() override {
        for (;;) {
          if (!open) {
            if (f >= files.size()) return std::nullopt;
            check_readable(files[f], "text_lines");
            in = std::ifstream(files[f], std::ios::binary);
            GRADUS_CHECK(io_error, in.is_open(), "text_lines: cannot open '", files[f], "': ", std::strerror(errno));
            open = true;
          }
          std::string line;
          if (std::getline(in, line)) {
            if (!line.empty() && line.back() == '\r') line.pop_back();
            return Example(std::move(line));
          }
          GRADUS_CHECK(io_error, in.eof(), "text_lines: read error in '", files[f], "'");
          in.close();
          open = false;
          ++f;
        }
      }
    };
    return std::make_unique<S>(files_);
  }

 private:
  std::vector<std::string> files_;
};

// --- zip, map, filter, parallel_map ---------------------------------------------------------------

class ZipSource final : public Source {
 public:
  explicit ZipSource(std::vector<std::shared_ptr<const Source>> in) : in_(std::move(in)) {
    GRADUS_CHECK(value_error, !in_.empty(), "zip: no datasets");
  }
  std::unique_ptr<Stream> open(uint64_t key) const override {
    struct S final : Stream {
      std::vector<std::unique_ptr<Stream>> in;
      std::optional<Example> next() override {
        Example out;
        for (auto& s : in) {
          std::optional<Example> e = s->next();
          if (!e) return std::nullopt;
          for (auto& f : e->fields()) out.add(std::move(f.name), std::move(f.value));
        }
        return out;
      }
      void cancel() override {
        for (auto& s : in) s->cancel();
      }
    };
    auto s = std::make_unique<S>();
    // Every input gets the pass's own key, so inputs shuffled with the same seed stay aligned.
    for (const auto& in : in_) s->in.push_back(in->open(key));
    return s;
  }

 private:
  std::vector<std::shared_ptr<const Source>> in_;
};

class MapSource final : public UnarySource {
 public:
  MapSource(std::shared_ptr<const Source> in, Dataset::MapFn fn)
      : UnarySource(std::move(in)), fn_(std::make_shared<Dataset::MapFn>(std::move(fn))) {}
  std::unique_ptr<Stream> open(uint64_t key) const override {
    struct S final : UnaryStream {
      std::shared_ptr<const Dataset::MapFn> fn;
      S(std::unique_ptr<Stream> in, std::shared_ptr<const Dataset::MapFn> f) : UnaryStream(std::move(in)), fn(std::move(f)) {}
      std::optional<Example> next() override {
        std::optional<Example> e = in_->next();
        if (!e) return std::nullopt;
        return (*fn)(std::move(*e));
      }
      int64_t skip(int64_t n) override { return in_->skip(n); }
    };
    return std::make_unique<S>(in_->open(key), fn_);
  }

 private:
  std::shared_ptr<const Dataset::MapFn> fn_;
};

class FilterSource final : public UnarySource {
 public:
  FilterSource(std::shared_ptr<const Source> in, Dataset::Predicate p)
      : UnarySource(std::move(in)), pred_(std::make_shared<Dataset::Predicate>(std::move(p))) {}
  std::unique_ptr<Stream> open(uint64_t key) const override {
    struct S final : UnaryStream {
      std::shared_ptr<const Dataset::Predicate> pred;
      S(std::unique_ptr<Stream> in, std::shared_ptr<const Dataset::Predicate> p)
          : UnaryStream(std::move(in)), pred(std::move(p)) {}
      std::optional<Example> next() override {
        while (std::optional<Example> e = in_->next())
          if ((*pred)(*e)) return e;
        return std::nullopt;
      }
    };
    return std::make_unique<S>(in_->open(key), pred_);
  }

 private:
  std::shared_ptr<const Dataset::Predicate> pred_;
};

/// An element or the exception raised while producing it.
struct Produced {
  std::optional<Example> value;
  std::exception_ptr error;
};

/// Workers take input elements in order (one at a time, numbered), apply fn outside any lock,
/// and file the result under its number; the consumer waits for the numbers in order. At most
/// `window` numbers are handed out beyond the one the consumer waits for.
class ParallelMapStream final : public Stream {
 public:
  ParallelMapStream(std::unique_ptr<Stream> in, std::shared_ptr<const Dataset::MapFn> fn, int threads, int64_t window)
      : in_(std::move(in)), fn_(std::move(fn)), window_(window) {
    workers_.reserve(size_t(threads));
    try {
      for (int t = 0; t < threads; ++t) workers_.emplace_back([this] { work(); });
    } catch (...) {
      shutdown();
      throw;
    }
  }
  ~ParallelMapStream() override { shutdown(); }

  std::optional<Example> next() override {
    std::unique_lock lock(m_);
    ready_.wait(lock, [&] { return stop_ || done_.count(next_out_) || next_out_ >= end_; });
    auto it = done_.find(next_out_);
    if (it == done_.end()) return std::nullopt;
    Produced p = std::move(it->second);
    done_.erase(it);
    ++next_out_;
    room_.notify_all();
    lock.unlock();
    if (p.error) std::rethrow_exception(p.error);
    return std::move(p.value);
  }
  void cancel() override {
    {
      std::lock_guard lock(m_);
      stop_ = true;
    }
    room_.notify_all();
    ready_.notify_all();
    in_->cancel();
  }

 private:
  void work() {
    for (;;) {
      std::unique_lock in_lock(in_m_);  // input elements are taken in order, one worker at a time
      int64_t seq;
      {
        std::unique_lock lock(m_);
        room_.wait(lock, [&] { return stop_ || next_take_ >= end_ || next_take_ < next_out_ + window_; });
        if (stop_ || next_take_ >= end_) return;
        seq = next_take_++;
      }
      Produced p;
      bool at_end = false;
      try {
        std::optional<Example> e = in_->next();
        in_lock.unlock();
        if (e)
          p.value = (*fn_)(std::move(*e));
        else
          at_end = true;
      } catch (...) {
        p.error = std::current_exception();
        if (in_lock.owns_lock()) at_end = true;  // the input failed: it ends after this error
      }
      {
        std::lock_guard lock(m_);
        if (at_end) end_ = std::min(end_, p.error ? seq + 1 : seq);
        if (!at_end || p.error) done_.emplace(seq, std::move(p));
      }
      ready_.notify_all();
      room_.notify_all();
    }
  }
  void shutdown() {
    cancel();
    for (auto& t : workers_)
      if (t.joinable()) t.join();
  }

  std::unique_ptr<Stream> in_;
  std::shared_ptr<const Dataset::MapFn> fn_;
  const int64_t window_;
  std::mutex in_m_, m_;
  std::condition_variable room_, ready_;
  int64_t next_take_ = 0, next_out_ = 0, end_ = std::numeric_limits<int64_t>::max();
  std::map<int64_t, Produced> done_;
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

class ParallelMapSource final : public UnarySource {
 public:
  ParallelMapSource(std::shared_ptr<const Source> in, Dataset::MapFn fn, int threads, int buffer)
      : UnarySource(std::move(in)), fn_(std::make_shared<Dataset::MapFn>(std::move(fn))), threads_(threads),
        window_(buffer > 0 ? buffer : 2 * int64_t(threads)) {
    GRADUS_CHECK(value_error, threads >= 1, "parallel_map: threads must be >= 1, got ", threads);
    GRADUS_CHECK(value_error, buffer >= 0, "parallel_map: buffer must be >= 0, got ", buffer);
  }
  std::unique_ptr<Stream> open(uint64_t key) const override {
    return std::make_unique<ParallelMapStream>(in_->open(key), fn_, threads_, window_);
  }

 private:
  std::shared_ptr<const Dataset::MapFn> fn_;
  int threads_;
  int64_t window_;
};

// --- prefetch --------------------------------------------------------------------------------------

class PrefetchStream final : public UnaryStream {
 public:
  PrefetchStream(std::unique_ptr<Stream> in, size_t n) : UnaryStream(std::move(in)), q_(n) {
    thread_ = std::thread([this] { produce(); });
  }
  ~PrefetchStream() override {
    cancel();
    thread_.join();
  }
  std::optional<Example> next() override {
    std::optional<Produced> p = q_.pop();
    if (!p) return std::nullopt;
    if (p->error) std::rethrow_exception(p->error);
    return std::move(p->value);
  }
  void cancel() override {
    q_.cancel();
    in_->cancel();
  }

 private:
  void produce() {
    std::exception_ptr error;
    try {
      while (std::optional<Example> e = in_->next())
        if (!q_.push(Produced{std::move(e), nullptr})) return;
    } catch (...) {
      error = std::current_exception();
    }
    // Queued only once the handler is left, so the consumer holds the last reference to it.
    if (error) q_.push(Produced{std::nullopt, std::move(error)});
    q_.close();
  }
  BoundedQueue<Produced> q_;
  std::thread thread_;
};

class PrefetchSource final : public UnarySource {
 public:
  PrefetchSource(std::shared_ptr<const Source> in, int64_t n) : UnarySource(std::move(in)), n_(n) {
    GRADUS_CHECK(value_error, n >= 1, "prefetch: buffer size must be >= 1, got ", n);
  }
  std::unique_ptr<Stream> open(uint64_t key) const override {
    return std::make_unique<PrefetchStream>(in_->open(key), size_t(n_));
  }

 private:
  int64_t n_;
};

// --- shuffle, repeat, skip, take, shard ---------------------------------------------------------

class ShuffleSource final : public UnarySource {
 public:
  ShuffleSource(std::shared_ptr<const Source> in, int64_t buffer, uint64_t seed)
      : UnarySource(std::move(in)), buffer_(buffer), seed_(seed) {
    GRADUS_CHECK(value_error, buffer >= 1, "shuffle: buffer size must be >= 1, got ", buffer);
  }
  std::unique_ptr<Stream> open(uint64_t key) const override {
    struct S final : UnaryStream {
      std::vector<Example> buf;
      size_t cap;
      Rng rng;
      bool in_done = false;
      S(std::unique_ptr<Stream> in, size_t c, uint64_t seed) : UnaryStream(std::move(in)), cap(c), rng(seed) {}
      std::optional<Example> next() override {
        while (!in_done && buf.size() < cap) {
          std::optional<Example> e = in_->next();
          if (!e) {
            in_done = true;
            break;
          }
          buf.push_back(std::move(*e));
        }
        if (buf.empty()) return std::nullopt;
        // Draw a random slot; refill it with the next input element, or close the gap.
        const size_t j = size_t(rng.below(buf.size()));
        Example out = std::move(buf[j]);
        std::optional<Example> e = in_done ? std::nullopt : in_->next();
        if (e) {
          buf[j] = std::move(*e);
        } else {
          in_done = true;
          buf[j] = std::move(buf.back());
          buf.pop_back();
        }
        return out;
      }
    };
    return std::make_unique<S>(in_->open(key), size_t(std::min<int64_t>(buffer_, int64_t(1) << 40)),
                               mix_key(mix_key(seed_, 0x5348554646ull), key));
  }

 private:
  int64_t buffer_;
  uint64_t seed_;
};

class RepeatSource final : public UnarySource {
 public:
  RepeatSource(std::shared_ptr<const Source> in, int64_t count) : UnarySource(std::move(in)), count_(count) {}
  std::unique_ptr<Stream> open(uint64_t key) const override {
    struct S final : Stream {
      std::shared_ptr<const Source> src;
      uint64_t key;
      int64_t count, rep = 0, in_rep = 0;
      std::mutex m;  // guards `cur` against cancel() from another thread
      std::unique_ptr<Stream> cur;
      std::atomic<bool> cancelled{false};
      S(std::shared_ptr<const Source> s, uint64_t k, int64_t c) : src(std::move(s)), key(k), count(c) {}
      std::optional<Example> next() override {
        for (;;) {
          if (!cur) {
            if ((count >= 0 && rep >= count) || cancelled) return std::nullopt;
            auto s = src->open(mix_key(key, uint64_t(rep)));
            std::lock_guard lock(m);
            cur = std::move(s);
            in_rep = 0;
          }
          if (std::optional<Example> e = cur->next()) {
            ++in_rep;
            return e;
          }
          {
            std::lock_guard lock(m);
            cur.reset();
          }
          ++rep;
          if (in_rep == 0) return std::nullopt;  // an empty pass: repeating it forever would hang
        }
      }
      void cancel() override {
        cancelled = true;
        std::lock_guard lock(m);
        if (cur) cur->cancel();
      }
    };
    return std::make_unique<S>(in_, key, count_);
  }

 private:
  int64_t count_;
};

class SkipTakeSource final : public UnarySource {
 public:
  enum Kind { kSkip, kTake };
  SkipTakeSource(std::shared_ptr<const Source> in, Kind kind, int64_t n) : UnarySource(std::move(in)), kind_(kind), n_(n) {}
  std::unique_ptr<Stream> open(uint64_t key) const override {
    struct S final : UnaryStream {
      Kind kind;
      int64_t n;
      S(std::unique_ptr<Stream> in, Kind k, int64_t n_) : UnaryStream(std::move(in)), kind(k), n(n_) {}
      std::optional<Example> next() override {
        if (kind == kSkip) {
          if (n > 0) {
            in_->skip(n);
            n = 0;
          }
          return in_->next();
        }
        if (n == 0) return std::nullopt;
        std::optional<Example> e = in_->next();
        if (e && n > 0) --n;
        return e;
      }
      int64_t skip(int64_t k) override {
        if (kind == kSkip) {
          if (n > 0) {
            in_->skip(n);
            n = 0;
          }
          return in_->skip(k);
        }
        const int64_t d = in_->skip(n < 0 ? k : std::min(k, n));
        if (n > 0) n -= d;
        return d;
      }
    };
    return std::make_unique<S>(in_->open(key), kind_, kind_ == kSkip ? std::max<int64_t>(n_, 0) : n_);
  }

 private:
  Kind kind_;
  int64_t n_;
};

class ShardSource final : public UnarySource {
 public:
  ShardSource(std::shared_ptr<const Source> in, int64_t num, int64_t index)
      : UnarySource(std::move(in)), num_(num), index_(index) {
    GRADUS_CHECK(value_error, num >= 1, "shard: num_shards must be >= 1, got ", num);
    GRADUS_CHECK(value_error, index >= 0 && index < num, "shard: index must be in [0, ", num, "), got ", index);
  }
  std::unique_ptr<Stream> open(uint64_t key) const override {
    struct S final : UnaryStream {
      int64_t num, index;
      bool first = true;
      S(std::unique_ptr<Stream> in, int64_t n, int64_t i) : UnaryStream(std::move(in)), num(n), index(i) {}
      std::optional<Example> next() override {
        const int64_t gap = first ? index : num - 1;
        first = false;
        if (in_->skip(gap) < gap) return std::nullopt;
        return in_->next();
      }
    };
    return std::make_unique<S>(in_->open(key), num_, index_);
  }

 private:
  int64_t num_, index_;
};

// --- batch, padded_batch ---------------------------------------------------------------------------

/// Copies `src` (shape s) into the leading corner of `dst` (shape t, t[d] >= s[d], same rank).
template <class T>
void copy_padded(const T* src, const Shape& s, T* dst, const Shape& t) {
  const int r = s.rank();
  if (r == 0) {
    *dst = *src;
    return;
  }
  if (s.numel() == 0) return;
  const int64_t inner = s[r - 1];
  const int64_t rows = s.numel() / inner;
  int64_t idx[kMaxRank] = {};
  for (int64_t row = 0; row < rows; ++row) {
    int64_t off = 0;
    for (int d = 0; d < r - 1; ++d) off = off * t[d] + idx[d];
    std::memcpy(dst + off * t[r - 1], src + row * inner, size_t(inner) * sizeof(T));
    for (int d = r - 2; d >= 0; --d) {  // next row index, odometer order
      if (++idx[d] < s[d]) break;
      idx[d] = 0;
    }
  }
}

/// Stacks field `f` of `items` into one value; `pad` null for batch, else padded_batch's options.
template <class T>
Value stack_tensors(const std::vector<Example>& items, int f, const PaddedBatchOptions* pad, const char* who) {
  const Tensor<T>& first = std::get<Tensor<T>>(items[0][f]);
  const std::string field = items[0].name(f).empty() ? std::to_string(f) : "'" + items[0].name(f) + "'";
  Shape target = first.shape();
  for (size_t i = 1; i < items.size(); ++i) {
    const Shape& s = std::get<Tensor<T>>(items[i][f]).shape();
    if (!pad) {
      GRADUS_CHECK(shape_error, s == first.shape(), who, ": field ", field, " of element ", i, " in the batch has shape ",
                   s, " but element 0's has ", first.shape(), " (padded_batch pads to a common shape)");
      continue;
    }
    GRADUS_CHECK(shape_error, s.rank() == target.rank(), who, ": field ", field, " of element ", i, " has rank ",
                 s.rank(), " ", s, " but element 0's has rank ", target.rank(), " ", first.shape());
    for (int d = 0; d < s.rank(); ++d) target[d] = std::max(target[d], s[d]);
  }
  if (pad && size_t(f) < pad->padded_shapes.size()) {
    const std::vector<int64_t>& want = pad->padded_shapes[size_t(f)];
    GRADUS_CHECK(shape_error, int(want.size()) == target.rank(), who, ": padded shape of field ", field, " has rank ",
                 want.size(), " but the field has rank ", target.rank(), " (", first.shape(), ")");
    for (int d = 0; d < target.rank(); ++d) {
      if (want[size_t(d)] < 0) continue;
      GRADUS_CHECK(shape_error, target[d] <= want[size_t(d)], who, ": field ", field, " has dimension ", d, " of ",
                   target[d], ", longer than its padded shape allows (", want[size_t(d)], ")");
      target[d] = want[size_t(d)];
    }
  }
  Shape out_shape = target;
  out_shape.insert(0, int64_t(items.size()));
  Tensor<T> out(out_shape);
  const int64_t per = target.numel();
  if (pad && out.size()) std::fill_n(out.data(), out.size(), T(pad->padding_value));
  for (size_t i = 0; i < items.size(); ++i) {
    const Tensor<T>& t = std::get<Tensor<T>>(items[i][f]);
    if (!pad || t.shape() == target) {
      if (per) std::memcpy(out.data() + int64_t(i) * per, t.data(), size_t(per) * sizeof(T));
    } else {
      copy_padded(t.data(), t.shape(), out.data() + int64_t(i) * per, target);
    }
  }
  return out;
}

inline Example stack_examples(std::vector<Example>& items, const PaddedBatchOptions* pad) {
  const char* who = pad ? "padded_batch" : "batch";
  const Example& e0 = items[0];
  for (size_t i = 1; i < items.size(); ++i) {
    GRADUS_CHECK(value_error, items[i].size() == e0.size(), who, ": element ", i, " of the batch has ", items[i].size(),
                 " fields ", items[i], ", element 0 has ", e0.size(), " ", e0);
    for (int f = 0; f < e0.size(); ++f) {
      GRADUS_CHECK(value_error, items[i].name(f) == e0.name(f) && items[i][f].index() == e0[f].index(), who,
                   ": element ", i, " of the batch is ", items[i], ", element 0 is ", e0, " (field ", f, " differs)");
    }
  }
  Example out;
  for (int f = 0; f < e0.size(); ++f) {
    Value v;
    switch (e0[f].index()) {
      case 0: v = stack_tensors<float>(items, f, pad, who); break;
      case 1: v = stack_tensors<double>(items, f, pad, who); break;
      case 2: v = stack_tensors<int64_t>(items, f, pad, who); break;
      case 3: {
        Strings s;
        s.reserve(items.size());
        for (auto& it : items) s.push_back(std::move(std::get<std::string>(it[f])));
        v = std::move(s);
        break;
      }
      default:
        throw value_error(gradus::detail::str(who, ": field ", f, " holds ", describe(e0[f]), "; a batch of string lists is not supported"));
    }
    out.fields().push_back({e0.name(f), std::move(v)});
  }
  return out;
}

class BatchSource final : public UnarySource {
 public:
  /// `pad` null: batch; else padded_batch with these options.
  BatchSource(std::shared_ptr<const Source> in, int64_t n, bool drop, const PaddedBatchOptions* pad)
      : UnarySource(std::move(in)), n_(n), drop_(drop), padded_(pad != nullptr) {
    GRADUS_CHECK(value_error, n >= 1, padded_ ? "padded_batch" : "batch", ": batch size must be >= 1, got ", n);
    if (pad) pad_ = *pad;
  }
  std::unique_ptr<Stream> open(uint64_t key) const override {
    struct S final : UnaryStream {
      const BatchSource& self;
      S(std::unique_ptr<Stream> in, const BatchSource& b) : UnaryStream(std::move(in)), self(b) {}
      std::optional<Example> next() override {
        std::vector<Example> items;
        items.reserve(size_t(std::min<int64_t>(self.n_, 1 << 16)));
        while (int64_t(items.size()) < self.n_) {
          std::optional<Example> e = in_->next();
          if (!e) break;
          items.push_back(std::move(*e));
        }
        if (items.empty() || (self.drop_ && int64_t(items.size()) < self.n_)) return std::nullopt;
        return stack_examples(items, self.padded_ ? &self.pad_ : nullptr);
      }
      int64_t skip(int64_t k) override {
        if (k <= 0) return 0;
        const int64_t n = self.n_;
        const int64_t want = k > std::numeric_limits<int64_t>::max() / n ? std::numeric_limits<int64_t>::max() : k * n;
        const int64_t got = in_->skip(want);
        return self.drop_ ? got / n : (got + n - 1) / n;
      }
    };
    return std::make_unique<S>(in_->open(key), *this);
  }

 private:
  int64_t n_;
  bool drop_, padded_;
  PaddedBatchOptions pad_;
};

// --- interleave ------------------------------------------------------------------------------------

class InterleaveSource final : public UnarySource {
 public:
  using Fn = std::function<Dataset(const Example&)>;
  InterleaveSource(std::shared_ptr<const Source> in, Fn fn, int64_t cycle, int64_t block)
      : UnarySource(std::move(in)), fn_(std::make_shared<Fn>(std::move(fn))), cycle_(cycle), block_(block) {
    GRADUS_CHECK(value_error, *fn_, "interleave: empty function");
    GRADUS_CHECK(value_error, cycle >= 1 && cycle <= (int64_t(1) << 16), "interleave: cycle_length must be in [1, 65536], got ",
                 cycle);
    GRADUS_CHECK(value_error, block >= 1, "interleave: block_length must be >= 1, got ", block);
  }
  std::unique_ptr<Stream> open(uint64_t key) const override {
    // tf.data's order: the slot at `cur` gives up to `block` elements, then the next slot; an
    // empty slot takes the next input element's dataset; a finished one is emptied.
    struct S final : UnaryStream {
      std::shared_ptr<const Fn> fn;
      uint64_t key;
      int64_t block, cur = 0, in_block = 0, opened = 0, open_count = 0;
      bool input_done = false;
      std::mutex m;  // guards the slots against cancel() from another thread
      std::vector<std::shared_ptr<const Source>> owners;  // keep each slot's source alive (declared first: freed last)
      std::vector<std::unique_ptr<Stream>> slots;
      S(std::unique_ptr<Stream> in, std::shared_ptr<const Fn> f, uint64_t k, int64_t cycle, int64_t b)
          : UnaryStream(std::move(in)), fn(std::move(f)), key(k), block(b), owners(size_t(cycle)), slots(size_t(cycle)) {}
      void advance() {
        in_block = 0;
        cur = (cur + 1) % int64_t(slots.size());
      }
      std::optional<Example> next() override {
        while (!input_done || open_count > 0) {
          auto& slot = slots[size_t(cur)];
          if (slot) {
            if (std::optional<Example> e = slot->next()) {
              if (++in_block == block) advance();
              return e;
            }
            {
              std::lock_guard lock(m);
              slot.reset();
            }
            owners[size_t(cur)].reset();
            --open_count;
            advance();
          } else if (!input_done) {
            std::optional<Example> e = in_->next();
            if (!e) {
              input_done = true;
              continue;
            }
            Dataset d = (*fn)(*e);
            GRADUS_CHECK(value_error, d.source() != nullptr, "interleave: the function returned an empty Dataset");
            auto s = d.source()->open(mix_key(key, uint64_t(opened++)));
            std::lock_guard lock(m);
            owners[size_t(cur)] = d.source();
            slot = std::move(s);
            ++open_count;
          } else {
            advance();
          }
        }
        return std::nullopt;
      }
      void cancel() override {
        in_->cancel();
        std::lock_guard lock(m);
        for (auto& s : slots)
          if (s) s->cancel();
      }
    };
    return std::make_unique<S>(in_->open(key), fn_, key, cycle_, block_);
  }

 private:
  std::shared_ptr<const Fn> fn_;
  int64_t cycle_, block_;
};

// --- cache -------------------------------------------------------------------------------------------

/// Replays a finished recording.
class ReplayStream final : public Stream {
 public:
  explicit ReplayStream(std::shared_ptr<const std::vector<Example>> items) : items_(std::move(items)) {}
  std::optional<Example> next() override {
    if (i_ >= items_->size()) return std::nullopt;
    return (*items_)[i_++];
  }
  int64_t skip(int64_t k) override {
    const size_t d = std::min(items_->size() - i_, size_t(std::max<int64_t>(k, 0)));
    i_ += d;
    return int64_t(d);
  }

 private:
  std::shared_ptr<const std::vector<Example>> items_;
  size_t i_ = 0;
};

class MemoryCacheSource final : public UnarySource {
 public:
  explicit MemoryCacheSource(std::shared_ptr<const Source> in) : UnarySource(std::move(in)), state_(std::make_shared<State>()) {}
  std::unique_ptr<Stream> open(uint64_t key) const override {
    {
      std::lock_guard lock(state_->m);
      if (state_->items) return std::make_unique<ReplayStream>(state_->items);
    }
    struct S final : UnaryStream {
      std::shared_ptr<State> state;
      std::vector<Example> seen;
      S(std::unique_ptr<Stream> in, std::shared_ptr<State> st) : UnaryStream(std::move(in)), state(std::move(st)) {}
      std::optional<Example> next() override {
        std::optional<Example> e = in_->next();
        if (e) {
          seen.push_back(*e);
        } else {
          std::lock_guard lock(state->m);
          if (!state->items) state->items = std::make_shared<const std::vector<Example>>(std::move(seen));
          seen.clear();
        }
        return e;
      }
    };
    return std::make_unique<S>(in_->open(key), state_);
  }

 private:
  struct State {
    std::mutex m;
    std::shared_ptr<const std::vector<Example>> items;
  };
  std::shared_ptr<State> state_;
};

// The cache file: "GDCACHE1", then per element a byte 1, u32 field count and the fields (u32
// name length, name, u8 kind 0..4; tensors: u8 rank, i64 dims, the elements; string: u64
// length and bytes; strings: u64 count, then each as a string), then a byte 0 and the u64
// element count. Little-endian as the machine is: a cache belongs to the machine that wrote it.
inline constexpr char kCacheMagic[8] = {'G', 'D', 'C', 'A', 'C', 'H', 'E', '1'};

class CacheWriter {
 public:
  explicit CacheWriter(std::string path) : path_(std::move(path)) {
    static std::atomic<uint64_t> counter{0};
    tmp_ = path_ + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
    f_ = std::fopen(tmp_.c_str(), "wb");
    GRADUS_CHECK(io_error, f_, "cache: cannot write '", tmp_, "': ", std::strerror(errno));
    put(kCacheMagic, 8);
  }
  ~CacheWriter() {
    if (f_) {
      std::fclose(f_);
      std::remove(tmp_.c_str());
    }
  }
  void write(const Example& e) {
    put_u8(1);
    put_u32(uint32_t(e.size()));
    for (const auto& f : e.fields()) {
      put_u32(uint32_t(f.name.size()));
      put(f.name.data(), f.name.size());
      put_u8(uint8_t(f.value.index()));
      std::visit(
          [&](const auto& v) {
            using V = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<V, std::string>) {
              put_str(v);
            } else if constexpr (std::is_same_v<V, Strings>) {
              put_u64(v.size());
              for (const auto& s : v) put_str(s);
            } else {
              put_u8(uint8_t(v.rank()));
              for (int64_t d : v.shape()) put(&d, 8);
              put(v.data(), size_t(v.size()) * sizeof(typename V::value_type));
            }
          },
          f.value);
    }
    ++count_;
  }
  /// Ends the file and renames it to its final name.
  void commit() {
    put_u8(0);
    put_u64(count_);
    const bool ok = std::fflush(f_) == 0 && ::fsync(::fileno(f_)) == 0;
    const int err = errno;
    std::fclose(f_);
    f_ = nullptr;
    if (!ok || std::rename(tmp_.c_str(), path_.c_str()) != 0) {
      std::remove(tmp_.c_str());
      throw io_error(gradus::detail::str("cache: cannot write '", path_, "': ", std::strerror(ok ? errno : err)));
    }
  }

 private:
  void put(const void* p, size_t n) {
    if (n && std::fwrite(p, 1, n, f_) != n)
      throw io_error(gradus::detail::str("cache: cannot write '", tmp_, "': ", std::strerror(errno)));
  }
  void put_u8(uint8_t v) { put(&v, 1); }
  void put_u32(uint32_t v) { put(&v, 4); }
  void put_u64(uint64_t v) { put(&v, 8); }
  void put_str(const std::string& s) {
    put_u64(s.size());
    put(s.data(), s.size());
  }
  std::string path_, tmp_;
  FILE* f_ = nullptr;
  uint64_t count_ = 0;
};

class CacheReaderStream final : public Stream {
 public:
  explicit CacheReaderStream(std::string path) : path_(std::move(path)) {
    f_ = std::fopen(path_.c_str(), "rb");
    GRADUS_CHECK(io_error, f_, "cache: cannot open '", path_, "': ", std::strerror(errno));
    std::error_code ec;
    left_ = uint64_t(std::filesystem::file_size(path_, ec));
    char magic[8];
    get(magic, 8);
    GRADUS_CHECK(io_error, std::memcmp(magic, kCacheMagic, 8) == 0, "cache: '", path_, "' is not a gradus cache file");
  }
  ~CacheReaderStream() override {
    if (f_) std::fclose(f_);
  }
  std::optional<Example> next() override {
    if (done_) return std::nullopt;
    if (get_u8() == 0) {
      const uint64_t n = get_u64();
      GRADUS_CHECK(io_error, n == count_ && left_ == 0, "cache: corrupt file '", path_, "': it ends with count ", n,
                   " after ", count_, " elements", left_ ? " and has trailing bytes" : "");
      done_ = true;
      return std::nullopt;
    }
    Example e;
    const uint32_t nf = get_u32();
    for (uint32_t i = 0; i < nf; ++i) {
      std::string name = get_str(get_u32());
      const uint8_t kind = get_u8();
      Value v;
      switch (kind) {
        case 0: v = get_tensor<float>(); break;
        case 1: v = get_tensor<double>(); break;
        case 2: v = get_tensor<int64_t>(); break;
        case 3: v = get_str(get_u64()); break;
        case 4: {
          const uint64_t n = get_u64();
          need(n > left_ / 8 ? UINT64_MAX : n * 8, "a string list");
          Strings s;
          for (uint64_t k = 0; k < n; ++k) s.push_back(get_str(get_u64()));
          v = std::move(s);
          break;
        }
        default: throw io_error(gradus::detail::str("cache: corrupt file '", path_, "': field kind ", int(kind)));
      }
      e.fields().push_back({std::move(name), std::move(v)});
    }
    ++count_;
    return e;
  }

 private:
  void need(uint64_t n, const char* what) {
    GRADUS_CHECK(io_error, n <= left_, "cache: truncated file '", path_, "': ", what, " needs ", n, " bytes, ", left_,
                 " are left");
  }
  void get(void* p, uint64_t n) {
    need(n, "the next field");
    if (n && std::fread(p, 1, size_t(n), f_) != n) throw io_error(gradus::detail::str("cache: read error in '", path_, "'"));
    left_ -= n;
  }
  uint8_t get_u8() {
    uint8_t v;
    get(&v, 1);
    return v;
  }
  uint32_t get_u32() {
    uint32_t v;
    get(&v, 4);
    return v;
  }
  uint64_t get_u64() {
    uint64_t v;
    get(&v, 8);
    return v;
  }
  std::string get_str(uint64_t n) {
    need(n, "a string");
    std::string s(size_t(n), '\0');
    get(s.data(), n);
    return s;
  }
  template <class T>
  Tensor<T> get_tensor() {
    const uint8_t r = get_u8();
    GRADUS_CHECK(io_error, r <= kMaxRank, "cache: corrupt file '", path_, "': rank ", int(r));
    int64_t dims[kMaxRank];
    get(dims, 8 * uint64_t(r));
    for (int d = 0; d < r; ++d)
      GRADUS_CHECK(io_error, dims[d] >= 0, "cache: corrupt file '", path_, "': negative dimension ", dims[d]);
    const int64_t n = Shape::count(std::span<const int64_t>(dims, r));
    GRADUS_CHECK(io_error, n >= 0 && uint64_t(n) <= left_ / sizeof(T), "cache: corrupt file '", path_,
                 "': a tensor's shape claims more bytes than the file holds");
    Tensor<T> t(Shape(std::span<const int64_t>(dims, r)));
    get(t.data(), uint64_t(n) * sizeof(T));
    return t;
  }
  std::string path_;
  FILE* f_ = nullptr;
  uint64_t left_ = 0, count_ = 0;
  bool done_ = false;
};

class FileCacheSource final : public UnarySource {
 public:
  FileCacheSource(std::shared_ptr<const Source> in, std::string path) : UnarySource(std::move(in)), path_(std::move(path)) {
    GRADUS_CHECK(value_error, !path_.empty(), "cache: empty file name (use cache() for memory)");
  }
  std::unique_ptr<Stream> open(uint64_t key) const override {
    std::error_code ec;
    if (std::filesystem::exists(path_, ec)) return std::make_unique<CacheReaderStream>(path_);
    struct S final : UnaryStream {
      CacheWriter w;
      bool committed = false;
      S(std::unique_ptr<Stream> in, const std::string& p) : UnaryStream(std::move(in)), w(p) {}
      std::optional<Example> next() override {
        std::optional<Example> e = in_->next();
        if (e)
          w.write(*e);
        else if (!committed) {
          committed = true;
          w.commit();
        }
        return e;
      }
    };
    return std::make_unique<S>(in_->open(key), path_);
  }

 private:
  std::string path_;
};

}  // namespace detail

// ================================================================================================
// Dataset's members.

inline Dataset Dataset::from_tensor_slices(Example columns) {
  return Dataset(std::make_shared<detail::SlicesSource>(std::move(columns)));
}
inline Dataset Dataset::range(int64_t begin, int64_t end, int64_t step) {
  return Dataset(std::make_shared<detail::RangeSource>(begin, end, step));
}
inline Dataset Dataset::generator(std::function<std::optional<Example>(int64_t)> fn) {
  return Dataset(std::make_shared<detail::GeneratorSource>(std::move(fn)));
}
inline Dataset Dataset::idx_images(const std::string& path) { return from_tensor_slices(read_idx_images(path)); }
inline Dataset Dataset::idx_labels(const std::string& path) { return from_tensor_slices(read_idx_labels(path)); }
inline Dataset Dataset::text_lines(std::vector<std::string> files) {
  return Dataset(std::make_shared<detail::TextLinesSource>(std::move(files)));
}
inline Dataset Dataset::zip(std::vector<Dataset> datasets) {
  std::vector<std::shared_ptr<const Source>> in;
  for (auto& d : datasets) {
    d.check_source();
    in.push_back(d.source_);
  }
  return Dataset(std::make_shared<detail::ZipSource>(std::move(in)));
}
inline Dataset Dataset::map_impl(MapFn fn) const {
  src();
  return Dataset(std::make_shared<detail::MapSource>(source_, std::move(fn)));
}
inline Dataset Dataset::parallel_map_impl(MapFn fn, int threads, int buffer) const {
  src();
  return Dataset(std::make_shared<detail::ParallelMapSource>(source_, std::move(fn), threads, buffer));
}
inline Dataset Dataset::filter(Predicate pred) const {
  src();
  return Dataset(std::make_shared<detail::FilterSource>(source_, std::move(pred)));
}
inline Dataset Dataset::shuffle(int64_t buffer, uint64_t seed) const {
  src();
  return Dataset(std::make_shared<detail::ShuffleSource>(source_, buffer, seed));
}
inline Dataset Dataset::batch(int64_t n, bool drop_remainder) const {
  src();
  return Dataset(std::make_shared<detail::BatchSource>(source_, n, drop_remainder, nullptr));
}
inline Dataset Dataset::padded_batch(int64_t n, PaddedBatchOptions options) const {
  src();
  return Dataset(std::make_shared<detail::BatchSource>(source_, n, options.drop_remainder, &options));
}
inline Dataset Dataset::repeat(int64_t count) const {
  src();
  return Dataset(std::make_shared<detail::RepeatSource>(source_, count));
}
inline Dataset Dataset::skip(int64_t n) const {
  src();
  return Dataset(std::make_shared<detail::SkipTakeSource>(source_, detail::SkipTakeSource::kSkip, n));
}
inline Dataset Dataset::take(int64_t n) const {
  src();
  return Dataset(std::make_shared<detail::SkipTakeSource>(source_, detail::SkipTakeSource::kTake, n));
}
inline Dataset Dataset::shard(int64_t num_shards, int64_t index) const {
  src();
  return Dataset(std::make_shared<detail::ShardSource>(source_, num_shards, index));
}
inline Dataset Dataset::prefetch(int64_t n) const {
  src();
  return Dataset(std::make_shared<detail::PrefetchSource>(source_, n));
}
inline Dataset Dataset::interleave(std::function<Dataset(const Example&)> fn, int64_t cycle_length,
                                   int64_t block_length) const {
  src();
  return Dataset(std::make_shared<detail::InterleaveSource>(source_, std::move(fn), cycle_length, block_length));
}
inline Dataset Dataset::cache() const {
  src();
  return Dataset(std::make_shared<detail::MemoryCacheSource>(source_));
}
inline Dataset Dataset::cache(const std::string& path) const {
  src();
  return Dataset(std::make_shared<detail::FileCacheSource>(source_, path));
}

}  // namespace gradus::data
