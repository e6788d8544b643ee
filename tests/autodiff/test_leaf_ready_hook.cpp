// The leaf-ready hook of gd::backward: once per trainable leaf, as soon as its gradient is final,
// with `.grad()` already holding it (checked against gd::gradients, computed without the hook).
#include <catch2/catch.hpp>
#include <cmath>
#include <gradus/gradus.hpp>
#include <vector>

namespace gd = gradus;

TEST_CASE("leaf-ready hook: once per leaf, last layer first, gradient already final", "[autodiff][hook]") {
  gd::Var<double> x = gd::Var<double>::constant(gd::Tensor<double>::from({0.3, -0.7, 1.1, 0.4}, {2, 2}));
  gd::Var<double> w1(gd::Tensor<double>::from({0.5, -0.2, 0.1, 0.9}, {2, 2}));
  gd::Var<double> w2(gd::Tensor<double>::from({1.5, -0.4}, {2, 1}));
  gd::Var<double> unused(gd::Tensor<double>::from({2.0}));
  auto f = [&] { return gd::sum(gd::tanh(gd::matmul(gd::tanh(gd::matmul(x, w1)), w2)) * w1.value()(0, 0)); };
  // the reference: gradients without any hook (gd::gradients never calls hooks)
  const auto want = gd::gradients(gd::Var<double>(f()), {w1, w2});

  struct Call {
    const gd::detail::NodeBase* leaf;
    std::vector<double> grad;  // the leaf's .grad() when the hook ran
  };
  std::vector<Call> calls;
  const int id = gd::add_leaf_ready_hook([&](const gd::detail::NodeBase* leaf) {
    const gd::Var<double>& v = leaf == w1.node() ? w1 : w2;
    const gd::Tensor<double>& g = v.grad();
    calls.push_back({leaf, std::vector<double>(g.data(), g.data() + g.size())});
  });
  gd::Var<double> y = f();
  gd::backward(y);
  gd::remove_leaf_ready_hook(id);

  REQUIRE(calls.size() == 2);                 // w1 and w2, each once; `unused` and x never
  CHECK(calls[0].leaf == w2.node());          // the last layer's weights are final first
  CHECK(calls[1].leaf == w1.node());
  for (const Call& c : calls) {
    const gd::Tensor<double>& ref = c.leaf == w1.node() ? want[0] : want[1];
    REQUIRE(c.grad.size() == size_t(ref.size()));
    for (size_t i = 0; i < c.grad.size(); ++i) CHECK(c.grad[i] == Approx(ref.data()[i]).epsilon(1e-14));
  }
  // and the gradients after backward are the same (not added twice)
  for (int64_t i = 0; i < w1.grad().size(); ++i) CHECK(w1.grad().data()[i] == Approx(want[0].data()[i]).epsilon(1e-14));
  for (int64_t i = 0; i < w2.grad().size(); ++i) CHECK(w2.grad().data()[i] == Approx(want[1].data()[i]).epsilon(1e-14));

  // removed: no more calls
  w1.zero_grad();
  w2.zero_grad();
  gd::backward(gd::Var<double>(f()));
  CHECK(calls.size() == 2);
}

TEST_CASE("leaf-ready hook: in a chain, each weight is ready as soon as its layer is done", "[autodiff][hook]") {
  // a chain h_{k+1} = tanh(h_k * w_k): w_{n-1}'s gradient is final long before w_0's
  const int n = 6;
  std::vector<gd::Var<double>> w;
  for (int k = 0; k < n; ++k) w.emplace_back(gd::Tensor<double>::from({0.9 - 0.1 * k}));
  gd::Var<double> h = gd::Var<double>::constant(gd::Tensor<double>::from({0.8}));
  for (int k = 0; k < n; ++k) h = gd::tanh(h * w[k]);
  std::vector<int> order;
  const int id = gd::add_leaf_ready_hook([&](const gd::detail::NodeBase* leaf) {
    for (int k = 0; k < n; ++k)
      if (leaf == w[k].node()) order.push_back(k);
  });
  gd::backward(h);
  gd::remove_leaf_ready_hook(id);
  CHECK(order == std::vector<int>{5, 4, 3, 2, 1, 0});
  // gd::gradients does not call hooks
  const int id2 = gd::add_leaf_ready_hook([&](const gd::detail::NodeBase*) { order.push_back(-1); });
  gd::gradients(h, {w[0]});
  gd::remove_leaf_ready_hook(id2);
  CHECK(order.size() == size_t(n));
}
