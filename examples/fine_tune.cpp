// examples/fine_tune.cpp — transfer learning on Fashion-MNIST, as a workflow:
//   1. train a small CNN on the first five classes (T-shirt, Trouser, Pullover, Dress, Coat) and
//      save it (gd::io::save);
//   2. build a new model with the same convolutional feature extractor and a new dense head
//      (128 ReLU units, then five logits) for the other five
//      classes (Sandal, Shirt, Sneaker, Bag, Boot), load the saved extractor into it
//      (gd::io::restore_module with the extractor's prefix), freeze it (Module::freeze), and
//      train the head alone on a few examples of the new classes;
//   3. train the same model from scratch on the same examples for the same steps, and compare
//      the test accuracy of the two on the new classes.
// The convolutional features learnt on clothes transfer to shoes and bags: with 1000 training
// examples of the new classes and 100 steps, the new head on the frozen extractor reaches 0.950
// test accuracy and the whole model trained from scratch 0.940 (docs/layers.md, "Freeze layers").
//
// Usage: fine_tune [--epochs-a N] [--examples-b N] [--steps-b N] [--dir DIR] [--data DIR]
//   --epochs-a N    epochs on the first five classes (default 1)
//   --examples-b N  training examples of the other five classes (default 1000)
//   --steps-b N     steps of batch 64 on them, for both models (default 100)
//   --dir DIR       where the first model is saved (default runs/fine_tune)
// Exits 1 when the frozen extractor changed, the transferred model's test accuracy is below 0.93,
// or more than 0.005 below the one trained from scratch.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <gradus/data/fashion_mnist.hpp>
#include <gradus/gradus.hpp>
#include <gradus/io.hpp>
#include <gradus/train.hpp>

#include "flags.hpp"

namespace gd = gradus;
namespace nn = gradus::nn;
using Tensor = gd::Tensor<float>;

namespace {

using Features = nn::Sequential<nn::Conv2d<float>, nn::MaxPool2d, nn::Conv2d<float>, nn::MaxPool2d, nn::Flatten>;
using Head = nn::Sequential<nn::Dense<float>, nn::Dense<float>>;

/// A convolutional feature extractor under a dense head of five classes.
struct Classifier : nn::Module<float> {
  Features features;
  Head head;
  explicit Classifier(gd::Rng& rng)
      : features(nn::Conv2d<float>({.in = 1, .filters = 16, .kernel_size = {5, 5}, .padding = gd::Padding::same,
                                    .activation = nn::relu}, rng),
                 nn::MaxPool2d{},
                 nn::Conv2d<float>({.in = 16, .filters = 32, .kernel_size = {5, 5}, .padding = gd::Padding::same,
                                    .activation = nn::relu}, rng),
                 nn::MaxPool2d{}, nn::Flatten{}),
        head(nn::Dense<float>({.in = 7 * 7 * 32, .out = 128, .activation = nn::relu}, rng),
             nn::Dense<float>({.in = 128, .out = 5}, rng)) {
    register_module("features", features);
    register_module("head", head);
  }
  gd::Var<float> forward(const Tensor& x) { return head.forward(features.forward(x)); }
};

/// The examples of `images` [N, 28, 28, 1] whose label is in [first, first + 5), at most `limit`,
/// with labels shifted to 0..4.
gd::train::Data<float, int64_t> classes(const Tensor& images, const gd::Tensor<int64_t>& labels, int64_t first,
                                        int64_t limit) {
  std::vector<int64_t> rows;
  for (int64_t i = 0; i < labels.size() && int64_t(rows.size()) < limit; ++i)
    if (labels.data()[i] >= first && labels.data()[i] < first + 5) rows.push_back(i);
  const gd::Tensor<int64_t> picked = gd::Tensor<int64_t>::from(rows, {int64_t(rows.size())});
  return {gd::gather(images, picked), gd::eval(gd::gather(labels, picked) - first)};
}

auto xent = [](const auto& labels, const auto& logits) {
  return gd::losses::sparse_softmax_cross_entropy_with_logits(labels, logits);
};

double accuracy(Classifier& net, const gd::train::Data<float, int64_t>& test) {
  gd::metrics::SparseCategoricalAccuracy acc;
  acc.set_name("accuracy");
  return gd::train::evaluate(net, xent, test, {.batch_size = 500, .metrics = {&acc}}).get("accuracy");
}

/// Trains `net` for `steps` steps of 64 examples of `data` (epochs as needed).
void train_steps(Classifier& net, const gd::train::Data<float, int64_t>& data, int64_t steps, uint64_t seed) {
  gd::optim::Adam opt(net.parameters(), {.lr = 1e-3});  // every parameter: frozen ones are skipped
  gd::train::StopAtStep stop({.last_step = steps});
  const int64_t per_epoch = gd::train::batches_per_epoch(data.size(), 64, false);
  gd::train::fit(net, opt, xent, data, {.epochs = (steps + per_epoch - 1) / per_epoch, .batch_size = 64, .seed = seed,
                                        .hooks = {&stop}});
}

}  // namespace

static int run(int argc, char** argv) {
  const int64_t epochs_a = flag(argc, argv, "--epochs-a", int64_t{1});
  const int64_t examples_b = flag(argc, argv, "--examples-b", int64_t{1000});
  const int64_t steps_b = flag(argc, argv, "--steps-b", int64_t{100});
  const std::filesystem::path dir = flag(argc, argv, "--dir", std::string("runs/fine_tune"));
  const auto data = gd::datasets::fashion_mnist(flag(argc, argv, "--data", std::string("/usr/share/datasets/fashion-mnist")));
  const float mean = gd::mean(data.train_images).item();
  const float sd = std::sqrt(gd::mean(gd::square(data.train_images - mean)).item());
  const Tensor x_train = gd::eval((data.train_images.reshape({-1, 28, 28, 1}) - mean) / sd);
  const Tensor x_test = gd::eval((data.test_images.reshape({-1, 28, 28, 1}) - mean) / sd);
  const int64_t all = x_train.dim(0);

  // 1. The first five classes, all their examples; the model is saved.
  const auto train_a = classes(x_train, data.train_labels, 0, all), test_a = classes(x_test, data.test_labels, 0, all);
  gd::Rng rng_a(1);
  Classifier first(rng_a);
  gd::optim::Adam opt_a(first.parameters(), {.lr = 1e-3});
  gd::train::fit(first, opt_a, xent, train_a, {.epochs = epochs_a, .batch_size = 64, .seed = 1});
  std::filesystem::create_directories(dir);
  gd::io::save(dir / "classes_0-4.safetensors", first);
  std::printf("classes 0-4: %lld training examples, test accuracy %.4f; saved %s\n",
              static_cast<long long>(train_a.size()), accuracy(first, test_a),
              (dir / "classes_0-4.safetensors").string().c_str());

  // 2. The other five classes, few examples: the saved extractor, frozen, under a new head.
  const auto train_b = classes(x_train, data.train_labels, 5, examples_b), test_b = classes(x_test, data.test_labels, 5, all);
  gd::Rng rng_b(2);
  Classifier transfer(rng_b);
  gd::io::restore_module(gd::io::load_safetensors(dir / "classes_0-4.safetensors"), transfer.features,
                         "model/features.");
  transfer.features.freeze();
  gd::io::TensorList before;
  gd::io::add_module(before, transfer.features);
  const std::string before_bytes = gd::io::encode_safetensors(before);
  train_steps(transfer, train_b, steps_b, 2);
  gd::io::TensorList after;
  gd::io::add_module(after, transfer.features);
  const bool kept = gd::io::encode_safetensors(after) == before_bytes;
  const double transfer_acc = accuracy(transfer, test_b);

  // 3. The same model from scratch, the same examples and steps.
  gd::Rng rng_c(2);
  Classifier scratch(rng_c);
  train_steps(scratch, train_b, steps_b, 2);
  const double scratch_acc = accuracy(scratch, test_b);

  std::printf("classes 5-9: %lld training examples, %lld steps of 64\n", static_cast<long long>(train_b.size()),
              static_cast<long long>(steps_b));
  std::printf("  frozen extractor from classes 0-4, new head: test accuracy %.4f (%lld of %lld parameters trained)\n",
              transfer_acc, static_cast<long long>(transfer.head.parameter_count()),
              static_cast<long long>(transfer.parameter_count()));
  std::printf("  the same model from scratch:                 test accuracy %.4f\n", scratch_acc);
  std::printf("  the frozen extractor %s\n", kept ? "kept every bit" : "CHANGED");
  return kept && transfer_acc >= 0.93 && transfer_acc + 0.005 >= scratch_acc ? EXIT_SUCCESS : EXIT_FAILURE;
}

int main(int argc, char** argv) {
  return gd::guard_main([&] { return run(argc, argv); });
}
