// gradus/summary/tfrecord.hpp — gd::summary's names for the TFRecord framing of event files,
// which gd::io implements (gradus/io/tfrecord.hpp: the format, its checks, compressed files).
#pragma once
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "gradus/io/tfrecord.hpp"
#include "gradus/summary/crc32c.hpp"

namespace gradus::summary {

/// One framed TFRecord: length, masked CRC of the length, `data`, masked CRC of `data`.
inline std::string frame_record(std::string_view data) { return io::encode_tfrecord(data); }

/// Splits TFRecord `bytes` into the records' data, verifying both CRCs of each; io_error on
/// a corrupt or truncated record, naming `source` and the record's index and offset.
inline std::vector<std::string> parse_records(std::string_view bytes, std::string_view source = "<memory>") {
  return io::decode_tfrecords(bytes, io::Compression::none, source);
}

/// The records of the TFRecord file at `path` (see parse_records), read in chunks.
inline std::vector<std::string> read_records(const std::filesystem::path& path) { return io::read_tfrecords(path); }

}  // namespace gradus::summary
