// Registry entries of the classification losses of gd::losses (log_loss, hinge_loss,
// sigmoid/softmax/sparse softmax cross-entropy, sequence_loss, perplexity): every reduction and
// weighting, label smoothing and epsilon off their defaults, every sequence_loss averaging
// option, extreme logits. References: per-element or per-example losses
// as formulas and loops in double (loss_reference.hpp).
#include "loss_reference.hpp"

namespace op_registry {

using namespace losses_ref;

namespace {
/// tf.contrib.seq2seq.sequence_loss from per-token cross-entropies ce [N, T] and weights w [N, T],
/// its divisions written out (a zero denominator gives 0).
TensorD sequence_loss_ref(const TensorD& ce, const TensorD& w, const gd::losses::SequenceLossOptions& o) {
  const int64_t n = ce.shape()[0], t = ce.shape()[1];
  auto ratio = [&](int64_t i0, int64_t i1, int64_t j0, int64_t j1, bool by_sum) {
    double s = 0, d = 0;
    for (int64_t i = i0; i < i1; ++i)
      for (int64_t j = j0; j < j1; ++j) s += ce(i, j) * w(i, j), d += by_sum ? w(i, j) : double(w(i, j) != 0);
    return d == 0 ? 0.0 : s / d;
  };
  if (o.average_across_timesteps && o.average_across_batch) return scalar(ratio(0, n, 0, t, true));
  if (o.sum_over_timesteps && o.sum_over_batch) return scalar(ratio(0, n, 0, t, false));
  std::vector<double> out;
  if (o.average_across_batch || o.sum_over_batch) {
    for (int64_t j = 0; j < t; ++j) out.push_back(ratio(0, n, j, j + 1, o.average_across_batch));
    return values(out, {t});
  }
  if (o.average_across_timesteps || o.sum_over_timesteps) {
    for (int64_t i = 0; i < n; ++i) out.push_back(ratio(i, i + 1, 0, t, o.average_across_timesteps));
    return values(out, {n});
  }
  return map2(ce, w, [](double c, double x) { return c * x; });
}
}  // namespace

void add_xent(std::vector<OpInfo>& r) {
  namespace L = gd::losses;
  const TensorD y01 = values({1, 0, 0, 1, 1, 1, 0, 0, 0, 1, 0, 1}, {3, 4});
  const TensorD y_soft = uniform({3, 4}, 302, 0, 1);
  r.push_back(pointwise(
      "log_loss",
      [](const auto& y, const auto& p, Reduction red, const auto& w, double ws, double eps) {
        auto o = options<L::LogLossOptions>(red, w, ws);
        o.epsilon = eps;
        return L::log_loss(y, p, o);
      },
      [](double y, double p, double eps) { return -y * std::log(p + eps) - (1 - y) * std::log(1 - p + eps); }, y_soft, 0.05,
      0.95, 1e-7, {0.0, 0.1}));
  r.push_back(pointwise(
      "hinge_loss",
      [](const auto& y, const auto& p, Reduction red, const auto& w, double ws, double) {
        return L::hinge_loss(y, p, options<L::Options>(red, w, ws));
      },
      [](double y, double x, double) { return std::max(0.0, 1 - (2 * y - 1) * x); }, y01, -2, 2, 0, {}));
  r.push_back(pointwise(
      "sigmoid_cross_entropy_with_logits",
      [](const auto& y, const auto& p, Reduction red, const auto& w, double ws, double s) {
        auto o = options<L::SmoothingOptions>(red, w, ws);
        o.label_smoothing = s;
        return L::sigmoid_cross_entropy_with_logits(y, p, o);
      },
      [](double z, double x, double s) {
        const double zs = z * (1 - s) + s / 2;  // -zs log sigmoid(x) - (1 - zs) log(1 - sigmoid(x))
        return zs * softplus(-x) + (1 - zs) * softplus(x);
      },
      y_soft, -3, 3, 0, {0.2, 1.0}));
  // logits of -+1000 against labels 1/0 (hand value 1000)
  for (OpInfo& o : r)
    if (o.name == "sigmoid_cross_entropy_with_logits")
      o.samples.push_back(sample("logits of +-1000", gd::ops::kind::edge, {values({-1000, 1000, 1000, -1000}, {4})},
                                 [y = values({1, 0, 1, 0}, {4})](const auto& v) {
                                   return as_var(v, L::sigmoid_cross_entropy_with_logits(like(v, y), v[0], {.reduction = Reduction::none}));
                                 },
                                 [](const Refs&) { return values({1000, 1000, 0, 0}, {4}); }));
  {
    OpInfo o{.name = "softmax_cross_entropy_with_logits", .needs_broadcast = true, .needs_fused = true};
    TensorD labels = uniform({3, 4}, 303, 0, 1);  // rows normalised to probabilities
    for (int64_t i = 0; i < 3; ++i) {
      double s = 0;
      for (int64_t j = 0; j < 4; ++j) s += labels(i, j);
      for (int64_t j = 0; j < 4; ++j) labels(i, j) /= s;
    }
    uint64_t seed = 330;
    for (const Weighting& wt : weightings(true)) {
      o.samples.push_back(sample(wt.label, wt.kinds, {uniform({3, 4}, seed++, -3, 3)},
                                 [labels, wt](const auto& v) {
                                   return as_var(v, L::softmax_cross_entropy_with_logits(
                                       like(v, labels), v[0], options<L::SmoothingOptions>(wt.red, like(v, wt.w), wt.ws)));
                                 },
                                 [labels, wt](const Refs& t) { return reduce_loss(softmax_xent_ref(labels, t[0], 0), wt.red, wt.w, wt.ws); }));
    }
    o.samples.push_back(sample("label_smoothing 0.1, soft labels differentiable too", gd::ops::kind::params,
                               {labels, uniform({3, 4}, seed++, -3, 3)},
                               [](const auto& v) { return as_var(v, L::softmax_cross_entropy_with_logits(v[0], v[1], {.label_smoothing = 0.1})); },
                               [](const Refs& t) { return reduce_loss(softmax_xent_ref(t[0], t[1], 0.1), Reduction::sum_by_nonzero_weights, {}, 1); }));
    const TensorD l3 = one_hot_ref(TensorI64::from({0, 3, 1, 2, 2, 0}, {2, 3}), 4);
    o.samples.push_back(sample("logits [2,3,4], weights [2,1] broadcast", gd::ops::kind::broadcast, {uniform({2, 3, 4}, seed++, -3, 3)},
                               [l3, w = values({2, 0.5}, {2, 1})](const auto& v) {
                                 return as_var(v, L::softmax_cross_entropy_with_logits(like(v, l3), v[0], {.reduction = Reduction::sum, .weights = like(v, w)}));
                               },
                               [l3](const Refs& t) { return reduce_loss(softmax_xent_ref(l3, t[0], 0), Reduction::sum, values({2, 0.5}, {2, 1}), 1); }));
    o.samples.push_back(sample("logits of +-1000 (hand value 1000)", gd::ops::kind::edge, {values({1000, 0, -1000}, {1, 3})},
                               [y = values({0, 1, 0}, {1, 3})](const auto& v) { return as_var(v, L::softmax_cross_entropy_with_logits(like(v, y), v[0])); },
                               [](const Refs&) { return scalar(1000); }));
    o.samples.push_back(sample("of logits tanh(x) * b * 3, b [4]", gd::ops::kind::fused | gd::ops::kind::broadcast,
                               {uniform({3, 4}, seed++), uniform({4}, seed++, 0.5, 1)},
                               [labels](const auto& v) { return as_var(v, L::softmax_cross_entropy_with_logits(like(v, labels), gd::tanh(v[0]) * v[1] * 3.0)); },
                               [labels](const Refs& t) {
                                 const TensorD x = map2(t[0], t[1], [](double a, double b) { return std::tanh(a) * b * 3; });
                                 return reduce_loss(softmax_xent_ref(labels, x, 0), Reduction::sum_by_nonzero_weights, {}, 1);
                               }));
    r.push_back(std::move(o));
  }
  {
    OpInfo o{.name = "sparse_softmax_cross_entropy_with_logits", .needs_fused = true};
    const TensorI64 labels = TensorI64::from({2, 0, 3});
    uint64_t seed = 350;
    for (const Weighting& wt : weightings(true)) {
      o.samples.push_back(sample(wt.label, wt.kinds, {uniform({3, 4}, seed++, -3, 3)},
                                 [labels, wt](const auto& v) {
                                   return as_var(v, L::sparse_softmax_cross_entropy_with_logits(on_device(labels), v[0], options<L::Options>(wt.red, like(v, wt.w), wt.ws)));
                                 },
                                 [labels, wt](const Refs& t) {
                                   return reduce_loss(softmax_xent_ref(one_hot_ref(labels, 4), t[0], 0), wt.red, wt.w, wt.ws);
                                 }));
    }
    const TensorI64 l2 = TensorI64::from({1, 0, 4, 4, 2, 3}, {2, 3});
    // log(1 + e^-1) and log 3 (Python's math), their mean: nothing may round at the magnitude of
    // the logits, which in float costs 3e-5
    o.samples.push_back(sample("logits of +-1000", gd::ops::kind::edge, {values({1000, 999, -1000, -1000, -1000, -1000}, {2, 3})},
                               [l = TensorI64::from({0, 2})](const auto& v) {
                                 return as_var(v, L::sparse_softmax_cross_entropy_with_logits(on_device(l), v[0]));
                               },
                               [](const Refs&) { return scalar((0.31326168751822286 + 1.0986122886681098) / 2); }));
    o.samples.push_back(sample("labels [2,3], logits [2,3,5]", gd::ops::kind::edge, {uniform({2, 3, 5}, seed++, -3, 3)},
                               [l2](const auto& v) { return as_var(v, L::sparse_softmax_cross_entropy_with_logits(on_device(l2), v[0])); },
                               [l2](const Refs& t) {
                                 return reduce_loss(softmax_xent_ref(one_hot_ref(l2, 5), t[0], 0), Reduction::sum_by_nonzero_weights, {}, 1);
                               }));
    o.samples.push_back(sample("of logits x * 2 - 1", gd::ops::kind::fused, {uniform({3, 4}, seed++)},
                               [labels](const auto& v) { return as_var(v, L::sparse_softmax_cross_entropy_with_logits(on_device(labels), v[0] * 2.0 - 1.0)); },
                               [labels](const Refs& t) {
                                 const TensorD x = map1(t[0], [](double a) { return a * 2 - 1; });
                                 return reduce_loss(softmax_xent_ref(one_hot_ref(labels, 4), x, 0), Reduction::sum_by_nonzero_weights, {}, 1);
                               }));
    r.push_back(std::move(o));
  }
  {
    OpInfo o{.name = "sequence_loss", .needs_fused = true};
    const TensorI64 targets = TensorI64::from({1, 0, 4, 4, 2, 3}, {2, 3});
    const TensorD w = values({1, 0.5, 0, 2, 0, 0}, {2, 3});  // the last timestep has only zero weights
    using SO = L::SequenceLossOptions;
    const std::vector<std::pair<std::string, SO>> options{
        {"average across both (default)", {}},
        {"sum over both", {.average_across_timesteps = false, .average_across_batch = false, .sum_over_timesteps = true, .sum_over_batch = true}},
        {"average across batch", {.average_across_timesteps = false}},
        {"average across timesteps", {.average_across_batch = false}},
        {"sum over batch", {.average_across_timesteps = false, .average_across_batch = false, .sum_over_batch = true}},
        {"sum over timesteps", {.average_across_timesteps = false, .average_across_batch = false, .sum_over_timesteps = true}},
        {"per token", {.average_across_timesteps = false, .average_across_batch = false}}};
    uint64_t seed = 370;
    for (const auto& [label, so] : options)
      o.samples.push_back(sample(label, &so == &options[0].second ? gd::ops::kind::plain : gd::ops::kind::params,
                                 {uniform({2, 3, 5}, seed++, -3, 3)},
                                 [targets, w, so](const auto& v) { return as_var(v, L::sequence_loss(on_device(targets), v[0], like(v, w), so)); },
                                 [targets, w, so](const Refs& t) {
                                   return sequence_loss_ref(softmax_xent_ref(one_hot_ref(targets, 5), t[0], 0), w, so);
                                 }));
    o.samples.push_back(sample("logits of +-1000 (hand value (0 + 2000) / 2)", gd::ops::kind::edge,
                               {values({1000, 0, -1000, 1000, 0, -1000}, {1, 2, 3})},
                               [t = TensorI64::from({0, 2}, {1, 2}), w1 = values({1, 1}, {1, 2})](const auto& v) {
                                 return as_var(v, L::sequence_loss(on_device(t), v[0], like(v, w1)));
                               },
                               [](const Refs&) { return scalar(1000); }));
    o.samples.push_back(sample("of logits x * 2 - 1", gd::ops::kind::fused, {uniform({2, 3, 5}, seed++)},
                               [targets, w](const auto& v) { return as_var(v, L::sequence_loss(on_device(targets), v[0] * 2.0 - 1.0, like(v, w))); },
                               [targets, w](const Refs& t) {
                                 const TensorD x = map1(t[0], [](double a) { return a * 2 - 1; });
                                 return sequence_loss_ref(softmax_xent_ref(one_hot_ref(targets, 5), x, 0), w, {});
                               }));
    r.push_back(std::move(o));
  }
  {
    OpInfo o{.name = "perplexity"};
    const TensorI64 targets = TensorI64::from({1, 0, 4, 4, 2, 3}, {2, 3});
    const TensorD w = values({1, 0.5, 0, 2, 1, 0}, {2, 3});
    o.samples.push_back(sample("weighted", gd::ops::kind::plain, {uniform({2, 3, 5}, 380, -3, 3)},
                               [targets, w](const auto& v) { return as_var(v, L::perplexity(on_device(targets), v[0], like(v, w))); },
                               [targets, w](const Refs& t) {
                                 const TensorD ce = softmax_xent_ref(one_hot_ref(targets, 5), t[0], 0);
                                 return scalar(std::exp(sequence_loss_ref(ce, w, {}).item()));
                               }));
    r.push_back(std::move(o));
  }
}

}  // namespace op_registry
