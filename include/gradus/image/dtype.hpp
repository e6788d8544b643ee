// gradus/image/dtype.hpp — image tensors, their sample types and convert_image_dtype.
//
// An image is a Tensor [H, W, C] or a batch [N, H, W, C]. Its samples are either
//  - real (Tensor<float> or Tensor<double>): intensities in [0, 1], or
//  - integer: Tensor<uint8_t> (TF's uint8: 8-bit samples 0 .. 255, a quarter of float's memory)
//    or Tensor<int64_t> (standing in for TF's uint16 as well): 0 .. 2^bits - 1 with bits = 8 (the
//    default) or 16; a uint8_t image holds 8-bit samples only.
// convert_image_dtype moves between the two with TensorFlow's rules (tf.image.convert_image_dtype):
//  - integer -> real: x * (1 / (2^bits - 1)), the product computed in the target type;
//  - real -> integer: trunc(x * (2^bits - 1 + 0.5)) (the +0.5 rounds values that sit just below a
//    level up to it); with `saturate` the scaled value is first clamped to [0, 2^bits - 1]. Without
//    it a value outside [0, 1] gives a sample outside the range (TF's uint8 would wrap around);
//    NaN gives 0 in both cases;
//  - real -> real: a plain cast; integer -> integer with other bits: TF's shift, x * 2^(to - from)
//    upwards and x / 2^(from - to) (floor) downwards.
#pragma once
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#include "gradus/backend/plans.hpp"
#include "gradus/core/compiled.hpp"
#include "gradus/core/error.hpp"
#include "gradus/core/tensor.hpp"

namespace gradus::image {

/// Options of convert_image_dtype: the integer side's bit depth (8 or 16; `to_bits` for an
/// integer -> integer conversion) and TF's saturate flag (real -> integer only).
struct ConvertImageOptions {
  int bits = 8;
  bool saturate = false;
  int to_bits = 8;
};

namespace detail {

/// The largest sample of an integer image of `bits` bits (255 or 65535); value_error otherwise.
int64_t max_sample(int bits, const char* who);

/// max_sample for samples held in T (int64_t: 8 or 16 bits; uint8_t: 8 only).
template <class T>
int64_t max_sample_of(int bits, const char* who) {
  if constexpr (std::is_same_v<T, uint8_t>)
    GRADUS_CHECK(value_error, bits == 8, who, ": a Tensor<uint8_t> holds 8-bit samples; ", bits,
                 "-bit samples need a Tensor<int64_t>");
  return max_sample(bits, who);
}

/// The geometry of an image or batch: N (1 for a single image), H, W, C and whether it was
/// batched; the plan the image loops of backend/cpu/image.hpp take.
using ImageGeom = backend::ImagePlan;

/// Checks that `s` is [H, W, C] or [N, H, W, C] (`channels` 0 for any C >= 1, else C must be it).
ImageGeom geom(const Shape& s, const char* who, int64_t channels = 0);

/// Decoded samples straight from a codec: h x w x c samples of `bits` (8: one byte each; 16: one
/// native-endian uint16 each), row-major, in memory from malloc (freed with the object).
struct RawImage {
  int64_t h = 0, w = 0, c = 0;
  int bits = 8;
  std::unique_ptr<uint8_t, decltype(&std::free)> data{nullptr, &std::free};
  int64_t samples() const { return h * w * c; }
  uint32_t at(int64_t i) const {
    if (bits == 8) return data.get()[i];
    uint16_t v;
    std::memcpy(&v, data.get() + 2 * i, 2);
    return v;
  }
};

/// The samples of `raw` as a [H, W, C] tensor: T real -> in [0, 1] (divided by 2^raw.bits - 1 as
/// convert_image_dtype does); T = int64_t -> samples of `int_bits` bits (8-bit samples widen to 16
/// by x * 257, libpng's and TF's exact rescaling; 16 narrow to 8 by (x * 255 + 32895) >> 16).
template <Element T>
Tensor<T> raw_to_tensor(const RawImage& raw, int int_bits, const char* who) {
  Tensor<T> out({raw.h, raw.w, raw.c});
  T* y = out.data();
  const int64_t n = raw.samples();
  if constexpr (std::is_integral_v<T>) {
    max_sample_of<T>(int_bits, who);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t v = raw.at(i);
      y[i] = T(int_bits == raw.bits ? v : int_bits == 16 ? v * 257 : (v * 255 + 32895) >> 16);
    }
  } else {
    const T scale = T(1) / T(max_sample(raw.bits, who));
    if (raw.bits == 8) {  // the common case, as one vectorisable loop
      const uint8_t* x = raw.data.get();
      for (int64_t i = 0; i < n; ++i) y[i] = T(x[i]) * scale;
    } else {
      for (int64_t i = 0; i < n; ++i) y[i] = T(raw.at(i)) * scale;
    }
  }
  return out;
}

/// The samples of an image tensor for an encoder, `bits` per sample (8: bytes; 16: native uint16).
/// Real images are clamped to [0, 1] (NaN -> 0) and rounded to the nearest level; integer images
/// must hold samples in [0, 2^bits - 1] (value_error otherwise).
template <Element T>
std::vector<uint8_t> tensor_to_raw(const Tensor<T>& image, int bits, const char* who) {
  const int64_t top = max_sample(bits, who);
  const int64_t n = image.size();
  std::vector<uint8_t> out(size_t(n) * (bits / 8));
  const T* x = image.data();
  for (int64_t i = 0; i < n; ++i) {
    int64_t v;
    if constexpr (std::is_integral_v<T>) {
      GRADUS_CHECK(value_error, int64_t(x[i]) >= 0 && int64_t(x[i]) <= top, who, ": sample ", int64_t(x[i]),
                   " at index ", i, " is outside 0..", top, " (", bits, "-bit samples)");
      v = x[i];
    } else {
      v = !(x[i] > T(0)) ? 0 : x[i] >= T(1) ? top : int64_t(x[i] * T(top) + T(0.5));
    }
    if (bits == 8) {
      out[size_t(i)] = uint8_t(v);
    } else {
      const uint16_t s = uint16_t(v);
      std::memcpy(out.data() + 2 * i, &s, 2);
    }
  }
  return out;
}

}  // namespace detail

/// `image` with its samples converted between integer samples and [0, 1] intensities (see the
/// file comment for TF's rules).
///   gd::Tensor<float> f = gd::image::convert_image_dtype<float>(samples);         // 0..255 -> [0, 1]
///   gd::Tensor<int64_t> s = gd::image::convert_image_dtype<int64_t>(f, {.saturate = true});
template <Element To, Element From>
Tensor<To> convert_image_dtype(const Tensor<From>& image, const ConvertImageOptions& o = {}) {
  constexpr bool from_int = std::is_integral_v<From>, to_int = std::is_integral_v<To>;
  Tensor<To> out(image.shape());
  const From* x = image.data();
  To* y = out.data();
  const int64_t n = image.size();
  if constexpr (from_int && to_int) {
    detail::max_sample_of<From>(o.bits, "convert_image_dtype");
    detail::max_sample_of<To>(o.to_bits, "convert_image_dtype");
    for (int64_t i = 0; i < n; ++i) {
      const auto v = int64_t(x[i]);
      y[i] = To(o.to_bits >= o.bits ? v << (o.to_bits - o.bits) : v >> (o.bits - o.to_bits));
    }
  } else if constexpr (from_int) {
    const To scale = To(1) / To(detail::max_sample_of<From>(o.bits, "convert_image_dtype"));
    for (int64_t i = 0; i < n; ++i) y[i] = To(x[i]) * scale;
  } else if constexpr (to_int) {
    const int64_t top = detail::max_sample_of<To>(o.bits, "convert_image_dtype");
    const From scale = From(top) + From(0.5);
    for (int64_t i = 0; i < n; ++i) {
      From v = x[i] * scale;
      if (std::isnan(v)) v = 0;
      if (o.saturate) v = std::clamp(v, From(0), From(top));
      v = std::clamp(v, From(-9.0e18), From(9.0e18));  // keeps the cast defined
      y[i] = To(int64_t(v));  // a uint8_t keeps the low 8 bits (TF's uint8 wraps around too)
    }
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = To(x[i]);
  }
  return out;
}

}  // namespace gradus::image

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::image::detail {
GRADUS_INLINE int64_t max_sample(int bits, const char* who) {
  GRADUS_CHECK(value_error, bits == 8 || bits == 16, who, ": bits must be 8 or 16, got ", bits);
  return (int64_t(1) << bits) - 1;
}

GRADUS_INLINE ImageGeom geom(const Shape& s, const char* who, int64_t channels) {
  GRADUS_CHECK(shape_error, s.rank() == 3 || s.rank() == 4, who,
               ": expected an image [H, W, C] or a batch [N, H, W, C], got shape ", s);
  const bool b = s.rank() == 4;
  ImageGeom g{b ? s[0] : 1, s[b ? 1 : 0], s[b ? 2 : 1], s[b ? 3 : 2], b};
  if (channels)
    GRADUS_CHECK(shape_error, g.c == channels, who, ": expected ", channels, " channels (the last axis), got shape ", s);
  else
    GRADUS_CHECK(shape_error, g.c >= 1, who, ": expected at least one channel, got shape ", s);
  return g;
}
}  // namespace gradus::image::detail
#endif  // GRADUS_DEFINE_COMPILED
