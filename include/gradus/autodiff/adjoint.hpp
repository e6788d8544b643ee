// gradus/autodiff/adjoint.hpp — the fused backward pass of an elementwise expression.
//
// The adjoint evaluator `Adjoint<E>` mirrors the expression's type. Per block of kBlock
// elements, `fwd` keeps every node's block of values in a stack buffer (L1-resident), then `bwd`
// pushes the adjoint from the root to the leaves; each Var leaf writes its gradient for the
// block directly into its destination, so one pass produces the gradients of every input
// together. Broadcast leaves scatter-add through their `Broadcast`. The block loop itself (and
// its threading) is the backend's: backend::cpu::backward_blocks.
#pragma once
#include "gradus/core/eigen.hpp"
#include <type_traits>

#include "gradus/autodiff/var.hpp"
#include "gradus/backend/backend.hpp"

namespace gradus::detail {

using backend::cpu::ArrayX;
using backend::cpu::Broadcast;
using backend::cpu::CMapX;
using backend::cpu::kBlock;
using backend::cpu::LeafTarget;
using backend::cpu::MapX;
using backend::cpu::Source;

template <class E>
struct Adjoint;

/// What an adjoint evaluator is built with: the output shape, and the gradient targets that
/// Var leaves take in visiting order.
template <class T>
struct AdjointCtx {
  const Shape& out;
  LeafTarget<T>* targets;
  int next = 0;
};

/// Binary ops whose gradient w.r.t. operand I is the incoming gradient itself (add, and sub's x):
/// the backward pass hands the adjoint block straight through instead of copying it.
template <class Op, int I>
inline constexpr bool passes_gradient = requires { requires(I == 0 ? Op::dx_is_identity : Op::dy_is_identity); };
/// Unary ops whose gradient reads only their output (exp, tanh, sigmoid, sqrt, rsqrt).
template <class Op>
inline constexpr bool ignores_input = requires { requires Op::ignores_input; };
/// Binary ops whose gradient reads their own output z.
template <class Op>
inline constexpr bool uses_output = !requires { requires Op::ignores_output; };

template <Element T>
struct Adjoint<Tensor<T>> {
  Source<T> src;
  const T* v = nullptr;
  Adjoint(const Tensor<T>& t, AdjointCtx<T>& ctx) : src(t.data(), t.shape(), ctx.out) {}
  void fwd(int64_t s, int64_t n) { v = src.block(s, n); }
  const T* val() const { return v; }
  void bwd(int64_t, int64_t, const T*) {}
};

template <Real T>
struct Adjoint<Var<T>> {
  Source<T> src;
  const T* v = nullptr;
  LeafTarget<T>* target;
  Adjoint(const Var<T>& x, AdjointCtx<T>& ctx)
      : src(x.value().data(), x.value().shape(), ctx.out), target(ctx.targets + ctx.next++) {}
  void fwd(int64_t s, int64_t n) { v = src.block(s, n); }
  const T* val() const { return v; }
  void bwd(int64_t s, int64_t n, const T* adj) { bwd_expr(s, n, CMapX<T>(adj, n), nullptr); }
  /// Writes the gradient expression straight into the destination (no staging buffer) when
  /// the leaf is not broadcast; `buf` stages it otherwise.
  template <class X>
  void bwd_expr(int64_t s, int64_t n, const X& g, T* buf) {
    if (!target->dst) return;
    if (target->contiguous) {
      if (target->add)
        MapX<T>(target->dst + s, n) += g;
      else
        MapX<T>(target->dst + s, n) = g;
    } else if constexpr (std::is_same_v<X, CMapX<T>>) {
      target->bc.scatter_add(g.data(), s, n, target->dst);
    } else {
      MapX<T>(buf, n) = g;
      target->bc.scatter_add(buf, s, n, target->dst);
    }
  }
};

/// Hands the gradient expression `g` of a block to child evaluator `c`: a Var leaf takes the
/// expression directly, any other child gets it materialised in `buf`.
template <class C, class X, class T>
void push_grad(C& c, int64_t s, int64_t n, const X& g, T* buf) {
  if constexpr (requires { c.bwd_expr(s, n, g, buf); }) {
    c.bwd_expr(s, n, g, buf);
  } else {
    MapX<T>(buf, n) = g;
    c.bwd(s, n, buf);
  }
}

template <Element T>
struct Adjoint<ScalarExpr<T>> {
  T value;
  alignas(64) T buf[kBlock];
  bool filled = false;
  Adjoint(const ScalarExpr<T>& e, AdjointCtx<T>&) : value(e.value) {}
  void fwd(int64_t, int64_t) {
    if (!filled) std::fill_n(buf, kBlock, value), filled = true;
  }
  const T* val() const { return buf; }
  void bwd(int64_t, int64_t, const T*) {}
};

template <class Op, class A>
struct Adjoint<UnaryExpr<Op, A>> {
  using T = value_type_t<A>;
  Op op;
  Adjoint<A> a;
  alignas(64) T y[kBlock];
  alignas(64) T ga[kBlock];
  Adjoint(const UnaryExpr<Op, A>& e, AdjointCtx<T>& ctx) : op(e.op), a(e.a, ctx) {}
  void fwd(int64_t s, int64_t n) {
    if constexpr (ignores_input<Op> && requires { a.value_from_inputs(n); }) {
      a.fwd_inputs(s, n);  // the operand's value is needed only here: compute it in this expression
      MapX<T>(y, n) = op.forward(a.value_from_inputs(n));
    } else {
      a.fwd(s, n);
      MapX<T>(y, n) = op.forward(CMapX<T>(a.val(), n));
    }
  }
  const T* val() const { return y; }
  void bwd(int64_t s, int64_t n, const T* g) {
    if constexpr (is_differentiable_v<A> && Op::differentiable) {
      const T* x = ignores_input<Op> ? y : a.val();  // not read when the op ignores its input
      push_grad(a, s, n, op.backward(CMapX<T>(x, n), CMapX<T>(y, n), CMapX<T>(g, n)), ga);
    }
  }
};

template <class Op, class A, class B>
struct Adjoint<BinaryExpr<Op, A, B>> {
  using T = value_type_t<A>;
  Op op;
  Adjoint<A> a;
  Adjoint<B> b;
  alignas(64) T z[kBlock];
  alignas(64) T gab[kBlock];
  Adjoint(const BinaryExpr<Op, A, B>& e, AdjointCtx<T>& ctx) : op(e.op), a(e.a, ctx), b(e.b, ctx) {}
  void fwd(int64_t s, int64_t n) {
    a.fwd(s, n);
    b.fwd(s, n);
    MapX<T>(z, n) = op.forward(CMapX<T>(a.val(), n), CMapX<T>(b.val(), n));
  }
  const T* val() const { return z; }
  /// The children's values only: enough for this node's backward unless it reads its output.
  void fwd_inputs(int64_t s, int64_t n) {
    a.fwd(s, n);
    b.fwd(s, n);
    if constexpr (uses_output<Op>) MapX<T>(z, n) = op.forward(CMapX<T>(a.val(), n), CMapX<T>(b.val(), n));
  }
  /// This node's value as an Eigen expression over its children's values (after fwd_inputs).
  auto value_from_inputs(int64_t n) const
    requires(!uses_output<Op>)
  {
    return op.forward(CMapX<T>(a.val(), n), CMapX<T>(b.val(), n));
  }
  void bwd(int64_t s, int64_t n, const T* g) {
    if constexpr (Op::differentiable) {
      if constexpr (is_differentiable_v<A>) {
        if constexpr (passes_gradient<Op, 0>) {
          a.bwd(s, n, g);
        } else {
          push_grad(a, s, n, op.dx(CMapX<T>(a.val(), n), CMapX<T>(b.val(), n), CMapX<T>(z, n), CMapX<T>(g, n)), gab);
        }
      }
      if constexpr (is_differentiable_v<B>) {
        if constexpr (passes_gradient<Op, 1>) {
          b.bwd(s, n, g);
        } else {
          push_grad(b, s, n, op.dy(CMapX<T>(a.val(), n), CMapX<T>(b.val(), n), CMapX<T>(z, n), CMapX<T>(g, n)), gab);
        }
      }
    }
  }
};

template <class C, class A, class B>
struct Adjoint<WhereExpr<C, A, B>> {
  using T = value_type_t<A>;
  Adjoint<C> c;
  Adjoint<A> a;
  Adjoint<B> b;
  alignas(64) T z[kBlock];
  alignas(64) T gab[kBlock];
  Adjoint(const WhereExpr<C, A, B>& e, AdjointCtx<T>& ctx) : c(e.c, ctx), a(e.a, ctx), b(e.b, ctx) {}
  void fwd(int64_t s, int64_t n) {
    c.fwd(s, n);
    a.fwd(s, n);
    b.fwd(s, n);
    MapX<T>(z, n) = (cond(n)).select(CMapX<T>(a.val(), n), CMapX<T>(b.val(), n));
  }
  const T* val() const { return z; }
  void bwd(int64_t s, int64_t n, const T* g) {
    if constexpr (is_differentiable_v<A>) {
      push_grad(a, s, n, cond(n).select(CMapX<T>(g, n), T(0)), gab);
    }
    if constexpr (is_differentiable_v<B>) {
      push_grad(b, s, n, cond(n).select(T(0), CMapX<T>(g, n)), gab);
    }
  }

 private:
  auto cond(int64_t n) const { return CMapX<value_type_t<C>>(c.val(), n) != value_type_t<C>(0); }
};

/// The root of a backward pass: what backend::cpu::backward_blocks asks of it per block.
template <class E>
struct AdjointRoot {
  using T = value_type_t<E>;
  Adjoint<E> ev;
  /// The forward part the backward pass needs: the root's own value is skipped when its
  /// gradient does not read it.
  void forward_for_backward(int64_t s, int64_t n) {
    if constexpr (requires { ev.fwd_inputs(s, n); })
      ev.fwd_inputs(s, n);
    else
      ev.fwd(s, n);
  }
  /// Sum of the block of root values (after forward_for_backward).
  double block_sum(int64_t n) {
    if constexpr (requires { ev.value_from_inputs(n); })
      return double(ev.value_from_inputs(n).sum());
    else
      return double(CMapX<T>(ev.val(), n).sum());
  }
  void bwd(int64_t s, int64_t n, const T* g) { ev.bwd(s, n, g); }
};

/// Calls `f(var, live)` for every Var leaf of `e`, in the order evaluators visit them; `live` is
/// false for a leaf whose gradient cannot flow to it (under a comparison, `sign`, a `where`
/// condition), so the backward pass never writes through that occurrence.
template <class E, class F>
void for_each_var(const E& e, F&& f) {
  for_each_leaf(e, [&](const auto& leaf, bool live) {
    if constexpr (is_var_v<decltype(leaf)>) f(leaf, live);
  });
}

template <class E>
constexpr int count_vars() {
  return count_leaves<E, is_var>();
}

/// Builds the adjoint evaluator of e for one thread of a backend that runs the backward pass in
/// place (backend::cpu::backward_blocks): the root of Adjoint<E> over `local` targets.
struct MakeAdjoint {
  template <class E, class T>
  static AdjointRoot<E> make(const E& e, const Shape& out, LeafTarget<T>* local) {
    AdjointCtx<T> ctx{out, local};
    return AdjointRoot<E>{Adjoint<E>(e, ctx)};
  }
};

/// The fused backward pass of expression `e` (output shape `out`) given the adjoint `g`
/// (broadcastable to `out`) times `scale`: every Var leaf gets its gradient in one pass, on the
/// device of g. With `value_dst` (in that device's memory), value_dst[0] = T(sum of e's values)
/// * value_scale comes back from the same sweep.
template <class E, class T = value_type_t<E>>
void fused_backward(const E& e, const Shape& out, const Tensor<T>& g, T scale, T* value_dst = nullptr,
                    T value_scale = T(1)) {
  constexpr int N = count_vars<E>();
  static_assert(N <= backend::cpu::kMaxLeaves,
                "YOUR_EXPRESSION_HAS_TOO_MANY_VAR_OPERANDS: backward — materialise part of it into a Var first");
  const Device device = g.device();
  std::array<backend::GradTarget<T>, N> targets{};
  int var = 0, leaf = 0;
  for_each_leaf(e, [&]<class L>(const L& x, bool live) {
    if constexpr (!is_number_leaf<L>::value) {
      if constexpr (is_var_v<L>) {
        backend::GradTarget<T>& t = targets[size_t(var++)];
        t.leaf = leaf;
        Node<T>* node = x.node();
        if (live && node->requires_grad) {
          GRADUS_CHECK(device_error, node->value.device() == device, "backward: a Var on ", node->value.device(),
                       " in an expression run on ", device);
          t.shape = node->value.shape();
          t.dst = node->adjoint_buffer(&t.add);
          t.broadcast = node->value.size() != out.numel();
          if (t.broadcast && !t.add) backend::fill(t.dst, node->value.size(), T(0), device);
          t.add |= t.broadcast;
        }
      }
      ++leaf;
    }
  });
  backend::fused_backward<MakeAdjoint>(e, out, g, scale, targets.data(), N, value_dst, value_scale, device);
}

}  // namespace gradus::detail
