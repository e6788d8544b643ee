// benchmarks/gemm.cpp — float GEMM, backend::gemm into a preallocated c, against OpenBLAS'
// cblas_sgemm (built when CMake finds OpenBLAS), fixed-seed random inputs:
//   gemm/gradus    the kernel gradus picks for this CPU (what matmul and conv2d run);
//   gemm/avx2, gemm/eigen, ...  each other kernel the CPU supports, forced;
//   gemm/openblas  the peer (docs/performance.md: gradus >= 0.95x its throughput).
// Shapes: gemm_shapes.hpp (1024^3 and the GEMMs of one training step of the MLP 784-500-10 and of the LeNet CNN
// at batch 128, as backend::gemm receives them; ta/tb: a/b stored transposed).
// OpenBLAS' pthreads spin for a while after each call, which slows whatever runs next on a
// 2-core machine: benchmarks/gemm-vs-openblas runs each implementation in its own process.
#include <benchmark/benchmark.h>
#include <omp.h>

#include <array>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <gradus/gradus.hpp>

#include "gemm_shapes.hpp"

#if defined(GRADUS_BENCH_OPENBLAS)
#include <cblas.h>
#endif

namespace gd = gradus;
namespace cpu = gd::backend::cpu;
using Tensor = gd::Tensor<float>;

namespace {

/// c = a · b by one implementation: (a, ta, b, tb, c, m, k, n).
using Gemm = std::function<void(const float*, bool, const float*, bool, float*, int64_t, int64_t, int64_t)>;

/// Registers gemm/<impl> on every shape at 1 and 2 threads; `threads(t)` sets an
/// implementation's own thread count (gradus and Eigen use OpenMP's).
void register_gemm(const std::string& impl, Gemm gemm, std::function<void(int)> threads = {}) {
  auto* b = benchmark::RegisterBenchmark(("gemm/" + impl).c_str(), [gemm, threads](benchmark::State& state) {
    const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
    const bool ta = state.range(3) != 0, tb = state.range(4) != 0;
    omp_set_num_threads(int(state.range(5)));
    if (threads) threads(int(state.range(5)));
    gd::Rng rng(3);
    const Tensor a = Tensor::random_uniform({m, k}, rng, -1, 1), b = Tensor::random_uniform({k, n}, rng, -1, 1);
    Tensor c({m, n});
    for (auto _ : state) {
      gemm(a.data(), ta, b.data(), tb, c.data(), m, k, n);
      benchmark::DoNotOptimize(c.data());
      benchmark::ClobberMemory();
    }
    state.counters["FLOPS"] = benchmark::Counter(2.0 * double(m) * double(k) * double(n),
                                                 benchmark::Counter::kIsIterationInvariantRate);
  });
  b->ArgNames({"m", "k", "n", "ta", "tb", "threads"})->UseRealTime()->MinTime(0.1)->Unit(benchmark::kMicrosecond);
  for (int t : {1, 2})
    for (const auto& s : gemm_shapes) b->Args({s[0], s[1], s[2], s[3], s[4], t});
}

}  // namespace

int main(int argc, char** argv) {
  register_gemm("gradus", [](const float* a, bool ta, const float* b, bool tb, float* c, int64_t m, int64_t k,
                             int64_t n) { gd::backend::gemm(a, ta, b, tb, c, m, k, n, false, gd::cpu); });
  for (cpu::GemmKernel kernel :
       {cpu::GemmKernel::avx512, cpu::GemmKernel::avx2, cpu::GemmKernel::loops, cpu::GemmKernel::eigen})
    if (kernel != cpu::gemm_kernel() && cpu::gemm_kernel_supported(kernel))
      register_gemm(std::string(cpu::gemm_kernel_name(kernel)),
                    [kernel](const float* a, bool ta, const float* b, bool tb, float* c, int64_t m, int64_t k,
                             int64_t n) { cpu::gemm(a, ta, b, tb, c, m, k, n, false, kernel); });
#if defined(GRADUS_BENCH_OPENBLAS)
  register_gemm(
      "openblas",
      [](const float* a, bool ta, const float* b, bool tb, float* c, int64_t m, int64_t k, int64_t n) {
        cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(m), int(n),
                    int(k), 1.f, a, ta ? int(m) : int(k), b, tb ? int(k) : int(n), 0.f, c, int(n));
      },
      [](int t) { openblas_set_num_threads(t); });
#endif
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
