// GPU training steps and products: the MLP, the LeNet CNN and the char-LSTM of step_models.hpp
// (the same shapes, data and plain SGD) trained on the GPU, each step ending with the loss read
// back to the host as pytorch_steps.py's steps do; the MLP also under gd::autocast(gd::bf16), and
// under gd::fp16 with a LossScaler; and 8192³ float products through gd::matmul beside
// cublasSgemm called directly on the same handle, and under bf16 autocast. Steps: median over 5
// rounds of the mean of 20 steps each, after 10 warm-up steps (which compile the kernels).
// Products: median of 10. Prints one markdown row per measurement, each as soon as it is known:
//
//   bench_gpu_steps            (scripts/gpu-check builds and runs it, with $GRADUS_FASHION_MNIST)
//   bench_gpu_steps --quick    a smoke run: 256³ products, 2 timed steps (the emulated GPU)
//
// Without a GPU it says so and exits 0.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "gradus/backend/cuda/device.hpp"
#include "step_models.hpp"

namespace gd = gradus;

namespace {

using Clock = std::chrono::steady_clock;

bool quick = false;  // --quick

/// Microseconds per call of `f` (which synchronises, as a step's loss.item() does): the median
/// over `rounds` of the mean over `per_round` calls.
template <class F>
double median_us(F&& f, int rounds, int per_round) {
  std::vector<double> t;
  for (int r = 0; r < rounds; ++r) {
    const auto t0 = Clock::now();
    for (int i = 0; i < per_round; ++i) f();
    t.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / per_round);
  }
  std::nth_element(t.begin(), t.begin() + rounds / 2, t.end());
  return t[size_t(rounds / 2)];
}

/// Times a model's step over its batches (copied to the device once), cycled.
template <class Step>
double time_steps(Step&& step, size_t batches) {
  size_t i = 0;
  const auto one = [&] {
    step(i);
    i = (i + 1) % batches;
  };
  for (int w = 0; w < (quick ? 1 : 10); ++w) one();
  return quick ? median_us(one, 1, 2) : median_us(one, 5, 20);
}

void row(const char* what, double us, const char* note = "") {
  std::printf("| | %s | %.1f | %s |\n", what, us, note);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  if (!gd::cuda::is_available()) {
    std::printf("no GPU: %s\n", gd::cuda::unavailable_reason().c_str());
    return 0;
  }
  const gd::cuda dev(0);
  std::printf("| %s | training step or product | µs | note |\n|---|---|---:|---|\n", dev.name().c_str());
  std::fflush(stdout);

  const steps::Batches& images = steps::image_batches();
  std::vector<gd::Tensor<float>> xs;
  std::vector<gd::Tensor<int64_t>> ys;
  for (size_t i = 0; i < images.x.size(); ++i) {
    xs.push_back(images.x[i].to(dev));
    ys.push_back(images.y[i].to(dev));
  }

  for (const gd::Precision p : {gd::fp32, gd::bf16, gd::fp16}) {
    steps::GradusMlp m;
    m.d1.to(dev);
    m.d2.to(dev);
    gd::optim::LossScaler<float> scaler;
    const double us = time_steps(
        [&](size_t i) {
          gd::Var<float> loss;
          {
            gd::autocast mixed(p);
            loss = gd::losses::sparse_softmax_cross_entropy_with_logits(ys[i], m.d2.forward(m.d1.forward(xs[i])));
          }
          if (p == gd::fp16)
            scaler.minimize(m.opt, loss);
          else
            m.opt.minimize(loss);
          (void)loss.item();
        },
        xs.size());
    const char* name = p == gd::fp32 ? "MLP 784-500-10 SGD step, batch 128"
                       : p == gd::bf16 ? "MLP step under autocast(bf16)"
                                       : "MLP step under autocast(fp16), LossScaler";
    row(name, us);
  }

  {
    steps::GradusCnn m;
    for (auto* l : {&m.c1, &m.c2}) l->to(dev);
    for (auto* l : {&m.d1, &m.d2}) l->to(dev);
    row("LeNet CNN SGD step, batch 128", time_steps([&](size_t i) { (void)m.step(xs[i], ys[i]); }, xs.size()));
  }

  {
    const steps::Batches& seqs = steps::sequence_batches();
    std::vector<gd::Tensor<int64_t>> ids, next;
    for (size_t i = 0; i < seqs.x.size(); ++i) {
      gd::Tensor<int64_t> x(seqs.x[i].shape());
      for (int64_t j = 0; j < x.size(); ++j) x.data()[j] = int64_t(seqs.x[i].data()[j]);
      ids.push_back(x.to(dev));
      next.push_back(seqs.y[i].to(dev));
    }
    steps::GradusLstm m;
    m.embed.to(dev);
    m.lstm.to(dev);
    m.head.to(dev);
    const double us = time_steps(
        [&](size_t i) {
          gd::Var<float> logits =
              m.head.forward(gd::reshape(m.lstm.forward(m.embed.forward(ids[i])), {-1, steps::kSeqUnits}));
          gd::Var<float> loss = gd::losses::sparse_softmax_cross_entropy_with_logits(next[i], logits);
          m.opt.zero_grad();
          gd::backward(loss);
          gd::optim::clip_by_global_norm(m.opt.params(), steps::kClipNorm);
          m.opt.step();
          (void)loss.item();
        },
        ids.size());
    row("char-LSTM SGD step (B32, T35, E64, H128, V256), clipped", us);
  }

  {
    const int64_t n = quick ? 256 : 8192;
    gd::Rng rng(3);
    const auto a = gd::Tensor<float>::random_uniform({n, n}, rng, -1, 1).to(dev);
    const auto b = gd::Tensor<float>::random_uniform({n, n}, rng, -1, 1).to(dev);
    gd::Tensor<float> c = gd::Tensor<float>::empty({n, n}, dev);
    const double flop = 2.0 * double(n) * double(n) * double(n);
    char note[96];
    const auto product = [&](auto&& f) {
      f();  // warm-up
      return median_us([&] { f(); dev.synchronize(); }, quick ? 1 : 10, 1);
    };
    const double ours = product([&] { c = gd::matmul(a, b); });
    std::snprintf(note, sizeof note, "%.1f TFLOP/s", flop / ours * 1e-6);
    row(quick ? "gd::matmul 256³ float" : "gd::matmul 8192³ float", ours, note);
    const auto& cb = gd::backend::cuda::Cublas::get();
    const double direct = product([&] {
      const auto h = gd::backend::cuda::blas_handle(dev.index);
      const float one = 1, zero = 0;
      cb.check(cb.sgemm(h.handle, 0, 0, int(n), int(n), int(n), &one, b.device_data(), int(n), a.device_data(), int(n),
                        &zero, c.device_data(), int(n)),
               "cublasSgemm");
    });
    std::snprintf(note, sizeof note, "%.1f TFLOP/s; gd::matmul takes %.3f× its time", flop / direct * 1e-6,
                  ours / direct);
    row(quick ? "cublasSgemm 256³ called directly" : "cublasSgemm 8192³ called directly", direct, note);
    const double mixed = product([&] {
      gd::autocast half(gd::bf16);
      c = gd::matmul(a, b);
    });
    std::snprintf(note, sizeof note, "%.1f TFLOP/s", flop / mixed * 1e-6);
    row(quick ? "gd::matmul 256³ under autocast(bf16)" : "gd::matmul 8192³ under autocast(bf16)", mixed, note);
  }
  return 0;
}
