// examples/train_fashion_mnist.cpp — the example a training program starts from: the LeNet-style
// CNN of examples/cnn.cpp trained on Fashion-MNIST with gd::train::fit, with
//   - a progress bar (a live line on a terminal, plain lines in a log file),
//   - a checkpoint at the end of every epoch in <run-dir> (model, Adam state, global step, the
//     Dropout generator and the loop's own state): run the program again and it resumes where
//     the last run stopped — after the last epoch it has nothing left to do;
//   - TensorBoard summaries in <run-dir>/train: loss and learning rate every 50 steps, weight and
//     gradient histograms every 200, validation loss and accuracy per epoch, and after each epoch
//     the first test images with the predicted and true class drawn on them.
// Look at the run with `tensorboard --logdir runs`; load a checkpoint in Python as docs/training.md shows.
//
// Data-parallel on several processes (built with gradus::dist, i.e. where CMake found MPI):
//   mpirun --allow-run-as-root --oversubscribe -np 2 build/examples/train_fashion_mnist --distributed
// Each rank trains on its own half of every epoch's order, 128 examples a step (a global batch
// of 2 x 128), and the gradients are averaged over the ranks before each Adam step
// (gd::dist::collective()); rank 0 alone prints, restores and writes checkpoints and summaries.
//
// Usage: train_fashion_mnist [--epochs N] [--run-dir DIR] [--max-steps N] [--test-examples N] [--data DIR]
//                           [--device D] [--distributed]
//   --epochs N         epochs to train to, counting those already in the run directory (default 3)
//   --run-dir DIR      where checkpoints and summaries go (default runs/fashion_mnist)
//   --max-steps N      stop at global step N (gd::train::StopAtStep), for a quick try
//   --test-examples N  validate on the first N test images only (default: all 10000)
//   --data DIR         the Fashion-MNIST files (default /usr/share/datasets/fashion-mnist)
//   --device D         cpu (default) or cuda: train on the first CUDA GPU (an error naming what is
//                      missing where there is none)
//   --distributed      train on the ranks of an MPI job (launch with mpirun); an error in a build
//                      without gradus::dist
// Exits 1 when it trained all of 3 or more epochs and the test accuracy is below 0.89.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gradus/data/fashion_mnist.hpp>
#include <gradus/gradus.hpp>
#include <gradus/train/fit.hpp>            // fit, evaluate, predict, checkpoints
#include <gradus/train/summary_saver.hpp>  // SummarySaver, with gd::summary::FileWriter

#ifdef GRADUS_HAVE_DIST
#include <gradus/dist.hpp>
#include <gradus/dist/collective.hpp>
#endif

#include "flags.hpp"

namespace gd = gradus;
namespace nn = gradus::nn;
using Tensor = gd::Tensor<float>;

namespace {

constexpr const char* kClassNames[10] = {"T-shirt", "Trouser", "Pullover", "Dress", "Coat",
                                         "Sandal",  "Shirt",   "Sneaker",  "Bag",   "Boot"};

/// Says whether the run starts fresh or resumes a checkpoint.
class Announce : public gd::train::Hook {
 public:
  void after_create_session(gd::train::Session& s) override {
    if (s.restored_from())
      std::printf("resumed from %s at step %lld (epoch %lld)\n", s.restored_from()->string().c_str(),
                  static_cast<long long>(s.global_step()), static_cast<long long>(s.epoch() + 1));
    else
      std::printf("starting a fresh run in %s\n", s.run_dir().string().c_str());
  }
};

/// After each epoch, writes the first test images with "predicted / true" class names drawn on
/// them (a wrong prediction is marked with '!') as the image summary "predictions".
template <class Model>
class PredictionImages : public gd::train::Hook {
 public:
  PredictionImages(Model& net, gd::summary::FileWriter& writer, Tensor inputs, Tensor pictures,
                   gd::Tensor<int64_t> labels)
      : net_(&net), writer_(&writer), inputs_(inputs), pictures_(pictures), labels_(labels) {}

  void after_epoch(gd::train::Session&, const gd::train::EpochLogs& logs) override {
    const gd::Tensor<int64_t> predicted = gd::argmax(gd::train::predict(*net_, inputs_), 1);
    std::vector<std::string> text;
    for (int64_t i = 0; i < labels_.size(); ++i) {
      const int64_t p = predicted.data()[i], t = labels_.data()[i];
      text.push_back(std::string(kClassNames[p]) + (p == t ? "" : "!") + "\n" + kClassNames[t]);
    }
    writer_->labelled_images("predictions", pictures_, text, logs.global_step, int(labels_.size()));
  }

 private:
  Model* net_;
  gd::summary::FileWriter* writer_;
  Tensor inputs_, pictures_;
  gd::Tensor<int64_t> labels_;
};

}  // namespace

// `collective`: empty for one process; with --distributed, the MPI job's.
static int run(int argc, char** argv, const gd::train::Collective& collective) {
  const bool chief = collective.is_chief();  // prints, and writes the summaries (rank 0)
  const int64_t epochs = flag(argc, argv, "--epochs", int64_t{3});
  const std::string run_dir = flag(argc, argv, "--run-dir", std::string("runs/fashion_mnist"));
  const int64_t max_steps = flag(argc, argv, "--max-steps", int64_t{-1});
  const std::string data_dir = flag(argc, argv, "--data", std::string("/usr/share/datasets/fashion-mnist"));
  const std::string device_name = flag(argc, argv, "--device", std::string("cpu"));
  std::optional<gd::Device> device;  // unset: where the model is made, the CPU
  if (device_name == "cuda")
    device = gd::cuda(0);
  else if (device_name != "cpu")
    throw gd::value_error("--device: expected cpu or cuda, got '" + device_name + "'");

  const auto data = gd::datasets::fashion_mnist(data_dir);  // images in [0, 1], labels 0..9
  const int64_t n_test = std::min<int64_t>(flag(argc, argv, "--test-examples", int64_t{10000}),
                                           data.test_images.dim(0));
  const float mean = gd::mean(data.train_images).item();
  const float sd = std::sqrt(gd::mean(gd::square(data.train_images - mean)).item());
  const Tensor test_pictures = gd::slice(data.test_images.reshape({-1, 28, 28, 1}), {0, 0, 0, 0}, {n_test, 28, 28, 1});
  const gd::train::Data<float, int64_t> train{gd::eval((data.train_images.reshape({-1, 28, 28, 1}) - mean) / sd),
                                              data.train_labels};
  const gd::train::Data<float, int64_t> test{gd::eval((test_pictures - mean) / sd),
                                             gd::slice(data.test_labels, {0}, {n_test})};

  gd::Rng rng(42);  // initial weights, then Dropout's masks (saved with every checkpoint)
  nn::Sequential net(
      nn::Conv2d<float>({.in = 1, .filters = 32, .kernel_size = {5, 5}, .padding = gd::Padding::same,
                         .activation = nn::relu}, rng),
      nn::MaxPool2d{},
      nn::Conv2d<float>({.in = 32, .filters = 64, .kernel_size = {5, 5}, .padding = gd::Padding::same,
                         .activation = nn::relu}, rng),
      nn::MaxPool2d{},
      nn::Flatten{},
      nn::Dense<float>({.in = 7 * 7 * 64, .out = 500, .activation = nn::relu}, rng),
      nn::Dropout<float>({.rate = 0.3}, rng),
      nn::Dense<float>({.in = 500, .out = 10}, rng));
  gd::optim::Adam opt(net.parameters(), {.lr = 1e-3});
  auto loss = [](const auto& labels, const auto& logits) {  // labels first, as gd::losses
    return gd::losses::sparse_softmax_cross_entropy_with_logits(labels, logits);
  };
  gd::metrics::SparseCategoricalAccuracy accuracy;
  accuracy.set_name("accuracy");  // the History's "val_accuracy"

  constexpr int64_t kBatch = 128;
  const int64_t ranks = collective ? collective.size : 1;  // each rank takes 1/ranks of an epoch
  const int64_t steps_per_epoch =
      gd::train::batches_per_epoch(train.x.dim(0) / ranks, kBatch, /*drop_remainder=*/false);
  // The event file is made when the writer is: on the chief only. The hooks that write files run on
  // the chief only anyway (CheckpointSaver, SummarySaver), and so do those that print, here.
  std::optional<gd::summary::FileWriter> writer;
  std::vector<std::unique_ptr<gd::train::Hook>> chief_hooks;
  if (chief) {
    writer.emplace(std::filesystem::path(run_dir) / "train", gd::summary::WriterOptions{.flush_secs = 10});
    constexpr int64_t kShown = 12;
    chief_hooks.push_back(std::make_unique<Announce>());
    chief_hooks.push_back(std::make_unique<gd::train::ProgressBar>(gd::train::ProgressBarOptions{.every_steps = 100}));
    using Summaries = gd::train::SummarySaverOptions;
    chief_hooks.push_back(std::make_unique<gd::train::SummarySaver>(*writer, Summaries{.every_steps = 50}));
    chief_hooks.push_back(std::make_unique<gd::train::SummarySaver>(
        *writer, Summaries{.every_steps = 200, .scalars = false, .histograms = true, .epochs = false}));
    chief_hooks.push_back(std::make_unique<PredictionImages<decltype(net)>>(
        net, *writer, gd::slice(test.x, {0, 0, 0, 0}, {kShown, 28, 28, 1}),
        gd::slice(test_pictures, {0, 0, 0, 0}, {kShown, 28, 28, 1}), gd::slice(test.y, {0}, {kShown})));
  }
  gd::train::CheckpointSaver checkpoints({.every_secs = 0, .every_epochs = 1, .max_to_keep = 3});
  std::vector<gd::train::Hook*> hooks;
  for (const auto& h : chief_hooks) hooks.push_back(h.get());
  hooks.push_back(&checkpoints);
  std::unique_ptr<gd::train::StopAtStep> stop;
  if (max_steps >= 0) {
    stop = std::make_unique<gd::train::StopAtStep>(gd::train::StopAtStepOptions{.last_step = max_steps});
    hooks.push_back(stop.get());
  }

  if (chief)
    std::printf("CNN: %lld parameters, %lld steps per epoch of %lld examples x %lld rank%s\n",
                static_cast<long long>(net.parameter_count()), static_cast<long long>(steps_per_epoch),
                static_cast<long long>(kBatch), static_cast<long long>(ranks), ranks > 1 ? "s" : "");
  const gd::train::History history = gd::train::fit(net, opt, loss, train,
                                                    {.epochs = epochs,
                                                     .batch_size = kBatch,
                                                     .seed = 7,
                                                     .validation = &test,
                                                     .metrics = {&accuracy},
                                                     .hooks = hooks,
                                                     .run_dir = run_dir,
                                                     .rng = &rng,
                                                     .device = device,
                                                     .collective = collective});

  // The test set is fit's validation data: after a finished epoch its numbers are in the History;
  // a run stopped mid-epoch evaluates the weights it stopped with.
  double test_loss = 0, test_accuracy = 0;
  if (!history.epochs.empty() && history.epochs.back().global_step == history.global_step) {
    test_loss = history.epochs.back().get("val_loss");
    test_accuracy = history.epochs.back().get("val_accuracy");
  } else {
    const gd::train::Evaluation result = gd::train::evaluate(net, loss, test, {.batch_size = 500, .metrics = {&accuracy}});
    test_loss = result.loss;
    test_accuracy = result.get("accuracy");
  }
  if (chief) {
    std::printf("step %lld: test loss %.4f, test accuracy %.4f%s%s\n", static_cast<long long>(history.global_step),
                test_loss, test_accuracy, history.stop_reason.empty() ? "" : " — ", history.stop_reason.c_str());
    std::printf("checkpoints in %s, summaries in %s (tensorboard --logdir %s)\n", run_dir.c_str(),
                writer->path().string().c_str(), run_dir.c_str());
  }
  const bool trained_all = history.stop_reason.empty() && epochs >= 3 && n_test == data.test_images.dim(0);
  return !trained_all || test_accuracy >= 0.89 ? EXIT_SUCCESS : EXIT_FAILURE;
}

// A gd::error that escapes prints its message and exits with status 1 (with --distributed: and
// ends every rank of the job).
int main(int argc, char** argv) {
  const bool distributed = std::find(argv + 1, argv + argc, std::string("--distributed")) != argv + argc;
  if (!distributed) return gd::guard_main([&] { return run(argc, argv, {}); });
#ifdef GRADUS_HAVE_DIST
  gd::dist::Context ctx(argc, argv);
  return gd::dist::guard_main(ctx, [&] { return run(argc, argv, gd::dist::collective()); });
#else
  return gd::guard_main([&]() -> int {
    throw gd::value_error(
        "train_fashion_mnist: --distributed needs gradus::dist, which this build does not have (CMake did not find "
        "MPI: install libopenmpi-dev and configure again)");
  });
#endif
}
