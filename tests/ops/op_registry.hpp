// The op registry: one gd::ops::OpInfo per public op (include/gradus/testing/op_info.hpp for the
// form). The entries are split by area over registry_*.cpp so that each file compiles in
// reasonable time; test_registry.cpp walks them all. The references below are naive loops in
// double written here, independently of the library: they use Tensor only as storage (shape,
// data), never a gradus op.
#pragma once
#include "../support/counting_new.hpp"
#include <cmath>
#include <functional>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include <gradus/gradus.hpp>
#include <gradus/testing/op_info.hpp>

namespace op_registry {

namespace gd = gradus;
using TensorD = gd::Tensor<double>;
using VarD = gd::Var<double>;
using VarF = gd::Var<float>;
using TensorI64 = gd::Tensor<int64_t>;
using Idx = std::vector<int64_t>;
using gd::ops::OpInfo;
using gd::ops::OpSample;

/// The whole registry (built once), and the part each file contributes.
const std::vector<OpInfo>& registry();
void add_elementwise(std::vector<OpInfo>& r);
void add_binary(std::vector<OpInfo>& r);
void add_reductions(std::vector<OpInfo>& r);
void add_linalg_softmax(std::vector<OpInfo>& r);
void add_shape(std::vector<OpInfo>& r);
void add_nn(std::vector<OpInfo>& r);
void add_losses(std::vector<OpInfo>& r);
void add_xent(std::vector<OpInfo>& r);
/// operator new calls so far in this executable (tests/support/counting_new.cpp).
using gradus_test::allocations;

// ------------------------------------------------------------------ sample inputs
/// Uniform in [lo, hi], resampled while within `gap` of any of `avoid` (an op's kinks).
inline TensorD uniform(const gd::Shape& s, uint64_t seed, double lo = -2, double hi = 2, std::vector<double> avoid = {},
                  double gap = 0.05) {
  gd::Rng rng(seed);
  TensorD t(s);
  for (auto& v : t) {
    bool near;
    do {
      v = rng.uniform(lo, hi);
      near = false;
      for (double k : avoid) near = near || std::abs(v - k) < gap;
    } while (near);
  }
  return t;
}
inline TensorD values(std::vector<double> v, const gd::Shape& s) { return TensorD::from(std::move(v), s); }

// ------------------------------------------------------------------ naive references
inline Idx dims(const gd::Shape& s) { return Idx(s.begin(), s.end()); }
inline int64_t numel(const Idx& d) { return std::accumulate(d.begin(), d.end(), int64_t(1), std::multiplies<>()); }
/// Row-major multi-index of flat position `f` in dims `d`.
inline Idx unravel(int64_t f, const Idx& d) {
  Idx i(d.size());
  for (size_t k = d.size(); k-- > 0;) {
    i[k] = d[k] ? f % d[k] : 0;
    f = d[k] ? f / d[k] : 0;
  }
  return i;
}
inline int64_t ravel(const Idx& i, const Idx& d) {
  int64_t f = 0;
  for (size_t k = 0; k < d.size(); ++k) f = f * d[k] + i[k];
  return f;
}
/// x at the multi-index `i` of a (right-aligned, NumPy) broadcast of x to rank i.size().
inline double at_broadcast(const TensorD& x, const Idx& i) {
  const Idx d = dims(x.shape());
  Idx j(d.size());
  for (size_t k = 0; k < d.size(); ++k) j[k] = d[k] == 1 ? 0 : i[i.size() - d.size() + k];
  return x.data()[ravel(j, d)];
}
inline double at(const TensorD& x, const Idx& i) { return x.data()[ravel(i, dims(x.shape()))]; }
/// The NumPy broadcast of several shapes.
inline Idx broadcast_dims(const std::vector<Idx>& ds) {
  size_t r = 0;
  for (const auto& d : ds) r = std::max(r, d.size());
  Idx out(r, 1);
  for (const auto& d : ds)
    for (size_t k = 0; k < d.size(); ++k) {
      int64_t& o = out[r - d.size() + k];
      if (d[k] != 1) o = d[k];
    }
  return out;
}
/// A tensor of dims `d` with element i = f(multi-index of i).
inline TensorD build(const Idx& d, const std::function<double(const Idx&)>& f) {
  TensorD t{gd::Shape(d)};
  for (int64_t k = 0, n = numel(d); k < n; ++k) t.data()[k] = f(unravel(k, d));
  return t;
}
/// Elementwise f over broadcast operands.
inline TensorD map(const std::vector<TensorD>& xs, const std::function<double(const std::vector<double>&)>& f) {
  std::vector<Idx> ds;
  for (const TensorD& x : xs) ds.push_back(dims(x.shape()));
  return build(broadcast_dims(ds), [&](const Idx& i) {
    std::vector<double> v;
    for (const TensorD& x : xs) v.push_back(at_broadcast(x, i));
    return f(v);
  });
}
inline TensorD map1(const TensorD& x, const std::function<double(double)>& f) {
  return map({x}, [&](const std::vector<double>& v) { return f(v[0]); });
}
inline TensorD map2(const TensorD& x, const TensorD& y, const std::function<double(double, double)>& f) {
  return map({x, y}, [&](const std::vector<double>& v) { return f(v[0], v[1]); });
}
/// Reduces the axes in `axes` (none: all) of x by f(list of the reduced values).
inline TensorD reduce(const TensorD& x, std::vector<int64_t> axes, bool keepdims,
                 const std::function<double(const std::vector<double>&)>& f) {
  const Idx d = dims(x.shape());
  const auto r = int64_t(d.size());
  std::vector<bool> red(d.size(), axes.empty());
  for (int64_t a : axes) red[size_t(a < 0 ? a + r : a)] = true;
  Idx od, kd;  // output dims, kept dims (with 1 for reduced)
  for (size_t k = 0; k < d.size(); ++k) {
    kd.push_back(red[k] ? 1 : d[k]);
    if (!red[k] || keepdims) od.push_back(red[k] ? 1 : d[k]);
  }
  std::vector<std::vector<double>> groups(size_t(numel(kd)));
  for (int64_t f0 = 0; f0 < numel(d); ++f0) {
    Idx i = unravel(f0, d);
    for (size_t k = 0; k < d.size(); ++k)
      if (red[k]) i[k] = 0;
    groups[size_t(ravel(i, kd))].push_back(x.data()[f0]);
  }
  TensorD out{gd::Shape(od)};
  for (size_t g = 0; g < groups.size(); ++g) out.data()[g] = f(groups[g]);
  return out;
}
inline double vsum(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0); }
inline double vmax(const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }
inline double vmin(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }
inline double vlogsumexp(const std::vector<double>& v) {
  const double m = vmax(v);
  double s = 0;
  for (double x : v) s += std::exp(x - m);
  return m + std::log(s);
}
inline TensorD scalar(double v) {
  TensorD t{gd::Shape{}};
  t.data()[0] = v;
  return t;
}

// ------------------------------------------------------------------ building samples
/// The device the device pass is running the current sample on (the CPU otherwise): where
/// `like` and `on_device` put the tensors a call uses besides its leaves.
inline gd::Device& sample_device() {
  static gd::Device d = gd::cpu;
  return d;
}
/// The element type of a call's leaves (`const auto& v` in a call written for both types).
template <class Vs>
using element_of = typename std::remove_cvref_t<Vs>::value_type::value_type;
/// A call's result as a Var of its leaves' element type.
template <class T, class E>
gd::Var<T> as_var(const std::vector<gd::Var<T>>&, const E& e) {
  return gd::Var<T>(e);
}
/// `x` in element type T, element by element.
template <class T>
gd::Tensor<T> convert(const TensorD& x) {
  gd::Tensor<T> t(x.shape());
  for (int64_t i = 0; i < x.size(); ++i) t.data()[i] = static_cast<T>(x.data()[i]);
  return t;
}
/// A double tensor a call uses besides its leaves (a target, a mask), in the leaves' element type
/// and on the sample's device. In double on the CPU it is `x` itself (Tensor::to shares the
/// storage of a tensor already there), so that a warm call still allocates nothing.
template <class T>
gd::Tensor<T> like(const std::vector<gd::Var<T>>&, const TensorD& x) {
  if (!x.defined()) return {};
  if constexpr (std::is_same_v<T, double>)
    return x.to(sample_device());
  else
    return convert<T>(x).to(sample_device());
}
/// Integer labels or indices a call uses, on the sample's device (`x` itself on the CPU).
inline TensorI64 on_device(const TensorI64& x) { return x.to(sample_device()); }

/// A sample: label, kinds, inputs, call, reference (tolerances default; adjust the result). A
/// call written for any element type (`[](const auto& v) { ... }`, a generic lambda) is kept in
/// float as well as in double, for the device pass; one written for `std::vector<VarD>` only in
/// double.
template <class Call>
OpSample sample(std::string label, unsigned kinds, std::vector<TensorD> inputs, Call call,
                std::function<TensorD(const std::vector<TensorD>&)> reference) {
  OpSample s;
  s.label = std::move(label);
  s.kinds = kinds;
  s.inputs = std::move(inputs);
  if constexpr (!requires { &Call::operator(); })  // a template call operator: generic
    s.call_float = [call](const std::vector<VarF>& v) { return VarF(call(v)); };
  s.call = [call = std::move(call)](const std::vector<VarD>& v) { return VarD(call(v)); };
  s.reference = std::move(reference);
  return s;
}
inline OpSample with_tol(OpSample s, double forward, double gradient, double delta = 1e-6) {
  s.forward_tolerance = forward;
  s.gradient_tolerance = gradient;
  s.delta = delta;
  return s;
}
/// Marks every sample of `o` as allocating when warm (see OpSample::steady_state); `why` (where
/// the allocations are) goes into the sample labels that failures print.
inline void allocates(OpInfo& o, const std::string& why) {
  for (OpSample& s : o.samples) {
    s.steady_state = false;
    s.label += " [allocates when warm: " + why + "]";
  }
}
inline OpSample no_gradient(OpSample s) {
  s.check_gradient = false;
  return s;
}

}  // namespace op_registry
