// benchmarks/step_models.hpp — the gradus models and data of the training-step benchmarks
// (mlp_step, cnn_step, lstm_step through steps.hpp; gpu_steps on a GPU), shared with
// torch_steps.cpp so that gradus and LibTorch are timed side by side in one process. Each step is
// forward, backward and a plain SGD update, float:
//   MLP   784-500(ReLU)-10, batch 128, Fashion-MNIST images, softmax cross-entropy
//   CNN   LeNet: [128,28,28,1] -> conv 5x5x32 VALID ReLU -> maxpool 2 -> conv 5x5x64 VALID ReLU ->
//         maxpool 2 -> flatten 1024 -> dense 500 ReLU -> dense 10, Fashion-MNIST images
//   LSTM  char-LSTM language model: ids [32,35] in [0,256) -> embedding 64 -> LSTM 128 (every
//         step) -> dense 256 at every step, softmax cross-entropy against the next ids over the
//         32*35 steps, full BPTT over 35 steps, gradients clipped to global norm 5
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include <gradus/data/fashion_mnist.hpp>
#include <gradus/gradus.hpp>
#include <gradus/losses.hpp>
#include <gradus/nn.hpp>
#include <gradus/optim.hpp>

namespace steps {

namespace gd = gradus;
namespace nn = gradus::nn;
using Tensor = gd::Tensor<float>;
using Ids = gd::Tensor<int64_t>;

inline constexpr int64_t kBatch = 128, kPixels = 784, kHidden = 500, kClasses = 10, kBatches = 4;
inline constexpr int64_t kSeqBatch = 32, kSeqSteps = 35, kSeqEmbed = 64, kSeqUnits = 128, kSeqVocab = 256;
inline constexpr double kClipNorm = 5.0;
inline constexpr float kLr = 0.01f;
inline constexpr uint64_t kSeed = 42;

/// Batches of inputs and integer labels, cycled by the benchmarks.
struct Batches {
  std::vector<Tensor> x;
  std::vector<Ids> y;
};

/// The first kBatches batches of 128 Fashion-MNIST training images ([128, 784] in [0, 1]), from
/// $GRADUS_FASHION_MNIST when set, else Debian's dataset-fashion-mnist.
inline const Batches& image_batches() {
  static const Batches d = [] {
    const char* dir = std::getenv("GRADUS_FASHION_MNIST");  // a copy elsewhere (scripts/cpu-peer)
    const auto data = dir ? gd::datasets::fashion_mnist(dir) : gd::datasets::fashion_mnist();
    Batches b;
    for (int64_t i = 0; i < kBatches; ++i) {
      Tensor x({kBatch, kPixels});
      Ids y({kBatch});
      std::copy_n(data.train_images.data() + i * kBatch * kPixels, kBatch * kPixels, x.data());
      std::copy_n(data.train_labels.data() + i * kBatch, kBatch, y.data());
      b.x.push_back(x);
      b.y.push_back(y);
    }
    return b;
  }();
  return d;
}

/// kBatches random character batches: ids x [32, 35] in [0, 256) and their next ids y [32*35]
/// (a random walk over the byte values, so the next id depends on the current one).
inline const Batches& sequence_batches() {
  static const Batches d = [] {
    gd::Rng rng(7);
    Batches b;
    for (int64_t i = 0; i < kBatches; ++i) {
      Tensor x({kSeqBatch, kSeqSteps});  // ids held as floats; cast where used
      Ids y({kSeqBatch * kSeqSteps});
      for (int64_t n = 0; n < kSeqBatch; ++n) {
        int64_t id = int64_t(rng.below(uint64_t(kSeqVocab)));
        for (int64_t t = 0; t < kSeqSteps; ++t) {
          x.data()[n * kSeqSteps + t] = float(id);
          id = (id + 1 + int64_t(rng.below(3))) % kSeqVocab;
          y.data()[n * kSeqSteps + t] = id;
        }
      }
      b.x.push_back(x);
      b.y.push_back(y);
    }
    return b;
  }();
  return d;
}

/// Parameters of several modules in order.
template <class... M>
std::vector<gd::Var<float>> parameters_of(const M&... m) {
  std::vector<gd::Var<float>> out;
  (
      [&] {
        for (const auto& p : m.parameters()) out.push_back(p);
      }(),
      ...);
  return out;
}

struct GradusMlp {
  gd::Rng rng{kSeed};
  nn::Dense<float> d1{{.in = kPixels, .out = kHidden, .activation = nn::relu}, rng};
  nn::Dense<float> d2{{.in = kHidden, .out = kClasses}, rng};
  gd::optim::SGD<float> opt{parameters_of(d1, d2), {.lr = kLr}};

  /// One step; returns the loss before the update.
  float step(const Tensor& x, const Ids& y) {
    gd::Var<float> loss = gd::losses::sparse_softmax_cross_entropy_with_logits(y, d2.forward(d1.forward(x)));
    opt.minimize(loss);
    return loss.item();
  }
};

struct GradusCnn {
  gd::Rng rng{kSeed};
  nn::Conv2d<float> c1{{.in = 1, .filters = 32, .kernel_size = {5, 5}, .padding = gd::Padding::valid,
                        .activation = nn::relu}, rng};
  nn::Conv2d<float> c2{{.in = 32, .filters = 64, .kernel_size = {5, 5}, .padding = gd::Padding::valid,
                        .activation = nn::relu}, rng};
  nn::Dense<float> d1{{.in = 4 * 4 * 64, .out = kHidden, .activation = nn::relu}, rng};
  nn::Dense<float> d2{{.in = kHidden, .out = kClasses}, rng};
  nn::MaxPool2d pool{};
  gd::optim::SGD<float> opt{parameters_of(c1, c2, d1, d2), {.lr = kLr}};

  /// One step on x [N, 784] (viewed as [N, 28, 28, 1]); returns the loss before the update.
  float step(const Tensor& x, const Ids& y) {
    gd::Var<float> h = pool.forward(c2.forward(pool.forward(c1.forward(x.reshape({-1, 28, 28, 1})))));
    gd::Var<float> loss =
        gd::losses::sparse_softmax_cross_entropy_with_logits(y, d2.forward(d1.forward(gd::flatten(h))));
    opt.minimize(loss);
    return loss.item();
  }
};

struct GradusLstm {
  gd::Rng rng{kSeed};
  nn::Embedding<float> embed{{.vocab = kSeqVocab, .dim = kSeqEmbed}, rng};
  nn::LSTM<float> lstm{{.in = kSeqEmbed, .units = kSeqUnits, .return_sequences = true}, rng};
  nn::Dense<float> head{{.in = kSeqUnits, .out = kSeqVocab}, rng};
  gd::optim::SGD<float> opt{parameters_of(embed, lstm, head), {.lr = kLr}};
  Ids ids{{kSeqBatch, kSeqSteps}};

  /// One step on ids x [N, T] (held as floats), next ids y [N*T]; returns the loss before the update.
  float step(const Tensor& x, const Ids& y) {
    for (int64_t i = 0; i < ids.size(); ++i) ids.data()[i] = int64_t(x.data()[i]);
    gd::Var<float> logits = head.forward(gd::reshape(lstm.forward(embed.forward(ids)), {-1, kSeqUnits}));
    gd::Var<float> loss = gd::losses::sparse_softmax_cross_entropy_with_logits(y, logits);
    opt.zero_grad();
    gd::backward(loss);
    gd::optim::clip_by_global_norm(opt.params(), kClipNorm);
    opt.step();
    return loss.item();
  }
};

}  // namespace steps
