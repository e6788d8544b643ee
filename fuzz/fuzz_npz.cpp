// libFuzzer harness: decode_npz on arbitrary bytes must return arrays or throw gd::error.
#include "fuzz_common.hpp"

GRADUS_FUZZ_TARGET(npz) {
  try {
    for (const auto& [name, t] : gradus::io::decode_npz(gradus::fuzz::bytes(data, size), "fuzz.npz"))
      gradus::fuzz::exercise(t);
  } catch (const gradus::error&) {
  }
  return 0;
}
