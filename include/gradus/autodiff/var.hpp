// gradus/autodiff/var.hpp — Var<T>, the differentiable tensor, and grad mode.
#pragma once
#include <utility>

#include "gradus/autodiff/node.hpp"
#include "gradus/backend/cpu/elementwise.hpp"
#include "gradus/expr/expr.hpp"

namespace gradus {

template <Real T>
class Var;

template <Real T>
struct is_expression<Var<T>> : std::true_type {};

template <class E>
struct is_var : std::false_type {};
template <class T>
struct is_var<Var<T>> : std::true_type {};
template <class E>
inline constexpr bool is_var_v = is_var<std::remove_cvref_t<E>>::value;

/// True unless a `no_grad` scope is active on this thread.
inline bool grad_enabled() { return detail::TapeState::local().grad_enabled; }

/// Within its scope, expressions over Vars evaluate without recording (like `torch.no_grad`).
///   { gd::no_grad guard; auto pred = model(x); }
struct no_grad {
  no_grad() : prev_(std::exchange(detail::TapeState::local().grad_enabled, false)) {}
  ~no_grad() { detail::TapeState::local().grad_enabled = prev_; }
  no_grad(const no_grad&) = delete;
  no_grad& operator=(const no_grad&) = delete;

 private:
  bool prev_;
};

/// A differentiable tensor: a handle to a node of this thread's define-by-run tape.
/// Built from a Tensor it is a trainable leaf; built from an expression over Vars it records
/// one node whose backward pass is generated from the expression's type.
///   gd::Var<float> w(gd::Tensor<float>::ones({3, 3}));   // leaf: w.value(), w.grad()
///   gd::Var<float> h = gd::tanh(gd::matmul(x, w) + b);   // one fused node for tanh(. + b)
template <Real T>
class Var {
 public:
  using value_type = T;
  /// A Var is the differentiable leaf of expressions (see is_differentiable_v).
  static constexpr bool differentiable = true;

  Var() = default;
  /// A leaf holding `value`; trainable unless `requires_grad` is false.
  explicit Var(Tensor<T> value, bool requires_grad = true)
      : Var(detail::make_node<detail::LeafNode<T>>(std::move(value), requires_grad)) {}
  /// Materialises an expression into one tape node (or a constant when nothing needs a gradient).
  template <class E>
    requires(Expression<E> && !is_var_v<E> && !std::same_as<std::remove_cvref_t<E>, Tensor<T>>)
  Var(const E& e);  // defined in autodiff/materialize.hpp

  /// A Var that never receives a gradient (its value takes part in expressions as a constant).
  static Var constant(Tensor<T> value) { return Var(std::move(value), false); }
  /// Wraps a node built by an op; takes one reference.
  static Var from_node(detail::Node<T>* n) { return Var(n); }

  Var(const Var& o) : node_(o.node_) { detail::retain(node_); }
  Var(Var&& o) noexcept : node_(std::exchange(o.node_, nullptr)) {}
  Var& operator=(const Var& o) {
    detail::retain(o.node_);
    detail::release(node_);
    node_ = o.node_;
    return *this;
  }
  Var& operator=(Var&& o) noexcept {
    if (this != &o) {
      detail::release(node_);
      node_ = std::exchange(o.node_, nullptr);
    }
    return *this;
  }
  ~Var() { detail::release(node_); }

  bool defined() const { return node_ != nullptr; }
  Tensor<T>& value() { return ready()->value; }
  const Tensor<T>& value() const { return ready()->value; }
  /// The gradient accumulated by `gd::backward` (zeros before the first one).
  Tensor<T>& grad() const {
    auto* n = checked();
    if (!n->grad.defined()) n->grad = Tensor<T>::zeros(n->value.shape());
    return n->grad;
  }
  /// Resets the accumulated gradient to zero. The buffer goes back to the tensor cache (like
  /// PyTorch's `set_to_none`), so the next backward pass writes the gradient instead of adding
  /// to zeros; `grad()` reads as zeros meanwhile. Tensors taken from `grad()` before stay valid.
  void zero_grad() { checked()->grad = Tensor<T>(); }
  /// The accumulated gradient, or nullptr when none was received since the last `zero_grad`
  /// (unlike `grad()`, which gives zeros and so allocates them).
  Tensor<T>* grad_if_any() const {
    Tensor<T>& g = checked()->grad;
    return g.defined() ? &g : nullptr;
  }
  bool requires_grad() const { return node_ && node_->requires_grad; }
  bool is_leaf() const { return node_ && node_->is_leaf; }
  /// Switches a trainable leaf's gradient off (`false`: frozen, as the parameters of a frozen
  /// layer are — backward passes compute nothing for it, and optimizers skip it) or back on.
  /// Expressions recorded before keep what they recorded. value_error for a Var that is not a
  /// leaf, and for a constant (Var::constant), which never takes a gradient.
  void set_requires_grad(bool on) {
    auto* n = checked();
    GRADUS_CHECK(value_error, n->is_leaf, "set_requires_grad: the Var of shape ", n->value.shape(),
                 " is the result of an op, not a leaf: only leaves (parameters) can be frozen");
    GRADUS_CHECK(value_error, n->requires_grad || n->frozen, "set_requires_grad: the Var of shape ",
                 n->value.shape(), " is a constant (Var::constant), which never takes a gradient");
    n->requires_grad = on;
    n->frozen = !on;
  }
  /// True for a trainable leaf frozen by set_requires_grad(false).
  bool frozen() const { return node_ && node_->frozen; }
  /// The same value, cut from the graph: nothing flows back through it.
  Var detach() const { return constant(value()); }

  const Shape& shape() const { return checked()->value.shape(); }
  int rank() const { return checked()->value.rank(); }
  int64_t size() const { return checked()->value.size(); }
  T item() const { return value().item(); }
  detail::Node<T>* node() const { return node_; }

 private:
  explicit Var(detail::Node<T>* n) : node_(n) { detail::retain(node_); }
  detail::Node<T>* ready() const {
    auto* n = checked();
    if (n->value_pending) [[unlikely]]
      n->compute_value();
    return n;
  }
  detail::Node<T>* checked() const {
    GRADUS_CHECK(value_error, node_, "Var: use of an undefined (default-constructed) Var");
    return node_;
  }
  detail::Node<T>* node_ = nullptr;
};

template <class T>
std::ostream& operator<<(std::ostream& os, const Var<T>& v) {
  if (!v.defined()) return os << "Var(undefined)";
  return os << "Var(" << v.value() << (v.requires_grad() ? ", requires_grad" : "") << ')';
}

/// The tensor a Var leaf contributes to an expression run on a device: its value.
template <Real T>
const Tensor<T>& device_leaf(const Var<T>& x) {
  return x.value();
}

/// A Var's value read by the CPU's forward evaluator, as a tensor's.
template <Real T>
struct backend::cpu::Evaluator<Var<T>> : backend::cpu::Evaluator<Tensor<T>> {
  Evaluator(const Var<T>& x, const Shape& out) : backend::cpu::Evaluator<Tensor<T>>(x.value(), out) {}
};

}  // namespace gradus
