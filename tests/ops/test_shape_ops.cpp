// Shape ops: forward values against hand-computed expectations, gradients against central
// differences (double precision), error messages, zero-copy views.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <type_traits>
#include <vector>

#include <gradus/testing/catch_matchers.hpp>
#include <gradus/gradus.hpp>
#include "gradus/ops/shape.hpp"

namespace gd = gradus;

namespace {

using TensorD = gd::Tensor<double>;
using VarD = gd::Var<double>;
using TensorI64 = gd::Tensor<int64_t>;
using Catch::Contains;

TensorD rand_t(const gd::Shape& s, uint64_t seed = 1) {
  gd::Rng rng(seed);
  return TensorD::random_normal(s, rng);
}
/// 0, 1, 2, ... in `shape`.
template <class T = double>
gd::Tensor<T> iota(const gd::Shape& s) {
  return gd::Tensor<T>::arange(s.numel()).reshape(s);
}
template <class T>
std::vector<T> values(const gd::Tensor<T>& t) {
  return {t.begin(), t.end()};
}

/// Checks every input's Jacobian of f (from gd::gradients) against central differences, with the
/// one gradient checker of gd::compute_gradient.
template <class F>
void check_gradients(F f, const std::vector<TensorD>& x0) {
  CHECK_THAT([&](const std::vector<VarD>& v) { return VarD(f(v)); },
             gd::testing::GradientIsCorrect(x0, 1e-6, {.delta = 1e-6}));
}
template <class F>
void check_gradient(F f, const TensorD& x0) {
  check_gradients([&](const std::vector<VarD>& v) { return f(v[0]); }, {x0});
}

/// Reference transpose by multi-index arithmetic.
TensorD naive_transpose(const TensorD& x, const std::vector<int64_t>& perm) {
  const int r = x.rank();
  gd::Shape os;
  for (int i = 0; i < r; ++i) os.push_back(x.shape()[int(perm[size_t(i)])]);
  TensorD out(os);
  const auto xs = gd::row_major_strides(x.shape());
  for (int64_t o = 0; o < out.size(); ++o) {
    int64_t rem = o, src = 0;
    for (int i = r - 1; i >= 0; --i) {
      src += (rem % os[i]) * xs[size_t(perm[size_t(i)])];
      rem /= os[i];
    }
    out.data()[o] = x.data()[src];
  }
  return out;
}

}  // namespace

TEST_CASE("reshape: -1, zero-copy, Tensor or Var result, gradient", "[ops][shape]") {
  const TensorD x = iota({2, 3, 4});
  const TensorD y = gd::reshape(x, {2, -1});
  static_assert(std::is_same_v<decltype(gd::reshape(x, {2, -1})), TensorD>);
  REQUIRE(y.shape() == gd::Shape{2, 12});
  REQUIRE(values(y) == values(x));
  REQUIRE(y.shares_storage(x));
  REQUIRE(gd::reshape(x, x.shape()).shape() == x.shape());

  const VarD v(x.clone());
  const VarD vy = gd::reshape(v, {-1, 4});
  REQUIRE(vy.shape() == gd::Shape{6, 4});
  REQUIRE(vy.value().shares_storage(v.value()));
  REQUIRE(vy.requires_grad());

  REQUIRE_THROWS_AS(gd::reshape(x, {5, -1}), gd::shape_error);
  REQUIRE_THROWS_WITH(gd::reshape(x, {5, -1}), Contains("reshape: cannot reshape [2,3,4]"));
  REQUIRE_THROWS_WITH(gd::reshape(x, {7, 2}), Contains("into [7,2]"));
  REQUIRE_THROWS_AS(gd::reshape(x, {-1, -1}), gd::value_error);

  check_gradient([](const VarD& a) { return gd::reshape(a, {3, 8}); }, rand_t({2, 3, 4}));
}

TEST_CASE("flatten keeps axis 0", "[ops][shape]") {
  REQUIRE(gd::flatten(iota({2, 3, 4})).shape() == gd::Shape{2, 12});
  REQUIRE(gd::flatten(iota({5})).shape() == gd::Shape{5, 1});
  REQUIRE(gd::flatten(iota({0, 3})).shape() == gd::Shape{0, 3});
  REQUIRE_THROWS_AS(gd::flatten(TensorD::scalar(1)), gd::value_error);
  REQUIRE_THROWS_WITH(gd::flatten(TensorD::scalar(1)), Contains("flatten: expected rank >= 1, got shape []"));
  check_gradient([](const VarD& a) { return gd::flatten(a); }, rand_t({2, 3, 2}));
}

TEST_CASE("expand_dims inserts a unit axis", "[ops][shape]") {
  const TensorD x = iota({2, 3});
  REQUIRE(gd::expand_dims(x, 0).shape() == gd::Shape{1, 2, 3});
  REQUIRE(gd::expand_dims(x, 1).shape() == gd::Shape{2, 1, 3});
  REQUIRE(gd::expand_dims(x, 2).shape() == gd::Shape{2, 3, 1});
  REQUIRE(gd::expand_dims(x, -1).shape() == gd::Shape{2, 3, 1});
  REQUIRE(gd::expand_dims(x, -3).shape() == gd::Shape{1, 2, 3});
  REQUIRE(gd::expand_dims(TensorD::scalar(2), 0).shape() == gd::Shape{1});
  REQUIRE(gd::expand_dims(x, 1).shares_storage(x));
  REQUIRE_THROWS_AS(gd::expand_dims(x, 3), gd::value_error);
  REQUIRE_THROWS_WITH(gd::expand_dims(x, 3), Contains("expand_dims: axis 3 out of range [-3, 3) for shape [2,3]"));
  REQUIRE_THROWS_AS(gd::expand_dims(x, -4), gd::value_error);
  check_gradient([](const VarD& a) { return gd::expand_dims(a, -2); }, rand_t({2, 3}));
}

TEST_CASE("squeeze removes unit axes", "[ops][shape]") {
  const TensorD x = iota({1, 2, 1, 3});
  REQUIRE(gd::squeeze(x).shape() == gd::Shape{2, 3});
  REQUIRE(gd::squeeze(x, 2).shape() == gd::Shape{1, 2, 3});
  REQUIRE(gd::squeeze(x, -4).shape() == gd::Shape{2, 1, 3});
  REQUIRE(gd::squeeze(x, {0, 2}).shape() == gd::Shape{2, 3});
  REQUIRE(gd::squeeze(iota({1, 1})).shape() == gd::Shape{});
  REQUIRE(values(gd::squeeze(x)) == values(x));
  REQUIRE_THROWS_AS(gd::squeeze(x, 1), gd::value_error);
  REQUIRE_THROWS_WITH(gd::squeeze(x, 1), Contains("squeeze: axis 1 of shape [1,2,1,3] has size 2, not 1"));
  REQUIRE_THROWS_WITH(gd::squeeze(x, 4), Contains("squeeze: axis 4 out of range [-4, 4) for shape [1,2,1,3]"));
  check_gradient([](const VarD& a) { return gd::squeeze(a, 0); }, rand_t({1, 2, 3}));
  check_gradient([](const VarD& a) { return gd::squeeze(a); }, rand_t({2, 1, 3, 1}));
}

TEST_CASE("transpose: rank 2 by hand, every perm of rank 4 against a reference", "[ops][shape]") {
  const TensorD m = iota({2, 3});  // [[0,1,2],[3,4,5]]
  const TensorD mt = gd::transpose(m);
  REQUIRE(mt.shape() == gd::Shape{3, 2});
  REQUIRE(values(mt) == std::vector<double>{0, 3, 1, 4, 2, 5});
  REQUIRE(values(gd::transpose(m, {1, 0})) == values(mt));
  REQUIRE(values(gd::transpose(m, {-1, -2})) == values(mt));

  // Large, odd-sized rank 2 (tiled path) and vectors / scalars (identity).
  const TensorD big = rand_t({67, 131});
  REQUIRE(values(gd::transpose(big)) == values(naive_transpose(big, {1, 0})));
  REQUIRE(values(gd::transpose(iota({5}))) == values(iota({5})));
  REQUIRE(gd::transpose(TensorD::scalar(3)).item() == 3);

  const TensorD x = rand_t({3, 4, 5, 6});
  std::vector<int64_t> perm{0, 1, 2, 3};
  do {
    INFO("perm " << perm[0] << perm[1] << perm[2] << perm[3]);
    const TensorD y = gd::transpose(x, perm);
    const TensorD ref = naive_transpose(x, perm);
    REQUIRE(y.shape() == ref.shape());
    REQUIRE(values(y) == values(ref));
  } while (std::next_permutation(perm.begin(), perm.end()));

  // Unit axes moved, data not: a view.
  const TensorD u = iota({1, 4, 1, 3});
  REQUIRE(gd::transpose(u, {2, 1, 0, 3}).shares_storage(u));
  REQUIRE(gd::transpose(x, {0, 1, 2, 3}).shares_storage(x));
  REQUIRE_FALSE(gd::transpose(x, {0, 1, 3, 2}).shares_storage(x));

  // Integer tensors too.
  const TensorI64 ix = iota<int64_t>({2, 3});
  REQUIRE(values(gd::transpose(ix)) == std::vector<int64_t>{0, 3, 1, 4, 2, 5});

  REQUIRE_THROWS_AS(gd::transpose(m, {0, 0}), gd::value_error);
  REQUIRE_THROWS_WITH(gd::transpose(m, {0, 0}),
                      Contains("transpose: perm [0,0] is not a permutation of the axes of shape [2,3]"));
  REQUIRE_THROWS_WITH(gd::transpose(m, {0, 2}), Contains("not a permutation"));
  REQUIRE_THROWS_WITH(gd::transpose(m, {0, 1, 2}), Contains("transpose: perm [0,1,2] has 3 entries for shape [2,3]"));

  check_gradient([](const VarD& a) { return gd::transpose(a); }, rand_t({3, 4}));
  check_gradient([](const VarD& a) { return gd::transpose(a, {2, 0, 1}); }, rand_t({2, 3, 4}));
  check_gradient([](const VarD& a) { return gd::transpose(a, {1, 0, 3, 2}); }, rand_t({2, 3, 2, 3}));
}

TEST_CASE("shape ops take elementwise expressions", "[ops][shape]") {
  const TensorD t = iota({2, 3});
  const TensorD e = gd::transpose(t * 2.0 + 1.0);  // no Var: a Tensor
  static_assert(std::is_same_v<decltype(gd::transpose(t * 2.0 + 1.0)), TensorD>);
  REQUIRE(values(e) == std::vector<double>{1, 7, 3, 9, 5, 11});

  const VarD x(t.clone());
  const auto y = gd::transpose(x * 2.0 + 1.0);
  static_assert(std::is_same_v<std::remove_const_t<decltype(y)>, VarD>);
  REQUIRE(values(y.value()) == values(e));
  const std::vector<TensorD> g = gd::gradients(y, {x});
  REQUIRE(values(g[0]) == std::vector<double>(6, 2.0));

  check_gradient([](const VarD& a) { return gd::transpose(a * 2.0 + 1.0); }, rand_t({3, 2}));
  check_gradient([](const VarD& a) { return gd::slice(gd::tanh(a) * a, {1, 0}, {2, -1}); }, rand_t({3, 2}));
  check_gradient([](const VarD& a) { return gd::reshape(gd::exp(a), {-1}); }, rand_t({3, 2}));
}

TEST_CASE("no_grad: shape ops over Vars record nothing", "[ops][shape]") {
  const VarD x(rand_t({2, 3}));
  gd::no_grad guard;
  REQUIRE_FALSE(gd::transpose(x).requires_grad());
  REQUIRE_FALSE(gd::concat({x, x}, 0).requires_grad());
  REQUIRE_FALSE(gd::cast<float>(x).requires_grad());
}

TEST_CASE("concat joins along an existing axis", "[ops][shape]") {
  const TensorD a = iota({2, 3});                 // [[0,1,2],[3,4,5]]
  const TensorD b = iota({2, 4}) + 10.0;          // [[10..13],[14..17]]
  const TensorD c1 = gd::concat({a, TensorD(b)}, 1);
  REQUIRE(c1.shape() == gd::Shape{2, 7});
  REQUIRE(values(c1) == std::vector<double>{0, 1, 2, 10, 11, 12, 13, 3, 4, 5, 14, 15, 16, 17});
  REQUIRE(values(gd::concat({a, TensorD(b)}, -1)) == values(c1));

  const TensorD c0 = gd::concat(std::vector<TensorD>{a, iota({1, 3})}, 0);
  REQUIRE(c0.shape() == gd::Shape{3, 3});
  REQUIRE(values(c0) == std::vector<double>{0, 1, 2, 3, 4, 5, 0, 1, 2});
  REQUIRE(values(gd::concat({a}, 0)) == values(a));
  REQUIRE(gd::concat({a, iota({0, 3})}, 0).shape() == gd::Shape{2, 3});

  const TensorI64 ci = gd::concat({iota<int64_t>({2}), iota<int64_t>({3})}, 0);
  REQUIRE(values(ci) == std::vector<int64_t>{0, 1, 0, 1, 2});

  REQUIRE_THROWS_AS(gd::concat({a, TensorD(b)}, 0), gd::shape_error);
  REQUIRE_THROWS_WITH(gd::concat({a, TensorD(b)}, 0), Contains("concat: shapes [2,3] and [2,4] differ outside axis 0"));
  REQUIRE_THROWS_WITH(gd::concat({a, iota({6})}, 0), Contains("concat: shapes [2,3] and [6] differ outside axis 0"));
  REQUIRE_THROWS_WITH(gd::concat({a, a}, 2), Contains("concat: axis 2 out of range [-2, 2) for shape [2,3]"));
  REQUIRE_THROWS_WITH(gd::concat(std::vector<TensorD>{}, 0), Contains("concat: expected at least one tensor"));
  REQUIRE_THROWS_WITH(gd::concat({TensorD::scalar(1), TensorD::scalar(2)}, 0), Contains("concat: cannot concatenate scalars"));

  check_gradients([](const std::vector<VarD>& v) { return gd::concat(v, 1); },
                  {rand_t({2, 3, 2}, 1), rand_t({2, 1, 2}, 2), rand_t({2, 4, 2}, 3)});
  check_gradients([](const std::vector<VarD>& v) { return gd::concat({v[0], v[1]}, 0); },
                  {rand_t({2, 3}, 1), rand_t({1, 3}, 2)});

  // A constant input takes part in the value but gets no gradient.
  const VarD va(a.clone()), vk = VarD::constant(a.clone());
  const VarD y = gd::concat({vk, va}, 0);
  REQUIRE(y.shape() == gd::Shape{4, 3});
  const TensorD seed = iota({4, 3});
  REQUIRE(values(gd::gradients(y, {va}, &seed)[0]) == std::vector<double>{6, 7, 8, 9, 10, 11});
}

TEST_CASE("stack joins along a new axis", "[ops][shape]") {
  const TensorD a = iota({2, 3}), b = iota({2, 3}) + 10.0;
  const TensorD s0 = gd::stack({a, b}, 0);
  REQUIRE(s0.shape() == gd::Shape{2, 2, 3});
  REQUIRE(values(s0) == std::vector<double>{0, 1, 2, 3, 4, 5, 10, 11, 12, 13, 14, 15});
  const TensorD s1 = gd::stack({a, b}, 1);
  REQUIRE(s1.shape() == gd::Shape{2, 2, 3});
  REQUIRE(values(s1) == std::vector<double>{0, 1, 2, 10, 11, 12, 3, 4, 5, 13, 14, 15});
  const TensorD s2 = gd::stack({a, b}, -1);
  REQUIRE(s2.shape() == gd::Shape{2, 3, 2});
  REQUIRE(values(s2) == std::vector<double>{0, 10, 1, 11, 2, 12, 3, 13, 4, 14, 5, 15});
  REQUIRE(gd::stack({TensorD::scalar(1), TensorD::scalar(2)}, 0).shape() == gd::Shape{2});

  REQUIRE_THROWS_AS(gd::stack({a, iota({3, 2})}, 0), gd::shape_error);
  REQUIRE_THROWS_WITH(gd::stack({a, iota({3, 2})}, 0), Contains("stack: shapes [2,3] and [3,2] differ"));
  REQUIRE_THROWS_WITH(gd::stack({a, b}, 3), Contains("stack: axis 3 out of range [-3, 3) for shape [2,3]"));

  check_gradients([](const std::vector<VarD>& v) { return gd::stack(v, 1); },
                  {rand_t({2, 3}, 1), rand_t({2, 3}, 2), rand_t({2, 3}, 3)});
  check_gradients([](const std::vector<VarD>& v) { return gd::stack(v, -1); }, {rand_t({3}, 1), rand_t({3}, 2)});
}

TEST_CASE("slice as tf.slice", "[ops][shape]") {
  const TensorD x = iota({3, 4});
  const TensorD y = gd::slice(x, {1, 1}, {2, -1});
  REQUIRE(y.shape() == gd::Shape{2, 3});
  REQUIRE(values(y) == std::vector<double>{5, 6, 7, 9, 10, 11});
  REQUIRE(values(gd::slice(x, {0, 2}, {-1, 1})) == std::vector<double>{2, 6, 10});
  REQUIRE(gd::slice(x, {3, 0}, {0, 4}).shape() == gd::Shape{0, 4});
  const TensorD z = iota({2, 3, 4});
  REQUIRE(values(gd::slice(z, {1, 1, 2}, {1, 2, 2})) == std::vector<double>{18, 19, 22, 23});

  REQUIRE_THROWS_AS(gd::slice(x, {2, 0}, {2, 4}), gd::value_error);
  REQUIRE_THROWS_WITH(gd::slice(x, {2, 0}, {2, 4}),
                      Contains("slice: begin [2,0] and size [2,4] out of range for shape [3,4] at axis 0"));
  REQUIRE_THROWS_WITH(gd::slice(x, {-1, 0}, {1, 1}), Contains("out of range for shape [3,4]"));
  REQUIRE_THROWS_WITH(gd::slice(x, {0}, {1}), Contains("slice: begin [0] and size [1] need 2 entries each for shape [3,4]"));

  check_gradient([](const VarD& a) { return gd::slice(a, {1, 0, 1}, {2, -1, 2}); }, rand_t({3, 2, 4}));
}

TEST_CASE("slices and gathers of one tensor add their gradients into one adjoint", "[ops][shape]") {
  // Overlapping, disjoint and strided windows, a gather with repeats, and the input used as it is:
  // the first gradient to arrive writes the adjoint (zeros outside its window), the rest add.
  auto flat = [](const VarD& v) { return VarD(gd::reshape(v, {-1})); };
  check_gradient([&](const VarD& a) {
    return gd::concat(std::vector<VarD>{flat(gd::slice(a, {0, 1, 0}, {2, 1, -1})), flat(gd::slice(a, {1, 0, 1}, {2, 2, 2})),
                                      flat(a), flat(gd::slice(a, {0, 0, 0}, {1, 2, 4})),
                                      flat(gd::gather(a, TensorI64::from({2, 0, 2}), 0)), flat(gd::slice(a, {2, 1, 3}, {1, 1, 1}))},
                      0);
  }, rand_t({3, 2, 4}));
}

TEST_CASE("pad with a constant", "[ops][shape]") {
  const TensorD x = iota({2, 2}) + 1.0;  // [[1,2],[3,4]]
  const TensorD y = gd::pad(x, {{1, 0}, {0, 2}}, 9.0);
  REQUIRE(y.shape() == gd::Shape{3, 4});
  REQUIRE(values(y) == std::vector<double>{9, 9, 9, 9, 1, 2, 9, 9, 3, 4, 9, 9});
  REQUIRE(values(gd::pad(x, {{0, 0}, {1, 1}})) == std::vector<double>{0, 1, 2, 0, 0, 3, 4, 0});

  REQUIRE_THROWS_AS(gd::pad(x, {{1, 1}}), gd::value_error);
  REQUIRE_THROWS_WITH(gd::pad(x, {{1, 1}}), Contains("pad: 1 paddings for shape [2,2] of rank 2"));
  REQUIRE_THROWS_WITH(gd::pad(x, {{0, 0}, {-1, 0}}), Contains("pad: negative padding {-1, 0} for axis 1"));

  check_gradient([](const VarD& a) { return gd::pad(a, {{1, 2}, {0, 0}, {2, 1}}, 0.5); }, rand_t({2, 3, 2}));
}

TEST_CASE("gather: rows by indices of any rank, scatter-add gradient", "[ops][shape]") {
  const TensorD x = iota({4, 3});
  const TensorD y = gd::gather(x, TensorI64::from({3, 0, 3}));
  REQUIRE(y.shape() == gd::Shape{3, 3});
  REQUIRE(values(y) == std::vector<double>{9, 10, 11, 0, 1, 2, 9, 10, 11});

  const TensorI64 idx2 = TensorI64::from({2, 0, 1, 1}, {2, 2});
  const TensorD y1 = gd::gather(x, idx2, 1);
  REQUIRE(y1.shape() == gd::Shape{4, 2, 2});
  REQUIRE(values(gd::slice(y1, {1, 0, 0}, {1, -1, -1})) == std::vector<double>{5, 3, 4, 4});
  REQUIRE(gd::gather(x, TensorI64::scalar(2), 0).shape() == gd::Shape{3});
  REQUIRE(values(gd::gather(x, TensorI64::scalar(2), -1)) == std::vector<double>{2, 5, 8, 11});
  REQUIRE(gd::gather(x, TensorI64::from(std::vector<int64_t>{}), 0).shape() == gd::Shape{0, 3});

  REQUIRE_THROWS_AS(gd::gather(x, TensorI64::from({0, 4})), gd::value_error);
  REQUIRE_THROWS_WITH(gd::gather(x, TensorI64::from({0, 4})),
                      Contains("gather: index 4 at position 1 out of range [0, 4) for axis 0 of shape [4,3]"));
  REQUIRE_THROWS_WITH(gd::gather(x, TensorI64::from({-1})), Contains("gather: index -1"));
  REQUIRE_THROWS_WITH(gd::gather(x, TensorI64::from({0}), 2), Contains("gather: axis 2 out of range"));

  // Repeated indices accumulate.
  const VarD v(x.clone());
  const VarD g = gd::gather(v, TensorI64::from({1, 1, 3, 1}));
  REQUIRE(values(gd::gradients(g, {v})[0]) == std::vector<double>{0, 0, 0, 3, 3, 3, 0, 0, 0, 1, 1, 1});

  // The gradient scatters by the indices of the call, even when the caller refills its index
  // tensor before backward (a decoder feeding one step's tokens at a time): rows 0, then 2.
  TensorI64 step_ids = TensorI64::from({0});
  const VarD first = gd::gather(v, step_ids);
  step_ids.data()[0] = 2;
  const VarD second = gd::gather(v, step_ids);
  REQUIRE(values(gd::gradients(gd::sum(first) + gd::sum(second) * 10.0, {v})[0]) ==
          std::vector<double>{1, 1, 1, 0, 0, 0, 10, 10, 10, 0, 0, 0});

  check_gradient([](const VarD& a) { return gd::gather(a, TensorI64::from({2, 0, 2, 1, 2, 2}, {3, 2}), 0); }, rand_t({3, 2}));
  check_gradient([](const VarD& a) { return gd::gather(a, TensorI64::from({1, 1, 0}), 1); }, rand_t({2, 3, 2}));
}

TEST_CASE("one_hot: labels.shape + [depth]; out-of-range labels give all-off rows", "[ops][shape]") {
  const auto y = gd::one_hot(TensorI64::from({0, 2, -1, 3}), 3);
  static_assert(std::is_same_v<decltype(gd::one_hot(TensorI64::from({0}), 3)), gd::Tensor<float>>);
  REQUIRE(y.shape() == gd::Shape{4, 3});
  REQUIRE(values(y) == std::vector<float>{1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0});
  const auto z = gd::one_hot<double>(TensorI64::from({1, 0}, {2, 1}), 2, 5.0, -1.0);
  REQUIRE(z.shape() == gd::Shape{2, 1, 2});
  REQUIRE(values(z) == std::vector<double>{-1, 5, 5, -1});
  REQUIRE_THROWS_WITH(gd::one_hot(TensorI64::from({0}), -2), Contains("one_hot: negative depth -2"));
}

TEST_CASE("cast converts element types; Var casts are differentiable", "[ops][shape]") {
  const TensorD x = TensorD::from({1.5, -1.7, 2.0});
  const auto f = gd::cast<float>(x);
  static_assert(std::is_same_v<std::remove_const_t<decltype(f)>, gd::Tensor<float>>);
  REQUIRE(values(f) == std::vector<float>{1.5f, -1.7f, 2.f});
  REQUIRE(values(gd::cast<int64_t>(x)) == std::vector<int64_t>{1, -1, 2});
  REQUIRE(values(gd::cast<double>(TensorI64::from({3, -4}))) == std::vector<double>{3, -4});
  REQUIRE(gd::cast<double>(x).shares_storage(x));
  REQUIRE(values(gd::cast<float>(x * 2.0)) == std::vector<float>{3.f, -3.4f, 4.f});

  VarD v(x.clone());
  const gd::Var<float> vf = gd::cast<float>(v);
  REQUIRE(vf.requires_grad());
  const VarD back = gd::cast<double>(vf * 3.f + 1.f);
  gd::backward(back);
  REQUIRE(values(v.grad()) == std::vector<double>{3, 3, 3});
  static_assert(std::is_same_v<decltype(gd::cast<int64_t>(v)), TensorI64>);

  check_gradient([](const VarD& a) { return gd::cast<double>(a * a); }, rand_t({2, 2}));
}
