// A repeated training step performs no heap allocation once warm: every operator new in this
// executable is counted (tests/support/counting_new.cpp).
#include <atomic>
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdlib>
#include <gradus/gradus.hpp>

#include "../support/counting_new.hpp"
#include <new>

namespace gd = gradus;

TEST_CASE("steady state: a softmax-regression training step allocates nothing once warm", "[memory]") {
  gd::Rng rng(1);
  const int64_t n = 100, d = 784, k = 10;
  gd::Var<float> W(gd::Tensor<float>::zeros({d, k}));
  gd::Var<float> b(gd::Tensor<float>::zeros({k}));
  auto x = gd::Tensor<float>::random_uniform({n, d}, rng, 0, 0.05);
  auto y = gd::Tensor<float>::zeros({n, k});
  for (int64_t i = 0; i < n; ++i) y(i, int64_t(x(i, 0) * 200) % k) = 1.f;
  float first = 0, last = 0;
  auto step = [&] {
    gd::Var<float> logits = gd::matmul(x, W) + b;
    gd::Var<float> loss = gd::mean(-gd::sum(y * gd::log_softmax(logits), 1));
    gd::backward(loss);
    W.value().assign(W.value() - 0.3f * W.grad());
    b.value().assign(b.value() - 0.3f * b.grad());
    W.zero_grad();
    b.zero_grad();
    return loss.item();
  };
  for (int i = 0; i < 3; ++i) first = i == 0 ? step() : (step(), first);
  const long before = gradus_test::allocations();
  for (int i = 0; i < 20; ++i) last = step();
  const long during = gradus_test::allocations() - before;
  CHECK(during == 0);
  CHECK(last < first);  // it is really training
}

TEST_CASE("steady state: a fused loss with gradients allocates nothing once warm", "[memory]") {
  gd::Rng rng(2);
  const gd::Shape s{1 << 16};
  gd::Var<float> a(gd::Tensor<float>::random_normal(s, rng)), b(gd::Tensor<float>::random_normal(s, rng));
  gd::Var<float> c(gd::Tensor<float>::random_normal({1}, rng)), d(gd::Tensor<float>::random_normal(s, rng));
  auto step = [&] {
    gd::backward(gd::sum(gd::exp(a * b * 0.1f + c) * d));
    for (auto* v : {&a, &b, &c, &d}) v->zero_grad();
  };
  step();
  step();
  const long before = gradus_test::allocations();
  for (int i = 0; i < 10; ++i) step();
  CHECK(gradus_test::allocations() - before == 0);
}

TEST_CASE("steady state: the nothrow and aligned forms are counted and freed here too", "[memory]") {
  const long before = gradus_test::allocations();
  int* a = new (std::nothrow) int(7);
  int* b = new (std::nothrow) int[3];
  struct alignas(128) Wide {
    char c[128];
  };
  Wide* w = new (std::nothrow) Wide;
  Wide* v = new Wide[2];
  CHECK(gradus_test::allocations() - before == 4);
  CHECK(reinterpret_cast<std::uintptr_t>(w) % 128 == 0);
  CHECK(reinterpret_cast<std::uintptr_t>(v) % 128 == 0);
  delete a;
  delete[] b;
  delete w;
  delete[] v;
}
