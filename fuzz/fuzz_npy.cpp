// libFuzzer harness: decode_npy on arbitrary bytes must return a tensor or throw gd::error.
#include "fuzz_common.hpp"

GRADUS_FUZZ_TARGET(npy) {
  try {
    gradus::fuzz::exercise(gradus::io::decode_npy(gradus::fuzz::bytes(data, size), "fuzz.npy"));
  } catch (const gradus::error&) {
  }
  return 0;
}
