// Forward values of the layers against computations written out here in plain double loops:
// Dense, LayerNorm, BatchNorm (training, moving averages, eval), Embedding, Dropout, pooling;
// default initializers; lazy activation layers and fusion through Sequential.
#include <catch2/catch.hpp>
#include <omp.h>
#include <cmath>
#include <vector>

#include <gradus/gradus.hpp>
#include <gradus/nn.hpp>

namespace gd = gradus;
namespace nn = gradus::nn;
using Td = gd::Tensor<double>;
using V = gd::Var<double>;

namespace {

void check_close(const Td& got, const Td& want, double tol = 1e-12) {
  REQUIRE(got.shape() == want.shape());
  for (int64_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    CHECK(got.data()[i] == Approx(want.data()[i]).margin(tol));
  }
}

// Per-channel mean and biased variance over all leading axes of x [..., C].
void channel_moments(const Td& x, std::vector<double>& mean, std::vector<double>& var) {
  const int64_t c = x.shape().back(), rows = x.size() / c;
  mean.assign(size_t(c), 0);
  var.assign(size_t(c), 0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < c; ++j) mean[size_t(j)] += x.data()[r * c + j] / double(rows);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < c; ++j) var[size_t(j)] += std::pow(x.data()[r * c + j] - mean[size_t(j)], 2) / double(rows);
}

}  // namespace

TEST_CASE("nn: Dense computes activation(x . kernel + bias)", "[nn][layers]") {
  gd::Rng rng(1);
  nn::Dense<double> d({.in = 3, .out = 2, .activation = nn::tanh, .bias_initializer = gd::init::constant{.value = 0.25}},
                      rng);
  const Td k = Td::from({0.1, -0.2, 0.3, 0.4, -0.5, 0.6}, {3, 2});
  d.kernel().value().copy_(k);
  const Td x = Td::from({1, 2, 3, -1, 0, 2}, {2, 3});
  Td want({2, 2});
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) {
      double s = 0.25;
      for (int m = 0; m < 3; ++m) s += x(i, m) * k(m, j);
      want(i, j) = std::tanh(s);
    }
  check_close(d.forward(x).value(), want);
  CHECK(d.activation() == nn::tanh);

  // batched input [2, 2, 3] and a linear layer without bias
  nn::Dense<double> lin({.in = 3, .out = 2, .use_bias = false}, rng);
  lin.kernel().value().copy_(k);
  const V y = lin.forward(x.reshape({2, 1, 3}));
  CHECK(y.shape() == gd::Shape{2, 1, 2});
  CHECK(y.value()(1, 0, 1) == Approx(-1 * -0.2 + 2 * 0.6));
  CHECK(lin.named_parameters().size() == 1);

  CHECK_THROWS_WITH(d.forward(Td::zeros({2, 4})), Catch::Contains("Dense: expected input [..., 3]"));
  CHECK_THROWS_AS(nn::Dense<double>({.in = -3, .out = 2}, rng), gd::value_error);  // .in = 0 is lazy (test_module)
  CHECK_THROWS_AS(nn::Dense<double>({.in = 3, .out = 0}, rng), gd::value_error);
}

// A bias's gradient is the column sums of the layer's adjoint (backend::sum_rows): a tall one is
// summed by chunks of rows on the pool's threads, each chunk's sums then added in chunk order.
// Against a double sum, the same bits twice, and within rounding of the one-thread sum.
TEST_CASE("nn: a bias's gradient summed over many rows by chunks on the pool", "[nn][layers]") {
  using Tf = gd::Tensor<float>;
  const int threads = omp_get_max_threads();
  for (const gd::Shape& s : {gd::Shape{333, 257}, gd::Shape{5000, 32}, gd::Shape{70001, 1}, gd::Shape{40, 10}}) {
    INFO("shape " << s);
    gd::Rng rng(43);
    const Tf x = Tf::random_uniform(s, rng, -1, 1);
    const auto column_sums = [&](int t) {
      omp_set_num_threads(t);
      Tf out = Tf::empty({s[1]});
      gd::backend::sum_rows(x.data(), s[0], s[1], out.data(), gd::cpu);
      omp_set_num_threads(threads);
      return out;
    };
    const Tf first = column_sums(2), second = column_sums(2), one = column_sums(1);
    for (int64_t c = 0; c < s[1]; ++c) {
      double exact = 0;
      for (int64_t r = 0; r < s[0]; ++r) exact += double(x(r, c));
      CHECK(double(first(c)) == Approx(exact).margin(2e-6 * double(s[0])));
      CHECK(first(c) == second(c));
      CHECK(double(one(c)) == Approx(double(first(c))).margin(2e-6 * double(s[0])));
    }
  }
}

TEST_CASE("nn: every Dense activation matches its formula", "[nn][layers]") {
  gd::Rng rng(11);
  const Td x = Td::random_normal({4, 3}, rng, 0.0, 2.0);
  auto f = [](const nn::Activation& a, double z) {
    switch (a.kind) {
      case nn::ActivationKind::relu: return std::max(z, 0.0);
      case nn::ActivationKind::leaky_relu: return z > 0 ? z : a.alpha * z;
      case nn::ActivationKind::elu: return z > 0 ? z : a.alpha * (std::exp(z) - 1);
      case nn::ActivationKind::selu:
        return 1.0507009873554804934 * (z > 0 ? z : 1.6732632423543772848 * (std::exp(z) - 1));
      case nn::ActivationKind::gelu: return 0.5 * z * (1 + std::erf(z / std::sqrt(2.0)));
      case nn::ActivationKind::tanh: return std::tanh(z);
      case nn::ActivationKind::sigmoid: return 1 / (1 + std::exp(-z));
      case nn::ActivationKind::softplus: return std::log1p(std::exp(z));
      case nn::ActivationKind::softsign: return z / (1 + std::abs(z));
      default: return z;
    }
  };
  for (nn::Activation a : std::initializer_list<nn::Activation>{nn::linear, nn::relu, nn::leaky_relu(0.1), nn::elu(0.5), nn::selu, nn::gelu, nn::tanh,
                           nn::sigmoid, nn::softplus, nn::softsign, nn::softmax}) {
    INFO(a);
    nn::Dense<double> d({.in = 3, .out = 5, .activation = a, .bias_initializer = gd::init::random_normal{.stddev = 1}},
                        rng);
    const Td k = d.kernel().value(), b = d.bias().value();
    Td want({4, 5});
    for (int64_t i = 0; i < 4; ++i) {
      double total = 0;
      for (int64_t j = 0; j < 5; ++j) {
        double z = b(j);
        for (int64_t m = 0; m < 3; ++m) z += x(i, m) * k(m, j);
        want(i, j) = a == nn::softmax ? std::exp(z) : f(a, z);
        total += want(i, j);
      }
      if (a == nn::softmax)
        for (int64_t j = 0; j < 5; ++j) want(i, j) /= total;
    }
    check_close(d.forward(x).value(), want, 1e-12);
  }
}

TEST_CASE("nn: every activation in a float layer, by its constant and by Activation(kind, alpha), against double",
          "[nn][layers]") {
  // A float layer runs the kernels its Activation value carries (ops/bias_activation.hpp); a
  // double layer reaches them through a switch over the kinds. Both must give the double layer's
  // values and gradients, whichever way the activation was made.
  gd::Rng rng(13);
  const Td x = Td::random_normal({6, 3}, rng, 0.0, 2.0), g = Td::random_normal({6, 4}, rng);
  for (nn::Activation a : std::initializer_list<nn::Activation>{nn::linear, nn::relu, nn::leaky_relu(0.1), nn::elu(0.5),
                                                                nn::selu, nn::gelu, nn::tanh, nn::sigmoid, nn::softplus,
                                                                nn::softsign, nn::softmax}) {
    int way = 0;
    for (const nn::Activation made : {a, nn::Activation(a.kind, a.alpha)}) {
      INFO(made << (way++ ? ", made by kind" : ""));
      nn::Dense<double> dd({.in = 3, .out = 4, .activation = made, .bias_initializer = gd::init::random_normal{}}, rng);
      nn::Dense<float> df({.in = 3, .out = 4, .activation = made}, rng);
      // the same weights, float-representable, in both layers
      df.kernel().value() = gd::cast<float>(dd.kernel().value()), df.bias().value() = gd::cast<float>(dd.bias().value());
      dd.kernel().value() = gd::cast<double>(df.kernel().value()), dd.bias().value() = gd::cast<double>(df.bias().value());
      gd::Var<float> xf(gd::cast<float>(x));
      gd::Var<double> xd(gd::cast<double>(xf.value()));
      const gd::Var<double> yd = dd(xd);
      const gd::Var<float> yf = df(xf);
      const gd::Tensor<float> gf = gd::cast<float>(g);
      const std::vector<Td> want = gd::gradients(yd, {xd, dd.kernel(), dd.bias()}, &g);
      const std::vector<gd::Tensor<float>> got = gd::gradients(yf, {xf, df.kernel(), df.bias()}, &gf);
      check_close(gd::cast<double>(yf.value()), yd.value(), 1e-5);
      for (size_t i = 0; i < want.size(); ++i) check_close(gd::cast<double>(got[i]), want[i], 1e-4);
    }
  }
  nn::Activation changed = nn::relu;  // the kernels are relu's: a kind assigned later is refused
  changed.kind = nn::ActivationKind::gelu;
  nn::Dense<float> d({.in = 3, .out = 4, .activation = changed}, rng);
  CHECK_THROWS_WITH(d(gd::Tensor<float>::ones({2, 3})),
                    Catch::Contains("Activation: kind set to gelu after it was made as relu"));
  CHECK(nn::Activation(nn::ActivationKind::elu, 0.5) == nn::elu(0.5));
}

TEST_CASE("nn: the fused leaky ReLU, ELU, SELU, sigmoid and softsign in float, rows wider than a vector, "
          "against double loops",
          "[nn][layers]") {
  // Their CPU rules are loops of branch-free vm:: arithmetic (backend/cpu/bias_activation.hpp);
  // 29 columns run each row through the vector body and the remainder at every ISA.
  gd::Rng rng(12);
  const int64_t rows = 37, n = 29;
  const Td hd = Td::random_normal({rows, n}, rng, 0.0, 2.0), bd = Td::random_normal({n}, rng);
  const Td gd_ = Td::random_normal({rows, n}, rng);
  gd::Tensor<float> h = gd::cast<float>(hd);
  const gd::Tensor<float> b = gd::cast<float>(bd), g = gd::cast<float>(gd_);
  h(0, 0) = -b(0);  // z = 0 exactly: the negative side's rule (value 0, slope alpha)
  constexpr double selu_scale = 1.0507009873554804934, selu_alpha = 1.6732632423543772848;
  for (nn::Activation a :
       std::initializer_list<nn::Activation>{nn::leaky_relu(0.1), nn::elu(0.5), nn::selu, nn::sigmoid, nn::softsign}) {
    INFO(a);
    gd::Var<float> hv(h), bv(b);
    const gd::Var<float> y = gd::detail::bias_activation(hv, bv, a);
    const std::vector<gd::Tensor<float>> grads = gd::gradients(y, {hv, bv}, &g);
    std::vector<double> db(size_t(n), 0.0);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t f = 0; f < n; ++f) {
        INFO("row " << r << " column " << f);
        const double zf = double(float(h(r, f) + b(f)));  // z as the float kernel adds it
        double want = zf > 0 ? zf : a.alpha * zf, slope = zf > 0 ? 1.0 : a.alpha;  // leaky ReLU
        if (a.kind == nn::ActivationKind::elu) {
          want = zf > 0 ? zf : a.alpha * std::expm1(zf);
          slope = zf > 0 ? 1.0 : a.alpha * std::exp(zf);
        } else if (a.kind == nn::ActivationKind::selu) {
          want = selu_scale * (zf > 0 ? zf : selu_alpha * std::expm1(zf));
          slope = selu_scale * (zf > 0 ? 1.0 : selu_alpha * std::exp(zf));
        } else if (a.kind == nn::ActivationKind::sigmoid) {
          want = 1 / (1 + std::exp(-zf));
          slope = want * (1 - want);
        } else if (a.kind == nn::ActivationKind::softsign) {
          want = zf / (1 + std::abs(zf));
          slope = 1 / ((1 + std::abs(zf)) * (1 + std::abs(zf)));
        }
        const double dh = double(g(r, f)) * slope;
        db[size_t(f)] += dh;
        CHECK(double(y.value()(r, f)) == Approx(want).epsilon(4e-7).margin(1e-7));
        CHECK(double(grads[0](r, f)) == Approx(dh).epsilon(4e-7).margin(1e-6));
      }
    for (int64_t f = 0; f < n; ++f) CHECK(double(grads[1](f)) == Approx(db[size_t(f)]).margin(1e-5));
  }
}

TEST_CASE("nn: default kernel initializers follow the activation", "[nn][layers]") {
  gd::Rng rng(2);
  const double he = std::sqrt(6.0 / 400), glorot = std::sqrt(6.0 / 500);  // limits for [400, 100]
  auto max_abs = [](const Td& t) {
    double m = 0;
    for (double v : t) m = std::max(m, std::abs(v));
    return m;
  };
  nn::Dense<double> r({.in = 400, .out = 100, .activation = nn::relu}, rng);
  nn::Dense<double> t({.in = 400, .out = 100, .activation = nn::tanh}, rng);
  nn::Dense<double> own({.in = 400, .out = 100, .kernel_initializer = gd::init::zeros{}}, rng);
  CHECK(max_abs(r.kernel().value()) <= he);
  CHECK(max_abs(r.kernel().value()) > glorot);  // 40000 draws reach beyond the Glorot limit
  CHECK(max_abs(t.kernel().value()) <= glorot);
  CHECK(max_abs(own.kernel().value()) == 0.0);
  CHECK(max_abs(r.bias().value()) == 0.0);
  CHECK(nn::leaky_relu(0.1).alpha == 0.1);
  CHECK(nn::leaky_relu(0.1).relu_like());
}

TEST_CASE("nn: LayerNorm normalises the last axis (epsilon 1e-3)", "[nn][layers]") {
  gd::Rng rng(3);
  nn::LayerNorm<double> ln({.features = 4});
  ln.gamma().value().copy_(Td::from({1.0, 2.0, 0.5, -1.0}));
  ln.beta().value().copy_(Td::from({0.0, 0.1, 0.2, 0.3}));
  const Td x = Td::random_normal({2, 3, 4}, rng, 1.0, 2.0);
  Td want(x.shape());
  for (int64_t r = 0; r < 6; ++r) {
    double m = 0, v = 0;
    for (int j = 0; j < 4; ++j) m += x.data()[r * 4 + j] / 4;
    for (int j = 0; j < 4; ++j) v += std::pow(x.data()[r * 4 + j] - m, 2) / 4;
    for (int j = 0; j < 4; ++j)
      want.data()[r * 4 + j] = (x.data()[r * 4 + j] - m) / std::sqrt(v + 1e-3) * ln.gamma().value()(j) +
                               ln.beta().value()(j);
  }
  auto y = ln.forward(x);
  static_assert(!gd::is_var_v<decltype(y)>, "LayerNorm returns a lazy expression");
  check_close(gd::eval(y), want, 1e-12);
  CHECK(ln.parameter_count() == 8);
  nn::LayerNorm<double> fixed({.features = 4, .center = false, .scale = false});
  CHECK(fixed.parameter_count() == 0);
}

TEST_CASE("nn: BatchNorm uses batch statistics in training and moves its buffers", "[nn][layers]") {
  gd::Rng rng(4);
  nn::BatchNorm<double> bn({.features = 3, .momentum = 0.9});
  bn.gamma().value().copy_(Td::from({1.0, -2.0, 0.5}));
  bn.beta().value().copy_(Td::from({0.5, 0.0, -1.0}));
  std::vector<double> mm(3, 0.0), mv(3, 1.0);  // the moving statistics, by hand
  for (int step = 0; step < 3; ++step) {
    const Td x = Td::random_normal({2, 2, 2, 3}, rng, double(step), 1.0 + step);
    std::vector<double> mean, var;
    channel_moments(x, mean, var);
    Td want(x.shape());
    for (int64_t i = 0; i < x.size(); ++i) {
      const auto j = size_t(i % 3);
      want.data()[i] = (x.data()[i] - mean[j]) / std::sqrt(var[j] + 1e-3) * bn.gamma().value()(int64_t(j)) +
                       bn.beta().value()(int64_t(j));
    }
    check_close(gd::eval(bn.forward(x)), want, 1e-12);
    for (size_t j = 0; j < 3; ++j) {
      mm[j] = 0.9 * mm[j] + 0.1 * mean[j];
      mv[j] = 0.9 * mv[j] + 0.1 * var[j];
    }
    for (int64_t j = 0; j < 3; ++j) {
      CHECK(bn.moving_mean()(j) == Approx(mm[size_t(j)]).epsilon(1e-12));
      CHECK(bn.moving_variance()(j) == Approx(mv[size_t(j)]).epsilon(1e-12));
    }
  }
  // eval: the moving statistics, and the buffers stay as they are
  bn.eval();
  const Td x = Td::random_normal({4, 3}, rng);
  Td want(x.shape());
  for (int64_t i = 0; i < x.size(); ++i) {
    const auto j = size_t(i % 3);
    want.data()[i] = (x.data()[i] - mm[j]) / std::sqrt(mv[j] + 1e-3) * bn.gamma().value()(int64_t(j)) +
                     bn.beta().value()(int64_t(j));
  }
  check_close(gd::eval(bn.forward(x)), want, 1e-12);
  CHECK(bn.moving_mean()(0) == Approx(mm[0]).epsilon(1e-12));
  CHECK(bn.named_buffers().size() == 2);
  CHECK_THROWS_WITH(bn.forward(Td::zeros({2, 4})), Catch::Contains("BatchNorm: expected input [..., 3]"));
}

TEST_CASE("nn: Embedding gathers rows of its table", "[nn][layers]") {
  gd::Rng rng(5);
  nn::Embedding<double> emb({.vocab = 5, .dim = 3}, rng);
  const Td table = emb.embeddings().value();
  for (double v : table) CHECK(std::abs(v) <= 0.05);
  const gd::Tensor<int64_t> ids = gd::Tensor<int64_t>::from({4, 0, 4, 2}, {2, 2});
  const V e = emb.forward(ids);
  CHECK(e.shape() == gd::Shape{2, 2, 3});
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 3; ++j) CHECK(e.value().data()[i * 3 + j] == table(ids.data()[i], j));
  CHECK_THROWS_WITH(emb.forward(gd::Tensor<int64_t>::from({5})), Catch::Contains("outside the vocabulary [0, 5)"));
}

TEST_CASE("nn: Dropout zeroes and rescales in training, identity in eval", "[nn][layers]") {
  gd::Rng rng(6);
  nn::Dropout<double> drop({.rate = 0.25}, rng);
  const Td x = Td::ones({100, 100});
  const Td y = drop.forward(x).value();
  int64_t zeros = 0;
  for (double v : y) {
    zeros += v == 0.0;
    if (v != 0.0) CHECK(v == Approx(1 / 0.75));
  }
  CHECK(std::abs(double(zeros) / 1e4 - 0.25) < 0.02);
  drop.eval();
  const auto state = rng.state();
  check_close(drop.forward(x).value(), x);
  CHECK(rng.state() == state);  // eval draws nothing
  CHECK_THROWS_AS(nn::Dropout<double>({.rate = 1.0}, rng), gd::value_error);
}

TEST_CASE("nn: activation layers are lazy and fuse through Sequential", "[nn][layers]") {
  gd::Rng rng(7);
  const V x(Td::from({-1.0, 0.5, 2.0}));
  auto r = nn::ReLU{}.forward(x);
  static_assert(!gd::is_var_v<decltype(r)>, "ReLU returns the lazy gd::relu(x)");
  check_close(gd::eval(r), Td::from({0.0, 0.5, 2.0}));
  check_close(gd::eval(nn::LeakyReLU{.alpha = 0.1}.forward(x)), Td::from({-0.1, 0.5, 2.0}));
  // e^x / sum(e^x) of [-1, 0.5, 2], computed with Python's math module
  check_close(gd::eval(nn::Softmax{}.forward(x)), Td::from({0.039112573270687456, 0.1752903921400367, 0.7855970345892759}),
              1e-15);

  // two activations in a row stay one expression: nothing is materialised until asked
  nn::Sequential acts(nn::ReLU{}, nn::Tanh{});
  auto y = acts.forward(x);
  static_assert(!gd::is_var_v<decltype(y)>);
  check_close(gd::eval(y), Td::from({0.0, std::tanh(0.5), std::tanh(2.0)}));

  // Dense -> ReLU -> Dense: the ReLU is evaluated inside the second layer's matmul input
  nn::Sequential net(nn::Dense<double>({.in = 3, .out = 4}, rng), nn::ReLU{}, nn::Dense<double>({.in = 4, .out = 2}, rng));
  const Td in = Td::random_normal({5, 3}, rng);
  const V out = net.forward(in);
  // reference: the two affine maps and the ReLU as loops in double
  auto affine = [](const Td& a, const Td& w, const Td& b, bool relu) {
    Td o({a.dim(0), w.dim(1)});
    for (int64_t i = 0; i < a.dim(0); ++i)
      for (int64_t j = 0; j < w.dim(1); ++j) {
        double s = b(j);
        for (int64_t p = 0; p < a.dim(1); ++p) s += a(i, p) * w(p, j);
        o(i, j) = relu ? std::max(s, 0.0) : s;
      }
    return o;
  };
  const Td h = affine(in, net.get<0>().kernel().value(), net.get<0>().bias().value(), true);
  check_close(out.value(), affine(h, net.get<2>().kernel().value(), net.get<2>().bias().value(), false));
}

TEST_CASE("nn: Flatten, pooling and GlobalAvgPool shapes and values", "[nn][layers]") {
  gd::Rng rng(8);
  const Td x = Td::random_normal({2, 4, 4, 3}, rng);
  CHECK(gd::eval(nn::Flatten{}.forward(x)).shape() == gd::Shape{2, 48});
  const Td mp = gd::eval(nn::MaxPool2d{}.forward(x));
  CHECK(mp.shape() == gd::Shape{2, 2, 2, 3});
  CHECK(mp(1, 1, 0, 2) == std::max({x(1, 2, 0, 2), x(1, 2, 1, 2), x(1, 3, 0, 2), x(1, 3, 1, 2)}));
  CHECK(gd::eval(nn::MaxPool2d{.pool_size = {3, 3}, .strides = {1, 1}, .padding = gd::Padding::same}.forward(x)).shape() ==
        gd::Shape{2, 4, 4, 3});
  const Td ap = gd::eval(nn::AvgPool2d{.pool_size = {2, 2}, .strides = {2, 2}}.forward(x));
  CHECK(ap(0, 0, 1, 1) == Approx((x(0, 0, 2, 1) + x(0, 0, 3, 1) + x(0, 1, 2, 1) + x(0, 1, 3, 1)) / 4));
  const Td g = gd::eval(nn::GlobalAvgPool{}.forward(x));
  CHECK(g.shape() == gd::Shape{2, 3});
  double s = 0;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) s += x(1, i, j, 2);
  CHECK(g(1, 2) == Approx(s / 16));
  CHECK(gd::eval(nn::GlobalAvgPool{.keepdims = true}.forward(x)).shape() == gd::Shape{2, 1, 1, 3});
}

TEST_CASE("nn: Conv2d computes the convolution plus bias, then the activation", "[nn][layers]") {
  gd::Rng rng(9);
  nn::Conv2d<double> conv({.in = 2, .filters = 3, .kernel_size = {3, 3}, .padding = gd::Padding::same,
                           .activation = nn::relu, .bias_initializer = gd::init::constant{.value = 0.1}},
                          rng);
  const Td x = Td::random_normal({1, 4, 5, 2}, rng);
  const V y = conv.forward(x);
  CHECK(y.shape() == gd::Shape{1, 4, 5, 3});
  const Td k = conv.kernel().value();
  CHECK(k.shape() == gd::Shape{3, 3, 2, 3});
  // output (0, 1, 0, f): window rows 0..2, columns -1..1 (column -1 is padding)
  for (int64_t f = 0; f < 3; ++f) {
    double s = 0.1;
    for (int64_t di = 0; di < 3; ++di)
      for (int64_t dj = 1; dj < 3; ++dj)
        for (int64_t c = 0; c < 2; ++c) s += x(0, di, dj - 1, c) * k(di, dj, c, f);
    CHECK(y.value()(0, 1, 0, f) == Approx(std::max(s, 0.0)));
  }
  nn::Conv2d<double> strided({.in = 2, .filters = 1, .kernel_size = {2, 2}, .strides = {2, 2}, .use_bias = false}, rng);
  CHECK(strided.forward(x).shape() == gd::Shape{1, 2, 2, 1});
  CHECK(strided.parameter_count() == 8);
  CHECK_THROWS_WITH(conv.forward(Td::zeros({1, 4, 4, 3})), Catch::Contains("Conv2d: expected input [..., 2]"));
  CHECK_THROWS_WITH(nn::Conv2d<double>({.in = 1, .filters = 1}, rng), Catch::Contains("kernel_size"));
}

TEST_CASE("nn: Conv2d's dilations option has the op's name and meaning", "[nn][layers]") {
  gd::Rng rng(3);
  nn::Conv2d<double> conv({.in = 1, .filters = 1, .kernel_size = {2, 2}, .dilations = {2, 2}, .use_bias = false}, rng);
  conv.kernel().value() = Td::from(std::vector<double>{1, 2, 3, 4}, {2, 2, 1, 1});
  std::vector<double> xs(16);
  for (int i = 0; i < 16; ++i) xs[i] = i;
  // y(i, j) = 1*x(i, j) + 2*x(i, j+2) + 3*x(i+2, j) + 4*x(i+2, j+2), x(r, c) = 4r + c, worked by hand.
  const Td y = conv.forward(Td::from(xs, {1, 4, 4, 1})).value();
  REQUIRE(y.shape() == gd::Shape{1, 2, 2, 1});
  CHECK(y(0, 0, 0, 0) == 68);
  CHECK(y(0, 0, 1, 0) == 78);
  CHECK(y(0, 1, 0, 0) == 108);
  CHECK(y(0, 1, 1, 0) == 118);
  CHECK_THROWS_MATCHES(nn::Conv2d<double>({.in = 1, .filters = 1, .kernel_size = {2, 2}, .dilations = {0, 1}}, rng),
                       gd::value_error,
                       Catch::Message("Conv2d: strides and dilations must be positive, got strides [1,1], dilations [0,1]"));
}
