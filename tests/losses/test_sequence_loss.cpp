// sequence_loss and perplexity: every averaging option of tf.contrib.seq2seq.sequence_loss
// against the token cross-entropies and TF's divisions computed as plain loops in double,
// div_no_nan for all-zero weights, very large logits, gradients, and errors.
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include <gradus/gradus.hpp>
#include <gradus/losses.hpp>

namespace gd = gradus;
namespace ls = gradus::losses;
using Td = gd::Tensor<double>;
using Ti = gd::Tensor<int64_t>;
using V = gd::Var<double>;

namespace {

// -log softmax(logits[n, t])[target[n, t]], as logsumexp - logit, in double.
std::vector<std::vector<double>> ref_ce(const Ti& targets, const Td& logits) {
  const int64_t n = logits.shape()[0], t = logits.shape()[1], v = logits.shape()[2];
  std::vector<std::vector<double>> ce(static_cast<size_t>(n), std::vector<double>(static_cast<size_t>(t)));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < t; ++j) {
      double m = -INFINITY;
      for (int64_t c = 0; c < v; ++c) m = std::max(m, logits(i, j, c));
      double z = 0;
      for (int64_t c = 0; c < v; ++c) z += std::exp(logits(i, j, c) - m);
      ce[size_t(i)][size_t(j)] = m + std::log(z) - logits(i, j, targets(i, j));
    }
  return ce;
}

double div_no_nan(double a, double b) { return b == 0 ? 0 : a / b; }

// TF's sequence_loss divisions, written out per case.
std::vector<double> ref_sequence_loss(const Ti& targets, const Td& logits, const Td& w, const ls::SequenceLossOptions& o) {
  const auto ce = ref_ce(targets, logits);
  const int64_t n = logits.shape()[0], t = logits.shape()[1];
  auto cell = [&](int64_t i, int64_t j) { return ce[size_t(i)][size_t(j)] * w(i, j); };
  std::vector<double> out;
  if ((o.average_across_timesteps && o.average_across_batch) || (o.sum_over_timesteps && o.sum_over_batch)) {
    double s = 0, d = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < t; ++j) s += cell(i, j), d += o.average_across_timesteps ? w(i, j) : double(w(i, j) != 0);
    return {div_no_nan(s, d)};
  }
  if (o.average_across_batch || o.sum_over_batch) {  // per timestep
    for (int64_t j = 0; j < t; ++j) {
      double s = 0, d = 0;
      for (int64_t i = 0; i < n; ++i) s += cell(i, j), d += o.average_across_batch ? w(i, j) : double(w(i, j) != 0);
      out.push_back(div_no_nan(s, d));
    }
    return out;
  }
  if (o.average_across_timesteps || o.sum_over_timesteps) {  // per sequence
    for (int64_t i = 0; i < n; ++i) {
      double s = 0, d = 0;
      for (int64_t j = 0; j < t; ++j) s += cell(i, j), d += o.average_across_timesteps ? w(i, j) : double(w(i, j) != 0);
      out.push_back(div_no_nan(s, d));
    }
    return out;
  }
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < t; ++j) out.push_back(cell(i, j));
  return out;
}

struct Case {
  const char* name;
  ls::SequenceLossOptions o;
  gd::Shape shape;
};
std::vector<Case> cases(int64_t n, int64_t t) {
  return {{"average over both (default)", {}, {}},
          {"sum over both", {.average_across_timesteps = false, .average_across_batch = false, .sum_over_timesteps = true, .sum_over_batch = true}, {}},
          {"average across batch", {.average_across_timesteps = false}, {t}},
          {"average across timesteps", {.average_across_batch = false}, {n}},
          {"sum over batch", {.average_across_timesteps = false, .average_across_batch = false, .sum_over_batch = true}, {t}},
          {"sum over timesteps", {.average_across_timesteps = false, .average_across_batch = false, .sum_over_timesteps = true}, {n}},
          {"none", {.average_across_timesteps = false, .average_across_batch = false}, {n, t}}};
}

}  // namespace

TEST_CASE("sequence_loss: every averaging option against TF's divisions as plain loops", "[losses][sequence]") {
  gd::Rng rng(21);
  const int64_t n = 3, t = 4, v = 6;
  const Td logits = Td::random_normal({n, t, v}, rng, 0, 2);
  Ti targets = Ti::zeros({n, t});
  for (int64_t i = 0; i < targets.size(); ++i) targets.data()[i] = (i * 5 + 1) % v;
  // padding mask with unequal weights; timestep 3 has only zero weights (div_no_nan gives 0)
  const Td w = Td::from({1, 1, 0.5, 0,  //
                         2, 1, 0, 0,    //
                         1, 0, 0, 0},
                        {n, t});
  for (const Case& c : cases(n, t)) {
    INFO(c.name);
    const std::vector<double> want = ref_sequence_loss(targets, logits, w, c.o);
    const V got = ls::sequence_loss(targets, V(logits), w, c.o);
    REQUIRE(got.shape() == c.shape);
    REQUIRE(got.size() == int64_t(want.size()));
    for (int64_t i = 0; i < got.size(); ++i) CHECK(got.value().data()[i] == Approx(want[size_t(i)]).margin(1e-12));
  }
  SECTION("hand-checked values of the two divisions") {
    // average over both: sum(ce·w) / 6.5; sum over both: sum(ce·w) / 6 (non-zero weights)
    const auto ce = ref_ce(targets, logits);
    const double s = ce[0][0] + ce[0][1] + 0.5 * ce[0][2] + 2 * ce[1][0] + ce[1][1] + ce[2][0];
    CHECK(ls::sequence_loss(targets, logits, w).item() == Approx(s / 6.5).epsilon(1e-12));
    CHECK(ls::sequence_loss(targets, logits, w, cases(n, t)[1].o).item() == Approx(s / 6).epsilon(1e-12));
    const V per_step = ls::sequence_loss(targets, logits, w, {.average_across_timesteps = false});
    CHECK(per_step.value()(3) == 0.0);  // all-zero weights at timestep 3
  }
  SECTION("all weights zero gives 0") {
    CHECK(ls::sequence_loss(targets, logits, Td::zeros({n, t})).item() == 0.0);
  }
}

TEST_CASE("sequence_loss: finite for huge logits; float agrees with double", "[losses][sequence]") {
  gd::Rng rng(22);
  Td logits = Td::random_normal({2, 3, 5}, rng);
  logits(0, 0, 1) = 1e4, logits(1, 2, 0) = -1e4, logits(1, 1, 4) = 5e3;
  const Ti targets = Ti::from({1, 2, 3, 4, 4, 0}, {2, 3});
  const Td w = Td::ones({2, 3});
  const std::vector<double> want = ref_sequence_loss(targets, logits, w, {});
  const double got = ls::sequence_loss(targets, logits, w).item();
  CHECK(std::isfinite(got));
  CHECK(got == Approx(want[0]).epsilon(1e-12));
  const float gf = ls::sequence_loss(targets, gd::Tensor<float>(gd::cast<float>(logits)), gd::Tensor<float>::ones({2, 3})).item();
  CHECK(gf == Approx(want[0]).epsilon(1e-5));
}

TEST_CASE("sequence_loss: gradients of the logits for every option", "[losses][sequence][gradients]") {
  gd::Rng rng(23);
  const int64_t n = 2, t = 3, v = 4;
  const Td logits = Td::random_normal({n, t, v}, rng);
  const Ti targets = Ti::from({0, 3, 2, 1, 1, 3}, {n, t});
  const Td w = Td::from({1, 0.5, 0, 2, 0, 0}, {n, t});
  for (const Case& c : cases(n, t)) {
    INFO(c.name);
    CHECK(gd::compute_gradient_error([&](const V& z) { return ls::sequence_loss(targets, z, w, c.o); }, logits) < 1e-7);
  }
  CHECK(gd::compute_gradient_error([&](const V& z) { return ls::perplexity(targets, z, w); }, logits) < 1e-7);
}

TEST_CASE("perplexity: exp of the weighted mean token cross-entropy", "[losses][sequence]") {
  // Uniform logits over V classes: every token's cross-entropy is log V, so the perplexity is V.
  const Ti targets = Ti::from({0, 1, 2, 3}, {2, 2});
  CHECK(ls::perplexity(targets, Td::zeros({2, 2, 7}), Td::ones({2, 2})).item() == Approx(7.0).epsilon(1e-12));
  // Against the plain-loop mean, weights included.
  gd::Rng rng(24);
  const Td logits = Td::random_normal({2, 2, 5}, rng);
  const Td w = Td::from({1, 0, 2, 1}, {2, 2});
  const auto ce = ref_ce(targets, logits);
  const double mean = (ce[0][0] + 2 * ce[1][0] + ce[1][1]) / 4;
  CHECK(ls::perplexity(targets, logits, w).item() == Approx(std::exp(mean)).epsilon(1e-12));
  // the streaming metric gives the same number for the same tokens
  gd::metrics::Perplexity metric;
  metric.update(targets, logits, w);
  CHECK(metric.result() == Approx(std::exp(mean)).epsilon(1e-12));
}

TEST_CASE("sequence_loss: bad input names the loss", "[losses][sequence]") {
  const Td logits = Td::zeros({2, 3, 4});
  const Ti targets = Ti::zeros({2, 3});
  const Td w = Td::ones({2, 3});
  CHECK_THROWS_WITH(ls::sequence_loss(targets, Td::zeros({6, 4}), w),
                    Catch::Contains("sequence_loss") && Catch::Contains("[N, T, V]"));
  CHECK_THROWS_WITH(ls::sequence_loss(Ti::zeros({3, 2}), logits, w),
                    Catch::Contains("sequence_loss") && Catch::Contains("[3,2]"));
  CHECK_THROWS_AS(ls::sequence_loss(targets, logits, Td::ones({2, 4})), gd::shape_error);
  CHECK_THROWS_AS(ls::sequence_loss(targets, logits, Td()), gd::shape_error);
  CHECK_THROWS_AS(ls::sequence_loss(targets, logits, w, {.sum_over_timesteps = true}), gd::value_error);
  CHECK_THROWS_AS(ls::sequence_loss(targets, logits, w, {.average_across_timesteps = false, .sum_over_batch = true}),
                  gd::value_error);
  CHECK_THROWS_AS(ls::sequence_loss(Ti::from({0, 1, 4, 0, 0, 0}, {2, 3}), logits, w), gd::value_error);
}
