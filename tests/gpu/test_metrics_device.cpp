// Metrics of predictions in GPU memory: the accuracies, mean IoU, AUC and the threshold metrics
// count on the device (a running total, a confusion matrix or bucket histograms, read back once by
// result()), the others copy each batch to the host. Either way the result equals the host
// metric's on the same batches.
#include <catch2/catch.hpp>

#include "gradus/backend/cuda/device.hpp"
#include "gradus/gradus.hpp"
#include "gradus/metrics.hpp"

#include "../support/gpu.hpp"

namespace gd = gradus;

namespace metrics_device_test {

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
  if (!gradus_test::gpu_available()) return;
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
  if (!gradus_test::gpu_available()) return;
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

TEST_CASE("mean_iou of int64 GPU class ids counts on the GPU and equals the host's", "[gpu][metrics]") {
  if (!gradus_test::gpu_available()) return;
  const gd::Device g = gd::cuda(0);
  gd::metrics::MeanIoU on_gpu(5), on_host(5);
  for (uint64_t k = 0; k < 3; ++k) {
    gd::Tensor<int64_t> l = gd::Tensor<int64_t>::empty({4, 9}), p = gd::Tensor<int64_t>::empty({4, 9});
    for (int64_t i = 0; i < l.size(); ++i) {
      l.data()[i] = (i * 7 + int64_t(k)) % 5;
      p.data()[i] = i % 4 == 0 ? (l.data()[i] + 1) % 5 : l.data()[i];  // a quarter wrong
    }
    on_gpu.update(l.to(g), p.to(g));
    on_host.update(l, p);
  }
  // the confusion matrix by hand from the same rule
  gd::Tensor<double> cm = gd::Tensor<double>::zeros({5, 5});
  for (uint64_t k = 0; k < 3; ++k)
    for (int64_t i = 0; i < 36; ++i) {
      const int64_t a = (i * 7 + int64_t(k)) % 5, b = i % 4 == 0 ? (a + 1) % 5 : a;
      cm(a, b) += 1;
    }
  const gd::Tensor<double> got = on_gpu.confusion_matrix();
  for (int64_t i = 0; i < 25; ++i) CHECK(got.data()[i] == cm.data()[i]);
  CHECK(on_gpu.result() == on_host.result());
  CHECK(on_host.result() > 0.4);
  CHECK(on_host.result() < 0.9);
  // a class id out of range: checked on the GPU, reported by result(); its pair counts nowhere
  gd::metrics::MeanIoU bad(5);
  gd::Tensor<int64_t> l = gd::Tensor<int64_t>::from({0, 1, 2, 3}), p = gd::Tensor<int64_t>::from({0, 7, 2, 3});
  bad.update(l.to(g), p.to(g));
  CHECK_THROWS_WITH(bad.result(), Catch::Contains("mean_iou: prediction 7 at position 1 out of range [0, 5) for "
                                                  "predictions of shape [4]"));
  CHECK(bad.confusion_matrix()(1, 1) == 0);
  // reported once; the other pairs count: classes 0, 2 and 3 have IoU 1, classes 1 and 4 have
  // nothing (not averaged)
  CHECK(bad.result() == Approx(1.0));
}

TEST_CASE("AUC and the threshold metrics of GPU predictions count on the GPU and equal the host's", "[gpu][metrics]") {
  if (!gradus_test::gpu_available()) return;
  const gd::Device g = gd::cuda(0);
  gd::metrics::AUC roc_gpu, roc_host;
  gd::metrics::AUC pr_gpu({.curve = gd::metrics::Curve::pr, .summation = gd::metrics::Summation::careful_interpolation});
  gd::metrics::AUC pr_host({.curve = gd::metrics::Curve::pr, .summation = gd::metrics::Summation::careful_interpolation});
  gd::metrics::Precision prec_gpu({.thresholds = {0.3, 0.5, 0.7}}), prec_host({.thresholds = {0.3, 0.5, 0.7}});
  gd::Rng rng(12);
  for (int k = 0; k < 3; ++k) {
    gd::Tensor<float> p = gd::Tensor<float>::random_uniform({50}, rng, 0, 1);
    gd::Tensor<float> l = gd::Tensor<float>::empty({50});
    for (int64_t i = 0; i < 50; ++i) l(i) = p(i) + 0.3f * float(std::sin(double(i * 13 + k))) > 0.5f ? 1.f : 0.f;
    if (k == 0) {
      p(3) = 0.5f;  // exactly on thresholds: the float comparison decides, as on the host
      p(4) = 0.f;
      p(5) = 1.f;
      p(6) = float(100.0 / 199.0);
    }
    for (auto* m : std::initializer_list<gd::metrics::Metric*>{&roc_gpu, &pr_gpu, &prec_gpu}) m->update(l.to(g), p.to(g));
    for (auto* m : std::initializer_list<gd::metrics::Metric*>{&roc_host, &pr_host, &prec_host}) m->update(l, p);
  }
  CHECK(roc_gpu.result() == Approx(roc_host.result()).epsilon(1e-12));
  CHECK(pr_gpu.result() == Approx(pr_host.result()).epsilon(1e-12));
  const auto pg = prec_gpu.results(), ph = prec_host.results();
  REQUIRE(pg.size() == 3);
  for (size_t i = 0; i < 3; ++i) CHECK(pg[i] == ph[i]);
  for (size_t i = 0; i < roc_host.confusion().size(); ++i) {
    CHECK(roc_gpu.confusion().tp(i) == roc_host.confusion().tp(i));
    CHECK(roc_gpu.confusion().fp(i) == roc_host.confusion().fp(i));
  }
  CHECK(roc_host.result() > 0.7);  // the data separates, not perfectly
  CHECK(roc_host.result() < 0.99);
  // predictions outside [0, 1] are counted on the GPU and reported by result()
  gd::metrics::AUC out;
  out.update(gd::Tensor<float>::from({1, 0, 1}).to(g), gd::Tensor<float>::from({0.2f, 1.5f, 0.7f}).to(g));
  CHECK_THROWS_WITH(out.result(), Catch::Contains("auc: predictions must be in [0, 1]; 1 of those counted on cuda:0"));
}
