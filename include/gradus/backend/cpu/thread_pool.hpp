// gradus/backend/cpu/thread_pool.hpp — the threads gradus' CPU kernels run on.
//
// One process-wide pool of persistent workers, started lazily (the first parallel job that
// wants n threads starts n - 1 workers). A job is `tasks` independent tasks, f(0) ... f(tasks-1),
// claimed one at a time from an atomic counter by the calling thread and by the workers, so:
// - the caller never waits for a worker to start: it begins on the tasks at once, and if a
//   worker is descheduled (another process busy on its core) the caller takes the tasks it
//   would have run; it waits only for tasks already claimed and still running;
// - a worker that finds no job waits for one for half a millisecond (kSpinMicros) before it
//   blocks on a futex (std::atomic::wait): for 20 us (kPauseMicros) it spins, then it yields
//   its core to any other runnable thread between checks. The caller waits for the last running
//   task the same way. The wait covers the serial work between two parallel jobs of a training
//   step (the small ops between the products of an LSTM decoder step, say), so the next job
//   finds the workers awake: waking a blocked worker costs a system call on the caller's side
//   and tens of microseconds before it runs. Yielding instead of spinning keeps that wait from
//   taking a core from another busy process. OpenMP runtimes spin longer by default (libgomp
//   300,000 spins, LLVM's and Intel's 200 ms); as with them, OMP_WAIT_POLICY=passive makes idle
//   threads block at once;
// - a job from inside a task, or while another thread's job holds the pool, runs its tasks in
//   order on the calling thread;
// - the first exception a task throws is rethrown to the caller once every claimed task has
//   finished; tasks not yet started are skipped.
// - a task runs under the caller's gd::autocast precision (core/precision.hpp), whichever
//   thread runs it: a float product inside a task rounds its inputs as the caller asked.
// Which thread runs a task never changes what it computes, so callers that split work into
// tasks as a function of the problem size alone (parallel.hpp) get the same result on any
// thread and whatever the load.
//
// The thread count is num_threads(): OpenMP's setting for the calling thread
// (omp_set_num_threads, OMP_NUM_THREADS), at most kMaxThreads; std::thread::hardware_concurrency()
// in a build without OpenMP. OpenMP's own threads (and its wait policy) are used only by Eigen's
// GEMM for doubles.
#pragma once
#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <thread>
#include <vector>
#if defined(_OPENMP)
#include <omp.h>
#endif

#include "gradus/core/compiled.hpp"
#include "gradus/core/error.hpp"
#include "gradus/core/precision.hpp"

namespace gradus::backend::cpu {

/// Most threads a gradus kernel uses.
inline constexpr int kMaxThreads = 16;

/// The threads gradus' kernels use on the calling thread: omp_get_max_threads() (so
/// omp_set_num_threads and OMP_NUM_THREADS set it), clamped to [1, kMaxThreads].
inline int num_threads() {
#if defined(_OPENMP)
  return std::clamp(omp_get_max_threads(), 1, kMaxThreads);
#else
  static const int n = std::clamp(int(std::thread::hardware_concurrency()), 1, kMaxThreads);
  return n;
#endif
}

namespace detail {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

/// True on a pool worker, and on a caller while it runs its job's tasks.
inline thread_local bool in_parallel_task = false;

}  // namespace detail

/// The process-wide pool (see the file comment). `run(tasks, threads, f)` calls f(i) for every
/// i in [0, tasks) exactly once, on at most `threads` threads counting the caller, and returns
/// when all have returned.
class ThreadPool {
 public:
  /// How long an idle worker, and a caller waiting for a task's end, wait before blocking
  /// (none under OMP_WAIT_POLICY=passive): spinning for the first kPauseMicros, then yielding
  /// between checks. With 20 us of spinning and no more, the two-thread training steps of
  /// benchmarks/ on a 2-vCPU Xeon (AVX-512) took 21.0 ms (translation) and 0.971 ms (MLP); with
  /// this wait 17.8 and 0.838 ms. With a busy loop on the other core: 24.8 and 1.40 ms before,
  /// 25.0 and 1.33 ms after, where 500 us of spinning alone took 27-29 and 1.45-1.51 ms (medians).
  static constexpr int kSpinMicros = 500;
  static constexpr int kPauseMicros = 20;

  /// The wait that applies: kSpinMicros, or 0 when OMP_WAIT_POLICY is "passive" (any case).
  static int spin_micros_from_env() {
    const char* policy = std::getenv("OMP_WAIT_POLICY");
    std::string p = policy ? policy : "";
    for (char& ch : p) ch = char(std::tolower(static_cast<unsigned char>(ch)));
    return p == "passive" ? 0 : kSpinMicros;
  }

  static ThreadPool& instance();

  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  /// Whether the calling thread is inside a task (a pool worker's, or a caller's own): work
  /// started there runs serially.
  static bool in_task() { return detail::in_parallel_task; }

  template <class F>
  void run(int64_t tasks, int threads, F&& f) {
    using Fn = std::remove_reference_t<F>;
    void* ctx = const_cast<void*>(static_cast<const void*>(std::addressof(f)));
    run(tasks, threads, [](void* c, int64_t i) { (*static_cast<Fn*>(c))(i); }, ctx);
  }
  /// The same with the task as a function pointer and its context: calls fn(ctx, i).
  void run(int64_t tasks, int threads, void (*fn)(void*, int64_t), void* ctx);

  /// Workers started so far.
  int workers() const { return int(nworkers_.load()); }

 private:
  using TaskFn = void (*)(void*, int64_t);

  // claim_ packs a job: bits 32..63 its sequence number, 16..31 its task count, 0..15 the next
  // unclaimed task, so one compare-exchange both checks the job and claims a task of it.
  static constexpr int kSeqShift = 32, kTasksShift = 16;
  static constexpr uint64_t kField = (uint64_t(1) << 16) - 1;

 public:
  /// Most tasks one job may have.
  static constexpr int64_t kMaxTasks = int64_t(kField);

 private:
  ThreadPool() = default;

  static void run_serial(int64_t tasks, TaskFn fn, void* ctx);

  void ensure_workers(int n);

  void run_job(int64_t tasks, int threads, TaskFn fn, void* ctx);

  /// Claims and runs tasks of `job` (a claim_ value of that job) until none is left.
  void work_on(uint64_t job);

  void worker(int index);

  /// Waits while `pending()` holds, for at most spin_micros_: spinning for kPauseMicros, then
  /// yielding the core between checks.
  template <class Pending>
  void spin_while(Pending pending) const {
    using Clock = std::chrono::steady_clock;
    const auto start = Clock::now();
    const auto pause_end = start + std::chrono::microseconds(std::min(spin_micros_, kPauseMicros)),
               end = start + std::chrono::microseconds(spin_micros_);
    while (pending()) {
      const auto now = Clock::now();
      if (now >= end) return;
      if (now < pause_end)
        for (int i = 0; i < 16; ++i) detail::cpu_relax();
      else
        std::this_thread::yield();
    }
  }

  const int spin_micros_ = spin_micros_from_env();  // read once, when the pool starts
  std::atomic<bool> busy_{false};
  std::atomic<uint64_t> claim_{0};
  std::atomic<TaskFn> fn_{nullptr};
  std::atomic<void*> ctx_{nullptr};
  std::atomic<int> threads_wanted_{0};
  std::atomic<Precision> precision_{Precision::fp32};  // the caller's product precision
  std::atomic<uint32_t> done_{0};
  std::atomic<bool> failed_{false};
  std::atomic<bool> caller_waiting_{false};
  std::exception_ptr error_;
  std::mutex error_mutex_;
  uint64_t seq_ = 0;  // written by the caller holding busy_ only
  std::atomic<uint32_t> generation_{0};
  std::atomic<int> sleepers_{0};
  std::atomic<int> nworkers_{0};
  std::mutex start_mutex_;
  std::vector<std::thread> threads_;
};

}  // namespace gradus::backend::cpu

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::backend::cpu {
GRADUS_INLINE ThreadPool& ThreadPool::instance() {
  // Never destroyed: a static object's destructor at exit might otherwise run while another
  // one still uses the pool. The blocked workers end with the process.
  static ThreadPool* pool = new ThreadPool;
  return *pool;
}
GRADUS_INLINE void ThreadPool::run(int64_t tasks, int threads, TaskFn fn, void* ctx) {
  if (tasks <= 0) return;
  GRADUS_CHECK(value_error, tasks <= kMaxTasks, "ThreadPool::run: at most ", kMaxTasks, " tasks, got ", tasks);
  threads = int(std::min<int64_t>({int64_t(threads), tasks, int64_t(kMaxThreads)}));
  if (threads <= 1 || tasks == 1 || in_task() || busy_.exchange(true, std::memory_order_acquire)) {
    run_serial(tasks, fn, ctx);
    return;
  }
  struct Release {
    std::atomic<bool>& busy;
    ~Release() { busy.store(false, std::memory_order_release); }
  } release{busy_};
  ensure_workers(threads - 1);
  run_job(tasks, threads, fn, ctx);
}
GRADUS_INLINE void ThreadPool::run_serial(int64_t tasks, TaskFn fn, void* ctx) {
  const bool outer = detail::in_parallel_task;
  detail::in_parallel_task = true;
  struct Restore {
    bool v;
    ~Restore() { detail::in_parallel_task = v; }
  } restore{outer};
  for (int64_t i = 0; i < tasks; ++i) fn(ctx, i);
}
GRADUS_INLINE void ThreadPool::ensure_workers(int n) {
  if (nworkers_.load() >= n) return;
  std::lock_guard<std::mutex> lock(start_mutex_);
  while (int(threads_.size()) < n) {
    const int index = int(threads_.size());
    threads_.emplace_back([this, index] { worker(index); });
    nworkers_.store(int(threads_.size()));
  }
}
GRADUS_INLINE void ThreadPool::run_job(int64_t tasks, int threads, TaskFn fn, void* ctx) {
  fn_.store(fn);
  ctx_.store(ctx);
  precision_.store(autocast_precision());
  threads_wanted_.store(threads);
  done_.store(0);
  failed_.store(false);
  error_ = nullptr;
  seq_ = (seq_ + 1) & ((uint64_t(1) << (64 - kSeqShift)) - 1);
  const uint64_t job = (seq_ << kSeqShift) | (uint64_t(tasks) << kTasksShift);
  claim_.store(job);
  generation_.fetch_add(1);
  if (sleepers_.load() > 0) generation_.notify_all();

  detail::in_parallel_task = true;
  work_on(job);
  detail::in_parallel_task = false;

  // Wait for the tasks other threads claimed: spin, then yield (spin_while), then block.
  const auto all = uint32_t(tasks);
  if (done_.load() != all) {
    spin_while([&] { return done_.load(std::memory_order_acquire) != all; });
    caller_waiting_.store(true);
    for (uint32_t d; (d = done_.load()) != all;) done_.wait(d);
    caller_waiting_.store(false);
  }
  if (failed_.load()) {
    std::exception_ptr e = error_;
    error_ = nullptr;
    std::rethrow_exception(e);
  }
}
GRADUS_INLINE void ThreadPool::work_on(uint64_t job) {
  const uint64_t head = job & ~kField;
  const int64_t tasks = int64_t((job >> kTasksShift) & kField);
  TaskFn fn = nullptr;
  void* ctx = nullptr;
  for (uint64_t c = claim_.load();;) {
    if ((c & ~kField) != head || int64_t(c & kField) >= tasks) return;
    // Read before the claim: a successful claim proves the job was still current, and the
    // fields of the next job are written only after every task of this one has finished.
    if (!fn) fn = fn_.load(), ctx = ctx_.load(), ::gradus::detail::product_precision_slot() = precision_.load();
    if (!claim_.compare_exchange_weak(c, c + 1)) continue;
    const int64_t i = int64_t(c & kField);
    if (!failed_.load(std::memory_order_relaxed)) {
      try {
        fn(ctx, i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex_);
        if (!failed_.load()) {
          error_ = std::current_exception();
          failed_.store(true);
        }
      }
    }
    if (done_.fetch_add(1) + 1 == uint32_t(tasks) && caller_waiting_.load()) done_.notify_all();
    c = claim_.load();
  }
}
GRADUS_INLINE void ThreadPool::worker(int index) {
  detail::in_parallel_task = true;
  uint32_t seen = generation_.load();
  for (;;) {
    // Wait for a new job: spin, then yield (spin_while), then block.
    uint32_t g = generation_.load(std::memory_order_acquire);
    if (g == seen) {
      spin_while([&] { return (g = generation_.load(std::memory_order_acquire)) == seen; });
      if (g == seen) {
        sleepers_.fetch_add(1);
        while ((g = generation_.load()) == seen) generation_.wait(seen);
        sleepers_.fetch_sub(1);
      }
    }
    seen = g;
    if (index + 1 >= threads_wanted_.load()) continue;  // this job wants fewer threads
    work_on(claim_.load());
  }
}
}  // namespace gradus::backend::cpu
#endif  // GRADUS_DEFINE_COMPILED
