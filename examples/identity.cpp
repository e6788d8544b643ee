// examples/identity.cpp — the classic first example: learn the 3×3 identity matrix.
// W starts random; each step feeds fresh random rows x and minimises mean((x·W - x)²) with Adam.
// The matmul is a user op with a user gradient (gd::custom_op), as one would add an op of one's own:
// forward A·B, backward dA = g·Bᵀ, dB = Aᵀ·g.
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <gradus/gradus.hpp>
#include <gradus/optim.hpp>

namespace gd = gradus;
using Tensor = gd::Tensor<float>;

void print(const char* title, const Tensor& w) {
  std::printf("%s\n", title);
  for (int64_t i = 0; i < 3; ++i) std::printf("  [% .6f % .6f % .6f]\n", double(w(i, 0)), double(w(i, 1)), double(w(i, 2)));
}

static int run() {
  const auto my_matmul = gd::custom_op(
      [](const Tensor& a, const Tensor& b) { return gd::matmul(a, b); },
      [](const std::array<Tensor, 2>& in, const Tensor& /*y*/, const Tensor& g) {
        const auto& [a, b] = in;
        return std::array<Tensor, 2>{gd::matmul(g, b, {.transpose_b = true}), gd::matmul(a, g, {.transpose_a = true})};
      },
      "my_matmul");

  gd::Rng rng(2024);
  gd::Var<float> W(Tensor::random_normal({3, 3}, rng));
  gd::optim::Adam opt(std::vector{W}, {.lr = 0.1});
  constexpr int kSteps = 1000, kBatch = 16;

  print("initial W", W.value());
  for (int step = 1; step <= kSteps; ++step) {
    const Tensor x = Tensor::random_normal({kBatch, 3}, rng);
    gd::Var<float> loss = gd::mean(gd::square(my_matmul(x, W) - x));
    opt.minimize(loss);
    if (step % 100 == 0) {
      char title[64];
      std::snprintf(title, sizeof title, "step %4d  loss %.3g  W =", step, double(loss.item()));
      print(title, W.value());
    }
  }

  double worst = 0;
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 3; ++j) worst = std::fmax(worst, std::fabs(double(W.value()(i, j)) - (i == j ? 1.0 : 0.0)));
  const bool pass = worst <= 1e-3;
  std::printf("largest distance from the identity: %.3g\n%s\n", worst, pass ? "PASS" : "FAIL");
  return pass ? EXIT_SUCCESS : EXIT_FAILURE;
}

// A gd::error that escapes prints its message and exits with status 1.
int main() { return gd::guard_main(run); }
