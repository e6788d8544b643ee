// benchmarks/mlp_step.cpp — one SGD training step of the MLP 784-500(ReLU)-10, batch 128, float,
// softmax cross-entropy over Fashion-MNIST images (see steps.hpp):
//   gradus  nn::Dense layers, losses::sparse_softmax_cross_entropy_with_logits, optim::SGD
//   gradus_bf16  the gradus step under gd::autocast(gd::bf16)
//   eigen   hand-written: row-major Eigen matrices, GEMMs, ReLU mask, stable softmax with the
//           cross-entropy gradient (p - onehot) / N fused by hand, the update in place
// and inference on a few examples (serving one request, a beam of four; one thread):
//   mlp_predict/gradus/rows:R  the two layers' forward pass under gd::no_grad on R images
//   mlp_predict/eigen/rows:R   the same forward in Eigen: X W1 + b1, ReLU, H W2 + b2
// Both start from the same weights; the gradus benchmark refuses to run unless three steps of
// the two agree. benchmarks/run reports gradus / eigen (goal <= 1.1x); torch_steps.cpp has the
// LibTorch peer.
#include "steps.hpp"  // first: gradus includes Eigen (see gradus/core/eigen.hpp)

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <exception>
#include <string>

namespace {

using steps::Ids;
using steps::kBatch;
using steps::kClasses;
using steps::kHidden;
using steps::kLr;
using steps::kPixels;
using steps::Tensor;
using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using RowVector = Eigen::Matrix<float, 1, Eigen::Dynamic>;

Eigen::Map<const Matrix> mat(const Tensor& t) { return {t.data(), t.dim(0), t.dim(1)}; }

// Hand-written forward, backward and update; weights copied from a GradusMlp's initial ones.
struct EigenMlp {
  Matrix W1, W2, H{kBatch, kHidden}, G{kBatch, kClasses}, dH{kBatch, kHidden}, dW1{kPixels, kHidden},
      dW2{kHidden, kClasses};
  RowVector b1, b2;

  EigenMlp() {
    const steps::GradusMlp init;
    W1 = mat(init.d1.kernel().value());
    W2 = mat(init.d2.kernel().value());
    b1 = Eigen::Map<const RowVector>(init.d1.bias().value().data(), kHidden);
    b2 = Eigen::Map<const RowVector>(init.d2.bias().value().data(), kClasses);
  }

  float step(const Tensor& x, const Ids& y) {
    const auto X = mat(x);
    H.noalias() = X * W1;
    H = (H.rowwise() + b1).cwiseMax(0.f);
    G.noalias() = H * W2;
    G.rowwise() += b2;
    float loss = 0;
    for (int64_t r = 0; r < kBatch; ++r) {  // G: logits -> d loss / d logits
      auto l = G.row(r).array();
      const float m = l.maxCoeff();
      l = (l - m).exp();
      const float s = l.sum();
      const int64_t label = y.data()[r];
      loss -= std::log(l(label) / s);
      l *= 1.f / (s * kBatch);
      l(label) -= 1.f / kBatch;
    }
    dW2.noalias() = H.transpose() * G;
    b2 -= kLr * G.colwise().sum();
    dH.noalias() = G * W2.transpose();
    dH = (H.array() > 0.f).select(dH, 0.f);
    dW1.noalias() = X.transpose() * dH;
    b1 -= kLr * dH.colwise().sum();
    W2 -= kLr * dW2;
    W1 -= kLr * dW1;
    return loss / kBatch;
  }
};

// Runs 3 steps of both from the same weights; an error message unless they agree.
std::string check_against_eigen() try {
  steps::GradusMlp g;
  EigenMlp e;
  const auto& d = steps::image_batches();
  for (size_t i = 0; i < 3; ++i) {
    const float lg = g.step(d.x[i], d.y[i]), le = e.step(d.x[i], d.y[i]);
    if (std::abs(lg - le) > 1e-4f * std::max(1.f, std::abs(le)))
      return "loss " + std::to_string(lg) + " differs from Eigen's " + std::to_string(le);
  }
  if ((mat(g.d1.kernel().value()) - e.W1).cwiseAbs().maxCoeff() > 1e-4f) return "W1 differs from Eigen's";
  if ((mat(g.d2.kernel().value()) - e.W2).cwiseAbs().maxCoeff() > 1e-4f) return "W2 differs from Eigen's";
  return {};
} catch (const std::exception& ex) {
  return ex.what();
}

void BM_gradus(benchmark::State& state) {
  omp_set_num_threads(int(state.range(0)));
  if (const std::string err = check_against_eigen(); !err.empty()) return state.SkipWithError(err.c_str());
  steps::BM_gradus_mlp(state);
}

void BM_eigen(benchmark::State& state) {
  omp_set_num_threads(int(state.range(0)));
  EigenMlp m;
  const auto& d = steps::image_batches();
  size_t i = 0;
  const bench::RoundTrips trips(state, state.range(0));
  for (auto _ : state) {
    benchmark::DoNotOptimize(m.step(d.x[i], d.y[i]));
    benchmark::ClobberMemory();
    i = (i + 1) % d.x.size();
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * kBatch);
}

/// The first `rows` images of the first batch.
Tensor first_rows(int64_t rows) {
  const Tensor& x = steps::image_batches().x[0];
  Tensor out({rows, kPixels});
  std::copy_n(x.data(), rows * kPixels, out.data());
  return out;
}

void BM_gradus_predict(benchmark::State& state) {
  omp_set_num_threads(1);
  const int64_t rows = state.range(0);
  steps::GradusMlp g;
  const Tensor x = first_rows(rows);
  const gradus::no_grad inference;
  const auto logits = [&] { return g.d2.forward(g.d1.forward(x)).value(); };
  // the same logits as the Eigen forward below, or no timing
  const EigenMlp e;
  const Matrix ref = ((mat(x) * e.W1).rowwise() + e.b1).cwiseMax(0.f) * e.W2;
  const Tensor got = logits();
  if (((mat(got).rowwise() - e.b2) - ref).cwiseAbs().maxCoeff() > 1e-4f)
    return state.SkipWithError("logits differ from Eigen's");
  for (auto _ : state) benchmark::DoNotOptimize(logits());
  state.SetItemsProcessed(int64_t(state.iterations()) * rows);
}

void BM_eigen_predict(benchmark::State& state) {
  omp_set_num_threads(1);
  const int64_t rows = state.range(0);
  const EigenMlp e;
  const Tensor x = first_rows(rows);
  Matrix h(rows, kHidden), out(rows, kClasses);
  for (auto _ : state) {
    h.noalias() = mat(x) * e.W1;
    h = (h.rowwise() + e.b1).cwiseMax(0.f);
    out.noalias() = h * e.W2;
    out.rowwise() += e.b2;
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * rows);
}

GRADUS_STEP_BENCH(BM_gradus, "mlp_step/gradus");
GRADUS_STEP_BENCH(BM_eigen, "mlp_step/eigen");
GRADUS_STEP_BENCH(steps::BM_gradus_mlp_bf16, "mlp_step/gradus_bf16");
BENCHMARK(BM_gradus_predict)->Name("mlp_predict/gradus")->ArgName("rows")->Arg(1)->Arg(2)->Arg(4)->Arg(16)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_eigen_predict)->Name("mlp_predict/eigen")->ArgName("rows")->Arg(1)->Arg(2)->Arg(4)->Arg(16)
    ->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
