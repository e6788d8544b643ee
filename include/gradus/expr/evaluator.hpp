// gradus/expr/evaluator.hpp — how an elementwise expression runs on the CPU.
//
// An expression is evaluated in blocks of kBlock elements. In the forward-only path each node's
// `lazy(start, n)` returns an Eigen array expression, so the whole chain collapses into one
// vectorised Eigen loop per block: `exp(a*b + c) * d` is a single pass over memory with no
// temporaries. The backward path (`fwd` then `bwd`) keeps every node's block of values in a
// stack buffer (L1-resident), then pushes the adjoint from the root to the leaves; each Var leaf
// writes its gradient for the block directly into its destination, so one pass produces the
// gradients of every input together. Broadcast operands are gathered (forward) and their
// gradients scatter-added (backward) through `Broadcast`.
#pragma once
#include <Eigen/Core>
#include <algorithm>
#include <array>
#include <cstring>
#include <type_traits>

#include "gradus/backend/cpu/parallel.hpp"
#include "gradus/expr/expr.hpp"

namespace gradus::detail {

inline constexpr int64_t kBlock = 512;

template <class T>
using ArrayX = Eigen::Array<T, Eigen::Dynamic, 1>;
template <class T>
using MapX = Eigen::Map<ArrayX<T>>;
template <class T>
using CMapX = Eigen::Map<const ArrayX<T>>;

/// Where a source of shape `src` sits inside an output of shape `out` (NumPy broadcasting):
/// dims of size 1 are dropped and adjacent dims merged, so a bias [C] against [N,C] becomes
/// two dims with strides {0, 1} and a same-shape operand a single contiguous run.
struct Broadcast {
  int rank = 1;
  std::array<int64_t, kMaxRank> dims{};
  std::array<int64_t, kMaxRank> strides{};

  Broadcast() = default;
  Broadcast(const Shape& src, const Shape& out) {
    const auto src_strides = row_major_strides(src);
    std::array<int64_t, kMaxRank> d{}, s{};
    int r = 0;
    for (int i = 0; i < out.rank(); ++i) {
      if (out[i] == 1) continue;
      const int j = i - (out.rank() - src.rank());
      const bool bcast = j < 0 || src[j] == 1;
      const int64_t st = bcast ? 0 : src_strides[size_t(j)];
      if (r > 0 && s[size_t(r - 1)] == st * out[i]) {  // merge with the previous dim
        d[size_t(r - 1)] *= out[i];
        s[size_t(r - 1)] = st;
      } else {
        d[size_t(r)] = out[i];
        s[size_t(r)] = st;
        ++r;
      }
    }
    if (r == 0) {
      d[0] = 1;
      s[0] = 0;
      r = 1;
    }
    rank = r;
    dims = d;
    strides = s;
  }

  /// Calls `f(k, offset, len, stride)` for the runs covering output elements [start, start+n):
  /// output element start+k+i reads source element offset + i*stride, for i < len.
  template <class F>
  void runs(int64_t start, int64_t n, F&& f) const {
    std::array<int64_t, kMaxRank> idx{};
    int64_t rem = start, off = 0;
    for (int d = rank - 1; d >= 0; --d) {
      idx[size_t(d)] = rem % dims[size_t(d)];
      rem /= dims[size_t(d)];
      off += idx[size_t(d)] * strides[size_t(d)];
    }
    const int last = rank - 1;
    const int64_t dl = dims[size_t(last)], sl = strides[size_t(last)];
    for (int64_t k = 0; k < n;) {
      const int64_t len = std::min(n - k, dl - idx[size_t(last)]);
      f(k, off, len, sl);
      k += len;
      idx[size_t(last)] += len;
      off += len * sl;
      if (idx[size_t(last)] == dl) {
        off -= dl * sl;
        idx[size_t(last)] = 0;
        for (int d = last - 1; d >= 0; --d) {
          off += strides[size_t(d)];
          if (++idx[size_t(d)] < dims[size_t(d)]) break;
          off -= dims[size_t(d)] * strides[size_t(d)];
          idx[size_t(d)] = 0;
        }
      }
    }
  }

  /// dst[k] = src[...] for the block.
  template <class T>
  void gather(const T* src, int64_t start, int64_t n, T* dst) const {
    runs(start, n, [&](int64_t k, int64_t off, int64_t len, int64_t st) {
      if (st == 1)
        std::memcpy(dst + k, src + off, size_t(len) * sizeof(T));
      else if (st == 0)
        std::fill_n(dst + k, len, src[off]);
      else
        for (int64_t i = 0; i < len; ++i) dst[k + i] = src[off + i * st];
    });
  }
  /// acc[...] += v[k] for the block (the adjoint of gather).
  template <class T>
  void scatter_add(const T* v, int64_t start, int64_t n, T* acc) const {
    runs(start, n, [&](int64_t k, int64_t off, int64_t len, int64_t st) {
      if (st == 1)
        MapX<T>(acc + off, len) += CMapX<T>(v + k, len);
      else if (st == 0)
        acc[off] += CMapX<T>(v + k, len).sum();
      else
        for (int64_t i = 0; i < len; ++i) acc[off + i * st] += v[k + i];
    });
  }
};

/// A tensor's values seen through the output's index space.
template <class T>
struct Source {
  const T* data;
  bool contiguous;
  Broadcast bc;
  alignas(64) T buf[kBlock];

  bool constant;  ///< one value broadcast everywhere: the buffer is filled once
  bool filled = false;

  Source(const T* d, const Shape& src, const Shape& out)
      : data(d), contiguous(src.numel() == out.numel()), constant(!contiguous && src.numel() == 1) {
    if (!contiguous) bc = Broadcast(src, out);
  }
  const T* block(int64_t start, int64_t n) {
    if (contiguous) return data + start;
    if (constant) {
      if (!filled) std::fill_n(buf, kBlock, data[0]), filled = true;
      return buf;
    }
    bc.gather(data, start, n, buf);
    return buf;
  }
};

/// Where one Var leaf of an expression sends its gradient during a fused backward pass.
template <class T>
struct LeafTarget {
  T* dst = nullptr;  ///< nullptr: this leaf needs no gradient
  bool add = false;  ///< accumulate into dst (else overwrite)
  bool contiguous = true;
  int64_t numel = 0;  ///< elements of the leaf
  Broadcast bc;       ///< for a broadcast leaf: output index -> leaf index
};

template <class E>
struct Evaluator;

/// Builds an evaluator for `e` over output shape `out`; Var leaves take targets in visiting order.
template <class E>
struct EvalCtx {
  const Shape& out;
  LeafTarget<value_type_t<E>>* targets;
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

/// Runs the forward part a backward pass needs: at the root, the root's own value is skipped
/// when its gradient does not read it.
template <class Ev>
void fwd_for_backward(Ev& ev, int64_t s, int64_t n) {
  if constexpr (requires { ev.fwd_inputs(s, n); })
    ev.fwd_inputs(s, n);
  else
    ev.fwd(s, n);
}

template <Element T>
struct Evaluator<Tensor<T>> {
  Source<T> src;
  const T* v = nullptr;
  template <class Ctx>
  Evaluator(const Tensor<T>& t, Ctx& ctx) : src(t.data(), t.shape(), ctx.out) {}
  auto lazy(int64_t s, int64_t n) { return CMapX<T>(src.block(s, n), n); }
  void fwd(int64_t s, int64_t n) { v = src.block(s, n); }
  const T* val() const { return v; }
  void bwd(int64_t, int64_t, const T*) {}
};

template <Real T>
struct Evaluator<Var<T>> {
  Source<T> src;
  const T* v = nullptr;
  LeafTarget<T>* target;
  template <class Ctx>
  Evaluator(const Var<T>& x, Ctx& ctx)
      : src(x.value().data(), x.value().shape(), ctx.out), target(ctx.targets ? ctx.targets + ctx.next++ : nullptr) {}
  auto lazy(int64_t s, int64_t n) { return CMapX<T>(src.block(s, n), n); }
  void fwd(int64_t s, int64_t n) { v = src.block(s, n); }
  const T* val() const { return v; }
  void bwd(int64_t s, int64_t n, const T* adj) { bwd_expr(s, n, CMapX<T>(adj, n), nullptr); }
  /// Writes the gradient expression straight into the destination (no staging buffer) when
  /// the leaf is not broadcast; `buf` stages it otherwise.
  template <class X>
  void bwd_expr(int64_t s, int64_t n, const X& g, T* buf) {
    if (!target || !target->dst) return;
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
struct Evaluator<ScalarExpr<T>> {
  T value;
  alignas(64) T buf[kBlock];
  bool filled = false;
  template <class Ctx>
  Evaluator(const ScalarExpr<T>& e, Ctx&) : value(e.value) {}
  auto lazy(int64_t, int64_t n) { return ArrayX<T>::Constant(n, value); }
  void fwd(int64_t, int64_t) {
    if (!filled) std::fill_n(buf, kBlock, value), filled = true;
  }
  const T* val() const { return buf; }
  void bwd(int64_t, int64_t, const T*) {}
};

template <class Op, class A>
struct Evaluator<UnaryExpr<Op, A>> {
  using T = value_type_t<A>;
  Op op;
  Evaluator<A> a;
  alignas(64) T y[kBlock];
  alignas(64) T ga[kBlock];
  template <class Ctx>
  Evaluator(const UnaryExpr<Op, A>& e, Ctx& ctx) : op(e.op), a(e.a, ctx) {}
  auto lazy(int64_t s, int64_t n) { return op.forward(a.lazy(s, n)); }
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
struct Evaluator<BinaryExpr<Op, A, B>> {
  using T = value_type_t<A>;
  Op op;
  Evaluator<A> a;
  Evaluator<B> b;
  alignas(64) T z[kBlock];
  alignas(64) T gab[kBlock];
  template <class Ctx>
  Evaluator(const BinaryExpr<Op, A, B>& e, Ctx& ctx) : op(e.op), a(e.a, ctx), b(e.b, ctx) {}
  auto lazy(int64_t s, int64_t n) { return op.forward(a.lazy(s, n), b.lazy(s, n)); }
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
struct Evaluator<WhereExpr<C, A, B>> {
  using T = value_type_t<A>;
  Evaluator<C> c;
  Evaluator<A> a;
  Evaluator<B> b;
  alignas(64) T z[kBlock];
  alignas(64) T gab[kBlock];
  template <class Ctx>
  Evaluator(const WhereExpr<C, A, B>& e, Ctx& ctx) : c(e.c, ctx), a(e.a, ctx), b(e.b, ctx) {}
  auto lazy(int64_t s, int64_t n) {
    return (c.lazy(s, n) != value_type_t<C>(0)).select(a.lazy(s, n), b.lazy(s, n));
  }
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

/// Calls `f(var, live)` for every Var leaf of `e`, in the order evaluators visit them; `live` is
/// false for a leaf whose gradient cannot flow to it (under a comparison, `sign`, a `where`
/// condition), so the backward pass never writes through that occurrence.
template <class E, class F>
void for_each_var(const E& e, F&& f, bool live = true) {
  if constexpr (is_var_v<E>)
    f(e, live);
  else if constexpr (requires { e.c; }) {
    for_each_var(e.c, f, false);
    for_each_var(e.a, f, live);
    for_each_var(e.b, f, live);
  } else if constexpr (requires { e.b; }) {
    constexpr bool d = decltype(e.op)::differentiable;
    for_each_var(e.a, f, live && d);
    for_each_var(e.b, f, live && d);
  } else if constexpr (requires { e.a; })
    for_each_var(e.a, f, live && decltype(e.op)::differentiable);
}

template <class E>
constexpr int count_vars() {
  if constexpr (is_var_v<E>)
    return 1;
  else if constexpr (requires(E e) { e.c; })
    return count_vars<decltype(E::c)>() + count_vars<decltype(E::a)>() + count_vars<decltype(E::b)>();
  else if constexpr (requires(E e) { e.b; })
    return count_vars<decltype(E::a)>() + count_vars<decltype(E::b)>();
  else if constexpr (requires(E e) { e.a; })
    return count_vars<decltype(E::a)>();
  else
    return 0;
}

// ---------------------------------------------------------------------------------------------
// Kernels over whole expressions.

/// out[i] = e[i] for every element of e's shape; `out` may alias an operand of the same shape.
template <class E>
void evaluate_into(const E& e, value_type_t<E>* out, const Shape& shape) {
  using T = value_type_t<E>;
  const int64_t n = shape.numel();
  cpu::parallel_chunks(n, kBlock, [&](int, int64_t begin, int64_t end) {
    EvalCtx<E> ctx{shape, nullptr};
    Evaluator<E> ev(e, ctx);
    for (int64_t s = begin; s < end; s += kBlock) {
      const int64_t m = std::min(kBlock, end - s);
      MapX<T>(out + s, m) = ev.lazy(s, m);
    }
  });
}

/// Sum of all elements of e, accumulated per block in T and across blocks in double.
template <class E>
double sum_all(const E& e, const Shape& shape) {
  const int64_t n = shape.numel();
  std::array<double, cpu::kMaxThreads> partial{};
  cpu::parallel_chunks(n, kBlock, [&](int t, int64_t begin, int64_t end) {
    EvalCtx<E> ctx{shape, nullptr};
    Evaluator<E> ev(e, ctx);
    double acc = 0;
    for (int64_t s = begin; s < end; s += kBlock) {
      const int64_t m = std::min(kBlock, end - s);
      acc += double(ev.lazy(s, m).sum());
    }
    partial[size_t(t)] = acc;
  });
  double total = 0;
  for (double p : partial) total += p;
  return total;
}

/// acc (shape `reduced`, broadcastable to `shape`) += e, summed over the broadcast axes.
/// `acc` must hold zeros (or a running sum) on entry.
template <class E>
void sum_into(const E& e, const Shape& shape, value_type_t<E>* acc, const Shape& reduced) {
  using T = value_type_t<E>;
  const int64_t n = shape.numel(), m_out = reduced.numel();
  const Broadcast bc(reduced, shape);
  int chunks = cpu::chunks_for(n, kBlock);
  if (int64_t(chunks) * m_out * 4 > n) chunks = 1;  // partial sums would cost more than they save
  std::array<Tensor<T>, cpu::kMaxThreads> partial;
  for (int t = 1; t < chunks; ++t) partial[size_t(t)] = Tensor<T>::zeros(reduced);
  cpu::parallel_chunks(
      n, kBlock,
      [&](int t, int64_t begin, int64_t end) {
        EvalCtx<E> ctx{shape, nullptr};
        Evaluator<E> ev(e, ctx);
        alignas(64) T buf[kBlock];
        T* dst = t == 0 ? acc : partial[size_t(t)].data();
        for (int64_t s = begin; s < end; s += kBlock) {
          const int64_t m = std::min(kBlock, end - s);
          MapX<T>(buf, m) = ev.lazy(s, m);
          bc.scatter_add(buf, s, m, dst);
        }
      },
      chunks > 1 ? cpu::kParallelThreshold : INT64_MAX);
  for (int t = 1; t < chunks; ++t) MapX<T>(acc, m_out) += CMapX<T>(partial[size_t(t)].data(), m_out);
}

/// The fused backward pass: for every Var leaf of e, adds (or writes) d(sum(g * e))/d(leaf)
/// into its target, where `g` (broadcastable to `shape`) is the adjoint of e scaled by `scale`.
/// Broadcast leaves accumulate per thread and are reduced after the pass.
/// Sum of a block of the root's values during a backward pass (after fwd_for_backward).
template <class T, class Ev>
double block_value_sum(Ev& ev, int64_t n) {
  if constexpr (requires { ev.value_from_inputs(n); })
    return double(ev.value_from_inputs(n).sum());
  else
    return double(CMapX<T>(ev.val(), n).sum());
}

template <class E>
void backward_pass(const E& e, const Shape& shape, const Tensor<value_type_t<E>>& g, value_type_t<E> scale,
                   LeafTarget<value_type_t<E>>* targets, int ntargets, double* value_sum = nullptr) {
  using T = value_type_t<E>;
  const int64_t n = shape.numel();
  int chunks = cpu::chunks_for(n, kBlock);
  // Per-thread partial gradients for broadcast leaves.
  constexpr int kMaxLeaves = 32;
  GRADUS_CHECK(value_error, ntargets <= kMaxLeaves, "backward: an expression has more than ", kMaxLeaves,
               " Var operands; materialise part of it into a Var first");
  std::array<std::array<Tensor<T>, kMaxLeaves>, cpu::kMaxThreads> partial;
  for (int i = 0; i < ntargets; ++i)
    if (targets[i].dst && !targets[i].contiguous && int64_t(chunks) * targets[i].numel * 4 > n) chunks = 1;
  for (int t = 1; t < chunks; ++t)
    for (int i = 0; i < ntargets; ++i)
      if (targets[i].dst && !targets[i].contiguous) partial[size_t(t)][size_t(i)] = Tensor<T>::zeros({targets[i].numel});
  const Shape gshape = g.shape();
  std::array<double, cpu::kMaxThreads> sums{};
  cpu::parallel_chunks(
      n, kBlock,
      [&](int t, int64_t begin, int64_t end) {
        std::array<LeafTarget<T>, kMaxLeaves> local;
        for (int i = 0; i < ntargets; ++i) {
          local[size_t(i)] = targets[i];
          if (t > 0 && targets[i].dst && !targets[i].contiguous) local[size_t(i)].dst = partial[size_t(t)][size_t(i)].data();
        }
        EvalCtx<E> ctx{shape, local.data()};
        Evaluator<E> ev(e, ctx);
        Source<T> gsrc(g.data(), gshape, shape);
        alignas(64) T adj[kBlock];
        for (int64_t s = begin; s < end; s += kBlock) {
          const int64_t m = std::min(kBlock, end - s);
          fwd_for_backward(ev, s, m);
          if (value_sum) sums[size_t(t)] += block_value_sum<T>(ev, m);
          const T* gb = gsrc.block(s, m);
          if (scale != T(1)) {
            MapX<T>(adj, m) = CMapX<T>(gb, m) * scale;
            gb = adj;
          }
          ev.bwd(s, m, gb);
        }
      },
      chunks > 1 ? cpu::kParallelThreshold : INT64_MAX);
  if (value_sum) {
    *value_sum = 0;
    for (double x : sums) *value_sum += x;
  }
  for (int t = 1; t < chunks; ++t)
    for (int i = 0; i < ntargets; ++i)
      if (targets[i].dst && !targets[i].contiguous) {
        const int64_t len = targets[i].numel;
        MapX<T>(targets[i].dst, len) += CMapX<T>(partial[size_t(t)][size_t(i)].data(), len);
      }
}

}  // namespace gradus::detail
