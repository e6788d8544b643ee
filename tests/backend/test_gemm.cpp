// backend::gemm, the routine under matmul and conv2d: float (gradus' own AVX2 kernel where the
// build has AVX2 + FMA; Eigen for thin products) and double (Eigen) against a double-precision
// triple loop, over shapes that cover the kernel's edges: partial 6-row and 16-column blocks,
// several 256-deep k-blocks, several 1024-column blocks, k = 0, both transposes, accumulation,
// and the threaded split.
#include <catch2/catch.hpp>

#include <cmath>
#include <omp.h>
#include <vector>

#include <gradus/gradus.hpp>

namespace gd = gradus;

namespace {

struct Case {
  int64_t m, k, n;
};

/// The largest |gemm - reference| over c, relative to sqrt(k) (float rounding grows with k).
template <class T>
double gemm_error(const Case& s, bool ta, bool tb, bool add, gd::Rng& rng) {
  const auto a = gd::Tensor<T>::random_normal({std::max<int64_t>(s.m * s.k, 1)}, rng, T(0), T(1));
  const auto b = gd::Tensor<T>::random_normal({std::max<int64_t>(s.k * s.n, 1)}, rng, T(0), T(1));
  auto c = gd::Tensor<T>::random_normal({s.m * s.n}, rng, T(0), T(1));
  const auto c0 = c.clone();
  gd::backend::gemm(a.data(), ta, b.data(), tb, c.data(), s.m, s.k, s.n, add);
  double worst = 0;
  for (int64_t i = 0; i < s.m; ++i)
    for (int64_t j = 0; j < s.n; ++j) {
      double ref = add ? double(c0.data()[i * s.n + j]) : 0.0;
      for (int64_t p = 0; p < s.k; ++p)
        ref += double(a.data()[ta ? p * s.m + i : i * s.k + p]) * double(b.data()[tb ? j * s.k + p : p * s.n + j]);
      worst = std::max(worst, std::abs(ref - double(c.data()[i * s.n + j])));
    }
  return worst / std::sqrt(double(std::max<int64_t>(s.k, 1)));
}

}  // namespace

TEST_CASE("gemm matches a double triple loop on every edge of its blocking", "[ops][matmul]") {
  const std::vector<Case> cases = {{1, 1, 1},     {6, 256, 16},  {7, 257, 17},   {5, 3, 33},     {13, 0, 9},    {8, 0, 20},
                                   {40, 600, 12}, {40, 600, 70}, {7, 40, 1100}, {300, 150, 100}, {96, 64, 2100}, {100, 300, 200}};
  gd::Rng rng(3);
  const int threads = omp_get_max_threads();
  for (int t : {1, 2}) {
    omp_set_num_threads(t);
    for (const Case& s : cases)
      for (int flags = 0; flags < 8; ++flags) {
        const bool ta = flags & 1, tb = flags & 2, add = flags & 4;
        INFO("threads " << t << ", m " << s.m << " k " << s.k << " n " << s.n << ", ta " << ta << " tb " << tb
                        << " add " << add);
        CHECK(gemm_error<float>(s, ta, tb, add, rng) < 2e-6 * 8);
        if (s.m * s.k * s.n < 1000000) CHECK(gemm_error<double>(s, ta, tb, add, rng) < 1e-12);
      }
  }
  omp_set_num_threads(threads);
}
