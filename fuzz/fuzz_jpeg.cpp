// libFuzzer harness: decode_jpeg on arbitrary bytes must return an image or throw gd::error.
// The first byte picks the options (channels, DCT scaling ratio, fast IDCT, upsampling, strict),
// so every decoding path of libjpeg that gradus drives is reached, libjpeg's recovery from
// corrupt data included.
#include <gradus/image.hpp>

#include "fuzz_common.hpp"

GRADUS_FUZZ_TARGET(jpeg) {
  if (size == 0) return 0;
  const uint8_t pick = data[0];
  const gradus::image::JpegDecodeOptions opts{.channels = (pick & 3) == 1 ? 1 : (pick & 3) == 2 ? 3 : 0,
                                              .ratio = 1 << ((pick >> 2) & 3),
                                              .fancy_upscaling = !(pick & 16),
                                              .fast_dct = bool(pick & 32),
                                              .strict = !(pick & 64)};
  try {
    gradus::fuzz::exercise(gradus::image::decode_jpeg(gradus::fuzz::bytes(data + 1, size - 1), opts));
  } catch (const gradus::error&) {
  }
  return 0;
}
