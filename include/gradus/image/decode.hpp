// gradus/image/decode.hpp — decode_image: a PNG or a JPEG, told apart by their first bytes
// (tf.io.decode_image for the formats gradus reads).
#pragma once
#include <string_view>

#include "gradus/image/jpeg.hpp"
#include "gradus/image/png.hpp"

namespace gradus::image {

/// Options of decode_image: channels (0 = as stored, 1 or 3; 4 for PNGs only) and the bits of
/// integer samples (8 or 16), as decode_png / decode_jpeg take them.
struct DecodeImageOptions {
  int channels = 0;
  int bits = 8;
};

/// The PNG or JPEG image in `bytes` as [H, W, C] (see decode_png and decode_jpeg); io_error
/// when the bytes are neither, or are corrupt.
///   gd::Tensor<float> img = gd::image::decode_image(gd::io::read_file("cat.jpg"));
template <Element T = float>
Tensor<T> decode_image(std::string_view bytes, const DecodeImageOptions& opts = {}) {
  if (bytes.substr(0, 8) == std::string_view("\x89PNG\r\n\x1a\n", 8))
    return decode_png<T>(bytes, {.channels = opts.channels, .bits = opts.bits});
  if (bytes.substr(0, 3) == std::string_view("\xFF\xD8\xFF", 3))
    return decode_jpeg<T>(bytes, {.channels = opts.channels, .bits = opts.bits});
  gradus::detail::throw_error<io_error>({"decode_image: neither a PNG nor a JPEG (", bytes.size(),
                                         " bytes; GIF and BMP are not supported)"});
}

}  // namespace gradus::image
