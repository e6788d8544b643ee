// gradus/image/png.hpp — PNG encoding and decoding in memory (tf.io.decode_png / encode_png).
//
// Decoding reads 1-, 2-, 4-, 8- and 16-bit gray, gray+alpha, RGB, RGBA and palette PNGs
// (interlaced too) into [H, W, C]: with `channels` 0 (the default) gray -> C = 1, RGB and
// palette -> 3, anything with alpha (gray+alpha, RGBA, a tRNS chunk) -> 4 (gradus images have 1,
// 3 or 4 channels); `channels` 1, 3 or 4 converts (RGB -> gray with TF's weights 0.299, 0.587,
// 0.114; gray -> RGB by repetition; alpha dropped or added as opaque).
// - decode_png<float> / <double>: intensities in [0, 1], at the file's precision (a 16-bit file
//   is divided by 65535, an 8-bit one by 255);
// - decode_png<int64_t>: integer samples of `bits` bits (8 by default as TF's uint8; 16 as
//   TF's uint16), see dtype.hpp.
// Encoding writes 8-bit (default) or 16-bit gray, RGB or RGBA from real images (clamped to
// [0, 1], NaN -> 0, rounded to the nearest level) or integer samples (checked to be in range).
//
// Bad input: corrupt, truncated or hostile data (bad CRC of a critical chunk, truncated IDAT,
// images of more than 2^28 samples) -> gd::io_error with libpng's message. libpng reports
// errors by longjmp: the only function that calls setjmp holds no C++ object, and the callbacks
// libpng calls never throw, so no destructor is ever skipped. Needs libpng: link gradus::io.
#pragma once
#include <png.h>

#include <array>
#include <csetjmp>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gradus/core/compiled.hpp"
#include "gradus/core/error.hpp"
#include "gradus/core/tensor.hpp"
#include "gradus/image/dtype.hpp"

namespace gradus::image {

/// Options of decode_png: channels as TF (0 = as stored, else 1, 3 or 4); bits of integer samples.
struct PngDecodeOptions {
  int channels = 0;
  int bits = 8;
};
/// Options of encode_png: bits per sample (8 or 16) and zlib's level (-1 default, 0..9).
struct PngEncodeOptions {
  int bits = 8;
  int compression = -1;
};

namespace detail {

/// Most samples (H * W * C) a decoder accepts: 2^28 (1 GiB as floats).
inline constexpr int64_t kMaxImageSamples = int64_t(1) << 28;

/// State shared with libpng's callbacks; plain data only (see the file comment).
struct PngIo {
  const uint8_t* in = nullptr;  // reading: the bytes and the read position
  size_t in_size = 0, in_pos = 0;
  uint8_t* out = nullptr;  // writing: a malloc'd buffer
  size_t out_size = 0, out_cap = 0;
  uint8_t* pixels = nullptr;  // decoding: malloc'd samples and row pointers
  png_bytep* rows = nullptr;
  int64_t h = 0, w = 0, c = 0;
  int bits = 8;
  png_structp png = nullptr;  // kept here, not in locals of the setjmp frame (no clobbering)
  png_infop info = nullptr;
  char message[256] = {};
};

void png_on_error(png_structp png, png_const_charp msg);
inline void png_on_warning(png_structp, png_const_charp) {}
void png_on_read(png_structp png, png_bytep dst, size_t n);
void png_on_write(png_structp png, png_bytep src, size_t n);
inline void png_on_flush(png_structp) {}

/// Decodes io->in into io->pixels (see PngIo); false with io->message on any error. `channels`
/// 0, 1, 3 or 4; `want_bits` 0 (the file's: 8, or 16 for 16-bit files) or 8.
bool png_decode_c(PngIo* io, int channels, int want_bits);

/// Encodes h x w x c samples of `bits` bits (native-endian uint16 for 16) into io->out; false
/// with io->message on error.
bool png_encode_c(PngIo* io, const uint8_t* pixels, int64_t h, int64_t w, int64_t c, int bits, int level);

/// Frees what png_decode_c / png_encode_c allocated.
struct PngIoGuard {
  PngIo& io;
  ~PngIoGuard();
};

/// Checks an image tensor for PNG/JPEG encoding and returns its (height, width, channels).
std::array<int64_t, 3> image_dims(const Shape& s, const char* who);

}  // namespace detail

/// PNG bytes of `image_hwc` ([H, W, C], C in {1, 3, 4}, H and W in 1..1000000): real samples
/// clamped to [0, 1] and rounded, or integer samples in 0..2^bits - 1; 8- or 16-bit.
///   std::string png = gd::image::encode_png(img);                    // [H, W, 3] floats
///   std::string deep = gd::image::encode_png(img, {.bits = 16});
template <Element T>
std::string encode_png(const Tensor<T>& image_hwc, const PngEncodeOptions& opts = {}) {
  const auto [h, w, c] = detail::image_dims(image_hwc.shape(), "encode_png");
  GRADUS_CHECK(value_error, h >= 1 && w >= 1 && h <= 1000000 && w <= 1000000, "encode_png: image size ", h, "x", w,
               " is outside 1..1000000 (libpng's limit)");
  GRADUS_CHECK(value_error, opts.compression >= -1 && opts.compression <= 9,
               "encode_png: compression must be -1 (default) or 0..9, got ", opts.compression);
  const std::vector<uint8_t> px = detail::tensor_to_raw(image_hwc, opts.bits, "encode_png");
  detail::PngIo io;
  detail::PngIoGuard guard{io};
  GRADUS_CHECK(io_error, detail::png_encode_c(&io, px.data(), h, w, c, opts.bits, opts.compression),
               "encode_png: libpng failed on a ", h, "x", w, "x", c, " image: ", io.message);
  return std::string(reinterpret_cast<const char*>(io.out), io.out_size);
}

/// The image in PNG `bytes` as [H, W, C] (see the file comment for channels and sample types).
/// io_error on corrupt or truncated data or more than 2^28 samples.
///   gd::Tensor<float> img = gd::image::decode_png(bytes);                    // [0, 1]
///   gd::Tensor<int64_t> px = gd::image::decode_png<int64_t>(bytes, {.channels = 3, .bits = 16});
template <Element T = float>
Tensor<T> decode_png(std::string_view bytes, const PngDecodeOptions& opts = {}) {
  GRADUS_CHECK(value_error, opts.channels == 0 || opts.channels == 1 || opts.channels == 3 || opts.channels == 4,
               "decode_png: channels must be 0, 1, 3 or 4, got ", opts.channels);
  if constexpr (std::is_integral_v<T>) detail::max_sample_of<T>(opts.bits, "decode_png");
  detail::PngIo io;
  detail::PngIoGuard guard{io};
  io.in = reinterpret_cast<const uint8_t*>(bytes.data());
  io.in_size = bytes.size();
  const int want_bits = std::is_integral_v<T> && opts.bits == 8 ? 8 : 0;
  GRADUS_CHECK(io_error, detail::png_decode_c(&io, opts.channels, want_bits), "decode_png: not a valid PNG (",
               bytes.size(), " bytes): ", io.message);
  detail::RawImage raw;
  raw.h = io.h, raw.w = io.w, raw.c = io.c, raw.bits = io.bits;
  raw.data.reset(std::exchange(io.pixels, nullptr));
  return detail::raw_to_tensor<T>(raw, opts.bits, "decode_png");
}

}  // namespace gradus::image

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::image::detail {
GRADUS_INLINE void png_on_error(png_structp png, png_const_charp msg) {
  auto* io = static_cast<PngIo*>(png_get_error_ptr(png));
  std::snprintf(io->message, sizeof io->message, "%s", msg ? msg : "unknown libpng error");
  png_longjmp(png, 1);
}

GRADUS_INLINE void png_on_read(png_structp png, png_bytep dst, size_t n) {
  auto* io = static_cast<PngIo*>(png_get_io_ptr(png));
  if (n > io->in_size - io->in_pos) png_error(png, "unexpected end of data (truncated PNG)");
  std::memcpy(dst, io->in + io->in_pos, n);
  io->in_pos += n;
}

GRADUS_INLINE void png_on_write(png_structp png, png_bytep src, size_t n) {
  auto* io = static_cast<PngIo*>(png_get_io_ptr(png));
  if (n > io->out_cap - io->out_size) {
    size_t cap = io->out_cap ? io->out_cap : 4096;
    while (cap - io->out_size < n) cap *= 2;
    auto* grown = static_cast<uint8_t*>(std::realloc(io->out, cap));
    if (!grown) png_error(png, "out of memory");
    io->out = grown, io->out_cap = cap;
  }
  std::memcpy(io->out + io->out_size, src, n);
  io->out_size += n;
}

GRADUS_INLINE bool png_decode_c(PngIo* io, int channels, int want_bits) {
  io->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, io, png_on_error, png_on_warning);
  if (io->png) io->info = png_create_info_struct(io->png);
  if (!io->png || !io->info) {
    png_destroy_read_struct(&io->png, &io->info, nullptr);
    std::snprintf(io->message, sizeof io->message, "out of memory");
    return false;
  }
  if (setjmp(png_jmpbuf(io->png))) {
    png_destroy_read_struct(&io->png, &io->info, nullptr);
    return false;
  }
  png_structp png = io->png;
  png_infop info = io->info;
  png_set_read_fn(png, io, png_on_read);
  png_set_user_limits(png, 1000000, 1000000);
  png_set_chunk_malloc_max(png, 64u << 20);
  png_read_info(png, info);
  const png_uint_32 width = png_get_image_width(png, info), height = png_get_image_height(png, info);
  const int depth = png_get_bit_depth(png, info), type = png_get_color_type(png, info);
  const bool color = type & PNG_COLOR_MASK_COLOR;
  const bool alpha = (type & PNG_COLOR_MASK_ALPHA) || png_get_valid(png, info, PNG_INFO_tRNS);
  const int c = channels ? channels : alpha ? 4 : color ? 3 : 1;
  const int bits = depth == 16 && want_bits != 8 ? 16 : 8;
  if (int64_t(width) * int64_t(height) * c > kMaxImageSamples) {
    std::snprintf(io->message, sizeof io->message, "a %ux%ux%d image is larger than 2^28 samples", unsigned(height),
                  unsigned(width), c);
    png_destroy_read_struct(&io->png, &io->info, nullptr);
    return false;
  }
  png_set_expand(png);  // palette -> RGB, gray < 8 bits -> 8, tRNS -> alpha
  if (depth == 16 && bits == 8) png_set_scale_16(png);
  if (bits == 16) png_set_swap(png);  // PNG is big-endian; samples are read as native uint16
  if ((c == 1 || c == 2) && color) png_set_rgb_to_gray_fixed(png, 1, 29900, 58700);
  if ((c == 3 || c == 4) && !color) png_set_gray_to_rgb(png);
  if ((c == 1 || c == 3) && alpha) png_set_strip_alpha(png);
  if ((c == 2 || c == 4) && !alpha) png_set_add_alpha(png, 0xffff, PNG_FILLER_AFTER);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  const size_t row_bytes = size_t(width) * size_t(c) * size_t(bits / 8);
  if (png_get_channels(png, info) != c || png_get_rowbytes(png, info) != row_bytes)
    png_error(png, "unsupported PNG layout");
  io->h = height, io->w = width, io->c = c, io->bits = bits;
  io->pixels = static_cast<uint8_t*>(std::malloc(row_bytes * height + 1));
  io->rows = static_cast<png_bytep*>(std::malloc(sizeof(png_bytep) * (size_t(height) + 1)));
  if (!io->pixels || !io->rows) png_error(png, "out of memory");
  for (png_uint_32 r = 0; r < height; ++r) io->rows[r] = io->pixels + size_t(r) * row_bytes;
  png_read_image(png, io->rows);
  png_read_end(png, nullptr);
  png_destroy_read_struct(&io->png, &io->info, nullptr);
  return true;
}

GRADUS_INLINE bool png_encode_c(PngIo* io, const uint8_t* pixels, int64_t h, int64_t w, int64_t c, int bits,
                                int level) {
  io->png = png_create_write_struct(PNG_LIBPNG_VER_STRING, io, png_on_error, png_on_warning);
  if (io->png) io->info = png_create_info_struct(io->png);
  if (!io->png || !io->info) {
    png_destroy_write_struct(&io->png, &io->info);
    std::snprintf(io->message, sizeof io->message, "out of memory");
    return false;
  }
  if (setjmp(png_jmpbuf(io->png))) {
    png_destroy_write_struct(&io->png, &io->info);
    return false;
  }
  png_structp png = io->png;
  png_infop info = io->info;
  png_set_write_fn(png, io, png_on_write, png_on_flush);
  if (level >= 0) png_set_compression_level(png, level);
  const int type = c == 1 ? PNG_COLOR_TYPE_GRAY : c == 2 ? PNG_COLOR_TYPE_GRAY_ALPHA : c == 3 ? PNG_COLOR_TYPE_RGB
                                                                                          : PNG_COLOR_TYPE_RGBA;
  png_set_IHDR(png, info, png_uint_32(w), png_uint_32(h), bits, type, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  if (bits == 16) png_set_swap(png);
  const size_t row_bytes = size_t(w) * size_t(c) * size_t(bits / 8);
  for (int64_t r = 0; r < h; ++r) png_write_row(png, pixels + size_t(r) * row_bytes);
  png_write_end(png, nullptr);
  png_destroy_write_struct(&io->png, &io->info);
  return true;
}

GRADUS_INLINE PngIoGuard::~PngIoGuard() {
  std::free(io.out);
  std::free(io.pixels);
  std::free(io.rows);
}

GRADUS_INLINE std::array<int64_t, 3> image_dims(const Shape& s, const char* who) {
  GRADUS_CHECK(shape_error, s.rank() == 3 && (s[2] == 1 || s[2] == 3 || s[2] == 4), who,
               ": expected an image [H, W, C] with C in {1, 3, 4}, got shape ", s);
  return {s[0], s[1], s[2]};
}
}  // namespace gradus::image::detail
#endif  // GRADUS_DEFINE_COMPILED
