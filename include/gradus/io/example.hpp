// gradus/io/example.hpp — tf.train.Example and tf.train.SequenceExample: encoding, decoding, and
// typed parsing into tensors as tf.io.parse_single_example and parse_single_sequence_example do.
//
// The messages (tensorflow/core/example/feature.proto, example.proto):
//   BytesList        repeated bytes value = 1
//   FloatList        repeated float value = 1 [packed]
//   Int64List        repeated int64 value = 1 [packed]
//   Feature          oneof kind { BytesList bytes_list = 1; FloatList float_list = 2; Int64List int64_list = 3 }
//   Features         map<string, Feature> feature = 1      (entries: key = 1, value = 2)
//   FeatureList      repeated Feature feature = 1
//   FeatureLists     map<string, FeatureList> feature_list = 1
//   Example          Features features = 1
//   SequenceExample  Features context = 1; FeatureLists feature_lists = 2
// encode_* writes what protobuf's deterministic serializer writes: map entries sorted by key,
// each with its key and value; floats and int64s packed (an empty list leaves the field out);
// Example.features, SequenceExample.context and .feature_lists always present.
// decode_* accepts any valid encoding: packed and unpacked repeated floats and int64s, fields in
// any order, unknown fields skipped, a repeated message field merged (the same kind of list
// appends, another kind replaces it, as protobuf does for a oneof), the last map entry of a key
// winning. Malformed or truncated bytes are an io_error naming the message being decoded; no
// byte outside the input is read, and memory grows only with the values really present.
//
//   gd::io::Example ex;
//   ex.features["label"] = gd::io::Int64List{3};
//   ex.features["pixels"] = gd::io::FloatList{0.f, 0.5f, 1.f, 0.25f};
//   ex.features["name"] = gd::io::BytesList{"cat.png"};
//   std::string bytes = gd::io::encode_example(ex);
//   gd::io::ParsedFeatures p = gd::io::parse_single_example(bytes, {
//       {"label", gd::io::FixedLen{.shape = {}, .dtype = gd::io::FeatureDtype::int64}},
//       {"pixels", gd::io::FixedLen{.shape = {2, 2}, .dtype = gd::io::FeatureDtype::float32}},
//       {"weight", gd::io::FixedLen{.shape = {}, .dtype = gd::io::FeatureDtype::float32,
//                                   .default_value = gd::io::FloatList{1.f}}},
//       {"name", gd::io::VarLen{.dtype = gd::io::FeatureDtype::bytes}}});
//   gd::Tensor<float> pixels = p.floats("pixels");          // [2, 2]
//   int64_t label = p.int64s("label").item();               // 3
//
// parse_example parses a batch of serialized Examples at once (tf.io.parse_example): FixedLen
// features stacked to [records, *shape], VarLen ones as a SparseTensor (SparseBytes for bytes)
// of dense shape [records, longest list], as TensorFlow returns them.
//
// Parsing against a spec (value_error, naming the feature, when the example does not fit it):
// - FixedLen{shape, dtype, default_value}: a tensor of `shape` ([] is a scalar) that takes exactly
//   shape.numel() values of `dtype`; a missing feature takes default_value (shape.numel() values,
//   or one value repeated), and is an error without one.
// - VarLen{dtype}: a 1-D tensor of however many values the feature holds ([0] when missing) —
//   the values of TensorFlow's SparseTensor for one example.
// - Sequence features (parse_single_sequence_example): FixedLenSequence{shape, dtype} gives
//   [steps, *shape]; a missing feature list is an error unless allow_missing (then zero steps);
//   VarLen gives [steps, longest] padded with 0 or "" (TensorFlow's sparse result made dense),
//   [0, 0] when missing; padding that would take more than 1 GiB is a value_error.
// Floats come as Tensor<float>, int64s as Tensor<int64_t>, bytes as a BytesTensor (a shape and
// its row-major strings). A feature with no kind set holds zero values of any dtype.
#pragma once
#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "gradus/core/compiled.hpp"
#include "gradus/core/error.hpp"
#include "gradus/core/shape.hpp"
#include "gradus/core/sparse.hpp"
#include "gradus/core/tensor.hpp"
#include "gradus/detail/protobuf.hpp"

namespace gradus::io {

using BytesList = std::vector<std::string>;
using FloatList = std::vector<float>;
using Int64List = std::vector<int64_t>;

/// The type of a feature's values: bytes (tf.string), float32 (tf.float32), int64 (tf.int64).
enum class FeatureDtype { bytes, float32, int64 };

/// "bytes_list", "float_list" or "int64_list", as the proto names the lists.
constexpr std::string_view list_name(FeatureDtype d) {
  return d == FeatureDtype::bytes ? "bytes_list" : d == FeatureDtype::float32 ? "float_list" : "int64_list";
}

/// "bytes", "float32" or "int64".
constexpr std::string_view dtype_name(FeatureDtype d) {
  return d == FeatureDtype::bytes ? "bytes" : d == FeatureDtype::float32 ? "float32" : "int64";
}

/// One tf.train.Feature: a list of bytes, floats or int64s, or nothing (no kind set).
///   gd::io::Feature f = gd::io::FloatList{1.f, 2.f};
struct Feature {
  std::variant<std::monostate, BytesList, FloatList, Int64List> kind;

  Feature() = default;
  Feature(BytesList v) : kind(std::move(v)) {}
  Feature(FloatList v) : kind(std::move(v)) {}
  Feature(Int64List v) : kind(std::move(v)) {}

  /// The dtype of its list; std::nullopt when no kind is set.
  std::optional<FeatureDtype> dtype() const {
    if (kind.index() == 0) return std::nullopt;
    return FeatureDtype(kind.index() - 1);
  }
  /// The number of values in its list (0 when no kind is set).
  size_t size() const {
    return std::visit(
        [](const auto& v) -> size_t {
          if constexpr (std::is_same_v<std::decay_t<decltype(v)>, std::monostate>)
            return 0;
          else
            return v.size();
        },
        kind);
  }
  /// The list, value_error when it holds another kind.
  const BytesList& bytes_list() const { return get<BytesList>(FeatureDtype::bytes); }
  const FloatList& float_list() const { return get<FloatList>(FeatureDtype::float32); }
  const Int64List& int64_list() const { return get<Int64List>(FeatureDtype::int64); }

  friend bool operator==(const Feature&, const Feature&) = default;

 private:
  template <class List>
  const List& get(FeatureDtype want) const {
    const auto* v = std::get_if<List>(&kind);
    GRADUS_CHECK(value_error, v != nullptr, "Feature: holds ", dtype() ? list_name(*dtype()) : "no list",
                 ", not a ", list_name(want));
    return *v;
  }
};

/// tf.train.Features: the features of an example by name.
using Features = std::map<std::string, Feature, std::less<>>;
/// tf.train.FeatureList: one Feature per step of a sequence.
using FeatureList = std::vector<Feature>;
/// tf.train.FeatureLists: the feature lists of a SequenceExample by name.
using FeatureLists = std::map<std::string, FeatureList, std::less<>>;

/// tf.train.Example (the protocol buffer). Not gd::data::Example, the element of an input
/// pipeline (gradus/data/example.hpp), which data::parse_example fills from one of these.
struct Example {
  Features features;
  friend bool operator==(const Example&, const Example&) = default;
};

/// tf.train.SequenceExample: per-sequence `context` and per-step `feature_lists`.
struct SequenceExample {
  Features context;
  FeatureLists feature_lists;
  friend bool operator==(const SequenceExample&, const SequenceExample&) = default;
};

// ---------------------------------------------------------------------------------------
// Encoding and decoding.

namespace detail {

namespace pb = ::gradus::detail::proto;

std::string encode_feature(const Feature& f);

/// A map<string, M> field: one entry {key = 1, value = 2} per element, in key order.
template <class Map, class EncodeValue>
std::string encode_map(const Map& map, EncodeValue encode_value) {
  std::string out;
  for (const auto& [key, value] : map) {
    std::string entry;
    pb::put_bytes(entry, 1, key);
    pb::put_bytes(entry, 2, encode_value(value));
    pb::put_bytes(out, 1, entry);
  }
  return out;
}

std::string encode_features(const Features& f);

std::string encode_feature_list(const FeatureList& list);

/// Merges an encoded Feature into `f`: the same kind of list appends, another kind replaces.
void decode_feature_into(Feature& f, pb::ProtoReader r);

/// Decodes a map<string, V> entry into `map` (the last entry of a key wins); `decode_value`
/// merges an encoded value into a V.
template <class Map, class DecodeValue>
void decode_map_entry(Map& map, pb::ProtoReader entry, DecodeValue decode_value, std::string_view value_name) {
  std::string key;
  typename Map::mapped_type value{};
  while (entry.next()) {
    switch (entry.field()) {
      case 1: key = std::string(entry.bytes_value()); break;
      case 2: decode_value(value, entry.nested(value_name)); break;
      default: entry.skip();
    }
  }
  map.insert_or_assign(std::move(key), std::move(value));
}

void decode_features_into(Features& out, pb::ProtoReader r);

void decode_feature_list_into(FeatureList& out, pb::ProtoReader r);

}  // namespace detail

/// The protobuf encoding of `example` (a tf.train.Example's SerializeToString()).
std::string encode_example(const Example& example);

/// The tf.train.Example encoded in `bytes`; io_error on malformed or truncated bytes.
Example decode_example(std::string_view bytes);

/// The protobuf encoding of `example` (a tf.train.SequenceExample's SerializeToString()).
std::string encode_sequence_example(const SequenceExample& example);

/// The tf.train.SequenceExample encoded in `bytes`; io_error on malformed or truncated bytes.
SequenceExample decode_sequence_example(std::string_view bytes);

// ---------------------------------------------------------------------------------------
// Typed parsing.

/// A feature of fixed shape (tf.io.FixedLenFeature): `{.shape = {28, 28}, .dtype = FeatureDtype::float32}`.
struct FixedLen {
  Shape shape{};                           ///< [] for a scalar
  FeatureDtype dtype = FeatureDtype::float32;
  std::optional<Feature> default_value{};  ///< used when the feature is missing: numel or 1 values
};

/// A feature of any length (tf.io.VarLenFeature): a 1-D tensor of its values.
struct VarLen {
  FeatureDtype dtype = FeatureDtype::float32;
};

/// A per-step feature of a SequenceExample (tf.io.FixedLenSequenceFeature): [steps, *shape].
struct FixedLenSequence {
  Shape shape{};
  FeatureDtype dtype = FeatureDtype::float32;
  bool allow_missing = false;  ///< a missing feature list is then zero steps, not an error
};

/// What parse_single_example expects, by feature name.
using ParseSpec = std::map<std::string, std::variant<FixedLen, VarLen>, std::less<>>;
/// What parse_single_sequence_example expects of the feature lists, by name.
using SequenceParseSpec = std::map<std::string, std::variant<FixedLenSequence, VarLen>, std::less<>>;

/// Strings with a shape: the row-major values of a bytes feature.
struct BytesTensor {
  Shape shape;
  std::vector<std::string> values;
  friend bool operator==(const BytesTensor&, const BytesTensor&) = default;
};

/// One parsed feature: Tensor<float> (float32), Tensor<int64_t> (int64) or BytesTensor (bytes).
using FeatureTensor = std::variant<Tensor<float>, Tensor<int64_t>, BytesTensor>;

/// The tensors of a parsed example, by feature name; each accessor throws value_error naming
/// the feature when it is absent from the spec or of another dtype.
struct ParsedFeatures {
  std::map<std::string, FeatureTensor, std::less<>> values;

  bool contains(std::string_view name) const { return values.find(name) != values.end(); }
  const Tensor<float>& floats(std::string_view name) const { return get<Tensor<float>>(name, FeatureDtype::float32); }
  const Tensor<int64_t>& int64s(std::string_view name) const { return get<Tensor<int64_t>>(name, FeatureDtype::int64); }
  const BytesTensor& bytes(std::string_view name) const { return get<BytesTensor>(name, FeatureDtype::bytes); }

 private:
  template <class T>
  const T& get(std::string_view name, FeatureDtype want) const {
    const auto it = values.find(name);
    GRADUS_CHECK(value_error, it != values.end(), "ParsedFeatures: no feature '", name, "' was parsed");
    const T* t = std::get_if<T>(&it->second);
    constexpr FeatureDtype held[] = {FeatureDtype::float32, FeatureDtype::int64, FeatureDtype::bytes};
    GRADUS_CHECK(value_error, t != nullptr, "ParsedFeatures: feature '", name, "' holds ",
                 dtype_name(held[it->second.index()]), " values, not ", dtype_name(want));
    return *t;
  }
};

/// The context and per-step tensors of a parsed SequenceExample.
struct ParsedSequenceExample {
  ParsedFeatures context;
  ParsedFeatures sequence;
};

/// The values of a VarLen bytes feature over a batch: TensorFlow's SparseTensor of strings.
struct SparseBytes {
  Tensor<int64_t> indices;          ///< [nnz, 2]: (record, position in the record's list)
  std::vector<std::string> values;  ///< [nnz]
  Shape dense_shape;                ///< [records, longest list]
};

/// One feature of a parsed batch: FixedLen gives a dense tensor [records, *shape]
/// (Tensor<float>, Tensor<int64_t> or BytesTensor); VarLen a sparse one of dense shape
/// [records, longest list] (SparseTensor<float>, SparseTensor<int64_t> or SparseBytes).
using BatchFeature =
    std::variant<Tensor<float>, Tensor<int64_t>, BytesTensor, SparseTensor<float>, SparseTensor<int64_t>, SparseBytes>;

/// The tensors of a parsed batch of examples, by feature name (io::parse_example); each accessor
/// throws value_error naming the feature when it was not parsed or holds another kind.
struct ParsedBatch {
  int64_t records = 0;
  std::map<std::string, BatchFeature, std::less<>> values;

  bool contains(std::string_view name) const { return values.find(name) != values.end(); }
  const Tensor<float>& floats(std::string_view name) const { return get<Tensor<float>>(name, "FixedLen float32"); }
  const Tensor<int64_t>& int64s(std::string_view name) const { return get<Tensor<int64_t>>(name, "FixedLen int64"); }
  const BytesTensor& bytes(std::string_view name) const { return get<BytesTensor>(name, "FixedLen bytes"); }
  const SparseTensor<float>& sparse_floats(std::string_view name) const {
    return get<SparseTensor<float>>(name, "VarLen float32");
  }
  const SparseTensor<int64_t>& sparse_int64s(std::string_view name) const {
    return get<SparseTensor<int64_t>>(name, "VarLen int64");
  }
  const SparseBytes& sparse_bytes(std::string_view name) const { return get<SparseBytes>(name, "VarLen bytes"); }

 private:
  template <class T>
  const T& get(std::string_view name, std::string_view want) const {
    static constexpr std::string_view kinds[] = {"FixedLen float32", "FixedLen int64", "FixedLen bytes",
                                                 "VarLen float32",   "VarLen int64",   "VarLen bytes"};
    const auto it = values.find(name);
    GRADUS_CHECK(value_error, it != values.end(), "ParsedBatch: no feature '", name, "' was parsed");
    const T* t = std::get_if<T>(&it->second);
    GRADUS_CHECK(value_error, t != nullptr, "ParsedBatch: feature '", name, "' is ", kinds[it->second.index()],
                 ", not ", want);
    return *t;
  }
};

namespace detail {

void check_spec_shape(std::string_view who, std::string_view name, const Shape& shape);

/// Checks that `f` holds values of `dtype` (or no kind at all) before its values are used.
void check_dtype(std::string_view who, std::string_view name, std::string_view what, const Feature& f,
                        FeatureDtype dtype);

/// A zero-filled tensor of `dtype` and `shape` that features' values (dtypes already checked)
/// are copied into.
struct TensorBuilder {
  FeatureDtype dtype;
  Shape shape;
  FeatureTensor out;

  TensorBuilder(FeatureDtype d, const Shape& s);
  /// The elements of `out`, typed as the values of a `L` list.
  template <class L>
  auto* target() {
    if constexpr (std::is_same_v<L, FloatList>)
      return std::get<Tensor<float>>(out).data();
    else if constexpr (std::is_same_v<L, Int64List>)
      return std::get<Tensor<int64_t>>(out).data();
    else
      return std::get<BytesTensor>(out).values.data();
  }
  /// Copies the values of `f` to element `at` onwards; `repeat` copies its one value `count` times.
  void put(const Feature& f, int64_t at, int64_t count, bool repeat = false);

};

FeatureTensor parse_fixed(std::string_view who, std::string_view name, const FixedLen& spec,
                                 const Feature* f);

FeatureTensor parse_varlen(std::string_view who, std::string_view name, const VarLen& spec, const Feature* f);

ParsedFeatures parse_features(std::string_view who, const Features& features, const ParseSpec& spec);

FeatureTensor parse_sequence_fixed(std::string_view who, std::string_view name, const FixedLenSequence& spec,
                                          const FeatureList* list);

/// The most memory a VarLen feature list may pad to (1 GiB, counting 8 bytes per number and
/// sizeof(std::string) per bytes value), so that a few long steps among many short ones cannot
/// claim memory far beyond the values present.
inline constexpr int64_t kMaxPaddedBytes = int64_t(1) << 30;

FeatureTensor parse_sequence_varlen(std::string_view who, std::string_view name, const VarLen& spec,
                                           const FeatureList* list);

}  // namespace detail

/// The features of `features` that `spec` names, as tensors (see the top of this header).
ParsedFeatures parse_features(const Features& features, const ParseSpec& spec);

/// tf.io.parse_single_example: decodes the Example in `serialized` and parses the features that
/// `spec` names; io_error on malformed bytes, value_error when the example does not fit `spec`.
ParsedFeatures parse_single_example(std::string_view serialized, const ParseSpec& spec);

/// tf.io.parse_example: the Examples of a batch of serialized records parsed against `spec`
/// together: a FixedLen feature becomes [records, *shape], a VarLen one a SparseTensor (or
/// SparseBytes) of dense shape [records, longest list] whose indices are (record, position),
/// in row-major order, as TensorFlow's. io_error or value_error name the record at fault.
///   gd::io::ParsedBatch b = gd::io::parse_example(records, spec);
///   gd::SparseTensor<int64_t> tags = b.sparse_int64s("tags");     // [records, longest]
ParsedBatch parse_example(std::span<const std::string> serialized, const ParseSpec& spec);

/// tf.io.parse_single_sequence_example: the context features `context_spec` names and the
/// feature lists `sequence_spec` names, as tensors (see the top of this header).
ParsedSequenceExample parse_single_sequence_example(std::string_view serialized, const ParseSpec& context_spec,
                                                           const SequenceParseSpec& sequence_spec);

}  // namespace gradus::io

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::io::detail {
GRADUS_INLINE std::string encode_feature(const Feature& f) {
  std::string out;
  if (const auto* b = std::get_if<BytesList>(&f.kind)) {
    std::string list;
    for (const std::string& v : *b) pb::put_bytes(list, 1, v);
    pb::put_bytes(out, 1, list);
  } else if (const auto* fl = std::get_if<FloatList>(&f.kind)) {
    std::string list;
    if (!fl->empty()) pb::put_packed_floats(list, 1, *fl);
    pb::put_bytes(out, 2, list);
  } else if (const auto* il = std::get_if<Int64List>(&f.kind)) {
    std::string list;
    if (!il->empty()) pb::put_packed_int64s(list, 1, *il);
    pb::put_bytes(out, 3, list);
  }
  return out;
}

GRADUS_INLINE std::string encode_features(const Features& f) { return encode_map(f, encode_feature); }

GRADUS_INLINE std::string encode_feature_list(const FeatureList& list) {
  std::string out;
  for (const Feature& f : list) pb::put_bytes(out, 1, encode_feature(f));
  return out;
}

GRADUS_INLINE void decode_feature_into(Feature& f, pb::ProtoReader r) {
  while (r.next()) {
    switch (r.field()) {
      case 1: {
        if (!std::holds_alternative<BytesList>(f.kind)) f.kind = BytesList{};
        auto& out = std::get<BytesList>(f.kind);
        pb::ProtoReader list = r.nested("BytesList");
        while (list.next()) list.field() == 1 ? void(out.emplace_back(list.bytes_value())) : list.skip();
        break;
      }
      case 2: {
        if (!std::holds_alternative<FloatList>(f.kind)) f.kind = FloatList{};
        auto& out = std::get<FloatList>(f.kind);
        pb::ProtoReader list = r.nested("FloatList");
        while (list.next()) list.field() == 1 ? list.append_floats(out) : list.skip();
        break;
      }
      case 3: {
        if (!std::holds_alternative<Int64List>(f.kind)) f.kind = Int64List{};
        auto& out = std::get<Int64List>(f.kind);
        pb::ProtoReader list = r.nested("Int64List");
        while (list.next()) list.field() == 1 ? list.append_int64s(out) : list.skip();
        break;
      }
      default: r.skip();
    }
  }
}

GRADUS_INLINE void decode_features_into(Features& out, pb::ProtoReader r) {
  while (r.next()) {
    if (r.field() == 1)
      decode_map_entry(out, r.nested("Features.FeatureEntry"), decode_feature_into, "Feature");
    else
      r.skip();
  }
}

GRADUS_INLINE void decode_feature_list_into(FeatureList& out, pb::ProtoReader r) {
  while (r.next()) {
    if (r.field() == 1)
      decode_feature_into(out.emplace_back(), r.nested("Feature"));
    else
      r.skip();
  }
}
}  // namespace gradus::io::detail
namespace gradus::io {
GRADUS_INLINE std::string encode_example(const Example& example) {
  std::string out;
  detail::pb::put_bytes(out, 1, detail::encode_features(example.features));
  return out;
}

GRADUS_INLINE Example decode_example(std::string_view bytes) {
  Example ex;
  detail::pb::ProtoReader r(bytes, "Example", "decode_example");
  while (r.next()) {
    if (r.field() == 1)
      detail::decode_features_into(ex.features, r.nested("Features"));
    else
      r.skip();
  }
  return ex;
}

GRADUS_INLINE std::string encode_sequence_example(const SequenceExample& example) {
  std::string out;
  detail::pb::put_bytes(out, 1, detail::encode_features(example.context));
  detail::pb::put_bytes(out, 2, detail::encode_map(example.feature_lists, detail::encode_feature_list));
  return out;
}

GRADUS_INLINE SequenceExample decode_sequence_example(std::string_view bytes) {
  SequenceExample ex;
  detail::pb::ProtoReader r(bytes, "SequenceExample", "decode_sequence_example");
  while (r.next()) {
    switch (r.field()) {
      case 1: detail::decode_features_into(ex.context, r.nested("Features")); break;
      case 2: {
        detail::pb::ProtoReader lists = r.nested("FeatureLists");
        while (lists.next()) {
          if (lists.field() == 1)
            detail::decode_map_entry(ex.feature_lists, lists.nested("FeatureLists.FeatureListEntry"),
                                     detail::decode_feature_list_into, "FeatureList");
          else
            lists.skip();
        }
        break;
      }
      default: r.skip();
    }
  }
  return ex;
}
}  // namespace gradus::io
namespace gradus::io::detail {
GRADUS_INLINE void check_spec_shape(std::string_view who, std::string_view name, const Shape& shape) {
  for (int64_t d : shape)
    GRADUS_CHECK(value_error, d >= 0, who, ": feature '", name, "': the spec's shape ", shape,
                 " has a negative dimension");
}

GRADUS_INLINE void check_dtype(std::string_view who, std::string_view name, std::string_view what,
                               const Feature& f, FeatureDtype dtype) {
  GRADUS_CHECK(value_error, !f.dtype() || *f.dtype() == dtype, who, ": feature '", name, "': expected ",
               list_name(dtype), ", ", what, " holds ", list_name(*f.dtype()));
}

GRADUS_INLINE TensorBuilder::TensorBuilder(FeatureDtype d, const Shape& s) : dtype(d), shape(s) {
  if (d == FeatureDtype::float32) {
    out = Tensor<float>(s);
    std::fill_n(std::get<Tensor<float>>(out).data(), s.numel(), 0.f);
  } else if (d == FeatureDtype::int64) {
    out = Tensor<int64_t>(s);
    std::fill_n(std::get<Tensor<int64_t>>(out).data(), s.numel(), int64_t(0));
  } else {
    out = BytesTensor{s, std::vector<std::string>(size_t(s.numel()))};
  }
}

GRADUS_INLINE void TensorBuilder::put(const Feature& f, int64_t at, int64_t count, bool repeat) {
  std::visit(
      [&](const auto& list) {
        using L = std::decay_t<decltype(list)>;
        if constexpr (!std::is_same_v<L, std::monostate>) {
          auto* dst = target<L>();
          for (int64_t i = 0; i < count; ++i) dst[at + i] = list[repeat ? 0 : size_t(i)];
        }
      },
      f.kind);
}

GRADUS_INLINE FeatureTensor parse_fixed(std::string_view who, std::string_view name, const FixedLen& spec,
                                        const Feature* f) {
  check_spec_shape(who, name, spec.shape);
  const int64_t n = spec.shape.numel();
  TensorBuilder b(spec.dtype, spec.shape);
  if (f) {
    check_dtype(who, name, "the example", *f, spec.dtype);
    GRADUS_CHECK(value_error, int64_t(f->size()) == n, who, ": feature '", name, "': FixedLen shape ", spec.shape,
                 " takes ", n, " values, the example holds ", f->size());
    b.put(*f, 0, n);
    return std::move(b.out);
  }
  GRADUS_CHECK(value_error, spec.default_value.has_value(), who, ": feature '", name,
               "' is missing from the example and its FixedLen has no default_value");
  const Feature& d = *spec.default_value;
  check_dtype(who, name, "its default_value", d, spec.dtype);
  GRADUS_CHECK(value_error, int64_t(d.size()) == n || (d.size() == 1 && n > 0), who, ": feature '", name,
               "': FixedLen shape ", spec.shape, " takes ", n, " values (or one, repeated), its default_value holds ",
               d.size());
  b.put(d, 0, n, d.size() == 1 && n != 1);
  return std::move(b.out);
}

GRADUS_INLINE FeatureTensor parse_varlen(std::string_view who, std::string_view name, const VarLen& spec,
                                         const Feature* f) {
  const int64_t n = f ? int64_t(f->size()) : 0;
  if (f) check_dtype(who, name, "the example", *f, spec.dtype);
  TensorBuilder b(spec.dtype, {n});
  if (f) b.put(*f, 0, n);
  return std::move(b.out);
}

GRADUS_INLINE ParsedFeatures parse_features(std::string_view who, const Features& features, const ParseSpec& spec) {
  ParsedFeatures out;
  for (const auto& entry : spec) {  // not a structured binding: clang 14 cannot capture one
    const std::string& name = entry.first;
    const auto it = features.find(name);
    const Feature* f = it == features.end() ? nullptr : &it->second;
    out.values.emplace(name, std::visit(
                                 [&](const auto& one) {
                                   if constexpr (std::is_same_v<std::decay_t<decltype(one)>, FixedLen>)
                                     return parse_fixed(who, name, one, f);
                                   else
                                     return parse_varlen(who, name, one, f);
                                 },
                                 entry.second));
  }
  return out;
}

GRADUS_INLINE FeatureTensor parse_sequence_fixed(std::string_view who, std::string_view name,
                                                 const FixedLenSequence& spec, const FeatureList* list) {
  check_spec_shape(who, name, spec.shape);
  GRADUS_CHECK(value_error, list || spec.allow_missing, who, ": feature list '", name,
               "' is missing from the example (set allow_missing for zero steps)");
  const int64_t steps = list ? int64_t(list->size()) : 0;
  const int64_t n = spec.shape.numel();
  Shape shape = spec.shape;
  GRADUS_CHECK(value_error, shape.rank() < kMaxRank, who, ": feature list '", name, "': shape ", spec.shape,
               " leaves no room for the steps' axis (rank ", kMaxRank, " at most)");
  shape.insert(0, steps);
  TensorBuilder b(spec.dtype, shape);
  for (int64_t t = 0; t < steps; ++t) {
    const Feature& f = (*list)[size_t(t)];
    check_dtype(who, name, ::gradus::detail::str("step ", t), f, spec.dtype);
    GRADUS_CHECK(value_error, int64_t(f.size()) == n, who, ": feature list '", name, "': step ", t,
                 " holds ", f.size(), " values, FixedLenSequence shape ", spec.shape, " takes ", n);
    b.put(f, t * n, n);
  }
  return std::move(b.out);
}

GRADUS_INLINE FeatureTensor parse_sequence_varlen(std::string_view who, std::string_view name, const VarLen& spec,
                                                  const FeatureList* list) {
  const int64_t steps = list ? int64_t(list->size()) : 0;
  int64_t longest = 0;
  for (int64_t t = 0; t < steps; ++t) {
    const Feature& f = (*list)[size_t(t)];
    check_dtype(who, name, ::gradus::detail::str("step ", t), f, spec.dtype);
    longest = std::max(longest, int64_t(f.size()));
  }
  const int64_t padded = Shape::count(std::vector<int64_t>{steps, longest});
  const int64_t element = spec.dtype == FeatureDtype::bytes ? int64_t(sizeof(std::string)) : 8;
  GRADUS_CHECK(value_error, padded >= 0 && padded <= kMaxPaddedBytes / element, who, ": feature list '", name,
               "': ", steps, " steps padded to the longest (", longest, " values) would take more than ",
               kMaxPaddedBytes >> 20, " MiB");
  TensorBuilder b(spec.dtype, {steps, longest});
  for (int64_t t = 0; t < steps; ++t) {
    const Feature& f = (*list)[size_t(t)];
    b.put(f, t * longest, int64_t(f.size()));
  }
  return std::move(b.out);
}
}  // namespace gradus::io::detail
namespace gradus::io {
GRADUS_INLINE ParsedFeatures parse_features(const Features& features, const ParseSpec& spec) {
  return detail::parse_features("parse_features", features, spec);
}

GRADUS_INLINE ParsedFeatures parse_single_example(std::string_view serialized, const ParseSpec& spec) {
  return detail::parse_features("parse_single_example", decode_example(serialized).features, spec);
}

GRADUS_INLINE ParsedBatch parse_example(std::span<const std::string> serialized, const ParseSpec& spec) {
  const auto records = int64_t(serialized.size());
  std::vector<ParsedFeatures> parsed;
  parsed.reserve(serialized.size());
  for (int64_t r = 0; r < records; ++r) {
    const std::string who = ::gradus::detail::str("parse_example: record ", r);
    Example ex;
    try {
      ex = decode_example(serialized[size_t(r)]);
    } catch (const io_error& e) {
      ::gradus::detail::throw_error<io_error>({who, ": ", e.what()});
    }
    parsed.push_back(detail::parse_features(who, ex.features, spec));
  }
  ParsedBatch out;
  out.records = records;
  for (const auto& entry : spec) {  // not a structured binding: clang 14 cannot capture one
    const std::string& name = entry.first;
    if (const auto* fixed = std::get_if<FixedLen>(&entry.second)) {
      Shape shape = fixed->shape;
      GRADUS_CHECK(value_error, shape.rank() < kMaxRank, "parse_example: feature '", name, "': shape ", fixed->shape,
                   " leaves no room for the records' axis (rank ", kMaxRank, " at most)");
      shape.insert(0, records);
      const int64_t n = fixed->shape.numel();
      auto stack = [&]<class T>(std::type_identity<T>) {
        T all(shape);
        for (int64_t r = 0; r < records; ++r) {
          const T& one = std::get<T>(parsed[size_t(r)].values.at(name));
          std::copy_n(one.data(), n, all.data() + r * n);
        }
        return all;
      };
      if (fixed->dtype == FeatureDtype::float32) {
        out.values.emplace(name, stack(std::type_identity<Tensor<float>>{}));
      } else if (fixed->dtype == FeatureDtype::int64) {
        out.values.emplace(name, stack(std::type_identity<Tensor<int64_t>>{}));
      } else {
        BytesTensor all{shape, {}};
        all.values.reserve(size_t(records * n));
        for (int64_t r = 0; r < records; ++r) {
          auto& one = std::get<BytesTensor>(parsed[size_t(r)].values.at(name)).values;
          for (auto& v : one) all.values.push_back(std::move(v));
        }
        out.values.emplace(name, std::move(all));
      }
      continue;
    }
    // VarLen: (record, position) of every value, the longest list giving the dense shape's width
    int64_t nnz = 0, longest = 0;
    auto size_of = [&](const FeatureTensor& t) {
      return std::visit([](const auto& v) -> int64_t {
        if constexpr (std::is_same_v<std::decay_t<decltype(v)>, BytesTensor>)
          return int64_t(v.values.size());
        else
          return v.size();
      }, t);
    };
    for (int64_t r = 0; r < records; ++r) {
      const int64_t k = size_of(parsed[size_t(r)].values.at(name));
      nnz += k, longest = std::max(longest, k);
    }
    Tensor<int64_t> indices(Shape{nnz, 2});
    for (int64_t r = 0, i = 0; r < records; ++r)
      for (int64_t j = 0, k = size_of(parsed[size_t(r)].values.at(name)); j < k; ++j, ++i)
        indices.data()[2 * i] = r, indices.data()[2 * i + 1] = j;
    const Shape dense{records, longest};
    auto gather = [&]<class T>(std::type_identity<T>) {
      Tensor<T> all(Shape{nnz});
      int64_t at = 0;
      for (int64_t r = 0; r < records; ++r) {
        const Tensor<T>& one = std::get<Tensor<T>>(parsed[size_t(r)].values.at(name));
        std::copy_n(one.data(), one.size(), all.data() + at);
        at += one.size();
      }
      return SparseTensor<T>{indices, std::move(all), dense};
    };
    const FeatureDtype dtype = std::get<VarLen>(entry.second).dtype;
    if (dtype == FeatureDtype::float32) {
      out.values.emplace(name, gather(std::type_identity<float>{}));
    } else if (dtype == FeatureDtype::int64) {
      out.values.emplace(name, gather(std::type_identity<int64_t>{}));
    } else {
      SparseBytes all{indices, {}, dense};
      all.values.reserve(size_t(nnz));
      for (int64_t r = 0; r < records; ++r)
        for (auto& v : std::get<BytesTensor>(parsed[size_t(r)].values.at(name)).values) all.values.push_back(std::move(v));
      out.values.emplace(name, std::move(all));
    }
  }
  return out;
}

GRADUS_INLINE ParsedSequenceExample parse_single_sequence_example(std::string_view serialized,
                                                                  const ParseSpec& context_spec,
                                                                  const SequenceParseSpec& sequence_spec) {
  constexpr std::string_view who = "parse_single_sequence_example";
  const SequenceExample ex = decode_sequence_example(serialized);
  ParsedSequenceExample out;
  out.context = detail::parse_features(who, ex.context, context_spec);
  for (const auto& entry : sequence_spec) {
    const std::string& name = entry.first;
    const auto it = ex.feature_lists.find(name);
    const FeatureList* list = it == ex.feature_lists.end() ? nullptr : &it->second;
    out.sequence.values.emplace(name, std::visit(
                                          [&](const auto& one) {
                                            if constexpr (std::is_same_v<std::decay_t<decltype(one)>, VarLen>)
                                              return detail::parse_sequence_varlen(who, name, one, list);
                                            else
                                              return detail::parse_sequence_fixed(who, name, one, list);
                                          },
                                          entry.second));
  }
  return out;
}
}  // namespace gradus::io
#endif  // GRADUS_DEFINE_COMPILED
