// gradus/image/jpeg.hpp — JPEG encoding and decoding in memory with libjpeg(-turbo)
// (tf.io.decode_jpeg / encode_jpeg).
//
// Decoding reads baseline and progressive 8-bit JPEGs into [H, W, C]: with `channels` 0 (the
// default) C is 1 for a grayscale file and 3 otherwise; 1 or 3 converts (libjpeg's colour
// conversion). CMYK / YCCK files become RGB as TF does (Adobe's inverted CMYK when the Adobe
// marker is present: R = C * K / 255). `ratio` 1, 2, 4 or 8 downscales while decoding (libjpeg's
// DCT scaling, as TF's `ratio`). decode_jpeg<float>/<double> returns intensities in [0, 1]
// (samples / 255); decode_jpeg<int64_t> returns samples 0..255 (or 0..65535 with `.bits = 16`,
// x * 257). The IDCT is libjpeg's accurate integer one unless `.fast_dct` (TF's default,
// "INTEGER_FAST", trades about one level of accuracy for speed).
//
// Encoding writes baseline (or progressive) JFIF from [H, W, 1] or [H, W, 3] images: real
// samples clamped to [0, 1] and rounded to 8 bits, or integer samples 0..255. Quality 95 and
// 4:2:0 chroma subsampling by default, as TF.
//
// Bad input: every libjpeg error is a gd::io_error with libjpeg's message, and so is every
// warning (premature end of data, corrupt entropy data, extraneous bytes) unless `.strict` is
// false, in which case only truncation (premature end of data; TF's try_recover_truncated=false)
// is, and libjpeg's recovery from the others is kept. Images of more than 2^28 samples, more than
// 500 progressive scans, or needing more than 1 GiB of decoder memory are io_errors too.
// libjpeg reports errors through error_exit, which here longjmps back to the one function that
// calls setjmp; that function holds no C++ object, so no destructor is ever skipped.
// Needs libjpeg: link gradus::io.
#pragma once
#include <algorithm>
#include <csetjmp>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <jpeglib.h>

#include "gradus/core/compiled.hpp"
#include "gradus/core/error.hpp"
#include "gradus/core/tensor.hpp"
#include "gradus/image/dtype.hpp"
#include "gradus/image/png.hpp"

namespace gradus::image {

/// Options of decode_jpeg: channels as TF (0 = as stored, 1 or 3); DCT downscaling `ratio`
/// (1, 2, 4, 8); libjpeg's fancy upsampling of chroma (TF's default, true); the fast integer
/// IDCT; bits of integer samples (8 or 16); whether any libjpeg warning is an error (see the
/// file comment).
struct JpegDecodeOptions {
  int channels = 0;
  int ratio = 1;
  bool fancy_upscaling = true;
  bool fast_dct = false;
  int bits = 8;
  bool strict = true;
};
/// Options of encode_jpeg: quality 0..100, progressive scans, optimised Huffman tables, 4:2:0
/// chroma subsampling (false: 4:4:4).
struct JpegEncodeOptions {
  int quality = 95;
  bool progressive = false;
  bool optimize_size = false;
  bool chroma_downsampling = true;
};

namespace detail {

/// Most progressive scans a decoder accepts (a file of many tiny scans is a denial of service).
inline constexpr int kMaxJpegScans = 500;

/// libjpeg's error manager with the jump target; plain data only (see the file comment).
struct JpegErr {
  jpeg_error_mgr pub;
  std::jmp_buf jump;
  bool strict;
  char message[JMSG_LENGTH_MAX + 64];
};
struct JpegIo {
  JpegErr err;
  jpeg_decompress_struct d;
  jpeg_compress_struct e;
  jpeg_progress_mgr progress;
  const uint8_t* in = nullptr;  // decoding: input, malloc'd samples and one row of CMYK
  size_t in_size = 0;
  uint8_t* pixels = nullptr;
  uint8_t* cmyk_row = nullptr;
  int64_t h = 0, w = 0, c = 0;
  unsigned char* out = nullptr;  // encoding: libjpeg's malloc'd output
  unsigned long out_size = 0;
};

void jpeg_on_error(j_common_ptr cinfo);
/// True for libjpeg's JWRN_JPEG_EOF, found by its text (jerror.h's macros stay out of user code).
bool jpeg_truncation_warning(const jpeg_error_mgr* err);
/// Warnings (level -1) mean corrupt or truncated data: errors when strict, else only truncation
/// is. Trace messages are dropped.
void jpeg_on_message(j_common_ptr cinfo, int level);
void jpeg_on_progress(j_common_ptr cinfo);

/// Fails the current libjpeg call with `what` (jumps to the setjmp of jpeg_decode_c / jpeg_encode_c).
[[noreturn]] void jpeg_fail(JpegIo* io, const char* what);

void jpeg_init_err(JpegIo* io, bool strict = true);

/// Decodes io->in into io->pixels (h x w x c bytes); false with io->err.message on error.
bool jpeg_decode_c(JpegIo* io, int channels, int ratio, bool fancy, bool fast_dct, bool strict);

/// Encodes h x w x c bytes (c 1 or 3) into io->out; false with io->err.message on error.
bool jpeg_encode_c(JpegIo* io, const uint8_t* pixels, int64_t h, int64_t w, int64_t c,
                   const JpegEncodeOptions* o);

/// Frees what jpeg_decode_c / jpeg_encode_c allocated.
struct JpegIoGuard {
  JpegIo& io;
  ~JpegIoGuard();
};

}  // namespace detail

/// JPEG bytes of `image_hwc` ([H, W, 1] or [H, W, 3], H and W in 1..65500): real samples clamped
/// to [0, 1] and rounded to 8 bits, or integer samples 0..255.
///   std::string jpg = gd::image::encode_jpeg(img, {.quality = 90});
template <Element T>
std::string encode_jpeg(const Tensor<T>& image_hwc, const JpegEncodeOptions& opts = {}) {
  const Shape& s = image_hwc.shape();
  GRADUS_CHECK(shape_error, s.rank() == 3 && (s[2] == 1 || s[2] == 3), "encode_jpeg: expected an image [H, W, C] "
               "with C 1 or 3, got shape ", s);
  GRADUS_CHECK(value_error, s[0] >= 1 && s[1] >= 1 && s[0] <= JPEG_MAX_DIMENSION && s[1] <= JPEG_MAX_DIMENSION,
               "encode_jpeg: image size ", s[0], "x", s[1], " is outside 1..", JPEG_MAX_DIMENSION, " (JPEG's limit)");
  GRADUS_CHECK(value_error, opts.quality >= 0 && opts.quality <= 100, "encode_jpeg: quality must be in 0..100, got ",
               opts.quality);
  const std::vector<uint8_t> px = detail::tensor_to_raw(image_hwc, 8, "encode_jpeg");
  auto io = std::make_unique<detail::JpegIo>();
  detail::JpegIoGuard guard{*io};
  GRADUS_CHECK(io_error, detail::jpeg_encode_c(io.get(), px.data(), s[0], s[1], s[2], &opts),
               "encode_jpeg: libjpeg failed on a ", s[0], "x", s[1], "x", s[2], " image: ", io->err.message);
  return std::string(reinterpret_cast<const char*>(io->out), size_t(io->out_size));
}

/// The image in JPEG `bytes` as [H, W, C] (see the file comment for channels and sample types).
/// io_error on corrupt, truncated or oversized data.
///   gd::Tensor<float> img = gd::image::decode_jpeg(bytes);               // [H, W, 3] in [0, 1]
///   gd::Tensor<int64_t> px = gd::image::decode_jpeg<int64_t>(bytes, {.channels = 1});
template <Element T = float>
Tensor<T> decode_jpeg(std::string_view bytes, const JpegDecodeOptions& opts = {}) {
  GRADUS_CHECK(value_error, opts.channels == 0 || opts.channels == 1 || opts.channels == 3,
               "decode_jpeg: channels must be 0, 1 or 3, got ", opts.channels);
  GRADUS_CHECK(value_error, opts.ratio == 1 || opts.ratio == 2 || opts.ratio == 4 || opts.ratio == 8,
               "decode_jpeg: ratio must be 1, 2, 4 or 8, got ", opts.ratio);
  if constexpr (std::is_integral_v<T>) detail::max_sample_of<T>(opts.bits, "decode_jpeg");
  GRADUS_CHECK(io_error, bytes.size() >= 4, "decode_jpeg: not a valid JPEG (", bytes.size(), " bytes)");
  auto io = std::make_unique<detail::JpegIo>();
  detail::JpegIoGuard guard{*io};
  io->in = reinterpret_cast<const uint8_t*>(bytes.data());
  io->in_size = bytes.size();
  GRADUS_CHECK(io_error, detail::jpeg_decode_c(io.get(), opts.channels, opts.ratio, opts.fancy_upscaling, opts.fast_dct,
                                               opts.strict),
               "decode_jpeg: not a valid JPEG (", bytes.size(), " bytes): ", io->err.message);
  detail::RawImage raw;
  raw.h = io->h, raw.w = io->w, raw.c = io->c, raw.bits = 8;
  raw.data.reset(std::exchange(io->pixels, nullptr));
  return detail::raw_to_tensor<T>(raw, opts.bits, "decode_jpeg");
}

}  // namespace gradus::image

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::image::detail {
GRADUS_INLINE void jpeg_on_error(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<JpegErr*>(cinfo->err);
  char buf[JMSG_LENGTH_MAX];
  (*cinfo->err->format_message)(cinfo, buf);
  std::snprintf(err->message, sizeof err->message, "%s", buf);
  std::longjmp(err->jump, 1);
}

GRADUS_INLINE bool jpeg_truncation_warning(const jpeg_error_mgr* err) {
  const int code = err->msg_code;
  return code >= 0 && code <= err->last_jpeg_message && err->jpeg_message_table &&
         std::strcmp(err->jpeg_message_table[code], "Premature end of JPEG file") == 0;
}

GRADUS_INLINE void jpeg_on_message(j_common_ptr cinfo, int level) {
  if (level >= 0) return;
  if (reinterpret_cast<JpegErr*>(cinfo->err)->strict || jpeg_truncation_warning(cinfo->err)) jpeg_on_error(cinfo);
}

GRADUS_INLINE void jpeg_on_progress(j_common_ptr cinfo) {
  if (!cinfo->is_decompressor) return;
  auto* d = reinterpret_cast<j_decompress_ptr>(cinfo);
  if (d->progressive_mode && d->input_scan_number > kMaxJpegScans) {
    auto* err = reinterpret_cast<JpegErr*>(cinfo->err);
    std::snprintf(err->message, sizeof err->message, "more than %d progressive scans", kMaxJpegScans);
    std::longjmp(err->jump, 1);
  }
}

GRADUS_INLINE void jpeg_fail(JpegIo* io, const char* what) {
  std::snprintf(io->err.message, sizeof io->err.message, "%s", what);
  std::longjmp(io->err.jump, 1);
}

GRADUS_INLINE void jpeg_init_err(JpegIo* io, bool strict) {
  jpeg_std_error(&io->err.pub);
  io->err.strict = strict;
  io->err.pub.error_exit = jpeg_on_error;
  io->err.pub.emit_message = jpeg_on_message;
  io->err.message[0] = 0;
}

GRADUS_INLINE bool jpeg_decode_c(JpegIo* io, int channels, int ratio, bool fancy, bool fast_dct, bool strict) {
  std::memset(&io->d, 0, sizeof io->d);
  jpeg_init_err(io, strict);
  io->d.err = &io->err.pub;
  if (setjmp(io->err.jump)) {
    jpeg_destroy_decompress(&io->d);
    return false;
  }
  jpeg_create_decompress(&io->d);
  j_decompress_ptr d = &io->d;
  d->mem->max_memory_to_use = 1l << 30;
  io->progress.progress_monitor = jpeg_on_progress;
  d->progress = &io->progress;
  jpeg_mem_src(d, io->in, static_cast<unsigned long>(io->in_size));
  jpeg_read_header(d, TRUE);
  const bool cmyk = d->jpeg_color_space == JCS_CMYK || d->jpeg_color_space == JCS_YCCK;
  const int c = channels ? channels : d->num_components == 1 ? 1 : 3;
  d->out_color_space = cmyk ? JCS_CMYK : c == 1 ? JCS_GRAYSCALE : JCS_RGB;
  d->scale_num = 1;
  d->scale_denom = unsigned(ratio);
  d->do_fancy_upsampling = fancy ? TRUE : FALSE;
  d->dct_method = fast_dct ? JDCT_IFAST : JDCT_ISLOW;
  jpeg_calc_output_dimensions(d);
  const int64_t h = d->output_height, w = d->output_width;
  if (h * w * std::max<int64_t>(c, d->num_components) > kMaxImageSamples) {
    std::snprintf(io->err.message, sizeof io->err.message, "a %lldx%lldx%d image is larger than 2^28 samples",
                  static_cast<long long>(h), static_cast<long long>(w), c);
    jpeg_destroy_decompress(d);
    return false;
  }
  io->h = h, io->w = w, io->c = c;
  io->pixels = static_cast<uint8_t*>(std::malloc(size_t(h * w * c) + 1));
  io->cmyk_row = static_cast<uint8_t*>(std::malloc(size_t(w) * 4 + 1));
  if (!io->pixels || !io->cmyk_row) jpeg_fail(io, "out of memory");
  jpeg_start_decompress(d);
  if (int(d->output_components) != (cmyk ? 4 : c) || int64_t(d->output_width) != w || int64_t(d->output_height) != h)
    jpeg_fail(io, "unsupported colour conversion");
  while (d->output_scanline < d->output_height) {
    uint8_t* row = io->pixels + size_t(d->output_scanline) * size_t(w * c);
    JSAMPROW target = cmyk ? io->cmyk_row : row;
    if (jpeg_read_scanlines(d, &target, 1) != 1) jpeg_fail(io, "libjpeg returned no scanline");
    if (cmyk) {
      for (int64_t x = 0; x < w; ++x) {
        const uint8_t* p = io->cmyk_row + 4 * x;
        int rgb[3];
        for (int k = 0; k < 3; ++k)
          rgb[k] = d->saw_Adobe_marker ? p[k] * p[3] / 255 : (255 - p[k]) * (255 - p[3]) / 255;
        if (c == 1)
          row[x] = uint8_t((rgb[0] * 19595 + rgb[1] * 38470 + rgb[2] * 7471 + 32768) >> 16);
        else
          for (int k = 0; k < 3; ++k) row[3 * x + k] = uint8_t(rgb[k]);
      }
    }
  }
  jpeg_finish_decompress(d);
  jpeg_destroy_decompress(d);
  return true;
}

GRADUS_INLINE bool jpeg_encode_c(JpegIo* io, const uint8_t* pixels, int64_t h, int64_t w, int64_t c,
                                 const JpegEncodeOptions* o) {
  std::memset(&io->e, 0, sizeof io->e);
  jpeg_init_err(io);
  io->e.err = &io->err.pub;
  if (setjmp(io->err.jump)) {
    jpeg_destroy_compress(&io->e);
    return false;
  }
  jpeg_create_compress(&io->e);
  j_compress_ptr e = &io->e;
  jpeg_mem_dest(e, &io->out, &io->out_size);
  e->image_width = JDIMENSION(w);
  e->image_height = JDIMENSION(h);
  e->input_components = int(c);
  e->in_color_space = c == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(e);
  jpeg_set_quality(e, o->quality, TRUE);
  e->optimize_coding = o->optimize_size ? TRUE : FALSE;
  if (c == 3 && !o->chroma_downsampling)
    for (int i = 0; i < 3; ++i) e->comp_info[i].h_samp_factor = e->comp_info[i].v_samp_factor = 1;
  if (o->progressive) jpeg_simple_progression(e);
  jpeg_start_compress(e, TRUE);
  while (e->next_scanline < e->image_height) {
    JSAMPROW row = const_cast<uint8_t*>(pixels) + size_t(e->next_scanline) * size_t(w * c);
    jpeg_write_scanlines(e, &row, 1);
  }
  jpeg_finish_compress(e);
  jpeg_destroy_compress(e);
  return true;
}

GRADUS_INLINE JpegIoGuard::~JpegIoGuard() {
  std::free(io.pixels);
  std::free(io.cmyk_row);
  std::free(io.out);
}
}  // namespace gradus::image::detail
#endif  // GRADUS_DEFINE_COMPILED
