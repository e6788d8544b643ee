// benchmarks/gemm.cpp — float GEMM, backend::gemm into a preallocated c, against OpenBLAS'
// cblas_sgemm (built when CMake finds OpenBLAS), fixed-seed random inputs:
//   gemm/gradus    the kernel gradus picks for this CPU (what matmul and conv2d run);
//   gemm/avx2, gemm/eigen, ...  each other kernel the CPU supports, forced;
//   gemm/packed_b  the same kernel on a B packed once ahead (cpu::GemmB), as conv2d multiplies
//                  tile after tile of patches by its filter: the A packing and the kernel only;
//   gemm_kernel/avx512 (or avx2)  the register kernel alone, on panels that stay in L1 and L2:
//                  the rate a product would reach if packing and cache misses cost nothing;
//   gemm/bf16_dot, gemm/bf16_convert  the products of gd::autocast(gd::bf16): AVX512-BF16 dot
//                  products where the CPU has them, and the conversion fallback;
//   gemm/openblas  the peer (docs/performance.md: gradus >= 0.95x its throughput).
// Every row also reports `of_peak`: its throughput over this core's peak times the threads, the
// peak measured at start-up by a loop of independent fused multiply-adds on registers only, in
// the widest vectors gradus' kernel uses (AVX-512: 16 floats, AVX2: 8), printed first.
// Shapes: gemm_shapes.hpp (1024^3 and the GEMMs of one training step of the MLP 784-500-10 and of the LeNet CNN
// at batch 128, as backend::gemm receives them; ta/tb: a/b stored transposed).
// OpenBLAS' pthreads spin for a while after each call, which slows whatever runs next on a
// 2-core machine: benchmarks/gemm-vs-openblas runs each implementation in its own process.
#include <benchmark/benchmark.h>
#include <omp.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <gradus/gradus.hpp>

#include "gemm_shapes.hpp"
#include "host_state.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#if defined(GRADUS_BENCH_OPENBLAS)
#include <cblas.h>
#endif

namespace gd = gradus;
namespace cpu = gd::backend::cpu;
using Tensor = gd::Tensor<float>;

namespace {

#if defined(__x86_64__)
/// Twelve independent chains of fused multiply-adds, `iters` rounds, in variables the compiler
/// keeps in registers (an array of accumulators may live on the stack): 12 chains cover two FMA
/// units' latency; each starts from its own value, so that no two are the same computation. The
/// sum keeps the work.
#define GRADUS_FMA_CHAINS(V, SET, FMA, ADD, X, Y)                                                \
  V a0 = SET(0.f), a1 = SET(1.f), a2 = SET(2.f), a3 = SET(3.f), a4 = SET(4.f), a5 = SET(5.f);    \
  V a6 = SET(6.f), a7 = SET(7.f), a8 = SET(8.f), a9 = SET(9.f), a10 = SET(10.f), a11 = SET(11.f); \
  for (int64_t it = 0; it < iters; ++it) {                                                       \
    a0 = FMA(a0, X, Y), a1 = FMA(a1, X, Y), a2 = FMA(a2, X, Y), a3 = FMA(a3, X, Y);              \
    a4 = FMA(a4, X, Y), a5 = FMA(a5, X, Y), a6 = FMA(a6, X, Y), a7 = FMA(a7, X, Y);              \
    a8 = FMA(a8, X, Y), a9 = FMA(a9, X, Y), a10 = FMA(a10, X, Y), a11 = FMA(a11, X, Y);          \
  }                                                                                              \
  const V s = ADD(ADD(ADD(ADD(a0, a1), ADD(a2, a3)), ADD(ADD(a4, a5), ADD(a6, a7))), ADD(ADD(a8, a9), ADD(a10, a11)));
__attribute__((target("avx512f"))) float fma_loop_avx512(int64_t iters) {
  GRADUS_FMA_CHAINS(__m512, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_add_ps, _mm512_set1_ps(0.999999f),
                    _mm512_set1_ps(1e-7f))
  return _mm512_reduce_add_ps(s);
}
__attribute__((target("avx2,fma"))) float fma_loop_avx2(int64_t iters) {
  GRADUS_FMA_CHAINS(__m256, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_add_ps, _mm256_set1_ps(0.999999f),
                    _mm256_set1_ps(1e-7f))
  float out[8];
  _mm256_storeu_ps(out, s);
  return out[0] + out[7];
}
#undef GRADUS_FMA_CHAINS
#endif

/// One core's float peak in FLOP/s for the vectors of gradus' kernel: the best of 5 timed runs
/// of the register-only FMA loop (0 where it has none).
double core_peak() {
#if defined(__x86_64__)
  const bool wide = cpu::gemm_kernel() == cpu::GemmKernel::avx512;
  if (!wide && cpu::gemm_kernel() != cpu::GemmKernel::avx2) return 0;
  const int64_t iters = 20'000'000;
  const double flops = double(iters) * 12 * (wide ? 16 : 8) * 2;
  double best = 0;
  for (int r = 0; r < 5; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(wide ? fma_loop_avx512(iters) : fma_loop_avx2(iters));
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, flops / s);
  }
  std::printf("peak: %.1f GFLOP/s per core (register-only %s FMA loop)\n", best * 1e-9, wide ? "AVX-512" : "AVX2");
  return best;
#else
  return 0;
#endif
}

/// c = a · b by one implementation: (a, ta, b, tb, c, m, k, n).
using Gemm = std::function<void(const float*, bool, const float*, bool, float*, int64_t, int64_t, int64_t)>;

/// Sets a case's counters from the FLOPs of one iteration: FLOPS, and with a measured `peak`
/// of_peak, the rate of (FLOP / peak FLOP/s) per second over `threads` cores, which is the
/// fraction of the peak.
void set_rates(benchmark::State& state, double flops, double peak, int threads) {
  state.counters["FLOPS"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
  if (peak > 0)
    state.counters["of_peak"] =
        benchmark::Counter(flops / (peak * double(threads)), benchmark::Counter::kIsIterationInvariantRate);
}

/// Registers gemm/<impl> on every shape at 1 and 2 threads; `threads(t)` sets an
/// implementation's own thread count (gradus and Eigen use OpenMP's).
void register_gemm(const std::string& impl, Gemm gemm, double peak, std::function<void(int)> threads = {}) {
  auto* b = benchmark::RegisterBenchmark(("gemm/" + impl).c_str(), [gemm, threads, peak](benchmark::State& state) {
    const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
    const bool ta = state.range(3) != 0, tb = state.range(4) != 0;
    omp_set_num_threads(int(state.range(5)));
    if (threads) threads(int(state.range(5)));
    gd::Rng rng(3);
    const Tensor a = Tensor::random_uniform({m, k}, rng, -1, 1), b = Tensor::random_uniform({k, n}, rng, -1, 1);
    Tensor c({m, n});
    const bench::RoundTrips trips(state, state.range(5));
    for (auto _ : state) {
      gemm(a.data(), ta, b.data(), tb, c.data(), m, k, n);
      benchmark::DoNotOptimize(c.data());
      benchmark::ClobberMemory();
    }
    set_rates(state, 2.0 * double(m) * double(k) * double(n), peak, int(state.range(5)));
  });
  b->ArgNames({"m", "k", "n", "ta", "tb", "threads"})->UseRealTime()->MinTime(0.1)->Unit(benchmark::kMicrosecond);
  for (int t : {1, 2})
    for (const auto& s : gemm_shapes) b->Args({s[0], s[1], s[2], s[3], s[4], t});
}

#if defined(GRADUS_SGEMM_X86)
/// gemm_kernel/<kernel>: the register kernel alone, as a product's innermost loops run it (the
/// kMC rows of a block of A, packed, against one packed panel of B, kKC deep), again and again
/// on the same panels, so that A stays in L2, B and C in L1: the rate a blocked product would
/// reach if packing and cache misses cost nothing, against which its own rate compares.
template <class K>
void register_kernel_alone(const std::string& kernel, double peak) {
  auto* b = benchmark::RegisterBenchmark(("gemm_kernel/" + kernel).c_str(), [peak](benchmark::State& state) {
    constexpr int64_t MR = K::kMR, NR = K::kNR, mc = cpu::sgemm::kMC / MR * MR;
    const int64_t kc = state.range(0);
    gd::Rng rng(3);
    const Tensor a = Tensor::random_uniform({mc, kc}, rng, -1, 1), b = Tensor::random_uniform({kc, NR}, rng, -1, 1);
    Tensor ap({mc * kc}), bp({kc * NR}), c({MR, NR});
    cpu::sgemm::pack_a<MR>(a.data(), kc, 1, mc, kc, ap.data());
    cpu::sgemm::pack_b<NR>(b.data(), NR, 1, kc, NR, bp.data());
    for (auto _ : state) {
      for (int64_t ir = 0; ir < mc; ir += MR)
        K::template kernel<int(MR)>(kc, ap.data() + ir * kc, MR, bp.data(), NR, c.data(), NR, true, NR);
      benchmark::DoNotOptimize(c.data());
      benchmark::ClobberMemory();
    }
    set_rates(state, 2.0 * double(mc) * double(kc) * double(NR), peak, 1);
  });
  b->ArgName("kc")->Arg(cpu::sgemm::kKC)->UseRealTime()->MinTime(0.1)->Unit(benchmark::kMicrosecond);
}
#endif

}  // namespace

int main(int argc, char** argv) {
  const double peak = core_peak();
  register_gemm("gradus", [](const float* a, bool ta, const float* b, bool tb, float* c, int64_t m, int64_t k,
                             int64_t n) { gd::backend::gemm(a, ta, b, tb, c, m, k, n, false, gd::cpu); }, peak);
  for (cpu::GemmKernel kernel :
       {cpu::GemmKernel::avx512, cpu::GemmKernel::avx2, cpu::GemmKernel::loops, cpu::GemmKernel::eigen})
    if (kernel != cpu::gemm_kernel() && cpu::gemm_kernel_supported(kernel))
      register_gemm(std::string(cpu::gemm_kernel_name(kernel)),
                    [kernel](const float* a, bool ta, const float* b, bool tb, float* c, int64_t m, int64_t k,
                             int64_t n) { cpu::gemm(a, ta, b, tb, c, m, k, n, false, kernel); },
                    peak);
#if defined(GRADUS_SGEMM_X86)
  if (cpu::gemm_kernel() == cpu::GemmKernel::avx512) register_kernel_alone<cpu::sgemm::Avx512>("avx512", peak);
  if (cpu::gemm_kernel() == cpu::GemmKernel::avx2) register_kernel_alone<cpu::sgemm::Avx2>("avx2", peak);
#endif
  // B packed once per shape (the first call), outside the timed calls after it
  register_gemm("packed_b", [](const float* a, bool ta, const float* b, bool tb, float* c, int64_t m, int64_t k,
                               int64_t n) {
    static std::optional<cpu::GemmB<float>> packed;
    static std::array<int64_t, 4> key{};
    const std::array<int64_t, 4> now{reinterpret_cast<int64_t>(b), tb, k, n};
    if (!packed || key != now) packed.emplace(b, tb, k, n), key = now;
    packed->multiply(a, ta, c, m, false);
  }, peak);
  // gd::autocast(gd::bf16): inputs rounded to bfloat16, float sums; of_peak against the float peak
  for (cpu::Bf16Kernel kernel : {cpu::Bf16Kernel::amx, cpu::Bf16Kernel::dot, cpu::Bf16Kernel::convert})
    if (cpu::bf16_kernel_supported(kernel))
      register_gemm("bf16_" + std::string(cpu::bf16_kernel_name(kernel)),
                    [kernel](const float* a, bool ta, const float* b, bool tb, float* c, int64_t m, int64_t k,
                             int64_t n) { cpu::gemm_bf16(a, ta, b, tb, c, m, k, n, false, kernel); },
                    peak);
#if defined(GRADUS_BENCH_OPENBLAS)
  register_gemm(
      "openblas",
      [](const float* a, bool ta, const float* b, bool tb, float* c, int64_t m, int64_t k, int64_t n) {
        cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(m), int(n),
                    int(k), 1.f, a, ta ? int(m) : int(k), b, tb ? int(k) : int(n), 0.f, c, int(n));
      },
      peak, [](int t) { openblas_set_num_threads(t); });
#endif
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
