// tf.train.Example and SequenceExample: the encoding against bytes written independently by
// tests/fixtures/io/make_tfrecord_fixtures.py (the wire format by hand in Python), decoding of
// packed and unpacked lists, merged fields and unknown fields, malformed bytes rejected, and the
// typed parse spec (FixedLen, VarLen, FixedLenSequence) with its defaults and errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include <gradus/core/rng.hpp>
#include <gradus/io.hpp>

namespace gd = gradus;
namespace io = gradus::io;
namespace fs = std::filesystem;
using Catch::Contains;
using io::FeatureDtype;

namespace {

std::string fixture(const std::string& name) {
  std::ifstream f(fs::path(GRADUS_TEST_DATA_DIR) / "io" / name, std::ios::binary);
  REQUIRE(f.good());
  return {std::istreambuf_iterator<char>(f), {}};
}

/// EXAMPLE of make_tfrecord_fixtures.py.
io::Example fixture_example() {
  io::Example ex;
  ex.features["label"] = io::Int64List{3, -1, 300};
  ex.features["pixels"] = io::FloatList{0.5f, -2.f, 1.f, 0.25f};
  ex.features["name"] = io::BytesList{"cat.png", ""};
  ex.features["empty"] = io::FloatList{};
  return ex;
}

}  // namespace

TEST_CASE("Example: encoded byte for byte as Python's hand-written wire format, and decoded back", "[io][example]") {
  const std::string golden = fixture("example.pb");
  // The start by hand: Example.features (field 1, wire type 2) = 0x0a, length 0x60; its first
  // map entry (field 1) 0x0a 0x0b: key "empty" (0x0a 0x05 ...), value (0x12 0x02) = Feature with
  // an empty float_list (field 2: 0x12 0x00).
  CHECK(golden.substr(0, 17) == std::string("\x0a\x60\x0a\x0b\x0a\x05" "empty" "\x12\x02\x12\x00\x0a\x1a", 17));
  const io::Example ex = fixture_example();
  CHECK(io::encode_example(ex) == golden);
  CHECK(io::decode_example(golden) == ex);
  CHECK(io::decode_example("") == io::Example{});
  CHECK(io::encode_example(io::Example{}) == std::string("\x0a\x00", 2));

  // int64 -1 is ten varint bytes (two's complement); 300 is 0xac 0x02.
  const io::Example one{{{"v", io::Int64List{-1, 300}}}};
  CHECK(io::encode_example(one) == std::string("\x0a\x17\x0a\x15\x0a\x01v\x12\x10\x1a\x0e\x0a\x0c"
                                               "\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01\xac\x02", 25));
}

TEST_CASE("Example: unpacked lists, fields out of order, merged and unknown fields decode as protobuf does",
          "[io][example]") {
  io::Example want = fixture_example();
  // "stale" came first as a float list, then a later Features field replaced the entry.
  want.features["stale"] = io::BytesList{"new"};
  const io::Example got = io::decode_example(fixture("example_unpacked.pb"));
  CHECK(got.features.at("label").int64_list() == io::Int64List{3, -1, 300});
  CHECK(got.features.at("pixels").float_list() == io::FloatList{0.5f, -2.f, 1.f, 0.25f});
  CHECK(got.features.at("empty").dtype() == FeatureDtype::float32);
  CHECK(got == want);
}

TEST_CASE("SequenceExample: encoded as the fixture, decoded back", "[io][example]") {
  io::SequenceExample se;
  se.context["length"] = io::Int64List{2};
  se.feature_lists["tokens"] = {io::Int64List{4, 5}, io::Int64List{6, 7}};
  se.feature_lists["words"] = {io::BytesList{"a", "bc"}, io::BytesList{"d"}};
  const std::string golden = fixture("sequence_example.pb");
  CHECK(io::encode_sequence_example(se) == golden);
  CHECK(io::decode_sequence_example(golden) == se);
  // An Example's bytes are a SequenceExample with only a context (the same field 1).
  CHECK(io::decode_sequence_example(fixture("example.pb")).context == fixture_example().features);
}

TEST_CASE("Example: random examples round-trip, extreme values included", "[io][example]") {
  gd::Rng rng(3);
  for (int trial = 0; trial < 200; ++trial) {
    io::Example ex;
    const int n = int(rng.next() % 6);
    for (int k = 0; k < n; ++k) {
      const std::string name = "f" + std::to_string(rng.next() % 10);
      const size_t len = rng.next() % 5;
      switch (rng.next() % 4) {
        case 0: {
          io::BytesList b;
          for (size_t i = 0; i < len; ++i) b.push_back(std::string(rng.next() % 200, char(rng.next())));
          ex.features[name] = b;
          break;
        }
        case 1: {
          io::FloatList f;
          for (size_t i = 0; i < len; ++i) f.push_back(float(int64_t(rng.next() % 2001) - 1000) / 8.f);
          if (len > 0) f[0] = rng.next() % 2 ? std::numeric_limits<float>::infinity() : -0.f;
          ex.features[name] = f;
          break;
        }
        case 2: {
          io::Int64List v;
          for (size_t i = 0; i < len; ++i) v.push_back(int64_t(rng.next()));
          if (len > 1) v[1] = std::numeric_limits<int64_t>::min();
          ex.features[name] = v;
          break;
        }
        default: ex.features[name] = io::Feature{};  // no kind
      }
    }
    const std::string bytes = io::encode_example(ex);
    CHECK(io::decode_example(bytes) == ex);
  }
}

TEST_CASE("Example: malformed or truncated bytes are an io_error naming the message", "[io][example]") {
  const std::string golden = fixture("example.pb");
  for (size_t cut = 1; cut < golden.size(); ++cut) {
    INFO("cut at " << cut);
    CHECK_THROWS_AS(io::decode_example(std::string_view(golden).substr(0, cut)), gd::io_error);
  }
  // Every byte flipped: an io_error or some other valid message, never a crash (ASan checks reads).
  for (size_t pos = 0; pos < golden.size(); ++pos) {
    std::string bad = golden;
    bad[pos] = char(bad[pos] ^ 0x80);
    try {
      (void)io::decode_example(bad);
    } catch (const gd::io_error&) {
    }
  }
  auto features_with = [](const std::string& feature) {
    // Example { features { feature { key "x" value <feature> } } }
    std::string entry = std::string("\x0a\x01x\x12", 4) + char(feature.size()) + feature;
    std::string features = std::string("\x0a", 1) + char(entry.size()) + entry;
    return std::string("\x0a", 1) + char(features.size()) + features;
  };
  CHECK_THROWS_WITH(io::decode_example(features_with(std::string("\x12\x03\x0a\x01\x00", 5))),
                    Contains("decode_example: FloatList") && Contains("not a multiple of 4"));
  CHECK_THROWS_WITH(io::decode_example(features_with(std::string("\x12\x02\x0a\x05", 4))),
                    Contains("FloatList") && Contains("needs 5 bytes, 0 left"));
  CHECK_THROWS_WITH(io::decode_example(features_with(std::string("\x1a\x02\x0a\x05", 4))),
                    Contains("Int64List") && Contains("needs 5 bytes"));
  CHECK_THROWS_WITH(io::decode_example(features_with(std::string("\x1a\x02\x08\x80", 4))),
                    Contains("Int64List") && Contains("truncated varint"));
  CHECK_THROWS_WITH(io::decode_example(features_with(std::string("\x1a\x03\x0a\x01\x80", 5))),
                    Contains("Int64List") && Contains("truncated varint"));
  CHECK_THROWS_WITH(io::decode_example(features_with(std::string("\x12\x02\x08\x01", 4))),
                    Contains("FloatList: field 1 has wire type 0, expected 2"));
  CHECK_THROWS_WITH(io::decode_example(std::string("\x0a\x0b\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", 13)),
                    Contains("Features") && Contains("varint longer than 10 bytes"));
  CHECK_THROWS_WITH(io::decode_example(std::string("\x0b", 1)), Contains("wire type 3"));  // a group
  CHECK_THROWS_WITH(io::decode_example(std::string("\x0e", 1)), Contains("wire type 6"));
  CHECK_THROWS_WITH(io::decode_example(std::string("\x02\x00", 2)), Contains("Example: invalid field number 0"));
  CHECK_THROWS_WITH(io::decode_example(std::string("\x0a\x7f", 2)), Contains("Example: field 1 needs 127 bytes, 0 left"));
  CHECK_THROWS_WITH(io::decode_sequence_example(std::string("\x12\x02\x0a\x05", 4)),
                    Contains("decode_sequence_example: FeatureLists"));
  CHECK_THROWS_WITH(io::parse_single_example(std::string("\x0a\x7f", 2), {}), Contains("decode_example"));
}

TEST_CASE("Feature: the accessors name the kind they hold", "[io][example]") {
  const io::Feature f = io::FloatList{1.f};
  CHECK(f.float_list() == io::FloatList{1.f});
  CHECK(f.size() == 1);
  CHECK(f.dtype() == FeatureDtype::float32);
  CHECK_THROWS_WITH(f.int64_list(), Contains("holds float_list, not a int64_list"));
  CHECK_THROWS_WITH(io::Feature{}.bytes_list(), Contains("holds no list"));
  CHECK_FALSE(io::Feature{}.dtype().has_value());
  CHECK(io::Feature{}.size() == 0);
}

TEST_CASE("parse_single_example: FixedLen and VarLen give tensors; defaults fill missing features",
          "[io][example]") {
  io::Example ex;
  ex.features["label"] = io::Int64List{3};
  ex.features["pixels"] = io::FloatList{0.f, 0.5f, 1.f, 0.25f, 2.f, 4.f};
  ex.features["name"] = io::BytesList{"cat.png"};
  ex.features["tags"] = io::BytesList{"a", "b", "c"};
  ex.features["none"] = io::Feature{};
  const std::string bytes = io::encode_example(ex);

  const io::ParsedFeatures p = io::parse_single_example(
      bytes, {
                 {"label", io::FixedLen{.shape = {}, .dtype = FeatureDtype::int64}},
                 {"pixels", io::FixedLen{.shape = {2, 3}, .dtype = FeatureDtype::float32}},
                 {"name", io::FixedLen{.shape = {1}, .dtype = FeatureDtype::bytes}},
                 {"weight", io::FixedLen{.shape = {}, .dtype = FeatureDtype::float32, .default_value = io::FloatList{1.5f}}},
                 {"mask", io::FixedLen{.shape = {2, 2}, .dtype = FeatureDtype::int64, .default_value = io::Int64List{7}}},
                 {"box", io::FixedLen{.shape = {2}, .dtype = FeatureDtype::float32,
                                      .default_value = io::FloatList{0.25f, 0.75f}}},
                 {"tags", io::VarLen{.dtype = FeatureDtype::bytes}},
                 {"ids", io::VarLen{.dtype = FeatureDtype::int64}},
                 {"none", io::VarLen{.dtype = FeatureDtype::float32}},
             });
  CHECK(p.values.size() == 9);
  CHECK(p.int64s("label").rank() == 0);
  CHECK(p.int64s("label").item() == 3);
  const gd::Tensor<float>& px = p.floats("pixels");
  CHECK(px.shape() == gd::Shape{2, 3});
  CHECK(px(1, 2) == 4.f);
  CHECK(px(0, 1) == 0.5f);
  CHECK(p.bytes("name") == io::BytesTensor{{1}, {"cat.png"}});
  CHECK(p.floats("weight").item() == 1.5f);
  CHECK(p.int64s("mask").shape() == gd::Shape{2, 2});
  for (int64_t i = 0; i < 4; ++i) CHECK(p.int64s("mask").data()[i] == 7);
  CHECK(p.floats("box")(1) == 0.75f);
  CHECK(p.bytes("tags") == io::BytesTensor{{3}, {"a", "b", "c"}});
  CHECK(p.int64s("ids").shape() == gd::Shape{0});    // missing VarLen: empty
  CHECK(p.floats("none").shape() == gd::Shape{0});   // no kind: zero values of any dtype
}

TEST_CASE("parse_single_example: clear errors for missing features, wrong dtypes and sizes", "[io][example]") {
  io::Example ex;
  ex.features["label"] = io::Int64List{3, 4};
  ex.features["score"] = io::FloatList{0.5f};
  const std::string bytes = io::encode_example(ex);
  auto parse = [&](const io::ParseSpec& spec) { return io::parse_single_example(bytes, spec); };

  CHECK_THROWS_WITH(parse({{"missing", io::FixedLen{.shape = {2}, .dtype = FeatureDtype::float32}}}),
                    Contains("parse_single_example: feature 'missing' is missing from the example and its FixedLen "
                             "has no default_value"));
  // Even a shape of no elements: a missing FixedLen feature needs its default (an empty one here).
  CHECK_THROWS_AS(parse({{"missing", io::FixedLen{.shape = {0}, .dtype = FeatureDtype::float32}}}), gd::value_error);
  CHECK(parse({{"missing", io::FixedLen{.shape = {0}, .dtype = FeatureDtype::float32, .default_value = io::FloatList{}}}})
            .floats("missing")
            .shape() == gd::Shape{0});
  CHECK_THROWS_WITH(parse({{"label", io::FixedLen{.shape = {2}, .dtype = FeatureDtype::float32}}}),
                    Contains("feature 'label': expected float_list, the example holds int64_list"));
  CHECK_THROWS_WITH(parse({{"label", io::VarLen{.dtype = FeatureDtype::bytes}}}),
                    Contains("feature 'label': expected bytes_list, the example holds int64_list"));
  CHECK_THROWS_WITH(parse({{"label", io::FixedLen{.shape = {2, 3}, .dtype = FeatureDtype::int64}}}),
                    Contains("feature 'label': FixedLen shape [2,3] takes 6 values, the example holds 2"));
  CHECK_THROWS_WITH(parse({{"label", io::FixedLen{.shape = {}, .dtype = FeatureDtype::int64}}}),
                    Contains("takes 1 values, the example holds 2"));
  CHECK_THROWS_WITH(parse({{"w", io::FixedLen{.shape = {3}, .dtype = FeatureDtype::float32,
                                              .default_value = io::FloatList{1.f, 2.f}}}}),
                    Contains("feature 'w': FixedLen shape [3] takes 3 values (or one, repeated), its default_value "
                             "holds 2"));
  CHECK_THROWS_WITH(parse({{"w", io::FixedLen{.shape = {}, .dtype = FeatureDtype::float32,
                                              .default_value = io::Int64List{1}}}}),
                    Contains("feature 'w': expected float_list, its default_value holds int64_list"));
  CHECK_THROWS_WITH(parse({{"w", io::FixedLen{.shape = {-1}, .dtype = FeatureDtype::float32}}}),
                    Contains("negative dimension"));
  // A feature present with the right values ignores its default.
  CHECK(parse({{"score", io::FixedLen{.shape = {1}, .dtype = FeatureDtype::float32, .default_value = io::FloatList{9.f}}}})
            .floats("score")(0) == 0.5f);

  const io::ParsedFeatures p = parse({{"label", io::VarLen{.dtype = FeatureDtype::int64}}});
  CHECK_THROWS_WITH(p.floats("label"), Contains("feature 'label' holds int64 values, not float32"));
  CHECK_THROWS_WITH(p.bytes("other"), Contains("no feature 'other' was parsed"));
  CHECK(p.contains("label"));
  CHECK_FALSE(p.contains("score"));
  // parse_features takes an Example already decoded.
  CHECK(io::parse_features(ex.features, {{"score", io::VarLen{}}}).floats("score")(0) == 0.5f);
}

TEST_CASE("parse_single_sequence_example: context and per-step tensors", "[io][example]") {
  io::SequenceExample se;
  se.context["length"] = io::Int64List{3};
  se.feature_lists["frames"] = {io::FloatList{1, 2}, io::FloatList{3, 4}, io::FloatList{5, 6}};
  se.feature_lists["words"] = {io::BytesList{"a", "bc"}, io::BytesList{}, io::BytesList{"d"}};
  se.feature_lists["ids"] = {io::Int64List{1}, io::Int64List{2, 3, 4}};
  se.feature_lists["ragged"] = {io::FloatList{1}, io::FloatList{1, 2}};
  const std::string bytes = io::encode_sequence_example(se);

  const io::ParsedSequenceExample p = io::parse_single_sequence_example(
      bytes, {{"length", io::FixedLen{.shape = {}, .dtype = FeatureDtype::int64}}},
      {
          {"frames", io::FixedLenSequence{.shape = {2}, .dtype = FeatureDtype::float32}},
          {"words", io::VarLen{.dtype = FeatureDtype::bytes}},
          {"ids", io::VarLen{.dtype = FeatureDtype::int64}},
          {"absent", io::FixedLenSequence{.shape = {4}, .dtype = FeatureDtype::float32, .allow_missing = true}},
          {"absent_var", io::VarLen{.dtype = FeatureDtype::float32}},
      });
  CHECK(p.context.int64s("length").item() == 3);
  const auto& frames = p.sequence.floats("frames");
  CHECK(frames.shape() == gd::Shape{3, 2});
  CHECK(frames(2, 1) == 6.f);
  CHECK(p.sequence.bytes("words") == io::BytesTensor{{3, 2}, {"a", "bc", "", "", "d", ""}});
  const auto& ids = p.sequence.int64s("ids");
  CHECK(ids.shape() == gd::Shape{2, 3});
  CHECK(std::vector<int64_t>(ids.data(), ids.data() + 6) == std::vector<int64_t>{1, 0, 0, 2, 3, 4});
  CHECK(p.sequence.floats("absent").shape() == gd::Shape{0, 4});
  CHECK(p.sequence.floats("absent_var").shape() == gd::Shape{0, 0});

  auto parse = [&](const io::SequenceParseSpec& spec) { return io::parse_single_sequence_example(bytes, {}, spec); };
  CHECK_THROWS_WITH(parse({{"absent", io::FixedLenSequence{.shape = {4}, .dtype = FeatureDtype::float32}}}),
                    Contains("parse_single_sequence_example: feature list 'absent' is missing") &&
                        Contains("allow_missing"));
  CHECK_THROWS_WITH(parse({{"ragged", io::FixedLenSequence{.shape = {1}, .dtype = FeatureDtype::float32}}}),
                    Contains("feature list 'ragged': step 1 holds 2 values, FixedLenSequence shape [1] takes 1"));
  CHECK_THROWS_WITH(parse({{"frames", io::FixedLenSequence{.shape = {2}, .dtype = FeatureDtype::int64}}}),
                    Contains("feature 'frames': expected int64_list, step 0 holds float_list"));
  CHECK_THROWS_WITH(parse({{"ids", io::VarLen{.dtype = FeatureDtype::float32}}}),
                    Contains("expected float_list, step 0 holds int64_list"));
  CHECK_THROWS_WITH(io::parse_single_sequence_example(bytes, {{"length", io::VarLen{.dtype = FeatureDtype::float32}}}, {}),
                    Contains("feature 'length': expected float_list"));

  // 2^16 empty steps and one of 2^12 values would pad to 2^28 int64s (2 GiB) from 140 KB: refused.
  io::SequenceExample wide;
  auto& steps = wide.feature_lists["ids"];
  steps.assign(size_t(1) << 16, io::Int64List{});
  steps[7] = io::Int64List(size_t(1) << 12, 1);
  CHECK_THROWS_WITH(io::parse_single_sequence_example(io::encode_sequence_example(wide), {},
                                                      {{"ids", io::VarLen{.dtype = FeatureDtype::int64}}}),
                    Contains("feature list 'ids': 65536 steps padded to the longest (4096 values) would take more "
                             "than 1024 MiB"));
}
