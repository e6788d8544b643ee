// gradus/data/queue.hpp — the threading blocks of input pipelines: a bounded blocking queue with
// close and cancel, and a Coordinator that stops a group of threads together (tf.train.Coordinator).
// Needs threads: link gradus::data.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "gradus/core/compiled.hpp"
#include "gradus/core/error.hpp"

namespace gradus::data {

/// A first-in first-out queue of at most `capacity` items, safe for any number of producer and
/// consumer threads.
/// - `push` blocks while the queue is full; `pop` blocks while it is empty.
/// - `close()`: no more pushes (a push after it, or one blocked in it, returns false and leaves
///   the item unpushed); consumers still drain what is queued, then `pop` returns nullopt.
/// - `cancel()`: ends everything now: every blocked push and pop wakes, pushes return false and
///   pops return nullopt even if items remain (they are dropped).
///   gd::data::BoundedQueue<int> q(4);
///   std::thread producer([&] { for (int i = 0; i < 10; ++i) q.push(i); q.close(); });
///   while (auto v = q.pop()) use(*v);   // 0..9, then nullopt
///   producer.join();
template <class T>
class BoundedQueue {
 public:
  explicit BoundedQueue(size_t capacity) : capacity_(capacity) {
    GRADUS_CHECK(value_error, capacity > 0, "BoundedQueue: capacity must be > 0, got 0");
  }
  BoundedQueue(const BoundedQueue&) = delete;
  BoundedQueue& operator=(const BoundedQueue&) = delete;

  /// Waits for room, then appends `item`; false (nothing pushed) once closed or cancelled.
  bool push(T item) {
    std::unique_lock lock(m_);
    not_full_.wait(lock, [&] { return closed_ || items_.size() < capacity_; });
    if (closed_) return false;
    items_.push_back(std::move(item));
    not_empty_.notify_one();
    return true;
  }
  /// Appends `item` when there is room now; false when full, closed or cancelled (the item is
  /// then not moved from).
  bool try_push(T&& item) {
    std::lock_guard lock(m_);
    if (closed_ || items_.size() >= capacity_) return false;
    items_.push_back(std::move(item));
    not_empty_.notify_one();
    return true;
  }
  bool try_push(const T& item) {
    T copy = item;
    return try_push(std::move(copy));
  }
  /// Waits for an item and removes it; nullopt when the queue is closed and drained, or cancelled.
  std::optional<T> pop() {
    std::unique_lock lock(m_);
    not_empty_.wait(lock, [&] { return cancelled_ || closed_ || !items_.empty(); });
    return take();
  }
  /// As `pop`, but gives up after `timeout` (nullopt; `done()` tells a timeout from the end).
  template <class Rep, class Period>
  std::optional<T> pop_for(std::chrono::duration<Rep, Period> timeout) {
    std::unique_lock lock(m_);
    not_empty_.wait_for(lock, timeout, [&] { return cancelled_ || closed_ || !items_.empty(); });
    return take();
  }
  /// Removes an item when one is queued now; nullopt otherwise (`done()` tells whether more can come).
  std::optional<T> try_pop() {
    std::lock_guard lock(m_);
    return take();
  }

  /// No more pushes; queued items can still be popped.
  void close() {
    std::lock_guard lock(m_);
    closed_ = true;
    not_full_.notify_all();
    not_empty_.notify_all();
  }
  /// Ends the queue now: wakes every waiting thread; queued items are dropped.
  void cancel() {
    std::lock_guard lock(m_);
    closed_ = cancelled_ = true;
    items_.clear();
    not_full_.notify_all();
    not_empty_.notify_all();
  }

  bool closed() const {
    std::lock_guard lock(m_);
    return closed_;
  }
  bool cancelled() const {
    std::lock_guard lock(m_);
    return cancelled_;
  }
  /// True when no item will ever be popped again (closed and empty, or cancelled).
  bool done() const {
    std::lock_guard lock(m_);
    return cancelled_ || (closed_ && items_.empty());
  }
  size_t size() const {
    std::lock_guard lock(m_);
    return items_.size();
  }
  size_t capacity() const { return capacity_; }

 private:
  std::optional<T> take() {
    if (cancelled_ || items_.empty()) return std::nullopt;
    std::optional<T> out(std::move(items_.front()));
    items_.pop_front();
    not_full_.notify_one();
    return out;
  }

  const size_t capacity_;
  mutable std::mutex m_;
  std::condition_variable not_full_, not_empty_;
  std::deque<T> items_;
  bool closed_ = false, cancelled_ = false;
};

/// Stops a group of threads together, as tf.train.Coordinator: any thread may `request_stop()`;
/// workers poll `should_stop()`; an exception escaping a thread started by `launch` is recorded
/// (the first one is kept) and requests a stop; `join()` waits for every thread and re-throws
/// the recorded exception in the joining thread.
///   gd::data::Coordinator coord;
///   for (int i = 0; i < 4; ++i)
///     coord.launch([&] { while (!coord.should_stop()) work(); });
///   ...; coord.request_stop();
///   coord.join();   // re-throws what a worker threw, if any
class Coordinator {
 public:
  Coordinator() = default;
  Coordinator(const Coordinator&) = delete;
  Coordinator& operator=(const Coordinator&) = delete;
  /// Requests a stop and joins the threads still running (a recorded exception is dropped).
  ~Coordinator();

  void request_stop();
  bool should_stop() const {
    std::lock_guard lock(m_);
    return stop_;
  }
  /// Waits until a stop is requested or `timeout` passes; true when a stop was requested.
  template <class Rep, class Period>
  bool wait_for_stop(std::chrono::duration<Rep, Period> timeout) const {
    std::unique_lock lock(m_);
    return cv_.wait_for(lock, timeout, [&] { return stop_; });
  }
  /// Clears a stop request and a recorded exception, so the coordinator can run threads again
  /// (after `join`).
  void clear_stop();
  /// Keeps `e` (unless an exception is already kept) and requests a stop.
  void record_exception(std::exception_ptr e);

  /// Starts a thread running `f()` (or `f(*this)`); an exception escaping it is recorded.
  template <class F>
  void launch(F&& f) {
    std::thread t([this, fn = std::forward<F>(f)]() mutable {
      try {
        if constexpr (std::is_invocable_v<F&, Coordinator&>)
          fn(*this);
        else
          fn();
      } catch (...) {
        record_exception(std::current_exception());
      }
    });
    std::lock_guard lock(m_);
    threads_.push_back(std::move(t));
  }
  /// Makes `join` wait for a thread started elsewhere.
  void register_thread(std::thread t);

  /// Joins every thread (call `request_stop` first unless they end by themselves), then
  /// re-throws the first exception a thread recorded.
  void join();

 private:
  mutable std::mutex m_;
  mutable std::condition_variable cv_;
  bool stop_ = false;
  std::exception_ptr error_;
  std::vector<std::thread> threads_;
};

}  // namespace gradus::data

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::data {
GRADUS_INLINE Coordinator::~Coordinator() {
  request_stop();
  for (auto& t : threads_)
    if (t.joinable()) t.join();
}

GRADUS_INLINE void Coordinator::request_stop() {
  std::lock_guard lock(m_);
  stop_ = true;
  cv_.notify_all();
}

GRADUS_INLINE void Coordinator::clear_stop() {
  std::lock_guard lock(m_);
  stop_ = false;
  error_ = nullptr;
}

GRADUS_INLINE void Coordinator::record_exception(std::exception_ptr e) {
  std::lock_guard lock(m_);
  if (!error_) error_ = std::move(e);
  stop_ = true;
  cv_.notify_all();
}

GRADUS_INLINE void Coordinator::register_thread(std::thread t) {
  std::lock_guard lock(m_);
  threads_.push_back(std::move(t));
}

GRADUS_INLINE void Coordinator::join() {
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(m_);
    threads.swap(threads_);
  }
  for (auto& t : threads)
    if (t.joinable()) t.join();
  std::exception_ptr e;
  {
    std::lock_guard lock(m_);
    e = error_;
  }
  if (e) std::rethrow_exception(e);
}
}  // namespace gradus::data
#endif  // GRADUS_DEFINE_COMPILED
