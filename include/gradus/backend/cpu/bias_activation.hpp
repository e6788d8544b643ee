// gradus/backend/cpu/bias_activation.hpp — activation(h + b) over rows on the CPU, for the
// layers' bias + activation step: one pass forward, one pass giving dz = d(activation)/dz · g.
#pragma once
#include "gradus/core/eigen.hpp"
#include <unsupported/Eigen/SpecialFunctions>  // erf, which the op structs' gelu uses on rows
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "gradus/backend/cpu/isa.hpp"
#include "gradus/backend/cpu/parallel.hpp"
#include "gradus/backend/cpu/vecmath.hpp"
#include "gradus/core/tensor.hpp"
#include "gradus/expr/activations.hpp"

GRADUS_SIMD_HINTS_BEGIN
namespace gradus::backend::cpu {

/// gm = g where y > 0, else 0, over `rows` rows of F; adds the column sums of gm to `sums` when
/// it is not null.
template <class T>
void relu_mask_rows(const T* __restrict g, const T* __restrict y, int64_t rows, int64_t F, T* __restrict gm,
                    T* __restrict sums) {
  with_isa([&] {
    for (int64_t r = 0; r < rows; ++r, g += F, y += F, gm += F) {
      GRADUS_SIMD
      for (int64_t f = 0; f < F; ++f) gm[f] = vm::where_positive(y[f], g[f]);
      if (sums) {
        GRADUS_SIMD
        for (int64_t f = 0; f < F; ++f) sums[f] += gm[f];
      }
    }
  });
}

/// Rows per parallel chunk threshold: rows of n elements, split only when the whole is large.
inline int64_t row_threshold(int64_t n) { return std::max<int64_t>(1, kParallelThreshold / std::max<int64_t>(n, 1)); }

/// One element with the methods of an Eigen array that the `lane` activations use, computed
/// with vm:: so that a loop over a row of them vectorises (the op structs' own math, run on one
/// element where Eigen's select() would run unvectorised; expr/activations.hpp).
template <class T>
struct Lane {
  using Scalar = T;
  T v;
  Lane exp() const { return {vm::exp(v)}; }
  Lane logistic() const { return {vm::logistic(v)}; }
  Lane abs() const { return {std::abs(v)}; }
  Lane square() const { return {v * v}; }
};
template <class T>
struct LaneMask {
  bool b;
  static T value(Lane<T> x) { return x.v; }
  static T value(T x) { return x; }
  template <class A, class B>
  Lane<T> select(A then, B otherwise) const {
    return {vm::select(b, value(then), value(otherwise))};
  }
};
#define GRADUS_LANE_ARITH(OP)                                                             \
  template <class T>                                                                    \
  Lane<T> operator OP(Lane<T> a, Lane<T> b) { return {a.v OP b.v}; }                    \
  template <class T>                                                                    \
  Lane<T> operator OP(Lane<T> a, T b) { return {a.v OP b}; }                            \
  template <class T>                                                                    \
  Lane<T> operator OP(T a, Lane<T> b) { return {a OP b.v}; }
GRADUS_LANE_ARITH(+)
GRADUS_LANE_ARITH(-)
GRADUS_LANE_ARITH(*)
GRADUS_LANE_ARITH(/)
#undef GRADUS_LANE_ARITH
template <class T>
LaneMask<T> operator>(Lane<T> a, T b) {
  return {a.v > b};
}

/// For each row r < rows and f < n: out[r][f] = rule(z, i), z = h[r][f] + b[f] and i = r n + f (the
/// element's index, for the rules that read y or g too).
template <class T, class Rule>
void map_biased(const T* h, const T* b, int64_t rows, int64_t n, T* out, const Rule& rule) {
  parallel_chunks(rows, 1, [&](int, int64_t r0, int64_t r1) {
    with_isa([&] {
      for (int64_t r = r0; r < r1; ++r) {
        const T* __restrict hr = h + r * n;
        T* __restrict o = out + r * n;
        GRADUS_SIMD
        for (int64_t f = 0; f < n; ++f) o[f] = rule(hr[f] + b[f], r * n + f);
      }
    });
  }, row_threshold(n));
}

/// y[r] = op.forward(h[r] + b) for rows r < rows of n elements; `op` is an activation's op
/// struct (a row of expr/activations.hpp).
template <class T, class Op>
void bias_activation_forward(const Op& op, const T* h, const T* b, int64_t rows, int64_t n, T* y) {
  using Row = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
  using CRow = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;
  if constexpr (ActivationOf<Op>::form == ActivationForm::lane) {
    map_biased(h, b, rows, n, y, [op](T z, int64_t) { return op.forward(Lane<T>{z}).v; });
    return;
  }
  const CRow bias(b, n);
  parallel_chunks(rows, 1, [&](int, int64_t r0, int64_t r1) {
    with_isa([&] {
      for (int64_t r = r0; r < r1; ++r) Row(y + r * n, n) = op.forward(CRow(h + r * n, n) + bias);
    });
  }, row_threshold(n));
}

/// dz[r] = op.backward(z, y, g) with z = h[r] + b recomputed in place.
template <class T, class Op>
void bias_activation_backward(const Op& op, const T* h, const T* b, const T* y, const T* g, int64_t rows, int64_t n,
                              T* dz) {
  using Row = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
  using CRow = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;
  if constexpr (ActivationOf<Op>::kind == ActivationKind::relu) {
    // Eigen evaluates relu's gradient (a select) one element at a time, which only -O3's
    // vectoriser widens; the convolution's mask loop is vectorised at -O2 too. It reads y:
    // y = max(h + b, 0) > 0 exactly where h + b > 0 (a NaN h + b gives 0 either way).
    parallel_chunks(rows, 1, [&](int, int64_t r0, int64_t r1) {
      relu_mask_rows(g + r0 * n, y + r0 * n, r1 - r0, n, dz + r0 * n, static_cast<T*>(nullptr));
    }, row_threshold(n));
    return;
  }
  if constexpr (ActivationOf<Op>::form == ActivationForm::lane) {
    map_biased(h, b, rows, n, dz, [op, y, g](T z, int64_t i) {
      return op.backward(Lane<T>{z}, Lane<T>{y[i]}, Lane<T>{g[i]}).v;
    });
    return;
  }
  const CRow bias(b, n);
  parallel_chunks(rows, 1, [&](int, int64_t r0, int64_t r1) {
    with_isa([&] {
      for (int64_t r = r0; r < r1; ++r) {
        Row d(dz + r * n, n);
        const CRow yr(y + r * n, n), gr(g + r * n, n);
        if constexpr (requires { requires Op::ignores_input; }) {  // linear, tanh, sigmoid: y and g alone
          d = op.backward(yr, yr, gr);                               // (the first argument is not read)
        } else {
          d = CRow(h + r * n, n) + bias;  // z, read in place by the op's gradient rule
          d = op.backward(d, yr, gr);
        }
      }
    });
  }, row_threshold(n));
}

/// out[j] = sum over rows r of x[r * n + j] (a bias gradient). A large x is summed by chunks of
/// rows on the pool's threads, each into a row of its own, and those rows are added in chunk
/// order: the same bits whichever thread ran which chunk (parallel.hpp).
template <class T>
void sum_rows(const T* x, int64_t rows, int64_t n, T* out) {
  using Row = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
  using CRow = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;
  const auto sum_into = [&](T* acc_data, int64_t r0, int64_t r1) {
    with_isa([&] {
      Row acc(acc_data, n);
      acc.setZero();
      for (int64_t r = r0; r < r1; ++r) acc += CRow(x + r * n, n);
    });
  };
  const int chunks = chunks_for(rows, 1, row_threshold(n));
  if (chunks <= 1) return sum_into(out, 0, rows);
  Tensor<T> parts = Tensor<T>::empty({chunks, n});
  parallel_chunks(rows, 1, [&](int c, int64_t r0, int64_t r1) { sum_into(parts.data() + c * n, r0, r1); },
                  row_threshold(n));
  Row acc(out, n);
  acc = CRow(parts.data(), n);
  for (int c = 1; c < chunks; ++c) acc += CRow(parts.data() + c * n, n);
}

}  // namespace gradus::backend::cpu
GRADUS_SIMD_HINTS_END
