// examples/custom_op.cpp — an op of one's own, checked before it is trusted: a "swish" op
// y = x * sigmoid(beta * x) written with gd::custom_op (a forward and a hand-derived gradient),
// compared against central differences with gd::check_gradient, then used in a small regression
// fitted with Adam. Exits non-zero if a gradient check fails or the fit misses its bar.
//
// The gradient, by hand: with s = sigmoid(beta x),  dy/dx = s + beta x s (1 - s).
#include <cstdio>
#include <cstdlib>

#include <gradus/gradus.hpp>

namespace gd = gradus;

template <class T>
auto make_swish(T beta) {
  return gd::custom_op(
      [beta](const gd::Tensor<T>& x) { return gd::eval(x * gd::sigmoid(beta * x)); },
      [beta](const gd::Tensor<T>& x, const gd::Tensor<T>&, const gd::Tensor<T>& g) {
        const gd::Tensor<T> s = gd::eval(gd::sigmoid(beta * x));
        return gd::eval(g * (s + beta * x * s * (T(1) - s)));
      });
}

static int run() {
  // 1. The hand-written gradient against central differences, in double, at points on both sides
  //    of zero and through a reduction, as a unit test of the op would check it.
  const auto swish = make_swish(1.5);
  const auto x0 = gd::Tensor<double>::from({-3.0, -1.2, -0.3, 0.0, 0.4, 1.1, 2.5, 4.0}, {2, 4});
  auto f = [&](const gd::Var<double>& x) { return gd::sum(swish(x * x - 1.0) * x, 1); };
  const gd::GradientCheckResult check = gd::check_gradient(f, x0);
  std::printf("gradient check of swish: %s (worst error %.2e)\n", check.ok ? "passed" : "FAILED",
              gd::compute_gradient_error(f, x0));
  if (!check.ok) return EXIT_FAILURE;

  // 2. The op in a model: y = w2 . swish(W1 x + b1) fitted to y = sin(3 x) on [-1, 1].
  gd::Rng rng(7);
  using Tensor = gd::Tensor<float>;
  const Tensor x = Tensor::random_uniform({256, 1}, rng, -1, 1);
  const Tensor y = gd::eval(gd::sin(3.0f * x));
  gd::Var<float> w1(Tensor::random_normal({1, 32}, rng)), b1(Tensor::zeros({32}));
  gd::Var<float> w2(Tensor::random_normal({32, 1}, rng, 0, 0.2)), b2(Tensor::zeros({1}));
  gd::optim::Adam<float> opt({w1, b1, w2, b2}, {.lr = 0.02});
  const auto act = make_swish(1.5f);
  float first = 0, last = 0;
  for (int step = 0; step < 500; ++step) {
    gd::Var<float> loss = gd::mean(gd::square(gd::matmul(act(gd::matmul(x, w1) + b1), w2) + b2 - y));
    opt.minimize(loss);
    (step == 0 ? first : last) = loss.item();
  }
  std::printf("mean squared error: %.4f at the first step, %.4f after 500 Adam steps\n", first, last);
  return last < 0.1f * first ? EXIT_SUCCESS : EXIT_FAILURE;
}

// A gd::error that escapes prints its message and exits with status 1.
int main() { return gd::guard_main(run); }
