// Registry entries of the unary elementwise ops (parameterised ones at non-default values too);
// the binary ones, where and the masks are in registry_binary.cpp. References are scalar
// formulas in double (<cmath>) and hand values.
#include "op_registry.hpp"

namespace op_registry {
namespace {

constexpr double kSelu = 1.0507009873554804934193349852946, kSeluAlpha = 1.6732632423543772848170429916717;

double gelu_ref(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double softplus_ref(double x) { return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)); }
double sigmoid_ref(double x) { return x >= 0 ? 1 / (1 + std::exp(-x)) : std::exp(x) / (1 + std::exp(x)); }

/// A unary op f with scalar reference `ref`, sampled in [lo, hi] away from `kinks`: a plain [3,5]
/// sample, a rank-0 one, and f inside a fused chain with a broadcast operand.
template <class F>
OpInfo unary(std::string name, F f, std::function<double(double)> ref, double lo = -2, double hi = 2,
             std::vector<double> kinks = {0}) {
  OpInfo info{.name = name, .needs_broadcast = true, .needs_fused = true, .needs_repeated = true};
  info.samples.push_back(sample("[3,5]", gd::ops::kind::plain, {uniform({3, 5}, 1, lo, hi, kinks)},
                                [f](const auto& v) { return as_var(v, f(v[0])); },
                                [ref](const std::vector<TensorD>& x) { return map1(x[0], ref); }));
  info.samples.push_back(sample("rank 0", gd::ops::kind::edge, {uniform({}, 2, lo, hi, kinks)},
                                [f](const auto& v) { return as_var(v, f(v[0])); },
                                [ref](const std::vector<TensorD>& x) { return map1(x[0], ref); }));
  info.samples.push_back(sample("sin(f(x) * b) + x, b [5]", gd::ops::kind::fused | gd::ops::kind::broadcast | gd::ops::kind::repeated,
                                {uniform({3, 5}, 3, lo, hi, kinks), uniform({5}, 4, 0.5, 1)},
                                [f](const auto& v) { return as_var(v, gd::sin(f(v[0]) * v[1]) + v[0]); },
                                [ref](const std::vector<TensorD>& x) {
                                  return map2(map2(x[0], x[1], [&](double a, double b) { return std::sin(ref(a) * b); }),
                                              x[0], [](double s, double a) { return s + a; });
                                }));
  return info;
}
/// A sample of f at hand-picked `x` with `expected` values (computed with Python's math module
/// where not obvious).
template <class F>
OpSample at_values(std::string label, F f, std::vector<double> x, std::vector<double> expected, bool gradient = true) {
  const auto n = int64_t(x.size());
  OpSample s = sample(std::move(label), gd::ops::kind::edge, {values(std::move(x), {n})},
                      [f](const auto& v) { return as_var(v, f(v[0])); },
                      [e = std::move(expected), n](const std::vector<TensorD>&) { return values(e, {n}); });
  s.check_gradient = gradient;
  return s;
}

}  // namespace

void add_elementwise(std::vector<OpInfo>& r) {
  {
    OpInfo o = unary("neg", [](const auto& x) { return gd::neg(x); }, [](double x) { return -x; });
    o.samples.push_back(sample("-x (operator)", gd::ops::kind::plain, {uniform({4}, 5)}, [](const auto& v) { return as_var(v, -v[0]); },
                               [](const std::vector<TensorD>& x) { return map1(x[0], [](double a) { return -a; }); }));
    r.push_back(std::move(o));
  }
  r.push_back(unary("abs", [](const auto& x) { return gd::abs(x); }, [](double x) { return std::abs(x); }));
  {
    OpInfo o{.name = "sign", .differentiable = false};
    o.samples.push_back(no_gradient(at_values("at -2, -0, 0, 0.5", [](const auto& x) { return gd::sign(x); },
                                              {-2, -0.0, 0, 0.5}, {-1, 0, 0, 1})));
    r.push_back(std::move(o));
  }
  {
    OpInfo o = unary("exp", [](const auto& x) { return gd::exp(x); }, [](double x) { return std::exp(x); });
    o.samples.push_back(at_values("extremes", [](const auto& x) { return gd::exp(x); }, {-745, -30, 30},
                                  {5e-324, 9.357622968840175e-14, 10686474581524.463}));
    o.samples.back().forward_tolerance = 1e-15;  // relative beyond 1
    o.samples.back().check_gradient = false;
    r.push_back(std::move(o));
  }
  r.push_back(unary("log", [](const auto& x) { return gd::log(x); }, [](double x) { return std::log(x); }, 0.1, 3, {}));
  r.push_back(unary("log1p", [](const auto& x) { return gd::log1p(x); }, [](double x) { return std::log1p(x); }, -0.9, 3, {}));
  r.push_back(unary("sqrt", [](const auto& x) { return gd::sqrt(x); }, [](double x) { return std::sqrt(x); }, 0.1, 3, {}));
  r.push_back(unary("rsqrt", [](const auto& x) { return gd::rsqrt(x); }, [](double x) { return 1 / std::sqrt(x); }, 0.2, 3, {}));
  r.push_back(unary("square", [](const auto& x) { return gd::square(x); }, [](double x) { return x * x; }));
  r.push_back(unary("sin", [](const auto& x) { return gd::sin(x); }, [](double x) { return std::sin(x); }));
  r.push_back(unary("cos", [](const auto& x) { return gd::cos(x); }, [](double x) { return std::cos(x); }));
  {
    OpInfo o = unary("tanh", [](const auto& x) { return gd::tanh(x); }, [](double x) { return std::tanh(x); });
    o.samples.push_back(at_values("saturated", [](const auto& x) { return gd::tanh(x); }, {-1000, -30, 30, 1000}, {-1, -1, 1, 1}));
    r.push_back(std::move(o));
  }
  {
    OpInfo o = unary("sigmoid", [](const auto& x) { return gd::sigmoid(x); }, sigmoid_ref);
    o.samples.push_back(at_values("saturated", [](const auto& x) { return gd::sigmoid(x); }, {-1000, -30, 30, 1000},
                                  {0.0, 9.3576229688393e-14, 0.9999999999999065, 1.0}));
    r.push_back(std::move(o));
  }
  r.push_back(unary("relu", [](const auto& x) { return gd::relu(x); }, [](double x) { return x > 0 ? x : 0.0; }));
  {
    OpInfo o = unary("leaky_relu", [](const auto& x) { return gd::leaky_relu(x); }, [](double x) { return x > 0 ? x : 0.2 * x; });
    o.samples.push_back(sample("alpha 0.01", gd::ops::kind::params, {uniform({3, 4}, 6, -2, 2, {0})},
                               [](const auto& v) { return as_var(v, gd::leaky_relu(v[0], 0.01)); },
                               [](const std::vector<TensorD>& x) { return map1(x[0], [](double a) { return a > 0 ? a : 0.01 * a; }); }));
    r.push_back(std::move(o));
  }
  {
    OpInfo o = unary("elu", [](const auto& x) { return gd::elu(x); }, [](double x) { return x > 0 ? x : std::exp(x) - 1; });
    o.samples.push_back(sample("alpha 2.5", gd::ops::kind::params, {uniform({3, 4}, 7, -2, 2, {0})},
                               [](const auto& v) { return as_var(v, gd::elu(v[0], 2.5)); },
                               [](const std::vector<TensorD>& x) {
                                 return map1(x[0], [](double a) { return a > 0 ? a : 2.5 * (std::exp(a) - 1); });
                               }));
    r.push_back(std::move(o));
  }
  {
    OpInfo o = unary("selu", [](const auto& x) { return gd::selu(x); },
                     [](double x) { return x > 0 ? kSelu * x : kSelu * kSeluAlpha * (std::exp(x) - 1); });
    o.samples.push_back(at_values("at -30 and 30", [](const auto& x) { return gd::selu(x); }, {-30, 30},
                                  {-1.758099340847212, 31.521029620664415}));
    o.samples.back().forward_tolerance = 1e-14;
    r.push_back(std::move(o));
  }
  {
    OpInfo o = unary("gelu", [](const auto& x) { return gd::gelu(x); }, gelu_ref);
    o.samples.push_back(at_values("hand values", [](const auto& x) { return gd::gelu(x); }, {-2, -0.5, 0.5, 3},
                                  {-0.04550026389635842, -0.15426876936299344, 0.34573123063700656, 2.99595030590511}));
    r.push_back(std::move(o));
  }
  {
    OpInfo o = unary("softplus", [](const auto& x) { return gd::softplus(x); }, softplus_ref, -2, 2, {});
    o.samples.push_back(at_values("no overflow", [](const auto& x) { return gd::softplus(x); }, {-1000, -30, 30, 1000},
                                  {0.0, 9.357622968839737e-14, 30.000000000000092, 1000.0}));
    r.push_back(std::move(o));
  }
  r.push_back(unary("softsign", [](const auto& x) { return gd::softsign(x); }, [](double x) { return x / (1 + std::abs(x)); }));
  {
    OpInfo o = unary("clamp", [](const auto& x) { return gd::clamp(x, -1, 1); },
                     [](double x) { return std::min(std::max(x, -1.0), 1.0); }, -2, 2, {-1, 1});
    o.samples.push_back(sample("lo -0.5, hi 1.5", gd::ops::kind::params, {uniform({3, 4}, 8, -2, 2, {-0.5, 1.5})},
                               [](const auto& v) { return as_var(v, gd::clamp(v[0], -0.5, 1.5)); },
                               [](const std::vector<TensorD>& x) {
                                 return map1(x[0], [](double a) { return std::min(std::max(a, -0.5), 1.5); });
                               }));
    r.push_back(std::move(o));
  }
}

}  // namespace op_registry
