// libFuzzer harness: decode_npy on arbitrary bytes must return a tensor or throw gd::error.
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    gradus::fuzz::exercise(gradus::io::decode_npy(gradus::fuzz::bytes(data, size), "fuzz.npy"));
  } catch (const gradus::error&) {
  }
  return 0;
}
