// backend::gemm, the routine under matmul and conv2d: every float kernel this CPU supports (gradus'
// AVX-512 and AVX2 micro-kernels, forced one at a time, and Eigen), the automatic choice, and
// double (Eigen), each against a double-precision triple loop over shapes that cover the kernels'
// edges: partial 6- and 12-row and 16- and 32-column blocks, 1x1x1, several 256-deep k-blocks, a
// long k, more than 96 rows (several packed A blocks), more than 2048 columns (several packed B
// blocks), fewer columns than 3/4 of a register block (run as the transposed product, threaded
// too), k = 0, both transposes, accumulation, and the threaded split; the AVX-512 kernel's own
// paths: products of at most 10 columns as dot products (k from 64, a tail of fewer than 16 depths)
// and a panel of 9-11 rows run by the full kernel; B read in place by one or two panels of A
// (AVX-512: up to 24 rows, 12 + 8 in {20, ...}; AVX2: up to 12, 6 + 4 in {10, ...}), and on Zen 4
// (AMD family 19h) by up to 16 (192 rows: the edge in {192, 40, 65 | 193}, several A blocks in
// {100, 300, 200}), whole and partial B panels, several k-blocks, threaded by columns; A read in
// place instead of packed, for both kernels: transposed against up to 128 columns of B,
// row-major against up to 8 panels (12 + 9, 12 + 11 and 24 + 10 rows in {21, ...}, {23, ...},
// {34, ...}; the limits' edges in {35, 130, 256 | 257} and {29, 70, 128 | 129}; every case of few
// enough columns, with each ta); the AVX-512 kernel's sweep of a packed B 256 columns at a time
// (k-blocks deeper than 186), several stretches, the last one partial, against several panels and
// blocks of A ({200, 200, 600}, {250, 450, 290}: more rows than B is read in place against
// anywhere); products of 2 to 23 rows, which the automatic choice runs with B read in place
// where it is faster ({7, 257, 17}, {13, 257, 33} and {17, 300, 70} with AVX-512, and with B
// transposed {22, 256, 40}; threaded by columns in {2, 784, 500} and, with B transposed, in
// {9, 300, 2100}); a parallel product's shared operand packed in slices by the threads (B in
// {200, 200, 600} and {250, 450, 290}, A in {64, 1100, 300}); the AVX-512 kernel's last panels of
// at most 24 columns on fewer registers (8 and 24 columns in {60, 300, 72 | 88}: A read in place,
// both ways; 20 and 8 in {130, 300, 500 | 264}: A packed; 12 in the cases of 300). A guard band
// after c checks that partial blocks never write past the matrix.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <omp.h>
#include <optional>
#include <vector>

#include <gradus/gradus.hpp>

namespace gd = gradus;
namespace cpu = gd::backend::cpu;

namespace {

struct Case {
  int64_t m, k, n;
};

/// One product's inputs: a (m x k), b (k x n) and the c it accumulates into, unit normals. Each is
/// stored as its flat elements, read with either transpose; they are drawn once per shape and
/// shared by every transpose, kernel and thread count (drawing them dominated the test's time).
template <class T>
struct Problem {
  Case s;
  gd::Tensor<T> a, b, c;
};

template <class T>
Problem<T> make_problem(const Case& s, gd::Rng& rng) {
  return {s, gd::Tensor<T>::random_normal({std::max<int64_t>(s.m * s.k, 1)}, rng, T(0), T(1)),
          gd::Tensor<T>::random_normal({std::max<int64_t>(s.k * s.n, 1)}, rng, T(0), T(1)),
          gd::Tensor<T>::random_normal({std::max<int64_t>(s.m * s.n, 1)}, rng, T(0), T(1))};
}

/// The double-precision product (plus the old c with `add`) and the sum of its terms' magnitudes,
/// computed once per problem and transpose for all the kernels checked against it.
struct Reference {
  std::vector<double> value, magnitude;
};

template <class T>
Reference reference(const Problem<T>& p, bool ta, bool tb, bool add) {
  const Case& s = p.s;
  Reference r{std::vector<double>(size_t(s.m * s.n)), std::vector<double>(size_t(s.m * s.n))};
  for (int64_t i = 0; i < s.m; ++i)
    for (int64_t j = 0; j < s.n; ++j) {
      double ref = add ? double(p.c.data()[i * s.n + j]) : 0.0;
      double mag = std::abs(ref);
      for (int64_t q = 0; q < s.k; ++q) {
        const double t =
            double(p.a.data()[ta ? q * s.m + i : i * s.k + q]) * double(p.b.data()[tb ? j * s.k + q : q * s.n + j]);
        ref += t;
        mag += std::abs(t);
      }
      r.value[size_t(i * s.n + j)] = ref;
      r.magnitude[size_t(i * s.n + j)] = mag;
    }
  return r;
}

/// |got - reference| of element e over the rounding bound of a k-deep product (see gemm_error):
/// NaN for a NaN result.
template <class T>
double bound_ratio(const Reference& r, size_t e, T got, int64_t k) {
  const double u = std::numeric_limits<T>::epsilon() / 2, d = double(k + 2);
  const double gamma = d * u / (1 - d * u);
  const double err = std::abs(r.value[e] - double(got)), mag = r.magnitude[e];
  return mag > 0 ? err / (gamma * mag) : err == 0 ? 0.0 : std::numeric_limits<double>::infinity();
}

/// The worse of two ratios: NaN once either is.
inline double worse(double a, double b) { return std::isnan(a) || b <= a ? a : b; }

/// The largest |gemm - reference| over c divided by its rounding bound, or infinity when the
/// guard band after c changed. The bound: a sum of d terms rounded in any order (recursive,
/// blocked, fused multiply-adds) differs from the exact sum by at most gamma_d * sum |term|,
/// gamma_d = d u / (1 - d u), u = 2^-24 (float) or 2^-53 (double), d = k + 1 terms here (the
/// products and the old c); a product rounded before it is added adds one more u. So a correct
/// kernel stays below 1 for every input, while a dropped, doubled or misplaced term (about as
/// large as the typical |a b| ~ 0.6 of unit normals) exceeds the bound by far: even at k = 5000,
/// gamma * sum |term| is about 0.2 per entry in float.
/// With `packed`, the product runs through cpu::GemmB (B packed once, then multiplied twice: the
/// second product must find the packed B as the first left it).
template <class T>
double gemm_error(const Problem<T>& p, const Reference& r, bool ta, bool tb, bool add,
                  std::optional<cpu::GemmKernel> kernel, bool packed) {
  constexpr int64_t guard = 80;
  constexpr T sentinel = T(12345);
  const Case& s = p.s;
  auto c = gd::Tensor<T>::zeros({s.m * s.n + guard});
  std::copy(p.c.data(), p.c.data() + s.m * s.n, c.data());
  for (int64_t i = 0; i < guard; ++i) c.data()[s.m * s.n + i] = sentinel;
  if (packed) {
    const cpu::GemmB<T> pb(p.b.data(), tb, s.k, s.n);
    auto scratch = gd::Tensor<T>::zeros({std::max<int64_t>(s.m * s.n, 1)});
    pb.multiply(p.a.data(), ta, scratch.data(), s.m, false);
    pb.multiply(p.a.data(), ta, c.data(), s.m, add);
  } else if (kernel)
    cpu::gemm(p.a.data(), ta, p.b.data(), tb, c.data(), s.m, s.k, s.n, add, *kernel);
  else
    gd::backend::gemm(p.a.data(), ta, p.b.data(), tb, c.data(), s.m, s.k, s.n, add, gd::cpu);
  for (int64_t i = 0; i < guard; ++i)
    if (c.data()[s.m * s.n + i] != sentinel) return std::numeric_limits<double>::infinity();
  double worst = 0;
  for (int64_t i = 0; i < s.m * s.n; ++i) worst = worse(worst, bound_ratio<T>(r, size_t(i), c.data()[i], s.k));
  return worst;
}

const std::vector<Case> cases = {
    {1, 1, 1},      {1, 5, 1},      {6, 256, 16},   {12, 256, 32},  {13, 257, 33},  {11, 7, 31},
    {7, 257, 17},   {5, 3, 33},     {13, 0, 9},     {8, 0, 20},     {40, 600, 12},  {40, 600, 70},
    {7, 40, 1100},  {300, 150, 100}, {96, 64, 2100}, {100, 300, 200}, {97, 513, 65}, {3, 5000, 20},
    {25, 2621, 32}, {81, 64, 800},  {128, 500, 10}, {300, 150, 7}, {33, 70, 1},   {40, 9, 15},
    {64, 33, 20},   {1500, 400, 9}, {200, 64, 10}, {51, 63, 10}, {10, 600, 100}, {9, 300, 2100},
    {20, 600, 100}, {20, 300, 2100}, {21, 100, 40}, {23, 300, 64}, {34, 80, 50},
    {35, 130, 256}, {35, 130, 257}, {29, 70, 128}, {29, 70, 129}, {192, 40, 65}, {193, 40, 65},
    {200, 200, 600}, {250, 450, 290}, {2, 784, 500}, {4, 300, 130}, {5, 64, 700}, {3, 17, 9}, {17, 300, 70}, {22, 256, 40},
    // a packed A (more than 256 columns) whose last panel has each count of rows the kernels'
    // blocks leave (12 and 6 rows): 2-9 and 2-5, 0
    {26, 70, 300}, {27, 70, 300}, {28, 50, 300}, {29, 90, 300}, {30, 33, 260}, {31, 64, 300}, {32, 20, 270},
    {33, 45, 290},
    // a last panel of at most 24 columns on full panels of rows (the AVX-512 narrow kernels; 9-16
    // columns in the cases of 300 above): A read in place by rows and transposed, 24 and 8
    // columns, two k-blocks; A packed, 20 and 8 columns, 10 rows left
    {60, 300, 88}, {60, 300, 72}, {130, 300, 500}, {130, 300, 264},
    // a shared operand packed by both threads, a slice of whole panels each: A (cols split, 70,400
    // floats, its last panel partial, five k-blocks); B in {200, 200, 600} and {250, 450, 290}
    {64, 1100, 300}};

/// Runs every case with every transpose and accumulate flag through each of `kernels` (nullopt:
/// the automatic choice) at 1 and 2 threads, against one reference per case and flags.
template <class T>
void check_all(const std::vector<std::optional<cpu::GemmKernel>>& kernels,
               int64_t max_work = std::numeric_limits<int64_t>::max(), bool packed = false) {
  gd::Rng rng(3);
  const int threads = omp_get_max_threads();
  for (const Case& s : cases) {
    if (s.m * s.k * s.n > max_work) continue;
    const Problem<T> p = make_problem<T>(s, rng);
    for (int flags = 0; flags < 8; ++flags) {
      const bool ta = flags & 1, tb = flags & 2, add = flags & 4;
      const Reference r = reference(p, ta, tb, add);
      for (const auto& kernel : kernels)
        for (int t : {1, 2}) {
          omp_set_num_threads(t);
          INFO("kernel " << (kernel ? cpu::gemm_kernel_name(*kernel) : "automatic") << (packed ? " (GemmB)" : "")
                         << ", threads " << t << ", m " << s.m << " k " << s.k << " n " << s.n << ", ta " << ta
                         << " tb " << tb << " add " << add);
          CHECK(gemm_error<T>(p, r, ta, tb, add, kernel, packed) <= 1.0);
        }
    }
  }
  omp_set_num_threads(threads);
}

}  // namespace

TEST_CASE("every float gemm kernel matches a double triple loop on every edge of its blocking", "[ops][matmul]") {
  std::vector<std::optional<cpu::GemmKernel>> kernels;
  for (cpu::GemmKernel k :
       {cpu::GemmKernel::avx512, cpu::GemmKernel::avx2, cpu::GemmKernel::loops, cpu::GemmKernel::eigen}) {
    if (!cpu::gemm_kernel_supported(k)) {
      WARN("this CPU has no " << cpu::gemm_kernel_name(k) << " gemm kernel; not tested");
      CHECK_THROWS_AS(cpu::gemm<float>(nullptr, false, nullptr, false, nullptr, 1, 1, 1, false, k), gd::value_error);
      continue;
    }
    kernels.push_back(k);
  }
  kernels.push_back(std::nullopt);
  check_all<float>(kernels);
}

TEST_CASE("double gemm matches a double triple loop", "[ops][matmul]") {
  std::vector<std::optional<cpu::GemmKernel>> kernels{std::nullopt};
  if (cpu::gemm_kernel_supported(cpu::GemmKernel::loops)) kernels.push_back(cpu::GemmKernel::loops);
  check_all<double>(kernels, 1000000);
}

TEST_CASE("GemmB (B packed once, many products) matches a double triple loop", "[ops][matmul]") {
  check_all<float>({std::nullopt}, std::numeric_limits<int64_t>::max(), true);
  check_all<double>({std::nullopt}, 1000000, true);
}

TEST_CASE("GemmB packs B only where the blocked kernels multiply it as it is", "[ops][matmul]") {
  // A B of few columns is left unpacked, so that multiply() runs gemm(), which takes such a
  // product as its transpose (or as dot products): a convolution of 6 to 20 filters multiplied
  // its tiles 1.5-3x slower on the padded panels of a packed B before.
  gd::Rng rng(5);
  const auto b = gd::Tensor<float>::random_normal({500 * 64}, rng, 0.f, 1.f);
  const bool blocked = cpu::gemm_kernel() == cpu::GemmKernel::avx512 || cpu::gemm_kernel() == cpu::GemmKernel::avx2;
  CHECK(cpu::GemmB<float>(b.data(), false, 500, 64).packed() == blocked);
  CHECK_FALSE(cpu::GemmB<float>(b.data(), false, 500, 10).packed());
  CHECK_FALSE(cpu::GemmB<double>(nullptr, false, 500, 64).packed());
}

TEST_CASE("the automatic gemm kernel is one the CPU supports", "[ops][matmul]") {
  CHECK(cpu::gemm_kernel_supported(cpu::gemm_kernel()));
  CHECK(cpu::gemm_kernel_supported(cpu::GemmKernel::eigen));
  if (!std::getenv("GRADUS_GEMM_KERNEL")) {
    const auto widest = cpu::gemm_kernel_supported(cpu::GemmKernel::avx512) ? cpu::GemmKernel::avx512
                        : cpu::gemm_kernel_supported(cpu::GemmKernel::avx2)  ? cpu::GemmKernel::avx2
                        : cpu::gemm_kernel_supported(cpu::GemmKernel::loops) ? cpu::GemmKernel::loops
                                                                             : cpu::GemmKernel::eigen;
    CHECK(cpu::gemm_kernel() == widest);
  }
}

#if defined(GRADUS_SGEMM_X86)
TEST_CASE("pack_a lays A out in panels of MR rows for both kernels' MR, from either storage", "[ops][matmul]") {
  // pack_a needs only AVX2, so the AVX-512 kernel's 12-row panels are checked here on any AVX2
  // CPU too: ap[(i / MR) * kc * MR + p * MR + i % MR] = A(i, p), for every i < mc and p < kc,
  // and 0 past mc in a partial last panel, in the rows its kernel reads.
  if (!cpu::gemm_kernel_supported(cpu::GemmKernel::avx2)) {
    WARN("this CPU has no AVX2: pack_a not tested");
    return;
  }
  auto check = [](auto mr) {
    constexpr int64_t MR = decltype(mr)::value;
    for (int64_t mc : {1, 2, 3, 5, 6, 7, 8, 9, 10, 11, 12, 13, 17, 22, 25})
      for (int64_t kc : {1, 7, 8, 9, 16, 23})
        for (bool transposed : {false, true}) {
          std::vector<float> a(size_t(mc * kc));
          for (size_t q = 0; q < a.size(); ++q) a[q] = float(q) + 0.5f;
          const int64_t ra = transposed ? 1 : kc, ca = transposed ? mc : 1;
          const int64_t panels = (mc + MR - 1) / MR;
          std::vector<float> ap(size_t(panels * kc * MR), -1.f);
          cpu::sgemm::pack_a<MR>(a.data(), ra, ca, mc, kc, ap.data());
          int64_t wrong = 0;
          for (int64_t i = 0; i < mc; ++i)
            for (int64_t p = 0; p < kc; ++p)
              wrong += ap[size_t((i / MR) * kc * MR + p * MR + i % MR)] != a[size_t(i * ra + p * ca)];
          // a partial last panel is zero past mc as far as its kernel reads (kernel_rows)
          const int64_t last = mc % MR;
          if (last > 0)
            for (int64_t i = last; i < cpu::sgemm::kernel_rows<MR>(last); ++i)
              for (int64_t p = 0; p < kc; ++p) wrong += ap[size_t((panels - 1) * kc * MR + p * MR + i)] != 0.f;
          INFO("MR " << MR << ", mc " << mc << ", kc " << kc << ", A stored transposed " << transposed);
          CHECK(wrong == 0);
        }
  };
  check(std::integral_constant<int64_t, 6>{});
  check(std::integral_constant<int64_t, 12>{});
}
#endif

#if defined(GRADUS_SGEMM_X86)
TEST_CASE("pack_b lays B out in panels of NR columns for both kernels' NR, from either storage", "[ops][matmul]") {
  // bp[(j / NR) * kc * NR + p * NR + j % NR] = B(p, j) for every p < kc and j < nc, and 0 past nc
  // in a last, partial panel: a row-major B is copied 8 rows at a time, panel after panel, and a
  // transposed one by 8 x 8 register transposes, each with its own edges.
  if (!cpu::gemm_kernel_supported(cpu::GemmKernel::avx2)) {
    WARN("this CPU has no AVX2: pack_b not tested");
    return;
  }
  auto check = [](auto nr) {
    constexpr int64_t NR = decltype(nr)::value;
    for (int64_t nc : {1, 7, 8, 15, 16, 17, 31, 32, 33, 64, 70})
      for (int64_t kc : {1, 7, 8, 9, 16, 23})
        for (bool transposed : {false, true}) {
          std::vector<float> b(size_t(kc * nc));
          for (size_t q = 0; q < b.size(); ++q) b[q] = float(q) + 0.5f;
          const int64_t rb = transposed ? 1 : nc, cb = transposed ? kc : 1;
          const int64_t panels = (nc + NR - 1) / NR;
          auto bp = gd::Tensor<float>::full({panels * kc * NR}, -1.f);  // aligned as the kernels' scratch
          cpu::sgemm::pack_b<NR>(b.data(), rb, cb, kc, nc, bp.data());
          int64_t wrong = 0;
          for (int64_t p = 0; p < kc; ++p)
            for (int64_t j = 0; j < panels * NR; ++j) {
              const float want = j < nc ? b[size_t(p * rb + j * cb)] : 0.f;
              wrong += bp.data()[(j / NR) * kc * NR + p * NR + j % NR] != want;
            }
          INFO("NR " << NR << ", nc " << nc << ", kc " << kc << ", B stored transposed " << transposed);
          CHECK(wrong == 0);
        }
  };
  check(std::integral_constant<int64_t, 16>{});
  check(std::integral_constant<int64_t, 32>{});
}
#endif

#if defined(GRADUS_SGEMM_X86)
// The kernels that read B in place for a few rows of A (backend/cpu/gemm_inplace.hpp), called
// directly for each instruction set this CPU has, against the double triple loop: every row
// count up to 7 and 9, 13, 15, 19 and 23 (the AVX-512 row-major kernel's blocks of 4 rows and its
// last 1, 2, 3 or 5; the AVX2 one's 6 and 1-5, and 1 to 3 rows on whole 48- or 32-column panels first;
// the dot kernels' groups of up to 5 and pairs), column counts that end
// in a full or partial block of B's rows (5, 6, 8 at a time) or vector of columns, depths with
// and without a tail of fewer than 16 (8) depths and of several 128-deep blocks, and a stretch
// of C's and B's columns (their row stride `ld` wider than n), with and without accumulation. A
// guard band after each row of C checks that no kernel writes past its columns.
TEST_CASE("the in-place kernels of few rows match a double triple loop", "[ops][matmul]") {
  using Fn = void (*)(const float*, const float*, float*, int64_t, int64_t, int64_t, int64_t, bool);
  struct Kernel {
    const char* name;
    Fn fn;
    bool tb;
  };
  std::vector<Kernel> kernels;
  if (cpu::gemm_kernel_supported(cpu::GemmKernel::avx2)) {
    kernels.push_back({"gemm_avx2", &cpu::inplace::gemm_avx2, false});
    kernels.push_back({"gemm_bt_avx2", &cpu::inplace::gemm_bt_avx2, true});
  }
  if (cpu::gemm_kernel_supported(cpu::GemmKernel::avx512)) {
    kernels.push_back({"gemm_avx512", &cpu::inplace::gemm_avx512, false});
    kernels.push_back({"gemm_bt_avx512", &cpu::inplace::gemm_bt_avx512, true});
  }
  if (kernels.empty()) {
    WARN("this CPU has neither AVX2 nor AVX-512: the in-place kernels are not tested");
    return;
  }
  gd::Rng rng(29);
  constexpr int64_t pad = 3;  // columns of the wider matrices past the stretch, a guard band in C
  constexpr float sentinel = 12345.f;
  for (int64_t m : {1, 2, 3, 4, 5, 6, 7, 9, 13, 15, 19, 23})
    for (int64_t n : {1, 5, 6, 7, 8, 9, 13, 16, 17, 33, 64, 70, 130})
      for (int64_t k : {1, 7, 16, 17, 129, 300})
        for (bool add : {false, true}) {
          const Problem<float> p = make_problem<float>({m, k, n}, rng);
          for (bool tb : {false, true}) {
            const Reference r = reference(p, false, tb, add);
            // the stretch: b (k x n, or n x k) inside rows of n + pad (row-major B) and c inside
            // rows of n + pad, the pad of c a guard band
            const int64_t ld = n + pad;
            std::vector<float> b(size_t(tb ? n * k : k * ld), -7.f);
            for (int64_t q = 0; q < (tb ? n : k); ++q)
              for (int64_t j = 0; j < (tb ? k : n); ++j)
                b[size_t(q * (tb ? k : ld) + j)] = p.b.data()[q * (tb ? k : n) + j];
            for (const Kernel& kernel : kernels) {
              if (kernel.tb != tb) continue;
              std::vector<float> c(size_t(m * ld), sentinel);
              for (int64_t i = 0; i < m; ++i) std::copy_n(p.c.data() + i * n, n, c.begin() + i * ld);
              kernel.fn(p.a.data(), b.data(), c.data(), m, k, n, ld, add);
              double worst = 0;
              int64_t guard = 0;
              for (int64_t i = 0; i < m; ++i) {
                for (int64_t j = 0; j < n; ++j)
                  worst = worse(worst, bound_ratio<float>(r, size_t(i * n + j), c[size_t(i * ld + j)], k));
                for (int64_t j = n; j < ld; ++j) guard += c[size_t(i * ld + j)] != sentinel;
              }
              INFO(kernel.name << ": m " << m << " k " << k << " n " << n << ", add " << add);
              CHECK(worst <= 1.0);
              CHECK(guard == 0);
            }
          }
        }
}
#endif
