// Registry entries of gd::losses: each loss at every reduction, with scalar and broadcast tensor
// weights (zeros included) and its parameter (delta, epsilon, label_smoothing) off its default.
// References: the per-element (or per-example) loss as a formula in double, then
// tf.losses.compute_weighted_loss written out (reduce_loss below).
#include "op_registry.hpp"

namespace opreg {
namespace {

using V = std::vector<VD>;
using Refs = std::vector<TD>;
using gd::Reduction;

/// TF1 compute_weighted_loss: weights (a tensor broadcast to the losses, or the number ws)
/// multiply; none keeps them, sum adds, mean divides by the sum of the broadcast weights,
/// sum_by_nonzero_weights by their non-zero count; 0 when the divisor is 0.
TD reduce_loss(const TD& per, Reduction red, const TD& w, double ws) {
  const TD wb = w.defined() ? map2(per, w, [](double, double b) { return b; }) : map1(per, [ws](double) { return ws; });
  const TD weighted = map2(per, wb, [](double a, double b) { return a * b; });
  if (red == Reduction::none) return weighted;
  double s = 0, wsum = 0, nonzero = 0;
  for (int64_t i = 0; i < per.size(); ++i) s += weighted.data()[i], wsum += wb.data()[i], nonzero += wb.data()[i] != 0;
  const double denom = red == Reduction::sum ? 1 : red == Reduction::mean ? wsum : nonzero;
  return scalar(denom == 0 ? 0 : s / denom);
}

struct Weighting {
  const char* label;
  Reduction red;
  TD w;  // undefined: the number ws
  double ws;
  unsigned kinds;
};
/// The reductions and weights every loss is sampled with, for losses of shape `s` ([3,4] or [3]).
std::vector<Weighting> weightings(bool per_example) {
  if (per_example)
    return {{"default (sum_by_nonzero_weights)", Reduction::sum_by_nonzero_weights, {}, 1, gd::ops::plain},
            {"none, weights [3]", Reduction::none, values({1, 0, 2}, {3}), 1, gd::ops::params},
            {"sum, weight 0.5", Reduction::sum, {}, 0.5, gd::ops::params},
            {"mean, weights [3] with a zero", Reduction::mean, values({0.5, 0, 2}, {3}), 1, gd::ops::params},
            {"sum_by_nonzero_weights, weights [3] with a zero", Reduction::sum_by_nonzero_weights, values({3, 0, 1}, {3}), 1,
             gd::ops::params},
            {"all weights zero", Reduction::mean, {}, 0, gd::ops::edge}};
  return {{"default (sum_by_nonzero_weights)", Reduction::sum_by_nonzero_weights, {}, 1, gd::ops::plain},
          {"none, weights [3,1] with a zero", Reduction::none, values({1, 0, 2}, {3, 1}), 1, gd::ops::broadcast},
          {"sum, weight 0.5", Reduction::sum, {}, 0.5, gd::ops::params},
          {"mean, weights [3,4]", Reduction::mean, uniform({3, 4}, 300, 0.5, 2), 1, gd::ops::params},
          {"sum_by_nonzero_weights, weights [1,4] with zeros", Reduction::sum_by_nonzero_weights, values({1, 0, 0, 2}, {1, 4}),
           1, gd::ops::broadcast},
          {"mean, weights all zero", Reduction::mean, {}, 0, gd::ops::edge}};
}

/// A per-element loss `f(labels, predictions, reduction, weights tensor, weight number, param)`
/// with reference `elem(label, prediction, param)`; labels fixed, predictions sampled in [lo, hi]
/// away from `kinks` (as differences prediction - label). `params`: values other than the default.
template <class F>
OpInfo pointwise(std::string name, F f, std::function<double(double, double, double)> elem, TD labels, double lo, double hi,
                 double param, std::vector<double> params, std::vector<double> kinks = {}) {
  OpInfo o{.name = name, .needs_broadcast = true, .needs_fused = true};
  auto preds = [&](uint64_t seed) {
    TD p = uniform({3, 4}, seed, lo, hi);
    for (int64_t i = 0; i < p.size(); ++i)  // keep prediction - label away from the kinks
      for (double k : kinks)
        while (std::abs(p.data()[i] - labels.data()[i] - k) < 0.05) p.data()[i] += 0.1;
    return p;
  };
  auto ref_of = [elem, labels](Reduction red, TD w, double ws, double prm) {
    return [=](const Refs& t) {
      return reduce_loss(map2(labels, t[0], [&](double y, double p) { return elem(y, p, prm); }), red, w, ws);
    };
  };
  uint64_t seed = 310;
  for (const Weighting& wt : weightings(false))
    o.samples.push_back(sample(wt.label, wt.kinds, {preds(seed++)},
                               [f, labels, wt, param](const V& v) { return VD(f(labels, v[0], wt.red, wt.w, wt.ws, param)); },
                               ref_of(wt.red, wt.w, wt.ws, param)));
  for (double prm : params)
    o.samples.push_back(sample("parameter " + std::to_string(prm), gd::ops::params, {preds(seed++)},
                               [f, labels, prm](const V& v) { return VD(f(labels, v[0], Reduction::sum, TD(), 1.0, prm)); },
                               ref_of(Reduction::sum, TD(), 1, prm)));
  // predictions from a chain: sigmoid(x) * b (in (0, 1)), b [4]
  o.samples.push_back(sample("of sigmoid(x) * b, b [4]", gd::ops::fused | gd::ops::broadcast,
                             {uniform({3, 4}, seed, -2, 2), uniform({4}, seed + 1, 0.5, 0.95)},
                             [f, labels, param](const V& v) {
                               return VD(f(labels, gd::sigmoid(v[0]) * v[1], Reduction::sum_by_nonzero_weights, TD(), 1.0, param));
                             },
                             [elem, labels, param](const Refs& t) {
                               const TD p = map2(t[0], t[1], [](double x, double b) { return b / (1 + std::exp(-x)); });
                               return reduce_loss(map2(labels, p, [&](double y, double q) { return elem(y, q, param); }),
                                                  Reduction::sum_by_nonzero_weights, TD(), 1);
                             }));
  return o;
}

/// Options<double> (or another options type O) with reduction and weights set.
template <class O>
O options(Reduction red, const TD& w, double ws) {
  O o{.reduction = red};
  if (w.defined())
    o.weights = w;
  else
    o.weights = ws;
  return o;
}

double softplus(double x) { return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)); }

/// -sum(labels * log_softmax(logits)) over the last axis, per example.
TD softmax_xent_ref(const TD& labels, const TD& logits, double smoothing) {
  const Idx d = dims(logits.shape());
  const int64_t c = d.back();
  const Idx od(d.begin(), d.end() - 1);
  return build(od, [&](const Idx& i) {
    Idx j = i;
    j.push_back(0);
    double m = -INFINITY, s = 0, loss = 0;
    for (j.back() = 0; j.back() < c; ++j.back()) m = std::max(m, at(logits, j));
    for (j.back() = 0; j.back() < c; ++j.back()) s += std::exp(at(logits, j) - m);
    for (j.back() = 0; j.back() < c; ++j.back())
      loss -= (at(labels, j) * (1 - smoothing) + smoothing / double(c)) * (at(logits, j) - m - std::log(s));
    return loss;
  });
}

TD one_hot_ref(const TI& labels, int64_t c) {
  Idx d = dims(labels.shape());
  d.push_back(c);
  return build(d, [&](const Idx& i) { return labels.data()[ravel(Idx(i.begin(), i.end() - 1), dims(labels.shape()))] == i.back() ? 1.0 : 0.0; });
}

}  // namespace

void add_losses(std::vector<OpInfo>& r) {
  namespace L = gd::losses;
  using O = L::Options<double>;
  const TD y_real = uniform({3, 4}, 301, -1, 1);
  const TD y01 = values({1, 0, 0, 1, 1, 1, 0, 0, 0, 1, 0, 1}, {3, 4});
  const TD y_soft = uniform({3, 4}, 302, 0, 1);

  r.push_back(pointwise(
      "mean_squared_error",
      [](const TD& y, const auto& p, Reduction red, const TD& w, double ws, double) {
        return L::mean_squared_error(y, p, options<O>(red, w, ws));
      },
      [](double y, double p, double) { return (p - y) * (p - y); }, y_real, -2, 2, 0, {}));
  r.push_back(pointwise(
      "absolute_difference",
      [](const TD& y, const auto& p, Reduction red, const TD& w, double ws, double) {
        return L::absolute_difference(y, p, options<O>(red, w, ws));
      },
      [](double y, double p, double) { return std::abs(p - y); }, y_real, -2, 2, 0, {}, {0}));
  r.push_back(pointwise(
      "log_loss",
      [](const TD& y, const auto& p, Reduction red, const TD& w, double ws, double eps) {
        auto o = options<L::LogLossOptions<double>>(red, w, ws);
        o.epsilon = eps;
        return L::log_loss(y, p, o);
      },
      [](double y, double p, double eps) { return -y * std::log(p + eps) - (1 - y) * std::log(1 - p + eps); }, y_soft, 0.05,
      0.95, 1e-7, {0.0, 0.1}));
  r.push_back(pointwise(
      "hinge_loss",
      [](const TD& y, const auto& p, Reduction red, const TD& w, double ws, double) {
        return L::hinge_loss(y, p, options<O>(red, w, ws));
      },
      [](double y, double x, double) { return std::max(0.0, 1 - (2 * y - 1) * x); }, y01, -2, 2, 0, {}));
  r.push_back(pointwise(
      "huber_loss",
      [](const TD& y, const auto& p, Reduction red, const TD& w, double ws, double delta) {
        auto o = options<L::HuberOptions<double>>(red, w, ws);
        o.delta = delta;
        return L::huber_loss(y, p, o);
      },
      [](double y, double p, double d) {
        const double e = std::abs(p - y);
        return e <= d ? 0.5 * e * e : d * (e - 0.5 * d);
      },
      y_real, -2.5, 2.5, 1.0, {0.3, 2.0}, {-1, 1, -0.3, 0.3, -2, 2}));
  r.push_back(pointwise(
      "log_cosh",
      [](const TD& y, const auto& p, Reduction red, const TD& w, double ws, double) {
        return L::log_cosh(y, p, options<O>(red, w, ws));
      },
      [](double y, double p, double) { return std::log(std::cosh(p - y)); }, y_real, -2, 2, 0, {}));
  r.push_back(pointwise(
      "exponential_loss",
      [](const TD& y, const auto& p, Reduction red, const TD& w, double ws, double) {
        return L::exponential_loss(y, p, options<O>(red, w, ws));
      },
      [](double y, double x, double) { return std::exp(-(2 * y - 1) * x); }, y01, -2, 2, 0, {}));
  r.push_back(pointwise(
      "sigmoid_cross_entropy_with_logits",
      [](const TD& y, const auto& p, Reduction red, const TD& w, double ws, double s) {
        auto o = options<L::SmoothingOptions<double>>(red, w, ws);
        o.label_smoothing = s;
        return L::sigmoid_cross_entropy_with_logits(y, p, o);
      },
      [](double z, double x, double s) {
        const double zs = z * (1 - s) + s / 2;  // -zs log sigmoid(x) - (1 - zs) log(1 - sigmoid(x))
        return zs * softplus(-x) + (1 - zs) * softplus(x);
      },
      y_soft, -3, 3, 0, {0.2, 1.0}));
  r.push_back(pointwise(
      "compute_weighted_loss",
      [](const TD&, const auto& p, Reduction red, const TD& w, double ws, double) {
        return L::compute_weighted_loss(p, options<O>(red, w, ws));
      },
      [](double, double p, double) { return p; }, y_real, -2, 2, 0, {}));
  // extreme values (hand values): log_cosh(+-1000) = 1000 - log 2; sigmoid xent of logits
  // -+1000 against labels 1/0 = 1000
  for (OpInfo& o : r) {
    if (o.name == "log_cosh")
      o.samples.push_back(sample("differences of +-1000", gd::ops::edge, {values({1000, -1000}, {2})},
                                 [](const V& v) { return VD(L::log_cosh(TD::zeros({2}), v[0], {.reduction = Reduction::none})); },
                                 [](const Refs&) { return values({1000 - 0.69314718055994531, 1000 - 0.69314718055994531}, {2}); }));
    if (o.name == "sigmoid_cross_entropy_with_logits")
      o.samples.push_back(sample("logits of +-1000", gd::ops::edge, {values({-1000, 1000, 1000, -1000}, {4})},
                                 [y = values({1, 0, 1, 0}, {4})](const V& v) {
                                   return VD(L::sigmoid_cross_entropy_with_logits(y, v[0], {.reduction = Reduction::none}));
                                 },
                                 [](const Refs&) { return values({1000, 1000, 0, 0}, {4}); }));
  }

  {
    OpInfo o{.name = "softmax_cross_entropy_with_logits", .needs_broadcast = true, .needs_fused = true};
    TD labels = uniform({3, 4}, 303, 0, 1);  // rows normalised to probabilities
    for (int64_t i = 0; i < 3; ++i) {
      double s = 0;
      for (int64_t j = 0; j < 4; ++j) s += labels(i, j);
      for (int64_t j = 0; j < 4; ++j) labels(i, j) /= s;
    }
    uint64_t seed = 330;
    for (const Weighting& wt : weightings(true)) {
      o.samples.push_back(sample(wt.label, wt.kinds, {uniform({3, 4}, seed++, -3, 3)},
                                 [labels, wt](const V& v) {
                                   return VD(L::softmax_cross_entropy_with_logits(
                                       labels, v[0], options<L::SmoothingOptions<double>>(wt.red, wt.w, wt.ws)));
                                 },
                                 [labels, wt](const Refs& t) { return reduce_loss(softmax_xent_ref(labels, t[0], 0), wt.red, wt.w, wt.ws); }));
    }
    o.samples.push_back(sample("label_smoothing 0.1, soft labels differentiable too", gd::ops::params,
                               {labels, uniform({3, 4}, seed++, -3, 3)},
                               [](const V& v) { return VD(L::softmax_cross_entropy_with_logits(v[0], v[1], {.label_smoothing = 0.1})); },
                               [](const Refs& t) { return reduce_loss(softmax_xent_ref(t[0], t[1], 0.1), Reduction::sum_by_nonzero_weights, {}, 1); }));
    const TD l3 = one_hot_ref(TI::from({0, 3, 1, 2, 2, 0}, {2, 3}), 4);
    o.samples.push_back(sample("logits [2,3,4], weights [2,1] broadcast", gd::ops::broadcast, {uniform({2, 3, 4}, seed++, -3, 3)},
                               [l3, w = values({2, 0.5}, {2, 1})](const V& v) {
                                 return VD(L::softmax_cross_entropy_with_logits(l3, v[0], {.reduction = Reduction::sum, .weights = w}));
                               },
                               [l3](const Refs& t) { return reduce_loss(softmax_xent_ref(l3, t[0], 0), Reduction::sum, values({2, 0.5}, {2, 1}), 1); }));
    o.samples.push_back(sample("logits of +-1000 (hand value 1000)", gd::ops::edge, {values({1000, 0, -1000}, {1, 3})},
                               [y = values({0, 1, 0}, {1, 3})](const V& v) { return VD(L::softmax_cross_entropy_with_logits(y, v[0])); },
                               [](const Refs&) { return scalar(1000); }));
    o.samples.push_back(sample("of logits tanh(x) * b * 3, b [4]", gd::ops::fused | gd::ops::broadcast,
                               {uniform({3, 4}, seed++), uniform({4}, seed++, 0.5, 1)},
                               [labels](const V& v) { return VD(L::softmax_cross_entropy_with_logits(labels, gd::tanh(v[0]) * v[1] * 3.0)); },
                               [labels](const Refs& t) {
                                 const TD x = map2(t[0], t[1], [](double a, double b) { return std::tanh(a) * b * 3; });
                                 return reduce_loss(softmax_xent_ref(labels, x, 0), Reduction::sum_by_nonzero_weights, {}, 1);
                               }));
    r.push_back(std::move(o));
  }
  {
    OpInfo o{.name = "sparse_softmax_cross_entropy_with_logits", .needs_fused = true};
    const TI labels = TI::from({2, 0, 3});
    uint64_t seed = 350;
    for (const Weighting& wt : weightings(true)) {
      o.samples.push_back(sample(wt.label, wt.kinds, {uniform({3, 4}, seed++, -3, 3)},
                                 [labels, wt](const V& v) {
                                   return VD(L::sparse_softmax_cross_entropy_with_logits(labels, v[0], options<O>(wt.red, wt.w, wt.ws)));
                                 },
                                 [labels, wt](const Refs& t) {
                                   return reduce_loss(softmax_xent_ref(one_hot_ref(labels, 4), t[0], 0), wt.red, wt.w, wt.ws);
                                 }));
    }
    const TI l2 = TI::from({1, 0, 4, 4, 2, 3}, {2, 3});
    o.samples.push_back(sample("labels [2,3], logits [2,3,5]", gd::ops::edge, {uniform({2, 3, 5}, seed++, -3, 3)},
                               [l2](const V& v) { return VD(L::sparse_softmax_cross_entropy_with_logits(l2, v[0])); },
                               [l2](const Refs& t) {
                                 return reduce_loss(softmax_xent_ref(one_hot_ref(l2, 5), t[0], 0), Reduction::sum_by_nonzero_weights, {}, 1);
                               }));
    o.samples.push_back(sample("of logits x * 2 - 1", gd::ops::fused, {uniform({3, 4}, seed++)},
                               [labels](const V& v) { return VD(L::sparse_softmax_cross_entropy_with_logits(labels, v[0] * 2.0 - 1.0)); },
                               [labels](const Refs& t) {
                                 const TD x = map1(t[0], [](double a) { return a * 2 - 1; });
                                 return reduce_loss(softmax_xent_ref(one_hot_ref(labels, 4), x, 0), Reduction::sum_by_nonzero_weights, {}, 1);
                               }));
    r.push_back(std::move(o));
  }
  {
    OpInfo o{.name = "l2_loss", .needs_broadcast = true, .needs_fused = true};
    auto half_sq = [](const Refs& t) {
      double s = 0;
      for (double v : t[0]) s += v * v / 2;
      return scalar(s);
    };
    o.samples.push_back(sample("[3,4]", gd::ops::plain, {uniform({3, 4}, 370)}, [](const V& v) { return VD(L::l2_loss(v[0])); }, half_sq));
    o.samples.push_back(sample("rank 0", gd::ops::edge, {uniform({}, 371)}, [](const V& v) { return VD(L::l2_loss(v[0])); }, half_sq));
    o.samples.push_back(sample("of x * b, b [4]", gd::ops::fused | gd::ops::broadcast, {uniform({3, 4}, 372), uniform({4}, 373)},
                               [](const V& v) { return VD(L::l2_loss(v[0] * v[1])); },
                               [half_sq](const Refs& t) { return half_sq({map2(t[0], t[1], [](double a, double b) { return a * b; })}); }));
    o.samples.push_back(no_gradient(sample("empty: 0", gd::ops::edge, {TD::zeros({0})}, [](const V& v) { return VD(L::l2_loss(v[0])); },
                                           [](const Refs&) { return scalar(0); })));
    r.push_back(std::move(o));
  }
}

}  // namespace opreg
