// GPU elementwise throughput: the generated kernels of `exp(a*b + c) * d` over 2^24 floats (its
// value, and the value of its sum with the four gradients: the fused-loss benchmark) against
// the card's device-to-device copy bandwidth, measured in the same run (median of 50 launches
// each, after a warm-up that compiles the kernel). Prints one table row per measurement:
//
//   bench_gpu_elementwise            (scripts/gpu-check builds and runs it)
//
// Without a GPU it says so and exits 0, so the suite can build it everywhere.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "gradus/backend/cuda/device.hpp"
#include "gradus/gradus.hpp"

namespace gd = gradus;

namespace {

template <class F>
double median_us(const gd::cuda& dev, F&& f, int reps = 50) {
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    dev.synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    f();
    dev.synchronize();
    t.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  std::nth_element(t.begin(), t.begin() + reps / 2, t.end());
  return t[size_t(reps / 2)];
}

}  // namespace

int main() {
  if (!gd::cuda::is_available()) {
    std::printf("no GPU: %s\n", gd::cuda::unavailable_reason().c_str());
    return 0;
  }
  const gd::cuda dev(0);
  const int64_t n = int64_t(1) << 24;
  gd::Rng rng(1);
  const auto a = gd::Tensor<float>::random_uniform({n}, rng, -1, 1).to(dev);
  const auto b = gd::Tensor<float>::random_uniform({n}, rng, -1, 1).to(dev);
  const auto c = gd::Tensor<float>::random_uniform({n}, rng, -1, 1).to(dev);
  const auto d = gd::Tensor<float>::random_uniform({n}, rng, -1, 1).to(dev);
  gd::Tensor<float> out = gd::Tensor<float>::empty({n}, dev);

  const double copy_us = median_us(dev, [&] { out.copy_(a); });
  const double copy_tbs = 2.0 * double(n) * 4 / copy_us * 1e-6;  // read + write
  out.assign(gd::exp(a * b + c) * d);                           // compile and load the kernel
  const double fwd_us = median_us(dev, [&] { out.assign(gd::exp(a * b + c) * d); });
  const double fwd_tbs = 5.0 * double(n) * 4 / fwd_us * 1e-6;  // four reads, one write

  // the loss value and its four gradients: one generated backward kernel that also sums the value
  gd::Var<float> va(a, true), vb(b, true), vc(c, true), vd(d, true);
  const auto step = [&] {
    gd::backward(gd::sum(gd::exp(va * vb + vc) * vd));
    for (gd::Var<float>* v : {&va, &vb, &vc, &vd}) v->zero_grad();
  };
  step();
  const double loss_us = median_us(dev, step);
  const double loss_tbs = 8.0 * double(n) * 4 / loss_us * 1e-6;  // four reads, four gradient writes

  std::printf("| %s | measurement | µs | TB/s | of copy bandwidth |\n|---|---|---:|---:|---:|\n", dev.name().c_str());
  std::printf("| | device-to-device copy, 2^24 floats | %.1f | %.2f | 100%% |\n", copy_us, copy_tbs);
  std::printf("| | exp(a*b+c)*d forward, 2^24 floats (generated kernel) | %.1f | %.2f | %.0f%% |\n", fwd_us, fwd_tbs,
              100.0 * fwd_tbs / copy_tbs);
  std::printf("| | sum(exp(a*b+c)*d): value + 4 gradients, 2^24 floats | %.1f | %.2f | %.0f%% |\n", loss_us, loss_tbs,
              100.0 * loss_tbs / copy_tbs);
  return 0;
}
