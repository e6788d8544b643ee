// safetensors: round trips of every dtype (rank 0 and empty tensors included), golden bytes
// written out by hand, a clear io_error for each kind of malformed header, and a deterministic
// corruption loop (bit flips, byte overwrites, truncations, header lengths, random token soup)
// in which decoding must either succeed or throw io_error.
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <gradus/gradus.hpp>
#include <gradus/io.hpp>

#include "io_samples.hpp"

namespace gd = gradus;
namespace io = gradus::io;
using Catch::Contains;
using gd::io::testing::same;
using gd::io::testing::sample;
using gd::io::testing::seq;

namespace {

const io::Metadata kMeta = {{"global_step", "7"}, {"note", "h\xc3\xa9llo \"quoted\""}};

/// A file with this header text (unpadded) and data section.
std::string file_of(const std::string& header, const std::string& data = "") {
  std::string out;
  io::detail::store_le<8>(out, header.size());
  return out + header + data;
}
std::string entry(const std::string& name, const std::string& dtype, const std::string& shape, const std::string& offsets) {
  return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape + ",\"data_offsets\":" + offsets + "}";
}

}  // namespace

TEST_CASE("io: safetensors round trip of every dtype, rank 0 and empty tensors", "[io][safetensors]") {
  const io::TensorList in = sample();
  const std::string bytes = io::encode_safetensors(in, kMeta);
  const io::Safetensors out = io::decode_safetensors(bytes);
  REQUIRE(out.tensors.size() == in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    CHECK(out.tensors[i].first == in[i].first);  // file order = the order given
    CHECK(same(out.tensors[i].second, in[i].second));
  }
  CHECK(out.metadata == kMeta);
  CHECK(io::encode_safetensors(out.tensors, out.metadata) == bytes);

  CHECK(out.get<double>("s").item() == 3.5);
  CHECK(out.get<float>("e").shape() == gd::Shape{0, 3});
  CHECK(out.find("nope") == nullptr);
  CHECK_THROWS_WITH(out.get<double>("nope"), Contains("has no tensor 'nope'"));
  CHECK_THROWS_WITH(out.get<double>("a"), Contains("tensor 'a' is F32, not F64"));

  // Through a file; no tensors and no metadata is a valid file too.
  const std::filesystem::path path = "roundtrip.safetensors";
  io::save_safetensors(path, in, kMeta);
  CHECK(io::read_file(path) == bytes);
  const io::Safetensors loaded = io::load_safetensors(path);
  CHECK(loaded.source == path.string());
  CHECK(same(loaded.tensors[2].second, in[2].second));
  const io::Safetensors none = io::decode_safetensors(io::encode_safetensors({}));
  CHECK(none.tensors.empty());
  CHECK(none.metadata.empty());
}

TEST_CASE("io: safetensors golden bytes", "[io][safetensors]") {
  // {"__metadata__":{"k":"v"},"a":{...}} is 79 characters: one space pads it to 80 = 0x50.
  const std::string header1 = R"({"__metadata__":{"k":"v"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  REQUIRE(header1.size() == 79);
  const std::string golden1 = std::string("\x50\0\0\0\0\0\0\0", 8) + header1 + " " +
                              std::string("\x00\x00\x80\x3f\x00\x00\x00\x40", 8);  // 1.0f, 2.0f little-endian
  CHECK(io::encode_safetensors({{"a", gd::Tensor<float>::from({1.f, 2.f})}}, {{"k", "v"}}) == golden1);

  // No metadata; a rank-0 I64 and an empty F64: 108 characters + 4 spaces = 112 = 0x70.
  const std::string header2 =
      R"({"s":{"dtype":"I64","shape":[],"data_offsets":[0,8]},"e":{"dtype":"F64","shape":[0,2],"data_offsets":[8,8]}})";
  REQUIRE(header2.size() == 108);
  const std::string golden2 =
      std::string("\x70\0\0\0\0\0\0\0", 8) + header2 + "    " + std::string("\xfe\xff\xff\xff\xff\xff\xff\xff", 8);
  const std::string bytes2 =
      io::encode_safetensors({{"s", gd::Tensor<int64_t>::scalar(-2)}, {"e", gd::Tensor<double>::zeros({0, 2})}});
  CHECK(bytes2 == golden2);
  CHECK(io::decode_safetensors(golden2).get<int64_t>("s").item() == -2);

  // Names are JSON-escaped.
  const std::string esc = io::encode_safetensors({{"q\"\\\n", gd::Tensor<float>::scalar(0.f)}});
  CHECK_THAT(esc, Contains(R"("q\"\\\u000a":{)"));
  CHECK(io::decode_safetensors(esc).tensors[0].first == "q\"\\\n");
}

TEST_CASE("io: encode_safetensors rejects what cannot be written", "[io][safetensors]") {
  const gd::Tensor<float> t = gd::Tensor<float>::scalar(1.f);
  CHECK_THROWS_WITH(io::encode_safetensors({{"a", t}, {"a", t}}), Contains("two tensors are named 'a'"));
  CHECK_THROWS_WITH(io::encode_safetensors({{"", t}}), Contains("empty name"));
  CHECK_THROWS_WITH(io::encode_safetensors({{"__metadata__", t}}), Contains("reserved"));
  CHECK_THROWS_WITH(io::encode_safetensors({{"a", gd::Tensor<float>()}}), Contains("'a' is undefined"));
  CHECK_THROWS_WITH(io::encode_safetensors({{"bad\xff", t}}), Contains("not valid UTF-8"));
  CHECK_THROWS_AS(io::encode_safetensors({{"a", t}}, {{"k", "\xc0\x80"}}), gd::value_error);
}

TEST_CASE("io: a safetensors file's tensors come back in offset order, ties in header order", "[io][safetensors]") {
  // "w" first in the header but after forty empty tensors in the data section; the empty tensors
  // share the offsets [0, 0] and keep the header's order among themselves (t39 ... t00: not the
  // names' order), more of them than a sort leaves in place by chance
  std::string data(8, '\0');
  const float v[2] = {1.5f, -2.f};
  std::memcpy(data.data(), v, sizeof v);
  std::string header = "{" + entry("w", "F32", "[2]", "[0,8]"), expected;
  for (int i = 39; i >= 0; --i) {
    const std::string name = (i < 10 ? "t0" : "t") + std::to_string(i);
    header += "," + entry(name, i % 2 ? "F64" : "I64", i % 3 ? "[0,3]" : "[0]", "[0,0]");
    expected += name + " ";
  }
  const io::Safetensors st = io::decode_safetensors(file_of(header + "}", data));
  std::string names;
  for (const auto& [name, t] : st.tensors) names += name + " ";
  CHECK(names == expected + "w ");
  const auto& w = std::get<gd::Tensor<float>>(st.tensors.back().second);
  CHECK(w(0) == 1.5f);
  CHECK(w(1) == -2.f);
  CHECK(std::get<gd::Tensor<double>>(st.tensors[0].second).shape() == gd::Shape{0});     // t39: F64 [0]
  CHECK(std::get<gd::Tensor<int64_t>>(st.tensors[1].second).shape() == gd::Shape{0, 3});  // t38: I64 [0, 3]
}

TEST_CASE("io: malformed safetensors files are rejected with a clear message", "[io][safetensors]") {
  auto rejects = [](const std::string& bytes, const std::string& message) {
    INFO("expecting: " << message);
    CHECK_THROWS_AS(io::decode_safetensors(bytes, "bad.safetensors"), gd::io_error);
    CHECK_THROWS_WITH(io::decode_safetensors(bytes, "bad.safetensors"), Contains("'bad.safetensors'") && Contains(message));
  };
  const std::string ok = entry("a", "F32", "[2]", "[0,8]");
  const std::string data8(8, '\0');
  REQUIRE(io::decode_safetensors(file_of("{" + ok + "}", data8)).tensors.size() == 1);

  rejects("", "shorter than the 8-byte header length");
  rejects("\x08\0\0\0", "shorter than the 8-byte header length");
  rejects(file_of("{}").substr(0, 8) + "{", "more than the 1 bytes after it");
  rejects(std::string("\xff\xff\xff\xff\xff\xff\xff\xff", 8) + "{}", "over the 100 MB limit");
  rejects(file_of("{\"a\":"), "not valid JSON");
  rejects(file_of("{" + ok + "} x", data8), "not valid JSON");
  rejects(file_of("[]"), "header must be a JSON object, got a list");
  rejects(file_of("7"), "header must be a JSON object, got a number");
  rejects(file_of("{\"a\":[1]}"), "entry 'a' must be an object");
  rejects(file_of("{\"a\":\"x\"}"), "entry 'a' must be an object");
  rejects(file_of("{" + entry("a", "XYZ", "[2]", "[0,8]") + "}", data8), "unknown dtype 'XYZ'");
  rejects(file_of("{" + entry("a", "I32", "[2]", "[0,8]") + "}", data8), "dtype 'I32', which gradus does not read");
  rejects(file_of("{" + entry("a", "U16", "[4]", "[0,8]") + "}", data8), "(supported: F32, F64, I64, and F16");
  rejects(file_of("{" + entry("a", "BF16", "[2]", "[0,8]") + "}", data8), "span 8 bytes, but BF16 [2] needs 4");
  rejects(file_of("{" + entry("a", "U8", "[8]", "[0,8]") + "}", data8), "dtype 'U8', which gradus does not read");
  rejects(file_of(R"({"a":{"dtype":1,"shape":[2],"data_offsets":[0,8]}})", data8), "'dtype' must be a string");
  rejects(file_of("{" + entry("a", "F32", "2", "[0,8]") + "}", data8), "'shape' must be a list of non-negative integers");
  rejects(file_of("{" + entry("a", "F32", "[-2]", "[0,8]") + "}", data8), "got an element that is a negative number");
  rejects(file_of("{" + entry("a", "F32", "[2.0]", "[0,8]") + "}", data8), "not an integer");
  rejects(file_of("{" + entry("a", "F32", "[[2]]", "[0,8]") + "}", data8), "got an element that is a list");
  rejects(file_of("{" + entry("a", "F32", "[1,1,1,1,1,1,1,1,2]", "[0,8]") + "}", data8), "more than 8 dimensions");
  rejects(file_of("{" + entry("a", "F32", "[4294967296,4294967296]", "[0,8]") + "}", data8), "the size overflows");
  rejects(file_of("{" + entry("a", "F64", "[2305843009213693952]", "[0,8]") + "}", data8), "the size overflows");
  // A zero dimension does not excuse the others: [0, 2^62, 2^62] would wrap after a reduction.
  rejects(file_of("{" + entry("a", "F32", "[0,4611686018427387904,4611686018427387904]", "[0,0]") + "}"), "the size overflows");
  rejects(file_of("{" + entry("a", "F32", "[4611686018427387904,0,4]", "[0,0]") + "}"), "the size overflows");
  rejects(file_of("{" + entry("a", "I64", "[1152921504606846976,0]", "[0,0]") + "}"), "the size overflows");
  rejects(file_of("{" + entry("a", "F32", "[3]", "[0,8]") + "}", data8), "span 8 bytes, but F32 [3] needs 12");
  rejects(file_of("{" + entry("a", "F32", "[2]", "[0]") + "}", data8), "must be [begin, end], got 1 numbers");
  rejects(file_of("{" + entry("a", "F32", "[2]", "[0,8,8]") + "}", data8), "got more than 2 numbers");
  rejects(file_of("{" + entry("a", "F32", "[2]", "[8,0]") + "}", data8), "are reversed");
  rejects(file_of("{" + entry("a", "F32", "[2]", "[8,16]") + "}", data8), "reach past the data section (8 bytes");
  rejects(file_of(R"({"a":{"dtype":"F32","shape":[2]}})", data8), "tensor 'a' has no 'data_offsets'");
  rejects(file_of(R"({"a":{"shape":[2],"data_offsets":[0,8]}})", data8), "tensor 'a' has no 'dtype'");
  rejects(file_of(R"({"a":{"dtype":"F32","dtype":"F32","shape":[2],"data_offsets":[0,8]}})", data8), "has 'dtype' twice");
  rejects(file_of(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"extra":1}})", data8), "unexpected key 'extra'");
  rejects(file_of("{" + ok + "," + ok + "}", data8 + data8), "two tensors are named 'a'");
  rejects(file_of("{" + ok + "," + entry("b", "F32", "[1]", "[4,8]") + "}", data8), "overlap");
  rejects(file_of("{" + entry("a", "F32", "[1]", "[4,8]") + "}", data8), "bytes [0, 4) of the data section belong to no tensor");
  rejects(file_of("{" + ok + "}", data8 + "xy"), "2 trailing bytes");
  rejects(file_of("{\"\":{}}"), "empty name");
  rejects(file_of(R"({"__metadata__":{"k":1}})"), "metadata 'k' must be a string");
  rejects(file_of(R"({"__metadata__":{"k":{}}})"), "metadata 'k' must be a string");
  rejects(file_of(R"({"__metadata__":[]})"), "'__metadata__' must be an object of strings");
  rejects(file_of(R"({"__metadata__":{},"__metadata__":{}})"), "'__metadata__' appears twice");
  rejects(file_of(R"({"__metadata__":{"k":"a","k":"b"}})"), "metadata key 'k' appears twice");
  rejects(file_of("{\"a\":{\"dtype\":\"F\xff\"}}"), "not valid JSON");
  CHECK_THROWS_WITH(io::load_safetensors("no_such_file.safetensors"),
                    Contains("no_such_file.safetensors") && Contains("No such file"));
}

namespace {

/// Decoding `bytes` either succeeds or throws io_error; anything else is recorded in `what`.
bool decodes_or_rejects(const std::string& bytes, std::string& what, bool* succeeded = nullptr) {
  try {
    (void)io::decode_safetensors(bytes, "fuzz");
    if (succeeded) *succeeded = true;
    return true;
  } catch (const gd::io_error&) {
    if (succeeded) *succeeded = false;
    return true;
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
    what = "an exception not derived from std::exception";
  }
  return false;
}

}  // namespace

TEST_CASE("io: corrupted safetensors files decode or throw io_error, never anything else", "[io][safetensors]") {
  const std::string good = io::encode_safetensors(sample(), kMeta);
  const size_t header_end = 8 + size_t(io::detail::load_le<8>(good.data()));
  std::string what;
  int cases = 0, failures = 0;
  std::string first_failure;
  auto run = [&](const std::string& bytes, const char* kind, size_t at) {
    ++cases;
    if (decodes_or_rejects(bytes, what)) return;
    if (failures++ == 0) first_failure = std::string(kind) + " at " + std::to_string(at) + ": " + what;
  };

  // Every bit of the length field and the header, and a set of structural characters at each
  // header position, and a byte inserted or deleted at each position.
  const char specials[] = {'"', '{', '}', '[', ']', ',', ':', '0', '9', '-', ' ', '\\', 'e', '.', 'n', '\0', '\xff'};
  for (size_t pos = 0; pos < header_end; ++pos) {
    std::string b = good;
    for (int bit = 0; bit < 8; ++bit) {
      b[pos] = char(good[pos] ^ (1 << bit));
      run(b, "bit flip", pos);
    }
    for (char c : specials) {
      b[pos] = c;
      run(b, "overwrite", pos);
    }
    run(good.substr(0, pos) + good.substr(pos + 1), "deletion", pos);
    run(good.substr(0, pos) + "7" + good.substr(pos), "insertion", pos);
  }
  // Every truncation.
  for (size_t len = 0; len < good.size(); ++len) run(good.substr(0, len), "truncation", len);
  // Header lengths around every boundary.
  std::vector<uint64_t> lengths;
  for (uint64_t n = 0; n < header_end + 16; ++n) lengths.push_back(n);
  for (int k = 0; k < 64; ++k)
    for (int64_t d = -1; d <= 1; ++d) lengths.push_back((uint64_t(1) << k) + uint64_t(d));
  lengths.push_back(UINT64_MAX);
  lengths.push_back(100'000'000);
  lengths.push_back(good.size() - 8);
  for (uint64_t n : lengths) {
    std::string b = good;
    for (int i = 0; i < 8; ++i) b[size_t(i)] = char((n >> (8 * i)) & 0xFF);
    run(b, "header length", size_t(n));
  }
  // A flip in the data section only changes a value.
  int data_ok = 0, data_cases = 0;
  for (size_t pos = header_end; pos < good.size(); pos += 3) {
    std::string b = good;
    b[pos] = char(~b[pos]);
    bool succeeded = false;
    ++data_cases;
    if (decodes_or_rejects(b, what, &succeeded) && succeeded) ++data_ok;
  }
  CHECK(data_ok == data_cases);
  // Random headers built from the tokens of valid ones.
  const char* tokens[] = {"{", "}", "[", "]", ",", ":", "\"dtype\"", "\"F32\"", "\"I64\"", "\"shape\"",
                          "\"data_offsets\"", "\"__metadata__\"", "\"a\"", "\"b\"", "0", "8", "16", "-1", "1e3",
                          "18446744073709551615", "99999999999999999999", "null", "true", " "};
  gd::Rng rng(7);
  for (int it = 0; it < 3000; ++it) {
    std::string header;
    const uint64_t n = 1 + rng.below(40);
    for (uint64_t k = 0; k < n; ++k) header += tokens[rng.below(std::size(tokens))];
    run(file_of(header, std::string(size_t(rng.below(24)), '\x01')), "token soup", size_t(it));
  }
  INFO(cases << " corrupt files; first failure: " << first_failure);
  CHECK(failures == 0);
  CHECK(cases > 10000);
}
