// libFuzzer harness: decode_png on arbitrary bytes must return an image or throw gd::error.
#include <gradus/image.hpp>

#include "fuzz_common.hpp"

GRADUS_FUZZ_TARGET(png) {
  try {
    gradus::fuzz::exercise(gradus::image::decode_png(gradus::fuzz::bytes(data, size)));
  } catch (const gradus::error&) {
  }
  return 0;
}
