// Streaming metrics: hand-worked values (each comment shows where the number comes from),
// values from TensorFlow's own metrics_test.py, AUC against an exact pairwise computation and a
// direct transcription of tf.metrics.auc, streaming == one batch, reset, weights, errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <memory>
#include <vector>

#include <gradus/gradus.hpp>
#include <gradus/metrics.hpp>

namespace gd = gradus;
namespace m = gradus::metrics;

namespace {

using TensorD = gd::Tensor<double>;
using TensorI64 = gd::Tensor<int64_t>;
using Catch::Contains;
using MetricList = std::vector<std::unique_ptr<m::Metric>>;

TensorD vec(const std::vector<double>& v) { return TensorD::from(v); }
TensorD mat(const std::vector<double>& v, const gd::Shape& s) { return TensorD::from(v, s); }

/// Rows [begin, end) of `t` along axis 0, copied.
TensorD rows(const TensorD& t, int64_t begin, int64_t end) {
  gd::Shape s = t.shape();
  const int64_t row = t.size() / s[0];
  s[0] = end - begin;
  return TensorD::from(std::vector<double>(t.data() + begin * row, t.data() + end * row), s);
}

/// Exact ROC AUC: the fraction of (positive, negative) pairs ranked correctly, ties counting 1/2.
double pairwise_auc(const TensorD& labels, const TensorD& scores) {
  double hits = 0, pairs = 0;
  for (int64_t i = 0; i < labels.size(); ++i)
    for (int64_t j = 0; j < labels.size(); ++j)
      if (labels.data()[i] != 0 && labels.data()[j] == 0) {
        const double a = scores.data()[i], b = scores.data()[j];
        hits += a > b ? 1.0 : a == b ? 0.5 : 0.0;
        pairs += 1;
      }
  return hits / pairs;
}

/// tf.metrics.auc (trapezoidal) transcribed line by line from TF1's metrics_impl.py: every
/// (threshold, prediction) pair compared directly in float32, no bucketing.
double reference_tf_auc(const TensorD& labels, const TensorD& scores, int n, bool roc) {
  std::vector<double> thr{-1e-7};
  for (int i = 0; i < n - 2; ++i) thr.push_back((i + 1) * 1.0 / (n - 1));
  thr.push_back(1.0 + 1e-7);
  const double eps = 1e-6;
  std::vector<double> x, y;
  for (double t : thr) {
    double tp = 0, fp = 0, tn = 0, fn = 0;
    for (int64_t i = 0; i < labels.size(); ++i) {
      const bool pos = float(scores.data()[i]) > float(t), lab = labels.data()[i] != 0;
      tp += lab && pos, fp += !lab && pos, tn += !lab && !pos, fn += lab && !pos;
    }
    const double rec = (tp + eps) / (tp + fn + eps);
    x.push_back(roc ? fp / (fp + tn + eps) : rec);
    y.push_back(roc ? rec : (tp + eps) / (tp + fp + eps));
  }
  double area = 0;
  for (size_t i = 0; i + 1 < x.size(); ++i) area += (x[i] - x[i + 1]) * (y[i] + y[i + 1]) / 2;
  return area;
}

double auc_of(const TensorD& labels, const TensorD& scores, m::AucOptions opts = {}) {
  m::AUC auc(std::move(opts));
  auc.update(labels, scores);
  return auc.result();
}

/// Every metric that takes (labels, predictions) with 0/1 labels [N] and predictions in [0, 1].
MetricList binary_metrics() {
  MetricList l;
  l.push_back(std::make_unique<m::Accuracy>());
  l.push_back(std::make_unique<m::BinaryAccuracy>());
  l.push_back(std::make_unique<m::TruePositives>());
  l.push_back(std::make_unique<m::FalsePositives>());
  l.push_back(std::make_unique<m::TrueNegatives>());
  l.push_back(std::make_unique<m::FalseNegatives>());
  l.push_back(std::make_unique<m::Precision>());
  l.push_back(std::make_unique<m::Recall>());
  l.push_back(std::make_unique<m::AUC>());
  l.push_back(std::make_unique<m::AUC>(m::AucOptions{.curve = m::Curve::pr}));
  l.push_back(std::make_unique<m::AUC>(m::AucOptions{.curve = m::Curve::pr, .summation = m::Summation::careful_interpolation}));
  l.push_back(std::make_unique<m::SensitivityAtSpecificity>(0.7));
  l.push_back(std::make_unique<m::SpecificityAtSensitivity>(0.7));
  l.push_back(std::make_unique<m::MeanAbsoluteError>());
  l.push_back(std::make_unique<m::MeanSquaredError>());
  l.push_back(std::make_unique<m::RootMeanSquaredError>());
  l.push_back(std::make_unique<m::MeanRelativeError>(TensorD::scalar(2.0)));
  return l;
}
/// Every metric that takes class-id labels [N] and scores [N, C].
MetricList sparse_metrics() {
  MetricList l;
  l.push_back(std::make_unique<m::SparseCategoricalAccuracy>());
  l.push_back(std::make_unique<m::TopKAccuracy>(2));
  l.push_back(std::make_unique<m::Perplexity>());
  return l;
}

/// Feeds (y, p, w) to one list in three batches and to another in one; the results must agree.
void check_streaming(const std::function<MetricList()>& make, const TensorD& y, const TensorD& p, const TensorD* w) {
  MetricList streamed = make(), whole = make();
  const int64_t n = y.shape()[0], cuts[] = {0, n / 3, n / 2 + 1, n};
  for (size_t k = 0; k < streamed.size(); ++k) {
    for (int b = 0; b < 3; ++b) {
      const TensorD yb = rows(y, cuts[b], cuts[b + 1]), pb = rows(p, cuts[b], cuts[b + 1]);
      const TensorD wb = w ? rows(*w, cuts[b], cuts[b + 1]) : TensorD();
      streamed[k]->update_tensors(yb, pb, w ? &wb : nullptr);
    }
    whole[k]->update_tensors(y, p, w);
    INFO(streamed[k]->name());
    CHECK(streamed[k]->result() == Approx(whole[k]->result()).epsilon(1e-12).margin(1e-12));
  }
}

}  // namespace

TEST_CASE("metrics: result() before any update and after reset() is an error", "[metrics]") {
  MetricList all = binary_metrics();
  for (auto& x : sparse_metrics()) all.push_back(std::move(x));
  all.push_back(std::make_unique<m::CategoricalAccuracy>());
  all.push_back(std::make_unique<m::MeanIoU>(3));
  all.push_back(std::make_unique<m::MeanCosineDistance>(1));
  all.push_back(std::make_unique<m::Mean>());
  all.push_back(std::make_unique<m::PercentageBelow>(0.5));
  for (auto& x : all) {
    INFO(x->name());
    CHECK_FALSE(x->has_result());
    CHECK_THROWS_AS(x->result(), gd::value_error);
    CHECK_THROWS_WITH(x->result(), std::string(x->name()) + ": result() before any update");
  }

  m::Accuracy acc;
  CHECK_THROWS_WITH(acc.result(), "accuracy: result() before any update");
  acc.update(vec({1, 2}), vec({1, 2}));
  CHECK(acc.has_result());
  CHECK(acc.result() == 1.0);
  acc.reset();
  CHECK_FALSE(acc.has_result());
  CHECK_THROWS_AS(acc.result(), gd::value_error);
  acc.update(vec({1, 2}), vec({0, 2}));  // state really was cleared: 1 of 2, not 3 of 4
  CHECK(acc.result() == 0.5);

  acc.set_name("val_accuracy");
  acc.reset();
  CHECK_THROWS_WITH(acc.result(), "val_accuracy: result() before any update");
}

TEST_CASE("metrics: streaming over batches equals one big batch", "[metrics]") {
  gd::Rng rng(7);
  const int64_t n = 60, c = 4;
  std::vector<double> y(n), p(n), w(n), ids(n), scores(n * c);
  for (int64_t i = 0; i < n; ++i) {
    y[size_t(i)] = double(rng.below(2));
    p[size_t(i)] = rng.uniform();
    w[size_t(i)] = i % 7 == 3 ? 0.0 : rng.uniform(0.0, 2.0);
    ids[size_t(i)] = double(rng.below(c));
  }
  for (auto& s : scores) s = rng.normal();
  check_streaming(binary_metrics, vec(y), vec(p), nullptr);
  const TensorD wt = vec(w);
  check_streaming(binary_metrics, vec(y), vec(p), &wt);
  check_streaming(sparse_metrics, vec(ids), mat(scores, {n, c}), nullptr);
  check_streaming(sparse_metrics, vec(ids), mat(scores, {n, c}), &wt);
}

TEST_CASE("metrics: accuracy, weights and shapes", "[metrics]") {
  m::Accuracy acc;
  acc.update(vec({1, 2, 3, 4}), vec({1, 2, 0, 4}));
  CHECK(acc.result() == 0.75);  // 3 of 4 equal

  acc.reset();
  acc.update(vec({1, 2, 3, 4}), vec({1, 2, 0, 4}), vec({1, 1, 0, 1}));
  CHECK(acc.result() == 1.0);  // the one miss has weight 0: 3 / 3

  acc.reset();
  acc.update(vec({1, 2, 3, 4}), vec({1, 2, 0, 4}), vec({0.5, 1, 2, 1}));
  CHECK(acc.result() == Approx(2.5 / 4.5));  // hits weigh 0.5 + 1 + 1, all weigh 4.5

  acc.reset();
  acc.update(vec({1, NAN}), vec({1, 5}), vec({1, 0}));
  CHECK(acc.result() == 1.0);  // a weight-0 element is skipped, NaN and all

  acc.reset();
  acc.update(vec({1, 2}), vec({1, 2}), vec({0, 0}));
  CHECK(acc.result() == 0.0);  // all weights 0: total / count is 0 / 0, reported as 0 (TF)

  // int64 labels against float predictions; labels [N, 1] squeeze to match predictions [N].
  acc.reset();
  acc.update(TensorI64::from({3, 1, 2}, {3, 1}), gd::Tensor<float>::from({3.f, 1.f, 0.f}));
  CHECK(acc.result() == Approx(2.0 / 3));
  acc.update(TensorI64::from({3, 1, 2}), TensorI64::from({3, 1, 2}));  // 2/3 then 3/3: 5 of 6 overall
  CHECK(acc.result() == Approx(5.0 / 6));

  CHECK_THROWS_AS(acc.update(vec({1, 2, 3}), vec({1, 2})), gd::shape_error);
  CHECK_THROWS_WITH(acc.update(vec({1, 2, 3}), vec({1, 2})), Contains("accuracy") && Contains("[3]") && Contains("[2]"));
  CHECK_THROWS_WITH(acc.update(vec({1, 2}), vec({1, 2}), vec({1, 1, 1})), Contains("accuracy: weights shape [3]"));
  CHECK_THROWS_AS(acc.update(TensorD(), vec({1})), gd::value_error);
  CHECK(acc.result() == Approx(5.0 / 6));  // failed updates leave the state alone
}

TEST_CASE("metrics: binary, categorical, sparse categorical and top-k accuracy", "[metrics]") {
  m::BinaryAccuracy bin;
  bin.update(vec({1, 0, 1, 0}), vec({0.7, 0.2, 0.4, 0.6}));
  CHECK(bin.result() == 0.5);  // p > 0.5 -> {1, 0, 0, 1}: the first two match
  m::BinaryAccuracy bin3(0.3);
  bin3.update(vec({1, 0, 1, 0}), vec({0.7, 0.2, 0.4, 0.6}));
  CHECK(bin3.result() == 0.75);  // p > 0.3 -> {1, 0, 1, 1}: three match

  const TensorD scores = mat({0.1, 0.8, 0.1, 0.2, 0.7, 0.1, 0.3, 0.3, 0.4}, {3, 3});  // argmax {1, 1, 2}
  m::CategoricalAccuracy cat;
  cat.update(mat({0, 1, 0, 1, 0, 0, 0, 0, 1}, {3, 3}), scores);  // label argmax {1, 0, 2}
  CHECK(cat.result() == Approx(2.0 / 3));
  cat.reset();
  cat.update(mat({0, 1, 0, 1, 0, 0, 0, 0, 1}, {3, 3}), scores, vec({1, 2, 1}));
  CHECK(cat.result() == 0.5);  // (1 + 0 + 1) / (1 + 2 + 1)
  CHECK_THROWS_WITH(cat.update(mat({0, 1, 0, 1, 0, 0}, {2, 3}), scores), Contains("categorical_accuracy"));

  m::SparseCategoricalAccuracy sparse;
  sparse.update(TensorI64::from({1, 0, 2}), scores);
  CHECK(sparse.result() == Approx(2.0 / 3));
  sparse.update(TensorI64::from({1, 1, 2}, {3, 1}), scores);  // [N, 1] labels squeeze; 3/3 -> 5 of 6
  CHECK(sparse.result() == Approx(5.0 / 6));
  CHECK_THROWS_AS(sparse.update(TensorI64::from({1, 3, 2}), scores), gd::value_error);
  CHECK_THROWS_WITH(sparse.update(vec({1, 0.5, 2}), scores), Contains("sparse_categorical_accuracy: label 0.5"));
  CHECK_THROWS_AS(sparse.update(TensorI64::from({1, 0}), scores), gd::shape_error);
  CHECK(sparse.result() == Approx(5.0 / 6));
  sparse.update(TensorI64::from({1, 7, 2}), scores, vec({1, 0, 1}));  // a masked label is not checked
  CHECK(sparse.result() == Approx(7.0 / 8));

  // Labels {1, 0, 0}: the labelled score is beaten by 0, 1 and 1 others.
  m::TopKAccuracy top1(1), top2(2);
  top1.update(TensorI64::from({1, 0, 0}), scores);
  top2.update(TensorI64::from({1, 0, 0}), scores);
  CHECK(top1.result() == Approx(1.0 / 3));
  CHECK(top2.result() == 1.0);

  // in_top_k ties: every class tied with the target's score counts as inside the top k.
  const TensorD tied = mat({0.3, 0.3, 0.3, 0.1}, {1, 4});
  auto in_top = [&](int64_t label, int64_t k) {
    m::TopKAccuracy t(k);
    t.update(TensorI64::from({label}), tied);
    return t.result();
  };
  CHECK(in_top(2, 1) == 1.0);
  CHECK(in_top(3, 3) == 0.0);
  CHECK(in_top(3, 4) == 1.0);
  m::TopKAccuracy nan_row(3);
  nan_row.update(TensorI64::from({1}), mat({NAN, 0.5, 0.1}, {1, 3}));
  CHECK(nan_row.result() == 0.0);  // a non-finite score makes the row a miss, as in_top_k
  CHECK_THROWS_AS(m::TopKAccuracy(0), gd::value_error);
}

TEST_CASE("metrics: confusion counts, precision and recall at thresholds", "[metrics]") {
  const TensorD y = vec({1, 1, 0, 0, 1}), p = vec({0.9, 0.4, 0.6, 0.1, 0.5});
  // At 0.5 (p > 0.5 is positive; 0.5 itself is not): tp = {0}, fp = {2}, tn = {3}, fn = {1, 4}.
  m::TruePositives tp;
  m::FalsePositives fp;
  m::TrueNegatives tn;
  m::FalseNegatives fn;
  m::Precision prec;
  m::Recall rec;
  for (m::Metric* x : std::vector<m::Metric*>{&tp, &fp, &tn, &fn, &prec, &rec}) x->update(y, p);
  CHECK(tp.result() == 1);
  CHECK(fp.result() == 1);
  CHECK(tn.result() == 1);
  CHECK(fn.result() == 2);
  CHECK(prec.result() == 0.5);
  CHECK(rec.result() == Approx(1.0 / 3));

  // Weight 2 on the true positive: precision 2 / (2 + 1), recall 2 / (2 + 2).
  m::Precision wprec;
  m::Recall wrec;
  wprec.update(y, p, vec({2, 1, 1, 1, 1}));
  wrec.update(y, p, vec({2, 1, 1, 1, 1}));
  CHECK(wprec.result() == Approx(2.0 / 3));
  CHECK(wrec.result() == 0.5);

  // Several thresholds, kept in the order given. At 0.05 all five are positive (tp 3, fp 2);
  // at 0.95 none is (precision 0 by convention, recall 0).
  m::Precision multi({.thresholds = {0.5, 0.05, 0.95}});
  m::FalseNegatives multi_fn({.thresholds = {0.5, 0.05, 0.95}});
  multi.update(y, p);
  multi_fn.update(y, p);
  const std::vector<double> pr = multi.results();
  REQUIRE(pr.size() == 3);
  CHECK(pr[0] == 0.5);
  CHECK(pr[1] == Approx(0.6));
  CHECK(pr[2] == 0.0);
  CHECK(multi_fn.results() == std::vector<double>{2, 0, 3});
  CHECK_THROWS_WITH(multi.result(), Contains("precision: result() needs exactly one threshold"));
  CHECK(multi.confusion().tp(1) == 3);

  // TF metrics_test PrecisionRecallThresholdsTest.testWeights1d: only row 1 counts (preds {1, 0},
  // labels {1, 0}); at 0.5 precision = recall = 1, at 1.1 both 0.
  m::Precision tfp({.thresholds = {0.5, 1.1}});
  m::Recall tfr({.thresholds = {0.5, 1.1}});
  tfp.update(mat({0, 1, 1, 0}, {2, 2}), mat({1, 0, 1, 0}, {2, 2}), mat({0, 1}, {2, 1}));
  tfr.update(mat({0, 1, 1, 0}, {2, 2}), mat({1, 0, 1, 0}, {2, 2}), mat({0, 1}, {2, 1}));
  CHECK(tfp.results() == std::vector<double>{1, 0});
  CHECK(tfr.results() == std::vector<double>{1, 0});

  // As in TF, the comparison is in float32: 0.5 + 1e-10 rounds to 0.5f, which is not > 0.5f.
  m::TruePositives edge;
  edge.update(vec({1}), vec({0.5 + 1e-10}));
  CHECK(edge.result() == 0);
}

TEST_CASE("metrics: AUC against exact pairwise AUC and TF's own test values", "[metrics][auc]") {
  const TensorD y = vec({0, 0, 1, 1}), p = vec({0.1, 0.4, 0.35, 0.8});
  // Pairs (positive, negative): (0.35, 0.1) yes, (0.35, 0.4) no, (0.8, 0.1) yes, (0.8, 0.4) yes.
  CHECK(pairwise_auc(y, p) == 0.75);
  const double roc = auc_of(y, p);
  CHECK(roc == Approx(0.75).margin(1e-2));
  CHECK(roc == Approx(0.75).margin(1e-5));  // the thresholds separate all four scores here
  CHECK(roc == Approx(reference_tf_auc(y, p, 200, true)).epsilon(1e-12));
  CHECK(auc_of(y, p, {.curve = m::Curve::pr}) == Approx(reference_tf_auc(y, p, 200, false)).epsilon(1e-12));
  const double lo = auc_of(y, p, {.summation = m::Summation::minoring});
  const double hi = auc_of(y, p, {.summation = m::Summation::majoring});
  CHECK(lo <= roc);
  CHECK(roc <= hi);

  // TF metrics_test.py AUCTest, values and tolerances as there.
  const m::AucOptions pr_careful{.curve = m::Curve::pr, .summation = m::Summation::careful_interpolation};
  CHECK(auc_of(y, p, {.curve = m::Curve::pr}) == Approx(0.79166).margin(1e-3));  // testIncorrectAUCPRSpecialCase
  CHECK(auc_of(y, p, pr_careful) == Approx(1 - std::log(1.5) / 2).margin(1e-3));  // testCorrectAUCPRSpecialCase
  const TensorD y2 = vec({0, 0, 1, 0, 1, 0, 1}), p2 = vec({0.1, 0.4, 0.35, 0.8, 0.1, 0.135, 0.81});
  CHECK(auc_of(y2, p2, {.curve = m::Curve::pr}) == Approx(0.610317).margin(1e-3));
  CHECK(auc_of(y2, p2, pr_careful) ==
        Approx((2.5 - 2 * std::log(4. / 3) - 0.25 * std::log(7. / 5)) / 3).margin(1e-3));
  const TensorD y3 = vec({0, 0, 0, 0, 1, 1, 1}), p3 = vec({0.0, 0.1, 0.2, 0.33, 0.3, 0.4, 0.5});
  CHECK(auc_of(y3, p3, {.curve = m::Curve::pr}) == Approx(0.90277).margin(1e-3));
  CHECK(auc_of(y3, p3, pr_careful) == Approx(1 - std::log(4. / 3) / 3).margin(1e-3));

  m::AUC weighted;  // testWeighted2d
  weighted.update(vec({0, 1, 1, 0}), vec({1, 0, 1, 0}), vec({1, 2, 3, 4}));
  CHECK(weighted.result() == Approx(0.7).margin(1e-5));
  m::AUC scalar_w;  // testWeighted1d: one weight for all
  scalar_w.update(mat({0, 1, 1, 0}, {1, 4}), mat({1, 0, 1, 0}, {1, 4}), mat({2}, {1, 1}));
  CHECK(scalar_w.result() == Approx(0.5).margin(1e-5));

  // testManualThresholds: 200 thresholds do not split 0.3001 from 0.3003; the manual ones do.
  const TensorD y4 = vec({0, 1, 0, 1}), p4 = vec({0.12, 0.3001, 0.3003, 0.72});
  CHECK(auc_of(y4, p4) == Approx(0.875).margin(1e-3));
  CHECK(auc_of(y4, p4, {.thresholds = {0.0, 0.2, 0.3002, 0.6, 1.0}}) == Approx(0.75).margin(1e-3));

  CHECK(auc_of(vec({0, 0, 0, 0}), vec({0, 0, 0, 0})) == Approx(1).margin(1e-6));  // no positives
  CHECK(auc_of(vec({1, 1, 0, 1, 0}), vec({1, 1, 0, 1, 0})) == Approx(1).margin(1e-6));  // all correct
  CHECK(auc_of(vec({0, 0, 1, 0, 1}), vec({1, 1, 0, 1, 0})) == Approx(0).margin(1e-6));  // all wrong

  m::AUC bad;
  CHECK_THROWS_WITH(bad.update(vec({0, 1}), vec({0.5, 1.5})), Contains("auc: predictions must be in [0, 1]"));
  CHECK_THROWS_AS(m::AUC({.num_thresholds = 1}), gd::value_error);
}

TEST_CASE("metrics: AUC on random well-separated scores is within the Riemann tolerance", "[metrics][auc]") {
  gd::Rng rng(42);
  const int64_t n = 400;
  std::vector<double> y(n), p(n);
  for (int64_t i = 0; i < n; ++i) {
    y[size_t(i)] = double(rng.below(2));
    p[size_t(i)] = y[size_t(i)] != 0 ? rng.uniform(0.3, 1.0) : rng.uniform(0.0, 0.7);
  }
  const TensorD yt = vec(y), pt = vec(p);
  const double exact = pairwise_auc(yt, pt);
  m::AUC streamed;
  for (int64_t b = 0; b < n; b += 100) streamed.update(rows(yt, b, b + 100), rows(pt, b, b + 100));
  CHECK(streamed.result() == Approx(exact).margin(1e-2));
  CHECK(streamed.result() == Approx(reference_tf_auc(yt, pt, 200, true)).epsilon(1e-12));
  CHECK(auc_of(yt, pt, {.num_thresholds = 2000}) == Approx(exact).margin(2e-3));
}

TEST_CASE("metrics: sensitivity at specificity and specificity at sensitivity (TF's values)", "[metrics]") {
  const TensorD y = vec({0, 0, 0, 0, 0, 1, 1, 1, 1, 1});
  auto sens = [&](const TensorD& p, double target, const TensorD* w = nullptr) {
    m::SensitivityAtSpecificity s(target);
    s.update_tensors(y, p, w);
    return s.result();
  };
  auto spec = [&](const TensorD& p, double target, const TensorD* w = nullptr) {
    m::SpecificityAtSensitivity s(target);
    s.update_tensors(y, p, w);
    return s.result();
  };
  const TensorD w = vec({1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
  // TF metrics_test.py SensitivityAtSpecificityTest: at the first threshold >= 0.3 four of five
  // negatives are below (specificity 0.8) and four of five positives above (sensitivity 0.8).
  CHECK(sens(vec({0.0, 0.1, 0.2, 0.3, 0.4, 0.1, 0.45, 0.5, 0.8, 0.9}), 0.8) == Approx(0.8).margin(1e-6));
  const TensorD low = vec({0.0, 0.1, 0.2, 0.3, 0.4, 0.01, 0.02, 0.25, 0.26, 0.26});
  CHECK(sens(low, 0.4) == Approx(0.6).margin(1e-6));
  CHECK(sens(low, 0.4, &w) == Approx(0.675).margin(1e-6));
  // SpecificityAtSensitivityTest.
  CHECK(spec(vec({0.1, 0.2, 0.4, 0.3, 0.0, 0.1, 0.45, 0.5, 0.8, 0.9}), 0.8) == Approx(1.0).margin(1e-6));
  const TensorD low2 = vec({0.1, 0.2, 0.4, 0.3, 0.0, 0.1, 0.2, 0.2, 0.26, 0.26});
  CHECK(spec(low2, 0.4) == Approx(0.6).margin(1e-6));
  const TensorD w3 = TensorD::scalar(3);
  CHECK(spec(low2, 0.4, &w3) == Approx(0.6).margin(1e-6));
  CHECK(spec(low2, 0.4, &w) == Approx(8.0 / 15).margin(1e-6));

  CHECK_THROWS_AS(m::SensitivityAtSpecificity(1.5), gd::value_error);
  CHECK_THROWS_AS(m::SpecificityAtSensitivity(-0.1), gd::value_error);
}

TEST_CASE("metrics: mean IoU on a hand-worked confusion matrix", "[metrics]") {
  // Rows are labels, columns predictions:      IoU_c = diag / (row + col - diag)
  //   label 0: {1, 1, 0}   row 2, col 2, diag 1 -> 1/3
  //   label 1: {0, 2, 0}   row 2, col 3, diag 2 -> 2/3
  //   label 2: {1, 0, 2}   row 3, col 2, diag 2 -> 2/3        mean 5/9
  const TensorD y = vec({0, 0, 1, 1, 2, 2, 2}), p = vec({0, 1, 1, 1, 2, 0, 2});
  m::MeanIoU iou(3);
  iou.update(rows(y, 0, 3), TensorI64::from({0, 1, 1}));
  iou.update(rows(y, 3, 7), rows(p, 3, 7));
  CHECK(iou.result() == Approx(5.0 / 9));
  CHECK(iou.confusion_matrix()(2, 0) == 1);
  CHECK(iou.confusion_matrix()(1, 1) == 2);

  m::MeanIoU iou4(4);  // class 3 never appears: its denominator is 0 and it is left out
  iou4.update(y, p);
  CHECK(iou4.result() == Approx(5.0 / 9));

  // Weight 0 on the last (label 2, prediction 2): label 2 row {1, 0, 1}; IoU_2 = 1 / (2 + 1 - 1).
  m::MeanIoU wiou(3);
  wiou.update(y, p, vec({1, 1, 1, 1, 1, 1, 0}));
  CHECK(wiou.result() == Approx((1.0 / 3 + 2.0 / 3 + 0.5) / 3));

  CHECK_THROWS_WITH(iou.update(vec({0, 3}), vec({0, 1})), Contains("mean_iou: label 3"));
  CHECK_THROWS_WITH(iou.update(vec({0, 1}), vec({0, -1})), Contains("mean_iou: prediction -1"));
  CHECK(iou.result() == Approx(5.0 / 9));
}

TEST_CASE("metrics: mean, weight broadcasting and percentage below", "[metrics]") {
  const TensorD v = mat({1, 2, 3, 4, 5, 6}, {2, 3});
  auto mean_of = [&](const TensorD* w) {
    m::Mean mean;
    mean.update_values(v, w);
    return mean.result();
  };
  CHECK(mean_of(nullptr) == 3.5);
  const TensorD scalar = TensorD::scalar(2), per_row = vec({1, 0}), per_col = mat({1, 1, 0}, {1, 3});
  CHECK(mean_of(&scalar) == 3.5);
  CHECK(mean_of(&per_row) == 2.0);  // TF: weights of rank one less gain a trailing 1 -> [2, 1]
  CHECK(mean_of(&per_col) == 3.0);  // (1 + 2 + 4 + 5) / 4
  const TensorD bad = vec({1, 1, 1});
  CHECK_THROWS_WITH(mean_of(&bad), Contains("mean: weights shape [3] cannot be broadcast to [2,3]"));

  m::Mean mean;
  mean.update(vec({1, NAN, 3}), vec({1, 0, 1}));
  CHECK(mean.result() == 2.0);  // weight 0 masks the NaN
  mean.update(TensorI64::from({10}));
  CHECK(mean.result() == Approx(14.0 / 3));  // (1 + 3 + 10) / 3
  m::Metric& as_metric = mean;
  CHECK_THROWS_WITH(as_metric.update(vec({1}), vec({1})), Contains("mean: takes update(values[, weights])"));

  m::PercentageBelow below(3);
  below.update(vec({1, 2, 3, 4}));
  CHECK(below.result() == 0.5);  // 1 and 2 are below 3; 3 is not
  below.update(vec({0, 5}), vec({3, 1}));
  CHECK(below.result() == Approx(5.0 / 8));  // (2 + 3) / (4 + 4)
}

TEST_CASE("metrics: MAE, MSE and RMSE accumulate across batches", "[metrics]") {
  m::MeanAbsoluteError mae;
  m::MeanSquaredError mse;
  m::RootMeanSquaredError rmse;
  for (m::Metric* x : std::vector<m::Metric*>{&mae, &mse, &rmse}) {
    x->update(vec({0, 0}), vec({1, -1}));  // errors {1, -1}
    x->update(vec({2}), vec({5}));         // error 3
  }
  CHECK(mae.result() == Approx(5.0 / 3));
  CHECK(mse.result() == Approx(11.0 / 3));  // (1 + 1 + 9) / 3
  CHECK(rmse.result() == Approx(std::sqrt(11.0 / 3)));
  CHECK(rmse.result() != Approx((1.0 + 3.0) / 2));  // not the mean of per-batch RMSEs {1, 3}

  m::RootMeanSquaredError wrmse;
  wrmse.update(vec({0, 0, 0}), vec({1, 2, 3}), vec({1, 0, 3}));
  CHECK(wrmse.result() == Approx(std::sqrt((1 + 27.0) / 4)));  // (1·1 + 3·9) / (1 + 3)
  CHECK_THROWS_WITH(wrmse.update(vec({0}), vec({1, 2})), Contains("root_mean_squared_error"));
}

TEST_CASE("metrics: mean relative error", "[metrics]") {
  // |l - p| / normalizer = {1/1, (normalizer 0 -> 0), 2/2}: mean 2/3.
  m::MeanRelativeError fixed(vec({1, 0, 2}));
  fixed.update(vec({1, 2, 4}), vec({2, 2, 2}));
  CHECK(fixed.result() == Approx(2.0 / 3));

  m::MeanRelativeError per_batch;
  CHECK_THROWS_WITH(per_batch.update(vec({1}), vec({1})), Contains("mean_relative_error: no normalizer"));
  per_batch.update_normalized(vec({1, 2, 4}), vec({2, 2, 2}), vec({1, 0, 2}));
  per_batch.update_normalized(vec({10}), vec({5}), vec({10}), vec({2}));  // 0.5 with weight 2
  CHECK(per_batch.result() == Approx((2.0 + 1.0) / 5));

  m::MeanRelativeError per_feature(vec({1, 10}));  // [C] broadcast over [N, C]
  per_feature.update(mat({0, 0, 0, 0}, {2, 2}), mat({1, 10, 3, 30}, {2, 2}));
  CHECK(per_feature.result() == Approx((1 + 1 + 3 + 3) / 4.0));
}

TEST_CASE("metrics: mean cosine distance", "[metrics]") {
  // Unit vectors: Σ l·p per row = {1, 0}; 1 - mean = 0.5.
  const TensorD l = mat({1, 0, 0, 1}, {2, 2}), p = mat({1, 0, 1, 0}, {2, 2});
  m::MeanCosineDistance cos(1);
  cos.update(l, p);
  CHECK(cos.result() == 0.5);
  m::MeanCosineDistance weighted(-1);
  weighted.update(l, p, vec({1, 0}));  // weights [N] for [N, D]: only row 0, distance 0
  CHECK(weighted.result() == 0.0);
  m::MeanCosineDistance along0(0);  // the same vectors stored as columns
  along0.update(mat({1, 0, 0, 1}, {2, 2}), mat({1, 1, 0, 0}, {2, 2}));
  CHECK(along0.result() == 0.5);

  // TF does not normalise; with .normalize the scale of the vectors no longer matters.
  const TensorD scaled = mat({2, 0, 3, 0}, {2, 2});
  m::MeanCosineDistance raw(1), unit(1, {.normalize = true});
  raw.update(l, scaled);
  unit.update(l, scaled);
  CHECK(raw.result() == 0.0);  // 1 - (2 + 0) / 2
  CHECK(unit.result() == Approx(0.5));
  m::MeanCosineDistance angle(1, {.normalize = true});
  angle.update(mat({1, 0}, {1, 2}), mat({1, 1}, {1, 2}));
  CHECK(angle.result() == Approx(1 - std::sqrt(0.5)));  // 45 degrees
  CHECK_THROWS_AS(m::MeanCosineDistance(2).update(l, p), gd::value_error);
}

TEST_CASE("metrics: perplexity from logits and from log-likelihoods", "[metrics]") {
  m::Perplexity uniform;
  uniform.update(TensorI64::from({0, 3, 1}), TensorD::zeros({3, 5}));
  CHECK(uniform.result() == Approx(5.0));  // equal logits: cross-entropy log 5 per example

  m::Perplexity two;
  two.update(TensorI64::from({1}), mat({0, std::log(3.0)}, {1, 2}));  // p(label) = 3 / 4
  CHECK(two.result() == Approx(4.0 / 3));
  two.update(TensorI64::from({0}), mat({1000, 1000}, {1, 2}));  // stable for large logits: p = 1/2
  CHECK(two.result() == Approx(std::exp((std::log(4.0 / 3) + std::log(2.0)) / 2)));

  m::Perplexity ll;
  ll.update_log_likelihoods(vec({std::log(0.5), std::log(0.25)}));  // mean cross-entropy 1.5 log 2
  CHECK(ll.result() == Approx(std::pow(2.0, 1.5)));
  ll.update_log_likelihoods(vec({0.0, 0.0}), vec({0, 0}));  // masked: unchanged
  CHECK(ll.result() == Approx(std::pow(2.0, 1.5)));
  CHECK_THROWS_WITH(two.update(TensorI64::from({2}), TensorD::zeros({1, 2})), Contains("perplexity: label 2"));
}

TEST_CASE("metrics: inputs may be float tensors, Vars or expressions", "[metrics]") {
  const TensorD x = vec({-2, -0.5, 0.3, 1.5});
  m::AUC from_expr, from_tensor;
  from_expr.update(TensorI64::from({0, 0, 1, 1}), gd::sigmoid(x));
  from_tensor.update(vec({0, 0, 1, 1}), gd::eval(gd::sigmoid(x)));
  CHECK(from_expr.result() == from_tensor.result());

  gd::Var<double> v(vec({0.2, 0.9}));
  m::MeanSquaredError mse;
  mse.update(vec({0, 1}), v);
  CHECK(mse.result() == Approx((0.04 + 0.01) / 2));

  m::BinaryAccuracy bin;
  bin.update(gd::Tensor<float>::from({1.f, 0.f}), gd::Tensor<float>::from({0.9f, 0.1f}), gd::Tensor<float>::from({1.f, 1.f}));
  CHECK(bin.result() == 1.0);
}

TEST_CASE("metrics: class-id errors name the position, the element type given and the fix", "[metrics][errors]") {
  const TensorD logits = mat({0.1, 0.9, 0.8, 0.2, 0.3, 0.3}, {3, 2});
  // float labels holding whole numbers are class ids; a fractional one says what labels must be
  m::SparseCategoricalAccuracy acc;
  acc.update(gd::Tensor<float>::from({1.f, 0.f, 1.f}), logits);
  CHECK(acc.result() == Approx(2.0 / 3));  // argmax rows: 1, 0, 0 (first of a tie)
  CHECK_THROWS_AS(acc.update(gd::Tensor<float>::from({1.f, 0.5f, 1.f}), logits), gd::value_error);
  CHECK_THROWS_WITH(acc.update(gd::Tensor<float>::from({1.f, 0.5f, 1.f}), logits),
                    "sparse_categorical_accuracy: label 0.5 at position 1 is not a class index in [0, 2); labels "
                    "must be Tensor<int64_t>, got Tensor<float>: use gd::cast<int64_t>(labels)");
  // int64 labels out of range: no conversion hint
  CHECK_THROWS_WITH(acc.update(TensorI64::from({1, 7, 0}), logits),
                    "sparse_categorical_accuracy: label 7 at position 1 is not a class index in [0, 2)");
  // the non-template update knows no element type
  CHECK_THROWS_WITH(acc.update_tensors(vec({1, 2.5, 0}), logits, nullptr),
                    "sparse_categorical_accuracy: label 2.5 at position 1 is not a class index in [0, 2)");
  m::TopKAccuracy top(1);
  CHECK_THROWS_WITH(top.update(vec({-1, 0, 0}), logits),
                    Contains("label -1 at position 0") && Contains("got Tensor<double>: use gd::cast<int64_t>(labels)"));
  m::MeanIoU iou(2);
  CHECK_THROWS_WITH(iou.update(TensorI64::from({0, 1}), gd::Tensor<float>::from({0.f, 0.25f})),
                    Contains("prediction 0.25 at position 1") &&
                        Contains("predictions must be Tensor<int64_t>, got Tensor<float>: use gd::cast<int64_t>(predictions)"));
  // one-hot labels given to a sparse metric
  CHECK_THROWS_AS(acc.update(mat({0, 1, 1, 0, 0, 1}, {3, 2}), logits), gd::shape_error);
  CHECK_THROWS_WITH(acc.update(mat({0, 1, 1, 0, 0, 1}, {3, 2}), logits),
                    Contains("one-hot labels? this metric takes class ids: gd::argmax(labels, -1)"));
  CHECK(acc.result() == Approx(2.0 / 3));  // failed updates added nothing
}
