// gradus/ops/linalg.hpp — matmul (batched, broadcast over batch dims): shape checks, the tape
// node and the gradient rule; the products run on backend::gemm.
#pragma once

#include "gradus/autodiff/materialize.hpp"
#include "gradus/backend/backend.hpp"

namespace gradus {
namespace detail {

/// The shapes of one matmul: batch dims broadcast; rank-1 operands promoted as NumPy does.
struct MatmulPlan {
  int64_t m, k, n;
  Shape batch, a_batch, b_batch, out;
  bool a_vec = false, b_vec = false;
  MatmulPlan(Shape a, Shape b) {
    GRADUS_CHECK(shape_error, a.rank() >= 1 && b.rank() >= 1, "matmul: operands must have rank >= 1, got ", a, " x ", b);
    const Shape a0 = a, b0 = b;
    if (a.rank() == 1) a_vec = true, a.insert(0, 1);
    if (b.rank() == 1) b_vec = true, b.push_back(1);
    m = a[a.rank() - 2], k = a[a.rank() - 1], n = b[b.rank() - 1];
    GRADUS_CHECK(shape_error, k == b[b.rank() - 2], "matmul: inner dimensions differ: ", a0, " x ", b0);
    for (int i = 0; i < a.rank() - 2; ++i) a_batch.push_back(a[i]);
    for (int i = 0; i < b.rank() - 2; ++i) b_batch.push_back(b[i]);
    batch = broadcast_shapes(a_batch, b_batch, "matmul");
    out = batch;
    if (!a_vec) out.push_back(m);
    if (!b_vec) out.push_back(n);
  }
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

/// Matrix product over the last two axes, broadcasting the batch axes (rank-1 operands as in
/// NumPy). Runs on the backend's GEMM (backend/cpu/gemm.hpp on the CPU, cuBLAS on a GPU).
///   gd::matmul(x, w)   // [N,784] x [784,10] -> [N,10];  [B,m,k] x [k,n] -> [B,m,n]
template <Expression A, Expression B>
auto matmul(const A& a_expr, const B& b_expr) {
  static_assert(detail::same_element_v<A, B>, "YOU_MIXED_ELEMENT_TYPES_IN_ONE_EXPRESSION: matmul — cast one operand first (gd::cast<T>(x))");
  using T = value_type_t<A>;
  static_assert(Real<T>, "THE_ELEMENT_TYPE_MUST_BE_FLOAT_OR_DOUBLE: matmul");
  auto a = materialize(a_expr);
  auto b = materialize(b_expr);
  const Tensor<T>& av = detail::value_of(a);
  const Tensor<T>& bv = detail::value_of(b);
  const detail::MatmulPlan p(av.shape(), bv.shape());
  const Device dev = av.device();
  GRADUS_CHECK(device_error, bv.device() == dev, "matmul: operands on ", dev, " and ", bv.device(),
               "; move them to one device with .to(device)");
  Tensor<T> out = Tensor<T>::empty(p.out, dev);
  const int64_t bn = p.batch.numel();
  if (p.b_batch.numel() == 1 && p.a_batch.rank() == p.batch.rank()) {
    // every batch entry of a against one matrix b: a single [batch*m, k] x [k, n] GEMM
    backend::gemm(av.device_data(), false, bv.device_data(), false, out.device_data(), bn * p.m, p.k, p.n, false, dev);
  } else {
    const detail::BatchOffsets oa(p.a_batch, p.batch, p.m * p.k), ob(p.b_batch, p.batch, p.k * p.n);
    for (int64_t i = 0; i < bn; ++i)
      backend::gemm(av.device_data() + oa[i], false, bv.device_data() + ob[i], false,
                    out.device_data() + i * p.m * p.n, p.m, p.k, p.n, false, dev);
  }
  return make_result("matmul", std::move(out), [p](const Tensor<T>& g, const Tensor<T>&, const auto& a, const auto& b) {
    const Tensor<T>& av = detail::value_of(a);
    const Tensor<T>& bv = detail::value_of(b);
    const Device dev = g.device();
    const T* gp = g.device_data();
    const T* ad = av.device_data();
    const T* bd = bv.device_data();
    const int64_t bn = p.batch.numel();
    const bool flat = p.b_batch.numel() == 1 && p.a_batch.rank() == p.batch.rank();
    if (detail::needs_grad(a)) {  // dA = g * B^T, summed over broadcast batch entries
      bool add;
      T* da = detail::adjoint_buffer(a, &add);
      if (flat) {
        backend::gemm(gp, false, bd, true, da, bn * p.m, p.n, p.k, add, dev);
      } else {
        const detail::BatchOffsets oa(p.a_batch, p.batch, p.m * p.k), ob(p.b_batch, p.batch, p.k * p.n);
        if (!add && p.a_batch.numel() != bn) backend::fill(da, av.size(), T(0), dev), add = true;
        for (int64_t i = 0; i < bn; ++i)
          backend::gemm(gp + i * p.m * p.n, false, bd + ob[i], true, da + oa[i], p.m, p.n, p.k, add, dev);
      }
    }
    if (detail::needs_grad(b)) {  // dB = A^T * g, summed over broadcast batch entries
      bool add;
      T* db = detail::adjoint_buffer(b, &add);
      if (flat) {
        backend::gemm(ad, true, gp, false, db, p.k, bn * p.m, p.n, add, dev);
      } else {
        const detail::BatchOffsets oa(p.a_batch, p.batch, p.m * p.k), ob(p.b_batch, p.batch, p.k * p.n);
        if (!add && p.b_batch.numel() != bn) backend::fill(db, bv.size(), T(0), dev), add = true;
        for (int64_t i = 0; i < bn; ++i)
          backend::gemm(ad + oa[i], true, gp + i * p.m * p.n, false, db + ob[i], p.k, p.m, p.n, add, dev);
      }
    }
  }, a, b);
}

}  // namespace gradus
