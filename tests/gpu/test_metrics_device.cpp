// Metrics of predictions in GPU memory: the accuracies count on the device (a running total read
// back once, by result()), the others copy each batch to the host. Either way the result equals
// the host metric's on the same batches.
#include <catch2/catch.hpp>

#include "gradus/backend/cuda/device.hpp"
#include "gradus/gradus.hpp"
#include "gradus/metrics.hpp"

namespace gd = gradus;

namespace metrics_device_test {

bool metrics_gpu_here() {
  if (gd::cuda::is_available()) return true;
  WARN("no GPU: " << gd::cuda::unavailable_reason());
  return false;
}

// Scores [n, c] and labels [n]: every third label is the row's argmax, the others a neighbour.
std::pair<gd::Tensor<float>, gd::Tensor<int64_t>> scored_batch(int64_t n, int64_t c, uint64_t seed) {
  gd::Rng rng(seed);
  gd::Tensor<float> s = gd::Tensor<float>::random_uniform({n, c}, rng, -1, 1);
  gd::Tensor<int64_t> l = gd::Tensor<int64_t>::empty({n});
  for (int64_t i = 0; i < n; ++i) {
    int64_t best = 0;
    for (int64_t j = 1; j < c; ++j)
      if (s(i, j) > s(i, best)) best = j;
    l(i) = i % 3 == 0 ? best : (best + 1 + i % (c - 1)) % c;
  }
  return {s, l};
}

}  // namespace metrics_device_test

using namespace metrics_device_test;

TEST_CASE("sparse_categorical_accuracy and accuracy of GPU predictions equal the host's", "[gpu][metrics]") {
  if (!metrics_gpu_here()) return;
  const gd::Device g = gd::cuda(0);
  gd::metrics::SparseCategoricalAccuracy on_gpu, on_host;
  gd::metrics::Accuracy eq_gpu, eq_host;
  for (uint64_t k = 0; k < 3; ++k) {
    auto [s, l] = scored_batch(40 + int64_t(k), 7, 90 + k);
    on_gpu.update(l.to(g), s.to(g));
    on_host.update(l, s);
    const gd::Tensor<float> guess = gd::cast<float>(gd::argmax(s, -1));
    eq_gpu.update(gd::cast<float>(l).to(g), guess.to(g));
    eq_host.update(gd::cast<float>(l), guess);
  }
  CHECK(on_gpu.result() == on_host.result());
  CHECK(on_gpu.total() == on_host.total());
  CHECK(on_gpu.count() == on_host.count());
  CHECK(on_host.result() > 0.2);  // the data hits and misses
  CHECK(on_host.result() < 0.8);
  CHECK(eq_gpu.result() == eq_host.result());
  on_gpu.reset();
  CHECK_THROWS_AS(on_gpu.result(), gd::value_error);
  auto [s, l] = scored_batch(10, 4, 7);
  on_gpu.update(l.to(g), s.to(g));
  on_host.reset();
  on_host.update(l, s);
  CHECK(on_gpu.result() == on_host.result());
}

TEST_CASE("sparse_categorical_accuracy checks GPU labels on the GPU", "[gpu][metrics]") {
  if (!metrics_gpu_here()) return;
  const gd::Device g = gd::cuda(0);
  gd::metrics::SparseCategoricalAccuracy m;
  auto [s, l] = scored_batch(6, 4, 3);
  l(3) = 9;
  m.update(l.to(g), s.to(g));  // no read-back here: the error comes with the result
  CHECK_THROWS_WITH(m.result(), Catch::Contains("sparse_categorical_accuracy: label 9 at position 3 out of range "
                                                "[0, 4) for predictions of shape [6,4]"));
  // labels of another type go through the host, which explains what is wrong with them
  gd::metrics::SparseCategoricalAccuracy f;
  CHECK_THROWS_WITH(f.update(gd::cast<float>(l).to(g), s.to(g)), Catch::Contains("labels must be Tensor<int64_t>"));
}
