// Registry entries of the binary elementwise ops (+ - * / pow minimum maximum) with
// broadcasting and numbers on either side, where, and the comparison masks. References are
// scalar formulas in double applied over NumPy-broadcast operands (op_registry.hpp: map).
#include "op_registry.hpp"

namespace op_registry {
namespace {

/// A binary op: same shapes, [3,4] with [4], [3,1] with [1,4], a number on either side, and a
/// fused chain.
template <class F>
OpInfo binary(std::string name, F f, std::function<double(double, double)> ref, std::array<double, 2> dx = {-2, 2},
              std::array<double, 2> dy = {-2, 2}) {
  OpInfo info{.name = name, .needs_broadcast = true, .needs_fused = true, .needs_repeated = true};
  auto call = [f](const auto& v) { return as_var(v, f(v[0], v[1])); };
  auto r = [ref](const std::vector<TensorD>& x) { return map2(x[0], x[1], ref); };
  const std::array<std::pair<gd::Shape, gd::Shape>, 4> shapes{
      {{{3, 4}, {3, 4}}, {{3, 4}, {4}}, {{3, 1}, {1, 4}}, {{2, 1, 3}, {4, 1}}}};
  uint64_t seed = 10;
  for (const auto& [sx, sy] : shapes) {
    std::ostringstream label;
    label << sx << " with " << sy;
    info.samples.push_back(sample(label.str(), sx == sy ? gd::ops::kind::plain : gd::ops::kind::broadcast,
                                  {uniform(sx, seed, dx[0], dx[1]), uniform(sy, seed + 1, dy[0], dy[1])}, call, r));
    seed += 2;
  }
  const double c = (dy[0] + dy[1]) / 2 + 0.3, c0 = (dx[0] + dx[1]) / 2 + 0.3;
  info.samples.push_back(sample("tensor with the number " + std::to_string(c), gd::ops::kind::params,
                                {uniform({2, 3}, 30, dx[0], dx[1])},
                                [f, c](const auto& v) { return as_var(v, f(v[0], c)); },
                                [ref, c](const std::vector<TensorD>& x) { return map1(x[0], [&](double a) { return ref(a, c); }); }));
  info.samples.push_back(sample("the number " + std::to_string(c0) + " with a tensor", gd::ops::kind::params,
                                {uniform({2, 3}, 31, dy[0], dy[1])},
                                [f, c0](const auto& v) { return as_var(v, f(c0, v[0])); },
                                [ref, c0](const std::vector<TensorD>& x) { return map1(x[0], [&](double b) { return ref(c0, b); }); }));
  // one leaf as both operands: both of its gradients add up (d/dx f(x, x) = f_1 + f_2)
  info.samples.push_back(sample("f(x, x)", gd::ops::kind::repeated, {uniform({3, 4}, 34, std::max(dx[0], dy[0]), std::min(dx[1], dy[1]))},
                                [f](const auto& v) { return as_var(v, f(v[0], v[0])); },
                                [ref](const std::vector<TensorD>& x) { return map2(x[0], x[0], ref); }));
  info.samples.push_back(sample("tanh(f(x, y)) * x, y [4]", gd::ops::kind::fused | gd::ops::kind::broadcast | gd::ops::kind::repeated,
                                {uniform({3, 4}, 32, dx[0], dx[1]), uniform({4}, 33, dy[0], dy[1])},
                                [f](const auto& v) { return as_var(v, gd::tanh(f(v[0], v[1])) * v[0]); },
                                [ref](const std::vector<TensorD>& x) {
                                  return map2(map2(x[0], x[1], ref), x[0], [](double z, double a) { return std::tanh(z) * a; });
                                }));
  return info;
}

/// A comparison: a 0/1 mask that passes no gradient, checked with ties.
template <class F>
OpInfo comparison(std::string name, F f, std::function<bool(double, double)> ref) {
  OpInfo info{.name = name, .differentiable = false, .needs_broadcast = true};
  const TensorD x = values({-1, 0.5, 2, 0.5, 3, -2}, {2, 3}), y = values({0.5, 0.5, 2}, {3});  // ties included
  info.samples.push_back(no_gradient(sample("[2,3] with [3], ties", gd::ops::kind::broadcast | gd::ops::kind::edge, {x, y},
                                            [f](const auto& v) { return as_var(v, f(v[0], v[1])); },
                                            [ref](const std::vector<TensorD>& t) {
                                              return map2(t[0], t[1], [&](double a, double b) { return ref(a, b) ? 1.0 : 0.0; });
                                            })));
  info.samples.push_back(no_gradient(sample("with the number 0.5", gd::ops::kind::params, {x},
                                            [f](const auto& v) { return as_var(v, f(v[0], 0.5)); },
                                            [ref](const std::vector<TensorD>& t) {
                                              return map1(t[0], [&](double a) { return ref(a, 0.5) ? 1.0 : 0.0; });
                                            })));
  return info;
}

}  // namespace

void add_binary(std::vector<OpInfo>& r) {
  {
    // pow: x^p for a number p (unary), and x^y elementwise (binary, d/dy taken as 0 where x <= 0)
    OpInfo o = binary("pow", [](const auto& x, const auto& y) { return gd::pow(x, y); },
                      [](double x, double y) { return std::pow(x, y); }, {0.2, 2}, {-2, 2});
    o.samples.push_back(sample("x^2.5", gd::ops::kind::params, {uniform({3, 4}, 9, 0.1, 3)}, [](const auto& v) { return as_var(v, gd::pow(v[0], 2.5)); },
                               [](const std::vector<TensorD>& x) { return map1(x[0], [](double a) { return std::pow(a, 2.5); }); }));
    o.samples.push_back(sample("x^-1.5", gd::ops::kind::params, {uniform({3, 4}, 10, 0.2, 3)},
                               [](const auto& v) { return as_var(v, gd::pow(v[0], -1.5)); },
                               [](const std::vector<TensorD>& x) { return map1(x[0], [](double a) { return std::pow(a, -1.5); }); }));
    o.samples.push_back(sample("x^3 in a chain", gd::ops::kind::params | gd::ops::kind::fused, {uniform({3, 4}, 11, -2, 2)},
                               [](const auto& v) { return as_var(v, gd::pow(v[0] * 0.5, 3) + v[0]); },
                               [](const std::vector<TensorD>& x) { return map1(x[0], [](double a) { return std::pow(a * 0.5, 3) + a; }); }));
    r.push_back(std::move(o));
  }
  r.push_back(binary("+", [](const auto& x, const auto& y) { return x + y; }, [](double x, double y) { return x + y; }));
  r.push_back(binary("-", [](const auto& x, const auto& y) { return x - y; }, [](double x, double y) { return x - y; }));
  r.push_back(binary("*", [](const auto& x, const auto& y) { return x * y; }, [](double x, double y) { return x * y; }));
  r.push_back(binary("/", [](const auto& x, const auto& y) { return x / y; }, [](double x, double y) { return x / y; },
                     {-2, 2}, {0.5, 2}));
  {
    OpInfo o = binary("minimum", [](const auto& x, const auto& y) { return gd::minimum(x, y); },
                      [](double x, double y) { return std::min(x, y); });
    o.samples.push_back(no_gradient(sample("ties", gd::ops::kind::edge, {values({1, 2, 3}, {3})},
                                           [](const auto& v) { return as_var(v, gd::minimum(v[0], 2.0)); },
                                           [](const std::vector<TensorD>&) { return values({1, 2, 2}, {3}); })));
    r.push_back(std::move(o));
  }
  {
    OpInfo o = binary("maximum", [](const auto& x, const auto& y) { return gd::maximum(x, y); },
                      [](double x, double y) { return std::max(x, y); });
    o.samples.push_back(no_gradient(sample("ties", gd::ops::kind::edge, {values({1, 2, 3}, {3})},
                                           [](const auto& v) { return as_var(v, gd::maximum(v[0], 2.0)); },
                                           [](const std::vector<TensorD>&) { return values({2, 2, 3}, {3}); })));
    r.push_back(std::move(o));
  }
  {
    OpInfo o{.name = "where", .needs_broadcast = true, .needs_fused = true, .needs_repeated = true};
    const TensorD cond = values({1, 0, 0, 1, 1, 0, 1, 0, 0, 0, 1, 1}, {3, 4});
    o.samples.push_back(sample("mask [3,4], a [3,4], b [4]", gd::ops::kind::broadcast, {uniform({3, 4}, 12), uniform({4}, 13)},
                               [cond](const auto& v) { return as_var(v, gd::where(like(v, cond), v[0], v[1])); },
                               [cond](const std::vector<TensorD>& x) {
                                 return map({cond, x[0], x[1]}, [](const std::vector<double>& e) { return e[0] != 0 ? e[1] : e[2]; });
                               }));
    o.samples.push_back(sample("where(a > b, a * a, b * 3), b [3]", gd::ops::kind::fused | gd::ops::kind::broadcast | gd::ops::kind::repeated,
                               {uniform({4, 3}, 14), uniform({3}, 15)},
                               [](const auto& v) { return as_var(v, gd::where(v[0] > v[1], v[0] * v[0], v[1] * 3.0)); },
                               [](const std::vector<TensorD>& x) {
                                 return map2(x[0], x[1], [](double a, double b) { return a > b ? a * a : b * 3; });
                               }));
    o.samples.push_back(sample("a number as the other branch", gd::ops::kind::params, {uniform({3, 4}, 16)},
                               [cond](const auto& v) { return as_var(v, gd::where(like(v, cond), v[0], -1.5)); },
                               [cond](const std::vector<TensorD>& x) {
                                 return map2(cond, x[0], [](double c, double a) { return c != 0 ? a : -1.5; });
                               }));
    r.push_back(std::move(o));
  }
  r.push_back(comparison(">", [](const auto& x, const auto& y) { return x > y; }, [](double a, double b) { return a > b; }));
  r.push_back(comparison("<", [](const auto& x, const auto& y) { return x < y; }, [](double a, double b) { return a < b; }));
  r.push_back(comparison(">=", [](const auto& x, const auto& y) { return x >= y; }, [](double a, double b) { return a >= b; }));
  r.push_back(comparison("<=", [](const auto& x, const auto& y) { return x <= y; }, [](double a, double b) { return a <= b; }));
  r.push_back(comparison("==", [](const auto& x, const auto& y) { return x == y; }, [](double a, double b) { return a == b; }));
  r.push_back(comparison("!=", [](const auto& x, const auto& y) { return x != y; }, [](double a, double b) { return a != b; }));
}

}  // namespace op_registry
