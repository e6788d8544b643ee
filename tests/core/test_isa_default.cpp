// A header-only program built without an AVX-512 -march leaves out the AVX-512 copies of the
// fixed loops and the bfloat16 kernels (backend/cpu/isa.hpp, GRADUS_AVX512_KERNELS): on an AVX-512
// CPU it runs the loops' AVX2 copies, says so when a bfloat16 kernel it lacks is asked for by
// name, and converts bfloat16 products to float; the float GEMM's AVX-512 micro-kernels it has in
// any case, and runs them there. This area is header-only and keeps that default; tests/backend
// compiles every kernel and tests them.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "gradus/backend/cpu/gemm.hpp"

namespace gd = gradus;
namespace cpu = gradus::backend::cpu;
using Catch::Matchers::Contains;

#if defined(GRADUS_SGEMM_X86) && !defined(__AVX512F__)
static_assert(GRADUS_AVX512_KERNELS == 0, "a header-only build without -mavx512f leaves the AVX-512 loops out");

TEST_CASE("header-only without AVX-512 loops: their widest copy is AVX2, the GEMM's the CPU's", "[isa]") {
  CHECK(cpu::cpu_isa() != cpu::Isa::avx512);
  CHECK_FALSE(cpu::bf16_kernel_supported(cpu::Bf16Kernel::dot));
  CHECK_FALSE(cpu::bf16_kernel_supported(cpu::Bf16Kernel::amx));
  CHECK(cpu::bf16_kernel() == cpu::Bf16Kernel::convert);
  // an AVX-512 CPU has AVX2: it runs those copies of the loops, not the baseline's
  if (cpu::isa_supported(cpu::Isa::avx512) && !std::getenv("GRADUS_ISA")) CHECK(cpu::cpu_isa() == cpu::Isa::avx2);
  // the float GEMM's micro-kernel is the widest the CPU has: AVX-512 where it has AVX-512F
  CHECK(cpu::gemm_kernel_supported(cpu::GemmKernel::avx512) == bool(__builtin_cpu_supports("avx512f")));
  if (!std::getenv("GRADUS_GEMM_KERNEL")) {
    if (__builtin_cpu_supports("avx512f"))
      CHECK(cpu::gemm_kernel() == cpu::GemmKernel::avx512);
    else if (cpu::isa_supported(cpu::Isa::avx2))
      CHECK(cpu::gemm_kernel() == cpu::GemmKernel::avx2);
  }
}

TEST_CASE("header-only without AVX-512 loops: asking for a bfloat16 kernel by name is a clear error", "[isa]") {
  float a = 1, b = 2, c = 0;
  CHECK_THROWS_WITH(cpu::gemm_bf16(&a, false, &b, false, &c, 1, 1, 1, false, cpu::Bf16Kernel::dot),
                    Contains("no bfloat16 dot kernel"));
  CHECK(c == 0);
}

TEST_CASE("header-only without AVX-512 loops: blocked products match a double triple loop", "[isa]") {
  // 37 x 45 x 29: partial panels of either kernel in every dimension; the values are small
  // integers, so every partial sum is exact in float and the comparison is too. The default
  // kernel, and each the CPU supports by name; bf16 rounding leaves these integers as they are.
  const int64_t m = 37, k = 45, n = 29;
  std::vector<float> a(size_t(m * k)), b(size_t(k * n));
  for (int64_t i = 0; i < m * k; ++i) a[size_t(i)] = float(i * 7 % 11) - 5;
  for (int64_t i = 0; i < k * n; ++i) b[size_t(i)] = float(i * 5 % 13) - 6;
  const auto check = [&](const std::vector<float>& c) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double want = 0;
        for (int64_t p = 0; p < k; ++p) want += double(a[size_t(i * k + p)]) * double(b[size_t(p * n + j)]);
        INFO("c(" << i << ", " << j << ")");
        CHECK(double(c[size_t(i * n + j)]) == want);
      }
  };
  std::vector<float> c(size_t(m * n), -1.f);
  cpu::gemm<float>(a.data(), false, b.data(), false, c.data(), m, k, n, false);
  check(c);
  for (auto kernel : {cpu::GemmKernel::avx512, cpu::GemmKernel::avx2})
    if (cpu::gemm_kernel_supported(kernel)) {
      INFO("kernel " << cpu::gemm_kernel_name(kernel));
      std::fill(c.begin(), c.end(), -1.f);
      cpu::gemm<float>(a.data(), false, b.data(), false, c.data(), m, k, n, false, kernel);
      check(c);
    }
  std::fill(c.begin(), c.end(), -1.f);
  cpu::gemm_bf16(a.data(), false, b.data(), false, c.data(), m, k, n, false, cpu::Bf16Kernel::convert);
  check(c);
}
#endif
