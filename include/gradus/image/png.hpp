// gradus/image/png.hpp — PNG encoding and decoding in memory (libpng's simplified API).
//
// Images are Tensor<float> [H, W, C] with C = 1 (gray), 3 (RGB) or 4 (RGBA) and values in
// [0, 1]. Encoding clamps to [0, 1] (NaN becomes 0) and rounds to 8 bits; decoding returns
// the 8-bit samples divided by 255. libpng's own errors are caught inside libpng (the
// simplified API handles its setjmp/longjmp), so corrupt input surfaces as an io_error with
// libpng's message and no C++ object is ever skipped by a longjmp. Needs libpng: link gradus::io.
#pragma once
#include <png.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "gradus/core/error.hpp"
#include "gradus/core/tensor.hpp"

namespace gradus::image {

namespace detail {

/// A float sample in [0, 1] as 0..255: clamped, rounded, NaN -> 0.
inline uint8_t to_u8(float x) {
  if (!(x > 0.f)) return 0;
  if (x >= 1.f) return 255;
  return uint8_t(x * 255.f + 0.5f);
}

inline uint32_t png_format(int64_t channels) {
  return channels == 1 ? PNG_FORMAT_GRAY : channels == 3 ? PNG_FORMAT_RGB : PNG_FORMAT_RGBA;
}

/// PNG bytes of `h` x `w` x `c` 8-bit samples, row-major.
inline std::string encode_png_u8(const uint8_t* pixels, int64_t h, int64_t w, int64_t c) {
  png_image im;
  std::memset(&im, 0, sizeof im);
  im.version = PNG_IMAGE_VERSION;
  im.width = png_uint_32(w);
  im.height = png_uint_32(h);
  im.format = png_format(c);
  std::string out(size_t(PNG_IMAGE_PNG_SIZE_MAX(im)), '\0');
  for (int attempt = 0; attempt < 2; ++attempt) {
    png_alloc_size_t n = out.size();
    if (png_image_write_to_memory(&im, out.data(), &n, 0, pixels, 0, nullptr)) {
      out.resize(size_t(n));
      return out;
    }
    GRADUS_CHECK(io_error, n > out.size(), "encode_png: libpng failed on a ", h, "x", w, "x", c, " image: ",
                 im.message);
    out.resize(size_t(n));  // the bound was too small: libpng told us the size it needs
  }
  throw io_error("encode_png: libpng could not size its output buffer");
}

/// Checks an image tensor's shape and returns its (height, width, channels).
inline std::array<int64_t, 3> image_dims(const Shape& s, const char* who) {
  GRADUS_CHECK(shape_error, s.rank() == 3 && (s[2] == 1 || s[2] == 3 || s[2] == 4), who,
               ": expected an image [H, W, C] with C in {1, 3, 4}, got shape ", s);
  return {s[0], s[1], s[2]};
}

}  // namespace detail

/// PNG bytes of `image_hwc` ([H, W, C], C in {1, 3, 4}, H and W >= 1); values are clamped
/// to [0, 1] and rounded to 8 bits. shape_error on another shape.
inline std::string encode_png(const Tensor<float>& image_hwc) {
  const auto [h, w, c] = detail::image_dims(image_hwc.shape(), "encode_png");
  GRADUS_CHECK(value_error, h >= 1 && w >= 1 && h <= 1000000 && w <= 1000000, "encode_png: image size ", h, "x", w,
               " is outside 1..1000000 (libpng's limit)");
  std::vector<uint8_t> px(size_t(image_hwc.size()));
  const float* src = image_hwc.data();
  for (size_t i = 0; i < px.size(); ++i) px[i] = detail::to_u8(src[i]);
  return detail::encode_png_u8(px.data(), h, w, c);
}

/// The image in PNG `bytes` as [H, W, C] floats in [0, 1]: gray -> C = 1, RGB -> 3,
/// gray+alpha and RGBA -> 4 (palette images by their palette's colours). io_error on
/// corrupt or truncated data, or more than 2^28 samples.
inline Tensor<float> decode_png(std::string_view bytes) {
  png_image im;
  std::memset(&im, 0, sizeof im);
  im.version = PNG_IMAGE_VERSION;
  GRADUS_CHECK(io_error, png_image_begin_read_from_memory(&im, bytes.data(), bytes.size()),
               "decode_png: not a valid PNG (", bytes.size(), " bytes): ", im.message);
  const bool color = im.format & PNG_FORMAT_FLAG_COLOR, alpha = im.format & PNG_FORMAT_FLAG_ALPHA;
  const int64_t c = alpha ? 4 : color ? 3 : 1;
  const int64_t h = im.height, w = im.width;
  if (h * w * c > (int64_t(1) << 28)) {
    png_image_free(&im);
    throw io_error(gradus::detail::str("decode_png: a ", h, "x", w, "x", c, " image is larger than 2^28 samples"));
  }
  im.format = detail::png_format(c);
  std::vector<uint8_t> px(size_t(PNG_IMAGE_SIZE(im)));
  GRADUS_CHECK(io_error, png_image_finish_read(&im, nullptr, px.data(), 0, nullptr),
               "decode_png: corrupt PNG data (", h, "x", w, "x", c, "): ", im.message);
  Tensor<float> out({h, w, c});
  float* dst = out.data();
  for (size_t i = 0; i < px.size(); ++i) dst[i] = float(px[i]) * (1.f / 255.f);
  return out;
}

}  // namespace gradus::image
