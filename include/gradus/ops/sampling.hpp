// gradus/ops/sampling.hpp — bilinear sampling of images at arbitrary points (the resampler of
// TensorFlow's contrib, the sampler of a spatial transformer): shape checks, the tape node and
// the gradient rule. The kernels are backend::resample_forward/_backward (backend/cpu/sampling.hpp,
// where the interpolation and its boundary convention are written out).
#pragma once
#include <cstdint>

#include "gradus/autodiff/materialize.hpp"
#include "gradus/backend/backend.hpp"
#include "gradus/core/compiled.hpp"

namespace gradus {

namespace detail {

/// The plan of resampler(data, warp), checking the shapes: data [B, H, W, C], warp [B, ..., 2].
backend::ResamplePlan plan_resample(const Shape& data, const Shape& warp);

}  // namespace detail

/// `data` [B, H, W, C] sampled with bilinear interpolation at the points of `warp` [B, d1, ..., 2],
/// each an (x, y) pair in pixel units (x along W, y along H; pixel (i, j) at integer coordinates)
/// -> [B, d1, ..., C] (tf.contrib.resampler.resampler). Neighbours outside the image read 0, and
/// a point outside (-1, W) x (-1, H) gives 0, so the output fades to 0 over one pixel beyond the
/// border. Differentiable in both the image and the points (the points' gradient is 0 where the
/// output is: outside, and it jumps where a coordinate crosses an integer).
///   auto y = gd::resampler(images, warp);   // images [8, 32, 32, 3], warp [8, 28, 28, 2] -> [8, 28, 28, 3]
template <Expression D, Expression W>
auto resampler(const D& data_expr, const W& warp_expr) {
  static_assert(detail::same_element_v<D, W>, "YOU_MIXED_ELEMENT_TYPES_IN_ONE_EXPRESSION: resampler — cast one "
                                              "operand first (gd::cast<T>(x))");
  static_assert(Real<value_type_t<D>>, "THE_ELEMENT_TYPE_MUST_BE_FLOAT_OR_DOUBLE: resampler");
  gradus::detail::OpScope prof;
  using T = value_type_t<D>;
  auto data = materialize(data_expr);
  auto warp = materialize(warp_expr);
  const Tensor<T>& dv = detail::value_of(data);
  const Tensor<T>& wv = detail::value_of(warp);
  const backend::ResamplePlan p = detail::plan_resample(dv.shape(), wv.shape());
  const Device dev = dv.device();
  GRADUS_CHECK(device_error, wv.device() == dev, "resampler: data on ", dev, ", warp on ", wv.device(),
               "; move them to one device with .to(device)");
  Shape os = wv.shape();
  os[size_t(os.rank() - 1)] = p.c;
  Tensor<T> out = Tensor<T>::empty(os, dev);
  if (out.size()) backend::resample_forward<T>(p, dv.device_data(), wv.device_data(), out.device_data(), dev);
  return make_result("resampler", std::move(out), [p](const Tensor<T>& g, const Tensor<T>&, const auto& d, const auto& w) {
    using namespace gradus::detail;
    bool ad = false, aw = false;
    T* dd = needs_grad(d) ? adjoint_buffer(d, &ad) : nullptr;
    T* dw = needs_grad(w) ? adjoint_buffer(w, &aw) : nullptr;
    if (!dd && !dw) return;
    backend::resample_backward<T>(p, g.device_data(), value_of(d).device_data(), value_of(w).device_data(), dd, ad, dw,
                                  aw, g.device());
  }, data, warp);
}

}  // namespace gradus

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::detail {
GRADUS_INLINE backend::ResamplePlan plan_resample(const Shape& data, const Shape& warp) {
  GRADUS_CHECK(shape_error, data.rank() == 4, "resampler: data must have rank 4 [B,H,W,C], got ", data);
  GRADUS_CHECK(shape_error, warp.rank() >= 2 && warp.back() == 2,
               "resampler: warp must have shape [B, ..., 2] ((x, y) points), got ", warp);
  GRADUS_CHECK(shape_error, warp[0] == data[0], "resampler: warp's batch ", warp[0], " differs from data's ", data[0],
               " (data ", data, ", warp ", warp, ")");
  const int64_t points = data[0] == 0 ? 0 : warp.numel() / 2 / data[0];
  return {data[0], data[1], data[2], data[3], points};
}
}  // namespace gradus::detail
#endif  // GRADUS_DEFINE_COMPILED
