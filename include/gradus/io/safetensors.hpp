// gradus/io/safetensors.hpp — read and write the safetensors format
// (https://github.com/huggingface/safetensors), the format of gradus checkpoints.
//
// A file is
//   8 bytes   N, the header length: an unsigned 64-bit little-endian integer
//   N bytes   the header: a JSON object, padded with spaces to a multiple of 8 bytes
//   the rest  the data section: every tensor's elements, row-major and little-endian, back to back
// The header maps each tensor name to {"dtype": "F32"|"F64"|"I64"|..., "shape": [d0, ...],
// "data_offsets": [begin, end]} (a byte range [begin, end) of the data section), and the optional
// key "__metadata__" to an object of string values:
//   {"__metadata__":{"global_step":"300"},"dense.kernel":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}}
// gradus writes the header compactly, in that key order, with the tensors in the order given and
// their data in the same order.
//
// F16 (IEEE half) and BF16 (bfloat16) tensors, as pretrained weights from other frameworks come,
// are read as F32: every value of either widens to a float exactly (NaNs stay NaN, infinities and
// signed zeros stay), and Safetensors::widened names each such tensor with its file dtype. gradus
// writes F32, F64 and I64, and float tensors as F16 or BF16 on request (encode_safetensors'
// `floats`: rounded to the nearest, ties to even, as numpy's float16 and ml_dtypes' bfloat16
// round; half the bytes, as half-precision weights are published). A finite float that would
// become infinite (beyond 65504 in F16) is a value_error naming the tensor, not an infinity.
//
// Reading trusts nothing: the header length, the JSON, every entry's types, the dtype (F32, F64,
// I64, F16 and BF16 are read; U8 and the other safetensors dtypes are named as unsupported),
// the shape (at most 8 dimensions, no overflow), the offsets (exactly dtype size * element count
// bytes, inside the data section), and that the tensors cover the data section exactly — no
// overlaps, no holes, no trailing bytes — and that names are unique. A bad file raises io_error
// naming the file and the problem. Nothing is allocated beyond what the file really holds: the
// header is read as a stream (detail/json.hpp, a strict JSON reader) against this fixed schema.
#pragma once
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "gradus/core/bfloat16.hpp"
#include "gradus/core/compiled.hpp"
#include "gradus/core/precision.hpp"
#include "gradus/detail/utf8.hpp"
#include "gradus/io/file.hpp"
#include "gradus/io/tensor_list.hpp"

namespace gradus::io {

/// The contents of a safetensors file: its tensors in file (data) order and its metadata.
struct Safetensors {
  TensorList tensors;
  Metadata metadata;
  /// Where it was read from (the path, or the `source` given to decode_safetensors); errors name it.
  std::string source = "<memory>";
  /// The tensors stored in a narrower type and read as F32: name -> "F16" or "BF16".
  std::map<std::string, std::string, std::less<>> widened;

  /// The tensor called `name`, or nullptr when there is none.
  const AnyTensor* find(std::string_view name) const;
  /// The tensor called `name` as a Tensor<T> (sharing storage); io_error naming the entry when
  /// it is absent or has another dtype.
  template <Element T>
  Tensor<T> get(std::string_view name) const;
};

namespace detail {

enum class Dtype { f32, f64, i64, f16, bf16 };

/// The float of the IEEE half with bits `h`, exactly (subnormals, infinities, NaNs included).
float half_to_float(uint16_t h);
/// The float of the bfloat16 with bits `h`: its bits are the float's upper half.
inline float bfloat16_to_float(uint16_t h) { return std::bit_cast<float>(uint32_t(h) << 16); }

/// The bits of the IEEE half nearest `x`, ties to even: subnormal halves below 2^-14, an infinity
/// from 65520 on (65504, the largest half, plus half its spacing), a quiet NaN of x's sign and the
/// top of its payload for a NaN.
constexpr uint16_t float_to_half_bits(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x), a = u & 0x7fffffffu;
  const auto sign = uint16_t((u >> 16) & 0x8000u);
  if (a > 0x7f800000u) return uint16_t(sign | 0x7e00u | ((a >> 13) & 0x3ffu));  // NaN
  if (a >= 0x477ff000u) return uint16_t(sign | 0x7c00u);                         // >= 65520: infinity
  if (a >= 0x38800000u)  // >= 2^-14, a normal half: round off 13 mantissa bits, rebias 127 -> 15
    return uint16_t(sign | (((a + 0xfffu + ((a >> 13) & 1u)) >> 13) - (112u << 10)));
  // a subnormal half (or zero): the value in units of 2^-24, rounded; below 2^-25 it is zero
  const int e = int(a >> 23);
  if (e < 102) return sign;
  const uint32_t m = (a & 0x7fffffu) | 0x800000u;  // value = m 2^(e - 150) = (m >> (126 - e)) units
  const int shift = 126 - e;                         // 14 .. 24
  uint32_t q = m >> shift;
  const uint32_t rest = m & ((1u << shift) - 1), half = 1u << (shift - 1);
  if (rest > half || (rest == half && (q & 1u))) ++q;  // may carry into the smallest normal: right
  return uint16_t(sign | q);
}
/// The floats of `shape.numel()` little-endian 16-bit words at `src` (F16 or BF16).
Tensor<float> read_half_le(const char* src, const Shape& shape, bool bf16);

template <Element T>
constexpr std::string_view safetensors_dtype() {
  if constexpr (std::same_as<T, float>) return "F32";
  else if constexpr (std::same_as<T, double>) return "F64";
  else if constexpr (std::same_as<T, uint8_t>) return "U8";
  else return "I64";
}
inline std::string_view safetensors_dtype(const AnyTensor& t) {
  return std::visit([](const auto& x) { return safetensors_dtype<typename std::decay_t<decltype(x)>::value_type>(); },
                    t);
}

/// Appends `s` as a JSON string literal (s is valid UTF-8).
void append_json_string(std::string& out, std::string_view s);

}  // namespace detail

template <Element T>
Tensor<T> Safetensors::get(std::string_view name) const {
  const AnyTensor* t = find(name);
  GRADUS_CHECK(io_error, t != nullptr, "safetensors: '", source, "' has no tensor '", name, "'");
  const Tensor<T>* typed = std::get_if<Tensor<T>>(t);
  GRADUS_CHECK(io_error, typed != nullptr, "safetensors: '", source, "': tensor '", name, "' is ",
               detail::safetensors_dtype(*t), ", not ", detail::safetensors_dtype<T>());
  return *typed;
}

/// The safetensors bytes of `tensors` (header entries and data in the order given) and
/// `metadata`, float tensors stored as `floats`: F32 (gd::fp32), or rounded to BF16 (gd::bf16)
/// or F16 (gd::fp16); double and int64 tensors as they are. value_error for an undefined tensor,
/// an empty, duplicate or invalid-UTF-8 name, the reserved name "__metadata__", or a finite
/// float that the 16-bit type cannot hold (it would be infinite).
std::string encode_safetensors(const TensorList& tensors, const Metadata& metadata = {}, Precision floats = fp32);

/// Parses safetensors bytes; `source` names them in errors (load_safetensors passes the path).
/// io_error naming the source and the problem for anything malformed (see the file comment).
Safetensors decode_safetensors(std::string_view bytes, std::string_view source = "<memory>");

/// Writes `tensors` and `metadata` to `path` as safetensors, atomically (see write_file_atomic),
/// float tensors as `floats` (see encode_safetensors).
///   gd::io::save_safetensors("weights.safetensors", tensors, {}, gd::bf16);  // half the bytes
void save_safetensors(const std::filesystem::path& path, const TensorList& tensors,
                      const Metadata& metadata = {}, Precision floats = fp32);

/// Reads and checks the safetensors file at `path`; io_error naming the path (and `who`, the call
/// the user made: "load" for io::load) on any problem.
Safetensors load_safetensors(const std::filesystem::path& path, const char* who = "load_safetensors");

}  // namespace gradus::io

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
#include "gradus/detail/json.hpp"

namespace gradus::io {
GRADUS_INLINE const AnyTensor* Safetensors::find(std::string_view name) const {
  for (const auto& [n, t] : tensors)
    if (n == name) return &t;
  return nullptr;
}

namespace detail {

GRADUS_INLINE float half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));  // inf, NaN (payload kept)
  if (exp != 0) return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));  // rebias 15 -> 127
  // zero or subnormal: mant * 2^-24, exact in float
  const float v = float(mant) * 0x1p-24f;
  return sign ? -v : v;
}

GRADUS_INLINE Tensor<float> read_half_le(const char* src, const Shape& shape, bool bf16) {
  Tensor<float> t(shape);
  float* out = t.data();
  const int64_t n = shape.numel();
  const auto* bytes = reinterpret_cast<const unsigned char*>(src);
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t h = uint16_t(bytes[2 * i] | (bytes[2 * i + 1] << 8));
    out[i] = bf16 ? bfloat16_to_float(h) : half_to_float(h);
  }
  return t;
}

GRADUS_INLINE void append_json_string(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += '"';
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20) {
      out += "\\u00";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    } else {
      out += c;
    }
  }
  out += '"';
}

/// One header entry, checked against the data section.
struct StEntry {
  std::string name;
  Dtype dtype{};
  Shape shape;
  uint64_t begin = 0, end = 0;
};

/// The handler of read_json (detail/json.hpp) that checks the header against the safetensors
/// schema as it streams past and keeps only the compact entries; any deviation throws io_error at
/// once.
class StHeaderParser {
 public:
  StHeaderParser(std::string_view source, uint64_t data_size) : source_(source), data_size_(data_size) {}

  std::vector<StEntry> entries;
  Metadata metadata;

  void null() { bad_value("null"); }
  void boolean(bool) { bad_value("a boolean"); }
  void number_integer(int64_t) { bad_value("a negative number"); }
  void number_unsigned(uint64_t v) {
    if (at_ == At::shape) {
      if (dims_.size() == size_t(kMaxRank))
        fail("tensor '", key_, "': 'shape' has more than ", kMaxRank, " dimensions (gradus tensors have at most ",
             kMaxRank, ")");
      dims_.push_back(v);
      return;
    }
    if (at_ == At::offsets) {
      if (offsets_.size() == 2) fail("tensor '", key_, "': 'data_offsets' must be [begin, end], got more than 2 numbers");
      offsets_.push_back(v);
      return;
    }
    bad_value("a number");
  }
  void number_float(double) { bad_value("a number that is not an integer (or is too large)"); }
  void string(std::string& s) {
    if (at_ == At::entry && field_ == Field::dtype) {
      dtype_ = s;
      return;
    }
    if (at_ == At::metadata) {
      metadata.emplace(meta_key_, s);
      return;
    }
    bad_value("a string");
  }

  void start_object() {
    if (at_ == At::none) {
      at_ = At::root;
      return;
    }
    if (at_ == At::root) {
      if (key_ == "__metadata__") {
        if (seen_metadata_) fail("'__metadata__' appears twice");
        seen_metadata_ = true;
        at_ = At::metadata;
      } else {
        at_ = At::entry;
        seen_ = 0;
        dtype_.clear();
        dims_.clear();
        offsets_.clear();
      }
      return;
    }
    bad_value("an object");
  }
  void key(std::string& k) {
    if (at_ == At::root) {
      if (k.empty()) fail("a tensor has an empty name");
      key_ = k;
    } else if (at_ == At::entry) {
      if (k == "dtype") field_ = Field::dtype;
      else if (k == "shape") field_ = Field::shape;
      else if (k == "data_offsets") field_ = Field::offsets;
      else fail("tensor '", key_, "' has an unexpected key '", k, "' (expected dtype, shape, data_offsets)");
      const unsigned bit = 1u << unsigned(field_);
      if (seen_ & bit) fail("tensor '", key_, "' has '", k, "' twice");
      seen_ |= bit;
    } else {  // metadata
      if (metadata.count(k)) fail("metadata key '", k, "' appears twice");
      meta_key_ = k;
    }
  }
  void end_object() {
    if (at_ == At::entry) {
      finish_entry();
      at_ = At::root;
    } else if (at_ == At::metadata) {
      at_ = At::root;
    } else {
      at_ = At::done;
    }
  }
  void start_array() {
    if (at_ == At::entry && field_ == Field::shape) {
      at_ = At::shape;
      return;
    }
    if (at_ == At::entry && field_ == Field::offsets) {
      at_ = At::offsets;
      return;
    }
    bad_value("a list");
  }
  void end_array() { at_ = At::entry; }

  template <class... Parts>
  [[noreturn]] void fail(const Parts&... parts) const {
    ::gradus::detail::throw_error<io_error>({"safetensors: '", source_, "': ", parts...});
  }

 private:
  enum class At { none, root, entry, metadata, shape, offsets, done };
  enum class Field { dtype, shape, offsets };

  /// A value of kind `got` where the schema wants something else: say what was expected there.
  [[noreturn]] void bad_value(const char* got) {
    switch (at_) {
      case At::none:
        fail("the header must be a JSON object, got ", got);
      case At::root:
        if (key_ == "__metadata__") fail("'__metadata__' must be an object of strings, got ", got);
        fail("entry '", key_, "' must be an object {dtype, shape, data_offsets}, got ", got);
      case At::metadata:
        fail("metadata '", meta_key_, "' must be a string (metadata values are strings), got ", got);
      case At::entry:
        if (field_ == Field::dtype) fail("tensor '", key_, "': 'dtype' must be a string, got ", got);
        if (field_ == Field::shape) fail("tensor '", key_, "': 'shape' must be a list of non-negative integers, got ", got);
        fail("tensor '", key_, "': 'data_offsets' must be a list [begin, end] of non-negative integers, got ", got);
      case At::shape:
        fail("tensor '", key_, "': 'shape' must be a list of non-negative integers, got an element that is ", got);
      case At::offsets:
        fail("tensor '", key_, "': 'data_offsets' must be a list [begin, end] of non-negative integers, got an element "
             "that is ", got);
      case At::done:
        break;
    }
    fail("unexpected ", got, " after the header object");
  }

  void finish_entry() {
    const std::string& name = key_;
    if (!(seen_ & 1u)) fail("tensor '", name, "' has no 'dtype'");
    if (!(seen_ & 2u)) fail("tensor '", name, "' has no 'shape'");
    if (!(seen_ & 4u)) fail("tensor '", name, "' has no 'data_offsets'");
    StEntry e;
    uint64_t width;
    if (dtype_ == "F32") e.dtype = Dtype::f32, width = 4;
    else if (dtype_ == "F64") e.dtype = Dtype::f64, width = 8;
    else if (dtype_ == "I64") e.dtype = Dtype::i64, width = 8;
    else if (dtype_ == "F16") e.dtype = Dtype::f16, width = 2;
    else if (dtype_ == "BF16") e.dtype = Dtype::bf16, width = 2;
    else {
      static constexpr std::string_view kOther[] = {"BOOL",    "U8",      "I8",      "I16", "U16",     "I32",
                                                    "U32",     "U64",     "F8_E4M3", "F8_E5M2", "F8_E8M0", "F4",
                                                    "F6_E2M3", "F6_E3M2", "C64"};
      const bool known = std::find(std::begin(kOther), std::end(kOther), dtype_) != std::end(kOther);
      fail("tensor '", name, "' has ", known ? "dtype '" : "unknown dtype '", dtype_,
           known ? "', which gradus does not read" : "'", " (supported: F32, F64, I64, and F16 and BF16 read as F32)");
    }
    if (offsets_.size() != 2) fail("tensor '", name, "': 'data_offsets' must be [begin, end], got ", offsets_.size(),
                                   " numbers");
    uint64_t numel = 0, bytes = 0;
    if (!checked_numel(dims_, width, numel, bytes))
      fail("tensor '", name, "': shape ", dims_text(), " has too many elements (the size overflows)");
    e.begin = offsets_[0];
    e.end = offsets_[1];
    if (e.begin > e.end) fail("tensor '", name, "': data_offsets [", e.begin, ", ", e.end, "] are reversed");
    if (e.end > data_size_)
      fail("tensor '", name, "': data_offsets [", e.begin, ", ", e.end, "] reach past the data section (", data_size_,
           " bytes; truncated file?)");
    if (e.end - e.begin != bytes)
      fail("tensor '", name, "': data_offsets [", e.begin, ", ", e.end, "] span ", e.end - e.begin, " bytes, but ",
           dtype_, " ", dims_text(), " needs ", bytes);
    std::vector<int64_t> dims(dims_.begin(), dims_.end());
    e.shape = Shape(dims);
    e.name = name;
    entries.push_back(std::move(e));
  }
  std::string dims_text() const {
    std::string s = "[";
    for (size_t i = 0; i < dims_.size(); ++i) {
      if (i) s += ',';
      s += std::to_string(dims_[i]);
    }
    return s + "]";
  }

  std::string_view source_;
  uint64_t data_size_;
  At at_ = At::none;
  Field field_ = Field::dtype;
  std::string key_, meta_key_, dtype_;
  unsigned seen_ = 0;
  bool seen_metadata_ = false;
  std::vector<uint64_t> dims_, offsets_;
};

}  // namespace detail

GRADUS_INLINE std::string encode_safetensors(const TensorList& tensors, const Metadata& metadata, Precision floats) {
  GRADUS_CHECK(value_error, floats == fp32 || floats == bf16 || floats == fp16,
               "encode_safetensors: floats must be gd::fp32, gd::bf16 or gd::fp16, got ", int(floats));
  // a float tensor stored in 16 bits, and its dtype
  const auto narrowed = [&](const AnyTensor& t) { return floats != fp32 && std::holds_alternative<Tensor<float>>(t); };
  const std::string_view narrow_dtype = floats == bf16 ? "BF16" : "F16";
  std::string header = "{";
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [k, v] : metadata) {
      GRADUS_CHECK(value_error, ::gradus::detail::valid_utf8(k) && ::gradus::detail::valid_utf8(v),
                   "encode_safetensors: metadata key or value is not valid UTF-8: '", k, "'");
      if (!first) header += ',';
      first = false;
      detail::append_json_string(header, k);
      header += ':';
      detail::append_json_string(header, v);
    }
    header += "},";
  }
  std::set<std::string_view> names;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    GRADUS_CHECK(value_error, !name.empty(), "encode_safetensors: a tensor has an empty name");
    GRADUS_CHECK(value_error, name != "__metadata__", "encode_safetensors: '__metadata__' is reserved, not a tensor name");
    GRADUS_CHECK(value_error, ::gradus::detail::valid_utf8(name), "encode_safetensors: name '", name, "' is not valid UTF-8");
    GRADUS_CHECK(value_error, names.insert(name).second, "encode_safetensors: two tensors are named '", name, "'");
    GRADUS_CHECK(value_error, detail::is_defined(t), "encode_safetensors: tensor '", name, "' is undefined");
    const Shape& s = detail::shape_of(t);
    const uint64_t bytes = uint64_t(s.numel()) * (narrowed(t) ? 2 : detail::element_size(t));
    detail::append_json_string(header, name);
    header += ":{\"dtype\":\"";
    header += narrowed(t) ? narrow_dtype : detail::safetensors_dtype(t);
    header += "\",\"shape\":[";
    for (int i = 0; i < s.rank(); ++i) {
      if (i) header += ',';
      header += std::to_string(s[i]);
    }
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + bytes) + "]},";
    offset += bytes;
  }
  if (header.size() > 1) header.pop_back();  // the last ','
  header += '}';
  header.append((8 - header.size() % 8) % 8, ' ');

  std::string out;
  out.reserve(8 + header.size() + offset);
  detail::store_le<8>(out, header.size());
  out += header;
  size_t at = out.size();
  out.resize(at + offset);
  for (const auto& [name, t] : tensors) {
    const size_t n = size_t(detail::shape_of(t).numel());
    if (!narrowed(t)) {
      detail::write_le(out.data() + at, t);
      at += n * detail::element_size(t);
      continue;
    }
    const Tensor<float> x = std::get<Tensor<float>>(t).to(gradus::cpu);  // a GPU's tensor is read back first
    const float* v = x.data();
    for (size_t i = 0; i < n; ++i, at += 2) {
      const uint16_t h = floats == bf16 ? bfloat16_bits(v[i]) : detail::float_to_half_bits(v[i]);
      GRADUS_CHECK(value_error, (h & 0x7fffu) != (floats == bf16 ? 0x7f80u : 0x7c00u) || std::isinf(v[i]),
                   "encode_safetensors: tensor '", name, "' element ", i, " is ", v[i], ", beyond the range of ",
                   narrow_dtype, " (largest ", floats == bf16 ? "3.3895e+38" : "65504", "); scale it first");
      out[at] = char(h & 0xffu);
      out[at + 1] = char(h >> 8);
    }
  }
  return out;
}

GRADUS_INLINE Safetensors decode_safetensors(std::string_view bytes, std::string_view source) {
  constexpr uint64_t kMaxHeader = 100'000'000;
  auto fail = [&](const auto&... parts) {
    ::gradus::detail::throw_error<io_error>({"safetensors: '", source, "': ", parts...});
  };
  if (bytes.size() < 8)
    fail("the file is ", bytes.size(), " bytes, shorter than the 8-byte header length (truncated or empty file)");
  const uint64_t n = detail::load_le<8>(bytes.data());
  if (n > kMaxHeader)
    fail("the header length ", n, " is over the 100 MB limit (corrupt file, or not a safetensors file)");
  if (n > bytes.size() - 8)
    fail("the header length ", n, " is more than the ", bytes.size() - 8, " bytes after it (truncated file?)");
  const std::string_view header = bytes.substr(8, size_t(n));
  const std::string_view data = bytes.substr(8 + size_t(n));

  detail::StHeaderParser parser(source, data.size());
  if (const std::string error = ::gradus::detail::read_json(header, parser); !error.empty())
    parser.fail("the header is not valid JSON: ", error);
  std::vector<detail::StEntry>& entries = parser.entries;

  // Two orders of the entries: by name (the names must be unique) and by offset (the data section
  // must be covered exactly once). Both sort the entries' positions with one comparator, so one
  // sort is compiled, over indices rather than the entries themselves.
  struct Order {
    const std::vector<detail::StEntry>* entries;
    bool by_name;
    bool operator()(size_t a, size_t b) const {
      const detail::StEntry &x = (*entries)[a], &y = (*entries)[b];
      if (by_name) return x.name < y.name;
      if (x.begin != y.begin) return x.begin < y.begin;
      if (x.end != y.end) return x.end < y.end;
      return a < b;  // where the offsets tie (empty tensors), in header order
    }
  };
  std::vector<size_t> order(entries.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::sort(order.begin(), order.end(), Order{&entries, true});
  for (size_t i = 1; i < order.size(); ++i)
    if (entries[order[i]].name == entries[order[i - 1]].name) fail("two tensors are named '", entries[order[i]].name, "'");
  std::sort(order.begin(), order.end(), Order{&entries, false});
  uint64_t pos = 0;
  const detail::StEntry* prev = nullptr;
  for (const size_t i : order) {
    const detail::StEntry& e = entries[i];
    if (e.begin < pos)
      fail("tensors '", prev->name, "' [", prev->begin, ", ", prev->end, ") and '", e.name, "' [", e.begin, ", ",
           e.end, ") overlap in the data section");
    if (e.begin > pos)
      fail("bytes [", pos, ", ", e.begin, ") of the data section belong to no tensor (the format allows no holes)");
    pos = e.end;
    if (e.end > e.begin) prev = &e;
  }
  if (pos != data.size())
    fail("the data section has ", data.size() - pos, " trailing bytes after the last tensor (it has ", data.size(),
         " bytes, the tensors cover ", pos, ")");

  Safetensors out;
  out.source = std::string(source);
  out.metadata = std::move(parser.metadata);
  out.tensors.reserve(entries.size());
  for (const size_t i : order) {  // in offset order
    detail::StEntry& e = entries[i];
    const char* src = data.data() + e.begin;
    AnyTensor t;
    switch (e.dtype) {
      case detail::Dtype::f32: t = detail::read_le<float>(src, e.shape); break;
      case detail::Dtype::f64: t = detail::read_le<double>(src, e.shape); break;
      case detail::Dtype::i64: t = detail::read_le<int64_t>(src, e.shape); break;
      case detail::Dtype::f16:
      case detail::Dtype::bf16:
        t = detail::read_half_le(src, e.shape, e.dtype == detail::Dtype::bf16);
        out.widened.emplace(e.name, e.dtype == detail::Dtype::bf16 ? "BF16" : "F16");
        break;
    }
    out.tensors.emplace_back(std::move(e.name), std::move(t));
  }
  return out;
}

GRADUS_INLINE void save_safetensors(const std::filesystem::path& path, const TensorList& tensors,
                                    const Metadata& metadata, Precision floats) {
  write_file_atomic(path, encode_safetensors(tensors, metadata, floats));
}

GRADUS_INLINE Safetensors load_safetensors(const std::filesystem::path& path, const char* who) {
  const std::string bytes = read_file(path, who);
  return decode_safetensors(bytes, path.string());
}
}  // namespace gradus::io
#endif  // GRADUS_DEFINE_COMPILED
