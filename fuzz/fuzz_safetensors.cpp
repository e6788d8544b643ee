// libFuzzer harness: decode_safetensors on arbitrary bytes must return tensors or throw gd::error.
#include "fuzz_common.hpp"

GRADUS_FUZZ_TARGET(safetensors) {
  try {
    const gradus::io::Safetensors st = gradus::io::decode_safetensors(gradus::fuzz::bytes(data, size), "fuzz.safetensors");
    for (const auto& [name, t] : st.tensors) gradus::fuzz::exercise(t);
    (void)gradus::io::checkpoint_step(st);
  } catch (const gradus::error&) {
  }
  return 0;
}
