// gradus/backend/cpu/softmax.hpp — softmax and log_softmax along one axis on the CPU, the
// maximum of each line subtracted first; the last-axis case runs vectorised (vecmath.hpp's exp,
// compiled for the CPU's widest ISA by isa.hpp).
#pragma once
#include <algorithm>
#include <cmath>
#include <limits>

#include "gradus/backend/cpu/isa.hpp"
#include "gradus/backend/cpu/reduce.hpp"
#include "gradus/backend/cpu/vecmath.hpp"

GRADUS_SIMD_HINTS_BEGIN
namespace gradus::backend::cpu {

/// Lines of softmax_forward's and softmax_backward's last-axis case taken together: at most
/// kLineGroup lines and, unless one line is longer, kGroupElements elements (they stay in L1), so
/// that exp runs vectorised across the group even when the lines are shorter than a vector (10
/// classes: one exp call per element otherwise).
inline constexpr int64_t kLineGroup = 256, kGroupElements = 4096;

/// Calls f(first line, lines) for consecutive groups (see kLineGroup) of `outer` contiguous lines
/// of length n, the groups of each chunk of lines on one of the pool's threads, compiled for the
/// CPU's widest ISA.
template <class F>
void for_each_line_group(int64_t outer, int64_t n, F&& f) {
  parallel_chunks(outer, 1, [&](int, int64_t b, int64_t e) {
    with_isa([&] {
      for (int64_t l0 = b; l0 < e;) {
        const int64_t lines =
            std::clamp<int64_t>(kGroupElements / std::max<int64_t>(n, 1), 1, std::min(kLineGroup, e - l0));
        f(l0, lines);
        l0 += lines;
      }
    });
  }, std::max<int64_t>(1, kParallelThreshold / std::max<int64_t>(1, n)));
}

/// dst[i] = exp(src[i]) for i < len (src may be dst), vectorised: a group's exponentials at once.
/// Always inlined, so that it is compiled for the ISA for_each_line_group picked.
template <class T>
GRADUS_VM_INLINE void exp_elements(const T* src, T* dst, int64_t len) {
  GRADUS_SIMD
  for (int64_t i = 0; i < len; ++i) dst[i] = vm::exp(src[i]);
}

/// The sum of p[0..n), vectorised (always inlined, as exp_elements).
template <class T>
GRADUS_VM_INLINE T line_sum(const T* p, int64_t n) {
  T s = 0;
  GRADUS_SIMD_REDUCTION(+, s)
  for (int64_t k = 0; k < n; ++k) s += p[k];
  return s;
}

/// y = softmax(x) (or log_softmax) along the axis of `v`.
template <class T>
void softmax_forward(const AxisView& v, const T* x, T* y, bool log) {
  if (v.n == 0) return;  // empty lines: nothing to write
  if (v.inner == 1) {  // the common last-axis case: contiguous lines, vectorised across each group
    const int64_t n = v.n;
    for_each_line_group(v.outer, n, [&](int64_t l0, int64_t lines) GRADUS_LAMBDA_INLINE {
      T maxima[kLineGroup];
      for (int64_t l = 0; l < lines; ++l) {
        const T* in = x + (l0 + l) * n;
        T* out = y + (l0 + l) * n;
        const T m = vm::max_of(in, n);
        maxima[l] = m;
        GRADUS_SIMD
        for (int64_t k = 0; k < n; ++k) out[k] = in[k] - m;
      }
      exp_elements(y + l0 * n, y + l0 * n, lines * n);
      for (int64_t l = 0; l < lines; ++l) {
        const T* in = x + (l0 + l) * n;
        T* out = y + (l0 + l) * n;
        const T s = line_sum(out, n);
        if (log) {
          const T m = maxima[l], ls = std::log(s);  // (x - m) - log s: exact where x - m is
          GRADUS_SIMD
          for (int64_t k = 0; k < n; ++k) out[k] = (in[k] - m) - ls;
        } else {
          GRADUS_SIMD
          for (int64_t k = 0; k < n; ++k) out[k] /= s;
        }
      }
    });
    return;
  }
  for_each_line(v, [&](int64_t base) {
    const T* in = x + base;
    T* out = y + base;
    const int64_t st = v.inner;
    T m = -std::numeric_limits<T>::infinity();
    for (int64_t k = 0; k < v.n; ++k) m = std::max(m, in[k * st]);
    T s = 0;
    for (int64_t k = 0; k < v.n; ++k) s += (out[k * st] = std::exp(in[k * st] - m));
    const T ls = std::log(s);
    for (int64_t k = 0; k < v.n; ++k) out[k * st] = log ? (in[k * st] - m) - ls : out[k * st] / s;
  });
}

/// dx from the output y and its adjoint g: softmax: y * (g - sum(g*y)); log_softmax:
/// g - exp(y) * sum(g). dx must not overlap y or g.
template <class T>
void softmax_backward(const AxisView& v, const T* y, const T* g, T* dx, bool log) {
  if (v.n == 0) return;
  if (log && v.inner == 1) {  // exp(y) vectorised across each group of lines
    const int64_t n = v.n;
    for_each_line_group(v.outer, n, [&](int64_t l0, int64_t lines) GRADUS_LAMBDA_INLINE {
      T* db = dx + l0 * n;
      exp_elements(y + l0 * n, db, lines * n);
      for (int64_t l = 0; l < lines; ++l) {
        const T* gy = g + (l0 + l) * n;
        T* d = db + l * n;
        const T s = line_sum(gy, n);
        GRADUS_SIMD
        for (int64_t k = 0; k < n; ++k) d[k] = gy[k] - d[k] * s;
      }
    });
    return;
  }
  for_each_line(v, [&](int64_t base) {
    const T* gy = g + base;
    const T* yy = y + base;
    T* d = dx + base;
    const int64_t st = v.inner;
    with_isa([&] {
      const int64_t n = v.n;
      T s = 0;
      if (log) {
        GRADUS_SIMD_REDUCTION(+, s)
        for (int64_t k = 0; k < n; ++k) s += gy[k * st];
        GRADUS_SIMD
        for (int64_t k = 0; k < n; ++k) d[k * st] = gy[k * st] - vm::exp(yy[k * st]) * s;
      } else {
        GRADUS_SIMD_REDUCTION(+, s)
        for (int64_t k = 0; k < n; ++k) s += gy[k * st] * yy[k * st];
        GRADUS_SIMD
        for (int64_t k = 0; k < n; ++k) d[k * st] = yy[k * st] * (gy[k * st] - s);
      }
    });
  });
}

/// Sparse softmax cross-entropy of `rows` lines of `classes` logits z (contiguous): loss[r] =
/// logsumexp(z[r]) - z[r][labels[r]], computed as (m - z[r][label]) + log s with m the line's
/// maximum and s = sum(exp(z - m)), so that nothing is rounded at the magnitude of m (for logits
/// of 1000, float loses 3e-5 in m + log s); lse[r] keeps log s and lse[rows + r] keeps m for the
/// backward pass. Labels are in range (checked by the caller). No one-hot rows.
template <class T>
void sparse_xent_forward(int64_t rows, int64_t classes, const T* z, const int64_t* labels, T* loss, T* lse) {
  const AxisView v(Shape{rows, classes}, 1);
  for_each_line(v, [&](int64_t base) {
    const int64_t r = base / classes;
    const T* in = z + base;
    T line_lse = 0, line_max = 0;
    with_isa([&] {
      // m and s are locals of this lambda: as captured references GCC -O2 left the reductions
      // scalar (an exp call per element)
      const T m = vm::max_of(in, classes);
      T s = 0;
      GRADUS_SIMD_REDUCTION(+, s)
      for (int64_t k = 0; k < classes; ++k) s += vm::exp(in[k] - m);
      line_lse = std::log(s);
      line_max = m;
    });
    lse[r] = line_lse;
    lse[rows + r] = line_max;
    loss[r] = (line_max - in[labels[r]]) + line_lse;
  });
}

/// dz[r] = g[r] · (softmax(z[r]) - one_hot(labels[r])), softmax as exp((z - m) - log s) from the
/// line's maximum m and log s, both kept by the forward pass: one pass over z, which for a
/// language model's logits is larger than the caches.
template <class T>
void sparse_xent_backward(int64_t rows, int64_t classes, const T* z, const int64_t* labels, const T* lse,
                          const T* g, T* dz) {
  const AxisView v(Shape{rows, classes}, 1);
  for_each_line(v, [&](int64_t base) {
    const int64_t r = base / classes;
    const T* in = z + base;
    T* d = dz + base;
    const T gr = g[r], ls = lse[r], m = lse[rows + r];
    with_isa([&, gr, ls, m] {  // copies: the stores to d cannot alias them
      GRADUS_SIMD
      for (int64_t k = 0; k < classes; ++k) d[k] = gr * vm::exp((in[k] - m) - ls);
    });
    d[labels[r]] -= gr;
  });
}

}  // namespace gradus::backend::cpu
GRADUS_SIMD_HINTS_END
