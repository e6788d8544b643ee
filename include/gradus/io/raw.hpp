// gradus/io/raw.hpp — tf.io.decode_raw: the bytes of a string (or of each string of a batch) read
// as numbers of a fixed-size type, in either byte order, into a tensor.
//
// The stored type (`RawType`) may be narrower than the tensor's element: int8..int64 and uint8,
// uint16 widen to int64_t, IEEE half, bfloat16 and float32/64 to float or double, and uint8 bytes
// stay bytes in a Tensor<uint8_t> (an 8-bit image's samples, as CIFAR's binary files hold them).
// A string whose length is not a multiple of the type's size, or a batch of strings of different
// lengths without `fixed_length`, is a value_error, as in TensorFlow; `fixed_length` reads the
// first fixed_length bytes of each string, zero-padding shorter ones.
//
//   gd::Tensor<uint8_t> pixels = gd::io::decode_raw<uint8_t>(record.substr(1));        // [3072]
//   gd::Tensor<float> x = gd::io::decode_raw<float>(bytes, {.type = gd::io::RawType::float16});
//   gd::Tensor<int64_t> y = gd::io::decode_raw<int64_t>(batch, {.type = gd::io::RawType::int32,
//                                                               .little_endian = false});   // [B, n]
#pragma once
#include <algorithm>
#include <bit>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "gradus/core/compiled.hpp"
#include "gradus/core/error.hpp"
#include "gradus/core/tensor.hpp"
#include "gradus/io/safetensors.hpp"

namespace gradus::io {

/// The stored type of decode_raw's numbers (tf.io.decode_raw's out_type); `native` is the
/// tensor's own element type.
enum class RawType { native, uint8, int8, int16, uint16, int32, int64, float16, bfloat16, float32, float64 };

/// Options of decode_raw.
struct DecodeRawOptions {
  RawType type = RawType::native;  ///< how the bytes store each number
  bool little_endian = true;       ///< the bytes' order within each number
  int64_t fixed_length = 0;        ///< > 0: read that many bytes of each string, zero-padded
};

/// The size in bytes of a stored number of type `t` (for `native`, of T).
int64_t raw_size(RawType t, int64_t native_size);
/// "int16", "float16", ...
std::string_view to_string(RawType t);

namespace detail {

/// The `n` numbers of type `type` at `src` converted into `out` (checked by the caller: `type`
/// is one that T holds).
template <Element T>
void decode_raw_into(const char* src, int64_t n, RawType type, bool little_endian, T* out);

/// value_error unless T can hold numbers stored as `type`.
template <Element T>
void check_raw_type(RawType type);

}  // namespace detail

/// The numbers stored in `bytes` -> a 1-D tensor [bytes.size() / size] (tf.io.decode_raw of one
/// string; see the file comment).
template <Element T>
Tensor<T> decode_raw(std::string_view bytes, const DecodeRawOptions& opts = {}) {
  detail::check_raw_type<T>(opts.type);
  const int64_t size = raw_size(opts.type, int64_t(sizeof(T)));
  const int64_t length = opts.fixed_length > 0 ? opts.fixed_length : int64_t(bytes.size());
  GRADUS_CHECK(value_error, length % size == 0, "decode_raw: ", length, " bytes are not a whole number of ",
               to_string(opts.type), " values (", size, " bytes each)");
  std::string padded;
  std::string_view src = bytes;
  if (int64_t(bytes.size()) != length) {
    padded.assign(size_t(length), '\0');
    padded.replace(0, std::min(bytes.size(), size_t(length)), bytes.substr(0, size_t(length)));
    src = padded;
  }
  Tensor<T> out(Shape{length / size});
  detail::decode_raw_into(src.data(), length / size, opts.type, opts.little_endian, out.data());
  return out;
}

/// The numbers stored in each string of `batch` -> [batch.size(), n]; the strings must have one
/// length unless `fixed_length` is set.
template <Element T>
Tensor<T> decode_raw(std::span<const std::string> batch, const DecodeRawOptions& opts = {}) {
  detail::check_raw_type<T>(opts.type);
  const int64_t size = raw_size(opts.type, int64_t(sizeof(T)));
  int64_t length = opts.fixed_length;
  for (size_t i = 0; length <= 0 && i < batch.size(); ++i) length = int64_t(batch[i].size());
  for (size_t i = 0; opts.fixed_length <= 0 && i < batch.size(); ++i)
    GRADUS_CHECK(value_error, int64_t(batch[i].size()) == length, "decode_raw: string ", i, " has ", batch[i].size(),
                 " bytes, string 0 has ", length, "; give fixed_length to read strings of different lengths");
  length = std::max<int64_t>(length, 0);
  GRADUS_CHECK(value_error, length % size == 0, "decode_raw: ", length, " bytes are not a whole number of ",
               to_string(opts.type), " values (", size, " bytes each)");
  const int64_t n = length / size;
  Tensor<T> out(Shape{int64_t(batch.size()), n});
  std::string padded;  // a string shorter than fixed_length, zero-padded
  for (size_t i = 0; i < batch.size(); ++i) {
    const char* src = batch[i].data();
    if (int64_t(batch[i].size()) < length) {
      padded.assign(size_t(length), '\0');
      padded.replace(0, batch[i].size(), batch[i]);
      src = padded.data();
    }
    detail::decode_raw_into(src, n, opts.type, opts.little_endian, out.data() + int64_t(i) * n);
  }
  return out;
}

}  // namespace gradus::io

namespace gradus::io::detail {

template <Element T>
void check_raw_type(RawType type) {
  if (type == RawType::native) return;
  bool ok;
  if constexpr (std::is_same_v<T, uint8_t>)
    ok = type == RawType::uint8;
  else if constexpr (std::is_same_v<T, int64_t>)
    ok = type == RawType::uint8 || type == RawType::int8 || type == RawType::int16 || type == RawType::uint16 ||
         type == RawType::int32 || type == RawType::int64;
  else
    ok = type == RawType::float16 || type == RawType::bfloat16 || type == RawType::float32 ||
         (type == RawType::float64 && std::is_same_v<T, double>);
  GRADUS_CHECK(value_error, ok, "decode_raw: ", to_string(type), " values do not fit a Tensor<",
               std::is_same_v<T, uint8_t> ? "uint8_t" : std::is_same_v<T, int64_t> ? "int64_t"
               : std::is_same_v<T, float> ? "float" : "double",
               "> (integers widen to int64_t, halves and floats to float or double, bytes stay uint8_t)");
}

/// The unsigned integer of the `size` bytes at p in the given order.
inline uint64_t load_raw(const char* p, int64_t size, bool little_endian) {
  uint64_t v = 0;
  for (int64_t k = 0; k < size; ++k) {
    const auto byte = uint64_t(static_cast<unsigned char>(p[little_endian ? size - 1 - k : k]));
    v = v << 8 | byte;
  }
  return v;
}

template <Element T>
void decode_raw_into(const char* src, int64_t n, RawType type, bool little_endian, T* out) {
  if (type == RawType::native) {
    if constexpr (std::is_same_v<T, uint8_t>) type = RawType::uint8;
    else if constexpr (std::is_same_v<T, int64_t>) type = RawType::int64;
    else if constexpr (std::is_same_v<T, float>) type = RawType::float32;
    else type = RawType::float64;
  }
  const int64_t size = raw_size(type, int64_t(sizeof(T)));
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t u = load_raw(src + i * size, size, little_endian);
    switch (type) {
      case RawType::uint8: out[i] = T(uint8_t(u)); break;
      case RawType::int8: out[i] = T(int8_t(uint8_t(u))); break;
      case RawType::int16: out[i] = T(int16_t(uint16_t(u))); break;
      case RawType::uint16: out[i] = T(uint16_t(u)); break;
      case RawType::int32: out[i] = T(int32_t(uint32_t(u))); break;
      case RawType::int64: out[i] = T(int64_t(u)); break;
      case RawType::float16: out[i] = T(half_to_float(uint16_t(u))); break;
      case RawType::bfloat16: out[i] = T(std::bit_cast<float>(uint32_t(u) << 16)); break;
      case RawType::float32: out[i] = T(std::bit_cast<float>(uint32_t(u))); break;
      case RawType::float64: out[i] = T(std::bit_cast<double>(u)); break;
      case RawType::native: break;
    }
  }
}

}  // namespace gradus::io::detail

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::io {
GRADUS_INLINE int64_t raw_size(RawType t, int64_t native_size) {
  switch (t) {
    case RawType::native: return native_size;
    case RawType::uint8:
    case RawType::int8: return 1;
    case RawType::int16:
    case RawType::uint16:
    case RawType::float16:
    case RawType::bfloat16: return 2;
    case RawType::int32:
    case RawType::float32: return 4;
    case RawType::int64:
    case RawType::float64: return 8;
  }
  return native_size;
}

GRADUS_INLINE std::string_view to_string(RawType t) {
  switch (t) {
    case RawType::native: return "native";
    case RawType::uint8: return "uint8";
    case RawType::int8: return "int8";
    case RawType::int16: return "int16";
    case RawType::uint16: return "uint16";
    case RawType::int32: return "int32";
    case RawType::int64: return "int64";
    case RawType::float16: return "float16";
    case RawType::bfloat16: return "bfloat16";
    case RawType::float32: return "float32";
    case RawType::float64: return "float64";
  }
  return "?";
}
}  // namespace gradus::io
#endif  // GRADUS_DEFINE_COMPILED
