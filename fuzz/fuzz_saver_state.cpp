// libFuzzer harness: the Saver's state file ("checkpoint") parser on arbitrary text.
#include "fuzz_common.hpp"

GRADUS_FUZZ_TARGET(saver_state) {
  try {
    const gradus::io::CheckpointState s = gradus::io::decode_checkpoint_state(gradus::fuzz::bytes(data, size), "checkpoint");
    // What the parser accepts, the encoder writes back and the parser reads the same.
    const gradus::io::CheckpointState again = gradus::io::decode_checkpoint_state(gradus::io::encode_checkpoint_state(s));
    if (again.latest != s.latest || again.kept != s.kept) __builtin_trap();
  } catch (const gradus::error&) {
  }
  return 0;
}
