// A graph as long as an RNN over a long sequence: building, differentiating and freeing it
// must not depend on the stack's size (each would overflow an 8 MB stack if it recursed).
#include <catch2/catch.hpp>
#include <cmath>
#include <gradus/gradus.hpp>

namespace gd = gradus;

TEST_CASE("deep graph: a chain of 10^6 nodes back-propagates and is freed without recursion", "[autodiff]") {
  const int n = 1'000'000;
  gd::Var<double> w(gd::Tensor<double>::from({1.0}));
  {
    gd::Var<double> x = w * 1.0;
    for (int i = 0; i < n; ++i) x = x * 1.0000001;
    gd::backward(x);
    // d x / d w = 1.0000001^n
    CHECK(w.grad().item() == Approx(std::pow(1.0000001, n)).epsilon(1e-9));
  }  // the last Var of the chain goes here: one release frees a million nodes
  w.zero_grad();
  // The same chain dropped without a backward pass, and built again: the freed nodes are reused.
  for (int round = 0; round < 2; ++round) {
    gd::Var<double> x = w * 1.0;
    for (int i = 0; i < n; ++i) x = x + 1e-7;
    CHECK(x.value().item() == Approx(1.1).epsilon(1e-9));
  }
}
