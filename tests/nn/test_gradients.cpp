// Every layer through the one generic check, gd::nn::check_module_gradient, in double:
// the input and every parameter, by backward pass against central differences.
#include <catch2/catch.hpp>
#include <cmath>
#include <sstream>

#include <gradus/gradus.hpp>
#include <gradus/nn.hpp>
#include <gradus/testing/module_check.hpp>

namespace gd = gradus;
namespace nn = gradus::nn;
using Td = gd::Tensor<double>;
using V = gd::Var<double>;

namespace {

template <class M, class X>
void check_gradient(M& module, const X& x, nn::CheckGradientOptions opt = {}) {
  const nn::GradientReport report = nn::check_module_gradient(module, x, opt);
  INFO(report);
  CHECK(report.ok());
}

// Dropout with the same mask at every call: the Rng is rewound before each forward.
struct FixedMaskDropout : nn::Module<double> {
  gd::Rng rng{99};
  gd::Rng::State start = rng.state();
  nn::Dropout<double> drop{{.rate = 0.4}, rng};
  FixedMaskDropout() { register_module("drop", drop); }
  V forward(const V& x) {
    rng.set_state(start);
    return drop.forward(x);
  }
};

// GoogLeNet's Inception block: 1x1 | 1x1 -> 3x3 | 1x1 -> 5x5 | 3x3 max-pool -> 1x1, joined on channels.
struct Inception : nn::Module<double> {
  nn::Conv2d<double> b1, b2_reduce, b2, b3_reduce, b3, b4;
  nn::MaxPool2d pool{.pool_size = {3, 3}, .strides = {1, 1}, .padding = gd::Padding::same};
  Inception(gd::Rng& rng, int64_t in)
      : b1({.in = in, .filters = 2, .kernel_size = {1, 1}, .activation = nn::relu}, rng),
        b2_reduce({.in = in, .filters = 2, .kernel_size = {1, 1}, .activation = nn::relu}, rng),
        b2({.in = 2, .filters = 3, .kernel_size = {3, 3}, .padding = gd::Padding::same, .activation = nn::relu}, rng),
        b3_reduce({.in = in, .filters = 1, .kernel_size = {1, 1}, .activation = nn::relu}, rng),
        b3({.in = 1, .filters = 2, .kernel_size = {5, 5}, .padding = gd::Padding::same, .activation = nn::relu}, rng),
        b4({.in = in, .filters = 2, .kernel_size = {1, 1}, .activation = nn::relu}, rng) {
    register_module("b1", b1);
    register_module("b2_reduce", b2_reduce);
    register_module("b2", b2);
    register_module("b3_reduce", b3_reduce);
    register_module("b3", b3);
    register_module("b4", b4);
  }
  V forward(const V& x) {
    return gd::concat({b1.forward(x), b2.forward(b2_reduce.forward(x)), b3.forward(b3_reduce.forward(x)),
                       b4.forward(pool.forward(x))},
                      3);
  }
};

}  // namespace

TEST_CASE("nn gradients: Dense with every activation, with and without bias", "[nn][gradients]") {
  gd::Rng rng(1);
  const Td x = Td::random_normal({3, 4}, rng);
  for (nn::Activation a : std::initializer_list<nn::Activation>{nn::linear, nn::relu, nn::leaky_relu(0.1), nn::elu, nn::selu, nn::gelu, nn::tanh,
                           nn::sigmoid, nn::softplus, nn::softsign, nn::softmax}) {
    for (bool bias : {true, false}) {
      INFO(a << (bias ? " with bias" : " without bias"));
      nn::Dense<double> d({.in = 4, .out = 3, .activation = a, .use_bias = bias,
                           .bias_initializer = gd::init::random_normal{.stddev = 0.5}},
                          rng);
      check_gradient(d, x);
    }
  }
}

TEST_CASE("nn gradients: activation layers, Flatten, Softmax", "[nn][gradients]") {
  gd::Rng rng(2);
  const Td x = Td::random_normal({2, 5}, rng);
  nn::ReLU relu;
  nn::LeakyReLU leaky{.alpha = 0.3};
  nn::ELU elu{.alpha = 0.7};
  nn::SELU selu;
  nn::GELU gelu;
  nn::Tanh tanh;
  nn::Sigmoid sigmoid;
  nn::Softplus softplus;
  nn::Softsign softsign;
  nn::Softmax softmax;
  nn::LogSoftmax log_softmax;
  check_gradient(relu, x);
  check_gradient(leaky, x);
  check_gradient(elu, x);
  check_gradient(selu, x);
  check_gradient(gelu, x);
  check_gradient(tanh, x);
  check_gradient(sigmoid, x);
  check_gradient(softplus, x);
  check_gradient(softsign, x);
  check_gradient(softmax, x);
  check_gradient(log_softmax, x);
  nn::Flatten flatten;
  check_gradient(flatten, Td::random_normal({2, 2, 3}, rng));
}

TEST_CASE("nn gradients: LayerNorm and BatchNorm (training and eval)", "[nn][gradients]") {
  gd::Rng rng(3);
  nn::LayerNorm<double> ln({.features = 4});
  ln.gamma().value().assign(Td::random_normal({4}, rng));
  ln.beta().value().assign(Td::random_normal({4}, rng));
  check_gradient(ln, Td::random_normal({3, 4}, rng));

  nn::BatchNorm<double> bn({.features = 3});
  bn.gamma().value().assign(Td::random_normal({3}, rng));
  const Td x = Td::random_normal({2, 2, 2, 3}, rng);
  const Td mm = bn.moving_mean().clone();
  check_gradient(bn, x);  // batch statistics: the gradient flows through mean and variance too
  CHECK(bn.moving_mean()(0) == mm(0));  // the check restores the buffers it moved
  check_gradient(bn, Td::random_normal({5, 3}, rng));
  bn.eval();
  check_gradient(bn, x);
}

TEST_CASE("nn gradients: Embedding, Dropout", "[nn][gradients]") {
  gd::Rng rng(4);
  nn::Embedding<double> emb({.vocab = 6, .dim = 3}, rng);
  const auto report = nn::check_module_gradient(emb, gd::Tensor<int64_t>::from({1, 5, 1, 0}, {2, 2}));
  INFO(report);
  CHECK(report.ok());
  CHECK(report.entries.size() == 1);  // ids are not differentiated

  FixedMaskDropout drop;
  check_gradient(drop, Td::random_normal({4, 5}, rng));
  drop.eval();
  check_gradient(drop, Td::random_normal({4, 5}, rng));
}

TEST_CASE("nn gradients: Conv2d (padding, strides, dilation, activation), pooling", "[nn][gradients]") {
  gd::Rng rng(5);
  const Td x = Td::random_normal({2, 5, 6, 2}, rng);
  nn::Conv2d<double> valid({.in = 2, .filters = 3, .kernel_size = {3, 2}}, rng);
  nn::Conv2d<double> same({.in = 2, .filters = 2, .kernel_size = {3, 3}, .strides = {2, 1},
                           .padding = gd::Padding::same, .activation = nn::tanh,
                           .bias_initializer = gd::init::random_normal{}},
                          rng);
  nn::Conv2d<double> dilated({.in = 2, .filters = 2, .kernel_size = {2, 2}, .dilations = {2, 2}, .use_bias = false}, rng);
  check_gradient(valid, x);
  check_gradient(same, x);
  check_gradient(dilated, x);
  nn::MaxPool2d max_pool;
  nn::MaxPool2d max_same{.pool_size = {3, 3}, .strides = {1, 1}, .padding = gd::Padding::same};
  nn::AvgPool2d avg_pool{.pool_size = {2, 3}, .strides = {1, 2}, .padding = gd::Padding::same};
  nn::GlobalAvgPool global;
  check_gradient(max_pool, x);
  check_gradient(max_same, x);
  check_gradient(avg_pool, x);
  check_gradient(global, x);
}

TEST_CASE("nn gradients: Sequential and an Inception block", "[nn][gradients]") {
  gd::Rng rng(6);
  nn::Sequential net(nn::Conv2d<double>({.in = 1, .filters = 2, .kernel_size = {3, 3}, .activation = nn::relu}, rng),
                     nn::MaxPool2d{}, nn::Flatten{}, nn::Dense<double>({.in = 8, .out = 4}, rng),
                     nn::LayerNorm<double>({.features = 4}), nn::Tanh{}, nn::Dense<double>({.in = 4, .out = 3}, rng));
  check_gradient(net, Td::random_normal({2, 6, 6, 1}, rng));

  Inception block(rng, 3);
  const Td x = Td::random_normal({2, 5, 5, 3}, rng);
  const V y = block.forward(V::constant(x));
  CHECK(y.shape() == gd::Shape{2, 5, 5, 2 + 3 + 2 + 2});
  CHECK(block.parameter_count() == (3 * 2 + 2) + (3 * 2 + 2) + (9 * 2 * 3 + 3) + (3 + 1) + (25 * 2 + 2) + (3 * 2 + 2));
  check_gradient(block, x);
}

TEST_CASE("nn gradients: the report names what is wrong", "[nn][gradients]") {
  // A module whose backward is deliberately wrong: a custom op with the gradient doubled.
  struct Wrong {
    V forward(const V& x) const {
      static const auto twice = gd::custom_op([](const Td& a) { return gd::eval(a * 1.0); },
                                             [](const Td&, const Td&, const Td& g) { return gd::eval(g * 2.0); },
                                             "wrong");
      return twice(x);
    }
  };
  Wrong wrong;
  gd::Rng rng(7);
  const auto report = nn::check_module_gradient(wrong, Td::random_normal({3}, rng));
  CHECK_FALSE(report.ok());
  std::ostringstream os;
  os << report;
  CHECK_THAT(os.str(), Catch::Contains("FAILED") && Catch::Contains("! input [3]"));
  CHECK(report.max_error() > 0.5);
}
