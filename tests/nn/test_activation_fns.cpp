// The activation constants of gd::nn are options and functions at once: `.activation =
// gd::nn::tanh` picks one for a layer, `gd::nn::tanh(x)` applies it, and inside gradus::nn an
// unqualified `tanh(x)` is still the function. References: the C library's tanh/exp and the
// definitions written out below.
#include <catch2/catch.hpp>
#include <cmath>
#include <gradus/gradus.hpp>

namespace gd = gradus;

namespace gradus::nn::lookup_check {
// Code inside gradus::nn sees the activation constants first; they must behave as the functions.
inline Tensor<double> tanh_of(const Tensor<double>& x) { return eval(tanh(x)); }
inline Tensor<double> leaky_of(const Tensor<double>& x) { return eval(leaky_relu(x)); }
}  // namespace gradus::nn::lookup_check

TEST_CASE("nn activation constants apply their function", "[nn][activation]") {
  const auto x = gd::Tensor<double>::from({-2.0, -0.5, 0.0, 0.75, 3.0}, {5});
  const gd::Tensor<double> t = gd::eval(gd::nn::tanh(x));
  const gd::Tensor<double> s = gd::eval(gd::nn::sigmoid(x));
  const gd::Tensor<double> l = gd::eval(gd::nn::leaky_relu(0.1)(x));
  const gd::Tensor<double> e = gd::eval(gd::nn::elu(x));
  const gd::Tensor<double> sp = gd::eval(gd::nn::softplus(x));
  const gd::Tensor<double> id = gd::eval(gd::nn::linear(x));
  for (int64_t i = 0; i < x.size(); ++i) {
    const double v = x(i);
    CHECK(t(i) == Approx(std::tanh(v)).margin(1e-15));
    CHECK(s(i) == Approx(1 / (1 + std::exp(-v))).margin(1e-15));
    CHECK(l(i) == Approx(v > 0 ? v : 0.1 * v).margin(1e-15));
    CHECK(e(i) == Approx(v > 0 ? v : std::exp(v) - 1).margin(1e-15));
    CHECK(sp(i) == Approx(std::log(1 + std::exp(v))).margin(1e-14));
    CHECK(id(i) == v);
  }
  const gd::Tensor<double> sm = gd::eval(gd::nn::softmax(x));
  double z = 0;
  for (int64_t i = 0; i < x.size(); ++i) z += std::exp(x(i));
  for (int64_t i = 0; i < x.size(); ++i) CHECK(sm(i) == Approx(std::exp(x(i)) / z).margin(1e-15));
}

TEST_CASE("unqualified tanh inside gradus::nn is the function", "[nn][activation]") {
  const auto x = gd::Tensor<double>::from({-1.0, 0.25, 2.0}, {3});
  const auto t = gd::nn::lookup_check::tanh_of(x);
  const auto l = gd::nn::lookup_check::leaky_of(x);
  for (int64_t i = 0; i < x.size(); ++i) {
    CHECK(t(i) == Approx(std::tanh(x(i))).margin(1e-15));
    CHECK(l(i) == Approx(x(i) > 0 ? x(i) : 0.2 * x(i)).margin(1e-15));  // tf.nn.leaky_relu's 0.2
  }
}

TEST_CASE("nn activation constants are layer options with their parameter", "[nn][activation]") {
  const gd::nn::Activation a = gd::nn::elu(0.5);
  CHECK(a.kind == gd::nn::ActivationKind::elu);
  CHECK(a.alpha == 0.5);
  CHECK(gd::nn::Activation(gd::nn::leaky_relu).alpha == 0.2);
  CHECK(gd::nn::relu == gd::nn::Activation{gd::nn::ActivationKind::relu});
  gd::Rng rng(1);
  gd::nn::Dense<double> d({.in = 2, .out = 2, .activation = gd::nn::tanh}, rng);
  CHECK(d.activation() == gd::nn::tanh);
}
