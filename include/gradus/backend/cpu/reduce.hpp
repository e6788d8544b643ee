// gradus/backend/cpu/reduce.hpp — reductions along one axis on the CPU: max/min, argmax/argmin,
// prod and logsumexp, each over the [outer, n, inner] view of the reduced axis (AxisView), lines
// split over the cores. `sum`/`mean` fuse with their argument and run in cpu/elementwise.hpp.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "gradus/backend/cpu/parallel.hpp"
#include "gradus/backend/plans.hpp"

namespace gradus::backend::cpu {

/// Runs `f(base_offset)` for each of the outer*inner lines of an axis view (the elements of a
/// line are base + k*inner), in parallel when the tensor is large.
template <class F>
void for_each_line(const AxisView& v, F&& f) {
  const int64_t lines = v.outer * v.inner;
  parallel_chunks(
      lines, 1,
      [&](int, int64_t b, int64_t e) {
        for (int64_t l = b; l < e; ++l) f((l / v.inner) * v.n * v.inner + l % v.inner);
      },
      std::max<int64_t>(1, kParallelThreshold / std::max<int64_t>(1, v.n)));
}

/// y[line] = max (or min) of x along the line; lines are non-empty.
template <class T>
void reduce_extremum(const AxisView& v, const T* x, T* y, bool is_max) {
  for_each_line(v, [&](int64_t base) {
    T m = x[base];
    for (int64_t k = 1; k < v.n; ++k) {
      const T e = x[base + k * v.inner];
      m = is_max ? (e > m ? e : m) : (e < m ? e : m);
    }
    y[v.out_index(base)] = m;
  });
}

/// dx = g shared equally among the elements of each line equal to its extremum y, 0 elsewhere.
template <class T>
void reduce_extremum_backward(const AxisView& v, const T* x, const T* y, const T* g, T* dx) {
  for_each_line(v, [&](int64_t base) {
    const int64_t o = v.out_index(base);
    int64_t ties = 0;
    for (int64_t k = 0; k < v.n; ++k) ties += x[base + k * v.inner] == y[o];
    const T share = g[o] / T(ties);
    for (int64_t k = 0; k < v.n; ++k) dx[base + k * v.inner] = x[base + k * v.inner] == y[o] ? share : T(0);
  });
}

/// out[line] = index of the first largest (smallest) element of the line.
template <class T>
void reduce_arg(const AxisView& v, const T* x, int64_t* out, bool is_max) {
  for_each_line(v, [&](int64_t base) {
    int64_t best = 0;
    T m = x[base];
    for (int64_t k = 1; k < v.n; ++k) {
      const T e = x[base + k * v.inner];
      if (is_max ? e > m : e < m) m = e, best = k;
    }
    out[v.out_index(base)] = best;
  });
}

/// y[line] = product of the line.
template <class T>
void reduce_prod(const AxisView& v, const T* x, T* y) {
  for_each_line(v, [&](int64_t base) {
    T acc = T(1);
    for (int64_t k = 0; k < v.n; ++k) acc *= x[base + k * v.inner];
    y[v.out_index(base)] = acc;
  });
}

/// dx = g · (product of the other elements of the line): prefix times suffix products, exact
/// with zeros.
template <class T>
void reduce_prod_backward(const AxisView& v, const T* x, const T* g, T* dx) {
  for_each_line(v, [&](int64_t base) {
    const T go = g[v.out_index(base)];
    T left = T(1);
    for (int64_t k = 0; k < v.n; ++k) {
      dx[base + k * v.inner] = left;
      left *= x[base + k * v.inner];
    }
    T right = T(1);
    for (int64_t k = v.n - 1; k >= 0; --k) {
      dx[base + k * v.inner] *= right * go;
      right *= x[base + k * v.inner];
    }
  });
}

/// The largest of m and e, NaN when either is: a NaN in a line makes its logsumexp NaN.
template <class T>
T max_or_nan(T m, T e) {
  return e > m || e != e ? e : m;
}

/// y[line] = m + log(sum(exp(x - m))) with m the line's maximum: finite for any finite x.
template <class T>
void reduce_logsumexp(const AxisView& v, const T* x, T* y) {
  for_each_line(v, [&](int64_t base) {
    T m = -std::numeric_limits<T>::infinity();
    for (int64_t k = 0; k < v.n; ++k) m = max_or_nan(m, x[base + k * v.inner]);
    T s = 0;
    if (std::isfinite(m))
      for (int64_t k = 0; k < v.n; ++k) s += std::exp(x[base + k * v.inner] - m);
    y[v.out_index(base)] = std::isfinite(m) ? m + std::log(s) : m;
  });
}

/// dx = g · softmax(x) along each line, as exp(x - m) / sum(exp(x - m)) from the line's maximum
/// m again rather than exp(x - y): y = m + log s is rounded at the magnitude of m, which for
/// logits of 1000 in float costs about 3e-5 in every gradient.
template <class T>
void reduce_logsumexp_backward(const AxisView& v, const T* x, const T* y, const T* g, T* dx) {
  for_each_line(v, [&](int64_t base) {
    const int64_t o = v.out_index(base);
    T m = -std::numeric_limits<T>::infinity();
    for (int64_t k = 0; k < v.n; ++k) m = max_or_nan(m, x[base + k * v.inner]);
    if (!std::isfinite(m)) {  // an empty line, infinities or NaNs: the plain formula
      for (int64_t k = 0; k < v.n; ++k) dx[base + k * v.inner] = g[o] * std::exp(x[base + k * v.inner] - y[o]);
      return;
    }
    T s = 0;
    for (int64_t k = 0; k < v.n; ++k) s += (dx[base + k * v.inner] = std::exp(x[base + k * v.inner] - m));
    const T scale = g[o] / s;
    for (int64_t k = 0; k < v.n; ++k) dx[base + k * v.inner] *= scale;
  });
}

}  // namespace gradus::backend::cpu
