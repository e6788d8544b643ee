// benchmarks/gemm_interleaved.cpp — float GEMM of gradus (the kernel it picks for this CPU, and
// each other x86 kernel the CPU has) against OpenBLAS' cblas_sgemm, one thread, for a machine
// too noisy for bench_gemm's separate processes: the implementations take turns, one timed batch
// each per round, and each keeps the best of its rounds (thread CPU time, which time spent
// waiting for a core does not inflate). Prints GFLOP/s and gradus / OpenBLAS per product, and
// the largest difference between gradus' and OpenBLAS' results.
//   bench_gemm_interleaved [rounds=21] [product index]
// Products: gemm_shapes.hpp's, as bench_gemm's (1024^3, the MLP's, the LeNet CNN's; aT, bT:
// stored transposed). Built only where CMake finds OpenBLAS.
#include <cblas.h>
#include <omp.h>
#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <gradus/gradus.hpp>

#include "gemm_shapes.hpp"

namespace gd = gradus;
namespace cpu = gd::backend::cpu;

namespace {

double thread_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::max(1, std::atoi(argv[1])) : 21;
  const int only = argc > 2 ? std::atoi(argv[2]) : -1;
  omp_set_num_threads(1);
  openblas_set_num_threads(1);
  std::vector<cpu::GemmKernel> kernels{cpu::gemm_kernel()};
  for (cpu::GemmKernel k : {cpu::GemmKernel::avx512, cpu::GemmKernel::avx2})
    if (k != kernels[0] && cpu::gemm_kernel_supported(k)) kernels.push_back(k);
  std::printf("%-20s", "product");
  for (cpu::GemmKernel k : kernels) std::printf(" %9s", std::string(cpu::gemm_kernel_name(k)).c_str());
  std::printf(" %9s %8s %9s\n", "openblas", "ratio", "max diff");
  for (int idx = 0; idx < int(gemm_shapes.size()); ++idx) {
    if (only >= 0 && idx != only) continue;
    const auto& shape = gemm_shapes[size_t(idx)];
    const struct {
      int64_t m, k, n;
      bool ta, tb;
    } p{shape[0], shape[1], shape[2], shape[3] != 0, shape[4] != 0};
    gd::Rng rng(3);
    const auto a = gd::Tensor<float>::random_uniform({p.m, p.k}, rng, -1, 1);
    const auto b = gd::Tensor<float>::random_uniform({p.k, p.n}, rng, -1, 1);
    gd::Tensor<float> c({p.m, p.n}), ref({p.m, p.n});
    const double flops = 2.0 * double(p.m) * double(p.k) * double(p.n);
    const int batch = int(std::max(3.0, 2e8 / flops));  // about 0.1 s of work a turn
    auto turn = [&](size_t impl) {
      const double t0 = thread_seconds();
      for (int i = 0; i < batch; ++i) {
        if (impl < kernels.size())
          cpu::gemm(a.data(), p.ta, b.data(), p.tb, c.data(), p.m, p.k, p.n, false, kernels[impl]);
        else
          cblas_sgemm(CblasRowMajor, p.ta ? CblasTrans : CblasNoTrans, p.tb ? CblasTrans : CblasNoTrans, int(p.m),
                      int(p.n), int(p.k), 1.f, a.data(), int(p.ta ? p.m : p.k), b.data(), int(p.tb ? p.k : p.n), 0.f,
                      ref.data(), int(p.n));
      }
      return (thread_seconds() - t0) / batch;
    };
    std::vector<double> best(kernels.size() + 1, 1e30);
    for (int r = 0; r < rounds; ++r)
      for (size_t impl = 0; impl < best.size(); ++impl) best[impl] = std::min(best[impl], turn(impl));
    cpu::gemm(a.data(), p.ta, b.data(), p.tb, c.data(), p.m, p.k, p.n, false, kernels[0]);
    double diff = 0;
    for (int64_t i = 0; i < p.m * p.n; ++i) diff = std::max(diff, double(std::fabs(c.data()[i] - ref.data()[i])));
    const std::string name = std::to_string(p.m) + "x" + std::to_string(p.k) + "x" + std::to_string(p.n) +
                             (p.ta ? " aT" : "") + (p.tb ? " bT" : "");
    std::printf("%-20s", name.c_str());
    for (size_t i = 0; i < kernels.size(); ++i) std::printf(" %9.1f", flops / best[i] * 1e-9);
    std::printf(" %9.1f %7.2fx %9.1e\n", flops / best.back() * 1e-9, best.back() / best[0], diff);
  }
  return 0;
}
