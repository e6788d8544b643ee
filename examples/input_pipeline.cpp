// examples/input_pipeline.cpp — the LeNet-style CNN of examples/cnn.cpp trained from sharded
// TFRecord files through a gd::data pipeline, the C++ form of a tf.data input pipeline:
//
//   1. writes Fashion-MNIST's training set as 4 shards <dir>/train.tfrecord-0000k-of-00004 of
//      tf.train.Example records {image: PNG bytes of the 28x28 picture, label: int64} (example i
//      goes to shard i % 4; shards already there are reused);
//   2. list_files → interleave(tfrecord, 4 shards round-robin) → zip with a salt (a range shuffled
//      anew every epoch) → parallel_map on 2 threads: parse_example, decode_png, pad to 32x32,
//      random 28x28 crop, random left-right flip, standardise → shuffle(10000) → batch(128) →
//      prefetch(2), or with --device cuda prefetch_to(gd::cuda(0), 2): batches copied to the GPU
//      on the pipeline's thread while it trains on the one before;
//   3. gd::train::fit on that Dataset (Adam, lr 1e-3), validating on the test set after every
//      epoch, and prints the test accuracy.
// The augmentation's randomness comes from an Rng seeded with the element's salt, so every
// element gets the same crop and flip in every run, and a new one every epoch: the pipeline is
// deterministic, as exact resume from a checkpoint needs.
//
// Usage: input_pipeline [--epochs N] [--dir DIR] [--train-examples N] [--test-examples N] [--max-steps N]
//                       [--device cpu|cuda] [--print-every K]
//   --epochs N          epochs to train (default 5)
//   --dir DIR           where the shards go (default runs/input_pipeline)
//   --train-examples N  write only the first N training examples (a quick try; default all 60000)
//   --test-examples N   validate on the first N test images only (default all 10000)
//   --max-steps N       stop at global step N
//   --device D          cpu (default) or cuda: fit on the first CUDA GPU (prefetch_to copies the batches there)
//   --print-every K     print every K steps' mean training loss ("step N  train loss L")
// Exits 1 when it trained all of 5 or more epochs on all the data and the test accuracy is below 0.89.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gradus/data.hpp>
#include <gradus/gradus.hpp>
#include <gradus/image.hpp>
#include <gradus/train.hpp>

#include "flags.hpp"

namespace gd = gradus;
namespace nn = gradus::nn;
namespace fs = std::filesystem;
using Tensor = gd::Tensor<float>;

namespace {

constexpr int kShards = 4;

std::string shard_name(const fs::path& dir, int k) {
  return (dir / ("train.tfrecord-0000" + std::to_string(k) + "-of-0000" + std::to_string(kShards))).string();
}

/// Writes examples [0, n) of `images` [N, 28, 28] / `labels` as the shards, each under a
/// temporary name renamed when complete (so a shard that exists is whole).
void write_shards(const fs::path& dir, const Tensor& images, const gd::Tensor<int64_t>& labels, int64_t n) {
  fs::create_directories(dir);
  for (int k = 0; k < kShards; ++k) {
    const std::string name = shard_name(dir, k);
    if (fs::exists(name)) continue;
    gd::io::TFRecordWriter w(name + ".tmp");
    for (int64_t i = k; i < n; i += kShards) {
      gd::io::Example ex;
      const Tensor picture = gd::slice(images, {i, 0, 0}, {1, 28, 28});
      ex.features["image"] = gd::io::BytesList{gd::image::encode_png(picture.reshape({28, 28, 1}))};
      ex.features["label"] = gd::io::Int64List{labels.data()[i]};
      w.write(gd::io::encode_example(ex));
    }
    w.close();
    fs::rename(name + ".tmp", name);
  }
}

// Prints the mean training loss of every `every` steps as "step N  train loss L".
class PrintLoss : public gd::train::Hook {
 public:
  explicit PrintLoss(int64_t every) : every_(every) {}
  void after_step(gd::train::Session&, const gd::train::StepResult& r) override {
    sum_ += r.loss;
    if (r.global_step % every_ == 0) {
      std::printf("step %5lld  train loss %.6f\n", static_cast<long long>(r.global_step), sum_ / double(every_));
      sum_ = 0;
    }
  }

 private:
  int64_t every_;
  double sum_ = 0;
};

}  // namespace

static int run(int argc, char** argv) {
  const int64_t epochs = flag(argc, argv, "--epochs", int64_t{5});
  const fs::path dir = flag(argc, argv, "--dir", std::string("runs/input_pipeline"));
  const int64_t max_steps = flag(argc, argv, "--max-steps", int64_t{-1});
  const int64_t print_every = flag(argc, argv, "--print-every", int64_t{0});
  const std::string device_name = flag(argc, argv, "--device", std::string("cpu"));
  if (device_name != "cpu" && device_name != "cuda")
    throw gd::value_error("--device: expected cpu or cuda, got '" + device_name + "'");
  const std::optional<gd::Device> device =
      device_name == "cuda" ? std::optional<gd::Device>(gd::cuda(0)) : std::nullopt;

  const auto data = gd::datasets::fashion_mnist();  // images in [0, 1], labels 0..9
  const int64_t n_train = std::min<int64_t>(flag(argc, argv, "--train-examples", int64_t{60000}), data.train_images.dim(0));
  const int64_t n_test = std::min<int64_t>(flag(argc, argv, "--test-examples", int64_t{10000}), data.test_images.dim(0));
  const float mean = gd::mean(data.train_images).item();
  const float sd = std::sqrt(gd::mean(gd::square(data.train_images - mean)).item());

  auto t0 = std::chrono::steady_clock::now();
  write_shards(dir, data.train_images, data.train_labels, n_train);
  std::printf("shards: %s (%.1f s)\n", shard_name(dir, 0).c_str(),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());

  // parse → decode → augment: one function, run on two threads by parallel_map.
  const auto parse = gd::data::parse_example({
      {"image", gd::io::FixedLen{.shape = {}, .dtype = gd::io::FeatureDtype::bytes}},
      {"label", gd::io::FixedLen{.shape = {}, .dtype = gd::io::FeatureDtype::int64}}});
  auto augment = [parse, mean, sd](gd::data::Example e) {  // e: (record, salt)
    gd::Rng rng(uint64_t(e.tensor<int64_t>(1).item()));   // per element, per epoch, every run the same
    const gd::data::Example p = parse(std::move(e));
    const Tensor image = gd::image::decode_png(p.string("image"));                 // [28, 28, 1] in [0, 1]
    const Tensor padded = gd::eval(gd::image::pad_to_bounding_box(image, 2, 2, 32, 32));
    const Tensor cropped = gd::eval(gd::image::random_crop(padded, {28, 28}, rng));
    const Tensor flipped = gd::eval(gd::image::random_flip_left_right(cropped, rng));
    return gd::data::Example::tuple(gd::eval((flipped - mean) / sd), p.tensor<int64_t>("label"));
  };
  const std::vector<std::string> files = gd::data::list_files(dir.string() + "/train.tfrecord-*-of-00004");
  constexpr int64_t kBatch = 128;
  const gd::data::Dataset records = gd::data::Dataset::from_strings(files).interleave(
      [](const gd::data::Example& f) { return gd::data::tfrecord({f.string(0)}); }, kShards);
  const gd::data::Dataset salts = gd::data::Dataset::range(0, int64_t(1) << 62).shuffle(1024, /*seed=*/11);
  const gd::data::Dataset batches = gd::data::Dataset::zip({records, salts})
                                        .parallel_map(augment, 2)
                                        .shuffle(10000, /*seed=*/7)
                                        .batch(kBatch, /*drop_remainder=*/true);
  const gd::data::Dataset train = device ? batches.prefetch_to(*device, 2) : batches.prefetch(2);
  const Tensor test_x = gd::eval((gd::slice(data.test_images, {0, 0, 0}, {n_test, 28, 28}).reshape({-1, 28, 28, 1}) - mean) / sd);
  const gd::data::Dataset test =
      gd::data::Dataset::from_tensor_slices(test_x, gd::Tensor<int64_t>(gd::slice(data.test_labels, {0}, {n_test}))).batch(500);

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
  accuracy.set_name("accuracy");

  gd::train::Logging log({.every_steps = 100});
  PrintLoss print_loss(print_every);
  std::vector<gd::train::Hook*> hooks = {&log};
  if (print_every > 0) hooks.push_back(&print_loss);
  std::unique_ptr<gd::train::StopAtStep> stop;
  if (max_steps >= 0) {
    stop = std::make_unique<gd::train::StopAtStep>(gd::train::StopAtStepOptions{.last_step = max_steps});
    hooks.push_back(stop.get());
  }
  std::printf("CNN: %lld parameters; %lld training examples in %d shards, batches of %lld\n",
              static_cast<long long>(net.parameter_count()), static_cast<long long>(n_train), kShards,
              static_cast<long long>(kBatch));
  t0 = std::chrono::steady_clock::now();
  const gd::train::History history =
      gd::train::fit(net, opt, loss, train,
                     {.epochs = epochs, .validation = &test, .metrics = {&accuracy}, .hooks = hooks, .device = device});
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  const gd::train::Evaluation result = gd::train::evaluate(net, loss, test, {.metrics = {&accuracy}});
  std::printf("step %lld (%.1f s, %.1f ms a step): test loss %.4f, test accuracy %.4f%s%s\n",
              static_cast<long long>(history.global_step), secs, 1e3 * secs / double(std::max<int64_t>(history.global_step, 1)),
              result.loss, result.get("accuracy"), history.stop_reason.empty() ? "" : " — ", history.stop_reason.c_str());
  const bool trained_all = history.stop_reason.empty() && epochs >= 5 && n_train == data.train_images.dim(0) &&
                           n_test == data.test_images.dim(0);
  return !trained_all || result.get("accuracy") >= 0.89 ? EXIT_SUCCESS : EXIT_FAILURE;
}

// A gd::error that escapes prints its message and exits with status 1.
int main(int argc, char** argv) { return gd::guard_main([&] { return run(argc, argv); }); }
