// gradus/summary/protobuf.hpp — gd::summary's names for the protocol-buffer wire format of
// gradus/detail/protobuf.hpp (shared with gd::io's tf.train.Example). Its ProtoReader reports
// errors as decode_event's.
#pragma once
#include <string_view>

#include "gradus/detail/protobuf.hpp"

namespace gradus::summary::detail {

using ::gradus::detail::load_le;
using ::gradus::detail::store_le;
using ::gradus::detail::proto::put_bytes;
using ::gradus::detail::proto::put_double;
using ::gradus::detail::proto::put_float;
using ::gradus::detail::proto::put_int;
using ::gradus::detail::proto::put_key;
using ::gradus::detail::proto::put_packed_doubles;
using ::gradus::detail::proto::put_varint;
using ::gradus::detail::proto::WireType;
using ::gradus::detail::proto::wire_bytes;
using ::gradus::detail::proto::wire_fixed32;
using ::gradus::detail::proto::wire_fixed64;
using ::gradus::detail::proto::wire_varint;

/// The wire-format reader with decode_event's error messages: ProtoReader(data, "Event").
class ProtoReader : public ::gradus::detail::proto::ProtoReader {
 public:
  ProtoReader(std::string_view data, std::string_view what)
      : ::gradus::detail::proto::ProtoReader(data, what, "decode_event") {}
};

}  // namespace gradus::summary::detail
