// gradus/summary/crc32c.hpp — gd::summary's names for CRC-32C and its TFRecord mask, which live in
// gradus/detail/crc32c.hpp (shared with gd::io's TFRecord files).
#pragma once
#include "gradus/detail/crc32c.hpp"

namespace gradus::summary {

using ::gradus::detail::crc32c;
using ::gradus::detail::mask_crc;
using ::gradus::detail::masked_crc32c;

namespace detail {
using ::gradus::detail::crc32c_portable;
}  // namespace detail

}  // namespace gradus::summary
