// gradus/ops/dropout.hpp — inverted dropout with a mask drawn from an explicit gd::Rng.
#pragma once
#include <cstdint>

#include "gradus/autodiff/materialize.hpp"
#include "gradus/backend/backend.hpp"

namespace gradus {

/// Inverted dropout (tf.nn.dropout): each element is kept with probability 1 - rate and then
/// scaled by 1 / (1 - rate), else zeroed; the gradient uses the same mask. The mask takes one
/// `rng.next()`, which keys a counter-based Philox stream (core/philox.hpp): a seed gives the
/// same mask on the CPU and on a GPU. With `training == false` or `rate == 0` it is the
/// identity: x itself comes back (materialised) and `rng` is not touched. rate in [0, 1).
///   gd::Var<float> h = gd::dropout(gd::relu(z), 0.5, rng, model.training());
template <Expression E>
auto dropout(const E& x_expr, double rate, Rng& rng, bool training = true) {
  gradus::detail::OpScope prof;
  using T = value_type_t<E>;
  static_assert(Real<T>, "THE_ELEMENT_TYPE_MUST_BE_FLOAT_OR_DOUBLE: dropout");
  GRADUS_CHECK(value_error, rate >= 0 && rate < 1, "dropout: rate must be in [0, 1), got ", rate);
  auto x = materialize(x_expr);
  if (!training || rate == 0) return x;
  const Tensor<T>& xv = detail::value_of(x);
  const double keep = 1 - rate;
  const T scale = T(1 / keep);
  const Device dev = xv.device();
  Tensor<T> mask = Tensor<T>::empty(xv.shape(), dev);  // 0 or 1/(1-rate): the forward's factor and the backward's
  backend::dropout_mask(rng, keep, scale, mask.size(), mask.device_data(), dev);
  Tensor<T> out = Tensor<T>::empty(xv.shape(), dev);
  backend::masked_multiply(xv.device_data(), mask.device_data(), mask.size(), out.device_data(), false, dev);
  return make_result("dropout", std::move(out), [mask](const Tensor<T>& g, const Tensor<T>&, const auto& x) {
    if (!detail::needs_grad(x)) return;
    bool add = false;
    T* dx = detail::adjoint_buffer(x, &add);
    backend::masked_multiply(g.device_data(), mask.device_data(), mask.size(), dx, add, mask.device());
  }, x);
}

}  // namespace gradus
