// gradus/detail/protobuf.hpp — the protocol-buffer wire format, written by hand (no libprotobuf):
// the encoder and the bounds-checked decoder behind gd::summary's event files and gd::io's
// tf.train.Example messages.
//
// A message is a sequence of fields, each a key varint (field_number << 3 | wire_type)
// followed by the value: wire type 0 = varint (int64 as two's complement, 10 bytes when
// negative), 1 = 8 little-endian bytes (double), 2 = varint length + bytes (strings,
// nested messages, packed repeated scalars), 5 = 4 little-endian bytes (float).
// The reader checks every length against the bytes left and throws io_error naming the
// function that decodes (`who`) and the message (`what`); it never reads out of bounds.
#pragma once
#include <bit>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

#include "gradus/core/compiled.hpp"
#include "gradus/core/error.hpp"
#include "gradus/detail/endian.hpp"

namespace gradus::detail::proto {

enum WireType : int { wire_varint = 0, wire_fixed64 = 1, wire_bytes = 2, wire_fixed32 = 5 };

inline void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(char(uint8_t(v) | 0x80));
    v >>= 7;
  }
  out.push_back(char(uint8_t(v)));
}

/// The number of bytes put_varint writes for `v` (1..10).
constexpr size_t varint_size(uint64_t v) {
  size_t n = 1;
  for (; v >= 0x80; v >>= 7) ++n;
  return n;
}

inline void put_key(std::string& out, int field, WireType wire) { put_varint(out, uint64_t(field) << 3 | uint64_t(wire)); }

/// Field `field` as a varint (int32/int64/enum; negative values take 10 bytes).
inline void put_int(std::string& out, int field, int64_t v) {
  put_key(out, field, wire_varint);
  put_varint(out, uint64_t(v));
}
inline void put_double(std::string& out, int field, double v) {
  put_key(out, field, wire_fixed64);
  store_le<8>(out, std::bit_cast<uint64_t>(v));
}
inline void put_float(std::string& out, int field, float v) {
  put_key(out, field, wire_fixed32);
  store_le<4>(out, std::bit_cast<uint32_t>(v));
}
/// A length-delimited field: a string, bytes, or an encoded nested message.
inline void put_bytes(std::string& out, int field, std::string_view bytes) {
  put_key(out, field, wire_bytes);
  put_varint(out, bytes.size());
  out.append(bytes);
}
void put_packed_doubles(std::string& out, int field, std::span<const double> values);
void put_packed_floats(std::string& out, int field, std::span<const float> values);
/// A packed repeated int64 field: the varints of `values` (two's complement) after their length.
void put_packed_int64s(std::string& out, int field, std::span<const int64_t> values);

/// Walks the fields of one encoded message: `while (r.next()) switch (r.field()) {...}`.
class ProtoReader {
 public:
  /// `who` names the decoding function and `what` the message in error messages
  /// ("decode_event", "HistogramProto"). Both views must outlive the reader.
  ProtoReader(std::string_view data, std::string_view what, std::string_view who)
      : data_(data), what_(what), who_(who) {}

  /// Reads the next key; false at the end of the message.
  bool next() {
    if (pos_ == data_.size()) return false;
    const uint64_t key = varint();
    field_ = int(key >> 3);
    wire_ = int(key & 7);
    GRADUS_CHECK(io_error, key >> 3 > 0 && key >> 3 <= 0x1FFFFFFF, who_, ": ", what_, ": invalid field number ",
                 key >> 3);
    return true;
  }
  int field() const { return field_; }
  int wire() const { return wire_; }
  /// The reader for a nested message in the current (length-delimited) field.
  ProtoReader nested(std::string_view what) { return ProtoReader(bytes_value(), what, who_); }

  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      GRADUS_CHECK(io_error, pos_ < data_.size(), who_, ": ", what_, ": truncated varint");
      const auto b = uint8_t(data_[pos_++]);
      v |= uint64_t(b & 0x7F) << shift;
      if (!(b & 0x80)) return v;
    }
    throw_error<io_error>({who_, ": ", what_, ": varint longer than 10 bytes"});
  }
  int64_t int_value() {
    expect(wire_varint);
    return int64_t(varint());
  }
  double double_value() {
    expect(wire_fixed64);
    return std::bit_cast<double>(load_le<8>(take(8).data()));
  }
  float float_value() {
    expect(wire_fixed32);
    return std::bit_cast<float>(uint32_t(load_le<4>(take(4).data())));
  }
  std::string_view bytes_value() {
    expect(wire_bytes);
    return take(varint());
  }
  /// Appends the doubles of a repeated double field, packed (wire type 2) or not (wire type 1).
  template <class Vec>
  void append_doubles(Vec& out) {
    if (wire_ == wire_fixed64) {
      out.push_back(double_value());
      return;
    }
    const std::string_view b = packed(8, "doubles");
    for (size_t i = 0; i < b.size(); i += 8) out.push_back(std::bit_cast<double>(load_le<8>(b.data() + i)));
  }
  /// Appends the floats of a repeated float field, packed (wire type 2) or not (wire type 5).
  template <class Vec>
  void append_floats(Vec& out) {
    if (wire_ == wire_fixed32) {
      out.push_back(float_value());
      return;
    }
    const std::string_view b = packed(4, "floats");
    for (size_t i = 0; i < b.size(); i += 4) out.push_back(std::bit_cast<float>(uint32_t(load_le<4>(b.data() + i))));
  }
  /// Appends the values of a repeated int64 field, packed (wire type 2) or not (wire type 0).
  template <class Vec>
  void append_int64s(Vec& out) {
    if (wire_ == wire_varint) {
      out.push_back(int64_t(varint()));
      return;
    }
    ProtoReader r(bytes_value(), what_, who_);
    r.field_ = field_;
    while (r.pos_ < r.data_.size()) out.push_back(int64_t(r.varint()));
  }
  /// Skips the value of the current field (unknown fields are allowed, as in protobuf).
  void skip();

 private:
  void expect(int wire) const {
    GRADUS_CHECK(io_error, wire_ == wire, who_, ": ", what_, ": field ", field_, " has wire type ", wire_,
                 ", expected ", wire);
  }
  std::string_view take(uint64_t n) {
    GRADUS_CHECK(io_error, n <= data_.size() - pos_, who_, ": ", what_, ": field ", field_, " needs ", n, " bytes, ",
                 data_.size() - pos_, " left");
    const std::string_view s = data_.substr(pos_, size_t(n));
    pos_ += size_t(n);
    return s;
  }
  /// The bytes of a packed field of `width`-byte elements.
  std::string_view packed(size_t width, const char* elements);

  std::string_view data_;
  std::string_view what_;
  std::string_view who_;
  size_t pos_ = 0;
  int field_ = 0;
  int wire_ = 0;
};

}  // namespace gradus::detail::proto

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::detail::proto {
GRADUS_INLINE void put_packed_doubles(std::string& out, int field, std::span<const double> values) {
  put_key(out, field, wire_bytes);
  put_varint(out, values.size() * 8);
  for (double v : values) store_le<8>(out, std::bit_cast<uint64_t>(v));
}
GRADUS_INLINE void put_packed_floats(std::string& out, int field, std::span<const float> values) {
  put_key(out, field, wire_bytes);
  put_varint(out, values.size() * 4);
  for (float v : values) store_le<4>(out, std::bit_cast<uint32_t>(v));
}
GRADUS_INLINE void put_packed_int64s(std::string& out, int field, std::span<const int64_t> values) {
  size_t bytes = 0;
  for (int64_t v : values) bytes += varint_size(uint64_t(v));
  put_key(out, field, wire_bytes);
  put_varint(out, bytes);
  for (int64_t v : values) put_varint(out, uint64_t(v));
}

GRADUS_INLINE void ProtoReader::skip() {
  switch (wire_) {
    case wire_varint: varint(); break;
    case wire_fixed64: take(8); break;
    case wire_bytes: take(varint()); break;
    case wire_fixed32: take(4); break;
    default:
      throw_error<io_error>({who_, ": ", what_, ": field ", field_, " has unsupported wire type ", wire_});
  }
}

GRADUS_INLINE std::string_view ProtoReader::packed(size_t width, const char* elements) {
  const std::string_view b = bytes_value();
  GRADUS_CHECK(io_error, b.size() % width == 0, who_, ": ", what_, ": field ", field_, ": packed ", elements, " of ",
               b.size(), " bytes (not a multiple of ", width, ")");
  return b;
}
}  // namespace gradus::detail::proto
#endif  // GRADUS_DEFINE_COMPILED
