// bfloat16 products on the CPU (gd::autocast(gd::bf16)): the rounding to bfloat16 against bit
// patterns worked out by hand, the AVX-512 rounding of the packing against the scalar one, the
// AMX packing against bit patterns, and the bfloat16 GEMM kernels (AMX tiles and AVX512-BF16 dot
// products where the CPU has them, the conversion fallback everywhere) against a double triple
// loop over the inputs rounded to bfloat16. Since a
// product of two bfloat16s is exact in float, a correct kernel differs from that reference only
// by float's rounding of the sums, bounded as in test_gemm.cpp; the distance to the unrounded
// product is about 2^-8 relative, hundreds of times larger, so a kernel that skipped the
// rounding (or rounded the wrong operand) fails the same bound.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <omp.h>
#include <vector>

#include <gradus/gradus.hpp>

namespace gd = gradus;
namespace cpu = gd::backend::cpu;

namespace {

float from_bits(uint32_t u) { return std::bit_cast<float>(u); }

struct Bf16Case {
  int64_t m, k, n;
};

const std::vector<Bf16Case> bf16_cases = {
    {1, 1, 1},     {6, 256, 16},  {12, 256, 32}, {13, 257, 33}, {11, 7, 31},  {7, 1, 40},   {5, 3, 33},
    {13, 0, 9},    {40, 600, 70}, {7, 40, 1100}, {100, 300, 200}, {97, 513, 65}, {128, 784, 10}, {128, 500, 10},
    {81, 64, 800}, {300, 151, 7}, {40, 9, 15},   {96, 64, 2100}, {25, 2621, 32}, {16, 32, 16}, {17, 33, 47}, {64, 1000, 48}, {290, 40, 300},
    {27, 70, 300}, {30, 40, 100}};

/// The largest |c - reference| / bound over c, where the reference multiplies a and b rounded to
/// bfloat16 in double (plus the old c with `add`) and the bound is float's for a sum of k + 2
/// rounded terms (test_gemm.cpp), or infinity when a guard element after c changed.
double bf16_error(const Bf16Case& s, bool ta, bool tb, bool add, const std::function<void(float*)>& run,
                  const std::vector<float>& a, const std::vector<float>& b, const std::vector<float>& c0,
                  bool rounded_reference = true) {
  constexpr int64_t guard = 40;
  std::vector<float> c(size_t(s.m * s.n + guard), 777.f);
  std::copy(c0.begin(), c0.end(), c.begin());
  run(c.data());
  for (int64_t i = 0; i < guard; ++i)
    if (c[size_t(s.m * s.n + i)] != 777.f) return std::numeric_limits<double>::infinity();
  auto r = [&](float x) { return rounded_reference ? double(gd::round_to_bfloat16(x)) : double(x); };
  const double u = std::ldexp(1.0, -24), d = double(s.k + 2), gamma = d * u / (1 - d * u);
  double worst = 0;
  for (int64_t i = 0; i < s.m; ++i)
    for (int64_t j = 0; j < s.n; ++j) {
      double ref = add ? double(c0[size_t(i * s.n + j)]) : 0.0, mag = std::abs(ref);
      for (int64_t q = 0; q < s.k; ++q) {
        const double t = r(a[size_t(ta ? q * s.m + i : i * s.k + q)]) * r(b[size_t(tb ? j * s.k + q : q * s.n + j)]);
        ref += t, mag += std::abs(t);
      }
      const double err = std::abs(ref - double(c[size_t(i * s.n + j)]));
      const double ratio = mag > 0 ? err / (gamma * mag) : err == 0 ? 0.0 : std::numeric_limits<double>::infinity();
      if (!(ratio <= worst)) worst = ratio;
    }
  return worst;
}

std::vector<float> normals(int64_t n, gd::Rng& rng) {
  auto t = gd::Tensor<float>::random_normal({std::max<int64_t>(n, 1)}, rng, 0.f, 1.f);
  return std::vector<float>(t.data(), t.data() + n);
}

std::vector<cpu::Bf16Kernel> bf16_kernels() {
  std::vector<cpu::Bf16Kernel> kernels{cpu::Bf16Kernel::convert};
  if (cpu::bf16_kernel_supported(cpu::Bf16Kernel::dot))
    kernels.push_back(cpu::Bf16Kernel::dot);
  else
    WARN("this CPU has no AVX512-BF16: the bfloat16 dot-product kernel is not tested, the conversion one is");
  if (cpu::bf16_kernel_supported(cpu::Bf16Kernel::amx))
    kernels.push_back(cpu::Bf16Kernel::amx);
  else
    WARN("this CPU (or its operating system) offers no AMX tiles: the AMX bfloat16 kernel is not tested");
  return kernels;
}

}  // namespace

TEST_CASE("bfloat16 rounds to nearest, ties to even, as worked out bit by bit", "[core][bf16]") {
  CHECK(gd::bfloat16_bits(1.f) == 0x3F80);
  CHECK(gd::bfloat16_bits(-2.f) == 0xC000);
  CHECK(gd::bfloat16_bits(3.14159265f) == 0x4049);           // 0x40490FDB: the dropped half is below a tie
  CHECK(gd::bfloat16_bits(from_bits(0x3F808000)) == 0x3F80);  // a tie, the kept bit even: down
  CHECK(gd::bfloat16_bits(from_bits(0x3F818000)) == 0x3F82);  // a tie, the kept bit odd: up
  CHECK(gd::bfloat16_bits(from_bits(0x3F808001)) == 0x3F81);  // just past the tie: up
  CHECK(gd::bfloat16_bits(from_bits(0x3F807FFF)) == 0x3F80);  // just before it: down
  CHECK(gd::bfloat16_bits(from_bits(0x7F7FFFFF)) == 0x7F80);  // float's largest rounds to infinity
  CHECK(gd::bfloat16_bits(std::numeric_limits<float>::infinity()) == 0x7F80);
  CHECK(gd::bfloat16_bits(-std::numeric_limits<float>::infinity()) == 0xFF80);
  CHECK(gd::bfloat16_bits(from_bits(0x7F800001)) == 0x7FC0);  // a signalling NaN becomes a quiet one
  CHECK(gd::bfloat16_bits(from_bits(0xFFFFFFFF)) == 0xFFFF);  // NaN payload's top bits are kept
  CHECK(gd::bfloat16_bits(from_bits(0x00010000)) == 0x0001);  // a subnormal stays one
  CHECK(gd::bfloat16_bits(-0.f) == 0x8000);
  CHECK(float(gd::bfloat16(3.14159265f)) == 3.140625f);
  CHECK(gd::bfloat16::from_bits(0x4049).bits == 0x4049);
  CHECK(gd::round_to_bfloat16(1.f + 1.f / 256) == 1.f);  // the tie between 1 and 1 + 2^-7
  CHECK(gd::round_to_bfloat16(1.f + 3.f / 256) == 1.f + 1.f / 64);

  // the vectorized rounding of the conversion kernel agrees with the scalar one on every class
  std::vector<float> src;
  gd::Rng rng(11);
  for (int i = 0; i < 4096; ++i) src.push_back(from_bits(uint32_t(rng.next())));
  for (uint32_t u : {0x3F808000u, 0x3F818000u, 0x7F7FFFFFu, 0x7F800001u, 0xFF800000u, 0x00008000u})
    src.push_back(from_bits(u));
  std::vector<float> dst(src.size());
  cpu::round_to_bfloat16_n(src.data(), int64_t(src.size()), dst.data());
  int64_t wrong = 0;
  for (size_t i = 0; i < src.size(); ++i)
    wrong += std::bit_cast<uint32_t>(dst[i]) != uint32_t(gd::bfloat16_bits(src[i])) << 16;
  CHECK(wrong == 0);
#if defined(GRADUS_SGEMM_X86)
  if (cpu::gemm_kernel_supported(cpu::GemmKernel::avx512)) {  // the packing's AVX-512 rounding, pairs interleaved
    const int64_t kc = 7;                                       // odd: the last pair's high half is zero
    std::vector<float> panel(size_t(kc * 12));
    for (size_t i = 0; i < panel.size(); ++i) panel[i] = src[i * 37 % src.size()];
    std::vector<uint32_t> pairs(size_t((kc + 1) / 2 * 12), 0xDEADBEEF);
    cpu::sgemm::pair_panel<12>(panel.data(), kc, pairs.data());
    int64_t bad = 0;
    for (int64_t p = 0; p < kc; ++p)
      for (int64_t j = 0; j < 12; ++j)
        bad += uint16_t(pairs[size_t(p / 2 * 12 + j)] >> (p % 2 ? 16 : 0)) != gd::bfloat16_bits(panel[size_t(p * 12 + j)]);
    for (int64_t j = 0; j < 12; ++j) bad += (pairs[size_t(kc / 2 * 12 + j)] >> 16) != 0;
    CHECK(bad == 0);
  }
#endif
}

#if defined(GRADUS_SGEMM_X86)
TEST_CASE("the bfloat16 kernel chosen unasked: AMX, else the dot kernel on AMD only, else conversion",
          "[ops][matmul][bf16]") {
  // The dot kernel ran at 0.6x the float kernel on an Intel core (one port for vdpbf16ps, two for
  // FMAs) and 1.7-1.9x on Zen 4 (backend/cpu/gemm.hpp, bf16_dot_is_faster)
  CHECK(cpu::bf16_dot_is_faster() == bool(__builtin_cpu_is("amd")));
  if (std::getenv("GRADUS_BF16_KERNEL") || std::getenv("GRADUS_GEMM_KERNEL")) return;
  cpu::Bf16Kernel want = cpu::Bf16Kernel::convert;
  if (cpu::gemm_kernel() == cpu::GemmKernel::avx512) {
    if (cpu::bf16_kernel_supported(cpu::Bf16Kernel::amx))
      want = cpu::Bf16Kernel::amx;
    else if (cpu::bf16_kernel_supported(cpu::Bf16Kernel::dot) && __builtin_cpu_is("amd"))
      want = cpu::Bf16Kernel::dot;
  }
  INFO("chosen " << cpu::bf16_kernel_name(cpu::bf16_kernel()) << ", expected " << cpu::bf16_kernel_name(want));
  CHECK(cpu::bf16_kernel() == want);
  // an Intel CPU with AVX512-BF16 and no AMX tiles (Cooper Lake, a guest that hides AMX) converts
  if (__builtin_cpu_is("intel") && !cpu::bf16_kernel_supported(cpu::Bf16Kernel::amx))
    CHECK(cpu::bf16_kernel() == cpu::Bf16Kernel::convert);
}

TEST_CASE("the AMX packing lays out bfloat16 rows and pair panels as the tiles read them", "[ops][matmul][bf16]") {
  // The packers need AVX512-BF16 only, so they are checked on every CPU that has it, with or
  // without tiles: word (i, q) of A's rows holds A(i, 2q) low and A(i, 2q + 1) high; word (q, j)
  // of B's panel holds B(2q, j) and B(2q + 1, j); zeros past m, n and k. Both storage orders of
  // each operand (one is packed through 16 x 16 transposes), sizes off every multiple of 16.
  if (!cpu::bf16_kernel_supported(cpu::Bf16Kernel::dot)) {
    WARN("this CPU has no AVX512-BF16: the AMX packing is not tested");
    return;
  }
  gd::Rng rng(17);
  const int64_t m = 37, k = 45, n = 21, kqp = cpu::sgemm::amx_pairs(k);
  CHECK(kqp == 32);
  const auto x = normals(std::max(m, n) * k, rng);
  auto bits = [](float v) { return uint32_t(gd::bfloat16_bits(v)); };
  for (bool transposed : {false, true}) {
    INFO("stored transposed " << transposed);
    // A (m x k): a[i * k + p], or a[p * m + i] transposed
    const int64_t ra = transposed ? 1 : k, ca = transposed ? m : 1;
    std::vector<uint32_t> ap(size_t(cpu::sgemm::amx_a_words(m, k)), 0xDEADBEEF);
    cpu::sgemm::pack_a_amx(x.data(), ra, ca, m, k, ap.data());
    int64_t bad = 0;
    for (int64_t i = 0; i < (m + 15) / 16 * 16; ++i)
      for (int64_t q = 0; q < kqp; ++q) {
        auto at = [&](int64_t p) { return i < m && p < k ? bits(x[size_t(i * ra + p * ca)]) : 0u; };
        bad += ap[size_t(i * kqp + q)] != (at(2 * q) | at(2 * q + 1) << 16);
      }
    CHECK(bad == 0);
    // B (k x n): b[p * n + j], or b[j * k + p] transposed
    const int64_t rb = transposed ? 1 : n, cb = transposed ? k : 1;
    std::vector<uint32_t> bp(size_t(cpu::sgemm::amx_b_words(k, n)), 0xDEADBEEF);
    cpu::sgemm::pack_b_amx(x.data(), rb, cb, k, n, bp.data());
    bad = 0;
    for (int64_t j = 0; j < (n + 15) / 16 * 16; ++j)
      for (int64_t q = 0; q < kqp; ++q) {
        auto at = [&](int64_t p) { return j < n && p < k ? bits(x[size_t(p * rb + j * cb)]) : 0u; };
        bad += bp[size_t((j / 16 * kqp + q) * 16 + j % 16)] != (at(2 * q) | at(2 * q + 1) << 16);
      }
    CHECK(bad == 0);
  }
}
#endif

TEST_CASE("bfloat16 gemm kernels match a double triple loop over the rounded inputs", "[ops][matmul][bf16]") {
  gd::Rng rng(5);
  const int threads = omp_get_max_threads();
  for (const Bf16Case& s : bf16_cases) {
    const auto a = normals(s.m * s.k, rng), b = normals(s.k * s.n, rng), c0 = normals(s.m * s.n, rng);
    for (int flags = 0; flags < 8; ++flags) {
      const bool ta = flags & 1, tb = flags & 2, add = flags & 4;
      for (cpu::Bf16Kernel kernel : bf16_kernels())
        for (int t : {1, 2}) {
          omp_set_num_threads(t);
          INFO("kernel " << cpu::bf16_kernel_name(kernel) << ", threads " << t << ", m " << s.m << " k " << s.k
                         << " n " << s.n << ", ta " << ta << " tb " << tb << " add " << add);
          CHECK(bf16_error(s, ta, tb, add, [&](float* c) {
            cpu::gemm_bf16(a.data(), ta, b.data(), tb, c, s.m, s.k, s.n, add, kernel);
          }, a, b, c0) <= 1.0);
        }
    }
  }
  omp_set_num_threads(threads);
}

TEST_CASE("gemm and GemmB under autocast(bf16) round their inputs; outside it they do not", "[ops][matmul][bf16]") {
  gd::Rng rng(8);
  for (const Bf16Case& s : {Bf16Case{40, 600, 70}, Bf16Case{128, 784, 10}, Bf16Case{97, 513, 65}, Bf16Case{3, 50, 20}}) {
    const auto a = normals(s.m * s.k, rng), b = normals(s.k * s.n, rng), c0 = normals(s.m * s.n, rng);
    auto automatic = [&](float* c) { gd::backend::gemm(a.data(), false, b.data(), true, c, s.m, s.k, s.n, true, gd::cpu); };
    auto packed = [&](float* c) {
      const cpu::GemmB<float> pb(b.data(), true, s.k, s.n);
      pb.multiply(a.data(), false, c, s.m, true);
    };
    INFO("m " << s.m << " k " << s.k << " n " << s.n);
    {
      gd::autocast mixed(gd::bf16);
      CHECK(bf16_error(s, false, true, true, automatic, a, b, c0) <= 1.0);
      CHECK(bf16_error(s, false, true, true, packed, a, b, c0) <= 1.0);
      // the bfloat16 result is far from the float product: the rounding really happened
      CHECK(bf16_error(s, false, true, true, automatic, a, b, c0, false) > 3.0);
    }
    CHECK(bf16_error(s, false, true, true, automatic, a, b, c0, false) <= 1.0);
    CHECK(bf16_error(s, false, true, true, packed, a, b, c0, false) <= 1.0);
    gd::autocast half(gd::fp16);  // fp16 is a GPU's precision: CPU products stay float
    CHECK(bf16_error(s, false, true, true, automatic, a, b, c0, false) <= 1.0);
  }
}

TEST_CASE("a thread pool task runs under its caller's autocast precision", "[ops][bf16]") {
  const int threads = omp_get_max_threads();
  omp_set_num_threads(2);
  std::vector<int> seen(64, -1);
  {
    gd::autocast mixed(gd::bf16);
    cpu::ThreadPool::instance().run(64, 2, [&](int64_t i) { seen[size_t(i)] = int(gd::autocast_precision()); });
  }
  for (int p : seen) CHECK(p == int(gd::bf16));
  cpu::ThreadPool::instance().run(64, 2, [&](int64_t i) { seen[size_t(i)] = int(gd::autocast_precision()); });
  for (int p : seen) CHECK(p == int(gd::fp32));
  omp_set_num_threads(threads);
}

TEST_CASE("conv2d under autocast(bf16) is the float convolution of the rounded operands", "[ops][conv][bf16]") {
  // Forward: patches(x) · w with both rounded; backward: dw = patches(x)^T g and dx = col2im(g w^T),
  // g rounded too. So each equals the float kernel run on rounded copies, to float's accuracy, at
  // 1 and 2 threads (the tiles run in pool tasks, under the caller's precision).
  const gd::backend::ConvPlan p{.n = 3, .h = 12, .w = 11, .c = 5, .kh = 3, .kw = 3, .f = 20, .oh = 10, .ow = 9,
                                .sh = 1, .sw = 1, .dh = 1, .dw = 1, .ph = 0, .pw = 0};
  gd::Rng rng(21);
  const auto x = normals(p.n * p.h * p.w * p.c, rng), w = normals(p.depth() * p.f, rng);
  const auto g = normals(p.rows() * p.f, rng), bias = normals(p.f, rng);
  auto rounded = [](std::vector<float> v) {
    for (float& e : v) e = gd::round_to_bfloat16(e);
    return v;
  };
  const auto xr = rounded(x), wr = rounded(w), gr = rounded(g);
  auto close = [](const std::vector<float>& got, const std::vector<float>& want) {
    double worst = 0, scale = 0;
    for (size_t i = 0; i < want.size(); ++i)
      worst = std::max(worst, double(std::abs(got[i] - want[i]))), scale = std::max(scale, double(std::abs(want[i])));
    return worst <= 1e-5 * scale;
  };
  const int threads = omp_get_max_threads();
  for (int t : {1, 2}) {
    omp_set_num_threads(t);
    INFO("threads " << t);
    std::vector<float> y(size_t(p.rows() * p.f)), y_ref(y.size()), dx(x.size()), dx_ref(x.size()), dw(w.size()),
        dw_ref(w.size());
    cpu::conv2d_forward(p, xr.data(), wr.data(), bias.data(), y_ref.data(), false);
    cpu::conv2d_backward(p, gr.data(), xr.data(), wr.data(), dx_ref.data(), false, dw_ref.data(), false,
                         static_cast<float*>(nullptr), false, static_cast<const float*>(nullptr));
    {
      gd::autocast mixed(gd::bf16);
      cpu::conv2d_forward(p, x.data(), w.data(), bias.data(), y.data(), false);
      cpu::conv2d_backward(p, g.data(), x.data(), w.data(), dx.data(), false, dw.data(), false,
                           static_cast<float*>(nullptr), false, static_cast<const float*>(nullptr));
    }
    CHECK(close(y, y_ref));
    CHECK(close(dx, dx_ref));
    CHECK(close(dw, dw_ref));
    std::vector<float> y32(y.size());  // and in float the convolution differs: the rounding happened
    cpu::conv2d_forward(p, x.data(), w.data(), bias.data(), y32.data(), false);
    CHECK_FALSE(close(y32, y_ref));
  }
  omp_set_num_threads(threads);
}
