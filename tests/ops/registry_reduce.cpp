// Registry entries of the reductions: sum mean max min prod logsumexp (full, one axis, negative
// axes, keepdims, axis lists where the op takes them) and argmax argmin. References are naive
// loops over the reduced groups (op_registry.hpp: reduce).
#include "op_registry.hpp"

namespace op_registry {
namespace {

using V = std::vector<VarD>;
using Group = std::function<double(const std::vector<double>&)>;

double vmean(const std::vector<double>& v) { return vsum(v) / double(v.size()); }
double vprod(const std::vector<double>& v) {
  double p = 1;
  for (double x : v) p *= x;
  return p;
}

/// The samples every axis reduction gets: full, axis 1, axis -1 with keepdims, axis 0 of a
/// [1,5] (a size-1 axis), and a [6] vector; `f_all(x)` and `f_axis(x, axis, keepdims)` call it.
template <class FAll, class FAxis>
void axis_samples(OpInfo& o, FAll f_all, FAxis f_axis, Group g, double lo = -2, double hi = 2) {
  const TensorD x = uniform({2, 3, 4}, 40, lo, hi);
  o.samples.push_back(sample("all of [2,3,4]", gd::ops::kind::plain, {x}, [f_all](const auto& v) { return as_var(v, f_all(v[0])); },
                             [g](const std::vector<TensorD>& t) { return reduce(t[0], {}, false, g); }));
  o.samples.push_back(sample("axis 1 of [2,3,4]", gd::ops::kind::params, {x}, [f_axis](const auto& v) { return as_var(v, f_axis(v[0], 1, false)); },
                             [g](const std::vector<TensorD>& t) { return reduce(t[0], {1}, false, g); }));
  o.samples.push_back(sample("axis -1 keepdims", gd::ops::kind::params, {x}, [f_axis](const auto& v) { return as_var(v, f_axis(v[0], -1, true)); },
                             [g](const std::vector<TensorD>& t) { return reduce(t[0], {-1}, true, g); }));
  o.samples.push_back(sample("axis -3 (= 0)", gd::ops::kind::params, {x}, [f_axis](const auto& v) { return as_var(v, f_axis(v[0], -3, false)); },
                             [g](const std::vector<TensorD>& t) { return reduce(t[0], {0}, false, g); }));
  o.samples.push_back(sample("axis 0 of [1,5] (size 1)", gd::ops::kind::edge, {uniform({1, 5}, 41, lo, hi)},
                             [f_axis](const auto& v) { return as_var(v, f_axis(v[0], 0, false)); },
                             [g](const std::vector<TensorD>& t) { return reduce(t[0], {0}, false, g); }));
  o.samples.push_back(sample("all of a [6]", gd::ops::kind::edge, {uniform({6}, 42, lo, hi)},
                             [f_all](const auto& v) { return as_var(v, f_all(v[0])); },
                             [g](const std::vector<TensorD>& t) { return reduce(t[0], {}, false, g); }));
  o.samples.push_back(sample("of x * x + x, axis 1", gd::ops::kind::fused | gd::ops::kind::repeated, {uniform({2, 3, 4}, 46, lo, hi)},
                             [f_axis](const auto& v) { return as_var(v, f_axis(v[0] * v[0] + v[0], 1, false)); },
                             [g](const std::vector<TensorD>& t) { return reduce(map1(t[0], [](double a) { return a * a + a; }), {1}, false, g); }));
}

/// sum and mean: also axis lists, and fused with an elementwise argument (forward and backward).
template <class FAll, class FAxis, class FList>
OpInfo sum_like(std::string name, FAll f, FAxis f_axis, FList fl, Group g) {
  OpInfo o{.name = name, .needs_broadcast = true, .needs_fused = true, .needs_repeated = true};
  axis_samples(o, f, f_axis, g);
  const TensorD x = uniform({2, 3, 4}, 43);
  o.samples.push_back(sample("axes {0, 2} keepdims", gd::ops::kind::params, {x},
                             [fl](const auto& v) { return as_var(v, fl(v[0], {0, 2}, true)); },
                             [g](const std::vector<TensorD>& t) { return reduce(t[0], {0, 2}, true, g); }));
  o.samples.push_back(sample("axes {-1, 0}", gd::ops::kind::params, {x}, [fl](const auto& v) { return as_var(v, fl(v[0], {-1, 0}, false)); },
                             [g](const std::vector<TensorD>& t) { return reduce(t[0], {-1, 0}, false, g); }));
  o.samples.push_back(sample("of exp(x) * b, b [4], all", gd::ops::kind::fused | gd::ops::kind::broadcast, {x, uniform({4}, 44)},
                             [f](const auto& v) { return as_var(v, f(gd::exp(v[0]) * v[1])); },
                             [g](const std::vector<TensorD>& t) {
                               return reduce(map2(t[0], t[1], [](double a, double b) { return std::exp(a) * b; }), {}, false, g);
                             }));
  o.samples.push_back(sample("of x * x + exp(x), all", gd::ops::kind::fused | gd::ops::kind::repeated, {x},
                             [f](const auto& v) { return as_var(v, f(v[0] * v[0] + gd::exp(v[0]))); },
                             [g](const std::vector<TensorD>& t) {
                               return reduce(map1(t[0], [](double a) { return a * a + std::exp(a); }), {}, false, g);
                             }));
  o.samples.push_back(sample("of square(x - y), y [3,1], axis 1", gd::ops::kind::fused | gd::ops::kind::broadcast,
                             {x, uniform({3, 1}, 45)}, [f_axis](const auto& v) { return as_var(v, f_axis(gd::square(v[0] - v[1]), 1, false)); },
                             [g](const std::vector<TensorD>& t) {
                               return reduce(map2(t[0], t[1], [](double a, double b) { return (a - b) * (a - b); }), {1}, false, g);
                             }));
  return o;
}

}  // namespace

void add_reductions(std::vector<OpInfo>& r) {
  using Axes = std::initializer_list<int64_t>;
  r.push_back(sum_like(
      "sum", [](const auto& x) { return gd::sum(x); }, [](const auto& x, int64_t a, bool k) { return gd::sum(x, a, k); },
      [](const auto& x, Axes a, bool k) { return gd::sum(x, a, k); }, vsum));
  r.push_back(sum_like(
      "mean", [](const auto& x) { return gd::mean(x); }, [](const auto& x, int64_t a, bool k) { return gd::mean(x, a, k); },
      [](const auto& x, Axes a, bool k) { return gd::mean(x, a, k); }, vmean));
  {
    OpInfo o{.name = "max"};
    axis_samples(o, [](const auto& x) { return gd::max(x); }, [](const auto& x, int64_t a, bool k) { return gd::max(x, a, k); }, vmax);
    // ties share the gradient equally, which is also what central differences see
    o.samples.push_back(sample("ties along axis 1", gd::ops::kind::edge, {values({1, 3, 3, -1, 2, -1}, {2, 3})},
                               [](const auto& v) { return as_var(v, gd::max(v[0], 1)); },
                               [](const std::vector<TensorD>&) { return values({3, 2}, {2}); }));
    o.samples.push_back(sample("of x * 2 + 1 (a chain as argument)", gd::ops::kind::fused, {uniform({3, 4}, 46)},
                               [](const auto& v) { return as_var(v, gd::max(v[0] * 2.0 + 1.0, 0)); },
                               [](const std::vector<TensorD>& t) {
                                 return reduce(map1(t[0], [](double a) { return a * 2 + 1; }), {0}, false, vmax);
                               }));
    r.push_back(std::move(o));
  }
  {
    OpInfo o{.name = "min"};
    axis_samples(o, [](const auto& x) { return gd::min(x); }, [](const auto& x, int64_t a, bool k) { return gd::min(x, a, k); }, vmin);
    o.samples.push_back(sample("ties, all", gd::ops::kind::edge, {values({1, -3, 3, -3, 2, -1}, {2, 3})},
                               [](const auto& v) { return as_var(v, gd::min(v[0])); },
                               [](const std::vector<TensorD>&) { return scalar(-3); }));
    r.push_back(std::move(o));
  }
  {
    OpInfo o{.name = "prod"};
    axis_samples(o, [](const auto& x) { return gd::prod(x); }, [](const auto& x, int64_t a, bool k) { return gd::prod(x, a, k); },
                 vprod, 0.5, 1.5);
    // exact gradients with zeros: d/dx_i prod = product of the others
    o.samples.push_back(sample("one zero per row, two in the last", gd::ops::kind::edge, {values({0, 2, 3, 1.5, 0, -2, 0, 0, 4}, {3, 3})},
                               [](const auto& v) { return as_var(v, gd::prod(v[0], -1)); },
                               [](const std::vector<TensorD>&) { return values({0, 0, 0}, {3}); }));
    r.push_back(std::move(o));
  }
  {
    OpInfo o{.name = "logsumexp"};
    axis_samples(o, [](const auto& x) { return gd::logsumexp(x); },
                 [](const auto& x, int64_t a, bool k) { return gd::logsumexp(x, a, k); }, vlogsumexp);
    // log(e^1000 + e^1000 + e^-1000) = 1000 + log 2; and -1000 + log 3 (hand values)
    o.samples.push_back(sample("logits of +-1000", gd::ops::kind::edge, {values({1000, 1000, -1000, -1000, -1000, -1000}, {2, 3})},
                               [](const auto& v) { return as_var(v, gd::logsumexp(v[0], 1)); },
                               [](const std::vector<TensorD>&) {
                                 return values({1000 + 0.69314718055994531, -1000 + 1.0986122886681098}, {2});
                               }));
    r.push_back(std::move(o));
  }
  for (bool is_max : {true, false}) {
    OpInfo o{.name = is_max ? "argmax" : "argmin", .differentiable = false};
    // the first extremum wins ties
    const TensorD x = values({1, 5, 5, -2, 0, -2, 7, 7, 3, 3, -4, 6}, {3, 4});
    for (int64_t axis : {0, 1, -1}) {
      o.samples.push_back(no_gradient(sample("axis " + std::to_string(axis) + ", ties", gd::ops::kind::edge, {x},
                                             [is_max, axis](const auto& v) {
                                               using T = element_of<decltype(v)>;
                                               return gd::Var<T>::constant(gd::cast<T>(is_max ? gd::argmax(v[0], axis)
                                                                                          : gd::argmin(v[0], axis)));
                                             },
                                             [is_max, axis](const std::vector<TensorD>& t) {
                                               const Idx d = dims(t[0].shape());
                                               const int64_t a = axis < 0 ? axis + 2 : axis;
                                               Idx od;
                                               for (int64_t k = 0; k < 2; ++k)
                                                 if (k != a) od.push_back(d[size_t(k)]);
                                               return build(od, [&](const Idx& i) {
                                                 int64_t best = 0;
                                                 double bv = 0;
                                                 for (int64_t j = 0; j < d[size_t(a)]; ++j) {
                                                   const double e = a == 0 ? at(t[0], {j, i[0]}) : at(t[0], {i[0], j});
                                                   if (j == 0 || (is_max ? e > bv : e < bv)) best = j, bv = e;
                                                 }
                                                 return double(best);
                                               });
                                             })));
    }
    r.push_back(std::move(o));
  }
}

}  // namespace op_registry
