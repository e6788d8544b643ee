// tests/dist/models.hpp — the small models and data the tests of gd::dist share: two Dense layers
// used by hand (Net) or as a registered Module for fit (Mlp), and the rows of a global batch.
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

#include "gradus/nn.hpp"

namespace dist_models {

namespace gd = gradus;

// Two Dense layers (5 -> 16 -> 3); the initial weights depend on `seed`.
struct Net {
  gd::Rng rng;
  gd::nn::Dense<float> d1, d2;
  explicit Net(uint64_t seed)
      : rng(seed), d1({.in = 5, .out = 16, .activation = gd::nn::tanh}, rng), d2({.in = 16, .out = 3}, rng) {}
  gd::Var<float> operator()(const gd::Tensor<float>& x) { return d2(d1(gd::Var<float>::constant(x))); }
  std::vector<gd::Var<float>> parameters() const {
    auto p = d1.parameters();
    for (auto& v : d2.parameters()) p.push_back(v);
    return p;
  }
  void to(gd::Device d) {
    d1.to(d);
    d2.to(d);
  }
};

// Two Dense layers (5 -> 8 -> 3) as a Module, for fit and Session (no BatchNorm, no Dropout: a
// batch split over ranks gives the same gradient); the initial weights depend on `seed`.
struct Mlp : gd::nn::Module<float> {
  gd::Rng rng;
  gd::nn::Dense<float> d1, d2;
  explicit Mlp(uint64_t seed)
      : rng(seed), d1({.in = 5, .out = 8, .activation = gd::nn::tanh}, rng), d2({.in = 8, .out = 3}, rng) {
    register_module("d1", d1);
    register_module("d2", d2);
  }
  gd::Var<float> forward(const gd::Tensor<float>& x) { return d2.forward(d1.forward(x)); }
};

// Rows [first, first + count) of step `step`'s global batch, `cols` wide: smooth functions of the
// row, the column and the step (rank r of 2 takes its own rows of the same batch).
inline gd::Tensor<float> rows(int64_t cols, int step, int64_t first, int64_t count, float salt) {
  gd::Tensor<float> t = gd::Tensor<float>::empty({count, cols});
  for (int64_t i = 0; i < count; ++i)
    for (int64_t j = 0; j < cols; ++j)
      t.data()[i * cols + j] = float(std::sin(0.7 * double(first + i) + 1.3 * double(j) + 0.37 * step + salt));
  return t;
}

}  // namespace dist_models
