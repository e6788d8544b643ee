// gradus/summary/protobuf.hpp — the few pieces of the protocol-buffer wire format that
// event files need, written by hand (no libprotobuf).
//
// A message is a sequence of fields, each a key varint (field_number << 3 | wire_type)
// followed by the value: wire type 0 = varint (int64 as two's complement, 10 bytes when
// negative), 1 = 8 little-endian bytes (double), 2 = varint length + bytes (strings,
// nested messages, packed repeated scalars), 5 = 4 little-endian bytes (float).
// The reader checks every length against the bytes left and throws io_error naming what
// it was decoding; it never reads out of bounds.
#pragma once
#include <bit>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

#include "gradus/core/error.hpp"
#include "gradus/detail/endian.hpp"

namespace gradus::summary::detail {

enum WireType : int { wire_varint = 0, wire_fixed64 = 1, wire_bytes = 2, wire_fixed32 = 5 };

inline void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(char(uint8_t(v) | 0x80));
    v >>= 7;
  }
  out.push_back(char(uint8_t(v)));
}

inline void put_key(std::string& out, int field, WireType wire) { put_varint(out, uint64_t(field) << 3 | uint64_t(wire)); }

using ::gradus::detail::load_le;
using ::gradus::detail::store_le;

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
inline void put_packed_doubles(std::string& out, int field, std::span<const double> values) {
  put_key(out, field, wire_bytes);
  put_varint(out, values.size() * 8);
  for (double v : values) store_le<8>(out, std::bit_cast<uint64_t>(v));
}

/// Walks the fields of one encoded message: `while (r.next()) switch (r.field()) {...}`.
class ProtoReader {
 public:
  /// `what` names the message in error messages ("Event", "HistogramProto").
  ProtoReader(std::string_view data, std::string_view what) : data_(data), what_(what) {}

  /// Reads the next key; false at the end of the message.
  bool next() {
    if (pos_ == data_.size()) return false;
    const uint64_t key = varint();
    field_ = int(key >> 3);
    wire_ = int(key & 7);
    GRADUS_CHECK(io_error, field_ > 0 && key >> 3 <= 0x1FFFFFFF, "decode_event: ", what_, ": invalid field number ",
                 key >> 3);
    return true;
  }
  int field() const { return field_; }
  int wire() const { return wire_; }

  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      GRADUS_CHECK(io_error, pos_ < data_.size(), "decode_event: ", what_, ": truncated varint");
      const auto b = uint8_t(data_[pos_++]);
      v |= uint64_t(b & 0x7F) << shift;
      if (!(b & 0x80)) return v;
    }
    throw io_error(gradus::detail::str("decode_event: ", what_, ": varint longer than 10 bytes"));
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
    const std::string_view b = bytes_value();
    GRADUS_CHECK(io_error, b.size() % 8 == 0, "decode_event: ", what_, ": field ", field_,
                 ": packed doubles of ", b.size(), " bytes (not a multiple of 8)");
    for (size_t i = 0; i < b.size(); i += 8) out.push_back(std::bit_cast<double>(load_le<8>(b.data() + i)));
  }
  /// Skips the value of the current field (unknown fields are allowed, as in protobuf).
  void skip() {
    switch (wire_) {
      case wire_varint: varint(); break;
      case wire_fixed64: take(8); break;
      case wire_bytes: take(varint()); break;
      case wire_fixed32: take(4); break;
      default:
        throw io_error(gradus::detail::str("decode_event: ", what_, ": field ", field_, " has unsupported wire type ",
                                           wire_));
    }
  }

 private:
  void expect(int wire) const {
    GRADUS_CHECK(io_error, wire_ == wire, "decode_event: ", what_, ": field ", field_, " has wire type ", wire_,
                 ", expected ", wire);
  }
  std::string_view take(uint64_t n) {
    GRADUS_CHECK(io_error, n <= data_.size() - pos_, "decode_event: ", what_, ": field ", field_, " needs ", n,
                 " bytes, ", data_.size() - pos_, " left");
    const std::string_view s = data_.substr(pos_, size_t(n));
    pos_ += size_t(n);
    return s;
  }

  std::string_view data_;
  std::string_view what_;
  size_t pos_ = 0;
  int field_ = 0;
  int wire_ = 0;
};

}  // namespace gradus::summary::detail
