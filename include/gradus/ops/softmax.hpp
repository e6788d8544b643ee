// gradus/ops/softmax.hpp — softmax and log_softmax along an axis, stable for any logits
// (kernels: backend::softmax_forward/_backward).
#pragma once
#include "gradus/ops/reduce.hpp"

namespace gradus {
namespace detail {

template <class E>
auto softmax_impl(const E& e, int64_t axis, bool log) {
  gradus::detail::OpScope prof;
  using T = value_type_t<E>;
  const char* op = log ? "log_softmax" : "softmax";
  auto x = materialize(e);
  const Tensor<T>& xv = value_of(x);
  const AxisView v(xv.shape(), normalize_axis(axis, xv.rank(), op));
  const Device dev = xv.device();
  Tensor<T> out = Tensor<T>::empty(xv.shape(), dev);
  backend::softmax_forward(v, xv.device_data(), out.device_data(), log, dev);
  if (prof) [[unlikely]]
    set_op_attrs({normalize_axis(axis, xv.rank(), op)});  // for gd::onnx
  return make_result(op, std::move(out), [v, log](const Tensor<T>& g, const Tensor<T>& y, const auto& in) {
    if (!needs_grad(in)) return;
    Tensor<T> dx = Tensor<T>::empty(y.shape(), y.device());
    backend::softmax_backward(v, y.device_data(), g.device_data(), dx.device_data(), log, y.device());
    add_grad(in, dx);
  }, x);
}

/// Per-row sparse softmax cross-entropy logsumexp(z) - z[label] of logits, labels (in range, on
/// the logits' device) of the logits' shape without its last axis: one pass forward and one
/// backward, without the one-hot rows of -sum(one_hot · log_softmax(z)). The loss functions call
/// it (gd::losses::sparse_softmax_cross_entropy_with_logits).
template <class E>
auto sparse_softmax_xent(const Tensor<int64_t>& labels, const E& e) {
  gradus::detail::OpScope prof;
  using T = value_type_t<E>;
  auto x = materialize(e);
  const Tensor<T>& z = value_of(x);
  const Shape& zs = z.shape();
  const int64_t classes = zs[zs.rank() - 1], rows = classes > 0 ? zs.numel() / classes : 0;
  const Device dev = z.device();
  Tensor<T> loss = Tensor<T>::empty(labels.shape(), dev), lse = Tensor<T>::empty({2, rows}, dev);
  backend::sparse_xent_forward(rows, classes, z.device_data(), labels.device_data(), loss.device_data(),
                               lse.device_data(), dev);
  return make_result("sparse_softmax_cross_entropy_with_logits", std::move(loss),
                     [labels, lse, rows, classes](const Tensor<T>& g, const Tensor<T>&, const auto& in) {
                       if (!needs_grad(in)) return;
                       const Tensor<T>& zin = value_of(in);
                       Tensor<T> dz = Tensor<T>::empty(zin.shape(), zin.device());
                       backend::sparse_xent_backward(rows, classes, zin.device_data(), labels.device_data(),
                                                     lse.device_data(), g.device_data(), dz.device_data(),
                                                     zin.device());
                       add_grad(in, dz);
                     },
                     x);
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
