// gradus/image/transform.hpp — projective (and affine) transforms of images, differentiable in the
// pixels and in the transform: the sampling grid of TensorFlow's ImageProjectiveTransformV3
// (tf.raw_ops; Keras' and TF Addons' image.transform), read by gd::resampler.
//
// A transform is 8 numbers [a0, a1, a2, b0, b1, b2, c0, c1]: output pixel (x, y) (column x, row y,
// at integer coordinates) reads the input at
//
//   ((a0 x + a1 y + a2) / k, (b0 x + b1 y + b2) / k),  k = c0 x + c1 y + 1,
//
// with bilinear interpolation and zeros outside the image (TF's interpolation="bilinear",
// fill_mode="constant", fill_value=0). So the identity is [1, 0, 0, 0, 1, 0, 0, 0], and
// [1, 0, -dx, 0, 1, -dy, 0, 0] moves the content by (dx, dy). Because the grid is an expression of
// the transform, a Var transform gets its gradient: a localisation network that predicts it,
// followed by `transform`, is a spatial transformer.
#pragma once
#include <array>
#include <cstdint>

#include "gradus/image/dtype.hpp"
#include "gradus/ops/sampling.hpp"
#include "gradus/ops/shape.hpp"

namespace gradus::image {

/// The input points that `transform` reads: warp [N, out_h, out_w, 2] of (x, y), from transforms
/// [8] or [M, 8] (M = 1 or N; a Tensor or a Var) for `n` images.
template <Expression E>
auto transform_points(const E& transforms_expr, int64_t n, std::array<int64_t, 2> output_size) {
  using T = value_type_t<E>;
  auto tr = materialize(transforms_expr);
  const Tensor<T>& tv = gradus::detail::value_of(tr);
  const Shape& ts = tv.shape();
  GRADUS_CHECK(shape_error, (ts.rank() == 1 && ts[0] == 8) || (ts.rank() == 2 && ts[1] == 8),
               "image::transform: transforms must have shape [8] or [N, 8], got ", ts);
  const int64_t m = ts.rank() == 1 ? 1 : ts[0];
  GRADUS_CHECK(shape_error, m == 1 || m == n, "image::transform: ", m, " transforms for ", n,
               " images (give one, or one per image)");
  GRADUS_CHECK(value_error, output_size[0] > 0 && output_size[1] > 0,
               "image::transform: the output size must be positive, got ", output_size[0], "x", output_size[1]);
  const Device dev = tv.device();
  const int64_t oh = output_size[0], ow = output_size[1];
  Tensor<T> xs(Shape{1, oh, ow}), ys(Shape{1, oh, ow});
  for (int64_t y = 0; y < oh; ++y)
    for (int64_t x = 0; x < ow; ++x) xs.data()[y * ow + x] = T(x), ys.data()[y * ow + x] = T(y);
  if (dev != gradus::cpu) xs = xs.to(dev), ys = ys.to(dev);
  auto t2 = reshape(tr, {m, 8});
  auto col = [&](int64_t k) { return reshape(slice(t2, {0, k}, {m, 1}), {m, 1, 1}); };
  auto k = materialize(col(6) * xs + col(7) * ys + T(1));
  auto wx = materialize((col(0) * xs + col(1) * ys + col(2)) / k);
  auto wy = materialize((col(3) * xs + col(4) * ys + col(5)) / k);
  if (m == 1 && n > 1) {  // one transform for every image: the grid repeated
    const Tensor<T> zeros = Tensor<T>::zeros({n, 1, 1}).to(dev);
    return stack({materialize(wx + zeros), materialize(wy + zeros)}, -1);
  }
  return stack({wx, wy}, -1);
}

/// `images` ([H, W, C] or [N, H, W, C], float or double; a Tensor or a Var) transformed by
/// `transforms` ([8] for all images, or [N, 8]; a Tensor or a Var of the same element type) into
/// output_size (default: the input's size), with bilinear interpolation and zeros outside
/// (tf.raw_ops.ImageProjectiveTransformV3 with interpolation "BILINEAR", fill_mode "CONSTANT";
/// see the file comment for the transform's meaning). Differentiable in both.
///   auto shifted = gd::image::transform(img, gd::Tensor<float>::from({1, 0, -3, 0, 1, 2, 0, 0}, {8}));
template <Expression I, Expression E>
auto transform(const I& images_expr, const E& transforms, std::array<int64_t, 2> output_size = {0, 0}) {
  static_assert(gradus::detail::same_element_v<I, E>,
                "YOU_MIXED_ELEMENT_TYPES_IN_ONE_EXPRESSION: image::transform — cast the transforms (gd::cast<T>(t))");
  static_assert(Real<value_type_t<I>>, "THE_ELEMENT_TYPE_MUST_BE_FLOAT_OR_DOUBLE: image::transform");
  auto images = materialize(images_expr);
  const detail::ImageGeom g = detail::geom(gradus::detail::value_of(images).shape(), "image::transform");
  if (output_size[0] == 0 && output_size[1] == 0) output_size = {g.h, g.w};
  auto warp = transform_points(transforms, g.n, output_size);
  auto out = resampler(reshape(images, {g.n, g.h, g.w, g.c}), warp);
  return reshape(out, g.shape_with(output_size[0], output_size[1], g.c));
}

}  // namespace gradus::image
