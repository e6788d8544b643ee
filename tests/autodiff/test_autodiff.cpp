#include <catch2/catch.hpp>
#include <cmath>
#include <sstream>
#include <gradus/testing/catch_matchers.hpp>
#include <gradus/gradus.hpp>

namespace gd = gradus;
using V = gd::Var<double>;
using Td = gd::Tensor<double>;

TEST_CASE("autodiff: backward accumulates into leaves, gradients() leaves them alone", "[autodiff]") {
  V x(Td::from({1, 2, 3}));
  V w(Td::from({0.5, -1, 2}));
  auto loss = gd::sum(x * w + gd::square(x));  // d/dx = w + 2x, d/dw = x
  gd::backward(loss);
  CHECK(x.grad()(0) == 2.5);
  CHECK(x.grad()(2) == 8.0);
  CHECK(w.grad()(1) == 2.0);
  gd::backward(gd::sum(x * w + gd::square(x)));  // accumulates
  CHECK(x.grad()(0) == 5.0);
  x.zero_grad();
  CHECK(x.grad()(0) == 0.0);
  auto g = gd::gradients(gd::sum(x * x * x), {x, w});  // 3x^2; w not involved -> zeros
  CHECK(g[0](1) == 12.0);
  CHECK(g[1](0) == 0.0);
  CHECK(x.grad()(0) == 0.0);
  CHECK(loss.value().item() == Approx(0.5 - 2 + 6 + 14));
}

TEST_CASE("autodiff: a Var used several times gets every contribution", "[autodiff]") {
  V x(Td::from({2.0}));
  V y = x * x;           // one node
  V z = y * x + x;       // x appears twice more
  gd::backward(z);       // dz/dx = 3x^2 + 1
  CHECK(x.grad()(0) == 13.0);
}

TEST_CASE("autodiff: broadcast inputs get gradients summed back to their shape", "[autodiff]") {
  V x(Td::ones({4, 3}));
  V b(Td::from({1, 2, 3}));
  V c(Td::from({1, 2, 3, 4}, {4, 1}));
  V s(Td::scalar(2.0));
  gd::backward(gd::sum((x * b + c) * s));
  CHECK(b.grad().shape() == gd::Shape{3});
  CHECK(b.grad()(2) == 8.0);          // sum over 4 rows of x*s
  CHECK(c.grad()(3, 0) == 6.0);       // 3 columns * s
  CHECK(s.grad().item() == Approx(4 * (1 + 2 + 3) + 3 * (1 + 2 + 3 + 4)));
  // large broadcast on both threads
  gd::Rng rng(1);
  V big(Td::random_normal({512, 300}, rng));
  V bias(Td::random_normal({300}, rng));
  gd::backward(gd::mean(gd::square(big + bias)));
  double ref = 0;
  for (int i = 0; i < 512; ++i) ref += 2 * (big.value()(i, 7) + bias.value()(7)) / (512.0 * 300);
  CHECK(bias.grad()(7) == Approx(ref));
}

TEST_CASE("autodiff: no_grad records nothing; constants and detach cut the graph", "[autodiff]") {
  V x(Td::from({1, 2}));
  {
    gd::no_grad guard;
    CHECK_FALSE(gd::grad_enabled());
    V y = x * 3.0;
    CHECK_FALSE(y.requires_grad());
    CHECK(y.value()(1) == 6.0);
  }
  CHECK(gd::grad_enabled());
  V c = V::constant(Td::from({5, 5}));
  gd::backward(gd::sum(x * c + x.detach() * x.detach()));
  CHECK(x.grad()(0) == 5.0);
  CHECK(c.grad()(0) == 0.0);
  CHECK_THROWS_WITH(gd::backward(gd::sum(c * 2.0)), Catch::Contains("does not depend on any Var"));
}

TEST_CASE("autodiff: a define-by-run loop with branches", "[autodiff]") {
  V x(Td::from({0.5, -0.25}));
  V h = x;
  for (int i = 0; i < 5; ++i) h = (i % 2 == 0) ? V(gd::tanh(h * 1.5)) : V(gd::sin(h) + h);
  CHECK_THAT([](const V& v) {
    V h = v;
    for (int i = 0; i < 5; ++i) h = (i % 2 == 0) ? V(gd::tanh(h * 1.5)) : V(gd::sin(h) + h);
    return h;
  }, gd::testing::GradientIsCorrect(Td::from({0.5, -0.25}), 1e-8, {.delta = 1e-6}));
}

TEST_CASE("autodiff: a deep chain does not overflow the stack", "[autodiff]") {
  V x(Td::from({1.0}));
  V h = x;
  for (int i = 0; i < 20000; ++i) h = h * 1.0001;
  gd::backward(h);
  CHECK(x.grad()(0) == Approx(std::pow(1.0001, 20000)));
}

TEST_CASE("custom_op: one input, user gradient, inside expressions", "[custom_op]") {
  auto my_relu = gd::custom_op(
      [](const Td& x) { return gd::eval(gd::maximum(x, 0.0)); },
      [](const Td& x, const Td&, const Td& g) { return gd::eval(g * (x > 0.0)); }, "my_relu");
  V x(Td::from({-1, 2, -3, 4}));
  V y = my_relu(x * x - 5.0);  // x^2 - 5 > 0 only for |x| > sqrt 5
  CHECK(y.value()(3) == 11.0);
  gd::backward(gd::sum(y));
  CHECK(x.grad()(0) == 0.0);
  CHECK(x.grad()(2) == -6.0);
  CHECK_THAT([&](const V& v) { return my_relu(v * v - 1.0); },
             gd::testing::GradientIsCorrect(Td::from({-2, 0.5, 3}), 1e-6));
  // tensors in, tensor out
  Td t = my_relu(Td::from({-1, 1}));
  CHECK(t(0) == 0.0);
}

TEST_CASE("custom_op: N inputs and a wrong gradient shape", "[custom_op]") {
  auto my_matmul = gd::custom_op(
      [](const Td& a, const Td& b) { return gd::eval(gd::matmul(a, b)); },
      [](const std::array<Td, 2>& in, const Td&, const Td& g) {
        return std::array<Td, 2>{gd::eval(gd::matmul(g, gd::transpose(in[1]))),
                                 gd::eval(gd::matmul(gd::transpose(in[0]), g))};
      });
  gd::Rng rng(4);
  const Td a0 = Td::random_normal({3, 4}, rng), b0 = Td::random_normal({4, 2}, rng);
  CHECK_THAT([&](const V& a, const V& b) { return my_matmul(a, b); }, gd::testing::GradientIsCorrect({a0, b0}, 1e-6));
  auto bad = gd::custom_op([](const Td& x) { return x; }, [](const Td&, const Td&, const Td&) { return Td::ones({7}); },
                           "bad_op");
  V x(Td::ones({3}));
  CHECK_THROWS_WITH(gd::backward(gd::sum(bad(x))),
                    Catch::Contains("bad_op") && Catch::Contains("[7]") && Catch::Contains("[3]"));
  // the failed pass leaves nothing behind: a correct one still works
  gd::backward(gd::sum(x * 2.0));
  CHECK(x.grad()(0) == 2.0);
}

TEST_CASE("gradient check: Jacobians against a closed form", "[gradcheck]") {
  // y = [x0*x1, sin(x0)] -> J = [[x1, cos x0], [x0, 0]] with rows = inputs
  auto f = [](const V& x) {
    return gd::concat(std::vector<V>{gd::reshape(gd::prod(x), {1}), gd::reshape(gd::slice(V(gd::sin(x)), {0}, {1}), {1})}, 0);
  };
  const Td x0 = Td::from({0.3, 2.0});
  auto [theoretical, numerical] = gd::compute_gradient(f, x0, {.delta = 1e-5});
  CHECK(theoretical.shape() == gd::Shape{2, 2});
  CHECK(theoretical(0, 0) == Approx(2.0));
  CHECK(theoretical(0, 1) == Approx(std::cos(0.3)));
  CHECK(theoretical(1, 0) == Approx(0.3));
  CHECK(theoretical(1, 1) == 0.0);
  CHECK(numerical(0, 1) == Approx(std::cos(0.3)).epsilon(1e-8));
  CHECK(gd::compute_gradient_error(f, x0) < 1e-6);
}

TEST_CASE("gradient check: views of the input, a runtime list of inputs, the error measure", "[gradcheck]") {
  // reshape shares x's storage: the checker must read y before perturbing x again
  CHECK(gd::compute_gradient_error([](const V& x) { return gd::reshape(x, {4}); }, Td::from({1, 2, 3, 4}, {2, 2})) < 1e-9);
  const std::vector<Td> xs{Td::from({1, 2}), Td::from({3})};
  auto g = [](const std::vector<V>& v) { return gd::concat(v, 0) * 2.0; };
  const auto js = gd::compute_gradient(g, xs, {.delta = 1e-6});
  REQUIRE(js.size() == 2);
  CHECK(js[1].theoretical.shape() == gd::Shape{1, 3});
  CHECK(js[1].theoretical(0, 2) == 2.0);
  CHECK(js[1].numerical(0, 2) == Approx(2.0).epsilon(1e-9));
  CHECK(gd::compute_gradient_error(g, xs, {.delta = 1e-6}) < 1e-9);
  CHECK_THAT(g, gd::testing::GradientIsCorrect(xs, 1e-9, {.delta = 1e-6}));
  // absolute up to 1, relative beyond; NaN is infinitely wrong
  CHECK(gd::gradient_error(0.5, 0.25) == 0.25);
  CHECK(gd::gradient_error(3.0, 2.0) == 0.5);
  CHECK(std::isinf(gd::gradient_error(NAN, 1.0)));
}

TEST_CASE("gradient check: a wrong user gradient is caught and reported", "[gradcheck]") {
  auto wrong = gd::custom_op([](const Td& x) { return gd::eval(gd::exp(x)); },
                             [](const Td& x, const Td&, const Td& g) { return gd::eval(g * x); });  // should be g*e^x
  auto f = [&](const V& x) { return wrong(x); };
  CHECK(gd::compute_gradient_error(f, Td::from({0.5, 1.0})) > 0.1);
  gd::testing::GradientMatcher<double> m = gd::testing::GradientIsCorrect(Td::from({0.5, 1.0}));
  CHECK_FALSE(m.match(f));
  CHECK_THAT(m.toString(), Catch::Contains("gradient mismatch at x[0] -> y[0]") && Catch::Contains("theoretical 0.5"));
}

TEST_CASE("gradient check: the defaults pass correct code that a fixed 1e-3 step fails", "[gradcheck]") {
  // y = sin(x^2): dy/dx = 2x cos(x^2); at x = 5 the third derivative (-12x sin x^2 - 8x^3 cos x^2,
  // about -983) makes a 1e-3 step err by h^2/6 * 983 = 1.6e-4, beyond 1e-5 * |dy/dx| = 1e-4
  auto f = [](const V& x) { return gd::sin(x * x); };
  const Td x0 = Td::from({5.0, -2.0, 0.5});
  CHECK_THAT(f, gd::testing::GradientIsCorrect(x0));
  CHECK(gd::check_gradient(f, x0).ok);
  CHECK_FALSE(gd::check_gradient(f, x0, {.delta = 1e-3}).ok);
  CHECK(gd::compute_gradient_error(f, x0, {.delta = 1e-3}) > 1e-6);
  CHECK(gd::compute_gradient_error(f, x0) < 1e-8);
  // the automatic step: 1e-6 (double) / 1e-3 (float) times max(1, |x|); a positive delta as given
  CHECK(gd::detail::difference_step(0.0, 250.0) == Approx(2.5e-4).epsilon(1e-12));
  CHECK(gd::detail::difference_step(0.0, -0.5) == 1e-6);
  CHECK(gd::detail::difference_step(0.0, 4.0f) == Approx(4e-3).epsilon(1e-12));
  CHECK(gd::detail::difference_step(1e-4, 250.0) == 1e-4);
  // large inputs: the scaled step keeps the quotient accurate (y = x^2 at 1e5: dy/dx = 2e5)
  const auto [th, num] = gd::compute_gradient([](const V& x) { return x * x; }, Td::from({1e5}));
  CHECK(th(0, 0) == 2e5);
  CHECK(num(0, 0) == Approx(2e5).epsilon(1e-9));
  // float with its looser tolerances
  using Vf = gd::Var<float>;
  CHECK_THAT([](const Vf& x) { return gd::tanh(x) * x; },
             gd::testing::GradientIsCorrect(gd::Tensor<float>::from({0.3f, -1.2f, 2.0f}), {.rtol = 1e-2, .atol = 1e-3}));
}

TEST_CASE("gradient check: a mismatch is reported at its coordinates, and the matcher negates", "[gradcheck]") {
  // y = x^2 elementwise on a [2,3] input, with a user gradient that is wrong at x[1,0] only
  auto sq = gd::custom_op([](const Td& x) { return gd::eval(x * x); },
                          [](const Td& x, const Td&, const Td& g) {
                            Td d = gd::eval(g * x * 2.0);
                            d.data()[3] += g.data()[3];  // 2x + 1 at flat index 3 = [1,0]
                            return d;
                          });
  auto f = [&](const V& x) { return sq(x); };
  const Td x0 = Td::from({0.5, -1, 2, 1.5, 0.25, -2}, {2, 3});
  const gd::GradientCheckResult r = gd::check_gradient(f, x0);
  CHECK_FALSE(r.ok);
  CHECK(r.where() == "x[1,0] -> y[1,0]");
  CHECK(r.theoretical == 4.0);                         // 2 * 1.5 + 1
  CHECK(r.numerical == Approx(3.0).epsilon(1e-9));     // 2 * 1.5
  std::ostringstream os;
  os << r;
  CHECK_THAT(os.str(), Catch::StartsWith("gradient mismatch at x[1,0] -> y[1,0]: theoretical 4, numerical 3") &&
                           Catch::Contains("> 1e-08 + 1e-05 * |numerical|"));
  CHECK_THAT(f, !gd::testing::GradientIsCorrect(x0));
  gd::testing::GradientMatcher<double> m = gd::testing::GradientIsCorrect(x0);
  CHECK_FALSE(m.match(f));
  CHECK_THAT(m.toString(), Catch::Contains("has a correct gradient (central differences, step automatic)") &&
                               Catch::Contains("gradient mismatch at x[1,0] -> y[1,0]"));
  // the negated matcher, given a correct gradient, says how close it came
  auto good = [](const V& x) { return x * x; };
  gd::testing::GradientMatcher<double> n = !gd::testing::GradientIsCorrect(x0);
  CHECK_FALSE(n.match(good));
  CHECK_THAT(n.toString(), Catch::StartsWith("has a wrong gradient") && Catch::Contains("gradient ok"));
  // several inputs name the input; a scalar output reads y[]
  const gd::GradientCheckResult r2 =
      gd::check_gradient([&](const V& a, const V& b) { return gd::sum(a * b) + gd::sum(sq(b)); }, {x0, x0});
  CHECK(r2.where() == "input 1, x[1,0] -> y[]");
  // the function prints as "f", not as the "1" of a lambda converted to bool
  CHECK(Catch::Detail::stringify(good) == "f");
  CHECK(Catch::Detail::stringify(f) == "f");
  // bad options name themselves
  CHECK_THROWS_AS(gd::check_gradient(good, x0, {.rtol = -1}), gd::value_error);
  CHECK_THROWS_WITH(gd::check_gradient(good, x0, {.rtol = -1}), Catch::Contains("rtol and atol must not be negative"));
  CHECK_THROWS_WITH(gd::check_gradient(good, x0, {.delta = -1e-3}), Catch::Contains("delta must be positive"));
}

TEST_CASE("autodiff: a loss's value is the same read before or after its backward pass", "[autodiff]") {
  gd::Rng rng(8);
  V a(Td::random_normal({3000}, rng)), b(Td::random_normal({3000}, rng));
  double expect = 0;
  for (int64_t i = 0; i < 3000; ++i) expect += std::exp(0.1 * a.value()(i) * b.value()(i)) * b.value()(i);
  auto early = gd::mean(gd::exp(a * b * 0.1) * b);
  CHECK(early.item() == Approx(expect / 3000));  // read first: computed on demand
  auto late = gd::mean(gd::exp(a * b * 0.1) * b);
  gd::backward(late);  // value produced by the backward sweep
  CHECK(late.item() == Approx(expect / 3000));
  CHECK(a.grad()(5) == Approx(std::exp(0.1 * a.value()(5) * b.value()(5)) * 0.1 * b.value()(5) * b.value()(5) / 3000));
}

TEST_CASE("custom_op: an N-input backward may ask which inputs need a gradient", "[custom_op]") {
  std::array<bool, 2> seen{};
  auto mul = gd::custom_op([](const Td& a, const Td& b) { return gd::eval(a * b); },
                           [&](const std::array<Td, 2>& in, const Td&, const Td& g, const std::array<bool, 2>& needs) {
                             seen = needs;
                             return std::array<Td, 2>{needs[0] ? gd::eval(g * in[1]) : Td(), needs[1] ? gd::eval(g * in[0]) : Td()};
                           });
  V w(Td::from({2, 3}));
  const Td data = Td::from({5, 7});
  gd::backward(gd::sum(mul(data, w)));
  CHECK_FALSE(seen[0]);
  CHECK(seen[1]);
  CHECK(w.grad()(1) == 7.0);
}

TEST_CASE("autodiff: where with an int64 mask picks by non-zero and routes the gradient", "[autodiff]") {
  // an int64 mask (e.g. sequence lengths turned into 0/1 by hand) is converted once; the
  // expression stays differentiable in a and b
  const gd::Tensor<int64_t> mask = gd::Tensor<int64_t>::from({2, 0, -5, 0});
  gd::Var<double> a(gd::Tensor<double>::from({1, 2, 3, 4})), b(gd::Tensor<double>::from({10, 20, 30, 40}));
  gd::Var<double> y = gd::where(mask, a * a, b * 3.0);
  gd::backward(gd::sum(y));
  const double want_y[] = {1, 60, 9, 120}, want_da[] = {2, 0, 6, 0}, want_db[] = {0, 3, 0, 3};
  for (int64_t i = 0; i < 4; ++i) {
    CHECK(y.value()(i) == want_y[i]);
    CHECK(a.grad()(i) == want_da[i]);
    CHECK(b.grad()(i) == want_db[i]);
  }
}

// A weight applied at every step of a loop (a decoder's cell kernel): the backward pass defers
// each step's term xᵀ·g of the weight's gradient and adds them as one product at the end of the
// pass (autodiff/node.hpp, LeafNode). The same weight also reaches the output through paths that
// are not deferred: as the left operand of a product, transposed, and in a penalty.
TEST_CASE("autodiff: a weight used at every step of a loop gets the gradient of every use", "[autodiff]") {
  gd::Rng rng(31);
  const Td w0 = Td::random_normal({3, 4}, rng, 0, 0.5), u0 = Td::random_normal({4, 4}, rng, 0, 0.5);
  std::vector<V> xs;
  for (int t = 0; t < 5; ++t) xs.push_back(V::constant(Td::random_normal({2, 3}, rng)));
  const V v = V::constant(Td::random_normal({4, 2}, rng));
  const V probe = V::constant(Td::random_normal({2, 4}, rng));
  auto f = [&](const std::vector<V>& p) {  // p = {w [3, 4], u [4, 4]}
    V h = V::constant(Td::zeros({2, 4}));
    V out = V::constant(Td::zeros({2, 4}));
    for (const V& x : xs) {
      h = gd::tanh(gd::matmul(x, p[0]) + gd::matmul(h, p[1]));  // x · w: deferred; h · u: deferred
      out = out + h;
    }
    const V left = gd::matmul(p[0], v);                                      // w as the left operand
    const V trans = gd::matmul(probe, p[0], {.transpose_b = true});          // w transposed: [2, 3]
    return gd::to_var(gd::sum(out * out) + gd::sum(left) + gd::sum(trans) + 0.1 * gd::sum(p[0] * p[0]));
  };
  SECTION("against finite differences") {
    const auto r = gd::check_gradient([&](const std::vector<V>& p) { return f(p); }, std::vector<Td>{w0, u0});
    INFO(r);
    CHECK(r.ok);
  }
  SECTION("backward accumulates it once per pass, as gradients() returns it") {
    V w(w0.clone()), u(u0.clone());
    const auto want = gd::gradients(f({w, u}), {w, u});
    gd::backward(f({w, u}));
    gd::backward(f({w, u}));
    for (int64_t i = 0; i < w0.size(); ++i) CHECK(w.grad().data()[i] == Approx(2 * want[0].data()[i]).epsilon(1e-12));
    for (int64_t i = 0; i < u0.size(); ++i) CHECK(u.grad().data()[i] == Approx(2 * want[1].data()[i]).epsilon(1e-12));
  }
  SECTION("a leaf-ready hook sees the whole gradient") {
    V w(w0.clone()), u(u0.clone());
    const auto want = gd::gradients(f({w, u}), {w, u});
    std::vector<double> seen;
    const int id = gd::add_leaf_ready_hook([&](const gd::detail::NodeBase* leaf) {
      if (leaf == w.node()) seen.assign(w.grad().data(), w.grad().data() + w.grad().size());
    });
    gd::backward(f({w, u}));
    gd::remove_leaf_ready_hook(id);
    REQUIRE(seen.size() == size_t(w0.size()));
    for (size_t i = 0; i < seen.size(); ++i) CHECK(seen[i] == Approx(want[0].data()[i]).epsilon(1e-12));
  }
}
