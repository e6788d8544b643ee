// gradus/summary/tfrecord.hpp — TFRecord framing, the container of TensorBoard event files.
//
// A TFRecord file is a sequence of records, each
//   uint64  length            (little-endian)
//   uint32  masked_crc32c(the 8 length bytes)
//   byte    data[length]
//   uint32  masked_crc32c(data)
// with the masked CRC of gradus/summary/crc32c.hpp, all little-endian. The reader checks both
// checksums and every length against the bytes left, so a truncated or corrupt file is
// rejected with an io_error naming it and the record, and nothing is read out of bounds.
#pragma once
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gradus/core/error.hpp"
#include "gradus/detail/endian.hpp"
#include "gradus/summary/crc32c.hpp"

namespace gradus::summary {

namespace detail {

using ::gradus::detail::load_le;
using ::gradus::detail::store_le;

/// The whole file at `path` (io_error naming it and `who` when it cannot be read).
inline std::string read_whole_file(const std::filesystem::path& path, const char* who) {
  struct Closer {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  errno = 0;
  std::unique_ptr<std::FILE, Closer> f(std::fopen(path.c_str(), "rb"));
  GRADUS_CHECK(io_error, f != nullptr, who, ": cannot open '", path.string(), "': ", std::strerror(errno));
  std::string out;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f.get())) > 0) out.append(buf, n);
  GRADUS_CHECK(io_error, !std::ferror(f.get()), who, ": error reading '", path.string(), "': ", std::strerror(errno));
  return out;
}

}  // namespace detail

/// One framed TFRecord: length, masked CRC of the length, `data`, masked CRC of `data`.
inline std::string frame_record(std::string_view data) {
  std::string out;
  out.reserve(data.size() + 16);
  detail::store_le<8>(out, data.size());
  detail::store_le<4>(out, masked_crc32c(std::string_view(out.data(), 8)));
  out.append(data);
  detail::store_le<4>(out, masked_crc32c(data));
  return out;
}

/// Splits TFRecord `bytes` into the records' data, verifying both CRCs of each; io_error on
/// a corrupt or truncated record, naming `source` and the record's index and offset.
inline std::vector<std::string> parse_records(std::string_view bytes, std::string_view source = "<memory>") {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < bytes.size()) {
    const size_t left = bytes.size() - pos;
    GRADUS_CHECK(io_error, left >= 12, "read_records: '", source, "': record ", out.size(), " at byte ", pos,
                 " is truncated (", left, " bytes, a header needs 12)");
    const std::string_view len_bytes = bytes.substr(pos, 8);
    const uint64_t len = detail::load_le<8>(bytes.data() + pos);
    GRADUS_CHECK(io_error, uint32_t(detail::load_le<4>(bytes.data() + pos + 8)) == masked_crc32c(len_bytes), "read_records: '",
                 source, "': record ", out.size(), " at byte ", pos, ": length checksum mismatch (corrupt file)");
    GRADUS_CHECK(io_error, len <= left - 12 && left - 12 - len >= 4, "read_records: '", source, "': record ",
                 out.size(), " at byte ", pos, " is truncated (length ", len, ", ", left - 12, " bytes left)");
    const std::string_view data = bytes.substr(pos + 12, size_t(len));
    GRADUS_CHECK(io_error, uint32_t(detail::load_le<4>(bytes.data() + pos + 12 + size_t(len))) == masked_crc32c(data),
                 "read_records: '", source, "': record ", out.size(), " at byte ", pos,
                 ": data checksum mismatch (corrupt file)");
    out.emplace_back(data);
    pos += 16 + size_t(len);
  }
  return out;
}

/// The records of the TFRecord file at `path` (see parse_records).
inline std::vector<std::string> read_records(const std::filesystem::path& path) {
  return parse_records(detail::read_whole_file(path, "read_records"), path.string());
}

}  // namespace gradus::summary
