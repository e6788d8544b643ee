// gradus/backend/cpu/softmax.hpp — softmax and log_softmax along one axis on the CPU, the
// maximum of each line subtracted first; the last-axis case runs vectorised.
#pragma once
#include "gradus/core/eigen.hpp"
#include <algorithm>
#include <cmath>
#include <limits>

#include "gradus/backend/cpu/reduce.hpp"

namespace gradus::backend::cpu {

/// y = softmax(x) (or log_softmax) along the axis of `v`.
template <class T>
void softmax_forward(const AxisView& v, const T* x, T* y, bool log) {
  using Line = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
  using CLine = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;
  for_each_line(v, [&](int64_t base) {
    const T* in = x + base;
    T* out = y + base;
    const int64_t st = v.inner;
    if (st == 1) {  // the common last-axis case, vectorised
      CLine xi(in, v.n);
      Line yo(out, v.n);
      const T m = xi.maxCoeff();
      yo = (xi - m).exp();
      const T s = yo.sum();
      if (log)
        yo = xi - m - std::log(s);
      else
        yo /= s;
      return;
    }
    T m = -std::numeric_limits<T>::infinity();
    for (int64_t k = 0; k < v.n; ++k) m = std::max(m, in[k * st]);
    T s = 0;
    for (int64_t k = 0; k < v.n; ++k) s += (out[k * st] = std::exp(in[k * st] - m));
    const T ls = std::log(s);
    for (int64_t k = 0; k < v.n; ++k) out[k * st] = log ? in[k * st] - m - ls : out[k * st] / s;
  });
}

/// dx from the output y and its adjoint g: softmax: y * (g - sum(g*y)); log_softmax:
/// g - exp(y) * sum(g).
template <class T>
void softmax_backward(const AxisView& v, const T* y, const T* g, T* dx, bool log) {
  for_each_line(v, [&](int64_t base) {
    const T* gy = g + base;
    const T* yy = y + base;
    T* d = dx + base;
    const int64_t st = v.inner;
    T s = 0;
    for (int64_t k = 0; k < v.n; ++k) s += log ? gy[k * st] : gy[k * st] * yy[k * st];
    for (int64_t k = 0; k < v.n; ++k) d[k * st] = log ? gy[k * st] - std::exp(yy[k * st]) * s : yy[k * st] * (gy[k * st] - s);
  });
}

}  // namespace gradus::backend::cpu
