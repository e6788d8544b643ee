// examples/cnn_dataset.cpp — a typical first training program: the LeNet-style CNN of
// examples/cnn.cpp fed by a gd::data pipeline and trained with gd::train::fit, with TensorBoard
// summaries:
//   - the training images standardised once, then from_tensor_slices → shuffle (a new order every
//     epoch, the same in every run) → batch(128) → prefetch(2) (batches made on a background thread
//     while the model trains on the one before);
//   - validation on the test set after every epoch ("val_loss", "val_accuracy");
//   - summaries in <log-dir>: loss, learning rate and steps per second every 50 steps, weight and
//     gradient histograms every 200, the validation numbers per epoch (`tensorboard --logdir runs`);
//   - a progress bar.
// It is also the "CNN on a Dataset with summaries" of scripts/compile-time (docs/performance.md,
// compile time). examples/train_fashion_mnist.cpp adds checkpoints and resuming, images and
// several ranks; examples/input_pipeline.cpp reads TFRecord shards and augments.
//
// Usage: cnn_dataset [--epochs N] [--max-steps N] [--train-examples N] [--test-examples N]
//                    [--log-dir DIR] [--data DIR]
//   --epochs N          epochs to train (default 3)
//   --max-steps N       stop at global step N (gd::train::StopAtStep), for a quick try
//   --train-examples N  train on the first N training images only (default all 60000)
//   --test-examples N   validate on the first N test images only (default all 10000)
//   --log-dir DIR       where the summaries go (default runs/cnn_dataset)
//   --data DIR          the Fashion-MNIST files (default /usr/share/datasets/fashion-mnist)
// Exits 1 when it trained 3 or more whole epochs on all the data and the test accuracy is below 0.89.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <gradus/data.hpp>
#include <gradus/gradus.hpp>
#include <gradus/train/fit_dataset.hpp>    // fit and evaluate on a Dataset
#include <gradus/train/summary_saver.hpp>  // SummarySaver, with gd::summary::FileWriter

#include "flags.hpp"

namespace gd = gradus;
namespace nn = gradus::nn;

static int run(int argc, char** argv) {
  const int64_t epochs = flag(argc, argv, "--epochs", int64_t{3});
  const int64_t max_steps = flag(argc, argv, "--max-steps", int64_t{-1});
  const std::string log_dir = flag(argc, argv, "--log-dir", std::string("runs/cnn_dataset"));
  const auto data = gd::datasets::fashion_mnist(flag(argc, argv, "--data", std::string("/usr/share/datasets/fashion-mnist")));
  const int64_t n_train = std::clamp<int64_t>(flag(argc, argv, "--train-examples", int64_t{60000}), 1, data.train_images.dim(0));
  const int64_t n_test = std::clamp<int64_t>(flag(argc, argv, "--test-examples", int64_t{10000}), 1, data.test_images.dim(0));

  // images in [0, 1] -> [N, 28, 28, 1], standardised with the training set's mean and deviation
  const float mean = gd::mean(data.train_images).item();
  const float sd = std::sqrt(gd::mean(gd::square(data.train_images - mean)).item());
  const auto first = [&](const gd::Tensor<float>& images, int64_t n) {
    return gd::eval((gd::slice(images.reshape({-1, 28, 28, 1}), {0, 0, 0, 0}, {n, 28, 28, 1}) - mean) / sd);
  };
  constexpr int64_t kBatch = 128;
  const gd::data::Dataset train =
      gd::data::Dataset::from_tensor_slices(first(data.train_images, n_train), gd::slice(data.train_labels, {0}, {n_train}))
          .shuffle(n_train, /*seed=*/7)
          .batch(kBatch)
          .prefetch(2);
  const gd::data::Dataset test =
      gd::data::Dataset::from_tensor_slices(first(data.test_images, n_test), gd::slice(data.test_labels, {0}, {n_test}))
          .batch(500);

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
  auto loss = [](const auto& labels, const auto& logits) {  // labels first, as gd::losses
    return gd::losses::sparse_softmax_cross_entropy_with_logits(labels, logits);
  };
  gd::metrics::SparseCategoricalAccuracy accuracy;
  accuracy.set_name("accuracy");  // the History's "val_accuracy"

  gd::summary::FileWriter writer(log_dir);
  gd::train::SummarySaver scalars(writer, {.every_steps = 50});
  gd::train::SummarySaver histograms(writer, {.every_steps = 200, .scalars = false, .histograms = true, .epochs = false});
  gd::train::ProgressBar progress({.every_steps = 100});
  std::vector<gd::train::Hook*> hooks = {&scalars, &histograms, &progress};
  std::unique_ptr<gd::train::StopAtStep> stop;
  if (max_steps >= 0) {
    stop = std::make_unique<gd::train::StopAtStep>(gd::train::StopAtStepOptions{.last_step = max_steps});
    hooks.push_back(stop.get());
  }

  std::printf("CNN: %lld parameters, %lld training examples in batches of %lld\n",
              static_cast<long long>(net.parameter_count()), static_cast<long long>(n_train),
              static_cast<long long>(kBatch));
  const gd::train::History history =
      gd::train::fit(net, opt, loss, train, {.epochs = epochs, .validation = &test, .metrics = {&accuracy}, .hooks = hooks});

  // after a whole last epoch its validation is in the History; a run stopped mid-epoch evaluates
  // the weights it stopped with
  double test_accuracy = 0;
  if (!history.epochs.empty() && history.epochs.back().global_step == history.global_step)
    test_accuracy = history.epochs.back().get("val_accuracy");
  else
    test_accuracy = gd::train::evaluate(net, loss, test, {.metrics = {&accuracy}}).get("accuracy");
  std::printf("step %lld: test accuracy %.4f%s%s; summaries in %s\n", static_cast<long long>(history.global_step),
              test_accuracy, history.stop_reason.empty() ? "" : " — ", history.stop_reason.c_str(),
              writer.path().string().c_str());
  const bool trained_all = history.stop_reason.empty() && epochs >= 3 && n_train == data.train_images.dim(0) &&
                           n_test == data.test_images.dim(0);
  return !trained_all || test_accuracy >= 0.89 ? EXIT_SUCCESS : EXIT_FAILURE;
}

// A gd::error that escapes prints its message and exits with status 1.
int main(int argc, char** argv) { return gd::guard_main([&] { return run(argc, argv); }); }
