// TFRecord files: the framing against bytes computed independently (by hand below, and by
// tests/fixtures/io/make_tfrecord_fixtures.py with Python's standard library: CRC-32C bit by bit,
// gzip and zlib by Python's modules), round trips of every compression, every corruption and
// truncation rejected with the file and the record's offset, and protoc's view of what gradus wrote.
#include <catch2/catch.hpp>
#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gradus/core/rng.hpp>
#include <gradus/io.hpp>

#include "../support/files.hpp"

namespace gd = gradus;
namespace io = gradus::io;
namespace fs = std::filesystem;
using Catch::Contains;

namespace {

const fs::path fixtures = fs::path(GRADUS_TEST_DATA_DIR) / "io";

fs::path fresh_dir(const std::string& name) {
  const fs::path d = gradus_test::fresh_dir("tfrecord_tmp", name);
  fs::create_directories(d);
  return d;
}

using gradus_test::slurp_existing;
using gradus_test::spit;

/// The records of make_tfrecord_fixtures.py (RECORDS), the fourth being example.pb's Features.
std::vector<std::string> fixture_records() {
  const std::string example = slurp_existing(fixtures / "example.pb");
  // example.pb is Example{features = 1}: a key byte 0x0a and a one-byte length, then the Features.
  REQUIRE(example.size() == 2 + size_t(uint8_t(example[1])));
  return {"", "a", "hello, world", example.substr(2), std::string(300, 'x')};
}

/// Records of every size class: empty, small, around the reader's 64 KiB first step and the
/// 256 KiB buffers, and 1 MiB of random bytes.
std::vector<std::string> mixed_records() {
  gd::Rng rng(11);
  std::vector<std::string> out = {"", "x", std::string(1000, 'a')};
  for (size_t n : {size_t(65535), size_t(65536), size_t(65537), size_t(262143), size_t(1) << 20}) {
    std::string r(n, '\0');
    for (char& c : r) c = char(rng.next() & 0xFF);
    out.push_back(r);
  }
  for (int i = 0; i < 2000; ++i) out.push_back("record " + std::to_string(i));
  return out;
}

/// The byte offset of every record of `records` in an uncompressed file.
std::vector<uint64_t> offsets(const std::vector<std::string>& records) {
  std::vector<uint64_t> out;
  uint64_t at = 0;
  for (const auto& r : records) {
    out.push_back(at);
    at += 16 + r.size();
  }
  return out;
}

const char* name(io::Compression c) {
  return c == io::Compression::none ? "none" : c == io::Compression::gzip ? "gzip" : "zlib";
}

}  // namespace

TEST_CASE("TFRecord: the framing, byte for byte", "[io][tfrecord]") {
  // The empty record, by hand: its length 0 as 8 little-endian bytes; the masked CRC-32C of
  // those 8 zero bytes: crc32c = 0x8C28B28A, rotated right by 15 bits = 0x65151851, plus
  // 0xA282EAD8 = 0x1'07980329, kept mod 2^32 = 0x07980329 (stored little-endian: 29 03 98 07);
  // no data; the masked CRC of "": crc32c("") = 0, so the mask's constant alone, 0xA282EAD8.
  const uint32_t c = 0x8C28B28Au;
  CHECK(gd::detail::crc32c(std::string(8, '\0')) == c);
  CHECK(uint32_t((c >> 15) | (c << 17)) == 0x65151851u);
  CHECK(gd::detail::mask_crc(c) == 0x07980329u);
  const std::string empty_record("\0\0\0\0\0\0\0\0\x29\x03\x98\x07\xd8\xea\x82\xa2", 16);
  CHECK(io::encode_tfrecord("") == empty_record);

  // Python's framing of RECORDS (bit-by-bit CRC-32C): gradus writes the same bytes and reads them.
  const std::string golden = slurp_existing(fixtures / "records.tfrecord");
  CHECK(golden.substr(0, 16) == empty_record);
  const auto records = fixture_records();
  std::string encoded;
  for (const auto& r : records) encoded += io::encode_tfrecord(r);
  CHECK(encoded == golden);
  CHECK(io::decode_tfrecords(golden) == records);

  const fs::path dir = fresh_dir("golden");
  io::write_tfrecords(dir / "out.tfrecord", records);
  CHECK(slurp_existing(dir / "out.tfrecord") == golden);
  CHECK(io::read_tfrecords(fixtures / "records.tfrecord") == records);
}

TEST_CASE("TFRecord: files compressed by Python's gzip and zlib modules read back", "[io][tfrecord]") {
  const auto records = fixture_records();
  CHECK(io::read_tfrecords(fixtures / "records.tfrecord.gz", io::Compression::gzip) == records);
  CHECK(io::read_tfrecords(fixtures / "records.tfrecord.zlib", io::Compression::zlib) == records);
  // Two gzip members one after the other read as one stream (as gunzip reads them).
  CHECK(io::read_tfrecords(fixtures / "records_two_members.tfrecord.gz", io::Compression::gzip) == records);
  // The wrong compression is an error with a hint, not garbage.
  CHECK_THROWS_WITH(io::read_tfrecords(fixtures / "records.tfrecord.gz"),
                    Contains("record 0 at byte 0") && Contains("Compression::gzip"));
  CHECK_THROWS_WITH(io::read_tfrecords(fixtures / "records.tfrecord.zlib"), Contains("Compression::zlib"));
  CHECK_THROWS_AS(io::read_tfrecords(fixtures / "records.tfrecord", io::Compression::gzip), gd::io_error);
  CHECK_THROWS_AS(io::read_tfrecords(fixtures / "records.tfrecord.gz", io::Compression::zlib), gd::io_error);
  // A zlib stream with bytes after its end is corrupt; gzip treats them as another member.
  const fs::path dir = fresh_dir("trailing");
  spit(dir / "z", slurp_existing(fixtures / "records.tfrecord.zlib") + "junk");
  CHECK_THROWS_WITH(io::read_tfrecords(dir / "z", io::Compression::zlib),
                    Contains((dir / "z").string()) && Contains("follow the end of the zlib stream"));
  spit(dir / "g", slurp_existing(fixtures / "records.tfrecord.gz") + "junk");
  CHECK_THROWS_WITH(io::read_tfrecords(dir / "g", io::Compression::gzip), Contains("corrupt gzip data"));
}

TEST_CASE("TFRecord: round trips of every compression, by next(), range-for and read_tfrecords",
          "[io][tfrecord]") {
  const auto records = mixed_records();
  const fs::path dir = fresh_dir("roundtrip");
  for (io::Compression c : {io::Compression::none, io::Compression::gzip, io::Compression::zlib}) {
    INFO("compression " << name(c));
    const fs::path path = dir / (std::string("r.") + name(c));
    {
      io::TFRecordWriter w(path, {.compression = c, .level = 1});
      for (const auto& r : records) w.write(r);
      CHECK(w.records_written() == records.size());
      CHECK(w.path() == path);
      w.close();
      w.close();  // harmless
    }
    const std::string bytes = slurp_existing(path);
    if (c == io::Compression::gzip) CHECK(bytes.substr(0, 2) == "\x1f\x8b");
    if (c == io::Compression::zlib) CHECK(uint8_t(bytes[0]) == 0x78);
    uint64_t framed = 0;
    for (const auto& r : records) framed += 16 + r.size();
    if (c == io::Compression::none) CHECK(bytes.size() == framed);
    if (c != io::Compression::none) CHECK(bytes.size() < framed);  // the small records compress

    io::TFRecordReader r(path, c);
    const auto at = offsets(records);
    std::string rec;
    size_t i = 0;
    for (; i < records.size(); ++i) {
      CHECK(r.offset() == at[i]);
      REQUIRE(r.next(rec));
      REQUIRE(rec == records[i]);
    }
    CHECK_FALSE(r.next(rec));
    CHECK_FALSE(r.next(rec));
    CHECK(r.records_read() == records.size());

    size_t n = 0;
    for (const std::string& one : io::TFRecordReader(path, c)) CHECK((one == records[n++]));
    CHECK(n == records.size());
    CHECK(io::read_tfrecords(path, c) == records);
    CHECK(io::decode_tfrecords(bytes, c) == records);
  }
  // The default level and level 9 write the same records.
  io::write_tfrecords(dir / "l9", records, {.compression = io::Compression::gzip, .level = 9});
  CHECK(io::read_tfrecords(dir / "l9", io::Compression::gzip) == records);
  // No records: an empty plain file; a compressed file with an empty stream. An empty file reads
  // as no records whatever the compression.
  for (io::Compression c : {io::Compression::none, io::Compression::gzip, io::Compression::zlib}) {
    io::write_tfrecords(dir / "empty", std::vector<std::string>{}, {.compression = c});
    CHECK(io::read_tfrecords(dir / "empty", c).empty());
    spit(dir / "zero", "");
    CHECK(io::read_tfrecords(dir / "zero", c).empty());
  }
}

TEST_CASE("TFRecord: flush makes the records so far readable; a moved writer still writes", "[io][tfrecord]") {
  const fs::path dir = fresh_dir("flush");
  for (io::Compression c : {io::Compression::none, io::Compression::gzip, io::Compression::zlib}) {
    INFO("compression " << name(c));
    const fs::path path = dir / name(c);
    io::TFRecordWriter w(path, {.compression = c});
    w.write("one");
    w.write("two");
    w.flush();
    // Readable up to the flush; a compressed stream is not finished yet, so it ends as truncated.
    io::TFRecordReader r(path, c);
    std::string rec;
    CHECK((r.next(rec) && rec == "one"));
    CHECK((r.next(rec) && rec == "two"));
    if (c == io::Compression::none) {
      CHECK_FALSE(r.next(rec));
    } else {
      CHECK_THROWS_WITH(r.next(rec), Contains(path.string()) && Contains("record 2 at byte 38") &&
                                         Contains("stream ends early"));
      CHECK_THROWS_AS(r.next(rec), gd::io_error);  // and stays failed
    }
    io::TFRecordWriter moved = std::move(w);
    moved.write("three");
    moved.close();
    CHECK(io::read_tfrecords(path, c) == std::vector<std::string>{"one", "two", "three"});
    CHECK_THROWS_AS(moved.write("four"), gd::value_error);
    CHECK_THROWS_AS(moved.flush(), gd::value_error);
  }
}

TEST_CASE("TFRecord: every flipped byte and every truncation of a plain file is an io_error naming the "
          "file and the record's offset", "[io][tfrecord]") {
  const std::vector<std::string> records = {"abc", "", std::string(40, 'q'), "last"};
  const auto at = offsets(records);
  std::string file;
  for (const auto& r : records) file += io::encode_tfrecord(r);
  const fs::path dir = fresh_dir("corrupt");
  const fs::path path = dir / "bad.tfrecord";
  for (size_t k = 0; k < records.size(); ++k) {
    const size_t end = at[k] + 16 + records[k].size();
    for (size_t pos = at[k]; pos < end; ++pos) {
      std::string bad = file;
      bad[pos] = char(bad[pos] ^ 0x5A);
      spit(path, bad);
      INFO("record " << k << ", byte " << pos);
      const size_t in = pos - at[k];
      const char* what = in < 12 ? "length checksum" : "data checksum";
      // A flipped length byte fails the length's checksum; a flipped data or data-CRC byte the data's.
      CHECK_THROWS_WITH(io::read_tfrecords(path), Contains(path.string()) &&
                                                      Contains("record " + std::to_string(k) + " at byte " +
                                                               std::to_string(at[k])) &&
                                                      Contains(what));
      // The records before it are read.
      io::TFRecordReader r(path);
      std::string rec;
      for (size_t j = 0; j < k; ++j) CHECK((r.next(rec) && rec == records[j]));
      CHECK_THROWS_AS(r.next(rec), gd::io_error);
    }
  }
  for (size_t cut = 1; cut < file.size(); ++cut) {
    const std::string_view part(file.data(), cut);
    size_t k = 0;
    while (k + 1 < at.size() && at[k + 1] <= cut) ++k;
    INFO("cut at " << cut);
    if (at[k] == cut) {  // at a record boundary: a shorter, valid file
      CHECK(io::decode_tfrecords(part).size() == k);
      continue;
    }
    spit(path, part);
    CHECK_THROWS_WITH(io::read_tfrecords(path), Contains(path.string()) &&
                                                    Contains("record " + std::to_string(k) + " at byte " +
                                                             std::to_string(at[k])) &&
                                                    Contains("truncated"));
  }
  // A length that passes its checksum but claims 2^62 bytes: truncated, without claiming memory.
  std::string huge;
  gd::detail::store_le<8>(huge, uint64_t(1) << 62);
  gd::detail::store_le<4>(huge, gd::detail::masked_crc32c(huge));
  CHECK_THROWS_WITH(io::decode_tfrecords(huge + "abcd", io::Compression::none, "mem"),
                    Contains("'mem': record 0 at byte 0") && Contains("truncated") && Contains("length 4611686018427387904"));
}

TEST_CASE("TFRecord: every truncation and every corrupted byte of a compressed file is an io_error naming the "
          "file and an offset", "[io][tfrecord]") {
  const std::vector<std::string> records = {"first record", std::string(5000, 'z'), "", "tail"};
  const fs::path dir = fresh_dir("corrupt_gz");
  for (io::Compression c : {io::Compression::gzip, io::Compression::zlib}) {
    INFO("compression " << name(c));
    const fs::path good = dir / "good";
    io::write_tfrecords(good, records, {.compression = c});
    const std::string file = slurp_existing(good);
    const fs::path path = dir / "bad";
    for (size_t cut = 1; cut < file.size(); ++cut) {
      spit(path, std::string_view(file.data(), cut));
      INFO("cut at " << cut << " of " << file.size());
      CHECK_THROWS_WITH(io::read_tfrecords(path, c), Contains(path.string()) && Contains(" at byte ") &&
                                                         Contains("of the decompressed stream"));
    }
    // gzip's header holds fields no reader checks (mtime, flags for the OS): flip after them.
    for (size_t pos = c == io::Compression::gzip ? 10 : 2; pos < file.size(); ++pos) {
      std::string bad = file;
      bad[pos] = char(bad[pos] ^ 0xFF);
      spit(path, bad);
      INFO("flipped byte " << pos << " of " << file.size());
      CHECK_THROWS_WITH(io::read_tfrecords(path, c), Contains(path.string()) && Contains(" at byte "));
    }
  }
}

TEST_CASE("TFRecord: clear errors for missing files, bad options and write failures", "[io][tfrecord]") {
  const fs::path dir = fresh_dir("errors");
  CHECK_THROWS_WITH(io::TFRecordReader(dir / "missing"), Contains((dir / "missing").string()) && Contains("cannot open"));
  CHECK_THROWS_WITH(io::read_tfrecords(dir), Contains("directory"));
  CHECK_THROWS_WITH(io::TFRecordWriter(dir / "no" / "such" / "dir"), Contains("cannot create"));
  CHECK_THROWS_AS(io::TFRecordWriter(dir / "x", {.compression = io::Compression::gzip, .level = 10}), gd::value_error);
  CHECK_THROWS_AS(io::TFRecordWriter(dir / "x", {.compression = io::Compression(7)}), gd::value_error);
  CHECK_THROWS_AS(io::TFRecordReader(dir / "x", io::Compression(7)), gd::value_error);
  if (fs::exists("/dev/full")) {  // every write fails with ENOSPC
    io::TFRecordWriter w("/dev/full");
    w.write("a record");  // buffered
    CHECK_THROWS_WITH(w.flush(), Contains("cannot write '/dev/full'"));
    CHECK_THROWS_WITH(w.write("more"), Contains("cannot write '/dev/full'"));  // the error stays
    CHECK_NOTHROW(w.close());                                                   // already reported
    io::TFRecordWriter g("/dev/full", {.compression = io::Compression::gzip});
    g.write("a record");
    CHECK_THROWS_WITH(g.close(), Contains("/dev/full"));
  }
}

namespace {

// Output of `protoc <how> < message` (how: "--decode_raw" or a --decode with its schema).
std::string protoc_decode(std::string_view message, const std::string& how) {
  spit("tfrecord_tmp/message.bin", message);
  std::string out;
  if (std::FILE* p = popen(("protoc " + how + " < tfrecord_tmp/message.bin 2>&1").c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    pclose(p);
  }
  return out;
}

}  // namespace

TEST_CASE("protoc decodes the Examples of a TFRecord file gradus wrote, raw and with TensorFlow's schema",
          "[io][tfrecord]") {
  if (std::system("protoc --version > /dev/null 2>&1") != 0) {
    WARN("protoc not found on PATH: skipping the protoc --decode_raw check (scripts/deps installs protobuf-compiler)");
    return;
  }
  const fs::path dir = fresh_dir("protoc");
  io::Example a;
  a.features["label"] = io::Int64List{7, -2};
  a.features["weights"] = io::FloatList{1.5f, -0.25f};
  a.features["name"] = io::BytesList{"first"};
  io::Example b;
  b.features["label"] = io::Int64List{1};
  io::write_tfrecords(dir / "ex.tfrecord", std::vector<std::string>{io::encode_example(a), io::encode_example(b)});

  // Unframe by hand: 8 bytes of length, 4 of its CRC, the data, 4 more.
  const std::string file = slurp_existing(dir / "ex.tfrecord");
  std::vector<std::string> messages;
  for (size_t pos = 0; pos < file.size();) {
    const uint64_t len = gd::detail::load_le<8>(file.data() + pos);
    messages.push_back(file.substr(pos + 12, size_t(len)));
    pos += 16 + size_t(len);
  }
  REQUIRE(messages.size() == 2);

  const std::string raw = protoc_decode(messages[0], "--decode_raw");
  INFO("protoc --decode_raw:\n" << raw);
  // Example.features (1) { feature (1) { key (1) value (2) { int64_list (3) | float_list (2) | bytes_list (1) } } }
  CHECK(raw.find("1 {\n  1 {\n    1: \"label\"\n    2 {\n      3 {\n") != std::string::npos);
  CHECK(raw.find("1: \"weights\"\n    2 {\n      2 {\n") != std::string::npos);
  CHECK(raw.find("1: \"name\"\n    2 {\n      1 {\n        1: \"first\"") != std::string::npos);

  const std::string schema = "--decode=tensorflow.Example -I " GRADUS_TEST_DATA_DIR "/io " GRADUS_TEST_DATA_DIR
                             "/io/example.proto";
  const std::string typed = protoc_decode(messages[0], schema);
  INFO("protoc --decode=tensorflow.Example:\n" << typed);
  for (const char* s : {"key: \"label\"", "int64_list {\n        value: 7\n        value: -2\n",
                        "float_list {\n        value: 1.5\n        value: -0.25\n", "bytes_list {\n        value: \"first\"",
                        "key: \"weights\"", "key: \"name\""})
    CHECK(typed.find(s) != std::string::npos);
  CHECK(protoc_decode(messages[1], schema).find("value: 1\n") != std::string::npos);

  // And the other way: protoc encodes a text-format SequenceExample; gradus decodes it.
  spit(dir / "seq.txt",
       "context { feature { key: \"id\" value { int64_list { value: 42 } } } }\n"
       "feature_lists { feature_list { key: \"tokens\" value {\n"
       "  feature { float_list { value: [1, 2] } } feature { float_list { value: 3 } } } } }\n");
  const std::string cmd = "protoc --encode=tensorflow.SequenceExample -I " GRADUS_TEST_DATA_DIR
                          "/io " GRADUS_TEST_DATA_DIR "/io/example.proto < " +
                          (dir / "seq.txt").string() + " > " + (dir / "seq.bin").string();
  REQUIRE(std::system(cmd.c_str()) == 0);
  const io::SequenceExample seq = io::decode_sequence_example(slurp_existing(dir / "seq.bin"));
  CHECK(seq.context.at("id").int64_list() == io::Int64List{42});
  REQUIRE(seq.feature_lists.at("tokens").size() == 2);
  CHECK(seq.feature_lists.at("tokens")[0].float_list() == io::FloatList{1, 2});
  CHECK(seq.feature_lists.at("tokens")[1].float_list() == io::FloatList{3});
}
