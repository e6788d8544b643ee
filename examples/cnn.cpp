// examples/cnn.cpp — the classic LeNet-style CNN on Fashion-MNIST with gd::nn, NHWC:
//   [N,28,28,1] -> Conv 5x5x32 SAME ReLU -> MaxPool 2x2 -> Conv 5x5x64 SAME ReLU -> MaxPool 2x2
//   -> Flatten (3136) -> Dense 500 ReLU -> Dense 10.
// Inputs standardised with the training set's mean and standard deviation, Adam (lr 1e-3),
// batches of 128 from a shuffled order (explicit Rng), softmax cross-entropy. Prints the loss,
// train time and speed per epoch and the test accuracy; exits 1 below 0.89 test accuracy.
// Usage: cnn [epochs]   (default 3)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <utility>
#include <vector>

#include <gradus/data/fashion_mnist.hpp>
#include <gradus/gradus.hpp>
#include <gradus/losses.hpp>
#include <gradus/nn.hpp>
#include <gradus/optim.hpp>

namespace gd = gradus;
namespace nn = gradus::nn;
using Tensor = gd::Tensor<float>;

static int run(int argc, char** argv) {
  const int epochs = argc > 1 ? std::atoi(argv[1]) : 3;
  const auto data = gd::datasets::fashion_mnist();  // images in [0, 1], labels 0..9
  const float mean = gd::mean(data.train_images).item();
  const float sd = std::sqrt(gd::mean(gd::square(data.train_images - mean)).item());
  const Tensor x_train = gd::eval((data.train_images.reshape({-1, 28, 28, 1}) - mean) / sd);
  const Tensor x_test = gd::eval((data.test_images.reshape({-1, 28, 28, 1}) - mean) / sd);
  const int64_t n_train = x_train.dim(0), n_test = x_test.dim(0);

  gd::Rng rng(42);
  nn::Sequential net(
      nn::Conv2d<float>({.in = 1, .filters = 32, .kernel_size = {5, 5}, .padding = gd::Padding::same,
                         .activation = nn::relu}, rng),
      nn::MaxPool2d{},
      nn::Conv2d<float>({.in = 32, .filters = 64, .kernel_size = {5, 5}, .padding = gd::Padding::same,
                         .activation = nn::relu}, rng),
      nn::MaxPool2d{},
      nn::Flatten{},
      nn::Dense<float>({.in = 7 * 7 * 64, .out = 500, .activation = nn::relu}, rng),
      nn::Dense<float>({.in = 500, .out = 10}, rng));
  gd::optim::Adam opt(net.parameters(), {.lr = 1e-3});
  std::printf("CNN: %lld parameters\n", static_cast<long long>(net.parameter_count()));

  constexpr int64_t kBatch = 128;
  std::vector<int64_t> order(static_cast<size_t>(n_train));
  std::iota(order.begin(), order.end(), 0);
  gd::Tensor<int64_t> batch({kBatch}), labels({kBatch});

  auto test_accuracy = [&] {
    gd::no_grad guard;  // evaluation records nothing
    net.eval();
    int64_t correct = 0;
    for (int64_t first = 0; first < n_test; first += kBatch) {
      const int64_t n = std::min(kBatch, n_test - first);
      const Tensor x = gd::slice(x_test, {first, 0, 0, 0}, {n, 28, 28, 1});
      const gd::Tensor<int64_t> predicted = gd::argmax(net.forward(x).value(), 1);
      for (int64_t i = 0; i < n; ++i) correct += predicted.data()[i] == data.test_labels.data()[first + i];
    }
    net.train();
    return double(correct) / double(n_test);
  };

  double accuracy = 0;
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    for (size_t i = order.size() - 1; i > 0; --i) std::swap(order[i], order[rng.below(i + 1)]);  // Fisher–Yates
    const auto start = std::chrono::steady_clock::now();
    double loss_sum = 0;
    int64_t steps = 0;
    for (int64_t first = 0; first + kBatch <= n_train; first += kBatch) {  // the last partial batch is dropped
      std::copy_n(order.begin() + first, kBatch, batch.data());
      for (int64_t j = 0; j < kBatch; ++j) labels.data()[j] = data.train_labels.data()[batch.data()[j]];
      const Tensor x = gd::gather(x_train, batch);

      gd::Var<float> loss = gd::losses::sparse_softmax_cross_entropy_with_logits(labels, net.forward(x));
      opt.minimize(loss);  // zero_grad, backward, step
      loss_sum += double(loss.item());
      ++steps;
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    accuracy = test_accuracy();
    std::printf("epoch %d  loss %.4f  train %.1f s (%.1f steps/s)  test accuracy %.4f\n", epoch,
                loss_sum / double(steps), seconds, double(steps) / seconds, accuracy);
  }
  return accuracy >= 0.89 ? EXIT_SUCCESS : EXIT_FAILURE;
}

// A gd::error that escapes prints its message and exits with status 1.
int main(int argc, char** argv) { return gd::guard_main([&] { return run(argc, argv); }); }
