// backend/cpu/vecmath.hpp: the float exp, tanh and logistic against double-precision libm over
// every float of the ranges where the kernels use them (a stride through the bit patterns), the
// special values, and the same functions inside a loop compiled for each ISA copy; max_of against
// the largest non-NaN element.
#include <catch2/catch.hpp>
#include <bit>
#include <cmath>
#include <cstdint>
#include <algorithm>
#include <limits>
#include <type_traits>
#include <vector>

#include <gradus/backend/cpu/isa.hpp>
#include <gradus/backend/cpu/vecmath.hpp>

namespace cpu = gradus::backend::cpu;
namespace vm = gradus::backend::cpu::vm;

namespace {

/// |got - want| in units of the float spacing at want (the spacing of the smallest normal for
/// subnormal want).
double ulps(float got, double want) {
  const double a = std::fabs(want);
  const double spacing = a < double(std::numeric_limits<float>::min())
                             ? double(std::numeric_limits<float>::denorm_min())
                             : std::ldexp(1.0, std::ilogb(a) - 23);
  return std::fabs(double(got) - want) / spacing;
}

/// The largest error of f against ref over floats in [lo, hi], visiting every `stride`-th bit
/// pattern of each sign (tens of millions of values: spread over the cores).
template <class F, class R>
double worst_ulps(F f, R ref, float lo, float hi, uint32_t stride) {
  const int64_t count = (int64_t{0x7f800000} + stride - 1) / stride;
  double worst = 0;
  // chunks dealt out in turn: the costly small |x| all lie at the start of the range
#pragma omp parallel for reduction(max : worst) schedule(static, 4096)
  for (int64_t i = 0; i < count; ++i) {
    const auto bits = static_cast<uint32_t>(i * stride);
    for (float x : {std::bit_cast<float>(bits), -std::bit_cast<float>(bits)})
      if (x >= lo && x <= hi) worst = std::max(worst, ulps(f(x), ref(double(x))));
  }
  return worst;
}

}  // namespace

TEST_CASE("vecmath: float exp within 2 ulp of double exp", "[backend][vecmath]") {
  const double e = worst_ulps([](float x) { return vm::exp(x); }, [](double x) { return std::exp(x); }, -103.9f,
                              88.72f, 97);
  INFO("worst " << e << " ulp");
  CHECK(e <= 2.0);
  CHECK(vm::exp(0.0f) == 1.0f);
  CHECK(vm::exp(-200.0f) == 0.0f);
  CHECK(vm::exp(-std::numeric_limits<float>::infinity()) == 0.0f);
  CHECK(std::isinf(vm::exp(89.0f)));
  CHECK(std::isinf(vm::exp(std::numeric_limits<float>::infinity())));
  CHECK(std::isnan(vm::exp(std::numeric_limits<float>::quiet_NaN())));
  // near FLT_MAX and in the subnormal range the result is still right
  CHECK(ulps(vm::exp(88.7f), std::exp(double(88.7f))) <= 2.0);
  CHECK(ulps(vm::exp(-100.0f), std::exp(-100.0)) <= 1.0);
}

TEST_CASE("vecmath: float tanh and logistic within 3 ulp of double", "[backend][vecmath]") {
  const double t = worst_ulps([](float x) { return vm::tanh(x); }, [](double x) { return std::tanh(x); }, -20.0f,
                              20.0f, 61);
  const double s = worst_ulps([](float x) { return vm::logistic(x); },
                              [](double x) { return 1.0 / (1.0 + std::exp(-x)); }, -87.0f, 40.0f, 61);
  INFO("tanh worst " << t << " ulp, logistic worst " << s << " ulp");
  CHECK(t <= 3.0);
  CHECK(s <= 3.0);
  CHECK(vm::tanh(0.0f) == 0.0f);
  CHECK(vm::tanh(30.0f) == 1.0f);
  CHECK(vm::tanh(-30.0f) == -1.0f);
  CHECK(vm::tanh(1e-30f) == 1e-30f);
  CHECK(std::isnan(vm::tanh(std::numeric_limits<float>::quiet_NaN())));
  CHECK(vm::logistic(-std::numeric_limits<float>::infinity()) == 0.0f);
  CHECK(vm::logistic(std::numeric_limits<float>::infinity()) == 1.0f);
  CHECK(std::isnan(vm::logistic(std::numeric_limits<float>::quiet_NaN())));
}

TEST_CASE("vecmath: each ISA copy of a loop gives the scalar results", "[backend][vecmath][isa]") {
  constexpr size_t n = 1000;
  std::vector<float> x(n), want(3 * n), got(3 * n);
  for (size_t i = 0; i < n; ++i) x[i] = -12.0f + 0.0241f * float(i);
  auto run = [&](float* out) {
    for (size_t i = 0; i < n; ++i) out[i] = vm::exp(x[i]);
    for (size_t i = 0; i < n; ++i) out[n + i] = vm::tanh(x[i]);
    for (size_t i = 0; i < n; ++i) out[2 * n + i] = vm::logistic(x[i]);
  };
  run(want.data());
  INFO("ISA chosen: " << cpu::isa_name(cpu::cpu_isa()));
  cpu::with_isa([&] { run(got.data()); });
  // FMA contraction may differ between the copies: a few ulp, not more
  for (size_t i = 0; i < 3 * n; ++i) {
    INFO("function " << i / n << " at x = " << x[i % n]);
    REQUIRE(ulps(got[i], double(want[i])) <= 4.0);
  }
}

TEST_CASE("vecmath: out-of-range and special inputs in a vectorised loop give the scalar answers", "[backend][vecmath][isa]") {
  // exp computes garbage for |x| out of range and replaces it with 0 or inf by masks at the
  // end; the lanes of a vector must not leak into each other
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> x;
  for (float v : {-inf, -1e30f, -200.0f, -103.98f, -103.97f, -88.0f, -1.0f, -0.0f, 0.0f, 0.5f, 0.625f, 88.72f, 88.73f,
                  200.0f, 1e30f, inf, nan})
    for (int rep = 0; rep < 5; ++rep) x.push_back(v);  // each value in several lane positions
  const size_t n = x.size();
  std::vector<float> got(2 * n);
  cpu::with_isa([&] {
    for (size_t i = 0; i < n; ++i) got[i] = vm::exp(x[i]);
    for (size_t i = 0; i < n; ++i) got[n + i] = vm::tanh(x[i]);
  });
  for (size_t i = 0; i < n; ++i) {
    INFO("x = " << x[i]);
    const double e = std::exp(double(x[i])), t = std::tanh(double(x[i]));
    if (std::isnan(x[i])) {
      CHECK(std::isnan(got[i]));
      CHECK(std::isnan(got[n + i]));
      continue;
    }
    if (x[i] < -103.972084f) CHECK(got[i] == 0.0f);
    else if (x[i] > 88.7228394f) CHECK(got[i] == inf);
    else CHECK(ulps(got[i], e) <= 4.0);
    CHECK(ulps(got[n + i], t) <= 4.0);
    CHECK(std::signbit(got[n + i]) == std::signbit(x[i]));  // tanh(-0) = -0
  }
}

TEST_CASE("vecmath: where_positive and relu are the ternaries they replace, bit for bit", "[backend][vecmath]") {
  auto check = [](auto zero) {
    using T = decltype(zero);
    const T inf = std::numeric_limits<T>::infinity(), nan = std::numeric_limits<T>::quiet_NaN();
    const T values[] = {-inf, T(-2.5), -std::numeric_limits<T>::denorm_min(), T(-0.0), T(0), std::numeric_limits<T>::denorm_min(),
                        T(3), inf, nan};
    using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
    for (T y : values)
      for (T v : values) {
        INFO("y = " << y << ", v = " << v);
        const T want = y > T(0) ? v : T(0);
        CHECK(std::bit_cast<Bits>(vm::where_positive(y, v)) == std::bit_cast<Bits>(want));
      }
    for (T x : values) {
      INFO("x = " << x);
      CHECK(std::bit_cast<Bits>(vm::relu(x)) == std::bit_cast<Bits>(std::max(x, T(0))));  // a NaN stays NaN
    }
  };
  check(0.0f);
  check(0.0);
}

TEST_CASE("vecmath: max_of is the largest element that is not NaN, in each ISA copy", "[backend][vecmath][isa]") {
  auto reference = [](const auto* in, int64_t n) {  // -inf when there is none
    auto m = -std::numeric_limits<std::remove_cvref_t<decltype(*in)>>::infinity();
    for (int64_t k = 0; k < n; ++k)
      if (!std::isnan(in[k])) m = std::max(m, in[k]);
    return m;
  };
  auto check = [&](auto zero) {
    using T = decltype(zero);
    using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
    const T inf = std::numeric_limits<T>::infinity(), nan = std::numeric_limits<T>::quiet_NaN();
    // lengths around the 16 lanes' blocks, and long rows with a tail
    for (int64_t n : {1, 2, 15, 16, 17, 31, 32, 33, 47, 48, 49, 100, 1000, 1001, 1027}) {
      std::vector<T> x(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) x[size_t(i)] = T(-50) + T(((i * 7919) % 1009) * 0.0625);  // no zeros
      std::vector<int64_t> places;  // where the largest value goes: every place of a short row
      for (int64_t p = 0; p < n; ++p)
        if (n <= 64 || p < 20 || p > n - 20 || p % 97 == 0) places.push_back(p);
      for (int64_t p : places) {
        for (int special = 0; special < 5; ++special) {
          std::vector<T> row = x;
          row[size_t(p)] = T(1000);
          if (special == 1) row[0] = nan;                                  // a NaN first
          if (special == 2) row[size_t((p + 1) % n)] = nan;                // a NaN after the largest
          if (special == 3) std::fill(row.begin(), row.end(), -inf);     // every element -inf
          if (special == 4) std::fill(row.begin(), row.end(), nan);      // every element NaN: -inf
          const T want = reference(row.data(), n);
          T got_default = vm::max_of(row.data(), n), got_isa = 0;
          cpu::with_isa([&] { got_isa = vm::max_of(row.data(), n); });
          INFO("n = " << n << ", largest at " << p << ", case " << special << ", want " << want);
          CHECK(std::bit_cast<Bits>(got_default) == std::bit_cast<Bits>(want));
          CHECK(std::bit_cast<Bits>(got_isa) == std::bit_cast<Bits>(want));
        }
      }
    }
  };
  check(0.0f);
  check(0.0);
}
