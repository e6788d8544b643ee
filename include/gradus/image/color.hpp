// gradus/image/color.hpp — colour adjustments and colour spaces (tf.image).
//
// Images are [H, W, C] or [N, H, W, C] of float or double intensities (nominally in [0, 1];
// nothing here clips, as in TF). Per-image statistics (contrast's channel means,
// standardization's mean and deviation) are taken over each image of a batch separately.
//  - adjust_brightness(x, d)     x + d
//  - adjust_contrast(x, f)       (x - m) * f + m, m the mean of each channel of each image
//  - adjust_gamma(x, g, gain)    gain * x^g
//  - per_image_standardization   (x - mean) / max(stddev, 1 / sqrt(H * W * C)) per image
//  - rgb_to_grayscale            0.2989 R + 0.5870 G + 0.1140 B (TF's weights) -> C = 1
//  - grayscale_to_rgb            C = 1 -> 3 by repetition
// These are built from gradus' differentiable ops: given a Var they return a Var and have
// gradients. The HSV family works on Tensors only (TF's are not differentiable either):
//  - rgb_to_hsv / hsv_to_rgb     TF's formulas: V = max, S = (max - min) / max (0 when max = 0),
//                                H in [0, 1) from the sector of the largest channel (0 for grey);
//                                back by r = v * (1 - s + s * clamp(|6h - 3| - 1, 0, 1)) etc.
//  - adjust_hue(x, d)            H -> H + d wrapped into [0, 1), d in [-1, 1]
//  - adjust_saturation(x, f)     S -> clamp(S * f, 0, 1)
// The random_ forms draw one value from the explicit gd::Rng& for the whole call (a batch gets
// one value, as TF's), uniform in [-max_delta, max_delta) or [lower, upper).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "gradus/autodiff/materialize.hpp"
#include "gradus/backend/cpu/image.hpp"
#include "gradus/core/rng.hpp"
#include "gradus/image/dtype.hpp"
#include "gradus/ops/reduce.hpp"

namespace gradus::image {

namespace detail {

template <class E>
void check_real_image(const E& x, const char* who, int64_t channels = 0) {
  static_assert(Real<value_type_t<E>>, "THE_ELEMENT_TYPE_MUST_BE_FLOAT_OR_DOUBLE: gd::image colour ops (convert "
                                       "integer samples first: gd::image::convert_image_dtype<float>)");
  geom(x.shape(), who, channels);
}

template <Real T>
void rgb_to_hsv_px(T r, T g, T b, T* h, T* s, T* v) {
  const T mx = std::max(r, std::max(g, b)), mn = std::min(r, std::min(g, b));
  const T range = mx - mn;
  *v = mx;
  *s = mx > T(0) ? range / mx : T(0);
  T hh = T(0);
  if (range > T(0)) {
    const T norm = T(1) / (T(6) * range);
    hh = r == mx ? norm * (g - b) : g == mx ? norm * (b - r) + T(2) / T(6) : norm * (r - g) + T(4) / T(6);
  }
  *h = hh < T(0) ? hh + T(1) : hh;
}

template <Real T>
void hsv_to_rgb_px(T h, T s, T v, T* r, T* g, T* b) {
  const T dh = h * T(6);
  const T dr = std::clamp(std::abs(dh - T(3)) - T(1), T(0), T(1));
  const T dg = std::clamp(T(2) - std::abs(dh - T(2)), T(0), T(1));
  const T db = std::clamp(T(2) - std::abs(dh - T(4)), T(0), T(1));
  const T one_minus_s = T(1) - s;
  *r = (one_minus_s + s * dr) * v;
  *g = (one_minus_s + s * dg) * v;
  *b = (one_minus_s + s * db) * v;
}

/// f applied to every pixel's three channels (f(const T* in, T* out)), over the thread pool.
template <Real T, class F>
Tensor<T> map_pixels3(const Tensor<T>& x, F f) {
  Tensor<T> out(x.shape());
  backend::cpu::map_pixels3(x.data(), out.data(), x.size() / 3, f);
  return out;
}

}  // namespace detail

/// `image` + delta (tf.image.adjust_brightness); differentiable.
template <Expression E>
auto adjust_brightness(const E& image, double delta) {
  using T = value_type_t<E>;
  detail::check_real_image(image, "adjust_brightness");
  return materialize(image + T(delta));
}

/// (image - mean) * factor + mean with the mean of each channel of each image
/// (tf.image.adjust_contrast); differentiable.
template <Expression E>
auto adjust_contrast(const E& image, double contrast_factor) {
  using T = value_type_t<E>;
  detail::check_real_image(image, "adjust_contrast");
  auto x = materialize(image);
  auto m = materialize(mean(x, {-3, -2}, true));
  return materialize((x - m) * T(contrast_factor) + m);
}

/// gain * image^gamma (tf.image.adjust_gamma; gamma >= 0); differentiable.
template <Expression E>
auto adjust_gamma(const E& image, double gamma = 1, double gain = 1) {
  using T = value_type_t<E>;
  detail::check_real_image(image, "adjust_gamma");
  GRADUS_CHECK(value_error, gamma >= 0, "adjust_gamma: gamma must be >= 0, got ", gamma);
  return materialize(pow(image, T(gamma)) * T(gain));
}

/// Each image scaled to mean 0 and deviation 1: (x - mean) / max(stddev, 1 / sqrt(H * W * C))
/// (tf.image.per_image_standardization; stddev is the population one); differentiable.
template <Expression E>
auto per_image_standardization(const E& image) {
  using T = value_type_t<E>;
  detail::check_real_image(image, "per_image_standardization");
  auto x = materialize(image);
  const auto g = detail::geom(x.shape(), "per_image_standardization");
  const T min_std = T(1) / std::sqrt(T(g.h * g.w * g.c));
  auto centred = materialize(x - mean(x, {-3, -2, -1}, true));
  auto stddev = materialize(sqrt(mean(square(centred), {-3, -2, -1}, true)));
  return materialize(centred / maximum(stddev, min_std));
}

/// RGB -> gray, 0.2989 R + 0.5870 G + 0.1140 B: [.., 3] -> [.., 1] (tf.image.rgb_to_grayscale); differentiable.
template <Expression E>
auto rgb_to_grayscale(const E& image) {
  using T = value_type_t<E>;
  detail::check_real_image(image, "rgb_to_grayscale", 3);
  return materialize(sum(image * Tensor<T>::from({T(0.2989), T(0.5870), T(0.1140)}), -1, true));
}

/// Gray -> RGB by repeating the channel: [.., 1] -> [.., 3] (tf.image.grayscale_to_rgb); differentiable.
template <Expression E>
auto grayscale_to_rgb(const E& image) {
  using T = value_type_t<E>;
  detail::check_real_image(image, "grayscale_to_rgb", 1);
  return materialize(image * Tensor<T>::ones({3}));
}

/// RGB in [0, 1] -> HSV in [0, 1] (tf.image.rgb_to_hsv; see the file comment).
template <Real T>
Tensor<T> rgb_to_hsv(const Tensor<T>& image) {
  detail::check_real_image(image, "rgb_to_hsv", 3);
  return detail::map_pixels3(image, [](const T* p, T* q) { detail::rgb_to_hsv_px(p[0], p[1], p[2], q, q + 1, q + 2); });
}

/// HSV in [0, 1] -> RGB (tf.image.hsv_to_rgb; see the file comment).
template <Real T>
Tensor<T> hsv_to_rgb(const Tensor<T>& image) {
  detail::check_real_image(image, "hsv_to_rgb", 3);
  return detail::map_pixels3(image, [](const T* p, T* q) { detail::hsv_to_rgb_px(p[0], p[1], p[2], q, q + 1, q + 2); });
}

/// RGB `image` with its hue turned by `delta` (in [-1, 1]; 1 is a full turn) (tf.image.adjust_hue).
template <Real T>
Tensor<T> adjust_hue(const Tensor<T>& image, double delta) {
  detail::check_real_image(image, "adjust_hue", 3);
  GRADUS_CHECK(value_error, delta >= -1 && delta <= 1, "adjust_hue: delta must be in [-1, 1], got ", delta);
  const T d = T(delta);
  return detail::map_pixels3(image, [d](const T* p, T* q) {
    T h, s, v;
    detail::rgb_to_hsv_px(p[0], p[1], p[2], &h, &s, &v);
    h += d;
    h -= std::floor(h);
    if (h >= T(1)) h = T(0);
    detail::hsv_to_rgb_px(h, s, v, q, q + 1, q + 2);
  });
}

/// RGB `image` with its saturation multiplied by `factor` (>= 0) and clamped to [0, 1]
/// (tf.image.adjust_saturation).
template <Real T>
Tensor<T> adjust_saturation(const Tensor<T>& image, double saturation_factor) {
  detail::check_real_image(image, "adjust_saturation", 3);
  GRADUS_CHECK(value_error, saturation_factor >= 0, "adjust_saturation: the factor must be >= 0, got ",
               saturation_factor);
  const T f = T(saturation_factor);
  return detail::map_pixels3(image, [f](const T* p, T* q) {
    T h, s, v;
    detail::rgb_to_hsv_px(p[0], p[1], p[2], &h, &s, &v);
    detail::hsv_to_rgb_px(h, std::clamp(s * f, T(0), T(1)), v, q, q + 1, q + 2);
  });
}

/// adjust_brightness by a delta uniform in [-max_delta, max_delta) (tf.image.random_brightness).
template <Expression E>
auto random_brightness(const E& image, double max_delta, Rng& rng) {
  GRADUS_CHECK(value_error, max_delta >= 0, "random_brightness: max_delta must be >= 0, got ", max_delta);
  return adjust_brightness(image, rng.uniform(-max_delta, max_delta));
}

/// adjust_contrast by a factor uniform in [lower, upper) (tf.image.random_contrast; 0 <= lower < upper).
template <Expression E>
auto random_contrast(const E& image, double lower, double upper, Rng& rng) {
  GRADUS_CHECK(value_error, lower >= 0 && upper > lower, "random_contrast: need 0 <= lower < upper, got ", lower,
               ", ", upper);
  return adjust_contrast(image, rng.uniform(lower, upper));
}

/// adjust_hue by a delta uniform in [-max_delta, max_delta) (tf.image.random_hue; max_delta in [0, 0.5]).
template <Real T>
Tensor<T> random_hue(const Tensor<T>& image, double max_delta, Rng& rng) {
  GRADUS_CHECK(value_error, max_delta >= 0 && max_delta <= 0.5, "random_hue: max_delta must be in [0, 0.5], got ",
               max_delta);
  return adjust_hue(image, rng.uniform(-max_delta, max_delta));
}

/// adjust_saturation by a factor uniform in [lower, upper) (tf.image.random_saturation; 0 <= lower < upper).
template <Real T>
Tensor<T> random_saturation(const Tensor<T>& image, double lower, double upper, Rng& rng) {
  GRADUS_CHECK(value_error, lower >= 0 && upper > lower, "random_saturation: need 0 <= lower < upper, got ", lower,
               ", ", upper);
  return adjust_saturation(image, rng.uniform(lower, upper));
}

}  // namespace gradus::image
