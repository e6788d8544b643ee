// examples/export_onnx.cpp — models leave gradus as ONNX files that any ONNX runtime serves:
//   1. trains the MLP (784-500-10) and the CNN (two 5x5 convolutions with max pooling, then
//      500 ReLU units) of examples/mlp.cpp and examples/cnn.cpp on Fashion-MNIST for a few
//      steps, and builds a character LSTM (embedding 16, 64 units, a dense head over 96
//      characters; its weights as initialized);
//   2. exports each with gd::onnx::export_model into DIR (mlp.onnx, cnn.onnx, char_lstm.onnx),
//      with a batch of inputs and gradus' outputs on it as TensorProto files beside each
//      (<name>_input.pb, <name>_output.pb) for other runtimes to compare against
//      (tests/onnx/check_exported.py does, with ONNX's checker, shape inference and ONNX Runtime);
//   3. loads each file back with gd::onnx::load and compares it with the module: the largest
//      difference of their outputs, and for the classifiers the test accuracy of both.
//
// Usage: export_onnx [--dir DIR] [--steps N]
//   --dir DIR    where the models go (default runs/export_onnx)
//   --steps N    training steps of batch 128 for the MLP and the CNN (default 300)
// Exits 1 when a model loaded back differs from its module by more than 1e-4 (relative to the
// output's scale) or classifies a test image differently.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <gradus/data/fashion_mnist.hpp>
#include <gradus/gradus.hpp>
#include <gradus/onnx.hpp>

#include "flags.hpp"

namespace gd = gradus;
namespace nn = gradus::nn;
using Tensor = gd::Tensor<float>;

namespace {

/// A character language model: ids [N, T] -> logits [N*T, vocab].
struct CharLstm : nn::Module<float, CharLstm> {
  static constexpr int64_t kVocab = 96, kEmbed = 16, kUnits = 64;
  nn::Embedding<float> embed;
  nn::LSTM<float> lstm;
  nn::Dense<float> head;
  explicit CharLstm(gd::Rng& rng)
      : embed({.vocab = kVocab, .dim = kEmbed}, rng),
        lstm({.in = kEmbed, .units = kUnits, .return_sequences = true}, rng),
        head({.in = kUnits, .out = kVocab}, rng) {
    register_module("embed", embed);
    register_module("lstm", lstm);
    register_module("head", head);
  }
  gd::Var<float> forward(const gd::Tensor<int64_t>& ids) { return head(gd::reshape(lstm(embed(ids)), {-1, kUnits})); }
};

template <class Net>
void train(Net& net, const Tensor& x_train, const gd::Tensor<int64_t>& y_train, int64_t steps, gd::Rng& rng) {
  gd::optim::Adam<float> opt(net.parameters(), {.lr = 1e-3});
  constexpr int64_t kBatch = 128;
  gd::Tensor<int64_t> batch({kBatch}), labels({kBatch});
  for (int64_t step = 0; step < steps; ++step) {
    for (int64_t j = 0; j < kBatch; ++j) {
      batch.data()[j] = int64_t(rng.below(uint64_t(x_train.dim(0))));
      labels.data()[j] = y_train.data()[batch.data()[j]];
    }
    opt.minimize(gd::losses::sparse_softmax_cross_entropy_with_logits(labels, net.forward(gd::gather(x_train, batch))));
  }
}

/// The largest difference between two outputs, relative to the larger of 1 and their scale.
double difference(const Tensor& a, const Tensor& b) {
  double worst = 0, scale = 1;
  for (int64_t k = 0; k < a.size(); ++k) {
    worst = std::max(worst, double(std::fabs(a.data()[k] - b.data()[k])));
    scale = std::max(scale, double(std::fabs(b.data()[k])));
  }
  return worst / scale;
}

double accuracy(const Tensor& logits, const gd::Tensor<int64_t>& labels) {
  const gd::Tensor<int64_t> predicted = gd::argmax(logits, 1);
  int64_t right = 0;
  for (int64_t k = 0; k < labels.size(); ++k) right += predicted.data()[k] == labels.data()[k];
  return double(right) / double(labels.size());
}

/// Exports `net`, loads it back, and compares the two on `x`; true when they agree.
template <class Net, class In>
bool round_trip(Net& net, const std::string& dir, const std::string& name, const In& example, const In& x,
                const gd::Tensor<int64_t>* labels) {
  const std::string path = dir + "/" + name + ".onnx";
  gd::onnx::export_model(net, example, path);
  gd::onnx::Model back = gd::onnx::load(path);
  Tensor mine, theirs;
  {
    gd::no_grad off;
    if constexpr (std::is_same_v<In, Tensor>)
      mine = net.forward(gd::Var<float>::constant(x)).value();
    else
      mine = net.forward(x).value();
    theirs = std::get<Tensor>(back.run({x})[0]);
  }
  gd::onnx::write_tensor(dir + "/" + name + "_input.pb", x, "input");
  gd::onnx::write_tensor(dir + "/" + name + "_output.pb", mine, "output");
  const double diff = difference(theirs, mine);
  std::printf("%-10s %7.1f KB  %zu operators  loaded back: largest difference %.2e", (name + ".onnx").c_str(),
              double(std::filesystem::file_size(path)) / 1024.0, back.operators().size(), diff);
  bool same_classes = true;
  if (labels) {
    const double a = accuracy(mine, *labels), b = accuracy(theirs, *labels);
    same_classes = gd::argmax(mine, 1).to(gd::cpu).size() == gd::argmax(theirs, 1).size();
    const auto pm = gd::argmax(mine, 1), pt = gd::argmax(theirs, 1);
    for (int64_t k = 0; k < pm.size(); ++k) same_classes = same_classes && pm.data()[k] == pt.data()[k];
    std::printf("  test accuracy %.4f (gradus) %.4f (ONNX)", a, b);
  }
  std::printf("\n");
  return diff <= 1e-4 && same_classes;
}

int run(int argc, char** argv) {
  const std::string dir = flag(argc, argv, "--dir", std::string("runs/export_onnx"));
  const int64_t steps = flag(argc, argv, "--steps", int64_t(300));
  std::filesystem::create_directories(dir);

  const auto data = gd::datasets::fashion_mnist();
  const float mean = gd::mean(data.train_images).item();
  const float sd = std::sqrt(gd::mean(gd::square(data.train_images - mean)).item());
  const Tensor images = gd::eval((data.train_images.reshape({-1, 28, 28, 1}) - mean) / sd);
  const int64_t n_test = 2000;  // the first 2000 test images
  const Tensor test = gd::eval((gd::slice(data.test_images, {0, 0, 0}, {n_test, -1, -1}).reshape({-1, 28, 28, 1}) - mean) / sd);
  const gd::Tensor<int64_t> test_labels = gd::slice(data.test_labels, {0}, {n_test});
  gd::Rng rng(42);
  bool ok = true;

  nn::Sequential mlp(nn::Dense<float>({.in = 784, .out = 500, .activation = nn::relu}, rng),
                     nn::Dense<float>({.in = 500, .out = 10}, rng));
  train(mlp, images.reshape({-1, 784}), data.train_labels, steps, rng);
  ok &= round_trip(mlp, dir, "mlp", Tensor::zeros({1, 784}), test.reshape({-1, 784}), &test_labels);

  nn::Sequential cnn(
      nn::Conv2d<float>({.in = 1, .filters = 32, .kernel_size = {5, 5}, .padding = gd::Padding::same, .activation = nn::relu}, rng),
      nn::MaxPool2d{},
      nn::Conv2d<float>({.in = 32, .filters = 64, .kernel_size = {5, 5}, .padding = gd::Padding::same, .activation = nn::relu}, rng),
      nn::MaxPool2d{}, nn::Flatten{},
      nn::Dense<float>({.in = 7 * 7 * 64, .out = 500, .activation = nn::relu}, rng),
      nn::Dense<float>({.in = 500, .out = 10}, rng));
  train(cnn, images, data.train_labels, steps / 3, rng);
  ok &= round_trip(cnn, dir, "cnn", Tensor::zeros({1, 28, 28, 1}), gd::eval(gd::slice(test, {0, 0, 0, 0}, {500, -1, -1, -1})),
                   nullptr);

  CharLstm lm(rng);
  auto ids = gd::Tensor<int64_t>::empty({4, 35});
  for (int64_t k = 0; k < ids.size(); ++k) ids.data()[k] = int64_t(rng.below(CharLstm::kVocab));
  ok &= round_trip(lm, dir, "char_lstm", gd::Tensor<int64_t>::zeros({1, 35}), ids, nullptr);
  return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}

}  // namespace

int main(int argc, char** argv) {
  return gd::guard_main([&] { return run(argc, argv); });
}
