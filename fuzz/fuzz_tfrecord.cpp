// libFuzzer harness: TFRecord files read by gd::io::TFRecordReader, plain, GZIP and ZLIB (the
// first byte of the input picks the compression), and each record it accepts decoded as an Example.
#include <gradus/io.hpp>

#include "fuzz_common.hpp"

GRADUS_FUZZ_TARGET(tfrecord) {
  if (size == 0) return 0;
  const auto compression = gradus::io::Compression(data[0] % 3);
  const std::string_view in = gradus::fuzz::bytes(data + 1, size - 1);
  try {
    auto reader = gradus::io::TFRecordReader::from_bytes(in, compression, "fuzz.tfrecord");
    for (const std::string& record : reader) {
      try {
        (void)gradus::io::decode_example(record);
      } catch (const gradus::io_error&) {
      }
    }
  } catch (const gradus::io_error&) {
  }
  return 0;
}
