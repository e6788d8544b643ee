// gradus/image/geometry.hpp — crops, pads, flips and transposes of images (tf.image).
//
// Every function takes an image [H, W, C] or a batch [N, H, W, C] as a Tensor (float, double or
// int64_t samples) or a Var, and returns the same kind: a Tensor for a Tensor, and for a Var a
// Var whose gradient flows back to the pixels it was read from (padding gets none). Offsets
// and sizes are in pixels, as TF's: (offset_height, offset_width, target_height, target_width).
// The random forms take an explicit gd::Rng&; random flips decide for each image of a batch
// separately (TF's random_flip_*), random_crop uses one window for the whole batch (TF's
// random_crop with size [N, h, w, C]).
#pragma once
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "gradus/autodiff/materialize.hpp"
#include "gradus/backend/cpu/image.hpp"
#include "gradus/backend/plans.hpp"
#include "gradus/core/compiled.hpp"
#include "gradus/core/rng.hpp"
#include "gradus/image/dtype.hpp"

namespace gradus::image {

namespace detail {

/// The geometry of a Tensor or Var image.
template <class X>
ImageGeom geom_of(const X& x, const char* who) {
  return geom(gradus::detail::value_of(x).shape(), who);
}

/// `x` (a Tensor or Var) mapped by the separable taps `th` (along H) and `tw` (along W); the
/// gradient is the same map with the transposed taps.
template <class X>
auto separable_op(const X& x, std::shared_ptr<const backend::AxisTaps> th, std::shared_ptr<const backend::AxisTaps> tw,
                  const char* op) {
  gradus::detail::OpScope prof;
  using T = value_type_t<X>;
  const Tensor<T>& xv = gradus::detail::value_of(x);
  const ImageGeom g = geom(xv.shape(), op);
  Tensor<T> out = backend::cpu::apply_separable(xv, g, *th, *tw);
  return make_result(op, std::move(out), [th, tw, g](const Tensor<T>& grad, const Tensor<T>&, const auto& in) {
    if (!gradus::detail::needs_grad(in)) return;
    const ImageGeom go{g.n, th->out, tw->out, g.c, g.batched};
    gradus::detail::add_grad(in, backend::cpu::apply_separable(grad, go, th->transposed(), tw->transposed()));
  }, x);
}

/// Taps that copy input o + offset to output o when 0 <= o + offset < in, else leave a zero.
std::shared_ptr<const backend::AxisTaps> shift_taps(int64_t in, int64_t out, int64_t offset);

/// `x` with each image whose flag is set reversed along H (`vertical`) or W.
template <class X>
auto flip_op(const X& x, std::vector<uint8_t> flags, bool vertical, const char* op) {
  gradus::detail::OpScope prof;
  using T = value_type_t<X>;
  const Tensor<T>& xv = gradus::detail::value_of(x);
  const ImageGeom g = geom(xv.shape(), op);
  Tensor<T> out(xv.shape());
  backend::cpu::flip_images(xv.data(), out.data(), g, flags, vertical);
  return make_result(op, std::move(out),
                     [g, flags = std::move(flags), vertical](const Tensor<T>& grad, const Tensor<T>&, const auto& in) {
                       if (!gradus::detail::needs_grad(in)) return;
                       Tensor<T> gx(grad.shape());
                       backend::cpu::flip_images(grad.data(), gx.data(), g, flags, vertical);
                       gradus::detail::add_grad(in, gx);
                     },
                     x);
}

}  // namespace detail

/// The window of `image` with top-left corner (offset_height, offset_width) and size
/// target_height x target_width (tf.image.crop_to_bounding_box); it must lie inside the image.
///   auto patch = gd::image::crop_to_bounding_box(img, 10, 20, 64, 64);
template <Expression E>
auto crop_to_bounding_box(const E& image, int64_t offset_height, int64_t offset_width, int64_t target_height,
                          int64_t target_width) {
  auto x = materialize(image);
  const auto g = detail::geom_of(x, "crop_to_bounding_box");
  GRADUS_CHECK(value_error, offset_height >= 0 && offset_width >= 0, "crop_to_bounding_box: offsets must be >= 0, got ",
               offset_height, ", ", offset_width);
  GRADUS_CHECK(value_error, target_height > 0 && target_width > 0,
               "crop_to_bounding_box: the target size must be positive, got ", target_height, "x", target_width);
  GRADUS_CHECK(value_error, offset_height + target_height <= g.h && offset_width + target_width <= g.w,
               "crop_to_bounding_box: the window at (", offset_height, ", ", offset_width, ") of size ", target_height,
               "x", target_width, " exceeds the ", g.h, "x", g.w, " image");
  return detail::separable_op(x, detail::shift_taps(g.h, target_height, offset_height),
                              detail::shift_taps(g.w, target_width, offset_width), "crop_to_bounding_box");
}

/// `image` placed at (offset_height, offset_width) in a zero image of target_height x
/// target_width (tf.image.pad_to_bounding_box); the image must fit.
template <Expression E>
auto pad_to_bounding_box(const E& image, int64_t offset_height, int64_t offset_width, int64_t target_height,
                         int64_t target_width) {
  auto x = materialize(image);
  const auto g = detail::geom_of(x, "pad_to_bounding_box");
  GRADUS_CHECK(value_error, offset_height >= 0 && offset_width >= 0, "pad_to_bounding_box: offsets must be >= 0, got ",
               offset_height, ", ", offset_width);
  GRADUS_CHECK(value_error, offset_height + g.h <= target_height && offset_width + g.w <= target_width,
               "pad_to_bounding_box: the ", g.h, "x", g.w, " image at (", offset_height, ", ", offset_width,
               ") does not fit in ", target_height, "x", target_width);
  return detail::separable_op(x, detail::shift_taps(g.h, target_height, -offset_height),
                              detail::shift_taps(g.w, target_width, -offset_width), "pad_to_bounding_box");
}

/// `image` cropped (centrally) and/or zero-padded (evenly) to target_height x target_width
/// (tf.image.resize_with_crop_or_pad: an odd difference puts the extra row/column at the
/// bottom/right, i.e. offsets are floor(difference / 2)).
template <Expression E>
auto resize_with_crop_or_pad(const E& image, int64_t target_height, int64_t target_width) {
  auto x = materialize(image);
  const auto g = detail::geom_of(x, "resize_with_crop_or_pad");
  GRADUS_CHECK(value_error, target_height > 0 && target_width > 0,
               "resize_with_crop_or_pad: the target size must be positive, got ", target_height, "x", target_width);
  // TF: offset_crop = max(-diff // 2, 0), offset_pad = max(diff // 2, 0) with floor division.
  auto floordiv2 = [](int64_t v) { return v >= 0 ? v / 2 : -((-v + 1) / 2); };
  const int64_t dh = target_height - g.h, dw = target_width - g.w;
  const int64_t crop_h = std::max<int64_t>(floordiv2(-dh), 0), pad_h = std::max<int64_t>(floordiv2(dh), 0);
  const int64_t crop_w = std::max<int64_t>(floordiv2(-dw), 0), pad_w = std::max<int64_t>(floordiv2(dw), 0);
  return detail::separable_op(x, detail::shift_taps(g.h, target_height, crop_h - pad_h),
                              detail::shift_taps(g.w, target_width, crop_w - pad_w), "resize_with_crop_or_pad");
}

/// The central `central_fraction` (in (0, 1]) of `image` along H and W (tf.image.central_crop):
/// start = trunc((size - size * fraction) / 2), kept size = size - 2 * start.
template <Expression E>
auto central_crop(const E& image, double central_fraction) {
  auto x = materialize(image);
  const auto g = detail::geom_of(x, "central_crop");
  GRADUS_CHECK(value_error, central_fraction > 0 && central_fraction <= 1,
               "central_crop: central_fraction must be in (0, 1], got ", central_fraction);
  const int64_t sh = int64_t((double(g.h) - double(g.h) * central_fraction) / 2);
  const int64_t sw = int64_t((double(g.w) - double(g.w) * central_fraction) / 2);
  return detail::separable_op(x, detail::shift_taps(g.h, g.h - 2 * sh, sh), detail::shift_taps(g.w, g.w - 2 * sw, sw),
                              "central_crop");
}

/// `image` mirrored left <-> right (tf.image.flip_left_right).
template <Expression E>
auto flip_left_right(const E& image) {
  auto x = materialize(image);
  const auto g = detail::geom_of(x, "flip_left_right");
  return detail::flip_op(x, std::vector<uint8_t>(size_t(g.n), 1), false, "flip_left_right");
}

/// `image` mirrored top <-> bottom (tf.image.flip_up_down).
template <Expression E>
auto flip_up_down(const E& image) {
  auto x = materialize(image);
  const auto g = detail::geom_of(x, "flip_up_down");
  return detail::flip_op(x, std::vector<uint8_t>(size_t(g.n), 1), true, "flip_up_down");
}

/// Each image mirrored left <-> right with probability 1/2, drawn from `rng` per image.
template <Expression E>
auto random_flip_left_right(const E& image, Rng& rng) {
  auto x = materialize(image);
  const auto g = detail::geom_of(x, "random_flip_left_right");
  std::vector<uint8_t> flags(size_t(g.n));
  for (auto& f : flags) f = rng.uniform() < 0.5;
  return detail::flip_op(x, std::move(flags), false, "random_flip_left_right");
}

/// Each image mirrored top <-> bottom with probability 1/2, drawn from `rng` per image.
template <Expression E>
auto random_flip_up_down(const E& image, Rng& rng) {
  auto x = materialize(image);
  const auto g = detail::geom_of(x, "random_flip_up_down");
  std::vector<uint8_t> flags(size_t(g.n));
  for (auto& f : flags) f = rng.uniform() < 0.5;
  return detail::flip_op(x, std::move(flags), true, "random_flip_up_down");
}

/// `image` with H and W swapped: [.., H, W, C] -> [.., W, H, C] (tf.image.transpose).
template <Expression E>
auto transpose(const E& image) {
  gradus::detail::OpScope prof;
  using T = value_type_t<E>;
  auto x = materialize(image);
  const auto g = detail::geom_of(x, "transpose");
  const Tensor<T>& xv = gradus::detail::value_of(x);
  Tensor<T> out(g.shape_with(g.w, g.h, g.c));
  backend::cpu::transpose_images(xv.data(), out.data(), g);
  return make_result("image::transpose", std::move(out), [g](const Tensor<T>& grad, const Tensor<T>&, const auto& in) {
    if (!gradus::detail::needs_grad(in)) return;
    const detail::ImageGeom gt{g.n, g.w, g.h, g.c, g.batched};
    Tensor<T> gx(gt.shape_with(g.h, g.w, g.c));
    backend::cpu::transpose_images(grad.data(), gx.data(), gt);
    gradus::detail::add_grad(in, gx);
  }, x);
}

/// A random size[0] x size[1] window of `image`, the same for every image of a batch (tf.image.random_crop
/// with size [N, h, w, C]); the offsets are uniform over all windows that fit.
template <Expression E>
auto random_crop(const E& image, std::array<int64_t, 2> size, Rng& rng) {
  auto x = materialize(image);
  const auto g = detail::geom_of(x, "random_crop");
  GRADUS_CHECK(value_error, size[0] > 0 && size[1] > 0 && size[0] <= g.h && size[1] <= g.w, "random_crop: size ",
               size[0], "x", size[1], " does not fit in the ", g.h, "x", g.w, " image");
  const int64_t oy = int64_t(rng.below(uint64_t(g.h - size[0] + 1)));
  const int64_t ox = int64_t(rng.below(uint64_t(g.w - size[1] + 1)));
  return detail::separable_op(x, detail::shift_taps(g.h, size[0], oy), detail::shift_taps(g.w, size[1], ox),
                              "random_crop");
}

}  // namespace gradus::image

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::image::detail {
GRADUS_INLINE std::shared_ptr<const backend::AxisTaps> shift_taps(int64_t in, int64_t out, int64_t offset) {
  auto t = std::make_shared<backend::AxisTaps>();
  t->in = in, t->out = out;
  for (int64_t o = 0; o < out; ++o) {
    const int64_t i = o + offset;
    if (i >= 0 && i < in) t->add(i, 1.0);
    t->next();
  }
  return t;
}
}  // namespace gradus::image::detail
#endif  // GRADUS_DEFINE_COMPILED
