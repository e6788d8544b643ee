// What the loss entries of the op registry share (registry_losses.cpp, registry_xent.cpp):
// tf.losses.compute_weighted_loss written out, the weightings every loss is sampled with, the
// per-element loss sample builder, and per-example softmax cross-entropy as loops.
#pragma once
#include "op_registry.hpp"

namespace op_registry::losses_ref {


using V = std::vector<VarD>;
using Refs = std::vector<TensorD>;
using gd::Reduction;

/// TF1 compute_weighted_loss: weights (a tensor broadcast to the losses, or the number ws)
/// multiply; none keeps them, sum adds, mean divides by the sum of the broadcast weights,
/// sum_by_nonzero_weights by their non-zero count; 0 when the divisor is 0.
inline TensorD reduce_loss(const TensorD& per, Reduction red, const TensorD& w, double ws) {
  const TensorD wb = w.defined() ? map2(per, w, [](double, double b) { return b; }) : map1(per, [ws](double) { return ws; });
  const TensorD weighted = map2(per, wb, [](double a, double b) { return a * b; });
  if (red == Reduction::none) return weighted;
  double s = 0, wsum = 0, nonzero = 0;
  for (int64_t i = 0; i < per.size(); ++i) s += weighted.data()[i], wsum += wb.data()[i], nonzero += wb.data()[i] != 0;
  const double denom = red == Reduction::sum ? 1 : red == Reduction::mean ? wsum : nonzero;
  return scalar(denom == 0 ? 0 : s / denom);
}

struct Weighting {
  const char* label;
  Reduction red;
  TensorD w;  // undefined: the number ws
  double ws;
  unsigned kinds;
};
/// The reductions and weights every loss is sampled with, for losses of shape `s` ([3,4] or [3]).
inline std::vector<Weighting> weightings(bool per_example) {
  if (per_example)
    return {{"default (sum_by_nonzero_weights)", Reduction::sum_by_nonzero_weights, {}, 1, gd::ops::kind::plain},
            {"none, weights [3]", Reduction::none, values({1, 0, 2}, {3}), 1, gd::ops::kind::params},
            {"sum, weight 0.5", Reduction::sum, {}, 0.5, gd::ops::kind::params},
            {"mean, weights [3] with a zero", Reduction::mean, values({0.5, 0, 2}, {3}), 1, gd::ops::kind::params},
            {"sum_by_nonzero_weights, weights [3] with a zero", Reduction::sum_by_nonzero_weights, values({3, 0, 1}, {3}), 1,
             gd::ops::kind::params},
            {"all weights zero", Reduction::mean, {}, 0, gd::ops::kind::edge}};
  return {{"default (sum_by_nonzero_weights)", Reduction::sum_by_nonzero_weights, {}, 1, gd::ops::kind::plain},
          {"none, weights [3,1] with a zero", Reduction::none, values({1, 0, 2}, {3, 1}), 1, gd::ops::kind::broadcast},
          {"sum, weight 0.5", Reduction::sum, {}, 0.5, gd::ops::kind::params},
          {"mean, weights [3,4]", Reduction::mean, uniform({3, 4}, 300, 0.5, 2), 1, gd::ops::kind::params},
          {"sum_by_nonzero_weights, weights [1,4] with zeros", Reduction::sum_by_nonzero_weights, values({1, 0, 0, 2}, {1, 4}),
           1, gd::ops::kind::broadcast},
          {"mean, weights all zero", Reduction::mean, {}, 0, gd::ops::kind::edge}};
}

/// A per-element loss `f(labels, predictions, reduction, weights tensor, weight number, param)`
/// with reference `elem(label, prediction, param)`; labels fixed, predictions sampled in [lo, hi]
/// away from `kinks` (as differences prediction - label). `params`: values other than the default.
template <class F>
OpInfo pointwise(std::string name, F f, std::function<double(double, double, double)> elem, TensorD labels, double lo, double hi,
                 double param, std::vector<double> params, std::vector<double> kinks = {}) {
  OpInfo o{.name = name, .needs_broadcast = true, .needs_fused = true};
  auto preds = [&](uint64_t seed) {
    TensorD p = uniform({3, 4}, seed, lo, hi);
    for (int64_t i = 0; i < p.size(); ++i)  // keep prediction - label away from the kinks
      for (double k : kinks)
        while (std::abs(p.data()[i] - labels.data()[i] - k) < 0.05) p.data()[i] += 0.1;
    return p;
  };
  auto ref_of = [elem, labels](Reduction red, TensorD w, double ws, double prm) {
    return [=](const Refs& t) {
      return reduce_loss(map2(labels, t[0], [&](double y, double p) { return elem(y, p, prm); }), red, w, ws);
    };
  };
  uint64_t seed = 310;
  for (const Weighting& wt : weightings(false))
    o.samples.push_back(sample(wt.label, wt.kinds, {preds(seed++)},
                               [f, labels, wt, param](const auto& v) { return as_var(v, f(like(v, labels), v[0], wt.red, like(v, wt.w), wt.ws, param)); },
                               ref_of(wt.red, wt.w, wt.ws, param)));
  for (double prm : params)
    o.samples.push_back(sample("parameter " + std::to_string(prm), gd::ops::kind::params, {preds(seed++)},
                               [f, labels, prm](const auto& v) { return as_var(v, f(like(v, labels), v[0], Reduction::sum, like(v, TensorD()), 1.0, prm)); },
                               ref_of(Reduction::sum, TensorD(), 1, prm)));
  // predictions from a chain: sigmoid(x) * b (in (0, 1)), b [4]
  o.samples.push_back(sample("of sigmoid(x) * b, b [4]", gd::ops::kind::fused | gd::ops::kind::broadcast,
                             {uniform({3, 4}, seed, -2, 2), uniform({4}, seed + 1, 0.5, 0.95)},
                             [f, labels, param](const auto& v) {
                               return as_var(v, f(like(v, labels), gd::sigmoid(v[0]) * v[1], Reduction::sum_by_nonzero_weights,
                                                  like(v, TensorD()), 1.0, param));
                             },
                             [elem, labels, param](const Refs& t) {
                               const TensorD p = map2(t[0], t[1], [](double x, double b) { return b / (1 + std::exp(-x)); });
                               return reduce_loss(map2(labels, p, [&](double y, double q) { return elem(y, q, param); }),
                                                  Reduction::sum_by_nonzero_weights, TensorD(), 1);
                             }));
  return o;
}

/// Options<T> (or another options template O) with reduction and weights set.
template <template <class> class O, class T>
O<T> options(Reduction red, const gd::Tensor<T>& w, double ws) {
  O<T> o{.reduction = red};
  if (w.defined())
    o.weights = w;
  else
    o.weights = ws;
  return o;
}

inline double softplus(double x) { return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)); }

/// -sum(labels * log_softmax(logits)) over the last axis, per example.
inline TensorD softmax_xent_ref(const TensorD& labels, const TensorD& logits, double smoothing) {
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

inline TensorD one_hot_ref(const TensorI64& labels, int64_t c) {
  Idx d = dims(labels.shape());
  d.push_back(c);
  return build(d, [&](const Idx& i) { return labels.data()[ravel(Idx(i.begin(), i.end() - 1), dims(labels.shape()))] == i.back() ? 1.0 : 0.0; });
}

}  // namespace op_registry::losses_ref
