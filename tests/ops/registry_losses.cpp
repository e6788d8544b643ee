// Registry entries of the regression losses of gd::losses (mean_squared_error,
// absolute_difference, huber_loss, log_cosh, exponential_loss, compute_weighted_loss, l2_loss):
// every reduction, scalar and broadcast tensor weights (zeros included), each parameter off its
// default. References: the per-element loss as a formula in double, then
// tf.losses.compute_weighted_loss written out (loss_reference.hpp).
#include "loss_reference.hpp"

namespace op_registry {

using namespace losses_ref;

void add_losses(std::vector<OpInfo>& r) {
  namespace L = gd::losses;
  const TensorD y_real = uniform({3, 4}, 301, -1, 1);
  const TensorD y01 = values({1, 0, 0, 1, 1, 1, 0, 0, 0, 1, 0, 1}, {3, 4});
  r.push_back(pointwise(
      "mean_squared_error",
      [](const auto& y, const auto& p, Reduction red, const auto& w, double ws, double) {
        return L::mean_squared_error(y, p, options<L::Options>(red, w, ws));
      },
      [](double y, double p, double) { return (p - y) * (p - y); }, y_real, -2, 2, 0, {}));
  r.push_back(pointwise(
      "absolute_difference",
      [](const auto& y, const auto& p, Reduction red, const auto& w, double ws, double) {
        return L::absolute_difference(y, p, options<L::Options>(red, w, ws));
      },
      [](double y, double p, double) { return std::abs(p - y); }, y_real, -2, 2, 0, {}, {0}));
  r.push_back(pointwise(
      "huber_loss",
      [](const auto& y, const auto& p, Reduction red, const auto& w, double ws, double delta) {
        auto o = options<L::HuberOptions>(red, w, ws);
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
      [](const auto& y, const auto& p, Reduction red, const auto& w, double ws, double) {
        return L::log_cosh(y, p, options<L::Options>(red, w, ws));
      },
      [](double y, double p, double) { return std::log(std::cosh(p - y)); }, y_real, -2, 2, 0, {}));
  r.push_back(pointwise(
      "exponential_loss",
      [](const auto& y, const auto& p, Reduction red, const auto& w, double ws, double) {
        return L::exponential_loss(y, p, options<L::Options>(red, w, ws));
      },
      [](double y, double x, double) { return std::exp(-(2 * y - 1) * x); }, y01, -2, 2, 0, {}));
  r.push_back(pointwise(
      "compute_weighted_loss",
      [](const auto&, const auto& p, Reduction red, const auto& w, double ws, double) {
        return L::compute_weighted_loss(p, options<L::Options>(red, w, ws));
      },
      [](double, double p, double) { return p; }, y_real, -2, 2, 0, {}));
  // extreme values (hand values): log_cosh(+-1000) = 1000 - log 2; sigmoid xent of logits
  // -+1000 against labels 1/0 = 1000
  // extreme differences (hand value): log_cosh(+-1000) = 1000 - log 2
  for (OpInfo& o : r)
    if (o.name == "log_cosh")
      o.samples.push_back(sample("differences of +-1000", gd::ops::kind::edge, {values({1000, -1000}, {2})},
                                 [](const auto& v) { return as_var(v, L::log_cosh(like(v, TensorD::zeros({2})), v[0], {.reduction = Reduction::none})); },
                                 [](const Refs&) { return values({1000 - 0.69314718055994531, 1000 - 0.69314718055994531}, {2}); }));
  {
    OpInfo o{.name = "l2_loss", .needs_broadcast = true, .needs_fused = true};
    auto half_sq = [](const Refs& t) {
      double s = 0;
      for (double v : t[0]) s += v * v / 2;
      return scalar(s);
    };
    o.samples.push_back(sample("[3,4]", gd::ops::kind::plain, {uniform({3, 4}, 370)}, [](const auto& v) { return as_var(v, L::l2_loss(v[0])); }, half_sq));
    o.samples.push_back(sample("rank 0", gd::ops::kind::edge, {uniform({}, 371)}, [](const auto& v) { return as_var(v, L::l2_loss(v[0])); }, half_sq));
    o.samples.push_back(sample("of x * b, b [4]", gd::ops::kind::fused | gd::ops::kind::broadcast, {uniform({3, 4}, 372), uniform({4}, 373)},
                               [](const auto& v) { return as_var(v, L::l2_loss(v[0] * v[1])); },
                               [half_sq](const Refs& t) { return half_sq({map2(t[0], t[1], [](double a, double b) { return a * b; })}); }));
    o.samples.push_back(no_gradient(sample("empty: 0", gd::ops::kind::edge, {TensorD::zeros({0})}, [](const auto& v) { return as_var(v, L::l2_loss(v[0])); },
                                           [](const Refs&) { return scalar(0); })));
    r.push_back(std::move(o));
  }
}

}  // namespace op_registry
