// gradus/ops/reduce.hpp — reductions: sum mean max min prod logsumexp argmax argmin.
//
// `sum` and `mean` fuse with the elementwise chain they reduce: `mean(square(p - y))` is one
// pass forward, and its backward is one pass that recomputes the chain block by block, so no
// intermediate tensor is stored (backend::sum_all / sum_into / fused_backward). The other
// reductions materialise their input and run a backend kernel over the [outer, reduced, inner]
// view of the reduced axis (backend/cpu/reduce.hpp).
#pragma once
#include <cmath>
#include <initializer_list>
#include <limits>

#include "gradus/core/compiled.hpp"
#include "gradus/autodiff/materialize.hpp"
#include "gradus/backend/backend.hpp"

namespace gradus {
namespace detail {

/// Which axes of `in` a reduction removes; none listed means all.
struct ReducePlan {
  Shape in, keep, out;  // keep: reduced axes kept as 1; out: as returned
  int64_t count = 1;    // elements reduced into each output
};

ReducePlan plan_reduce(const Shape& in, std::initializer_list<int64_t> axes, bool keepdims, const char* op);

/// `sum`/`mean` of an expression: its backward is the fused backward of the expression with the
/// output's adjoint broadcast back over the reduced axes.
template <class E>
struct SumNode final : Node<value_type_t<E>> {
  using T = value_type_t<E>;
  E expr;
  ReducePlan plan;
  T scale;
  bool mean;  ///< named "mean" (else "sum") for the profiler; a flag, so the node does not grow
  SumNode(Tensor<T> v, const E& e, ReducePlan p, T s, bool pending, bool is_mean)
      : Node<T>(std::move(v)), expr(e), plan(p), scale(s), mean(is_mean) {
    this->requires_grad = true;
    this->value_pending = pending;
  }
  /// A full reduction defers its value: a loss that is backpropagated right away gets it from
  /// the backward sweep, which evaluates the chain anyway, instead of from a pass of its own.
  void compute_value() override {
    backend::sum_all(expr, plan.in, this->value.device_data(), scale, this->value.device());
    this->value_pending = false;
  }
  void backward() override {
    fused_backward(expr, plan.in, this->adj.reshape(plan.keep), scale,
                   this->value_pending ? this->value.device_data() : nullptr, scale);
    this->value_pending = false;
  }
  void inputs(std::vector<NodeBase*>& out) const override { collect_var_inputs(expr, out); }
  const char* name() const override { return mean ? "mean" : "sum"; }
};

/// The sum (or mean) of e by plan p. `All` says at compile time that p reduces every axis, as
/// `sum(e)` and `mean(e)` do: their expression then compiles only the full reduction's kernels,
/// not also those of a reduction over some axes (sum_into), which such a plan never runs.
template <bool All, class E>
auto sum_run(const E& e, const ReducePlan& p, bool mean) {
  using T = value_type_t<E>;
  const T scale = mean ? T(1) / T(p.count) : T(1);
  const Device dev = backend::device_of(e);
  if constexpr (is_differentiable_v<E>) {
    if (p.keep.numel() == 1 && grad_enabled() && any_requires_grad(e))
      return Var<T>::from_node(
          make_node<SumNode<std::remove_cvref_t<E>>>(Tensor<T>::empty(p.out, dev), e, p, scale, true, mean));
  }
  Tensor<T> out = Tensor<T>::empty(p.keep, dev);
  if constexpr (std::same_as<std::remove_cvref_t<E>, ScalarExpr<T>>) {  // a bare number: no operand to sum
    backend::fill(out.device_data(), out.size(), T(0), dev);
  } else if (All || p.keep.numel() == 1) {
    backend::sum_all(e, p.in, out.device_data(), scale, dev);
  } else if constexpr (!All) {
    backend::fill(out.device_data(), out.size(), T(0), dev);
    backend::sum_into(e, p.in, out.device_data(), p.keep, dev);
    if (mean) out.assign(out * scale);
  }
  out = out.reshape(p.out);
  if constexpr (is_differentiable_v<E>) {
    if (grad_enabled() && any_requires_grad(e))
      return Var<T>::from_node(make_node<SumNode<std::remove_cvref_t<E>>>(std::move(out), e, p, scale, false, mean));
    return Var<T>::constant(std::move(out));
  } else {
    return out;
  }
}

template <bool All = false, class E>
auto sum_impl(const E& e, std::initializer_list<int64_t> axes, bool keepdims, bool mean) {
  OpScope prof;
  const ReducePlan p = plan_reduce(e.shape(), axes, keepdims, mean ? "mean" : "sum");
  auto r = sum_run<All>(e, p, mean);
  if (prof) [[unlikely]] {  // one pass over the fused expression, one add per element
    prof.flops(double(e.shape().numel()) * (1 + count_ops<std::remove_cvref_t<E>>()));
    set_op_attrs_list({keepdims}, axes);  // keepdims, then the axes (none: all), for gd::onnx
    describe_expression(prof.observer(), e, node_seq(r), mean ? "mean" : "sum", &p.out);
  }
  return r;
}

using backend::AxisView;

/// A one-axis reduction's settings for a graph rebuilt from the ops (gd::onnx): keepdims, then
/// the axis (none when it reduces everything).
inline void reduction_attrs(bool keepdims, bool all, int64_t axis, int rank, const char* op) {
  if (!op_observer()) [[likely]]
    return;
  if (all)
    set_op_attrs({keepdims});
  else
    set_op_attrs({keepdims, normalize_axis(axis, rank, op)});
}

ReducePlan plan_axis(const Shape& in, int64_t axis, bool all, bool keepdims, const char* op);

/// max/min along one axis; the gradient is shared equally among tied extrema (as TensorFlow).
template <class E>
auto extremum_impl(const E& e, int64_t axis, bool all, bool keepdims, bool is_max) {
  gradus::detail::OpScope prof;
  using T = value_type_t<E>;
  const char* op = is_max ? "max" : "min";
  auto x = materialize(e);
  const Tensor<T>& xv = detail::value_of(x);
  GRADUS_CHECK(value_error, xv.size() > 0, op, ": reduction of an empty tensor ", xv.shape());
  const ReducePlan p = plan_axis(xv.shape(), axis, all, keepdims, op);
  const AxisView v(xv.shape(), all ? -1 : normalize_axis(axis, xv.rank(), op));
  Tensor<T> out = Tensor<T>::empty(p.out, xv.device());
  backend::reduce_extremum(v, xv.device_data(), out.device_data(), is_max, xv.device());
  reduction_attrs(keepdims, all, axis, xv.rank(), op);
  if constexpr (Real<T>) {
    return make_result(op, std::move(out), [v](const Tensor<T>& g, const Tensor<T>& y, const auto& in) {
      if (!needs_grad(in)) return;
      const Tensor<T>& xin = value_of(in);
      Tensor<T> dx = Tensor<T>::empty(xin.shape(), xin.device());
      backend::reduce_extremum_backward(v, xin.device_data(), y.device_data(), g.device_data(), dx.device_data(),
                                        xin.device());
      add_grad(in, dx);
    }, x);
  } else {
    return out;
  }
}

/// Index of the first extremum along `axis`.
template <class E>
Tensor<int64_t> arg_impl(const E& e, int64_t axis, bool is_max) {
  const char* op = is_max ? "argmax" : "argmin";
  const auto xv = eval(e);
  GRADUS_CHECK(value_error, xv.size() > 0, op, ": reduction of an empty tensor ", xv.shape());
  const ReducePlan p = plan_reduce(xv.shape(), {axis}, false, op);
  const AxisView v(xv.shape(), normalize_axis(axis, xv.rank(), op));
  Tensor<int64_t> out = Tensor<int64_t>::empty(p.out, xv.device());
  backend::reduce_arg(v, xv.device_data(), out.device_data(), is_max, xv.device());
  return out;
}

}  // namespace detail

/// Sum of all elements (rank-0 result), or over `axes`. Fuses with an elementwise argument.
///   gd::sum(x);  gd::sum(x, 1);  gd::sum(x, {0, 2}, /*keepdims=*/true);
template <Expression E>
auto sum(const E& e) {
  return detail::sum_impl</*All=*/true>(e, {}, false, false);
}
template <Expression E>
auto sum(const E& e, int64_t axis, bool keepdims = false) {
  return detail::sum_impl(e, {axis}, keepdims, false);
}
template <Expression E>
auto sum(const E& e, std::initializer_list<int64_t> axes, bool keepdims = false) {
  return detail::sum_impl(e, axes, keepdims, false);
}
/// Arithmetic mean of all elements, or over `axes` (the same forms as `sum`).
template <Expression E>
auto mean(const E& e) {
  return detail::sum_impl</*All=*/true>(e, {}, false, true);
}
template <Expression E>
auto mean(const E& e, int64_t axis, bool keepdims = false) {
  return detail::sum_impl(e, {axis}, keepdims, true);
}
template <Expression E>
auto mean(const E& e, std::initializer_list<int64_t> axes, bool keepdims = false) {
  return detail::sum_impl(e, axes, keepdims, true);
}

/// Largest element, overall or along `axis`; ties share the gradient equally.
template <Expression E>
auto max(const E& e) {
  return detail::extremum_impl(e, 0, true, false, true);
}
template <Expression E>
auto max(const E& e, int64_t axis, bool keepdims = false) {
  return detail::extremum_impl(e, axis, false, keepdims, true);
}
/// Smallest element, overall or along `axis`; ties share the gradient equally.
template <Expression E>
auto min(const E& e) {
  return detail::extremum_impl(e, 0, true, false, false);
}
template <Expression E>
auto min(const E& e, int64_t axis, bool keepdims = false) {
  return detail::extremum_impl(e, axis, false, keepdims, false);
}
/// Index of the first largest element along `axis` (an int64 tensor; not differentiable).
template <Expression E>
Tensor<int64_t> argmax(const E& e, int64_t axis = 0) {
  return detail::arg_impl(e, axis, true);
}
/// Index of the first smallest element along `axis`.
template <Expression E>
Tensor<int64_t> argmin(const E& e, int64_t axis = 0) {
  return detail::arg_impl(e, axis, false);
}

namespace detail {
/// prod along one axis; the gradient uses products of the other elements (exact with zeros).
template <class E>
auto prod_impl(const E& e, int64_t axis, bool all, bool keepdims) {
  gradus::detail::OpScope prof;
  using T = value_type_t<E>;
  auto x = materialize(e);
  const Tensor<T>& xv = value_of(x);
  const ReducePlan p = plan_axis(xv.shape(), axis, all, keepdims, "prod");
  const AxisView v(xv.shape(), all ? -1 : normalize_axis(axis, xv.rank(), "prod"));
  Tensor<T> out = Tensor<T>::empty(p.out, xv.device());
  backend::reduce_prod(v, xv.device_data(), out.device_data(), xv.device());
  reduction_attrs(keepdims, all, axis, xv.rank(), "prod");
  if constexpr (Real<T>) {
    return make_result("prod", std::move(out), [v](const Tensor<T>& g, const Tensor<T>&, const auto& in) {
      if (!needs_grad(in)) return;
      const Tensor<T>& xin = value_of(in);
      Tensor<T> dx = Tensor<T>::empty(xin.shape(), xin.device());
      backend::reduce_prod_backward(v, xin.device_data(), g.device_data(), dx.device_data(), xin.device());
      add_grad(in, dx);
    }, x);
  } else {
    return out;
  }
}

/// log(sum(exp(x))) along one axis, computed as m + log(sum(exp(x - m))): finite for any x.
template <class E>
auto logsumexp_impl(const E& e, int64_t axis, bool all, bool keepdims) {
  gradus::detail::OpScope prof;
  using T = value_type_t<E>;
  auto x = materialize(e);
  const Tensor<T>& xv = value_of(x);
  GRADUS_CHECK(value_error, xv.size() > 0, "logsumexp: reduction of an empty tensor ", xv.shape());
  const ReducePlan p = plan_axis(xv.shape(), axis, all, keepdims, "logsumexp");
  const AxisView v(xv.shape(), all ? -1 : normalize_axis(axis, xv.rank(), "logsumexp"));
  Tensor<T> out = Tensor<T>::empty(p.out, xv.device());
  backend::reduce_logsumexp(v, xv.device_data(), out.device_data(), xv.device());
  reduction_attrs(keepdims, all, axis, xv.rank(), "logsumexp");
  return make_result("logsumexp", std::move(out), [v](const Tensor<T>& g, const Tensor<T>& y, const auto& in) {
    if (!needs_grad(in)) return;
    const Tensor<T>& xin = value_of(in);
    Tensor<T> dx = Tensor<T>::empty(xin.shape(), xin.device());
    backend::reduce_logsumexp_backward(v, xin.device_data(), y.device_data(), g.device_data(), dx.device_data(),
                                       xin.device());
    add_grad(in, dx);
  }, x);
}
}  // namespace detail

/// Product of all elements, or along `axis`.
template <Expression E>
auto prod(const E& e) {
  return detail::prod_impl(e, 0, true, false);
}
template <Expression E>
auto prod(const E& e, int64_t axis, bool keepdims = false) {
  return detail::prod_impl(e, axis, false, keepdims);
}
/// log(sum(exp(x))) over all elements or along `axis`, stable for any logits.
template <Expression E>
  requires Real<value_type_t<E>>
auto logsumexp(const E& e) {
  return detail::logsumexp_impl(e, 0, true, false);
}
template <Expression E>
  requires Real<value_type_t<E>>
auto logsumexp(const E& e, int64_t axis, bool keepdims = false) {
  return detail::logsumexp_impl(e, axis, false, keepdims);
}

}  // namespace gradus

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::detail {
GRADUS_INLINE ReducePlan plan_reduce(const Shape& in, std::initializer_list<int64_t> axes, bool keepdims, const char* op) {
  std::array<bool, kMaxRank> red{};
  if (axes.size() == 0)
    red.fill(true);
  else
    for (int64_t a : axes) {
      const int ax = normalize_axis(a, in.rank(), op);
      GRADUS_CHECK(value_error, !red[size_t(ax)], op, ": axis ", a, " listed twice");
      red[size_t(ax)] = true;
    }
  ReducePlan p{in, {}, {}, 1};
  for (int i = 0; i < in.rank(); ++i) {
    p.keep.push_back(red[size_t(i)] ? 1 : in[i]);
    if (red[size_t(i)]) p.count *= in[i];
    if (!red[size_t(i)] || keepdims) p.out.push_back(red[size_t(i)] ? 1 : in[i]);
  }
  return p;
}
}  // namespace gradus::detail
#endif  // GRADUS_DEFINE_COMPILED

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::detail {
GRADUS_INLINE ReducePlan plan_axis(const Shape& in, int64_t axis, bool all, bool keepdims, const char* op) {
  return all ? plan_reduce(in, {}, keepdims, op) : plan_reduce(in, {axis}, keepdims, op);
}
}  // namespace gradus::detail
#endif  // GRADUS_DEFINE_COMPILED
