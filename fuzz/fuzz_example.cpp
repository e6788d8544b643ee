// libFuzzer harness: tf.train.Example and SequenceExample bytes through decode_*, their re-encoding
// (which must decode to the same message), and the typed parsers with a spec of every kind; the
// bytes split into two records for the batched parse_example (whose sparse indices must lie in
// their dense shape), and read by decode_raw as every stored type.
#include <cmath>

#include <gradus/io.hpp>

#include "fuzz_common.hpp"

namespace {

namespace io = gradus::io;
using io::FeatureDtype;

void exercise(const io::ParsedFeatures& p) {
  for (const auto& [name, t] : p.values) {
    if (const auto* f = std::get_if<gradus::Tensor<float>>(&t)) gradus::fuzz::exercise(*f);
    if (const auto* i = std::get_if<gradus::Tensor<int64_t>>(&t)) gradus::fuzz::exercise(*i);
  }
}

/// Float lists compare unequal to themselves when they hold a NaN: such messages skip the check.
bool has_nan(const io::Feature& f) {
  if (const auto* v = std::get_if<io::FloatList>(&f.kind))
    for (float x : *v)
      if (std::isnan(x)) return true;
  return false;
}
bool has_nan(const io::Features& features) {
  for (const auto& [name, f] : features)
    if (has_nan(f)) return true;
  return false;
}
bool has_nan(const io::SequenceExample& se) {
  for (const auto& [name, list] : se.feature_lists)
    for (const io::Feature& f : list)
      if (has_nan(f)) return true;
  return has_nan(se.context);
}

}  // namespace

GRADUS_FUZZ_TARGET(example) {
  const std::string_view in = gradus::fuzz::bytes(data, size);
  // Names of one byte, so the fuzzer finds them: "a" to "e" in the seeds.
  const io::ParseSpec spec = {
      {"a", io::FixedLen{.shape = {2}, .dtype = FeatureDtype::float32, .default_value = io::FloatList{0.f}}},
      {"b", io::FixedLen{.shape = {}, .dtype = FeatureDtype::int64}},
      {"c", io::VarLen{.dtype = FeatureDtype::bytes}},
      {"d", io::VarLen{.dtype = FeatureDtype::int64}},
      {"e", io::FixedLen{.shape = {1, 2}, .dtype = FeatureDtype::bytes, .default_value = io::BytesList{"x", "y"}}},
  };
  const io::SequenceParseSpec sequence_spec = {
      {"a", io::FixedLenSequence{.shape = {2}, .dtype = FeatureDtype::float32, .allow_missing = true}},
      {"b", io::VarLen{.dtype = FeatureDtype::int64}},
      {"c", io::VarLen{.dtype = FeatureDtype::bytes}},
  };
  try {
    const io::Example ex = io::decode_example(in);
    const io::Example again = io::decode_example(io::encode_example(ex));
    if (!has_nan(ex.features) && !(again == ex)) __builtin_trap();
    exercise(io::parse_features(ex.features, spec));
  } catch (const gradus::error&) {
  }
  try {
    const std::vector<std::string> records = {std::string(in.substr(0, in.size() / 2)), std::string(in.substr(in.size() / 2))};
    const io::ParsedBatch batch = io::parse_example(records, spec);
    for (const char* name : {"d"}) {
      const gradus::SparseTensor<int64_t>& sp = batch.sparse_int64s(name);
      sp.check("fuzz");  // every index inside the dense shape
      if (sp.dense_shape[0] != 2) __builtin_trap();
    }
  } catch (const gradus::error&) {
  }
  for (io::RawType t : {io::RawType::uint8, io::RawType::int16, io::RawType::int32, io::RawType::int64,
                        io::RawType::float16, io::RawType::bfloat16, io::RawType::float32}) {
    try {
      const bool is_int = t == io::RawType::int16 || t == io::RawType::int32 || t == io::RawType::int64;
      const int64_t n = is_int ? io::decode_raw<int64_t>(in, {.type = t, .little_endian = size % 2 == 0}).size()
                        : t == io::RawType::uint8 ? io::decode_raw<uint8_t>(in).size()
                                                  : io::decode_raw<float>(in, {.type = t}).size();
      if (n != int64_t(size) / io::raw_size(t, 1)) __builtin_trap();
    } catch (const gradus::error&) {
    }
  }
  try {
    const io::SequenceExample se = io::decode_sequence_example(in);
    const io::SequenceExample again = io::decode_sequence_example(io::encode_sequence_example(se));
    if (!has_nan(se) && !(again == se)) __builtin_trap();
    const io::ParsedSequenceExample p = io::parse_single_sequence_example(in, {{"a", io::VarLen{}}}, sequence_spec);
    exercise(p.context);
    exercise(p.sequence);
  } catch (const gradus::error&) {
  }
  return 0;
}
