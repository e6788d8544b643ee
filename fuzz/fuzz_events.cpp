// libFuzzer harness: TFRecord framing (both CRCs) and the Event decoder of TensorBoard event files.
#include <gradus/summary.hpp>

#include "fuzz_common.hpp"

GRADUS_FUZZ_TARGET(events) {
  const std::string_view in = gradus::fuzz::bytes(data, size);
  try {
    for (const std::string& record : gradus::io::decode_tfrecords(in, gradus::io::Compression::none, "fuzz.tfevents"))
      (void)gradus::summary::decode_event(record);
  } catch (const gradus::error&) {
  }
  // The decoder also on unframed bytes, so it is fuzzed without the CRCs in the way.
  try {
    (void)gradus::summary::decode_event(in);
  } catch (const gradus::error&) {
  }
  return 0;
}
