// gradus/image/preprocess.hpp — the Inception-style training-time augmentation
// (preprocess_for_train of TF-slim's inception_preprocessing), on an explicit gd::Rng&:
//  1. a distorted crop: sample_distorted_bounding_box over `boxes` (the whole image when none)
//     with min_object_covered 0.1, aspect ratio in [3/4, 4/3], area in [5%, 100%], 100 attempts;
//  2. a resize of the crop to height x width with a method drawn uniformly from bilinear,
//     nearest, bicubic and area (always bilinear with `fast_mode`);
//  3. a random left-right flip;
//  4. colour distortion in one of four orders drawn uniformly (slim's distort_color):
//       0: brightness, saturation, hue, contrast      1: saturation, brightness, contrast, hue
//       2: contrast, hue, brightness, saturation      3: hue, saturation, contrast, brightness
//     with brightness delta in [-32/255, 32/255), saturation and contrast factors in [0.5, 1.5),
//     hue delta in [-0.2, 0.2); `fast_mode` uses brightness then saturation only (slim's order 0);
//  5. clipping to [0, 1].
// slim's final rescaling to [-1, 1] is left to the caller ((x - 0.5) * 2).
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "gradus/image/bbox.hpp"
#include "gradus/image/color.hpp"
#include "gradus/image/geometry.hpp"
#include "gradus/image/resize.hpp"

namespace gradus::image {

/// Options of preprocess_for_train: slim's fast_mode, and the distorted crop's constraints.
struct PreprocessOptions {
  bool fast_mode = false;
  DistortedBoxOptions crop{.min_object_covered = 0.1f,
                           .aspect_ratio_range = {0.75f, 1.33f},
                           .area_range = {0.05f, 1.0f},
                           .max_attempts = 100,
                           .use_image_if_no_bounding_boxes = true};
};

/// The colour distortion of step 4 (see the file comment) in the given `ordering` (0..3),
/// followed by clipping to [0, 1]. `image` is RGB [H, W, 3] or [N, H, W, 3].
template <Real T>
Tensor<T> distort_color(const Tensor<T>& image, int ordering, Rng& rng, bool fast_mode = false) {
  GRADUS_CHECK(value_error, ordering >= 0 && ordering <= (fast_mode ? 1 : 3), "distort_color: ordering must be in 0..",
               fast_mode ? 1 : 3, ", got ", ordering);
  Tensor<T> x = image;
  auto brightness = [&] { x = random_brightness(x, 32. / 255., rng); };
  auto saturation = [&] { x = random_saturation(x, 0.5, 1.5, rng); };
  auto hue = [&] { x = random_hue(x, 0.2, rng); };
  auto contrast = [&] { x = random_contrast(x, 0.5, 1.5, rng); };
  if (fast_mode) {
    if (ordering == 0) brightness(), saturation();
    else saturation(), brightness();
  } else if (ordering == 0) {
    brightness(), saturation(), hue(), contrast();
  } else if (ordering == 1) {
    saturation(), brightness(), contrast(), hue();
  } else if (ordering == 2) {
    contrast(), hue(), brightness(), saturation();
  } else {
    hue(), saturation(), contrast(), brightness();
  }
  Tensor<T> out(x.shape());
  std::transform(x.begin(), x.end(), out.begin(), [](T v) { return std::clamp(v, T(0), T(1)); });
  return out;
}

/// `image` (RGB [H, W, 3] in [0, 1]) augmented for training and resized to height x width
/// (see the file comment); `boxes` are the objects the crop should cover.
///   gd::Tensor<float> x = gd::image::preprocess_for_train(img, 224, 224, rng);
template <Real T>
Tensor<T> preprocess_for_train(const Tensor<T>& image, int64_t height, int64_t width, Rng& rng,
                               const std::vector<Box>& boxes = {}, const PreprocessOptions& opts = {}) {
  GRADUS_CHECK(shape_error, image.rank() == 3 && image.shape()[2] == 3,
               "preprocess_for_train: expected an RGB image [H, W, 3], got shape ", image.shape());
  const DistortedBox d = sample_distorted_bounding_box({image.shape()[0], image.shape()[1], 3}, boxes, rng, opts.crop);
  const Tensor<T> crop = crop_to_bounding_box(image, d.begin[0], d.begin[1], d.size[0], d.size[1]);
  const auto method = opts.fast_mode ? ResizeMethod::bilinear : ResizeMethod(rng.below(4));
  const Tensor<T> resized = resize(crop, {height, width}, {.method = method});
  const Tensor<T> flipped = random_flip_left_right(resized, rng);
  return distort_color(flipped, opts.fast_mode ? 0 : int(rng.below(4)), rng, opts.fast_mode);
}

}  // namespace gradus::image
