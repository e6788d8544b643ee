// gradus/io/npy.hpp — NumPy's .npy and .npz files.
//
// .npy (https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html):
//   "\x93NUMPY", major and minor version bytes, the header length (u16 LE in version 1.0, u32 LE
//   in 2.0 and 3.0), then an ASCII Python dict literal
//     {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
//   padded with spaces and ended by '\n', then the C-order little-endian elements. gradus writes
//   version 1.0 byte for byte as numpy 1.24's np.save does (the header padded so the data starts at
//   a multiple of 64, with numpy's spare room for growing the first axis) and reads versions 1.0,
//   2.0 and 3.0 with dtypes '<f4', '<f8', '<i8' in C order.
// .npz: a zip archive with one member "<name>.npy" per array (np.savez). gradus writes STORED
//   members with their CRC-32 (zlib); it reads STORED and DEFLATE members (np.savez_compressed),
//   checking every header, size, offset and CRC, with ZIP64 size fields (which np.savez forces).
//   Archives gradus writes are limited to 4 GiB and 65535 members (no ZIP64 on writing).
// Every malformed file raises io_error naming the file and the problem; nothing is allocated
// beyond what the file holds (a deflated member may claim at most deflate's maximum ratio, and
// members may not overlap — each local header and its data own their bytes, as Python's zipfile
// requires since CVE-2024-0450 — so a whole archive inflates to at most that ratio of its size).
#pragma once
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "gradus/core/compiled.hpp"
#include "gradus/io/file.hpp"
#include "gradus/io/tensor_list.hpp"

namespace gradus::io {

namespace detail {

std::string_view npy_descr(const AnyTensor& t);

/// Parses the Python dict literal of an .npy header: exactly the keys 'descr' (a string),
/// 'fortran_order' (a bool) and 'shape' (a tuple of non-negative ints).
class NpyHeaderParser {
 public:
  NpyHeaderParser(std::string_view text, std::string_view source) : s_(text), source_(source) {}

  std::string descr;
  bool fortran_order = false;
  std::vector<uint64_t> shape;

  void parse();

  template <class... Parts>
  [[noreturn]] void fail(const Parts&... parts) const {
    ::gradus::detail::throw_error<io_error>({"npy: '", source_, "': ", parts...});
  }

 private:
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void skip_ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  void expect(char c, const char* message) {
    if (peek() != c) fail(message);
    ++i_;
  }
  bool take(std::string_view word) {
    if (s_.substr(i_, word.size()) != word) return false;
    i_ += word.size();
    return true;
  }
  std::string quoted();
  void tuple();

  std::string_view s_;
  std::string_view source_;
  size_t i_ = 0;
};

/// zlib's CRC-32 of `data`.
inline uint32_t crc32_of(std::string_view data) {
  return uint32_t(::crc32_z(::crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(data.data()), data.size()));
}

}  // namespace detail

/// The .npy (version 1.0) bytes of `t`, identical to what numpy 1.24's np.save writes.
std::string encode_npy(const AnyTensor& t);

/// Parses .npy bytes (see the file comment); `source` names them in errors.
AnyTensor decode_npy(std::string_view bytes, std::string_view source = "<memory>");

/// Writes `t` to `path` as .npy (atomically).
inline void save_npy(const std::filesystem::path& path, const AnyTensor& t) {
  write_file_atomic(path, encode_npy(t));
}
/// Reads the .npy file at `path`; io_error naming it when malformed.
inline AnyTensor load_npy(const std::filesystem::path& path) { return decode_npy(read_file(path), path.string()); }

/// The .npz bytes of `tensors`: a zip archive of STORED members "<name>.npy", in the order given.
/// value_error for an empty or duplicate name, or an archive past zip's 4 GiB / 65535 limits.
std::string encode_npz(const TensorList& tensors);

namespace detail {

/// The steps of reading an .npz archive: find the central directory, read each entry of it,
/// check the member's local header and take its bytes, inflate them when deflated. Every step
/// checks its offsets and sizes against the archive and throws io_error naming `source`.
class NpzReader {
 public:
  NpzReader(std::string_view bytes, std::string_view source) : bytes_(bytes), source_(source) {}

  /// Where the central directory lies and how many entries it has.
  struct Directory {
    uint64_t count = 0, offset = 0, size = 0;
  };
  /// One central directory entry.
  struct Entry {
    std::string name;
    uint64_t flags = 0, method = 0, crc = 0, csize = 0, usize = 0, local = 0;
  };

  template <class... Parts>
  [[noreturn]] void fail(const Parts&... parts) const {
    ::gradus::detail::throw_error<io_error>({"npz: '", source_, "': ", parts...});
  }

  /// The end-of-central-directory record (the last signature whose comment runs exactly to the
  /// end), followed to the ZIP64 record when a field is saturated.
  Directory directory() const;

  /// Entry `k` at `*p` (advanced past it), its ZIP64 extra field applied.
  Entry entry(uint64_t* p, uint64_t end, uint64_t k) const;

  /// The member's stored (possibly deflated) bytes, after checking what it is and its local header.
  std::string_view packed(const Entry& e, uint64_t cd_offset) const;

  /// The inflated bytes of a DEFLATE member: exactly its claimed size, or io_error.
  std::string inflate_member(const Entry& e, std::string_view packed) const;

 private:
  uint64_t u16(uint64_t at) const { return load_le<2>(bytes_.data() + at); }
  uint64_t u32(uint64_t at) const { return load_le<4>(bytes_.data() + at); }
  uint64_t u64(uint64_t at) const { return load_le<8>(bytes_.data() + at); }

  std::string_view bytes_, source_;
};

}  // namespace detail

/// Parses .npz bytes (see the file comment): the arrays in archive order, named without ".npy";
/// `source` names the archive in errors.
TensorList decode_npz(std::string_view bytes, std::string_view source = "<memory>");

/// Writes `tensors` to `path` as an .npz archive (atomically); np.load reads it.
inline void save_npz(const std::filesystem::path& path, const TensorList& tensors) {
  write_file_atomic(path, encode_npz(tensors));
}
/// Reads the .npz archive at `path` (np.savez or np.savez_compressed); io_error naming it when malformed.
inline TensorList load_npz(const std::filesystem::path& path) { return decode_npz(read_file(path), path.string()); }

}  // namespace gradus::io

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::io::detail {
GRADUS_INLINE std::string_view npy_descr(const AnyTensor& t) {
  switch (t.index()) {
    case 0: return "<f4";
    case 1: return "<f8";
    default: return "<i8";
  }
}

GRADUS_INLINE void NpyHeaderParser::parse() {
  skip_ws();
  expect('{', "the header must be a Python dict starting with '{'");
  unsigned seen = 0;
  for (;;) {
    skip_ws();
    if (peek() == '}') break;
    const std::string key = quoted();
    skip_ws();
    expect(':', "expected ':' after a key");
    skip_ws();
    unsigned bit;
    if (key == "descr") {
      bit = 1;
      if (peek() != '\'' && peek() != '"') fail("'descr' must be a string such as '<f4' (structured dtypes are not read)");
      descr = quoted();
    } else if (key == "fortran_order") {
      bit = 2;
      if (take("True")) fortran_order = true;
      else if (take("False")) fortran_order = false;
      else fail("'fortran_order' must be True or False");
    } else if (key == "shape") {
      bit = 4;
      tuple();
    } else {
      fail("unexpected key '", key, "' (an .npy header has 'descr', 'fortran_order' and 'shape')");
    }
    if (seen & bit) fail("key '", key, "' appears twice");
    seen |= bit;
    skip_ws();
    if (peek() == ',') {
      ++i_;
      continue;
    }
    skip_ws();
    if (peek() != '}') fail("expected ',' or '}' after the value of '", key, "'");
  }
  ++i_;
  skip_ws();
  if (i_ != s_.size()) fail("unexpected text after the header dict");
  if (seen != 7) fail("the header lacks ", !(seen & 1) ? "'descr'" : !(seen & 2) ? "'fortran_order'" : "'shape'");
}

GRADUS_INLINE std::string NpyHeaderParser::quoted() {
  const char q = peek();
  if (q != '\'' && q != '"') fail("expected a quoted key or '}'");
  const size_t end = s_.find(q, i_ + 1);
  if (end == std::string_view::npos) fail("a string is not closed");
  std::string out(s_.substr(i_ + 1, end - i_ - 1));
  if (out.find('\\') != std::string::npos) fail("escapes in header strings are not supported");
  i_ = end + 1;
  return out;
}

GRADUS_INLINE void NpyHeaderParser::tuple() {
  expect('(', "'shape' must be a tuple of non-negative integers");
  bool comma_after_last = false;
  for (;;) {
    skip_ws();
    if (peek() == ')') break;
    if (peek() < '0' || peek() > '9') fail("'shape' must be a tuple of non-negative integers");
    uint64_t v = 0;
    while (peek() >= '0' && peek() <= '9') {
      const unsigned d = unsigned(peek() - '0');
      if (v > (uint64_t(INT64_MAX) - d) / 10) fail("a dimension of 'shape' is too large");
      v = v * 10 + d;
      ++i_;
    }
    if (peek() == 'L') ++i_;  // Python 2's long suffix
    if (shape.size() == size_t(kMaxRank)) fail("'shape' has more than ", kMaxRank, " dimensions (gradus's maximum)");
    shape.push_back(v);
    skip_ws();
    comma_after_last = peek() == ',';
    if (comma_after_last) {
      ++i_;
      continue;
    }
    if (peek() != ')') fail("'shape' must be a tuple of non-negative integers");
  }
  ++i_;
  if (shape.size() == 1 && !comma_after_last) fail("'shape' must be a tuple: '(n)' needs a comma, '(n,)'");
}

GRADUS_INLINE NpzReader::Directory NpzReader::directory() const {
  const uint64_t size = bytes_.size();
  if (size < 22) fail("too short for a zip archive (", size, " bytes)");
  uint64_t eocd = UINT64_MAX;
  for (uint64_t p = size - 22 + 1; p-- > 0 && size - p <= 22 + 0xFFFF;)
    if (u32(p) == 0x06054b50 && p + 22 + u16(p + 20) == size) {
      eocd = p;
      break;
    }
  if (eocd == UINT64_MAX) fail("not a zip archive (no end-of-central-directory record)");
  if (u16(eocd + 4) != 0 || u16(eocd + 6) != 0) fail("multi-disk zip archives are not supported");
  Directory d{u16(eocd + 10), u32(eocd + 16), u32(eocd + 12)};
  if (u16(eocd + 8) != d.count) fail("inconsistent member counts in the end-of-central-directory record");
  uint64_t limit = eocd;  // the central directory ends before this
  if (d.count == 0xFFFF || d.size == 0xFFFFFFFF || d.offset == 0xFFFFFFFF) {
    // ZIP64: a locator right before the record points at the ZIP64 end-of-central-directory record.
    if (eocd < 20 || u32(eocd - 20) != 0x07064b50) fail("ZIP64 values without a ZIP64 locator");
    const uint64_t z = u64(eocd - 20 + 8);
    if (z > eocd - 20 || eocd - 20 - z < 56 || u32(z) != 0x06064b50) fail("bad ZIP64 end-of-central-directory record");
    d = {u64(z + 32), u64(z + 48), u64(z + 40)};
    limit = z;
  }
  if (d.offset > limit || d.size > limit - d.offset)
    fail("the central directory [", d.offset, ", +", d.size, ") lies outside the archive");
  if (d.count > d.size / 46) fail("the central directory is too small for ", d.count, " members");
  return d;
}

GRADUS_INLINE NpzReader::Entry NpzReader::entry(uint64_t* p, uint64_t end, uint64_t k) const {
  const uint64_t at = *p;
  if (end - at < 46 || u32(at) != 0x02014b50) fail("central directory entry ", k, " is corrupt");
  Entry e;
  e.flags = u16(at + 8), e.method = u16(at + 10), e.crc = u32(at + 16);
  e.csize = u32(at + 20), e.usize = u32(at + 24), e.local = u32(at + 42);
  const uint64_t nlen = u16(at + 28), elen = u16(at + 30), clen = u16(at + 32);
  if (end - at - 46 < nlen + elen + clen) fail("central directory entry ", k, " runs past the directory");
  e.name = std::string(bytes_.substr(size_t(at + 46), size_t(nlen)));
  // ZIP64 extended information: the 8-byte values of the fields set to 0xFFFFFFFF, in order.
  for (uint64_t x = at + 46 + nlen, x_end = x + elen; x_end - x >= 4;) {
    const uint64_t id = u16(x), len = u16(x + 2);
    if (x_end - x - 4 < len) fail("member '", e.name, "': corrupt extra field");
    if (id == 1) {
      uint64_t q = x + 4;
      for (uint64_t* field : {&e.usize, &e.csize, &e.local})
        if (*field == 0xFFFFFFFF) {
          if (x + 4 + len - q < 8) fail("member '", e.name, "': truncated ZIP64 extra field");
          *field = u64(q);
          q += 8;
        }
    }
    x += 4 + len;
  }
  *p = at + 46 + nlen + elen + clen;
  return e;
}

GRADUS_INLINE std::string_view NpzReader::packed(const Entry& e, uint64_t cd_offset) const {
  if (e.flags & 1) fail("member '", e.name, "' is encrypted");
  if (e.method != 0 && e.method != 8)
    fail("member '", e.name, "' uses compression method ", e.method, " (only STORED and DEFLATE are read)");
  if (e.name.size() < 5 || !e.name.ends_with(".npy")) fail("member '", e.name, "' is not an .npy file");
  if (e.local > cd_offset || cd_offset - e.local < 30 || u32(e.local) != 0x04034b50)
    fail("member '", e.name, "': bad local header offset ", e.local);
  const uint64_t lnlen = u16(e.local + 26), lelen = u16(e.local + 28);
  const uint64_t data_at = e.local + 30 + lnlen + lelen;
  if (data_at > cd_offset || e.csize > cd_offset - data_at) fail("member '", e.name, "': its data runs past the archive");
  if (bytes_.substr(size_t(e.local + 30), size_t(lnlen)) != e.name)
    fail("member '", e.name, "': the local header names '", bytes_.substr(size_t(e.local + 30), size_t(lnlen)), "'");
  if (e.method == 0 && e.csize != e.usize)
    fail("member '", e.name, "' is stored but its sizes differ (", e.csize, " vs ", e.usize, ")");
  return bytes_.substr(size_t(data_at), size_t(e.csize));
}

GRADUS_INLINE std::string NpzReader::inflate_member(const Entry& e, std::string_view packed) const {
  // Deflate expands at most ~1032:1; a larger claim is corrupt and must not be allocated.
  if (e.usize > e.csize * 1032 + 1024) fail("member '", e.name, "' claims ", e.usize, " bytes from ", e.csize, " compressed");
  // The buffer grows with the output actually produced, never past the claimed size.
  std::string inflated(size_t(std::min<uint64_t>(e.usize, std::max<uint64_t>(e.csize * 4, 1 << 16))), '\0');
  z_stream z{};
  if (inflateInit2(&z, -MAX_WBITS) != Z_OK) fail("zlib inflateInit2 failed");
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(packed.data()));
  uint64_t in_left = e.csize, produced = 0;
  int rc;
  for (;;) {  // zlib counts in uInt: feed chunks of at most 1 GiB
    if (z.avail_in == 0 && in_left) {
      z.avail_in = uInt(std::min<uint64_t>(in_left, 1u << 30));
      in_left -= z.avail_in;
    }
    if (produced == inflated.size() && inflated.size() < e.usize)
      inflated.resize(size_t(std::min<uint64_t>(e.usize, 2 * uint64_t(inflated.size()))));
    z.next_out = reinterpret_cast<Bytef*>(inflated.data() + produced);
    z.avail_out = uInt(std::min<uint64_t>(inflated.size() - produced, 1u << 30));
    const uInt room = z.avail_out;
    rc = inflate(&z, Z_NO_FLUSH);
    produced += room - z.avail_out;
    if (rc != Z_OK) break;
  }
  const std::string msg = z.msg ? z.msg : "";
  inflateEnd(&z);
  if (rc == Z_BUF_ERROR)
    fail("member '", e.name, "': corrupt deflate data (",
         produced == e.usize ? "it inflates to more than its size, " : "the stream ends early, ", e.usize, " bytes)");
  if (rc != Z_STREAM_END) fail("member '", e.name, "': corrupt deflate data (", msg.empty() ? "zlib error" : msg, ")");
  if (produced != e.usize) fail("member '", e.name, "' inflates to ", produced, " bytes, not ", e.usize);
  inflated.resize(size_t(produced));
  return inflated;
}
}  // namespace gradus::io::detail
namespace gradus::io {
GRADUS_INLINE std::string encode_npy(const AnyTensor& t) {
  GRADUS_CHECK(value_error, detail::is_defined(t), "encode_npy: the tensor is undefined");
  const Shape& s = detail::shape_of(t);
  std::string header = "{'descr': '";
  header += detail::npy_descr(t);
  header += "', 'fortran_order': False, 'shape': (";
  for (int i = 0; i < s.rank(); ++i) header += (i ? ", " : "") + std::to_string(s[i]);
  header += s.rank() == 1 ? ",), }" : "), }";
  // numpy leaves room to grow the first axis to 21 digits in place.
  if (s.rank() > 0) header.append(21 - std::to_string(s[0]).size(), ' ');
  const size_t hlen = header.size() + 1;            // + '\n'
  const size_t pad = 64 - (10 + hlen) % 64;          // numpy pads 64 when already aligned
  header.append(pad, ' ');
  header += '\n';
  GRADUS_CHECK(value_error, header.size() <= 0xFFFF, "encode_npy: header too long for format 1.0");

  const size_t bytes = size_t(s.numel()) * detail::element_size(t);
  std::string out;
  out.reserve(10 + header.size() + bytes);
  out += "\x93NUMPY";
  out += char(1);
  out += char(0);
  detail::store_le<2>(out, header.size());
  out += header;
  const size_t at = out.size();
  out.resize(at + bytes);
  detail::write_le(out.data() + at, t);
  return out;
}

GRADUS_INLINE AnyTensor decode_npy(std::string_view bytes, std::string_view source) {
  auto fail = [&](const auto&... parts) {
    ::gradus::detail::throw_error<io_error>({"npy: '", source, "': ", parts...});
  };
  if (bytes.size() < 10 || bytes.substr(0, 6) != "\x93NUMPY")
    fail(bytes.size() < 6 ? "too short for an .npy file" : "not an .npy file (bad magic)");
  const int major = static_cast<unsigned char>(bytes[6]), minor = static_cast<unsigned char>(bytes[7]);
  if (!((major == 1 || major == 2 || major == 3) && minor == 0))
    fail("format version ", major, ".", minor, " is not supported (1.0, 2.0 and 3.0 are)");
  const size_t len_size = major == 1 ? 2 : 4;
  if (bytes.size() < 8 + len_size) fail("truncated in the header length");
  const uint64_t hlen = major == 1 ? detail::load_le<2>(bytes.data() + 8) : detail::load_le<4>(bytes.data() + 8);
  const size_t start = 8 + len_size;
  if (hlen > bytes.size() - start)
    fail("the header length ", hlen, " is more than the ", bytes.size() - start, " bytes after it (truncated file?)");
  const std::string_view text = bytes.substr(start, size_t(hlen));
  if (major < 3)
    for (char c : text)
      if (static_cast<unsigned char>(c) >= 0x80) fail("the header has a non-ASCII byte (format ", major, ".0 is ASCII)");

  detail::NpyHeaderParser header(text, source);
  header.parse();
  if (header.fortran_order) fail("fortran_order is True; only C-order arrays are read");
  int kind = 0;
  uint64_t width = 0;
  if (header.descr == "<f4") kind = 0, width = 4;
  else if (header.descr == "<f8") kind = 1, width = 8;
  else if (header.descr == "<i8") kind = 2, width = 8;
  else fail("dtype '", header.descr, "' is not supported (supported: '<f4', '<f8', '<i8')");
  uint64_t numel = 0, nbytes = 0;
  if (!detail::checked_numel(header.shape, width, numel, nbytes)) fail("the shape has too many elements (overflow)");
  const std::string_view data = bytes.substr(start + size_t(hlen));
  if (nbytes != data.size())
    fail("the shape and dtype need ", nbytes, " bytes of data but the file has ", data.size(),
         nbytes > data.size() ? " (truncated file?)" : " (trailing bytes)");
  const Shape shape(std::vector<int64_t>(header.shape.begin(), header.shape.end()));
  switch (kind) {
    case 0: return detail::read_le<float>(data.data(), shape);
    case 1: return detail::read_le<double>(data.data(), shape);
    default: return detail::read_le<int64_t>(data.data(), shape);
  }
}

GRADUS_INLINE std::string encode_npz(const TensorList& tensors) {
  GRADUS_CHECK(value_error, tensors.size() < 0xFFFF, "encode_npz: ", tensors.size(),
               " arrays are more than a zip archive without ZIP64 holds");
  std::string out, central;
  std::set<std::string_view> names;
  for (const auto& [name, t] : tensors) {
    GRADUS_CHECK(value_error, !name.empty(), "encode_npz: an array has an empty name");
    GRADUS_CHECK(value_error, names.insert(name).second, "encode_npz: two arrays are named '", name, "'");
    const std::string member = name + ".npy";
    GRADUS_CHECK(value_error, member.size() < 0xFFFF, "encode_npz: name '", name, "' is too long");
    const std::string data = encode_npy(t);
    const uint64_t offset = out.size();
    GRADUS_CHECK(value_error, data.size() < 0xFFFFFFFFu && offset < 0xFFFFFFFFu, "encode_npz: '", name,
                 "' does not fit a zip archive without ZIP64 (4 GiB)");
    const uint32_t crc = detail::crc32_of(data);
    const bool utf8 = std::any_of(member.begin(), member.end(), [](char c) { return static_cast<unsigned char>(c) >= 0x80; });
    // Shared fields of the local header (from "version needed") and the central directory entry.
    std::string common;
    detail::store_le<2>(common, 20);             // version needed to extract: 2.0
    detail::store_le<2>(common, utf8 ? 0x800 : 0);  // flags: bit 11 = UTF-8 name
    detail::store_le<2>(common, 0);              // method: STORED
    detail::store_le<2>(common, 0);              // time 00:00:00
    detail::store_le<2>(common, (0 << 9) | (1 << 5) | 1);  // date 1980-01-01
    detail::store_le<4>(common, crc);
    detail::store_le<4>(common, data.size());    // compressed size
    detail::store_le<4>(common, data.size());    // uncompressed size
    detail::store_le<2>(common, member.size());
    detail::store_le<2>(common, 0);              // extra field length

    detail::store_le<4>(out, 0x04034b50);
    out += common;
    out += member;
    out += data;

    detail::store_le<4>(central, 0x02014b50);
    detail::store_le<2>(central, (3 << 8) | 20);  // made by: Unix, 2.0
    central += common;
    detail::store_le<2>(central, 0);              // comment length
    detail::store_le<2>(central, 0);              // disk number
    detail::store_le<2>(central, 0);              // internal attributes
    detail::store_le<4>(central, 0100644u << 16); // external attributes: a regular file, rw-r--r--
    detail::store_le<4>(central, offset);
    central += member;
  }
  const uint64_t cd_offset = out.size();
  GRADUS_CHECK(value_error, cd_offset + central.size() < 0xFFFFFFFFu, "encode_npz: the archive exceeds 4 GiB (no ZIP64)");
  out += central;
  detail::store_le<4>(out, 0x06054b50);
  detail::store_le<2>(out, 0);  // this disk
  detail::store_le<2>(out, 0);  // disk of the central directory
  detail::store_le<2>(out, tensors.size());
  detail::store_le<2>(out, tensors.size());
  detail::store_le<4>(out, central.size());
  detail::store_le<4>(out, cd_offset);
  detail::store_le<2>(out, 0);  // comment length
  return out;
}

GRADUS_INLINE TensorList decode_npz(std::string_view bytes, std::string_view source) {
  const detail::NpzReader zip(bytes, source);
  const detail::NpzReader::Directory dir = zip.directory();
  TensorList out;
  std::set<std::string> names;
  std::map<uint64_t, std::pair<uint64_t, std::string>> spans;  // local header offset -> (end of data, name)
  uint64_t p = dir.offset;
  const uint64_t end = dir.offset + dir.size;
  for (uint64_t k = 0; k < dir.count; ++k) {
    const detail::NpzReader::Entry e = zip.entry(&p, end, k);
    const std::string_view packed = zip.packed(e, dir.offset);
    // [local header, end of data) of every member is its own: overlapping members (several
    // entries over one deflate stream) would inflate the same bytes again and again
    const uint64_t stop = uint64_t(packed.data() - bytes.data()) + packed.size();
    const auto next = spans.lower_bound(e.local);
    const auto clash = next != spans.end() && next->first < stop ? next
                       : next != spans.begin() && std::prev(next)->second.first > e.local ? std::prev(next)
                                                                                           : spans.end();
    if (clash != spans.end())
      zip.fail("members '", clash->second.second, "' and '", e.name, "' overlap (bytes [", clash->first, ", ",
               clash->second.first, ") and [", e.local, ", ", stop, ")): an archive's members may not share bytes");
    spans.emplace(e.local, std::pair{stop, e.name});
    std::string inflated;
    const std::string_view member = e.method == 0 ? packed : (inflated = zip.inflate_member(e, packed));
    if (detail::crc32_of(member) != e.crc) zip.fail("member '", e.name, "': CRC-32 mismatch (corrupt data)");
    std::string array_name = e.name.substr(0, e.name.size() - 4);
    if (!names.insert(array_name).second) zip.fail("two members are named '", e.name, "'");
    out.emplace_back(std::move(array_name), decode_npy(member, ::gradus::detail::str(source, "/", e.name)));
  }
  if (p != end) zip.fail("the central directory has ", end - p, " bytes after its ", dir.count, " entries");
  return out;
}
}  // namespace gradus::io
#endif  // GRADUS_DEFINE_COMPILED
