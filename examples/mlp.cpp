// examples/mlp.cpp — a multilayer perceptron 784-500(ReLU)-10 on Fashion-MNIST with gd::nn:
// inputs standardised with the training set's mean and standard deviation, plain SGD (learning
// rate 0.1), batches of 128 drawn from a shuffled order (explicit Rng), two epochs, softmax
// cross-entropy. Prints the loss and test accuracy per epoch and the speed.
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

static int run() {
  const auto data = gd::datasets::fashion_mnist();  // images in [0, 1], labels 0..9
  const float mean = gd::mean(data.train_images).item();
  const float sd = std::sqrt(gd::mean(gd::square(data.train_images - mean)).item());
  const Tensor x_train = gd::eval((data.train_images.reshape({-1, 784}) - mean) / sd);
  const Tensor x_test = gd::eval((data.test_images.reshape({-1, 784}) - mean) / sd);
  const int64_t n_train = x_train.dim(0);

  gd::Rng rng(42);
  nn::Sequential net(nn::Dense<float>({.in = 784, .out = 500, .activation = nn::relu}, rng),
                     nn::Dense<float>({.in = 500, .out = 10}, rng));
  gd::optim::SGD opt(net.parameters(), {.lr = 0.1});
  std::printf("MLP 784-500-10: %lld parameters\n", static_cast<long long>(net.parameter_count()));

  constexpr int kEpochs = 2;
  constexpr int64_t kBatch = 128;
  std::vector<int64_t> order(static_cast<size_t>(n_train));
  std::iota(order.begin(), order.end(), 0);
  gd::Tensor<int64_t> batch({kBatch}), labels({kBatch});

  auto test_accuracy = [&] {
    gd::no_grad guard;  // evaluation records nothing
    net.eval();
    const gd::Tensor<int64_t> predicted = gd::argmax(net.forward(x_test).value(), 1);
    net.train();
    int64_t correct = 0;
    for (int64_t i = 0; i < predicted.size(); ++i) correct += predicted.data()[i] == data.test_labels.data()[i];
    return double(correct) / double(predicted.size());
  };

  double train_seconds = 0, accuracy = 0;
  int64_t steps = 0;
  for (int epoch = 1; epoch <= kEpochs; ++epoch) {
    for (size_t i = order.size() - 1; i > 0; --i) std::swap(order[i], order[rng.below(i + 1)]);  // Fisher–Yates
    const auto start = std::chrono::steady_clock::now();
    double loss_sum = 0;
    int64_t batches = 0;
    for (int64_t first = 0; first + kBatch <= n_train; first += kBatch) {  // the last partial batch is dropped
      std::copy_n(order.begin() + first, kBatch, batch.data());
      for (int64_t j = 0; j < kBatch; ++j) labels.data()[j] = data.train_labels.data()[batch.data()[j]];
      const Tensor x = gd::gather(x_train, batch);

      gd::Var<float> loss = gd::losses::sparse_softmax_cross_entropy_with_logits(labels, net.forward(x));
      opt.minimize(loss);  // zero_grad, backward, step
      loss_sum += double(loss.item());
      ++batches;
    }
    train_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    steps += batches;
    accuracy = test_accuracy();
    std::printf("epoch %d  loss %.4f  test accuracy %.4f\n", epoch, loss_sum / double(batches), accuracy);
  }
  std::printf("training: %lld steps in %.2f s (%.0f steps/s)\n", static_cast<long long>(steps), train_seconds,
              double(steps) / train_seconds);
  return accuracy >= 0.85 ? EXIT_SUCCESS : EXIT_FAILURE;
}

// A gd::error that escapes prints its message and exits with status 1.
int main() { return gd::guard_main(run); }
