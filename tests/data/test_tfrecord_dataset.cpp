// Tests of gd::data::tfrecord and gd::data::parse_example: files written by gd::io::TFRecordWriter
// in every compression, shards found with list_files, interleave, exact resume, corrupt files.
#include <catch2/catch.hpp>
#include <fstream>
#include <string>
#include <vector>

#include "data_support.hpp"
#include "gradus/data.hpp"

namespace gd = gradus;
namespace io = gradus::io;
using gd::data::Dataset;
using gd::data::Example;
using Catch::Matchers::Contains;
using data_test::TempDir;

namespace {

/// The serialized tf.train.Example of record `i`: label i, pixels {i, i + 0.5}, name "r<i>".
std::string example_bytes(int64_t i) {
  io::Example ex;
  ex.features["label"] = io::Int64List{i};
  ex.features["pixels"] = io::FloatList{float(i), float(i) + 0.5f};
  ex.features["name"] = io::BytesList{"r" + std::to_string(i)};
  return io::encode_example(ex);
}

/// Writes records [first, first + n) to `path`.
void write_shard(const std::string& path, int64_t first, int64_t n, io::Compression c) {
  io::TFRecordWriter w(path, {.compression = c});
  for (int64_t i = first; i < first + n; ++i) w.write(example_bytes(i));
  w.close();
}

const io::ParseSpec kSpec = {
    {"label", io::FixedLen{.shape = {}, .dtype = io::FeatureDtype::int64}},
    {"pixels", io::FixedLen{.shape = {2}, .dtype = io::FeatureDtype::float32}},
    {"name", io::FixedLen{.shape = {}, .dtype = io::FeatureDtype::bytes}}};

std::vector<int64_t> labels(Dataset ds) {
  std::vector<int64_t> out;
  for (const Example& e : ds) out.push_back(e.tensor<int64_t>("label").item());
  return out;
}

std::vector<int64_t> iota(int64_t a, int64_t b) {
  std::vector<int64_t> v;
  for (int64_t i = a; i < b; ++i) v.push_back(i);
  return v;
}

}  // namespace

TEST_CASE("tfrecord: records of several files in order, every compression", "[data][tfrecord]") {
  for (io::Compression c : {io::Compression::none, io::Compression::gzip, io::Compression::zlib}) {
    TempDir dir("tfrecord");
    const std::vector<std::string> files = {dir / "a", dir / "b", dir / "c"};
    write_shard(files[0], 0, 5, c);
    write_shard(files[1], 5, 0, c);  // an empty file has no records
    write_shard(files[2], 5, 7, c);
    Dataset raw = gd::data::tfrecord(files, c);
    std::vector<std::string> records;
    for (const Example& e : raw) {
      REQUIRE(e.size() == 1);
      records.push_back(e.string(0));
    }
    REQUIRE(records.size() == 12);
    for (int64_t i = 0; i < 12; ++i) CHECK(records[size_t(i)] == example_bytes(i));
    // parse_example: named fields in the spec's order, typed as the spec says.
    Dataset parsed = raw.map(gd::data::parse_example(kSpec));
    const std::vector<Example> all = parsed.collect();
    REQUIRE(all.size() == 12);
    const Example& e = all[3];
    CHECK(e.size() == 3);
    CHECK(e.name(0) == "label");
    CHECK(e.name(1) == "name");
    CHECK(e.name(2) == "pixels");
    CHECK(e.tensor<int64_t>("label").item() == 3);
    CHECK(e.string("name") == "r3");
    CHECK(e.tensor<float>("pixels").shape() == gd::Shape({2}));
    CHECK(e.tensor<float>("pixels").data()[1] == 3.5f);
    // Batching the parsed elements.
    Dataset batched = parsed.batch(5);
    const std::vector<Example> b = batched.collect();
    REQUIRE(b.size() == 3);
    CHECK(b[0].tensor<float>("pixels").shape() == gd::Shape({5, 2}));
    CHECK(b[2].strings("name") == gd::data::Strings{"r10", "r11"});
  }
}

TEST_CASE("tfrecord: shards by list_files, interleaved, resumed exactly", "[data][tfrecord]") {
  TempDir dir("tfrecord_shards");
  const int shards = 4, per = 25;
  for (int s = 0; s < shards; ++s)
    write_shard(dir / ("train.tfrecord-0000" + std::to_string(s) + "-of-00004"), s * per, per, io::Compression::gzip);
  data_test::write_file(dir / "other.txt", "not a shard");
  const std::vector<std::string> files = gd::data::list_files(dir / "train.tfrecord-*-of-00004");
  REQUIRE(files.size() == 4);
  CHECK(files[0].ends_with("00000-of-00004"));
  CHECK(files[3].ends_with("00003-of-00004"));

  // Files one after the other: all records in order.
  CHECK(labels(gd::data::tfrecord(files, io::Compression::gzip).map(gd::data::parse_example(kSpec))) == iota(0, 100));

  // interleave over the shards: block 2, cycle 4 → 0,1, 25,26, 50,51, 75,76, 2,3, ...
  auto pipeline = [&] {
    return Dataset::from_strings(files)
        .interleave([](const Example& f) { return gd::data::tfrecord({f.string(0)}, io::Compression::gzip); }, 4, 2)
        .parallel_map(gd::data::parse_example(kSpec), 2)
        .shuffle(16, 7)
        .batch(8)
        .prefetch(2);
  };
  Dataset ds = pipeline();
  std::vector<int64_t> inter;
  for (const Example& e : Dataset::from_strings(files).interleave(
           [](const Example& f) { return gd::data::tfrecord({f.string(0)}, io::Compression::gzip); }, 4, 2)
                               .map(gd::data::parse_example(kSpec)))
    inter.push_back(e.tensor<int64_t>("label").item());
  REQUIRE(inter.size() == 100);
  CHECK(std::vector<int64_t>(inter.begin(), inter.begin() + 10) == std::vector<int64_t>{0, 1, 25, 26, 50, 51, 75, 76, 2, 3});
  std::vector<int64_t> sorted = inter;
  std::sort(sorted.begin(), sorted.end());
  CHECK(sorted == iota(0, 100));

  // Epoch 1 of the full pipeline, whole and resumed after 5 batches: the same batches.
  std::vector<std::vector<int64_t>> whole;
  {
    Dataset d = pipeline();
    d.set_epoch(1);
    for (const Example& b : d) {
      const auto& l = b.tensor<int64_t>("label");
      whole.emplace_back(l.begin(), l.end());
    }
  }
  REQUIRE(whole.size() == 13);
  Dataset d2 = pipeline();
  gd::data::Iterator it = d2.iterator({.epoch = 1, .consumed = 5});
  std::vector<std::vector<int64_t>> rest;
  while (auto b = it.next()) {
    const auto& l = b->tensor<int64_t>("label");
    rest.emplace_back(l.begin(), l.end());
  }
  CHECK(rest == std::vector<std::vector<int64_t>>(whole.begin() + 5, whole.end()));
  CHECK(it.state() == gd::data::IteratorState{1, 13});
}

TEST_CASE("tfrecord: missing and corrupt files are io_errors naming the file", "[data][tfrecord]") {
  TempDir dir("tfrecord_bad");
  CHECK_THROWS_WITH(gd::data::tfrecord({dir / "missing"}), Contains("tfrecord") && Contains("missing"));

  write_shard(dir / "good", 0, 3, io::Compression::none);
  write_shard(dir / "bad", 3, 3, io::Compression::none);
  {  // flip a byte in the data of the second record of "bad"
    std::fstream f(dir / "bad", std::ios::in | std::ios::out | std::ios::binary);
    const std::streamoff second = 16 + std::streamoff(example_bytes(3).size());
    f.seekp(second + 12 + 3);
    f.put('\x7f');
  }
  Dataset ds = gd::data::tfrecord({dir / "good", dir / "bad"});
  gd::data::Iterator it = ds.iterator();
  for (int i = 0; i < 4; ++i) REQUIRE(it.next());  // 3 good records and the first of "bad"
  CHECK_THROWS_AS(it.next(), gd::io_error);
  Dataset again = gd::data::tfrecord({dir / "good", dir / "bad"});
  CHECK_THROWS_WITH(again.collect(), Contains(dir / "bad") && Contains("record 1") && Contains("checksum"));

  // A truncated gzip shard, read through a prefetching pipeline: the error reaches the consumer.
  write_shard(dir / "trunc.gz", 0, 50, io::Compression::gzip);
  std::filesystem::resize_file(dir / "trunc.gz", std::filesystem::file_size(dir / "trunc.gz") / 2);
  Dataset p = gd::data::tfrecord({dir / "trunc.gz"}, io::Compression::gzip).map(gd::data::parse_example(kSpec)).prefetch(2);
  CHECK_THROWS_WITH(p.collect(), Contains("trunc.gz"));

  // A record that is not a tf.train.Example of the spec: value_error naming the feature.
  write_shard(dir / "ok", 0, 1, io::Compression::none);
  io::ParseSpec wrong = {{"label", io::FixedLen{.shape = {2}, .dtype = io::FeatureDtype::int64}}};
  CHECK_THROWS_WITH(gd::data::tfrecord({dir / "ok"}).map(gd::data::parse_example(wrong)).collect(),
                    Contains("label"));
}
