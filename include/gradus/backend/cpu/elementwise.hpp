// gradus/backend/cpu/elementwise.hpp — how an elementwise expression runs on the CPU.
//
// An expression is evaluated in blocks of kBlock elements. Each node's forward evaluator
// `lazy(start, n)` returns an Eigen array expression, so the whole chain collapses into one
// vectorised Eigen loop per block: `exp(a*b + c) * d` is a single pass over memory with no
// temporaries. Broadcast operands are gathered through `Source`. The loops below split the
// blocks over the cores: evaluate into a tensor, sum everything, sum over broadcast axes, and
// the block loop of the fused backward pass (whose per-node adjoint evaluators live in
// autodiff/adjoint.hpp: this file knows nothing of the tape).
#pragma once
#include "gradus/core/eigen.hpp"
#include <algorithm>
#include <array>
#include <climits>
#include <type_traits>

#include "gradus/backend/cpu/broadcast.hpp"
#include "gradus/backend/cpu/parallel.hpp"
#include "gradus/core/compiled.hpp"
#include "gradus/core/tensor.hpp"
#include "gradus/expr/expr.hpp"

namespace gradus::backend::cpu {

/// The forward evaluator of expression node `E` over an output shape: `lazy(start, n)` is the
/// Eigen expression of elements [start, start+n). Leaf types of higher layers (Var) specialise it.
template <class E>
struct Evaluator;

template <Element T>
struct Evaluator<Tensor<T>> {
  Source<T> src;
  Evaluator(const Tensor<T>& t, const Shape& out) : src(t.data(), t.shape(), out) {}
  auto lazy(int64_t s, int64_t n) { return CMapX<T>(src.block(s, n), n); }
};

template <Element T>
struct Evaluator<ScalarExpr<T>> {
  T value;
  Evaluator(const ScalarExpr<T>& e, const Shape&) : value(e.value) {}
  auto lazy(int64_t, int64_t n) { return ArrayX<T>::Constant(n, value); }
};

template <class Op, class A>
struct Evaluator<UnaryExpr<Op, A>> {
  Op op;
  Evaluator<A> a;
  Evaluator(const UnaryExpr<Op, A>& e, const Shape& out) : op(e.op), a(e.a, out) {}
  auto lazy(int64_t s, int64_t n) { return op.forward(a.lazy(s, n)); }
};

template <class Op, class A, class B>
struct Evaluator<BinaryExpr<Op, A, B>> {
  Op op;
  Evaluator<A> a;
  Evaluator<B> b;
  Evaluator(const BinaryExpr<Op, A, B>& e, const Shape& out) : op(e.op), a(e.a, out), b(e.b, out) {}
  auto lazy(int64_t s, int64_t n) { return op.forward(a.lazy(s, n), b.lazy(s, n)); }
};

template <class C, class A, class B>
struct Evaluator<WhereExpr<C, A, B>> {
  Evaluator<C> c;
  Evaluator<A> a;
  Evaluator<B> b;
  Evaluator(const WhereExpr<C, A, B>& e, const Shape& out) : c(e.c, out), a(e.a, out), b(e.b, out) {}
  auto lazy(int64_t s, int64_t n) {
    return (c.lazy(s, n) != value_type_t<C>(0)).select(a.lazy(s, n), b.lazy(s, n));
  }
};

// ---------------------------------------------------------------------------------------------
// Loops over whole expressions.

/// out[i] = e[i] for every element of e's shape; `out` may alias an operand of the same shape.
template <class E>
void evaluate_into(const E& e, value_type_t<E>* out, const Shape& shape) {
  using T = value_type_t<E>;
  const int64_t n = shape.numel();
  parallel_chunks(n, kBlock, [&](int, int64_t begin, int64_t end) {
    Evaluator<E> ev(e, shape);
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
  std::array<double, kMaxChunks> partial{};
  parallel_chunks(n, kBlock, [&](int t, int64_t begin, int64_t end) {
    Evaluator<E> ev(e, shape);
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
  // Fewer chunks where their partial sums would cost more than they save.
  const int max_chunks = int(std::min<int64_t>(kMaxChunks, n / (4 * std::max<int64_t>(m_out, 1))));
  const int chunks = max_chunks < 2 ? 1 : chunks_for(n, kBlock, kParallelThreshold, max_chunks);
  Tensor<T> partial;  // chunk t > 0 sums into row t - 1; rows added in chunk order afterwards
  if (chunks > 1) partial = Tensor<T>::zeros({chunks - 1, m_out});
  parallel_chunks(
      n, kBlock,
      [&](int t, int64_t begin, int64_t end) {
        Evaluator<E> ev(e, shape);
        alignas(64) T buf[kBlock];
        T* dst = t == 0 ? acc : partial.data() + (t - 1) * m_out;
        for (int64_t s = begin; s < end; s += kBlock) {
          const int64_t m = std::min(kBlock, end - s);
          MapX<T>(buf, m) = ev.lazy(s, m);
          bc.scatter_add(buf, s, m, dst);
        }
      },
      chunks > 1 ? kParallelThreshold : INT64_MAX, std::max(max_chunks, 1));
  for (int t = 1; t < chunks; ++t) MapX<T>(acc, m_out) += CMapX<T>(partial.data() + (t - 1) * m_out, m_out);
}

// ---------------------------------------------------------------------------------------------
// The block loop of a fused backward pass.

/// Where one differentiable leaf of an expression sends its gradient during a fused backward pass.
template <class T>
struct LeafTarget {
  T* dst = nullptr;  ///< nullptr: this leaf needs no gradient
  bool add = false;  ///< accumulate into dst (else overwrite)
  bool contiguous = true;
  int64_t numel = 0;  ///< elements of the leaf
  Broadcast bc;       ///< for a broadcast leaf: output index -> leaf index
};

/// Most differentiable leaves one fused expression may have.
inline constexpr int kMaxLeaves = 32;

/// The part of backward_blocks that does not depend on the expression: plans the chunks of
/// [0, shape.numel()) and the per-chunk partial gradients of broadcast leaves, calls
/// `chunk(ctx, begin, end, local, sum)` for each chunk (`local`: the targets as that chunk writes
/// them; `sum`: where the chunk adds its values' sum, null unless `value_sum`), then adds the
/// partial gradients and sums up in chunk order. Compiled once per element type.
template <class T>
void backward_chunks(const Shape& shape, LeafTarget<T>* targets, int ntargets, double* value_sum,
                     void (*chunk)(void* ctx, int64_t begin, int64_t end, LeafTarget<T>* local, double* sum),
                     void* ctx);

/// Runs the backward pass of an adjoint evaluator `Ev` (made by `make(targets)` on each thread)
/// over output shape `shape`: per block, `ev.forward_for_backward(s, n)` then `ev.bwd(s, n, g)`
/// with the block of `g` (broadcastable to `shape`) times `scale`. Broadcast leaves accumulate
/// into per-thread partial gradients, reduced after the pass. With `value_sum`, the sum of the
/// root's values (`ev.block_sum(n)`) comes back too.
template <class T, class MakeEv>
void backward_blocks(const Shape& shape, const Tensor<T>& g, T scale, LeafTarget<T>* targets, int ntargets,
                     double* value_sum, MakeEv&& make) {
  struct Context {
    const Shape& shape;
    const Tensor<T>& g;
    T scale;
    MakeEv& make;
  } context{shape, g, scale, make};
  backward_chunks<T>(
      shape, targets, ntargets, value_sum,
      [](void* c, int64_t begin, int64_t end, LeafTarget<T>* local, double* sum) {
        Context& x = *static_cast<Context*>(c);
        auto ev = x.make(local);
        Source<T> gsrc(x.g.data(), x.g.shape(), x.shape);
        alignas(64) T adj[kBlock];
        for (int64_t s = begin; s < end; s += kBlock) {
          const int64_t m = std::min(kBlock, end - s);
          ev.forward_for_backward(s, m);
          if (sum) *sum += ev.block_sum(m);
          const T* gb = gsrc.block(s, m);
          if (x.scale != T(1)) {
            MapX<T>(adj, m) = CMapX<T>(gb, m) * x.scale;
            gb = adj;
          }
          ev.bwd(s, m, gb);
        }
      },
      &context);
}

template <class T>
void backward_chunks(const Shape& shape, LeafTarget<T>* targets, int ntargets, double* value_sum,
                     void (*chunk)(void* ctx, int64_t begin, int64_t end, LeafTarget<T>* local, double* sum),
                     void* ctx) {
  const int64_t n = shape.numel();
  // Fewer chunks where the partial gradients of broadcast leaves would cost more than they save.
  int64_t most = kMaxChunks;
  for (int i = 0; i < ntargets; ++i)
    if (targets[i].dst && !targets[i].contiguous) most = std::min(most, n / (4 * std::max<int64_t>(targets[i].numel, 1)));
  const int max_chunks = int(std::max<int64_t>(most, 1));
  const int chunks = most < 2 ? 1 : chunks_for(n, kBlock, kParallelThreshold, max_chunks);
  std::array<Tensor<T>, kMaxLeaves> partial;  // per broadcast leaf: row t - 1 for chunk t > 0
  if (chunks > 1)
    for (int i = 0; i < ntargets; ++i)
      if (targets[i].dst && !targets[i].contiguous) partial[size_t(i)] = Tensor<T>::zeros({chunks - 1, targets[i].numel});
  std::array<double, kMaxChunks> sums{};
  parallel_chunks(
      n, kBlock,
      [&](int t, int64_t begin, int64_t end) {
        std::array<LeafTarget<T>, kMaxLeaves> local;
        for (int i = 0; i < ntargets; ++i) {
          local[size_t(i)] = targets[i];
          if (t > 0 && targets[i].dst && !targets[i].contiguous)
            local[size_t(i)].dst = partial[size_t(i)].data() + (t - 1) * targets[i].numel;
        }
        chunk(ctx, begin, end, local.data(), value_sum ? &sums[size_t(t)] : nullptr);
      },
      chunks > 1 ? kParallelThreshold : INT64_MAX, max_chunks);
  if (value_sum) {
    *value_sum = 0;
    for (double x : sums) *value_sum += x;
  }
  for (int t = 1; t < chunks; ++t)
    for (int i = 0; i < ntargets; ++i)
      if (targets[i].dst && !targets[i].contiguous) {
        const int64_t len = targets[i].numel;
        MapX<T>(targets[i].dst, len) += CMapX<T>(partial[size_t(i)].data() + (t - 1) * len, len);
      }
}

}  // namespace gradus::backend::cpu

#if GRADUS_INSTANCES  // compiled once in libgradus with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::backend::cpu {
GRADUS_INSTANCE void backward_chunks(const Shape&, LeafTarget<float>*, int, double*,
                                     void (*)(void*, int64_t, int64_t, LeafTarget<float>*, double*), void*);
GRADUS_INSTANCE_DOUBLE void backward_chunks(const Shape&, LeafTarget<double>*, int, double*,
                                            void (*)(void*, int64_t, int64_t, LeafTarget<double>*, double*), void*);
}  // namespace gradus::backend::cpu
#endif
