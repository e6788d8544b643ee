// examples/seed_softmax.cpp — softmax regression on Fashion-MNIST, written as the classic
// TensorFlow tutorial writes it: p = softmax(x·W + b), cross-entropy, plain gradient descent.
// `matmul` and `log` are user ops with user gradients (gd::custom_op), to show how one adds an
// op; the built-in gd::matmul / gd::log_softmax do the same job (benchmarks/seed_softmax.cpp).
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <utility>
#include <vector>

#include <gradus/data/fashion_mnist.hpp>
#include <gradus/gradus.hpp>
#include <gradus/ops/shape.hpp>

namespace gd = gradus;
using Tensor = gd::Tensor<float>;

static int run() {
  const auto data = gd::datasets::fashion_mnist();  // images in [0, 1], labels 0..9
  const Tensor x_train = data.train_images.reshape({-1, 784}), x_test = data.test_images.reshape({-1, 784});
  const Tensor y_train = gd::one_hot<float>(data.train_labels, 10);

  // matmul: forward on Eigen's GEMM; backward dA = g·Bᵀ, dB = Aᵀ·g, each only when asked for
  // (the images need no gradient, so dA is skipped).
  const auto my_matmul = gd::custom_op(
      [](const Tensor& a, const Tensor& b) { return gd::matmul(a, b); },
      [](const std::array<Tensor, 2>& in, const Tensor& /*y*/, const Tensor& g, const std::array<bool, 2>& needs) {
        const auto& [a, b] = in;
        return std::array<Tensor, 2>{needs[0] ? gd::matmul(g, b, {.transpose_b = true}) : Tensor(),
                                     needs[1] ? gd::matmul(a, g, {.transpose_a = true}) : Tensor()};
      },
      "my_matmul");
  // log: forward log(x), backward g / x. Softmax probabilities can underflow to 0, and log(0) = -inf
  // would make the loss inf and the gradients NaN (the TF tutorial has the same flaw), so x is
  // clamped to [1e-10, 1] in both directions.
  const auto my_log = gd::custom_op(
      [](const Tensor& x) { return gd::eval(gd::log(gd::clamp(x, 1e-10, 1.0))); },
      [](const Tensor& x, const Tensor& /*y*/, const Tensor& g) { return gd::eval(g / gd::clamp(x, 1e-10, 1.0)); },
      "my_log");

  gd::Var<float> W(Tensor::zeros({784, 10})), b(Tensor::zeros({10}));
  constexpr int kSteps = 2000, kBatch = 100;
  constexpr float kLearningRate = 0.3f;

  // Batches are consecutive slices of a shuffled order of the examples, reshuffled every epoch.
  gd::Rng rng(42);
  std::vector<int64_t> order(size_t(x_train.dim(0)));
  std::iota(order.begin(), order.end(), 0);
  size_t next = order.size();
  gd::Tensor<int64_t> batch({kBatch});

  const auto start = std::chrono::steady_clock::now();
  for (int step = 1; step <= kSteps; ++step) {
    if (next + kBatch > order.size()) {  // a new epoch: Fisher–Yates shuffle
      for (size_t i = order.size() - 1; i > 0; --i) std::swap(order[i], order[rng.below(i + 1)]);
      next = 0;
    }
    std::copy_n(order.begin() + ptrdiff_t(next), kBatch, batch.data());
    next += kBatch;
    const Tensor x = gd::gather(x_train, batch), y = gd::gather(y_train, batch);

    gd::Var<float> p = gd::softmax(my_matmul(x, W) + b);
    gd::Var<float> loss = gd::mean(-gd::sum(y * my_log(p), 1));
    gd::backward(loss);
    for (gd::Var<float>* v : {&W, &b}) {
      v->value().assign(v->value() - kLearningRate * v->grad());
      v->zero_grad();
    }
    if (step % 500 == 0) std::printf("step %4d  loss %.4f\n", step, double(loss.item()));
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  gd::no_grad guard;  // evaluation: nothing is recorded
  const gd::Tensor<int64_t> predicted = gd::argmax(gd::softmax(my_matmul(x_test, W) + b), 1);
  int64_t correct = 0;
  for (int64_t i = 0; i < predicted.size(); ++i) correct += predicted.data()[i] == data.test_labels.data()[i];
  const double accuracy = double(correct) / double(predicted.size());
  std::printf("test accuracy %.4f\ntraining: %d steps in %.3f s (%.0f steps/s)\n", accuracy, kSteps, seconds,
              kSteps / seconds);
  return accuracy >= 0.80 ? EXIT_SUCCESS : EXIT_FAILURE;
}

// A gd::error that escapes prints its message and exits with status 1.
int main() { return gd::guard_main(run); }
