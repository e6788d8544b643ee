// gradus/autodiff/materialize.hpp — turning expressions into tensors and tape nodes.
//
//   gd::eval(e)          a Tensor, never recorded;
//   Tensor<T> t = e;     the same;
//   Var<T> v = e;        one tape node whose backward is the fused adjoint of e's type;
//   make_result(...)     how a kernel op (matmul, softmax, ...) returns a Tensor or a Var.
#pragma once
#include <cstdio>
#include <string>
#include <tuple>

#include "gradus/autodiff/adjoint.hpp"
#include "gradus/autodiff/var.hpp"
#include "gradus/backend/backend.hpp"
#include "gradus/core/compiled.hpp"

namespace gradus {

// ------------------------------------------------------------------ evaluation, no recording

namespace detail {
template <class T>
uint64_t node_seq(const Tensor<T>&) {
  return 0;
}
template <class T>
uint64_t node_seq(const Var<T>& v) {
  return v.node() ? v.node()->seq : 0;
}
template <class T>
const Tensor<T>& value_of(const Tensor<T>& t) {
  return t;
}
template <class T>
const Tensor<T>& value_of(const Var<T>& v) {
  return v.value();
}

/// Appends expression `e` in postfix to `out` (OpDescription::program): "$i" for its i-th
/// tensor or Var operand (numbered as describe_expression lists them), "#v" for a number, then
/// each node's op name with its parameters, "(p1,p2)".
template <class E>
void append_program(const E& e, std::string& out, int& operand) {
  using N = std::remove_cvref_t<E>;
  using C = node_children<N>;
  char buf[40];
  if constexpr (C::arity == 0) {
    if constexpr (is_number_leaf<N>::value) {
      std::snprintf(buf, sizeof buf, " #%.17g", double(e.value));
      out += buf;
    } else if constexpr (is_var_v<N> || std::same_as<N, Tensor<value_type_t<N>>>) {
      out += " $" + std::to_string(operand++);
    } else {
      out += " ?";  // an operand of another kind: the reader refuses the program
    }
  } else {
    std::apply([&](const auto&... kid) { (append_program(kid, out, operand), ...); }, C::get(e));
    out += ' ';
    if constexpr (requires { typename N::op_type; }) {
      using Op = typename N::op_type;
      if constexpr (requires { Op::name; })
        out += Op::name;
      else
        out += "identity";
      if constexpr (requires { Op::num_params; }) {
        for (int i = 0; i < Op::num_params; ++i) {
          std::snprintf(buf, sizeof buf, "%c%.17g", i == 0 ? '(' : ',', double(e.op.param(i)));
          out += buf;
        }
        out += ')';
      }
    } else {
      out += "where";
    }
  }
}

/// Tells the profiler about an elementwise expression evaluated into a new value (`node`: the
/// tape node made of it, 0 for none), or about op `op` over it with result shape `*output` (a
/// reduction fused with the expression): its operands are the tensors and Vars at its leaves.
template <class E>
void describe_expression(OpObserver* obs, const E& e, uint64_t node, const char* op = "elementwise",
                         const Shape* output = nullptr) {
  using T = value_type_t<E>;
  OpDescription d;
  d.op = op;
  d.dtype = dtype_name_of<T>();
  d.element_bytes = int(sizeof(T));
  d.output = output ? *output : e.shape();
  d.node = node;
  d.expr_ops = count_ops<std::remove_cvref_t<E>>();
  for_each_leaf(e, [&](const auto& leaf, bool) {
    using L = std::remove_cvref_t<decltype(leaf)>;
    if constexpr (is_var_v<L> || std::same_as<L, Tensor<value_type_t<L>>>)
      d.add_input(value_of(leaf).shape(), node_seq(leaf), &value_of(leaf));
  });
  d.take_attrs();
  if (obs->wants_programs()) {
    int operand = 0;
    append_program(e, d.program, operand);
  }
  obs->describe(d);
}

/// The description of op `op` that made `result` (a Tensor<T> or Var<T>), operands to be added.
template <class T, class R>
OpDescription describe_result(const char* op, const R& result) {
  OpDescription d;
  d.op = op;
  d.dtype = dtype_name_of<T>();
  d.element_bytes = int(sizeof(T));
  d.output = value_of(result).shape();
  d.node = node_seq(result);
  return d;
}

/// Tells the profiler about a kernel op's result and operands.
template <class T, class R, class... In>
void describe_op(OpObserver* obs, const char* op, const R& result, const In&... in) {
  OpDescription d = describe_result<T>(op, result);
  (d.add_input(value_of(in).shape(), node_seq(in), &value_of(in)), ...);
  d.take_attrs();
  obs->describe(d);
}
}  // namespace detail

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
  detail::OpScope prof;
  const Device dev = backend::device_of(e);
  if (prof) [[unlikely]]
    detail::describe_expression(prof.observer(), e, 0);
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

/// Defers w's gradient term xᵀ·g from a product x · w (x [rows, k], w [k, n], g [rows, n]) to
/// the end of the backward pass, where every such term of w is added as one product (see
/// LeafNode): true where it did, false where the caller adds it now. Deferred: a trainable leaf
/// whose backend joins rows (every built-in one), outside autocast (the products run later,
/// outside the node's precision), and a term of fewer than kDeferRows rows: a deeper product
/// already runs near the GEMM's speed and is best done while g is still in cache, and a large g
/// (a language model's [700, 10000] logits) is not kept alive to the end of the pass.
inline constexpr int64_t kDeferRows = 256;
template <class T>
bool defer_xt_g(const Tensor<T>&, const Tensor<T>&, const Tensor<T>&) {
  return false;
}
template <class T>
bool defer_xt_g(const Var<T>& w, const Tensor<T>& x, const Tensor<T>& g) {
  if (!w.requires_grad() || !w.node()->is_leaf || w.rank() != 2 || x.size() >= kDeferRows * w.shape()[0] ||
      autocast_precision() != Precision::fp32 || !backend::implements<backend::kernel::JoinRows, T>(w.value().device()))
    return false;
  static_cast<LeafNode<T>*>(w.node())->defer_xt_g(x, g);
  return true;
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
  detail::OpScope prof;
  Tensor<T> v = Tensor<T>::empty(e.shape(), backend::device_of(e));
  backend::evaluate_into(e, v.device_data(), v.shape(), v.device());
  node_ = nullptr;
  if constexpr (is_differentiable_v<E>) {
    if (grad_enabled() && detail::any_requires_grad(e)) node_ = detail::make_node<detail::ExprNode<E>>(std::move(v), e);
  }
  if (!node_) node_ = detail::make_node<detail::LeafNode<T>>(std::move(v), false);
  detail::retain(node_);
  if (prof) [[unlikely]]
    detail::describe_expression(prof.observer(), e, node_->seq);
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
    Var<T> r = grad_enabled() && (detail::needs_grad(in) || ...)
                   ? Var<T>::from_node(detail::make_node<detail::KernelNode<T, F, In...>>(op, std::move(out), std::move(backward), in...))
                   : Var<T>::constant(std::move(out));
    if (auto* obs = detail::op_observer()) [[unlikely]]
      detail::describe_op<T>(obs, op, r, in...);
    return r;
  } else {
    if (auto* obs = detail::op_observer()) [[unlikely]]
      detail::describe_op<T>(obs, op, out, in...);
    return out;
  }
}

}  // namespace gradus

#if GRADUS_INSTANCES  // compiled once in libgradus with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus {
GRADUS_INSTANCE class Var<float>;
GRADUS_INSTANCE_DOUBLE class Var<double>;
}  // namespace gradus
#endif
