// A small classifier for the training tests: Dense-BatchNorm-ReLU-Dropout-Dense in double, its
// loss, and data sets whose labels a linear map decides.
#pragma once
#include <cmath>
#include <cstdint>

#include <gradus/gradus.hpp>
#include <gradus/train.hpp>

namespace gradus_test {

/// Dense(in -> hidden) -> BatchNorm -> ReLU -> Dropout(rate) -> Dense(hidden -> out); the kernels
/// are drawn from `init`, the dropout masks from `dropout_rng` (which must outlive the net).
struct DenseBatchNormNet : gradus::nn::Module<double> {
  gradus::nn::Dense<double> d1;
  gradus::nn::BatchNorm<double> bn;
  gradus::nn::Dropout<double> drop;
  gradus::nn::Dense<double> d2;
  DenseBatchNormNet(int64_t in, int64_t hidden, int64_t out, double rate, gradus::Rng& init, gradus::Rng& dropout_rng)
      : d1({.in = in, .out = hidden}, init),
        bn({.features = hidden}),
        drop({.rate = rate}, dropout_rng),
        d2({.in = hidden, .out = out}, init) {
    register_module("d1", d1);
    register_module("bn", bn);
    register_module("drop", drop);
    register_module("d2", d2);
  }
  gradus::Var<double> forward(const gradus::Tensor<double>& x) {
    return d2.forward(drop.forward(gradus::relu(bn.forward(d1.forward(x)))));
  }
};

/// The loss: sparse softmax cross-entropy of class-id labels and logits.
inline constexpr auto xent = [](const gradus::Tensor<int64_t>& labels, const gradus::Var<double>& logits) {
  return gradus::losses::sparse_softmax_cross_entropy_with_logits(labels, logits);
};

/// n examples of `in` features, labels = argmax of a fixed linear map into `classes`.
inline gradus::train::Data<double, int64_t> make_data(int64_t n, int64_t in, int64_t classes, uint64_t seed) {
  gradus::Rng rng(seed);
  gradus::Tensor<double> x = gradus::Tensor<double>::random_normal({n, in}, rng);
  gradus::Tensor<int64_t> y({n});
  for (int64_t i = 0; i < n; ++i) {
    int64_t best = 0;
    double best_v = -1e300;
    for (int64_t c = 0; c < classes; ++c) {
      double v = 0;
      for (int64_t j = 0; j < in; ++j) v += x(i, j) * std::cos(double(1 + c * in + j));
      if (v > best_v) best_v = v, best = c;
    }
    y.data()[i] = best;
  }
  return {x, y};
}

/// n examples of `features` normal floats, labelled 1 where the first two sum above 0, else 0.
inline gradus::train::Data<float, int64_t> sum_sign_data(int64_t n, int64_t features, uint64_t seed) {
  gradus::Rng rng(seed);
  const auto x = gradus::Tensor<float>::random_normal({n, features}, rng);
  gradus::Tensor<int64_t> y({n});
  for (int64_t i = 0; i < n; ++i) y(i) = x(i, 0) + x(i, 1) > 0 ? 1 : 0;
  return {x, y};
}

}  // namespace gradus_test
