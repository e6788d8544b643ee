// gradus/data/parallel.hpp — the transformations of a Dataset that run background threads: parallel_map
// (order kept) and prefetch.
// Part of the input pipelines of gradus/data/dataset.hpp (include that one): the Source and
// Stream classes behind Dataset's factory functions and transformations.
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

#include "gradus/backend/staging.hpp"
#include "gradus/core/compiled.hpp"
#include "gradus/core/error.hpp"
#include "gradus/core/rng.hpp"
#include "gradus/core/shape.hpp"
#include "gradus/core/tensor.hpp"
#include "gradus/data/example.hpp"
#include "gradus/data/idx.hpp"
#include "gradus/data/pipeline.hpp"
#include "gradus/data/queue.hpp"

namespace gradus::data::detail {

/// An element or the exception raised while producing it.
struct ElementOrError {
  std::optional<Example> value;
  std::exception_ptr error;
  uint64_t ticket = 0;  // prefetch_to: the staged copy of value's tensors (0: none)
};

/// Workers take input elements in order (one at a time, numbered), apply fn outside any lock,
/// and file the result under its number; the consumer waits for the numbers in order. At most
/// `window` numbers are handed out beyond the one the consumer waits for.
class ParallelMapStream final : public Stream {
 public:
  ParallelMapStream(std::unique_ptr<Stream> in, std::shared_ptr<const Dataset::MapFn> fn, int threads, int64_t window);
  GRADUS_INLINE_DECL ~ParallelMapStream() override;

  GRADUS_INLINE_DECL std::optional<Example> next() override;
  GRADUS_INLINE_DECL void cancel() override;

 private:
  void work();
  void shutdown();

  std::unique_ptr<Stream> in_;
  std::shared_ptr<const Dataset::MapFn> fn_;
  const int64_t window_;
  std::mutex in_m_, m_;
  std::condition_variable room_, ready_;
  int64_t next_take_ = 0, next_out_ = 0, end_ = std::numeric_limits<int64_t>::max();
  std::map<int64_t, ElementOrError> done_;
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

class ParallelMapSource final : public UnarySource {
 public:
  ParallelMapSource(std::shared_ptr<const Source> in, Dataset::MapFn fn, int threads, int buffer);
  GRADUS_INLINE_DECL std::unique_ptr<Stream> open(uint64_t key) const override;

 private:
  std::shared_ptr<const Dataset::MapFn> fn_;
  int threads_;
  int64_t window_;
};

// --- prefetch --------------------------------------------------------------------------------------

/// prefetch, and prefetch_to(device): the background thread also starts the copy of each
/// element's tensors to the device (backend::Stager), and next() makes the device wait for it.
class PrefetchStream final : public UnaryStream {
 public:
  PrefetchStream(std::unique_ptr<Stream> in, size_t n, std::optional<Device> to = std::nullopt);
  GRADUS_INLINE_DECL ~PrefetchStream() override;
  GRADUS_INLINE_DECL std::optional<Example> next() override;
  GRADUS_INLINE_DECL void cancel() override;

 private:
  void produce();
  uint64_t stage(Example& e);
  BoundedQueue<ElementOrError> q_;
  std::optional<Device> to_;
  std::unique_ptr<backend::Stager> stager_;
  std::thread thread_;
};

class PrefetchSource final : public UnarySource {
 public:
  PrefetchSource(std::shared_ptr<const Source> in, int64_t n, std::optional<Device> to = std::nullopt);
  GRADUS_INLINE_DECL std::unique_ptr<Stream> open(uint64_t key) const override;

 private:
  int64_t n_;
  std::optional<Device> to_;
};

}  // namespace gradus::data::detail

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::data::detail {
GRADUS_INLINE ParallelMapStream::ParallelMapStream(std::unique_ptr<Stream> in,
                                                   std::shared_ptr<const Dataset::MapFn> fn, int threads,
                                                   int64_t window)
    : in_(std::move(in)), fn_(std::move(fn)), window_(window) {
  workers_.reserve(size_t(threads));
  try {
    for (int t = 0; t < threads; ++t) workers_.emplace_back([this] { work(); });
  } catch (...) {
    shutdown();
    throw;
  }
}

GRADUS_INLINE ParallelMapStream::~ParallelMapStream() { shutdown(); }

GRADUS_INLINE std::optional<Example> ParallelMapStream::next() {
  std::unique_lock lock(m_);
  ready_.wait(lock, [&] { return stop_ || done_.count(next_out_) || next_out_ >= end_; });
  auto it = done_.find(next_out_);
  if (it == done_.end()) return std::nullopt;
  ElementOrError p = std::move(it->second);
  done_.erase(it);
  ++next_out_;
  room_.notify_all();
  lock.unlock();
  if (p.error) std::rethrow_exception(p.error);
  return std::move(p.value);
}

GRADUS_INLINE void ParallelMapStream::cancel() {
  {
    std::lock_guard lock(m_);
    stop_ = true;
  }
  room_.notify_all();
  ready_.notify_all();
  in_->cancel();
}

GRADUS_INLINE void ParallelMapStream::work() {
  for (;;) {
    std::unique_lock in_lock(in_m_);  // input elements are taken in order, one worker at a time
    int64_t seq;
    {
      std::unique_lock lock(m_);
      room_.wait(lock, [&] { return stop_ || next_take_ >= end_ || next_take_ < next_out_ + window_; });
      if (stop_ || next_take_ >= end_) return;
      seq = next_take_++;
    }
    ElementOrError p;
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

GRADUS_INLINE void ParallelMapStream::shutdown() {
  cancel();
  for (auto& t : workers_)
    if (t.joinable()) t.join();
}

GRADUS_INLINE ParallelMapSource::ParallelMapSource(std::shared_ptr<const Source> in, Dataset::MapFn fn,
                                                   int threads, int buffer)
    : UnarySource(std::move(in)), fn_(std::make_shared<Dataset::MapFn>(std::move(fn))), threads_(threads),
      window_(buffer > 0 ? buffer : 2 * int64_t(threads)) {
  GRADUS_CHECK(value_error, threads >= 1 && threads <= kMaxPipelineThreads, "parallel_map: threads must be in [1, ",
               kMaxPipelineThreads, "] (data::kMaxPipelineThreads), got ", threads);
  GRADUS_CHECK(value_error, buffer >= 0 && buffer <= kMaxPipelineBuffer, "parallel_map: buffer must be in [0, ",
               kMaxPipelineBuffer, "] (data::kMaxPipelineBuffer), got ", buffer);
}

GRADUS_INLINE std::unique_ptr<Stream> ParallelMapSource::open(uint64_t key) const {
  return std::make_unique<ParallelMapStream>(in_->open(key), fn_, threads_, window_);
}

GRADUS_INLINE PrefetchStream::PrefetchStream(std::unique_ptr<Stream> in, size_t n, std::optional<Device> to)
    : UnaryStream(std::move(in)), q_(n), to_(to) {
  if (to_ && *to_ != cpu) stager_ = backend::make_stager(*to_, int(n));
  thread_ = std::thread([this] { produce(); });
}

GRADUS_INLINE PrefetchStream::~PrefetchStream() {
  cancel();
  thread_.join();
}

GRADUS_INLINE std::optional<Example> PrefetchStream::next() {
  std::optional<ElementOrError> p = q_.pop();
  if (!p) return std::nullopt;
  if (p->error) std::rethrow_exception(p->error);
  if (p->ticket) stager_->ready(p->ticket);  // the device's work from here on sees the copy
  return std::move(p->value);
}

GRADUS_INLINE uint64_t PrefetchStream::stage(Example& e) {
  std::vector<backend::StagedPiece> pieces;
  std::vector<std::pair<size_t, Value>> staged;  // field index, its tensor on the device
  auto& fields = e.fields();
  for (size_t i = 0; i < fields.size(); ++i)
    std::visit(
        [&](auto& v) {
          using V = std::remove_cvref_t<decltype(v)>;
          if constexpr (!std::is_same_v<V, std::string> && !std::is_same_v<V, Strings>) {
            if (!v.defined() || v.device() == *to_) return;
            if (!stager_ || !v.in_host_memory()) {  // to the host, or between devices: a plain copy
              v = v.to(*to_);
              return;
            }
            V dst = V::empty(v.shape(), *to_);
            pieces.push_back({dst.device_data(), v.data(), size_t(v.size()) * sizeof(typename V::value_type)});
            staged.emplace_back(i, Value(std::move(dst)));
          }
        },
        fields[i].value);
  if (pieces.empty()) return 0;
  const uint64_t ticket = stager_->start(pieces);  // the host tensors may go now
  for (auto& [i, v] : staged) fields[i].value = std::move(v);
  return ticket;
}

GRADUS_INLINE void PrefetchStream::cancel() {
  q_.cancel();
  in_->cancel();
}

GRADUS_INLINE void PrefetchStream::produce() {
  std::exception_ptr error;
  try {
    while (std::optional<Example> e = in_->next()) {
      const uint64_t ticket = to_ ? stage(*e) : 0;
      if (!q_.push(ElementOrError{std::move(e), nullptr, ticket})) return;
    }
  } catch (...) {
    error = std::current_exception();
  }
  // Queued only once the handler is left, so the consumer holds the last reference to it.
  if (error) q_.push(ElementOrError{std::nullopt, std::move(error)});
  q_.close();
}

GRADUS_INLINE PrefetchSource::PrefetchSource(std::shared_ptr<const Source> in, int64_t n, std::optional<Device> to)
    : UnarySource(std::move(in)), n_(n), to_(to) {
  GRADUS_CHECK(value_error, n >= 1 && n <= kMaxPipelineBuffer, to ? "prefetch_to" : "prefetch",
               ": buffer size must be in [1, ", kMaxPipelineBuffer, "] (data::kMaxPipelineBuffer), got ", n);
}

GRADUS_INLINE std::unique_ptr<Stream> PrefetchSource::open(uint64_t key) const {
  return std::make_unique<PrefetchStream>(in_->open(key), size_t(n_), to_);
}
}  // namespace gradus::data::detail
#endif  // GRADUS_DEFINE_COMPILED
