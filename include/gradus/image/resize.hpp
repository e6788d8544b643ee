// gradus/image/resize.hpp — resizing images as TensorFlow 2's tf.image.resize does.
//
// Coordinates follow TF2's half-pixel-centre convention: pixel i of an axis covers [i, i + 1)
// and has its centre at i + 0.5, so output pixel o of a resize from `in` to `out` pixels samples
// the input at  x = (o + 0.5) * in / out - 0.5  (in pixel-index units; scale = in / out is
// computed in float, as TF does). Per method:
//  - bilinear: the two neighbours floor(x) and ceil(x), clamped to the image, weighted by
//    1 - frac(x) and frac(x) (TF's ResizeBilinear with half_pixel_centers);
//  - nearest: input min(floor((o + 0.5) * scale), in - 1) (ResizeNearestNeighbor, half-pixel);
//  - bicubic: Keys' cubic convolution with a = -0.5 over floor(x) - 1 .. floor(x) + 2; taps that
//    fall outside the image get weight 0 and the remaining weights are renormalised to sum to 1;
//    frac(x) is rounded to a multiple of 1/1024, as TF's coefficient table does (ResizeBicubic
//    with half_pixel_centers);
//  - area: each output pixel is the mean of the input area [o * scale, (o + 1) * scale) it
//    covers, partial pixels weighted by their covered fraction (ResizeArea; TF2 uses it without
//    half-pixel centres, and so does this).
// No method antialiases when downscaling (TF's antialias=false). Every method is separable and
// linear in the pixels, so resize is differentiable with respect to the image: with a Var input
// it returns a Var whose gradient is the transposed resampling. Works on [H, W, C] and
// [N, H, W, C] float or double images; large batches are split over the thread pool.
#pragma once
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string_view>

#include "gradus/core/compiled.hpp"
#include "gradus/image/geometry.hpp"

namespace gradus::image {

/// The interpolation of `resize` (tf.image.ResizeMethod).
enum class ResizeMethod { bilinear, nearest, bicubic, area };

/// Options of `resize`: the method, and TF's preserve_aspect_ratio (the result then fits inside
/// the requested size: both sides scaled by min(new_h / h, new_w / w), rounded to nearest).
struct ResizeOptions {
  ResizeMethod method = ResizeMethod::bilinear;
  bool preserve_aspect_ratio = false;
};

std::string_view to_string(ResizeMethod m);

namespace detail {

/// Keys' cubic kernel with a = -0.5 at the 1025 points i / 1024 of [0, 1] (weights of the two
/// near taps) and 1 + i / 1024 (the two far ones), stored in float as TF's table.
const std::array<float, 2 * 1025>& keys_cubic_table();

/// The taps of one axis resized from `in` to `out` pixels by `method` (see the file comment).
std::shared_ptr<const backend::AxisTaps> resize_taps(int64_t in, int64_t out, ResizeMethod method);

}  // namespace detail

/// `images` ([H, W, C] or [N, H, W, C], float or double, or int64_t samples with `nearest`; a
/// Tensor or a Var) resized to
/// size = {new_height, new_width} (tf.image.resize; see the file comment for the methods).
///   auto small = gd::image::resize(batch, {224, 224});
///   auto up = gd::image::resize(img, {64, 64}, {.method = gd::image::ResizeMethod::bicubic});
template <Expression E>
auto resize(const E& images, std::array<int64_t, 2> size, const ResizeOptions& opts = {}) {
  auto x = materialize(images);
  if constexpr (!Real<value_type_t<E>>)
    GRADUS_CHECK(value_error, opts.method == ResizeMethod::nearest, "resize: integer images resize with `nearest` "
                 "only; convert them first for ", to_string(opts.method), " (gd::image::convert_image_dtype<float>)");
  const auto g = detail::geom_of(x, "resize");
  GRADUS_CHECK(value_error, size[0] > 0 && size[1] > 0, "resize: the new size must be positive, got ", size[0], "x",
               size[1]);
  GRADUS_CHECK(value_error, g.h > 0 && g.w > 0, "resize: cannot resize an empty ", g.h, "x", g.w, " image");
  if (opts.preserve_aspect_ratio) {
    const double s = std::min(double(size[0]) / double(g.h), double(size[1]) / double(g.w));
    size = {std::max<int64_t>(1, int64_t(std::nearbyint(s * double(g.h)))),  // TF's round: half to even
            std::max<int64_t>(1, int64_t(std::nearbyint(s * double(g.w))))};
  }
  return detail::separable_op(x, detail::resize_taps(g.h, size[0], opts.method),
                              detail::resize_taps(g.w, size[1], opts.method), "resize");
}

}  // namespace gradus::image

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::image {
GRADUS_INLINE std::string_view to_string(ResizeMethod m) {
  switch (m) {
    case ResizeMethod::bilinear: return "bilinear";
    case ResizeMethod::nearest: return "nearest";
    case ResizeMethod::bicubic: return "bicubic";
    case ResizeMethod::area: return "area";
  }
  return "?";
}
}  // namespace gradus::image

namespace gradus::image::detail {
GRADUS_INLINE const std::array<float, 2 * 1025>& keys_cubic_table() {
  static const std::array<float, 2 * 1025> table = [] {
    std::array<float, 2 * 1025> t{};
    const double a = -0.5;
    for (int i = 0; i <= 1024; ++i) {
      float x = float(i * 1.0 / 1024);
      t[size_t(2 * i)] = float(((a + 2) * x - (a + 3)) * x * x + 1);
      x += 1.0f;
      t[size_t(2 * i + 1)] = float(((a * x - 5 * a) * x + 8 * a) * x - 4 * a);
    }
    return t;
  }();
  return table;
}

GRADUS_INLINE std::shared_ptr<const backend::AxisTaps> resize_taps(int64_t in, int64_t out, ResizeMethod method) {
  auto t = std::make_shared<backend::AxisTaps>();
  t->in = in, t->out = out;
  const float scale = float(in) / float(out);
  for (int64_t o = 0; o < out; ++o) {
    switch (method) {
      case ResizeMethod::bilinear: {
        const float x = (float(o) + 0.5f) * scale - 0.5f;
        const float xf = std::floor(x);
        const int64_t lo = std::max<int64_t>(int64_t(xf), 0), hi = std::min<int64_t>(int64_t(std::ceil(x)), in - 1);
        const float lerp = x - xf;
        if (lo == hi) {
          t->add(lo, 1.0);
        } else {
          t->add(lo, double(1.0f - lerp));
          t->add(hi, double(lerp));
        }
        break;
      }
      case ResizeMethod::nearest: {
        const int64_t i = std::min<int64_t>(int64_t(std::floor((float(o) + 0.5f) * scale)), in - 1);
        t->add(std::max<int64_t>(i, 0), 1.0);
        break;
      }
      case ResizeMethod::bicubic: {
        const auto& tab = keys_cubic_table();
        const float x = (float(o) + 0.5f) * scale - 0.5f;
        const int64_t base = int64_t(std::floor(x));
        const float delta = x - float(base);
        const int64_t off = std::lrint(delta * 1024);
        const float w[4] = {tab[size_t(off * 2 + 1)], tab[size_t(off * 2)], tab[size_t((1024 - off) * 2)],
                            tab[size_t((1024 - off) * 2 + 1)]};
        float used[4];
        float total = 0;
        for (int k = 0; k < 4; ++k) {
          const int64_t i = base - 1 + k;
          used[k] = i >= 0 && i < in ? w[k] : 0.0f;
          total += used[k];
        }
        const float inv = std::abs(total) >= 1000.0f * std::numeric_limits<float>::min() ? 1.0f / total : 1.0f;
        for (int k = 0; k < 4; ++k)
          if (used[k] != 0.0f) t->add(base - 1 + k, double(used[k] * inv));
        break;
      }
      case ResizeMethod::area: {
        const float x0 = float(o) * scale, x1 = float(o + 1) * scale;
        const int64_t i0 = int64_t(std::floor(x0)), i1 = int64_t(std::ceil(x1));
        for (int64_t i = i0; i < i1; ++i) {
          const float cover = std::min(float(i + 1), x1) - std::max(float(i), x0);
          if (cover > 0) t->add(std::clamp<int64_t>(i, 0, in - 1), double(cover / scale));
        }
        break;
      }
    }
    t->next();
  }
  return t;
}
}  // namespace gradus::image::detail
#endif  // GRADUS_DEFINE_COMPILED
