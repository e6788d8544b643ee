// gradus/ops/linalg.hpp — matmul (batched, broadcast over batch dims): shape checks, the tape
// node and the gradient rule; the products run on backend::gemm.
#pragma once

#include "gradus/core/compiled.hpp"
#include "gradus/autodiff/materialize.hpp"
#include "gradus/backend/backend.hpp"

namespace gradus {
namespace detail {

/// The shapes of one matmul: batch dims broadcast; rank-1 operands promoted as NumPy does; with
/// `ta` (`tb`) the last two axes of a (b) are read transposed.
struct MatmulPlan {
  int64_t m, k, n;
  Shape batch, a_batch, b_batch, out;
  bool a_vec = false, b_vec = false;
  bool ta = false, tb = false;
  MatmulPlan(Shape a, Shape b, bool transpose_a = false, bool transpose_b = false);
};

/// Where batch entry i of one operand (batch shape `own`, matrices of `stride` elements) starts
/// within the broadcast `batch`: computed per entry, so a batched product allocates nothing.
struct BatchOffsets {
  Broadcast bc;
  int64_t stride;
  BatchOffsets(const Shape& own, const Shape& batch, int64_t matrix) : bc(own, batch), stride(matrix) {}
  int64_t operator[](int64_t i) const {
    int64_t at = 0;
    bc.runs(i, 1, [&](int64_t, int64_t off, int64_t, int64_t) { at = off; });
    return at * stride;
  }
};

}  // namespace detail

/// Options of matmul, as tf.matmul's: read the last two axes of a (b) transposed, without a
/// transposed copy (the GEMM reads it in place).
struct MatmulOptions {
  bool transpose_a = false;
  bool transpose_b = false;
};

namespace detail {
/// What matmul returns for materialised operands A and B (each a Tensor or a Var): a Var when
/// either is one.
template <class A, class B>
using matmul_result_t = std::conditional_t<is_var_v<A> || is_var_v<B>, Var<value_type_t<A>>, Tensor<value_type_t<A>>>;
/// matmul of operands already materialised, inside the caller's profiler scope `prof`: one
/// function per pair of operand kinds, which libgradus compiles for float and double.
template <class A, class B>
matmul_result_t<A, B> matmul_operands(const A& a, const B& b, const MatmulOptions& options, const OpScope& prof);
}  // namespace detail

/// Matrix product over the last two axes, broadcasting the batch axes (rank-1 operands as in
/// NumPy). Runs on the backend's GEMM (backend/cpu/gemm.hpp on the CPU, cuBLAS on a GPU).
///   gd::matmul(x, w)   // [N,784] x [784,10] -> [N,10];  [B,m,k] x [k,n] -> [B,m,n]
///   gd::matmul(x, g, {.transpose_a = true})   // xᵀ·g: [N,784]ᵀ x [N,10] -> [784,10]
template <Expression A, Expression B>
auto matmul(const A& a_expr, const B& b_expr, const MatmulOptions& options = {}) {
  gradus::detail::OpScope prof;
  static_assert(detail::same_element_v<A, B>, "YOU_MIXED_ELEMENT_TYPES_IN_ONE_EXPRESSION: matmul — cast one operand first (gd::cast<T>(x))");
  static_assert(Real<value_type_t<A>>, "THE_ELEMENT_TYPE_MUST_BE_FLOAT_OR_DOUBLE: matmul");
  return detail::matmul_operands(materialize(a_expr), materialize(b_expr), options, prof);
}

namespace detail {
template <class A, class B>
matmul_result_t<A, B> matmul_operands(const A& a, const B& b, const MatmulOptions& options, const OpScope& prof) {
  using T = value_type_t<A>;
  const Tensor<T>& av = detail::value_of(a);
  const Tensor<T>& bv = detail::value_of(b);
  const detail::MatmulPlan p(av.shape(), bv.shape(), options.transpose_a, options.transpose_b);
  const Device dev = av.device();
  GRADUS_CHECK(device_error, bv.device() == dev, "matmul: operands on ", dev, " and ", bv.device(),
               "; move them to one device with .to(device)");
  Tensor<T> out = Tensor<T>::empty(p.out, dev);
  const int64_t bn = p.batch.numel();
  prof.flops(2.0 * double(bn) * double(p.m) * double(p.k) * double(p.n));
  // every batch entry of a (rows not transposed) against one matrix b: one [batch*m, k] GEMM
  const bool flat = p.b_batch.numel() == 1 && p.a_batch.rank() == p.batch.rank() && !p.ta;
  if (flat) {
    backend::gemm(av.device_data(), false, bv.device_data(), p.tb, out.device_data(), bn * p.m, p.k, p.n, false, dev);
  } else {
    const detail::BatchOffsets oa(p.a_batch, p.batch, p.m * p.k), ob(p.b_batch, p.batch, p.k * p.n);
    for (int64_t i = 0; i < bn; ++i)
      backend::gemm(av.device_data() + oa[i], p.ta, bv.device_data() + ob[i], p.tb,
                    out.device_data() + i * p.m * p.n, p.m, p.k, p.n, false, dev);
  }
  set_op_attrs({options.transpose_a, options.transpose_b});  // for a graph rebuilt from the ops (gd::onnx)
  return make_result("matmul", std::move(out), [p, flat](const Tensor<T>& g, const Tensor<T>&, const auto& a, const auto& b) {
    const Tensor<T>& av = detail::value_of(a);
    const Tensor<T>& bv = detail::value_of(b);
    const Device dev = g.device();
    const T* gp = g.device_data();
    const T* ad = av.device_data();
    const T* bd = bv.device_data();
    const int64_t bn = p.batch.numel();
    // With C = op(A)·op(B): d op(A) = g·op(B)ᵀ and d op(B) = op(A)ᵀ·g; a transposed operand's
    // adjoint is the transpose of that, computed as the product in the other order.
    //   dA = g·op(B)ᵀ [m,k]  or, with ta, op(B)·gᵀ [k,m]
    //   dB = op(A)ᵀ·g [k,n]  or, with tb, gᵀ·op(A) [n,k]
    auto grad_a = [&](const T* gi, const T* bi, T* dai, int64_t rows, bool add) {
      if (p.ta)
        backend::gemm(bi, p.tb, gi, true, dai, p.k, p.n, p.m, add, dev);
      else
        backend::gemm(gi, false, bi, !p.tb, dai, rows, p.n, p.k, add, dev);
    };
    auto grad_b = [&](const T* ai, const T* gi, T* dbi, int64_t rows, bool add) {
      if (p.tb)
        backend::gemm(gi, true, ai, p.ta, dbi, p.n, rows, p.k, add, dev);
      else
        backend::gemm(ai, !p.ta, gi, false, dbi, p.k, rows, p.n, add, dev);
    };
    if (detail::needs_grad(a)) {  // summed over broadcast batch entries
      bool add;
      T* da = detail::adjoint_buffer(a, &add);
      if (flat) {
        grad_a(gp, bd, da, bn * p.m, add);
      } else {
        const detail::BatchOffsets oa(p.a_batch, p.batch, p.m * p.k), ob(p.b_batch, p.batch, p.k * p.n);
        if (!add && p.a_batch.numel() != bn) backend::fill(da, av.size(), T(0), dev), add = true;
        for (int64_t i = 0; i < bn; ++i) grad_a(gp + i * p.m * p.n, bd + ob[i], da + oa[i], p.m, add);
      }
    }
    // x · w with w a trainable leaf: its term waits for the others of this pass (LeafNode), and
    // the profiler counts its FLOPs there
    const bool deferred = detail::needs_grad(b) && flat && !p.ta && !p.tb && detail::defer_xt_g(b, av, g);
    if (deferred)
      if (OpObserver* o = op_observer()) [[unlikely]]
        o->set_flops(detail::needs_grad(a) ? 2.0 * double(bn) * double(p.m) * double(p.k) * double(p.n) : 0.0);
    if (detail::needs_grad(b) && !deferred) {
      bool add;
      T* db = detail::adjoint_buffer(b, &add);
      if (flat) {
        grad_b(ad, gp, db, bn * p.m, add);
      } else {
        const detail::BatchOffsets oa(p.a_batch, p.batch, p.m * p.k), ob(p.b_batch, p.batch, p.k * p.n);
        if (!add && p.b_batch.numel() != bn) backend::fill(db, bv.size(), T(0), dev), add = true;
        for (int64_t i = 0; i < bn; ++i) grad_b(ad + oa[i], gp + i * p.m * p.n, db + ob[i], p.m, add);
      }
    }
  }, a, b);
}
}  // namespace detail

}  // namespace gradus

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::detail {
GRADUS_INLINE MatmulPlan::MatmulPlan(Shape a, Shape b, bool transpose_a, bool transpose_b) : ta(transpose_a), tb(transpose_b) {
  GRADUS_CHECK(shape_error, a.rank() >= 1 && b.rank() >= 1, "matmul: operands must have rank >= 1, got ", a, " x ", b);
  GRADUS_CHECK(shape_error, (!ta || a.rank() >= 2) && (!tb || b.rank() >= 2),
               "matmul: transpose_a / transpose_b need operands of rank >= 2, got ", a, " x ", b);
  const Shape a0 = a, b0 = b;
  if (a.rank() == 1) a_vec = true, a.insert(0, 1);
  if (b.rank() == 1) b_vec = true, b.push_back(1);
  m = a[a.rank() - (ta ? 1 : 2)], k = a[a.rank() - (ta ? 2 : 1)], n = b[b.rank() - (tb ? 2 : 1)];
  GRADUS_CHECK(shape_error, k == b[b.rank() - (tb ? 1 : 2)], "matmul: inner dimensions differ: ", a0,
               ta ? "ᵀ" : "", " x ", b0, tb ? "ᵀ" : "");
  for (int i = 0; i < a.rank() - 2; ++i) a_batch.push_back(a[i]);
  for (int i = 0; i < b.rank() - 2; ++i) b_batch.push_back(b[i]);
  batch = broadcast_shapes(a_batch, b_batch, "matmul");
  out = batch;
  if (!a_vec) out.push_back(m);
  if (!b_vec) out.push_back(n);
}
}  // namespace gradus::detail
#endif  // GRADUS_DEFINE_COMPILED

#if GRADUS_INSTANCES  // compiled once in libgradus with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::detail {
#define GRADUS_MATMUL_OPERANDS(INSTANCE, T)                                                                            \
  INSTANCE Var<T> matmul_operands(const Var<T>&, const Var<T>&, const MatmulOptions&, const OpScope&);                  \
  INSTANCE Var<T> matmul_operands(const Tensor<T>&, const Var<T>&, const MatmulOptions&, const OpScope&);               \
  INSTANCE Var<T> matmul_operands(const Var<T>&, const Tensor<T>&, const MatmulOptions&, const OpScope&);               \
  INSTANCE Tensor<T> matmul_operands(const Tensor<T>&, const Tensor<T>&, const MatmulOptions&, const OpScope&);
GRADUS_MATMUL_OPERANDS(GRADUS_INSTANCE, float)
GRADUS_MATMUL_OPERANDS(GRADUS_INSTANCE_DOUBLE, double)
#undef GRADUS_MATMUL_OPERANDS
}  // namespace gradus::detail
#endif
