// gradus/ops/softmax.hpp — softmax and log_softmax along an axis, stable for any logits.
#pragma once
#include <cmath>
#include <limits>

#include "gradus/ops/reduce.hpp"

namespace gradus {
namespace detail {

template <class E>
auto softmax_impl(const E& e, int64_t axis, bool log) {
  using T = value_type_t<E>;
  const char* op = log ? "log_softmax" : "softmax";
  auto x = materialize(e);
  const Tensor<T>& xv = value_of(x);
  const AxisView v(xv.shape(), normalize_axis(axis, xv.rank(), op));
  Tensor<T> out(xv.shape());
  for_each_line(v, [&](int64_t base) {
    const T* in = xv.data() + base;
    T* y = out.data() + base;
    const int64_t st = v.inner;
    if (st == 1) {  // the common last-axis case, vectorised
      CMapX<T> xi(in, v.n);
      MapX<T> yo(y, v.n);
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
    for (int64_t k = 0; k < v.n; ++k) s += (y[k * st] = std::exp(in[k * st] - m));
    const T ls = std::log(s);
    for (int64_t k = 0; k < v.n; ++k) y[k * st] = log ? in[k * st] - m - ls : y[k * st] / s;
  });
  return make_result(op, std::move(out), [v, log](const Tensor<T>& g, const Tensor<T>& y, const auto& in) {
    if (!needs_grad(in)) return;
    Tensor<T> dx(y.shape());
    for_each_line(v, [&](int64_t base) {
      const T* gy = g.data() + base;
      const T* yy = y.data() + base;
      T* d = dx.data() + base;
      const int64_t st = v.inner;
      // softmax: dx = y * (g - sum(g*y));  log_softmax: dx = g - exp(y) * sum(g)
      T s = 0;
      for (int64_t k = 0; k < v.n; ++k) s += log ? gy[k * st] : gy[k * st] * yy[k * st];
      for (int64_t k = 0; k < v.n; ++k)
        d[k * st] = log ? gy[k * st] - std::exp(yy[k * st]) * s : yy[k * st] * (gy[k * st] - s);
    });
    add_grad(in, dx);
  }, x);
}

}  // namespace detail

/// exp(x) / sum(exp(x)) along `axis` (default last), computed with the maximum subtracted.
template <Expression E>
  requires Real<value_type_t<E>>
auto softmax(const E& e, int64_t axis = -1) {
  return detail::softmax_impl(e, axis, false);
}
/// x - logsumexp(x) along `axis` (default last); finite for any finite logits.
template <Expression E>
  requires Real<value_type_t<E>>
auto log_softmax(const E& e, int64_t axis = -1) {
  return detail::softmax_impl(e, axis, true);
}

}  // namespace gradus
