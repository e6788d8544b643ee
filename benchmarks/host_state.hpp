// benchmarks/host_state.hpp — how far apart the machine has put two threads, measured beside
// each benchmark that runs on more than one: the round trip of a cache line between them.
//
// A guest's vCPUs can sit on cores that share a last-level cache or on different dies, and the
// host may move them while a benchmark runs. On the 2-vCPU AMD EPYC Zen 4 guests of
// docs/performance.md the round trip was 50-110 ns at some times and 300-700 ns at others, for
// seconds to minutes, and a parallel step whose threads pass data between them (every training
// step) ran up to twice as slow in the second state. So the multi-thread rows of the step
// benchmarks and bench_gemm carry two counters, `rt_before_ns` and `rt_after_ns`: the round trip
// measured just before and just after the timed iterations.
#pragma once
#include <benchmark/benchmark.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

namespace bench {

/// The mean time, in ns, for a cache line to go from this thread to a second one and back: a
/// flag passed back and forth up to `trips` times, for at most about 20 ms (a second thread
/// that has no core of its own — a busy or one-CPU machine — would make each trip a time slice),
/// after 30 ms asleep. 0 on a machine with one hardware thread.
inline double core_round_trip_ns(int trips = 20000) {
  if (std::thread::hardware_concurrency() < 2) return 0;
  // Idle threads of the code just timed (gradus' pool: 0.5 ms; libgomp's, under Eigen: longer)
  // keep spinning on the other core for a while; measured among them, a trip waits for a time
  // slice. They sleep by then.
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  struct alignas(64) Line {
    std::atomic<int> turn{0};  // 1: the other thread's turn, 0: ours, -1: stop
  } line;
  std::thread other([&line] {
    for (;;) {
      int t;
      while ((t = line.turn.load(std::memory_order_acquire)) == 0) {
      }
      if (t < 0) return;
      line.turn.store(0, std::memory_order_release);
    }
  });
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now(), deadline = start + std::chrono::milliseconds(20);
  int done = 0;
  while (done < trips) {
    line.turn.store(1, std::memory_order_release);
    while (line.turn.load(std::memory_order_acquire) != 0) {
    }
    if ((++done & 15) == 0 && Clock::now() > deadline) break;
  }
  const double ns = std::chrono::duration<double, std::nano>(Clock::now() - start).count() / done;
  line.turn.store(-1, std::memory_order_release);
  other.join();
  return ns;
}

/// Sets a benchmark's counters rt_before_ns and rt_after_ns when it runs on `threads` > 1: made
/// just before the timed iterations, it measures the round trip then, and again when it goes out
/// of scope after them.
///   const bench::RoundTrips trips(state, threads);
///   for (auto _ : state) { ... }
class RoundTrips {
 public:
  RoundTrips(benchmark::State& state, int64_t threads)
      : state_(state), on_(threads > 1), before_(on_ ? core_round_trip_ns() : 0) {}
  ~RoundTrips() {
    if (!on_) return;
    state_.counters["rt_before_ns"] = before_;
    state_.counters["rt_after_ns"] = core_round_trip_ns();
  }
  RoundTrips(const RoundTrips&) = delete;
  RoundTrips& operator=(const RoundTrips&) = delete;

 private:
  benchmark::State& state_;
  bool on_;
  double before_;
};

}  // namespace bench
