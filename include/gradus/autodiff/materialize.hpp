// gradus/autodiff/materialize.hpp — turning expressions into tensors and tape nodes.
//
//   gd::eval(e)          a Tensor, never recorded;
//   Tensor<T> t = e;     the same;
//   Var<T> v = e;        one tape node whose backward is the fused adjoint of e's type;
//   make_result(...)     how a kernel op (matmul, softmax, ...) returns a Tensor or a Var.
#pragma once
#include <tuple>

#include "gradus/autodiff/adjoint.hpp"
#include "gradus/autodiff/var.hpp"
#include "gradus/backend/backend.hpp"

namespace gradus {

// ------------------------------------------------------------------ evaluation, no recording

/// Evaluates expression `e` into `t`: into new storage, or with `assign` into t's own storage
/// (the shapes must match). The hook Tensor's converting constructor and `assign` reach by
/// argument-dependent lookup (core/ names no function of a higher layer).
template <class T, class E>
void evaluate_expression(Tensor<T>& t, const E& e, bool assign) {
  static_assert(std::same_as<value_type_t<E>, T>,
                "YOU_ASSIGNED_AN_EXPRESSION_TO_A_TENSOR_OF_ANOTHER_ELEMENT_TYPE: Tensor — use gd::cast<T>(e)");
  if constexpr (is_var_v<E>) {
    if (!assign) {
      t = e.value();
      return;
    }
  }
  const Device dev = backend::device_of(e);
  if (assign) {
    GRADUS_CHECK(shape_error, e.shape() == t.shape(), "assign: expression shape ", e.shape(),
                 " differs from tensor shape ", t.shape());
    GRADUS_CHECK(device_error, t.device() == dev, "assign: the tensor is on ", t.device(),
                 ", the expression's operands on ", dev);
    backend::evaluate_into(e, t.device_data(), t.shape(), dev);
  } else {
    const Shape s = e.shape();
    t = Tensor<T>::empty(s, dev);
    backend::evaluate_into(e, t.device_data(), s, dev);
  }
}

/// Evaluates any expression into a new Tensor, without recording (Vars contribute their values).
///   gd::Tensor<float> t = gd::eval(a * 2.f + 1.f);
template <Expression E>
Tensor<value_type_t<E>> eval(const E& e) {
  using T = value_type_t<E>;
  if constexpr (is_var_v<E>)
    return e.value();
  else if constexpr (std::same_as<std::remove_cvref_t<E>, Tensor<T>>)
    return e;
  else
    return Tensor<T>(e);
}

namespace detail {

template <class T>
const Tensor<T>& value_of(const Tensor<T>& t) {
  return t;
}
template <class T>
const Tensor<T>& value_of(const Var<T>& v) {
  return v.value();
}
template <class T>
bool needs_grad(const Tensor<T>&) {
  return false;
}
template <class T>
bool needs_grad(const Var<T>& v) {
  return v.requires_grad();
}
/// Adds `g` into the adjoint of `x` (no-op for tensors and constants).
template <class T>
void add_grad(const Tensor<T>&, const Tensor<T>&) {}
template <class T>
void add_grad(const Var<T>& x, const Tensor<T>& g) {
  if (x.requires_grad()) x.node()->add_adjoint(g);
}

/// The adjoint buffer of a Var input (see Node::adjoint_buffer); never called for tensors,
/// whose `needs_grad` is false.
template <class T>
T* adjoint_buffer(const Tensor<T>&, bool*) {
  return nullptr;
}
template <class T>
T* adjoint_buffer(const Var<T>& x, bool* add) {
  return x.node()->adjoint_buffer(add);
}

/// True when recording a node over these operands would be of use.
template <class E>
bool any_requires_grad(const E& e) {
  bool any = false;
  for_each_var(e, [&](const auto& v, bool live) { any = any || (live && v.requires_grad()); });
  return any;
}

template <class E>
void collect_var_inputs(const E& e, std::vector<NodeBase*>& out) {
  for_each_var(e, [&](const auto& v, bool live) {
    if (live) out.push_back(v.node());
  });
}

/// A materialised elementwise expression: its backward is one fused pass over the expression.
template <class E>
struct ExprNode final : Node<value_type_t<E>> {
  using T = value_type_t<E>;
  E expr;
  ExprNode(Tensor<T> v, const E& e) : Node<T>(std::move(v)), expr(e) { this->requires_grad = true; }
  void backward() override { fused_backward(expr, this->value.shape(), this->adj, T(1)); }
  void inputs(std::vector<NodeBase*>& out) const override { collect_var_inputs(expr, out); }
  const char* name() const override { return "elementwise"; }
};

/// A kernel op's node: `f(grad, out, inputs...)` pushes the adjoint into the inputs.
template <class T, class F, class... In>
struct KernelNode final : Node<T> {
  const char* op;
  F f;
  std::tuple<In...> in;
  KernelNode(const char* name, Tensor<T> out, F fn, const In&... inputs)
      : Node<T>(std::move(out)), op(name), f(std::move(fn)), in(inputs...) {
    this->requires_grad = true;
  }
  void backward() override {
    std::apply([&](const In&... x) { f(this->adj, this->value, x...); }, in);
  }
  void inputs(std::vector<NodeBase*>& out) const override {
    std::apply([&](const In&... x) { (push(out, x), ...); }, in);
  }
  const char* name() const override { return op; }

 private:
  static void push(std::vector<NodeBase*>&, const Tensor<T>&) {}
  static void push(std::vector<NodeBase*>& out, const Var<T>& v) { out.push_back(v.node()); }
};

}  // namespace detail

template <Real T>
template <class E>
  requires(Expression<E> && !is_var_v<E> && !std::same_as<std::remove_cvref_t<E>, Tensor<T>>)
Var<T>::Var(const E& e) {
  static_assert(std::same_as<value_type_t<E>, T>,
                "YOU_ASSIGNED_AN_EXPRESSION_TO_A_VAR_OF_ANOTHER_ELEMENT_TYPE: Var — use gd::cast<T>(e)");
  Tensor<T> v(e);
  if constexpr (is_differentiable_v<E>) {
    if (grad_enabled() && detail::any_requires_grad(e)) {
      node_ = detail::make_node<detail::ExprNode<E>>(std::move(v), e);
      detail::retain(node_);
      return;
    }
  }
  node_ = detail::make_node<detail::LeafNode<T>>(std::move(v), false);
  detail::retain(node_);
}

/// An expression materialised for a kernel: itself for a Tensor or Var, else a new Var when it
/// is differentiable and a new Tensor when it is not.
template <Expression E>
auto materialize(const E& e) {
  using T = value_type_t<E>;
  if constexpr (is_var_v<E> || std::same_as<std::remove_cvref_t<E>, Tensor<T>>)
    return std::remove_cvref_t<E>(e);
  else if constexpr (is_differentiable_v<E>)
    return Var<T>(e);
  else
    return Tensor<T>(e);
}

/// `x` as a Var: itself, a constant leaf over a Tensor's storage, or an expression
/// materialised (one tape node when it is differentiable).
///   gd::Var<float> y = gd::to_var(model.forward(x));   // forward may return a lazy expression
template <Expression E>
Var<value_type_t<E>> to_var(const E& x) {
  using T = value_type_t<E>;
  if constexpr (is_var_v<E>)
    return x;
  else if constexpr (std::same_as<std::remove_cvref_t<E>, Tensor<T>>)
    return Var<T>::constant(x);
  else
    return Var<T>(x);
}

/// What a kernel op returns: a Tensor when no input is a Var; otherwise a Var that records
/// `backward(grad, out, inputs...)` when some input needs a gradient and grad mode is on.
template <class T, class F, class... In>
auto make_result(const char* op, Tensor<T> out, F backward, const In&... in) {
  if constexpr ((is_var_v<In> || ...)) {
    if (grad_enabled() && (detail::needs_grad(in) || ...))
      return Var<T>::from_node(detail::make_node<detail::KernelNode<T, F, In...>>(op, std::move(out), std::move(backward), in...));
    return Var<T>::constant(std::move(out));
  } else {
    return out;
  }
}

}  // namespace gradus
