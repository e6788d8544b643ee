// benchmarks/allocation.cpp — why gradus reuses buffers. Every iteration gets a 4 MiB buffer
// (2^20 floats) and writes all of it:
//   fresh_aligned_alloc  std::aligned_alloc + write + free (glibc decides whether pages are reused)
//   fresh_mmap           mmap + write + munmap: always fresh pages, each first-touched
//   fresh_operator_new   ::operator new(align 64) + write + delete
//   reused_buffer        one buffer allocated up front, written every iteration (the floor)
//   gradus_tensor        gd::Tensor<float>({2^20}) + write (served by the caching allocator)
//   gradus_eval          gd::eval(a * b + c) over 2^20 floats (one new output buffer per call)
// bytes_per_second counts the bytes written to the new buffer. The gradus cases report the
// allocator's counters (gd::memory_stats()): sys_allocs is how many blocks were obtained from the
// system during the timed loop, after one warm-up iteration; it should be 0.
#include <benchmark/benchmark.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <new>

#include <gradus/gradus.hpp>

namespace gd = gradus;

namespace {

constexpr int64_t kFloats = int64_t(1) << 20;
constexpr size_t kBytes = size_t(kFloats) * sizeof(float);

void write(float* p) {
  std::fill_n(p, kFloats, 1.f);
  benchmark::DoNotOptimize(p);
  benchmark::ClobberMemory();
}

void set_bytes(benchmark::State& state) { state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(kBytes)); }

void BM_fresh_aligned_alloc(benchmark::State& state) {
  for (auto _ : state) {
    auto* p = static_cast<float*>(std::aligned_alloc(64, kBytes));
    write(p);
    std::free(p);
  }
  set_bytes(state);
}

void BM_fresh_mmap(benchmark::State& state) {
  for (auto _ : state) {
    void* m = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
      state.SkipWithError("mmap failed");
      break;
    }
    write(static_cast<float*>(m));
    munmap(m, kBytes);
  }
  set_bytes(state);
}

void BM_fresh_operator_new(benchmark::State& state) {
  for (auto _ : state) {
    auto* p = static_cast<float*>(::operator new(kBytes, std::align_val_t(64)));
    write(p);
    ::operator delete(p, std::align_val_t(64));
  }
  set_bytes(state);
}

void BM_reused_buffer(benchmark::State& state) {
  auto* p = static_cast<float*>(std::aligned_alloc(64, kBytes));
  write(p);
  for (auto _ : state) write(p);
  std::free(p);
  set_bytes(state);
}

/// Runs `body` once to warm the cache, then times it and reports the allocator's counters.
template <class F>
void with_memory_stats(benchmark::State& state, F&& body) {
  body();
  const gd::MemoryStats before = gd::memory_stats();
  for (auto _ : state) body();
  const gd::MemoryStats after = gd::memory_stats();
  state.counters["sys_allocs"] = double(after.system_allocations - before.system_allocations);
  state.counters["cache_hits"] =
      benchmark::Counter(double(after.cache_hits - before.cache_hits), benchmark::Counter::kAvgIterations);
  state.counters["MiB_cached"] = double(after.bytes_cached) / double(1 << 20);
  set_bytes(state);
}

void BM_gradus_tensor(benchmark::State& state) {
  with_memory_stats(state, [] {
    gd::Tensor<float> t({kFloats});
    write(t.data());
  });
}

void BM_gradus_eval(benchmark::State& state) {
  gd::Rng rng(5);
  const auto a = gd::Tensor<float>::random_uniform({kFloats}, rng), b = gd::Tensor<float>::random_uniform({kFloats}, rng),
             c = gd::Tensor<float>::random_uniform({kFloats}, rng);
  with_memory_stats(state, [&] {
    gd::Tensor<float> t = gd::eval(a * b + c);
    benchmark::DoNotOptimize(t.data());
    benchmark::ClobberMemory();
  });
}

BENCHMARK(BM_fresh_aligned_alloc)->Name("allocation/fresh_aligned_alloc")->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_fresh_mmap)->Name("allocation/fresh_mmap")->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_fresh_operator_new)->Name("allocation/fresh_operator_new")->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_reused_buffer)->Name("allocation/reused_buffer")->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_gradus_tensor)->Name("allocation/gradus_tensor")->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_gradus_eval)->Name("allocation/gradus_eval")->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
