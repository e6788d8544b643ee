// benchmarks/matmul.cpp — gd::matmul on tensors against Eigen's `C.noalias() = A * B` on
// row-major maps of the same memory, float, fixed-seed random inputs:
//   1024x1024 x 1024x1024  the throughput case (benchmarks/run reports gradus / eigen
//                          throughput, goal >= 0.95);
//   100x784 x 784x10       the seed model's forward GEMM, where per-call overhead shows.
// gd::matmul returns a new tensor (its buffer comes from the caching allocator); the Eigen side
// writes a preallocated one.
#include <benchmark/benchmark.h>
#include <omp.h>

#include <gradus/core/eigen.hpp>  // Eigen/Core, included as gradus includes it

#include <gradus/gradus.hpp>

namespace gd = gradus;
using Tensor = gd::Tensor<float>;
using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

namespace {

struct Operands {
  Tensor a, b;
  Operands(int64_t m, int64_t k, int64_t n) {
    gd::Rng rng(3);
    a = Tensor::random_uniform({m, k}, rng, -1, 1);
    b = Tensor::random_uniform({k, n}, rng, -1, 1);
  }
};

void setup(benchmark::State& state) { omp_set_num_threads(int(state.range(3))); }
void set_flops(benchmark::State& state) {
  state.counters["FLOPS"] = benchmark::Counter(2.0 * double(state.range(0)) * double(state.range(1)) * double(state.range(2)),
                                               benchmark::Counter::kIsIterationInvariantRate);
}

void BM_gradus(benchmark::State& state) {
  setup(state);
  const Operands x(state.range(0), state.range(1), state.range(2));
  for (auto _ : state) {
    Tensor c = gd::matmul(x.a, x.b);
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  set_flops(state);
}

void BM_eigen(benchmark::State& state) {
  setup(state);
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  const Operands x(m, k, n);
  Tensor c({m, n});
  const Eigen::Map<const Matrix> A(x.a.data(), m, k), B(x.b.data(), k, n);
  Eigen::Map<Matrix> C(c.data(), m, n);
  for (auto _ : state) {
    C.noalias() = A * B;
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  set_flops(state);
}

// threads = OpenMP threads, which Eigen's GEMM uses.
#define MATMUL_BENCH(fn, label)                        \
  BENCHMARK(fn)                                        \
      ->Name("matmul/" label)                          \
      ->ArgNames({"m", "k", "n", "threads"})           \
      ->Args({1024, 1024, 1024, 1})                    \
      ->Args({1024, 1024, 1024, 2})                    \
      ->Args({100, 784, 10, 1})                        \
      ->Args({100, 784, 10, 2})                        \
      ->UseRealTime()                                  \
      ->Unit(benchmark::kMicrosecond)
MATMUL_BENCH(BM_gradus, "gradus");
MATMUL_BENCH(BM_eigen, "eigen");

}  // namespace

BENCHMARK_MAIN();
