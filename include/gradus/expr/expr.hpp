// gradus/expr/expr.hpp — expression nodes: what a computation *is*, not how it runs.
//
// Every elementwise operator on tensors returns one of these lightweight objects; its type
// records the computation (`BinaryExpr<Add, BinaryExpr<Mul, A, B>, UnaryExpr<Exp, C>>`) and its
// operands are held by value (tensor and Var handles are cheap), so `auto e = a * (b + 1);`
// never dangles. The broadcast shape is computed once, when the node is built, so a shape
// mistake throws at the line that made it. Nodes declare their operands (`node_children`); how a
// node runs is decided elsewhere: backend/cpu/elementwise.hpp evaluates it, autodiff/adjoint.hpp
// differentiates it. Nothing here knows about the tape.
#pragma once
#include <array>
#include <concepts>
#include <tuple>
#include <type_traits>
#include <utility>

#include "gradus/core/shape.hpp"
#include "gradus/core/tensor.hpp"

namespace gradus {

template <class E>
struct is_expression : std::false_type {};
template <Element T>
struct is_expression<Tensor<T>> : std::true_type {};

/// Anything that evaluates to a tensor: a Tensor, a Var, or an elementwise expression.
template <class E>
concept Expression = is_expression<std::remove_cvref_t<E>>::value;

/// A plain number used as an operand (`x * 2.f`, `1 - y`).
template <class S>
concept Scalar = std::is_arithmetic_v<std::remove_cvref_t<S>>;

/// The element type of an expression.
template <class E>
using value_type_t = typename std::remove_cvref_t<E>::value_type;

namespace detail {
template <class E>
constexpr bool differentiable() {
  if constexpr (requires { E::differentiable; })
    return E::differentiable;
  else
    return false;
}
}  // namespace detail

/// True when an expression involves a differentiable leaf (a Var of autodiff/), i.e. is
/// differentiable: each node and leaf type says so in a `static constexpr bool differentiable`.
template <class E>
inline constexpr bool is_differentiable_v = detail::differentiable<std::remove_cvref_t<E>>();

/// A constant broadcast to any shape; the operand a plain number becomes.
template <Element T>
struct ScalarExpr {
  using value_type = T;
  static constexpr bool differentiable = false;
  T value;
  Shape shape() const { return {}; }
};
template <Element T>
struct is_expression<ScalarExpr<T>> : std::true_type {};

/// True for a leaf that is a number (ScalarExpr), false for one that reads a tensor.
template <class E>
struct is_number_leaf : std::false_type {};
template <class T>
struct is_number_leaf<ScalarExpr<T>> : std::true_type {};

/// The tensor an expression leaf reads: itself for a Tensor (a Var's value, autodiff/var.hpp).
/// Found by argument-dependent lookup, so a leaf type of a higher layer brings its own.
template <Element T>
const Tensor<T>& device_leaf(const Tensor<T>& t) {
  return t;
}

/// `op(a)` applied element by element.
template <class Op, class A>
struct UnaryExpr {
  using value_type = value_type_t<A>;
  using op_type = Op;
  static constexpr bool differentiable = is_differentiable_v<A>;
  Op op;
  A a;
  Shape shape() const { return a.shape(); }
};
template <class Op, class A>
struct is_expression<UnaryExpr<Op, A>> : std::true_type {};

/// `op(a, b)` element by element, with NumPy broadcasting.
template <class Op, class A, class B>
struct BinaryExpr {
  using value_type = value_type_t<A>;
  using op_type = Op;
  static constexpr bool differentiable = is_differentiable_v<A> || is_differentiable_v<B>;
  Op op;
  A a;
  B b;
  Shape shape_;
  BinaryExpr(Op o, A x, B y) : op(o), a(std::move(x)), b(std::move(y)), shape_(broadcast_shapes(a.shape(), b.shape(), Op::name.data())) {}
  Shape shape() const { return shape_; }
};
template <class Op, class A, class B>
struct is_expression<BinaryExpr<Op, A, B>> : std::true_type {};

/// `where(cond, a, b)`: a where cond is non-zero, else b; all three broadcast.
template <class C, class A, class B>
struct WhereExpr {
  using value_type = value_type_t<A>;
  static constexpr bool differentiable = is_differentiable_v<A> || is_differentiable_v<B>;
  C c;
  A a;
  B b;
  Shape shape_;
  WhereExpr(C cc, A x, B y)
      : c(std::move(cc)), a(std::move(x)), b(std::move(y)),
        shape_(broadcast_shapes(broadcast_shapes(c.shape(), a.shape(), "where"), b.shape(), "where")) {}
  Shape shape() const { return shape_; }
};
template <class C, class A, class B>
struct is_expression<WhereExpr<C, A, B>> : std::true_type {};

/// The operands of an expression node, declared by the node rather than guessed from member
/// names: `arity`, `get(e)` (a tuple of references, in evaluation order) and `grad_flows[i]`,
/// false where no gradient can pass to operand i (a `where` condition, a comparison, `sign`).
/// Leaves (tensors, Vars, numbers) have arity 0.
template <class E>
struct node_children {
  static constexpr int arity = 0;
};
template <class Op, class A>
struct node_children<UnaryExpr<Op, A>> {
  static constexpr int arity = 1;
  static constexpr std::array<bool, 1> grad_flows{Op::differentiable};
  static auto get(const UnaryExpr<Op, A>& e) { return std::tie(e.a); }
};
template <class Op, class A, class B>
struct node_children<BinaryExpr<Op, A, B>> {
  static constexpr int arity = 2;
  static constexpr std::array<bool, 2> grad_flows{Op::differentiable, Op::differentiable};
  static auto get(const BinaryExpr<Op, A, B>& e) { return std::tie(e.a, e.b); }
};
template <class C, class A, class B>
struct node_children<WhereExpr<C, A, B>> {
  static constexpr int arity = 3;
  static constexpr std::array<bool, 3> grad_flows{false, true, true};
  static auto get(const WhereExpr<C, A, B>& e) { return std::tie(e.c, e.a, e.b); }
};

/// Calls `f(leaf, live)` for every leaf of `e` (operands of arity 0), in evaluation order;
/// `live` is false below an operand that passes no gradient.
template <class E, class F>
void for_each_leaf(const E& e, F&& f, bool live = true) {
  using C = node_children<std::remove_cvref_t<E>>;
  if constexpr (C::arity == 0) {
    f(e, live);
  } else {
    const auto kids = C::get(e);
    [&]<size_t... I>(std::index_sequence<I...>) {
      (for_each_leaf(std::get<I>(kids), f, live && C::grad_flows[I]), ...);
    }(std::make_index_sequence<size_t(C::arity)>{});
  }
}

/// The number of leaves of expression type `E` for which `Pred<leaf type>::value` holds.
template <class E, template <class> class Pred>
constexpr int count_leaves() {
  using C = node_children<E>;
  if constexpr (C::arity == 0) {
    return Pred<E>::value ? 1 : 0;
  } else {
    using Kids = decltype(C::get(std::declval<const E&>()));
    return []<size_t... I>(std::index_sequence<I...>) {
      return (count_leaves<std::remove_cvref_t<std::tuple_element_t<I, Kids>>, Pred>() + ... + 0);
    }(std::make_index_sequence<size_t(C::arity)>{});
  }
}

/// The operations (unary, binary and `where` nodes) in expression type `E`: what the profiler
/// counts as floating-point operations per element of its result.
template <class E>
constexpr int count_ops() {
  using C = node_children<E>;
  if constexpr (C::arity == 0) {
    return 0;
  } else {
    using Kids = decltype(C::get(std::declval<const E&>()));
    return []<size_t... I>(std::index_sequence<I...>) {
      return 1 + (count_ops<std::remove_cvref_t<std::tuple_element_t<I, Kids>>>() + ... + 0);
    }(std::make_index_sequence<size_t(C::arity)>{});
  }
}

namespace detail {

/// How an operand is stored inside an expression: handles and nodes by value.
template <class E>
using operand_t = std::remove_cvref_t<E>;

template <class E, class S>
auto as_operand(S s) {
  return ScalarExpr<value_type_t<E>>{static_cast<value_type_t<E>>(s)};
}

template <class A, class B>
inline constexpr bool same_element_v = std::same_as<value_type_t<A>, value_type_t<B>>;

}  // namespace detail

/// Builds `op(a)`.
template <class Op, Expression A>
auto make_unary(Op op, A&& a) {
  return UnaryExpr<Op, detail::operand_t<A>>{op, std::forward<A>(a)};
}

/// Builds `op(a, b)` for two expressions, or an expression and a number.
template <class Op, class A, class B>
auto make_binary(Op op, A&& a, B&& b) {
  if constexpr (Expression<A> && Expression<B>) {
    static_assert(detail::same_element_v<A, B>,
                  "YOU_MIXED_ELEMENT_TYPES_IN_ONE_EXPRESSION: elementwise op — cast one operand first (gd::cast<T>(x))");
    return BinaryExpr<Op, detail::operand_t<A>, detail::operand_t<B>>(op, std::forward<A>(a), std::forward<B>(b));
  } else if constexpr (Expression<A>) {
    return BinaryExpr<Op, detail::operand_t<A>, ScalarExpr<value_type_t<A>>>(op, std::forward<A>(a),
                                                                            detail::as_operand<A>(b));
  } else {
    return BinaryExpr<Op, ScalarExpr<value_type_t<B>>, detail::operand_t<B>>(op, detail::as_operand<B>(a),
                                                                            std::forward<B>(b));
  }
}

/// An operand pair an elementwise binary function accepts: two expressions, or one and a number.
template <class A, class B>
concept BinaryOperands = (Expression<A> && Expression<B>) || (Expression<A> && Scalar<B>) || (Scalar<A> && Expression<B>);

}  // namespace gradus
