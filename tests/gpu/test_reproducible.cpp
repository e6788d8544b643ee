// The GPU's sums along axes, a broadcast operand's gradient, col2im and the pooling gradients:
// the CPU's values (to the rounding of a sum in another order), and the same bits when run twice.
// On the emulated device the second half holds trivially; on a GPU (label `gpu`) it is what shows
// that these kernels add in an order fixed by the shapes, not by the schedule.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "gradus/gradus.hpp"

#include "../support/gpu.hpp"
#include "../support/same_bits.hpp"

namespace gd = gradus;

namespace reproducible_test {

using gradus_test::same_bits;
using gradus_test::uniform;

/// |gpu - cpu| <= tol · (1 + |cpu|) at every element.
template <class T>
void check_close(const gd::Tensor<T>& gpu, const gd::Tensor<T>& cpu, double tol) {
  REQUIRE(gpu.shape() == cpu.shape());
  double worst = 0;
  for (int64_t j = 0; j < cpu.size(); ++j)
    worst = std::max(worst, std::abs(double(gpu.data()[j]) - double(cpu.data()[j])) / (1 + std::abs(double(cpu.data()[j]))));
  CHECK(worst <= tol);
}

}  // namespace reproducible_test

TEST_CASE("sums along axes and broadcast operands' gradients on the GPU: the CPU's values, the same bits twice",
          "[gpu][memcheck]") {
  namespace rt = reproducible_test;
  if (!gradus_test::gpu_available()) return;
  const gd::Device g = gd::cuda(0);
  struct Case {
    gd::Shape x, w;  // w broadcasts into x; the sums run over the axes where it does
    std::string what;
  };
  const Case cases[] = {
      {{64, 300}, {300}, "a bias over 64 rows (neighbouring outputs, one part)"},
      {{64, 300}, {64, 1}, "row sums (the innermost axis summed)"},
      {{5, 40000}, {5, 1}, "long rows: 9 parts each, added in order"},
      {{256, 4096}, {}, "a scalar over 2^20 elements: 256 parts"},
      {{4, 5000, 3}, {3}, "the two leading axes summed, the innermost kept"},
      {{7, 9, 11, 13}, {7, 1, 11, 1}, "kept and summed axes alternating"},
      {{0, 5}, {5}, "an empty axis: zeros"},
  };
  for (const Case& c : cases) {
    INFO(c.what << ": " << c.x << " into " << c.w);
    const auto x = rt::uniform<double>(c.x, -1, 1, 90), w = rt::uniform<double>(c.w, -1, 1, 91);
    const auto run = [&](gd::Device d) {
      gd::Var<double> vx(x.to(d), true), vw(w.to(d), true);
      // vw's gradient sums x·exp(x·w) over the broadcast axes; the axis sum of the same values
      // runs through sum_into
      gd::Var<double> y = gd::exp(vx * vw);
      gd::backward(gd::sum(y));
      std::vector<gd::Tensor<double>> out{vw.grad().to(gd::cpu), vx.grad().to(gd::cpu)};
      if (c.x.numel() != 0 && c.w.rank() == c.x.rank()) {  // the same reduction as an axis sum
        std::vector<int64_t> axes;
        for (int a = 0; a < c.x.rank(); ++a)
          if (c.w[a] == 1 && c.x[a] != 1) axes.push_back(a);
        if (axes.size() == 1) out.push_back(gd::sum(x.to(d) * gd::exp(x.to(d) * w.to(d)), axes[0], true).to(gd::cpu));
        if (axes.size() == 2) out.push_back(gd::sum(x.to(d) * gd::exp(x.to(d) * w.to(d)), {axes[0], axes[1]}, true).to(gd::cpu));
      }
      return out;
    };
    const auto cpu = run(gd::cpu), first = run(g), second = run(g);
    REQUIRE(cpu.size() == first.size());
    for (size_t i = 0; i < cpu.size(); ++i) {
      INFO("result " << i);
      rt::check_close(first[i], cpu[i], 1e-12);
      CHECK(rt::same_bits(first[i], second[i]));
    }
    if (c.x.numel() == 0)
      for (double v : cpu[0]) CHECK(v == 0);
  }
}

TEST_CASE("a convolution and pooling step on the GPU: the same gradients, bit for bit, on every run, ties included",
          "[gpu][memcheck]") {
  namespace rt = reproducible_test;
  if (!gradus_test::gpu_available()) return;
  const gd::Device g = gd::cuda(0);
  const auto x = rt::uniform<float>({4, 15, 13, 3}, -1, 1, 92), w = rt::uniform<float>({3, 3, 3, 8}, -1, 1, 93);
  const auto b = rt::uniform<float>({8}, -0.5, 0.2, 94);
  // four levels only: the overlapping 3x3 windows hold tied maxima, and each window's gradient
  // goes to its first maximal element, as on the CPU
  gd::Tensor<float> q = rt::uniform<float>({3, 11, 9, 2}, 0, 4, 95);
  for (float& v : q) v = std::floor(v);
  for (bool max : {true, false}) {
    INFO(std::string(max ? "max_pool2d" : "avg_pool2d"));
    const auto run = [&](gd::Device d) {
      gd::Var<float> vx(x.to(d), true), vw(w.to(d), true), vb(b.to(d), true);
      gd::Var<float> y = gd::relu(gd::conv2d(vx, vw, vb, {.strides = {1, 2}, .padding = gd::Padding::same}));
      const gd::Pool2dOptions pool{.ksize = {3, 3}, .strides = {2, 2}, .padding = gd::Padding::same};
      gd::Var<float> vq(q.to(d), true);
      gd::Var<float> z = max ? gd::max_pool2d(y, pool) : gd::avg_pool2d(y, pool);
      gd::Var<float> zq = max ? gd::max_pool2d(vq, pool) : gd::avg_pool2d(vq, pool);
      gd::backward(gd::sum(z * z) + gd::sum(zq * zq));
      return std::vector<gd::Tensor<float>>{z.value().to(gd::cpu), vx.grad().to(gd::cpu), vw.grad().to(gd::cpu),
                                            vb.grad().to(gd::cpu), vq.grad().to(gd::cpu)};
    };
    const auto cpu = run(gd::cpu), first = run(g), second = run(g);
    for (size_t i = 0; i < cpu.size(); ++i) {
      INFO("result " << i);
      rt::check_close(first[i], cpu[i], 1e-4);
      CHECK(rt::same_bits(first[i], second[i]));
    }
  }
}

TEST_CASE("gather's gradient on the GPU adds repeated rows in the CPU's order: the CPU's bits", "[gpu][memcheck]") {
  namespace rt = reproducible_test;
  if (!gradus_test::gpu_available()) return;
  const gd::Device g = gd::cuda(0);
  struct Case {
    gd::Shape x;
    int64_t k, axis;
    std::string what;
  };
  const Case cases[] = {
      {{50, 4}, 200, 0, "50 rows, one pass of the sort, one tile"},
      {{3, 700, 5}, 3000, 1, "700 rows: two passes, three tiles, rows hit up to 11 times"},
      {{2, 1, 3}, 40, 1, "one row, hit 40 times"},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    const auto x = rt::uniform<float>(c.x, -1, 1, 96);
    gd::Tensor<int64_t> idx = gd::Tensor<int64_t>::empty({c.k});
    for (int64_t j = 0; j < c.k; ++j) idx.data()[j] = (j * 7919 + j / 3) % c.x[c.axis];
    gd::Shape out_shape = c.x;
    out_shape[c.axis] = c.k;
    const auto w = rt::uniform<float>(out_shape, -1, 1, 97);
    const auto run = [&](gd::Device d) {
      gd::Var<float> a(x.to(d), true);
      gd::backward(gd::sum(gd::gather(a, idx.to(d), c.axis) * w.to(d)));
      return a.grad().to(gd::cpu);
    };
    const auto cpu = run(gd::cpu), first = run(g), second = run(g);
    CHECK(rt::same_bits(first, cpu));
    CHECK(rt::same_bits(first, second));
  }
}
