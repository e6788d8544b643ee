// The CPU thread pool (backend/cpu/thread_pool.hpp) and the loops built on it: every task and
// every index of a parallel loop runs exactly once for many sizes and thread counts (3 threads
// oversubscribe a 2-core machine); chunk edges follow `align`; a loop inside a task runs on that
// task's thread; an exception thrown in a task reaches the caller and leaves the pool usable; two
// threads may start jobs at once. The parallel float GEMM gives, at 2 and 3 threads, the same
// bits as at 1 thread (each element of C is summed by one task in the same k order), and those
// bits are checked against a double-precision triple loop. OMP_WAIT_POLICY=passive turns the
// idle threads' spin off.
#include <catch2/catch.hpp>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <omp.h>
#include <stdexcept>
#include <thread>
#include <vector>

#include <gradus/gradus.hpp>

namespace gd = gradus;
namespace cpu = gd::backend::cpu;

namespace {

/// Sets the thread count gradus uses (OpenMP's, for this thread) for one scope.
struct Threads {
  int prev = omp_get_max_threads();
  explicit Threads(int n) { omp_set_num_threads(n); }
  ~Threads() { omp_set_num_threads(prev); }
};

}  // namespace

TEST_CASE("thread pool: OMP_WAIT_POLICY=passive turns the spin off, any other value keeps it", "[backend][threads]") {
  const char* was = std::getenv("OMP_WAIT_POLICY");
  const std::optional<std::string> saved = was ? std::optional<std::string>(was) : std::nullopt;
  auto spin_with = [](const char* policy) {
    if (policy)
      ::setenv("OMP_WAIT_POLICY", policy, 1);
    else
      ::unsetenv("OMP_WAIT_POLICY");
    return cpu::ThreadPool::spin_micros_from_env();
  };
  CHECK(cpu::ThreadPool::kSpinMicros > 0);
  CHECK(spin_with(nullptr) == cpu::ThreadPool::kSpinMicros);
  CHECK(spin_with("active") == cpu::ThreadPool::kSpinMicros);
  CHECK(spin_with("passive") == 0);
  CHECK(spin_with("PASSIVE") == 0);
  CHECK(spin_with("Passive") == 0);
  CHECK(spin_with("passiv") == cpu::ThreadPool::kSpinMicros);
  CHECK(spin_with("") == cpu::ThreadPool::kSpinMicros);
  if (saved)
    ::setenv("OMP_WAIT_POLICY", saved->c_str(), 1);
  else
    ::unsetenv("OMP_WAIT_POLICY");
}

TEST_CASE("thread pool: every task runs exactly once", "[backend][threads]") {
  for (int threads : {1, 2, 3, 5})
    for (int64_t tasks : {0, 1, 2, 3, 7, 8, 64, 1000}) {
      std::vector<std::atomic<int>> runs(size_t(std::max<int64_t>(tasks, 1)));
      cpu::ThreadPool::instance().run(tasks, threads, [&](int64_t i) { runs[size_t(i)].fetch_add(1); });
      for (int64_t i = 0; i < tasks; ++i) {
        INFO("threads " << threads << ", tasks " << tasks << ", task " << i);
        CHECK(runs[size_t(i)].load() == 1);
      }
    }
}

TEST_CASE("parallel_chunks: every index once, in aligned chunks numbered as chunks_for says", "[backend][threads]") {
  for (int threads : {1, 2, 3, 4}) {
    Threads scope(threads);
    for (int64_t n : {int64_t(0), int64_t(1), int64_t(5), int64_t(511), int64_t(4096), int64_t(65535), int64_t(65536),
                      int64_t(100003), int64_t(1) << 20})
      for (int64_t align : {1, 7, 512})
        for (int64_t threshold : {int64_t(0), cpu::kParallelThreshold}) {
          INFO("threads " << threads << ", n " << n << ", align " << align << ", threshold " << threshold);
          const int chunks = cpu::chunks_for(n, align, threshold);
          CHECK(chunks >= 1);
          CHECK(chunks <= cpu::kMaxChunks);
          if (threads == 1 || n < threshold) CHECK(chunks == 1);
          std::vector<std::atomic<int>> seen(static_cast<size_t>(n));
          std::vector<int64_t> begin(size_t(chunks), -1), end(size_t(chunks), -1);
          std::atomic<int> calls{0}, bad_chunk{0};
          cpu::parallel_chunks(
              n, align,
              [&](int t, int64_t b, int64_t e) {
                calls.fetch_add(1);
                if (t < 0 || t >= chunks) {
                  bad_chunk.fetch_add(1);
                  return;
                }
                begin[size_t(t)] = b, end[size_t(t)] = e;
                for (int64_t i = b; i < e; ++i) seen[size_t(i)].fetch_add(1);
              },
              threshold);
          CHECK(calls.load() == chunks);
          CHECK(bad_chunk.load() == 0);
          int64_t wrong = 0;
          for (auto& s : seen) wrong += s.load() != 1;
          CHECK(wrong == 0);
          for (int t = 0; t < chunks; ++t) {  // contiguous, in order, edges multiples of align
            CHECK(begin[size_t(t)] == (t == 0 ? 0 : end[size_t(t) - 1]));
            CHECK((end[size_t(t)] == n || end[size_t(t)] % align == 0));
          }
          CHECK(end.back() == n);
        }
  }
}

TEST_CASE("thread pool: a parallel loop inside a task runs on the task's thread", "[backend][threads]") {
  Threads scope(2);
  constexpr int64_t outer = 16, inner = 1 << 17;
  std::vector<std::atomic<int>> seen(static_cast<size_t>(outer * inner));
  std::atomic<int> foreign{0}, outside{0};  // Catch's CHECK is for the test's own thread only
  cpu::ThreadPool::instance().run(outer, 2, [&](int64_t o) {
    if (!cpu::ThreadPool::in_task()) outside.fetch_add(1);
    const auto self = std::this_thread::get_id();
    cpu::parallel_chunks(inner, 1, [&](int, int64_t b, int64_t e) {
      if (std::this_thread::get_id() != self) foreign.fetch_add(1);
      for (int64_t i = b; i < e; ++i) seen[size_t(o * inner + i)].fetch_add(1);
    });
  });
  CHECK_FALSE(cpu::ThreadPool::in_task());
  CHECK(foreign.load() == 0);
  CHECK(outside.load() == 0);
  int64_t wrong = 0;
  for (auto& s : seen) wrong += s.load() != 1;
  CHECK(wrong == 0);
}

TEST_CASE("thread pool: an exception thrown in a task reaches the caller", "[backend][threads]") {
  for (int threads : {1, 2, 3}) {
    INFO("threads " << threads);
    std::atomic<int> ran{0};
    CHECK_THROWS_WITH(cpu::ThreadPool::instance().run(64, threads,
                                                      [&](int64_t i) {
                                                        ran.fetch_add(1);
                                                        if (i == 5) throw std::runtime_error("task 5 failed");
                                                      }),
                      "task 5 failed");
    CHECK(ran.load() >= 1);
    CHECK_FALSE(cpu::ThreadPool::in_task());
    // the pool is usable afterwards
    std::atomic<int64_t> sum{0};
    cpu::ThreadPool::instance().run(100, threads, [&](int64_t i) { sum.fetch_add(i); });
    CHECK(sum.load() == 4950);
  }
  Threads scope(2);
  CHECK_THROWS_AS(cpu::parallel_chunks(int64_t(1) << 20, 1,
                                       [](int t, int64_t, int64_t) {
                                         if (t == 3) throw gd::value_error("chunk 3");
                                       }),
                  gd::value_error);
}

TEST_CASE("thread pool: jobs started by several threads at once all complete", "[backend][threads]") {
  constexpr int callers = 3, jobs = 200;
  std::vector<int64_t> sums(callers, 0);
  std::vector<std::thread> threads;
  for (int c = 0; c < callers; ++c)
    threads.emplace_back([&, c] {
      for (int j = 0; j < jobs; ++j) {
        std::atomic<int64_t> s{0};
        cpu::ThreadPool::instance().run(16, 2, [&](int64_t i) { s.fetch_add(i + 1); });
        sums[size_t(c)] += s.load();
      }
    });
  for (auto& t : threads) t.join();
  for (int c = 0; c < callers; ++c) CHECK(sums[size_t(c)] == int64_t(jobs) * 136);
}

TEST_CASE("a sum over many chunks gives the same bits every time at a given thread count", "[backend][threads]") {
  gd::Rng rng(11);
  const auto x = gd::Tensor<float>::random_normal({1 << 20}, rng, 0.f, 1.f);
  for (int threads : {1, 2, 3}) {
    Threads scope(threads);
    const float first = gd::eval(gd::sum(x * x + 1.f)).item();
    for (int rep = 0; rep < 20; ++rep) CHECK(gd::eval(gd::sum(x * x + 1.f)).item() == first);
  }
}

TEST_CASE("a parallel float gemm gives the 1-thread bits at 2 and 3 threads, within rounding of a double loop",
          "[backend][threads][matmul]") {
  struct Shape {
    int64_t m, k, n;
    bool ta, tb, add;
  };
  // Each above kGemmParallelWork: row splits (many rows) and column splits (many columns), both
  // transposes, accumulation, partial panels and several k-blocks.
  const std::vector<Shape> shapes = {{128, 784, 500, false, false, false}, {784, 128, 500, true, false, false},
                                     {128, 500, 1024, false, true, true},  {301, 517, 203, true, true, false},
                                     {1001, 300, 40, false, false, true},  {40, 300, 1001, false, false, false}};
  gd::Rng rng(5);
  for (cpu::GemmKernel kernel : {cpu::GemmKernel::avx512, cpu::GemmKernel::avx2}) {
    if (!cpu::gemm_kernel_supported(kernel)) continue;
    for (const Shape& s : shapes) {
      INFO("kernel " << cpu::gemm_kernel_name(kernel) << ", m " << s.m << " k " << s.k << " n " << s.n << ", ta "
                     << s.ta << " tb " << s.tb << " add " << s.add);
      REQUIRE(s.m * s.k * s.n >= cpu::kGemmParallelWork);
      const auto a = gd::Tensor<float>::random_normal({s.m * s.k}, rng, 0.f, 1.f);
      const auto b = gd::Tensor<float>::random_normal({s.k * s.n}, rng, 0.f, 1.f);
      const auto c0 = gd::Tensor<float>::random_normal({s.m * s.n}, rng, 0.f, 1.f);
      auto product = [&](int threads) {
        Threads scope(threads);
        auto c = c0.clone();
        cpu::gemm(a.data(), s.ta, b.data(), s.tb, c.data(), s.m, s.k, s.n, s.add, kernel);
        return c;
      };
      const auto one = product(1);
      for (int threads : {2, 3}) {
        const auto c = product(threads);
        int64_t differ = 0;
        for (int64_t i = 0; i < s.m * s.n; ++i) differ += c.data()[i] != one.data()[i];
        INFO("threads " << threads);
        CHECK(differ == 0);
      }
      // the 1-thread result against a double triple loop, within the rounding bound of test_gemm.cpp
      const double u = std::numeric_limits<float>::epsilon() / 2, d = double(s.k + 2), gamma = d * u / (1 - d * u);
      double worst = 0;
      for (int64_t i = 0; i < s.m; ++i)
        for (int64_t j = 0; j < s.n; ++j) {
          double ref = s.add ? double(c0.data()[i * s.n + j]) : 0.0, mag = std::abs(ref);
          for (int64_t p = 0; p < s.k; ++p) {
            const double t = double(a.data()[s.ta ? p * s.m + i : i * s.k + p]) *
                             double(b.data()[s.tb ? j * s.k + p : p * s.n + j]);
            ref += t;
            mag += std::abs(t);
          }
          const double ratio = std::abs(ref - double(one.data()[i * s.n + j])) / (gamma * mag);
          if (!(ratio <= worst)) worst = ratio;
        }
      CHECK(worst <= 1.0);
    }
  }
}
