// gradus/image/bbox.hpp — bounding boxes: drawing them and sampling distorted crops (tf.image).
//
// A box is [ymin, xmin, ymax, xmax] in coordinates relative to the image, 0..1 (TF's layout).
//  - draw_bounding_boxes: TF's DrawBoundingBoxes: the box's corner rows/columns are
//    trunc(coord * (size - 1)); a one-pixel outline is drawn with colour bb % colours.size()
//    (TF's default table of ten colours when none is given); boxes that are inverted or wholly
//    outside the image are skipped, edges outside it are not drawn.
//  - sample_distorted_bounding_box: TF's SampleDistortedBoundingBoxV2 algorithm, drawn from an
//    explicit gd::Rng&: up to max_attempts times, an aspect ratio uniform in aspect_ratio_range
//    and a height between those giving area_range[0] and area_range[1] of the image, rounded,
//    then a position; the first crop that covers at least min_object_covered of some box (in
//    pixels, boxes truncated to whole pixels) is taken, else the whole image.
#pragma once
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <vector>

#include "gradus/core/compiled.hpp"
#include "gradus/core/rng.hpp"
#include "gradus/core/tensor.hpp"
#include "gradus/image/dtype.hpp"

namespace gradus::image {

/// A box as [ymin, xmin, ymax, xmax], relative coordinates.
using Box = std::array<float, 4>;

/// TF's default colours of draw_bounding_boxes (RGBA).
const std::vector<std::array<float, 4>>& default_box_colors();

/// A copy of `images` ([N, H, W, C] or [H, W, C], C in 1..4) with the outlines of `boxes`
/// ([N, B, 4], or [B, 4] for a single image) drawn in `colors` (RGBA, cycled; the first C
/// components are written) (tf.image.draw_bounding_boxes).
///   auto shown = gd::image::draw_bounding_boxes(img, gd::Tensor<float>::from({0.1f, 0.2f, 0.8f, 0.9f}, {1, 4}));
template <Element T>
Tensor<T> draw_bounding_boxes(const Tensor<T>& images, const Tensor<float>& boxes,
                              const std::vector<std::array<float, 4>>& colors = default_box_colors()) {
  const auto g = detail::geom(images.shape(), "draw_bounding_boxes");
  GRADUS_CHECK(shape_error, g.c <= 4, "draw_bounding_boxes: images must have 1 to 4 channels, got shape ",
               images.shape());
  const Shape& bs = boxes.shape();
  const bool ok = g.batched ? bs.rank() == 3 && bs[0] == g.n && bs[2] == 4 : bs.rank() == 2 && bs[1] == 4;
  GRADUS_CHECK(shape_error, ok, "draw_bounding_boxes: boxes must be ", g.batched ? "[N, B, 4]" : "[B, 4]",
               " for images of shape ", images.shape(), ", got ", bs);
  GRADUS_CHECK(value_error, !colors.empty(), "draw_bounding_boxes: colors is empty");
  const int64_t nb = g.batched ? bs[1] : bs[0];
  Tensor<T> out = images.clone();
  T* px = out.data();
  const float* bx = boxes.data();
  for (int64_t b = 0; b < g.n; ++b) {
    T* im = px + b * g.h * g.w * g.c;
    auto put = [&](int64_t y, int64_t x, const std::array<float, 4>& col) {
      for (int64_t ch = 0; ch < g.c; ++ch) im[(y * g.w + x) * g.c + ch] = T(col[size_t(ch)]);
    };
    for (int64_t k = 0; k < nb; ++k) {
      const float* box = bx + (b * nb + k) * 4;
      const auto& col = colors[size_t(k) % colors.size()];
      const int64_t y0 = int64_t(box[0] * float(g.h - 1)), y1 = int64_t(box[2] * float(g.h - 1));
      const int64_t x0 = int64_t(box[1] * float(g.w - 1)), x1 = int64_t(box[3] * float(g.w - 1));
      if (y0 > y1 || x0 > x1) continue;                            // inverted
      if (y0 >= g.h || y1 < 0 || x0 >= g.w || x1 < 0) continue;  // wholly outside
      const int64_t cy0 = std::max<int64_t>(y0, 0), cy1 = std::min<int64_t>(y1, g.h - 1);
      const int64_t cx0 = std::max<int64_t>(x0, 0), cx1 = std::min<int64_t>(x1, g.w - 1);
      for (int64_t x = cx0; x <= cx1; ++x) {
        if (y0 >= 0) put(y0, x, col);
        if (y1 < g.h) put(y1, x, col);
      }
      for (int64_t y = cy0; y <= cy1; ++y) {
        if (x0 >= 0) put(y, x0, col);
        if (x1 < g.w) put(y, x1, col);
      }
    }
  }
  return out;
}

/// Options of sample_distorted_bounding_box (TF's defaults).
struct DistortedBoxOptions {
  float min_object_covered = 0.1f;
  std::array<float, 2> aspect_ratio_range{0.75f, 1.33f};
  std::array<float, 2> area_range{0.05f, 1.0f};
  int max_attempts = 100;
  bool use_image_if_no_bounding_boxes = false;
};

/// A crop from sample_distorted_bounding_box: begin {y, x, 0} and size {h, w, -1} for tf.slice
/// (or crop_to_bounding_box(img, begin[0], begin[1], size[0], size[1])), and the crop as a box.
struct DistortedBox {
  std::array<int64_t, 3> begin;
  std::array<int64_t, 3> size;
  Box bbox;
};

namespace detail {

/// A pixel rectangle [x0, x1) x [y0, y1).
struct PixelRect {
  int64_t x0 = 0, y0 = 0, x1 = 0, y1 = 0;
  int64_t area() const { return (x1 - x0) * (y1 - y0); }
  PixelRect intersect(const PixelRect& o) const {
    const PixelRect r{std::max(x0, o.x0), std::max(y0, o.y0), std::min(x1, o.x1), std::min(y1, o.y1)};
    return r.x0 >= r.x1 || r.y0 >= r.y1 ? PixelRect{} : r;
  }
};

/// TF's GenerateRandomCrop: a crop of relative area in [min_area, max_area] and the given aspect
/// ratio (width / height) inside a width x height image, or false.
bool generate_random_crop(Rng& rng, int64_t width, int64_t height, float min_rel, float max_rel, float aspect,
                          PixelRect* crop);

bool covers_some_box(const PixelRect& crop, float min_covered, const std::vector<PixelRect>& boxes);

}  // namespace detail

/// A random crop of an image of `image_size` {H, W, C} that covers at least
/// min_object_covered of one of `bounding_boxes` (tf.image.sample_distorted_bounding_box; see
/// the file comment). With no boxes it needs use_image_if_no_bounding_boxes (the whole image is
/// then the box). value_error on boxes outside [0, 1] or with min > max, or bad ranges.
///   auto d = gd::image::sample_distorted_bounding_box({480, 640, 3}, {{0.1f, 0.1f, 0.9f, 0.8f}}, rng);
///   auto crop = gd::image::crop_to_bounding_box(img, d.begin[0], d.begin[1], d.size[0], d.size[1]);
DistortedBox sample_distorted_bounding_box(std::array<int64_t, 3> image_size, const std::vector<Box>& bounding_boxes,
                                           Rng& rng, const DistortedBoxOptions& o = {});

}  // namespace gradus::image

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::image {
GRADUS_INLINE const std::vector<std::array<float, 4>>& default_box_colors() {
  static const std::vector<std::array<float, 4>> c = {{1, 1, 0, 1},   {0, 0, 1, 1},     {1, 0, 0, 1}, {0, 1, 0, 1},
                                                      {0.5, 0, 0.5, 1}, {0.5, 0.5, 0, 1}, {0.5, 0, 0, 1}, {0, 0, 0.5, 1},
                                                      {0, 1, 1, 1},   {1, 0, 1, 1}};
  return c;
}
}  // namespace gradus::image

namespace gradus::image::detail {
GRADUS_INLINE bool generate_random_crop(Rng& rng, int64_t width, int64_t height, float min_rel, float max_rel,
                                        float aspect, PixelRect* crop) {
  if (max_rel <= 0 || aspect <= 0 || width <= 0 || height <= 0 || min_rel > max_rel) return false;
  const float min_area = min_rel * float(width) * float(height), max_area = max_rel * float(width) * float(height);
  int64_t h = std::lrint(std::sqrt(min_area / aspect));
  int64_t max_h = std::lrint(std::sqrt(max_area / aspect));
  if (std::lrint(float(max_h) * aspect) > width) {
    max_h = int64_t((double(width) + 0.5 - 1e-7) / aspect);
    if (std::lrint(float(max_h) * aspect) > width) max_h -= 1;
  }
  max_h = std::min(max_h, height);
  h = std::min(h, max_h);
  if (h < max_h) h += int64_t(rng.below(uint64_t(max_h - h + 1)));
  int64_t w = std::lrint(float(h) * aspect);
  float area = float(w * h);
  if (area < min_area) {
    h += 1;
    w = std::lrint(float(h) * aspect);
    area = float(w * h);
  }
  if (area > max_area) {
    h -= 1;
    w = std::lrint(float(h) * aspect);
    area = float(w * h);
  }
  if (area < min_area || area > max_area || w > width || h > height || w <= 0 || h <= 0) return false;
  const int64_t y = h < height ? int64_t(rng.below(uint64_t(height - h))) : 0;
  const int64_t x = w < width ? int64_t(rng.below(uint64_t(width - w))) : 0;
  *crop = {x, y, x + w, y + h};
  return true;
}

GRADUS_INLINE bool covers_some_box(const PixelRect& crop, float min_covered, const std::vector<PixelRect>& boxes) {
  if (crop.area() < 1) return false;
  for (const auto& b : boxes) {
    if (b.area() < 1) continue;
    if (float(crop.intersect(b).area()) / float(b.area()) >= min_covered) return true;
  }
  return false;
}
}  // namespace gradus::image::detail

namespace gradus::image {
GRADUS_INLINE DistortedBox sample_distorted_bounding_box(std::array<int64_t, 3> image_size,
                                                         const std::vector<Box>& bounding_boxes, Rng& rng,
                                                         const DistortedBoxOptions& o) {
  const int64_t height = image_size[0], width = image_size[1];
  GRADUS_CHECK(value_error, height >= 1 && width >= 1, "sample_distorted_bounding_box: image size must be positive, got ",
               height, "x", width);
  GRADUS_CHECK(value_error, o.area_range[0] >= 0 && o.area_range[0] <= o.area_range[1] && o.area_range[1] > 0,
               "sample_distorted_bounding_box: area_range must satisfy 0 <= lo <= hi, 0 < hi, got [", o.area_range[0], ", ",
               o.area_range[1], "]");
  GRADUS_CHECK(value_error, o.aspect_ratio_range[0] > 0 && o.aspect_ratio_range[0] <= o.aspect_ratio_range[1],
               "sample_distorted_bounding_box: aspect_ratio_range must satisfy 0 < lo <= hi, got [",
               o.aspect_ratio_range[0], ", ", o.aspect_ratio_range[1], "]");
  GRADUS_CHECK(value_error, o.max_attempts >= 1, "sample_distorted_bounding_box: max_attempts must be >= 1, got ",
               o.max_attempts);
  const detail::PixelRect image_rect{0, 0, width, height};
  std::vector<detail::PixelRect> boxes;
  for (const Box& b : bounding_boxes) {
    for (float v : b)
      GRADUS_CHECK(value_error, v >= 0 && v <= 1, "sample_distorted_bounding_box: box coordinates must be in [0, 1], got [",
                   b[0], ", ", b[1], ", ", b[2], ", ", b[3], "]");
    GRADUS_CHECK(value_error, b[0] <= b[2] && b[1] <= b[3], "sample_distorted_bounding_box: box [", b[0], ", ", b[1],
                 ", ", b[2], ", ", b[3], "] has min > max");
    boxes.push_back({int64_t(b[1] * float(width)), int64_t(b[0] * float(height)), int64_t(b[3] * float(width)),
                     int64_t(b[2] * float(height))});
  }
  if (boxes.empty()) {
    GRADUS_CHECK(value_error, o.use_image_if_no_bounding_boxes, "sample_distorted_bounding_box: no bounding boxes given; "
                 "set use_image_if_no_bounding_boxes to sample from the whole image");
    boxes.push_back(image_rect);
  }
  detail::PixelRect crop = image_rect;
  for (int i = 0; i < o.max_attempts; ++i) {
    const float aspect = float(rng.uniform()) * (o.aspect_ratio_range[1] - o.aspect_ratio_range[0]) + o.aspect_ratio_range[0];
    detail::PixelRect c;
    if (detail::generate_random_crop(rng, width, height, o.area_range[0], o.area_range[1], aspect, &c) &&
        detail::covers_some_box(c, o.min_object_covered, boxes)) {
      crop = c;
      break;
    }
  }
  DistortedBox d;
  d.begin = {crop.y0, crop.x0, 0};
  d.size = {crop.y1 - crop.y0, crop.x1 - crop.x0, -1};
  d.bbox = {float(crop.y0) / float(height), float(crop.x0) / float(width), float(crop.y1) / float(height),
            float(crop.x1) / float(width)};
  return d;
}
}  // namespace gradus::image
#endif  // GRADUS_DEFINE_COMPILED
