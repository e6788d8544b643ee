// softmax and log_softmax along the last axis run exp across groups of lines (at most 256 lines
// and 4,096 elements a group): lines shorter than a vector, more lines than one group holds, a
// line longer than a group, and empty lines, forward and backward, against double-precision
// formulas: softmax_i = exp(x_i - m) / sum_j exp(x_j - m); the gradient of sum(w * log_softmax(x))
// is w - softmax(x) * sum(w), that of sum(w * softmax(x)) is s * (w - sum(w * s)).
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include <gradus/gradus.hpp>

namespace gd = gradus;

TEST_CASE("softmax over groups of short and long lines matches double-precision formulas", "[ops][softmax]") {
  gd::Rng rng(17);
  for (const auto& [rows, n] : {std::pair<int64_t, int64_t>{600, 10}, {3, 1}, {37, 7}, {2, 5000}, {513, 16}}) {
    const auto x = gd::Tensor<float>::random_normal({rows, n}, rng, 0.f, 3.f);
    const auto w = gd::Tensor<float>::random_normal({rows, n}, rng);
    for (bool log : {false, true}) {
      INFO("rows " << rows << ", n " << n << ", log " << log);
      gd::Var<float> xv(x);
      const gd::Var<float> y = log ? gd::log_softmax(xv, -1) : gd::softmax(xv, -1);
      gd::backward(gd::sum(y * w));
      double worst_y = 0, worst_g = 0;
      for (int64_t r = 0; r < rows; ++r) {
        const float* xi = x.data() + r * n;
        const float* wi = w.data() + r * n;
        double m = xi[0], s = 0, sw = 0, sws = 0;
        for (int64_t k = 1; k < n; ++k) m = std::max(m, double(xi[k]));
        for (int64_t k = 0; k < n; ++k) s += std::exp(double(xi[k]) - m);
        for (int64_t k = 0; k < n; ++k) {
          const double p = std::exp(double(xi[k]) - m) / s;
          sw += wi[k], sws += wi[k] * p;
        }
        for (int64_t k = 0; k < n; ++k) {
          const double p = std::exp(double(xi[k]) - m) / s;
          const double want_y = log ? (double(xi[k]) - m) - std::log(s) : p;
          const double want_g = log ? wi[k] - p * sw : p * (wi[k] - sws);
          worst_y = std::max(worst_y, std::abs(double(y.value().data()[r * n + k]) - want_y) / (1 + std::abs(want_y)));
          worst_g = std::max(worst_g, std::abs(double(xv.grad().data()[r * n + k]) - want_g) / (1 + std::abs(want_g)));
        }
      }
      CHECK(worst_y < 1e-5);
      CHECK(worst_g < 1e-5);
    }
  }
}

TEST_CASE("softmax of empty lines, or of no lines, is empty and its gradient too", "[ops][softmax]") {
  for (const gd::Shape& shape : {gd::Shape{3, 0}, gd::Shape{0, 5}}) {
    gd::Var<float> x(gd::Tensor<float>::zeros(shape));
    const auto y = gd::log_softmax(x, -1), s = gd::softmax(x, -1);
    gd::backward(gd::sum(y) + gd::sum(s));
    CHECK(y.value().shape() == shape);
    CHECK(x.grad().shape() == shape);
  }
}
