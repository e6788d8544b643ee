// gradus/ops/softmax.hpp — softmax and log_softmax along an axis, stable for any logits
// (kernels: backend::softmax_forward/_backward).
#pragma once
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
  const Device dev = xv.device();
  Tensor<T> out = Tensor<T>::empty(xv.shape(), dev);
  backend::softmax_forward(v, xv.device_data(), out.device_data(), log, dev);
  return make_result(op, std::move(out), [v, log](const Tensor<T>& g, const Tensor<T>& y, const auto& in) {
    if (!needs_grad(in)) return;
    Tensor<T> dx = Tensor<T>::empty(y.shape(), y.device());
    backend::softmax_backward(v, y.device_data(), g.device_data(), dx.device_data(), log, y.device());
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
