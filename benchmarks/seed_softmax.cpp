// benchmarks/seed_softmax.cpp — one training step (forward, backward, SGD update) of the seed
// model: softmax regression 784 -> 10, batch 100, float.
//   gradus_builtin  loss = mean(-sum(y * log_softmax(matmul(x, W) + b), 1))
//   gradus_user_ops the example's code: user ops my_matmul / my_log, p = softmax(...)
//   eigen           hand-written: row-major maps, GEMMs, stable softmax, (p - y) / N, update
// Inputs are the first 800 Fashion-MNIST training examples (8 batches, cycled).
// benchmarks/run reports gradus / eigen (goal <= 1.3x).
#include <benchmark/benchmark.h>
#include <omp.h>

#include <gradus/core/eigen.hpp>  // Eigen/Core, included as gradus includes it
#include <algorithm>
#include <array>
#include <cmath>
#include <exception>
#include <string>
#include <vector>

#include <gradus/data/fashion_mnist.hpp>
#include <gradus/gradus.hpp>
#include <gradus/ops/shape.hpp>

namespace gd = gradus;
using Tensor = gd::Tensor<float>;
using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using RowVector = Eigen::Matrix<float, 1, Eigen::Dynamic>;

namespace {

constexpr int64_t kBatch = 100, kIn = 784, kOut = 10, kBatches = 8;
constexpr float kLr = 0.3f;

struct Batches {
  std::vector<Tensor> x, y;  // x [100,784] in [0,1], y one-hot [100,10]
};
// The first kBatches batches of Fashion-MNIST's training set.
const Batches& batches() {
  static const Batches d = [] {
    const auto data = gd::datasets::fashion_mnist();
    const float* images = data.train_images.data();
    const int64_t* labels = data.train_labels.data();
    Batches b;
    for (int64_t i = 0; i < kBatches; ++i) {
      Tensor x({kBatch, kIn}), y = Tensor::zeros({kBatch, kOut});
      std::copy_n(images + i * kBatch * kIn, kBatch * kIn, x.data());
      for (int64_t r = 0; r < kBatch; ++r) y(r, labels[i * kBatch + r]) = 1.f;
      b.x.push_back(x);
      b.y.push_back(y);
    }
    return b;
  }();
  return d;
}

Eigen::Map<Matrix> mat(Tensor& t) { return {t.data(), t.dim(0), t.dim(1)}; }
Eigen::Map<const Matrix> mat(const Tensor& t) { return {t.data(), t.dim(0), t.dim(1)}; }

// The example's user ops (examples/seed_softmax.cpp), verbatim.
const auto my_matmul = gd::custom_op(
    [](const Tensor& a, const Tensor& b) { return gd::matmul(a, b); },
    [](const std::array<Tensor, 2>& in, const Tensor& /*y*/, const Tensor& g, const std::array<bool, 2>& needs) {
      const auto& [a, b] = in;
      return std::array<Tensor, 2>{needs[0] ? gd::matmul(g, b, {.transpose_b = true}) : Tensor(),
                                   needs[1] ? gd::matmul(a, g, {.transpose_a = true}) : Tensor()};
    },
    "my_matmul");
const auto my_log = gd::custom_op(
    [](const Tensor& x) { return gd::eval(gd::log(gd::clamp(x, 1e-10, 1.0))); },
    [](const Tensor& x, const Tensor& /*y*/, const Tensor& g) { return gd::eval(g / gd::clamp(x, 1e-10, 1.0)); },
    "my_log");

struct GradusModel {
  gd::Var<float> W{Tensor::zeros({kIn, kOut})}, b{Tensor::zeros({kOut})};

  void update() {
    for (gd::Var<float>* v : {&W, &b}) {
      v->value().assign(v->value() - kLr * v->grad());
      v->zero_grad();
    }
  }
  float step_builtin(const Tensor& x, const Tensor& y) {
    gd::Var<float> loss = gd::mean(-gd::sum(y * gd::log_softmax(gd::matmul(x, W) + b), 1));
    gd::backward(loss);
    update();
    return loss.item();
  }
  float step_user_ops(const Tensor& x, const Tensor& y) {
    gd::Var<float> p = gd::softmax(my_matmul(x, W) + b);
    gd::Var<float> loss = gd::mean(-gd::sum(y * my_log(p), 1));
    gd::backward(loss);
    update();
    return loss.item();
  }
};

// Hand-written Eigen: the same model with the gradient of softmax + cross-entropy fused by hand.
struct EigenModel {
  Matrix W = Matrix::Zero(kIn, kOut), logits{kBatch, kOut}, G{kBatch, kOut}, dW{kIn, kOut};
  RowVector b = RowVector::Zero(kOut), db{kOut};

  float step(const Tensor& x, const Tensor& y) {
    const auto X = mat(x), Y = mat(y);
    logits.noalias() = X * W;
    logits.rowwise() += b;
    float loss = 0;
    for (int64_t r = 0; r < kBatch; ++r) {
      const auto l = logits.row(r).array();
      const float m = l.maxCoeff();
      G.row(r).array() = (l - m).exp();
      const float s = G.row(r).sum();
      loss -= (Y.row(r).array() * (l - m - std::log(s))).sum();
      G.row(r).array() = (G.row(r).array() / s - Y.row(r).array()) * (1.f / kBatch);  // d loss / d logits
    }
    dW.noalias() = X.transpose() * G;
    db = G.colwise().sum();
    W -= kLr * dW;
    b -= kLr * db;
    return loss / kBatch;
  }
};

void set_threads(benchmark::State& state) { omp_set_num_threads(int(state.range(0))); }

// Runs 3 steps of both models from zero; an error message unless they agree (so that the
// benchmarks time the same math).
std::string check_against_eigen(bool user_ops) try {
  GradusModel g;
  EigenModel e;
  const auto& d = batches();
  for (size_t i = 0; i < 3; ++i) {
    const float lg = user_ops ? g.step_user_ops(d.x[i], d.y[i]) : g.step_builtin(d.x[i], d.y[i]);
    const float le = e.step(d.x[i], d.y[i]);
    if (std::abs(lg - le) > 1e-4f * std::max(1.f, std::abs(le)))
      return "loss " + std::to_string(lg) + " differs from Eigen's " + std::to_string(le);
  }
  if ((mat(g.W.value()) - e.W).cwiseAbs().maxCoeff() > 1e-4f) return "W differs from Eigen's";
  return {};
} catch (const std::exception& ex) {
  return ex.what();
}

void BM_gradus_builtin(benchmark::State& state) {
  set_threads(state);
  if (const std::string err = check_against_eigen(false); !err.empty()) return state.SkipWithError(err.c_str());
  GradusModel m;
  const auto& d = batches();
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(m.step_builtin(d.x[i], d.y[i]));
    i = (i + 1) % size_t(kBatches);
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * kBatch);
}

void BM_gradus_user_ops(benchmark::State& state) {
  set_threads(state);
  if (const std::string err = check_against_eigen(true); !err.empty()) return state.SkipWithError(err.c_str());
  GradusModel m;
  const auto& d = batches();
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(m.step_user_ops(d.x[i], d.y[i]));
    i = (i + 1) % size_t(kBatches);
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * kBatch);
}

void BM_eigen(benchmark::State& state) {
  set_threads(state);
  EigenModel m;
  const auto& d = batches();
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(m.step(d.x[i], d.y[i]));
    benchmark::ClobberMemory();
    i = (i + 1) % size_t(kBatches);
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * kBatch);
}

// threads = OpenMP threads for gradus and for Eigen's GEMM alike.
#define SEED_BENCH(fn, label) \
  BENCHMARK(fn)->Name("seed_step/" label)->ArgName("threads")->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMicrosecond)
SEED_BENCH(BM_gradus_builtin, "gradus_builtin");
SEED_BENCH(BM_gradus_user_ops, "gradus_user_ops");
SEED_BENCH(BM_eigen, "eigen");

}  // namespace

BENCHMARK_MAIN();
