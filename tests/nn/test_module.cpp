// Module mechanics: registration and dotted names, counts, buffers, train/eval propagation,
// moves, owned children, shared parameters, regularization_loss and add_regularization, Sequential
// naming, and a two-input / two-output model trained with loss weights [1, 0.1].
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <gradus/gradus.hpp>
#include <gradus/nn.hpp>
#include <gradus/optim.hpp>
#include <gradus/testing/module_check.hpp>

namespace gd = gradus;
namespace nn = gradus::nn;
using Td = gd::Tensor<double>;
using V = gd::Var<double>;

namespace {

std::vector<std::string> names_of(const nn::Module<double>& m) {
  std::vector<std::string> out;
  for (auto& [name, p] : m.named_parameters()) out.push_back(name);
  return out;
}

// A block with two Dense children and a BatchNorm (parameters and buffers at depth 2).
struct Block : nn::Module<double> {
  nn::Dense<double> dense1, dense2;
  nn::BatchNorm<double> norm;
  explicit Block(gd::Rng& rng)
      : dense1({.in = 3, .out = 4, .activation = nn::relu}, rng), dense2({.in = 4, .out = 2}, rng),
        norm({.features = 2}) {
    register_module("dense1", dense1);
    register_module("dense2", dense2);
    register_module("norm", norm);
  }
  V forward(const Td& x) { return norm.forward(dense2.forward(dense1.forward(x))); }
};

struct Net : nn::Module<double> {
  Block block;
  V scale;
  explicit Net(gd::Rng& rng) : block(rng) {
    scale = register_parameter("scale", Td::ones({2}));
    register_module("block", block);
  }
  V forward(const Td& x) { return block.forward(x) * scale; }
};

}  // namespace

TEST_CASE("nn: parameter names are dotted paths, own parameters first", "[nn][module]") {
  gd::Rng rng(1);
  Net net(rng);
  CHECK(names_of(net) == std::vector<std::string>{"scale", "block.dense1.kernel", "block.dense1.bias",
                                                   "block.dense2.kernel", "block.dense2.bias", "block.norm.gamma",
                                                   "block.norm.beta"});
  CHECK(net.parameter_count() == 2 + (12 + 4) + (8 + 2) + (2 + 2));
  CHECK(net.parameters().size() == 7);
  auto buffers = net.named_buffers();
  REQUIRE(buffers.size() == 2);
  CHECK(buffers[0].first == "block.norm.moving_mean");
  CHECK(buffers[1].first == "block.norm.moving_variance");
  CHECK(buffers[1].second(1) == 1.0);
  auto children = net.named_children();
  REQUIRE(children.size() == 1);
  CHECK(children[0].first == "block");
  CHECK(children[0].second == &net.block);
}

TEST_CASE("nn: MLP 784-500-10 has 397510 parameters", "[nn][module]") {
  gd::Rng rng(0);
  nn::Sequential mlp(nn::Dense<float>({.in = 784, .out = 500, .activation = nn::relu}, rng),
                     nn::Dense<float>({.in = 500, .out = 10}, rng));
  CHECK(mlp.parameter_count() == 397510);
  nn::Sequential mlp2(nn::Dense<float>({.in = 784, .out = 500}, rng), nn::ReLU{},
                      nn::Dense<float>({.in = 500, .out = 10}, rng));
  CHECK(mlp2.parameter_count() == 397510);
  std::vector<std::string> names;
  for (auto& [name, p] : mlp2.named_parameters()) names.push_back(name);
  CHECK(names == std::vector<std::string>{"0.kernel", "0.bias", "2.kernel", "2.bias"});  // ReLU keeps its number
  static_assert(std::is_same_v<decltype(mlp2)::value_type, float>);
  static_assert(std::is_same_v<decltype(nn::Dense({.in = 1, .out = 1}, rng)), nn::Dense<float>>);
}

TEST_CASE("nn: train/eval propagates to every descendant", "[nn][module]") {
  gd::Rng rng(2);
  Net net(rng);
  CHECK(net.block.norm.is_training());
  net.eval();
  CHECK_FALSE(net.is_training());
  CHECK_FALSE(net.block.is_training());
  CHECK_FALSE(net.block.norm.is_training());
  net.train();
  CHECK(net.block.dense2.is_training());
}

TEST_CASE("nn: moving a module keeps every registration valid", "[nn][module]") {
  gd::Rng rng(3);
  auto make = [&] { return nn::Sequential(Block(rng), nn::Dense<double>({.in = 2, .out = 1}, rng)); };
  auto a = make();
  const auto before = names_of(a);
  const V k = a.get<1>().kernel();
  auto b = std::move(a);
  CHECK(names_of(b) == before);
  CHECK(b.named_parameters().back().second.node() == b.get<1>().bias().node());
  CHECK(b.get<1>().kernel().node() == k.node());
  b.eval();  // reaches the moved children through their offsets
  CHECK_FALSE(b.get<0>().norm.is_training());
  const Td x = Td::random_normal({5, 3}, rng);
  CHECK(b.forward(x).shape() == gd::Shape{5, 1});

  auto heap = std::make_unique<decltype(b)>(std::move(b));
  heap->train();
  CHECK(heap->get<0>().dense1.is_training());
  CHECK(names_of(*heap) == before);
}

TEST_CASE("nn: owned children, shared parameters and registration errors", "[nn][module]") {
  gd::Rng rng(4);
  struct Stack : nn::Module<double> {
    std::vector<nn::Dense<double>*> layers;
    Stack(gd::Rng& rng, int n) {
      for (int i = 0; i < n; ++i)
        layers.push_back(&register_module("layer" + std::to_string(i),
                                          std::make_unique<nn::Dense<double>>(nn::DenseOptions{.in = 2, .out = 2}, rng)));
    }
    V forward(const Td& x) {
      V h = gd::Var<double>::constant(x);
      for (auto* l : layers) h = l->forward(h);
      return h;
    }
  };
  Stack s(rng, 3);
  CHECK(s.parameter_count() == 3 * 6);
  Stack moved = std::move(s);
  CHECK(names_of(moved).back() == "layer2.bias");
  moved.eval();
  CHECK_FALSE(moved.layers[2]->is_training());

  struct Tied : nn::Module<double> {
    V w;
    nn::Dense<double> d;
    Tied(gd::Rng& rng) : d({.in = 2, .out = 2, .use_bias = false}, rng) {
      register_module("d", d);
      w = register_parameter("w", d.kernel());  // the same Var under a second name
    }
  };
  Tied tied(rng);
  CHECK(tied.parameters().size() == 1);
  CHECK(tied.parameter_count() == 4);
  CHECK(names_of(tied) == std::vector<std::string>{"w"});

  struct Bad : nn::Module<double> {
    nn::Dense<double> d;
    explicit Bad(gd::Rng& rng) : d({.in = 1, .out = 1}, rng) {}
    void add(nn::Dense<double>& other) { register_module("other", other); }
    void param(const std::string& name) { register_parameter(name, Td::zeros({1})); }
  };
  Bad bad(rng);
  auto elsewhere = std::make_unique<nn::Dense<double>>(nn::DenseOptions{.in = 1, .out = 1}, rng);
  CHECK_THROWS_AS(bad.add(*elsewhere), gd::value_error);
  CHECK_THROWS_WITH(bad.param("a.b"), Catch::Contains("contain no '.'"));
  bad.param("p");
  CHECK_THROWS_WITH(bad.param("p"), Catch::Contains("already registered"));
}

TEST_CASE("nn: regularization_loss sums every penalty, differentiably", "[nn][module]") {
  gd::Rng rng(5);
  nn::Sequential net(nn::Dense<double>({.in = 2, .out = 3, .kernel_regularizer = nn::l2(0.5)}, rng),
                     nn::Dense<double>({.in = 3, .out = 1, .bias_initializer = gd::init::constant{.value = -2.0},
                                        .kernel_regularizer = nn::l1(0.1), .bias_regularizer = nn::l1_l2(1.0, 2.0)},
                                       rng));
  const Td k0 = net.get<0>().kernel().value(), k1 = net.get<1>().kernel().value();
  double expected = 0;
  for (double v : k0) expected += 0.5 * v * v;
  for (double v : k1) expected += 0.1 * std::abs(v);
  expected += 1.0 * 2 + 2.0 * 4;  // bias -2
  V r = net.regularization_loss();
  CHECK(r.item() == Approx(expected).epsilon(1e-12));
  gd::backward(r);
  CHECK(net.get<0>().kernel().grad()(1, 2) == Approx(1.0 * k0(1, 2)));
  CHECK(net.get<1>().bias().grad()(0) == Approx(-1.0 + 2 * 2.0 * -2.0));
  CHECK(net.get<0>().bias().grad()(0) == 0.0);

  nn::Dense<double> plain({.in = 2, .out = 2}, rng);
  CHECK(plain.regularization_loss().item() == 0.0);
  CHECK_FALSE(plain.regularization_loss().requires_grad());
}

TEST_CASE("nn: add_regularization adds the penalties to a loss, and is the loss itself without any",
          "[nn][module]") {
  gd::Rng rng(5);
  nn::Dense<double> plain({.in = 2, .out = 2}, rng);
  V loss(Td::from({1.5}, {}));
  const V same = plain.add_regularization(loss);
  CHECK(same.node() == loss.node());  // no zero made and added

  // 3 + 0.5 * sum(k²) + 0.1 * sum(|b|), with b = -2 everywhere; the gradient reaches the loss too
  nn::Dense<double> reg({.in = 2, .out = 2, .bias_initializer = gd::init::constant{.value = -2.0},
                         .kernel_regularizer = nn::l2(0.5), .bias_regularizer = nn::l1(0.1)},
                        rng);
  const Td k = reg.kernel().value();
  double expected = 3;
  for (double v : k) expected += 0.5 * v * v;
  expected += 0.1 * 2 * 2;
  V x(Td::from({3.0}, {}));
  const V total = reg.add_regularization(x);
  CHECK(total.item() == Approx(expected).epsilon(1e-12));
  CHECK(total.item() == Approx(3 + reg.regularization_loss().item()).epsilon(1e-12));
  gd::backward(total);
  CHECK(x.grad().item() == 1.0);
  CHECK(reg.kernel().grad()(1, 0) == Approx(k(1, 0)));
  CHECK(reg.bias().grad()(1) == Approx(-0.1));

  // Regularizer::add_to: total + penalty, and nothing from the default one
  V t(Td::from({1.0}, {}));
  const void* before = t.node();
  nn::Regularizer{}.add_to(t, reg.kernel());
  CHECK(t.node() == before);
  nn::l1(0.5).add_to(t, V(Td::from({-1.0, 4.0}, {2})));
  CHECK(t.item() == Approx(1 + 0.5 * 5).epsilon(1e-15));
}

TEST_CASE("nn: a Regularizer's penalty, and none from the default one", "[nn][module]") {
  const nn::Regularizer none;
  CHECK_FALSE(none);
  CHECK(none.l1() == 0.0);
  CHECK(none.l2() == 0.0);
  gd::Var<float> w(gd::Tensor<float>::from({1.f, -2.f, 0.5f}, {3}));
  const gd::Var<float> zero = none(w);
  CHECK(zero.item() == 0.f);
  CHECK_FALSE(zero.requires_grad());

  // 0.25 * (1 + 2 + 0.5) + 0.5 * (1 + 4 + 0.25), and its gradient 0.25 sign(w) + 2 * 0.5 w, by hand
  const nn::Regularizer both(0.25, 0.5);
  CHECK(both);
  CHECK(both.l1() == 0.25);
  CHECK(both.l2() == 0.5);
  const gd::Var<float> p = both(w);
  CHECK(p.item() == Approx(0.875 + 2.625).epsilon(1e-6));
  gd::backward(p);
  CHECK(w.grad()(0) == Approx(0.25 + 1.0));
  CHECK(w.grad()(1) == Approx(-0.25 - 2.0));
  CHECK(w.grad()(2) == Approx(0.25 + 0.5));
  CHECK(nn::l1_l2(0.25, 0.5)(w).item() == p.item());
  std::ostringstream text;
  text << both;
  CHECK(text.str() == "Regularizer(l1=0.25, l2=0.5)");
}

namespace {
// Two modules registering one weight: the first registration carries an l2 penalty, the second
// an l1 penalty on the same Var.
struct Tied : nn::Module<double> {
  V w;
  struct Holder : nn::Module<double> {
    Holder(V shared, double l1) { register_parameter("w", shared, nn::l1(l1)); }
  } second;
  explicit Tied(const Td& init)
      : w(register_parameter("w", init, nn::l2(0.5))), second(w, 0.25) {
    register_module("second", second);
  }
};
}  // namespace

TEST_CASE("nn: a parameter shared by two modules is penalised once, by its first registration", "[nn][module]") {
  Tied net(Td::from(std::vector<double>{1, -2}, {2}));
  REQUIRE(net.parameters().size() == 1);
  CHECK(net.regularization_loss().item() == Approx(0.5 * (1 + 4)).epsilon(1e-15));  // l2 only, not + 0.25 * 3
  CHECK(net.second.regularization_loss().item() == Approx(0.25 * 3).epsilon(1e-15));  // on its own: its l1
}

TEST_CASE("nn: l2 is Keras' l * sum(w^2); TF 1's l2_regularizer(scale) is l2(scale / 2)", "[nn][module]") {
  gd::Rng rng(5);
  nn::Dense<double> keras({.in = 2, .out = 2, .use_bias = false, .kernel_regularizer = nn::l2(0.01)}, rng);
  keras.kernel().value() = Td::from(std::vector<double>{1, 2, 3, -4}, {2, 2});
  CHECK(keras.regularization_loss().item() == Approx(0.30).epsilon(1e-15));  // 0.01 * (1 + 4 + 9 + 16)
  // tf.contrib.layers.l2_regularizer(0.02)(w) = 0.02 * tf.nn.l2_loss(w) = 0.02 * 30 / 2 = 0.3
  nn::Dense<double> tf1({.in = 2, .out = 2, .use_bias = false, .kernel_regularizer = nn::l2(0.02 / 2)}, rng);
  tf1.kernel().value() = Td::from(std::vector<double>{1, 2, 3, -4}, {2, 2});
  CHECK(tf1.regularization_loss().item() == Approx(0.30).epsilon(1e-15));
  CHECK_THROWS_MATCHES(nn::l2(-1), gd::value_error, Catch::Message("l2: the factor must be >= 0, got -1"));
}

namespace {

// Two inputs, two outputs: x1 [N, 3] and x2 [N, 2] are embedded separately, joined, and feed a
// regression head y1 [N, 1] and a second head y2 [N, 2].
struct TwoInTwoOut : nn::Module<double> {
  nn::Dense<double> in1, in2, trunk, head1, head2;
  explicit TwoInTwoOut(gd::Rng& rng)
      : in1({.in = 3, .out = 4, .activation = nn::tanh}, rng), in2({.in = 2, .out = 4, .activation = nn::tanh}, rng),
        trunk({.in = 8, .out = 6, .activation = nn::relu}, rng), head1({.in = 6, .out = 1}, rng),
        head2({.in = 6, .out = 2}, rng) {
    register_module("in1", in1);
    register_module("in2", in2);
    register_module("trunk", trunk);
    register_module("head1", head1);
    register_module("head2", head2);
  }
  std::pair<V, V> forward(const Td& x1, const Td& x2) {
    V h = trunk.forward(gd::concat({in1.forward(x1), in2.forward(x2)}, 1));
    return {head1.forward(h), head2.forward(h)};
  }
};

}  // namespace

TEST_CASE("nn: a two-input, two-output model trains with loss weights [1, 0.1]", "[nn][module]") {
  gd::Rng rng(6);
  TwoInTwoOut model(rng);
  const Td x1 = Td::random_normal({32, 3}, rng), x2 = Td::random_normal({32, 2}, rng);
  // targets: smooth functions of the inputs
  Td y1({32, 1}), y2({32, 2});
  for (int64_t i = 0; i < 32; ++i) {
    y1(i, 0) = std::sin(x1(i, 0)) + 0.5 * x2(i, 1);
    y2(i, 0) = x1(i, 1) * x1(i, 2);
    y2(i, 1) = std::cos(x2(i, 0));
  }
  gd::optim::SGD<double> opt(model.parameters(), {.lr = 0.05});
  auto step = [&] {
    auto [o1, o2] = model.forward(x1, x2);
    V loss = 1.0 * gd::losses::mean_squared_error(y1, o1) + 0.1 * gd::losses::mean_squared_error(y2, o2);
    opt.minimize(loss);
    return loss.item();
  };
  const double first = step();
  double last = first;
  for (int i = 0; i < 300; ++i) last = step();
  INFO("loss " << first << " -> " << last);
  CHECK(last < 0.3 * first);
  // both heads received gradients
  CHECK(gd::sum(gd::abs(model.head2.kernel().grad())).item() > 0);
  CHECK(gd::sum(gd::abs(model.in2.kernel().grad())).item() > 0);
}

namespace {

// A residual block whose author forgot register_module("proj", proj): proj still runs in forward.
struct Forgetful : nn::Module<double> {
  nn::Dense<double> dense, proj;
  bool register_proj;
  Forgetful(gd::Rng& rng, bool reg)
      : dense({.in = 3, .out = 3, .activation = nn::tanh}, rng), proj({.in = 3, .out = 2}, rng), register_proj(reg) {
    register_module("dense", dense);
    if (reg) register_module("proj", proj);
  }
  V forward(const Td& x) { return proj.forward(V(dense.forward(x) + x)); }
};

}  // namespace

TEST_CASE("nn: check_registration finds a sub-module that was never registered", "[nn][module][registration]") {
  gd::Rng rng(3);
  const Td x = Td::random_normal({4, 3}, rng);
  Forgetful bad(rng, false);
  // parameters() misses proj's kernel [3,2] and bias [2]: the silent case
  CHECK(names_of(bad) == std::vector<std::string>{"dense.kernel", "dense.bias"});
  CHECK_THROWS_AS(nn::check_registration(bad, x), gd::value_error);
  CHECK_THROWS_WITH(nn::check_registration(bad, x),
                    "check_registration: 2 leaves ([3,2], [2]) receive a gradient but are not parameters of the "
                    "model: forgot register_module?");
  std::ostringstream warnings;
  const std::string msg = nn::check_registration(bad, x, {.action = nn::Unregistered::warn, .warnings = &warnings});
  CHECK(warnings.str() == "warning: " + msg + "\n");
  CHECK(nn::check_registration(bad, x, {.action = nn::Unregistered::ignore}) == msg);

  Forgetful good(rng, true);
  CHECK(nn::check_registration(good, x).empty());

  // one stray Var: the singular form with its shape
  V stray(Td::ones({32, 3}));
  CHECK(nn::unregistered_message("fit", nn::unregistered_leaves<double>(good, V(gd::sum(stray)))) ==
        "fit: a [32,3] leaf receives a gradient but is not a parameter of the model: forgot register_module?");
  // a Var trained on purpose next to the model is not reported when named
  CHECK(nn::unregistered_leaves<double>(good, V(gd::sum(stray) + gd::sum(good.forward(x))), {stray}).empty());
  // constants (a Tensor input, a no-grad Var) are not leaves that need a gradient
  CHECK(nn::unregistered_leaves<double>(good, V(gd::sum(good.forward(x)) * V::constant(Td::scalar(2.0)))).empty());
}

namespace {

// A user block written as in the README: Module<T, Self> makes it callable.
struct Residual : nn::Module<double, Residual> {
  nn::Dense<double> inner, outer;
  explicit Residual(gd::Rng& rng)
      : inner({.in = 4, .out = 4, .activation = nn::tanh}, rng), outer({.in = 4, .out = 4}, rng) {
    register_module("inner", inner);
    register_module("outer", outer);
  }
  V forward(const V& x) { return V(outer(inner(x)) + x); }
};

}  // namespace

TEST_CASE("nn: modules, layers and Sequential are callable: net(x) is net.forward(x)", "[nn][module][call]") {
  gd::Rng rng(11);
  const Td x0 = Td::random_normal({5, 4}, rng);
  const V x = V::constant(x0);
  Residual block(rng);
  // forward(x) by hand: outer(tanh(x W1 + b1)) + x, b = 0
  const Td h = gd::eval(gd::tanh(gd::matmul(x0, block.inner.kernel().value())));
  const Td want = gd::eval(gd::matmul(h, block.outer.kernel().value()) + x0);
  const Td got = block(x).value();
  REQUIRE(got.shape() == want.shape());
  for (int64_t i = 0; i < got.size(); ++i) CHECK(got.data()[i] == Approx(want.data()[i]).epsilon(1e-14));
  CHECK(names_of(block) == std::vector<std::string>{"inner.kernel", "inner.bias", "outer.kernel", "outer.bias"});
  CHECK(nn::check_module_gradient(block, x0).ok());

  nn::Sequential net(nn::Dense<double>({.in = 4, .out = 6}, rng), nn::ReLU{}, nn::Dense<double>({.in = 6, .out = 2}, rng));
  const Td a = net(x0).value(), b = net.forward(x0).value();
  CHECK(gd::eval(gd::max(gd::abs(a - b))).item() == 0.0);
  CHECK(gd::eval(nn::ReLU{}(x0))(0, 0) == std::max(x0(0, 0), 0.0));
  CHECK(nn::Flatten{}(Td::zeros({2, 3, 4})).shape() == gd::Shape{2, 12});
}

TEST_CASE("nn: Dense, Conv2d and LSTM without .in take it from the first input", "[nn][lazy]") {
  gd::Rng r1(21), r2(21);
  nn::Dense<double> lazy({.out = 3, .activation = nn::relu, .bias_initializer = gd::init::random_normal{}}, r1);
  nn::Dense<double> eager({.in = 5, .out = 3, .activation = nn::relu, .bias_initializer = gd::init::random_normal{}}, r2);
  CHECK_FALSE(lazy.built());
  CHECK(lazy.in() == 0);
  CHECK(lazy.kernel().shape() == gd::Shape{0, 3});
  CHECK(lazy.parameter_count() == 3);  // the bias only, until built
  // an optimizer built now sees the kernel and takes its shape at the first step
  gd::optim::Adam<double> opt_lazy(lazy.parameters(), {.lr = 0.1});
  gd::optim::Adam<double> opt_eager(eager.parameters(), {.lr = 0.1});
  gd::Rng data(3);
  const Td x = Td::random_normal({4, 5}, data);
  for (int step = 0; step < 3; ++step) {
    opt_lazy.minimize(gd::sum(gd::square(lazy(x))));
    opt_eager.minimize(gd::sum(gd::square(eager(x))));
  }
  CHECK(lazy.built());
  CHECK(lazy.in() == 5);
  CHECK(lazy.kernel().shape() == gd::Shape{5, 3});
  CHECK(gd::eval(gd::max(gd::abs(lazy.kernel().value() - eager.kernel().value()))).item() == 0.0);
  CHECK(gd::eval(gd::max(gd::abs(lazy.bias().value() - eager.bias().value()))).item() == 0.0);
  CHECK(opt_lazy.state_dict()[1].second.shape() == gd::Shape{5, 3});  // "param0/m"
  CHECK(nn::check_module_gradient(lazy, x).ok());
  // the layer is built once: another width is an error
  CHECK_THROWS_AS(lazy(Td::zeros({2, 6})), gd::shape_error);
  CHECK_THROWS_WITH(lazy(Td::zeros({2, 6})), Catch::Contains("Dense: expected input [..., 5] (in = 5), got [2,6]"));
  CHECK_THROWS_WITH(nn::Dense<double>({.in = -1, .out = 3}, r1), Catch::Contains("got in -1, out 3"));
  {
    gd::Rng r(1);
    nn::Dense<double> unbuilt({.out = 2}, r);
    CHECK_THROWS_WITH(unbuilt(Td::scalar(1.0)), "Dense: cannot take in from an input of shape []");
    CHECK_FALSE(unbuilt.built());
  }

  gd::Rng c1(5), c2(5);
  nn::Conv2d<double> conv_lazy({.filters = 2, .kernel_size = {3, 3}, .padding = gd::Padding::same}, c1);
  nn::Conv2d<double> conv_eager({.in = 3, .filters = 2, .kernel_size = {3, 3}, .padding = gd::Padding::same}, c2);
  CHECK(conv_lazy.kernel().shape() == gd::Shape{3, 3, 0, 2});
  const Td img = Td::random_normal({2, 4, 4, 3}, data);
  const Td yl = conv_lazy(img).value(), ye = conv_eager(img).value();
  CHECK(conv_lazy.in() == 3);
  CHECK(gd::eval(gd::max(gd::abs(yl - ye))).item() == 0.0);
  CHECK(nn::check_module_gradient(conv_lazy, img).ok());

  gd::Rng l1(9), l2(9);
  nn::LSTM<double> lstm_lazy({.units = 4, .return_sequences = true}, l1);
  nn::LSTM<double> lstm_eager({.in = 3, .units = 4, .return_sequences = true}, l2);
  CHECK(lstm_lazy.cell().kernel().shape() == gd::Shape{0, 16});
  const Td seq = Td::random_normal({2, 5, 3}, data);
  const Td sl = lstm_lazy(seq).value(), se = lstm_eager(seq).value();
  CHECK(lstm_lazy.cell().in() == 3);
  CHECK(gd::eval(gd::max(gd::abs(sl - se))).item() == 0.0);
  CHECK(gd::eval(gd::max(gd::abs(lstm_lazy.cell().recurrent_kernel().value() -
                                 lstm_eager.cell().recurrent_kernel().value()))).item() == 0.0);
  CHECK(nn::check_module_gradient(lstm_lazy, seq).ok());
  CHECK_THROWS_WITH(lstm_lazy.cell().build(3), "LSTMCell: build: already built with in = 3");
}

TEST_CASE("nn: Dropout registers its generator; named_generators lists each once", "[nn][module][rng]") {
  gd::Rng init(1), noise(2), other(3);
  struct TwoDrops : nn::Module<double> {
    nn::Dropout<double> a, b, c;
    TwoDrops(gd::Rng& n, gd::Rng& o) : a({.rate = 0.5}, n), b({.rate = 0.2}, n), c({.rate = 0.1}, o) {
      register_module("a", a);
      register_module("b", b);
      register_module("c", c);
    }
  } m(noise, other);
  const auto gens = m.named_generators();
  REQUIRE(gens.size() == 2);
  CHECK(gens[0].first == "a.rng");
  CHECK(gens[0].second == &noise);
  CHECK(gens[1].first == "c.rng");
  CHECK(gens[1].second == &other);
  (void)init;
}

namespace {
// A module with a parameter of its own besides its layers, and buffers (BatchNorm's statistics).
struct Summed : nn::Module<double, Summed> {
  nn::Dense<double> d;
  nn::BatchNorm<double> bn;
  V scale;
  explicit Summed(gd::Rng& rng) : d({.in = 2, .out = 2}, rng), bn({.features = 2}) {
    scale = register_parameter("scale", Td::ones({1}));
    register_module("d", d);
    register_module("bn", bn);
  }
  V forward(const V& x) { return V(bn(d(x)) * scale); }
};
}  // namespace

TEST_CASE("nn: os << module prints a summary of layers, parameter shapes and counts", "[nn][module]") {
  gd::Rng rng(1);
  nn::Sequential seq(nn::Dense<double>({.in = 4, .out = 3}, rng), nn::ReLU{}, nn::Dense<double>({.in = 3, .out = 2}, rng));
  std::ostringstream a;
  a << seq;
  // Counts: 4*3 + 3 = 15 and 3*2 + 2 = 8; ReLU is a layer of the Sequential without parameters.
  CHECK(a.str() == R"(Model: Sequential
Layer (type)  Parameters              Param #
=============================================
0 (Dense)     kernel [4,3]  bias [3]       15
1 (ReLU)                                    0
2 (Dense)     kernel [3,2]  bias [2]        8
=============================================
Total params: 23
Trainable params: 23
Frozen params: 0
Buffers (not trained): 0)");
  Summed net(rng);
  std::ostringstream b;
  b << net;
  // 1 (scale) + 2*2 + 2 (Dense) + 2 + 2 (gamma, beta); moving mean and variance: 4 buffer scalars.
  CHECK(b.str() == R"(Model: Summed
Layer (type)     Parameters              Param #
================================================
(self) (Summed)  scale [1]                    11
d (Dense)        kernel [2,2]  bias [2]        6
bn (BatchNorm)   gamma [2]  beta [2]           4
================================================
Total params: 11
Trainable params: 11
Frozen params: 0
Buffers (not trained): 4)");

  // Once the model has run, each layer's output shape in the last call (Keras' model.summary()).
  (void)seq.forward(Td::ones({5, 4}));
  (void)net(V::constant(Td::ones({7, 2})));
  std::ostringstream c, d;
  c << seq;
  d << net;
  CHECK(c.str() == R"(Model: Sequential
Layer (type)  Output shape  Parameters              Param #
===========================================================
0 (Dense)     [5,3]         kernel [4,3]  bias [3]       15
1 (ReLU)      [5,3]                                       0
2 (Dense)     [5,2]         kernel [3,2]  bias [2]        8
===========================================================
Total params: 23
Trainable params: 23
Frozen params: 0
Buffers (not trained): 0)");
  CHECK(d.str() == R"(Model: Summed
Layer (type)     Output shape  Parameters              Param #
==============================================================
(self) (Summed)  [7,2]         scale [1]                    11
d (Dense)        [7,2]         kernel [2,2]  bias [2]        6
bn (BatchNorm)   [7,2]         gamma [2]  beta [2]           4
==============================================================
Total params: 11
Trainable params: 11
Frozen params: 0
Buffers (not trained): 4)");

  // frozen layers count apart (Keras' non-trainable params)
  net.d.freeze();
  std::ostringstream e;
  e << net;
  CHECK_THAT(e.str(), Catch::EndsWith("Total params: 11\nTrainable params: 5\nFrozen params: 6\nBuffers (not trained): 4"));
}
