// gradus/ops/shape.hpp — differentiable shape ops: reshape, flatten, expand_dims, squeeze,
// transpose, concat, stack, slice, gather, one_hot, pad and cast (TensorFlow semantics).
//
// Each op takes any expression (a Tensor, a Var or a lazy elementwise expression), computes
// its output with one backend copy kernel (backend/cpu/copy.hpp), and returns a Tensor when no input
// is a Var and a Var otherwise; the gradient rule sits next to the forward. Axes may be
// negative. Mistakes throw gd::value_error / gd::shape_error naming the op and the shapes.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <initializer_list>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include <sstream>

#include "gradus/autodiff/materialize.hpp"
#include "gradus/backend/backend.hpp"
#include "gradus/core/small_list.hpp"

namespace gradus {
namespace detail {

/// An axis in [-n, n) normalised to [0, n); the error names the op and the shape.
inline int shape_axis(int64_t axis, int n, const char* op, const Shape& s) {
  GRADUS_CHECK(value_error, axis >= -n && axis < n, op, ": axis ", axis, " out of range [", -n, ", ", n,
               ") for shape ", s);
  return int(axis < 0 ? axis + n : axis);
}

inline int64_t dims_product(const Shape& s, int from, int to) {
  int64_t n = 1;
  for (int i = from; i < to; ++i) n *= s[i];
  return n;
}

using backend::copy_window;
using backend::join_rows;
using backend::permute;
using backend::window_grad;

/// A node over a list of Var inputs (concat, stack): `f(grad, inputs)` pushes the adjoint back.
template <class T, class F>
struct ListNode final : Node<T> {
  const char* op;
  F f;
  std::vector<Var<T>> in;
  ListNode(const char* name, Tensor<T> out, F fn, std::vector<Var<T>> inputs)
      : Node<T>(std::move(out)), op(name), f(std::move(fn)), in(std::move(inputs)) {
    this->requires_grad = true;
  }
  void backward() override { f(this->adj, in); }
  void inputs(std::vector<NodeBase*>& out) const override {
    for (const auto& v : in) out.push_back(v.node());
  }
  const char* name() const override { return op; }
};

template <class X>
concept TensorOrVar = std::same_as<X, Tensor<value_type_t<X>>> || is_var_v<X>;

/// concat and stack: `axis` splits each input's shape into outer (before) and inner (from) parts.
template <class X>
auto join_run(const char* op, const std::vector<X>& xs, int axis, Shape out_shape);

template <class X>
auto join(const char* op, const std::vector<X>& xs, int axis, Shape out_shape) {
  using T = value_type_t<X>;
  OpScope prof;
  auto r = join_run(op, xs, axis, std::move(out_shape));
  if (prof) [[unlikely]] {
    OpDescription d = describe_result<T>(op, r);
    for (const X& x : xs) d.add_input(value_of(x).shape(), node_seq(x), &value_of(x));
    set_op_attrs({axis});
    d.take_attrs();
    prof.observer()->describe(d);
  }
  return r;
}

template <class X>
auto join_run(const char* op, const std::vector<X>& xs, int axis, Shape out_shape) {
  using T = value_type_t<X>;
  const int64_t outer = dims_product(value_of(xs[0]).shape(), 0, axis);
  std::vector<const T*> parts;
  std::vector<int64_t> inner;
  const Device dev = value_of(xs[0]).device();
  for (const X& x : xs) {
    GRADUS_CHECK(device_error, value_of(x).device() == dev, op, ": operands on ", dev, " and ", value_of(x).device(),
                 "; move them to one device with .to(device)");
    parts.push_back(value_of(x).device_data());
    inner.push_back(dims_product(value_of(x).shape(), axis, value_of(x).rank()));
  }
  Tensor<T> out = Tensor<T>::empty(out_shape, dev);
  join_rows(parts, inner, out.device_data(), outer, dev);
  if constexpr (is_var_v<X>) {
    const bool record = grad_enabled() && std::any_of(xs.begin(), xs.end(), [](const X& x) { return x.requires_grad(); });
    if (!record) return Var<T>::constant(std::move(out));
    auto backward = [outer, inner](const Tensor<T>& g, const std::vector<Var<T>>& in) {
      const int64_t total = g.size() / std::max<int64_t>(outer, 1);
      int64_t col = 0;
      for (size_t i = 0; i < in.size(); ++i) {
        if (in[i].requires_grad() && outer > 0 && inner[i] > 0) {
          Tensor<T> gi = Tensor<T>::empty(in[i].shape(), g.device());
          backend::split_rows(g.device_data(), total, col, outer, inner[i], gi.device_data(), g.device());
          add_grad(in[i], gi);
        }
        col += inner[i];
      }
    };
    return Var<T>::from_node(make_node<ListNode<T, decltype(backward)>>(op, std::move(out), std::move(backward), xs));
  } else {
    return out;
  }
}

/// cast<U> of a Var<T>: the gradient is cast back to T.
template <Real U, Real T>
struct CastNode final : Node<U> {
  Var<T> in;
  CastNode(Tensor<U> out, Var<T> x) : Node<U>(std::move(out)), in(std::move(x)) { this->requires_grad = true; }
  void backward() override {
    bool add = false;
    T* dst = in.node()->adjoint_buffer(&add);
    backend::cast(this->adj.device_data(), in.size(), dst, add, this->adj.device());
  }
  void inputs(std::vector<NodeBase*>& out) const override { out.push_back(in.node()); }
  const char* name() const override { return "cast"; }
};

}  // namespace detail

// ------------------------------------------------------------------------------ reshape family

/// `x` with shape `dims` (one -1 is inferred); zero-copy: the result shares x's storage.
///   gd::reshape(x, {2, -1});   // [2,3,4] -> [2,12]
template <Expression E>
auto reshape(const E& e, const IntList& dims) {
  gradus::detail::OpScope prof;
  auto x = materialize(e);
  detail::set_op_attrs_list({}, dims);  // the dims as asked (-1 included), for gd::onnx
  return make_result("reshape", detail::value_of(x).reshape(std::span<const int64_t>(dims)),
                     [](const auto& g, const auto&, const auto& x) { detail::add_grad(x, g.reshape(x.shape())); }, x);
}

/// [N, d1, ..., dk] -> [N, d1*...*dk], as Keras' Flatten (keeps axis 0); a rank-1 [N] gives [N, 1].
template <Expression E>
auto flatten(const E& e) {
  auto x = materialize(e);
  const Shape& s = detail::value_of(x).shape();
  GRADUS_CHECK(value_error, s.rank() >= 1, "flatten: expected rank >= 1, got shape ", s);
  return reshape(x, {s[0], detail::dims_product(s, 1, s.rank())});
}

/// Inserts a dimension of size 1 at `axis` in [-rank-1, rank]: [2,3] at 1 -> [2,1,3]. Zero-copy.
template <Expression E>
auto expand_dims(const E& e, int64_t axis) {
  auto x = materialize(e);
  Shape s = detail::value_of(x).shape();
  s.insert(detail::shape_axis(axis, s.rank() + 1, "expand_dims", s), 1);
  return reshape(x, s);
}

/// Removes the given size-1 axes (all size-1 axes when `axes` is empty). Zero-copy.
///   gd::squeeze(x);  gd::squeeze(x, 1);  gd::squeeze(x, {0, 2});
template <Expression E>
auto squeeze(const E& e, const IntList& axes = {}) {
  auto x = materialize(e);
  const Shape& s = detail::value_of(x).shape();
  std::array<bool, kMaxRank> drop{};
  drop.fill(axes.empty());
  for (int64_t a : axes) {
    const int ax = detail::shape_axis(a, s.rank(), "squeeze", s);
    GRADUS_CHECK(value_error, s[ax] == 1, "squeeze: axis ", a, " of shape ", s, " has size ", s[ax], ", not 1");
    drop[size_t(ax)] = true;
  }
  IntList dims;
  for (int i = 0; i < s.rank(); ++i)
    if (!(drop[size_t(i)] && s[i] == 1)) dims.push_back(s[i]);
  return reshape(x, dims);
}
template <Expression E>
auto squeeze(const E& e, int64_t axis) {
  return squeeze(e, IntList{axis});
}

// ---------------------------------------------------------------------------------- transpose

/// Permutes the axes: `out.shape[i] = x.shape[perm[i]]`; an empty perm reverses them (the matrix
/// transpose for rank 2). Runs as a tiled copy; a view of x when no data moves.
///   gd::transpose(x);  gd::transpose(x, {0, 2, 1});
template <Expression E>
auto transpose(const E& e, const IntList& perm = {}) {
  gradus::detail::OpScope prof;
  auto x = materialize(e);
  const Shape& s = detail::value_of(x).shape();
  const int r = s.rank();
  IntList p, inv;
  for (int i = 0; i < r; ++i) p.push_back(0), inv.push_back(-1);
  if (perm.empty()) {
    for (int i = 0; i < r; ++i) p[size_t(i)] = r - 1 - i;
  } else {
    GRADUS_CHECK(value_error, int(perm.size()) == r, "transpose: perm ", perm, " has ", perm.size(),
                 " entries for shape ", s, " of rank ", r);
    for (int i = 0; i < r; ++i) p[size_t(i)] = perm[size_t(i)] >= -r && perm[size_t(i)] < r ? (perm[size_t(i)] + r) % r : -1;
  }
  for (int i = 0; i < r; ++i) {
    GRADUS_CHECK(value_error, p[size_t(i)] >= 0 && inv[size_t(p[size_t(i)])] < 0, "transpose: perm ",
                 perm, " is not a permutation of the axes of shape ", s);
    inv[size_t(p[size_t(i)])] = i;
  }
  detail::set_op_attrs_list({}, p);  // for gd::onnx
  return make_result("transpose", detail::permute(detail::value_of(x), p),
                     [inv](const auto& g, const auto&, const auto& x) {
                       if (detail::needs_grad(x)) detail::add_grad(x, detail::permute(g, inv));
                     },
                     x);
}

// ------------------------------------------------------------------------------ concat, stack

/// Joins tensors (or Vars) along an existing axis; shapes must agree outside it.
///   gd::concat({a, b}, 1);   // [2,3] and [2,4] -> [2,7]
template <class X>
  requires detail::TensorOrVar<X>
auto concat(const std::vector<X>& xs, int64_t axis = 0) {
  GRADUS_CHECK(value_error, !xs.empty(), "concat: expected at least one tensor, got none");
  Shape out = detail::value_of(xs[0]).shape();
  GRADUS_CHECK(value_error, out.rank() >= 1, "concat: cannot concatenate scalars (shape [])");
  const int ax = detail::shape_axis(axis, out.rank(), "concat", out);
  for (size_t i = 1; i < xs.size(); ++i) {
    Shape s = detail::value_of(xs[i]).shape();
    bool fits = s.rank() == out.rank();
    for (int d = 0; fits && d < s.rank(); ++d) fits = d == ax || s[d] == out[d];
    GRADUS_CHECK(shape_error, fits, "concat: shapes ", detail::value_of(xs[0]).shape(), " and ", s,
                 " differ outside axis ", ax);
    out[ax] += s[ax];
  }
  return detail::join("concat", xs, ax, out);
}
template <class X>
  requires detail::TensorOrVar<X>
auto concat(std::initializer_list<X> xs, int64_t axis = 0) {
  return concat(std::vector<X>(xs), axis);
}

/// Stacks same-shape tensors (or Vars) along a new axis in [-rank-1, rank].
///   gd::stack({a, b}, 0);    // two [2,3] -> [2,2,3]
template <class X>
  requires detail::TensorOrVar<X>
auto stack(const std::vector<X>& xs, int64_t axis = 0) {
  GRADUS_CHECK(value_error, !xs.empty(), "stack: expected at least one tensor, got none");
  const Shape& s = detail::value_of(xs[0]).shape();
  const int ax = detail::shape_axis(axis, s.rank() + 1, "stack", s);
  for (const X& x : xs)
    GRADUS_CHECK(shape_error, detail::value_of(x).shape() == s, "stack: shapes ", s, " and ",
                 detail::value_of(x).shape(), " differ");
  Shape out = s;
  out.insert(ax, int64_t(xs.size()));
  return detail::join("stack", xs, ax, out);
}
template <class X>
  requires detail::TensorOrVar<X>
auto stack(std::initializer_list<X> xs, int64_t axis = 0) {
  return stack(std::vector<X>(xs), axis);
}

// ---------------------------------------------------------------------------- slice, pad

/// The block of `x` starting at `begin` with extent `size` (-1: to the end), as tf.slice.
///   gd::slice(x, {0, 1}, {2, -1});   // [2,3] -> [2,2]
template <Expression E>
auto slice(const E& e, const IntList& begin, const IntList& size) {
  gradus::detail::OpScope prof;
  auto x = materialize(e);
  const auto& xv = detail::value_of(x);
  const Shape& s = xv.shape();
  GRADUS_CHECK(value_error, int(begin.size()) == s.rank() && int(size.size()) == s.rank(), "slice: begin ",
               begin, " and size ", size, " need ", s.rank(),
               " entries each for shape ", s);
  Shape os;
  for (int d = 0; d < s.rank(); ++d) {
    const int64_t b = begin[size_t(d)], n = size[size_t(d)] == -1 ? s[d] - b : size[size_t(d)];
    GRADUS_CHECK(value_error, b >= 0 && b <= s[d] && n >= 0 && b + n <= s[d], "slice: begin ", begin,
                 " and size ", size, " out of range for shape ", s, " at axis ", d);
    os.push_back(n);
  }
  Tensor<value_type_t<E>> out = Tensor<value_type_t<E>>::empty(os, xv.device());
  const std::array<int64_t, kMaxRank> zero{};
  detail::copy_window(xv, begin.data(), out, zero.data(), os);
  detail::set_op_attrs_list({}, begin);  // the begin of each axis; the sizes are the result's shape (gd::onnx)
  return make_result("slice", std::move(out),
                     [begin](const auto& g, const auto&, const auto& x) {
                       if (!detail::needs_grad(x)) return;
                       bool add = false;
                       auto* dx = detail::adjoint_buffer(x, &add);
                       detail::window_grad(g, dx, add, detail::value_of(x).shape(), begin.data());
                     },
                     x);
}

/// Pads each axis with `paddings[axis] = {before, after}` elements of `constant`, as tf.pad.
///   gd::pad(x, {{1, 1}, {0, 2}});   // [2,3] -> [4,5]
template <Expression E>
auto pad(const E& e, const PadList& paddings, value_type_t<E> constant = 0) {
  gradus::detail::OpScope prof;
  auto x = materialize(e);
  const auto& xv = detail::value_of(x);
  const Shape& s = xv.shape();
  GRADUS_CHECK(value_error, int(paddings.size()) == s.rank(), "pad: ", paddings.size(), " paddings for shape ", s,
               " of rank ", s.rank());
  Shape os;
  IntList at;
  const std::array<int64_t, kMaxRank> zero{};
  for (int d = 0; d < s.rank(); ++d) {
    const auto [lo, hi] = paddings[size_t(d)];
    GRADUS_CHECK(value_error, lo >= 0 && hi >= 0, "pad: negative padding {", lo, ", ", hi, "} for axis ", d,
                 " of shape ", s);
    os.push_back(lo + s[d] + hi);
    at.push_back(lo);
  }
  auto out = Tensor<value_type_t<E>>::empty(os, xv.device());
  backend::fill(out.device_data(), out.size(), constant, xv.device());
  detail::copy_window(xv, zero.data(), out, at.data(), s);
  if (prof) [[unlikely]] {  // before and after of each axis, and the constant (gd::onnx)
    IntList flat;
    for (const auto& [lo, hi] : paddings) flat.push_back(lo), flat.push_back(hi);
    detail::set_op_attrs_list({}, flat, double(constant));
  }
  return make_result("pad", std::move(out),
                     [at, zero](const auto& g, const auto&, const auto& x) {
                       if (!detail::needs_grad(x)) return;
                       auto gx = std::remove_cvref_t<decltype(g)>::empty(x.shape(), g.device());
                       detail::copy_window(g, at.data(), gx, zero.data(), x.shape());
                       detail::add_grad(x, gx);
                     },
                     x);
}

// ------------------------------------------------------------------------------ gather, one_hot

/// Rows of `x` along `axis` picked by `indices` (any rank), as tf.gather: the output shape is
/// x.shape[:axis] + indices.shape + x.shape[axis+1:]. The gradient scatter-adds (repeated
/// indices accumulate). An index outside [0, x.shape[axis]) throws value_error: at once for
/// indices in host memory; for indices on a GPU, checked there and thrown at its next
/// synchronisation point (a copy to the host), as a sparse loss's labels.
///   gd::gather(embeddings, ids);   // [V,D] gathered by [B,T] -> [B,T,D]
template <Expression E>
auto gather(const E& e, const Tensor<int64_t>& indices, int64_t axis = 0) {
  gradus::detail::OpScope prof;
  auto x = materialize(e);
  const auto& xv = detail::value_of(x);
  const Shape& s = xv.shape();
  GRADUS_CHECK(value_error, s.rank() >= 1, "gather: cannot gather from a scalar (shape [])");
  const int ax = detail::shape_axis(axis, s.rank(), "gather", s);
  const int64_t outer = detail::dims_product(s, 0, ax), n = s[ax], inner = detail::dims_product(s, ax + 1, s.rank());
  const int64_t k = indices.size();
  // where the indices are: on the CPU at once; on a GPU there, the error at its next synchronisation
  backend::check_indices(indices, s, ax, "gather");
  Shape os;
  for (int d = 0; d < ax; ++d) os.push_back(s[d]);
  for (int64_t d : indices.shape()) os.push_back(d);
  for (int d = ax + 1; d < s.rank(); ++d) os.push_back(s[d]);
  const Device dev = xv.device();
  // the indices go where x is, as a copy of their own: the gradient scatters by the indices of
  // this call even if the caller refills its index tensor before backward (a decoder's step loop)
  const Tensor<int64_t> placed = indices.device() == dev ? indices.clone() : indices.to(dev);
  Tensor<value_type_t<E>> out = Tensor<value_type_t<E>>::empty(os, dev);
  backend::gather_rows(xv.device_data(), outer, n, inner, placed.device_data(), k, out.device_data(), dev);
  detail::set_op_attrs({ax}, 0, {}, &indices);  // the axis and the caller's indices (gd::onnx)
  return make_result("gather", std::move(out),
                     [placed, outer, n, inner](const auto& g, const auto&, const auto& x) {
                       if (!detail::needs_grad(x)) return;
                       bool add = false;  // scatter-add straight into the adjoint
                       auto* gx = detail::adjoint_buffer(x, &add);
                       backend::scatter_add_rows(g.device_data(), outer, n, inner, placed.device_data(), placed.size(),
                                                 gx, add, g.device());
                     },
                     x);
}

/// One-hot encoding: labels.shape + [depth], `on` at each label, `off` elsewhere. A label
/// outside [0, depth) gives a row of all `off`, as tf.one_hot does. Not differentiable.
///   gd::one_hot(labels, 10);   // Tensor<float> [N, 10]
template <Element T = float>
Tensor<T> one_hot(const Tensor<int64_t>& labels, int64_t depth, T on = T(1), T off = T(0)) {
  GRADUS_CHECK(value_error, depth >= 0, "one_hot: negative depth ", depth, " for labels of shape ", labels.shape());
  Shape os = labels.shape();
  os.push_back(depth);
  Tensor<T> out = Tensor<T>::empty(os, labels.device());  // on the labels' device
  backend::one_hot(labels.device_data(), labels.size(), depth, on, off, out.device_data(), labels.device());
  return out;
}

// ------------------------------------------------------------------------------------ cast

/// Converts the element type (float -> integer truncates toward zero, as static_cast; to uint8_t
/// through int64_t, then modulo 256).
/// Tensor<T> -> Tensor<U>; Var<float>/Var<double> -> a differentiable Var<U> whose gradient is
/// cast back; a Var cast to int64_t gives a Tensor<int64_t> (no gradient). Casting to the
/// same type returns the input itself.
///   gd::Var<float> y = gd::cast<float>(x_double);
template <Element U, Expression E>
auto cast(const E& e) {
  using T = value_type_t<E>;
  auto x = materialize(e);
  if constexpr (std::same_as<T, U>) {
    return x;
  } else {
    detail::OpScope prof;
    const Tensor<T>& xv = detail::value_of(x);
    Tensor<U> out = Tensor<U>::empty(xv.shape(), xv.device());
    backend::cast(xv.device_data(), xv.size(), out.device_data(), false, xv.device());
    auto r = [&] {
      if constexpr (is_var_v<decltype(x)> && Real<U>) {
        if (grad_enabled() && x.requires_grad())
          return Var<U>::from_node(detail::make_node<detail::CastNode<U, T>>(std::move(out), x));
        return Var<U>::constant(std::move(out));
      } else {
        return std::move(out);
      }
    }();
    if (prof) [[unlikely]]
      detail::describe_op<U>(prof.observer(), "cast", r, x);
    return r;
  }
}

}  // namespace gradus
