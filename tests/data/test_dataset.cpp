// Tests of gd::data::Dataset: every source and transformation against hand-computed values,
// epochs and shuffling, threads (parallel_map, prefetch), caching and exact resume.
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <numeric>
#include <set>
#include <stdexcept>
#include <thread>

#include "data_support.hpp"
#include "gradus/data.hpp"

namespace gd = gradus;
using gd::data::Dataset;
using gd::data::Example;
using gd::data::Strings;
using Catch::Matchers::Contains;
using data_test::ints;
using data_test::TempDir;
using data_test::values;
using V = std::vector<int64_t>;
using namespace std::chrono_literals;

namespace {

Example scalar(int64_t v) { return Example(gd::Tensor<int64_t>::scalar(v)); }
int64_t first(const Example& e) { return e.tensor<int64_t>(0).item(); }

/// Seconds `f` takes.
template <class F>
double seconds(F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

// --- Example ---------------------------------------------------------------------------------------

TEST_CASE("Example: positional and named fields, typed access with clear errors", "[data][dataset]") {
  const auto x = gd::Tensor<float>::from({1, 2});
  const auto y = gd::Tensor<int64_t>::scalar(3);
  Example t = Example::tuple(x, y);
  CHECK(t.size() == 2);
  auto [a, b] = t.as<float, int64_t>();
  CHECK(values(a) == std::vector<float>{1, 2});
  CHECK(b.item() == 3);
  CHECK_THROWS_WITH(t.tensor<float>(1), Contains("field 1 holds int64 []") && Contains("not float32"));
  CHECK_THROWS_WITH((t.as<float>()), Contains("asked for 1 tensors"));
  CHECK_THROWS_AS(t[5], gd::value_error);

  Example n{{"image", x}, {"label", y}, {"path", std::string("a.png")}};
  CHECK(n.has("label"));
  CHECK(n.index("path") == 2);
  CHECK(n.string("path") == "a.png");
  CHECK(n.tensor<int64_t>("label").item() == 3);
  CHECK_THROWS_WITH(n.tensor<float>("nope"), Contains("no field named 'nope'"));
  CHECK_THROWS_WITH(n.add("image", y), Contains("two fields named 'image'"));
  std::ostringstream os;
  os << n;
  CHECK(os.str() == "{image: float32 [2], label: int64 [], path: string}");
}

// --- sources ---------------------------------------------------------------------------------------

TEST_CASE("from_tensor_slices: one tensor, a tuple and named fields", "[data][dataset]") {
  const auto x = gd::Tensor<float>::from({0, 1, 2, 3, 4, 5}, {3, 2});
  const auto y = gd::Tensor<int64_t>::from({7, 8, 9});

  auto one = Dataset::from_tensor_slices(x).collect();
  REQUIRE(one.size() == 3);
  CHECK(one[2].tensor<float>(0).shape() == gd::Shape{2});
  CHECK(values(one[2].tensor<float>(0)) == std::vector<float>{4, 5});

  auto pairs = Dataset::from_tensor_slices(x, y).collect();
  REQUIRE(pairs.size() == 3);
  auto [x1, y1] = pairs[1].as<float, int64_t>();
  CHECK(values(x1) == std::vector<float>{2, 3});
  CHECK(y1.item() == 8);
  CHECK(y1.rank() == 0);

  auto named = Dataset::from_tensor_slices({{"x", x}, {"y", y}, {"name", Strings{"a", "b", "c"}}}).collect();
  REQUIRE(named.size() == 3);
  CHECK(named[0].name(0) == "x");
  CHECK(named[0].tensor<int64_t>("y").item() == 7);
  CHECK(named[2].string("name") == "c");

  CHECK_THROWS_WITH(Dataset::from_tensor_slices(x, gd::Tensor<int64_t>::from({1, 2})),
                    Contains("different lengths") && Contains("field 1"));
  CHECK_THROWS_WITH(Dataset::from_tensor_slices(gd::Tensor<float>::scalar(1)), Contains("rank >= 1"));
  CHECK_THROWS_WITH(Dataset::from_tensor_slices({{"s", std::string("x")}}), Contains("single string"));
}

TEST_CASE("range: steps up, down, and the empty range", "[data][dataset]") {
  CHECK(ints(Dataset::range(0, 10, 3)) == V{0, 3, 6, 9});
  CHECK(ints(Dataset::range(5, 0, -2)) == V{5, 3, 1});
  CHECK(ints(Dataset::range(3)) == V{0, 1, 2});
  CHECK(ints(Dataset::range(4, 4)).empty());
  CHECK(ints(Dataset::range(4, 0)).empty());
  CHECK(ints(Dataset::range(INT64_MAX - 2, INT64_MAX, 5)) == V{INT64_MAX - 2});
  // Spans wider than INT64_MAX (end - begin overflows int64): Python's range gives these.
  CHECK(ints(Dataset::range(INT64_MIN, INT64_MAX, INT64_MAX)) == V{INT64_MIN, -1, INT64_MAX - 1});
  CHECK(ints(Dataset::range(INT64_MAX, INT64_MIN, INT64_MIN)) == V{INT64_MAX, -1});
  CHECK(ints(Dataset::range(INT64_MIN, INT64_MAX, INT64_MAX).skip(2)) == V{INT64_MAX - 1});
  CHECK(ints(Dataset::range(INT64_MIN, INT64_MAX, INT64_MAX).skip(3)).empty());
  CHECK_THROWS_AS(Dataset::range(0, 1, 0), gd::value_error);
}

TEST_CASE("generator: called with 0, 1, ... until nullopt, again each epoch", "[data][dataset]") {
  auto ds = Dataset::generator([](int64_t i) -> std::optional<Example> {
    if (i == 4) return std::nullopt;
    return scalar(i * i);
  });
  CHECK(ints(ds) == V{0, 1, 4, 9});
  CHECK(ints(ds) == V{0, 1, 4, 9});
}

TEST_CASE("idx_images and idx_labels: IDX files as examples", "[data][dataset]") {
  TempDir dir;
  std::string images = {0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 2, 0, char(255), char(51), char(102)};
  std::string labels = {0, 0, 8, 1, 0, 0, 0, 2, 3, 9};
  data_test::write_file(dir / "images", images);
  data_test::write_file(dir / "labels", labels);
  auto ds = Dataset::zip({Dataset::idx_images(dir / "images"), Dataset::idx_labels(dir / "labels")});
  auto all = ds.collect();
  REQUIRE(all.size() == 2);
  auto [img, lbl] = all[1].as<float, int64_t>();
  CHECK(img.shape() == gd::Shape{1, 2});
  CHECK(img(0, 0) == Approx(0.2f));
  CHECK(img(0, 1) == Approx(0.4f));
  CHECK(lbl.item() == 9);
  CHECK_THROWS_AS(Dataset::idx_labels(dir / "missing"), gd::io_error);
}

TEST_CASE("text_lines: lines of several files in order", "[data][dataset]") {
  TempDir dir;
  data_test::write_file(dir / "a.txt", "first\r\nsecond\n\nfourth\n");
  data_test::write_file(dir / "b.txt", "last without newline");
  data_test::write_file(dir / "empty.txt", "");
  Strings lines;
  for (const auto& e : Dataset::text_lines({dir / "a.txt", dir / "empty.txt", dir / "b.txt"}))
    lines.push_back(e.string(0));
  CHECK(lines == Strings{"first", "second", "", "fourth", "last without newline"});
  CHECK_THROWS_WITH(Dataset::text_lines({dir / "a.txt", dir / "nope.txt"}), Contains("nope.txt") && Contains("no such file"));
}

TEST_CASE("list_files: sorted shard names; an error when nothing matches", "[data][dataset]") {
  TempDir dir;
  for (int i : {3, 0, 2, 1}) data_test::write_file(dir / ("train.tfrecord-0000" + std::to_string(i) + "-of-00004"), "");
  data_test::write_file(dir / "test.tfrecord-00000-of-00001", "");
  const auto files = gd::data::list_files(dir / "train.tfrecord-*-of-00004");
  REQUIRE(files.size() == 4);
  for (int i = 0; i < 4; ++i) CHECK(files[size_t(i)] == dir / ("train.tfrecord-0000" + std::to_string(i) + "-of-00004"));
  CHECK_THROWS_WITH(gd::data::list_files(dir / "valid.tfrecord-*"), Contains("no file matches") && Contains("valid.tfrecord-*"));
  CHECK(Dataset::from_strings(files).collect().size() == 4);
}

// --- transformations ----------------------------------------------------------------------------

TEST_CASE("map and filter", "[data][dataset]") {
  auto ds = Dataset::range(10)
                .filter([](const Example& e) { return first(e) % 3 == 0; })
                .map([](Example e) { return gd::Tensor<int64_t>::scalar(first(e) * 10 + 1); });
  CHECK(ints(ds) == V{1, 31, 61, 91});
  auto named = Dataset::range(2).map([](Example e) {
    return Example{{"v", e[0]}, {"s", std::to_string(first(e))}};
  });
  auto all = named.collect();
  CHECK(all[1].string("s") == "1");
}

TEST_CASE("shuffle: a permutation, reproducible, new every epoch", "[data][dataset]") {
  auto ds = Dataset::range(100).shuffle(1000, 7);
  const V e0 = ints(ds), e1 = ints(ds);
  V sorted = e0;
  std::sort(sorted.begin(), sorted.end());
  V iota(100);
  std::iota(iota.begin(), iota.end(), 0);
  CHECK(sorted == iota);  // buffer >= size: a permutation
  CHECK(e0 != iota);
  CHECK(e0 != e1);  // reshuffled per epoch
  V s1 = e1;
  std::sort(s1.begin(), s1.end());
  CHECK(s1 == iota);

  auto again = Dataset::range(100).shuffle(1000, 7);
  CHECK(ints(again) == e0);  // the same seed: the same epochs
  CHECK(ints(again) == e1);
  again.set_epoch(0);
  CHECK(ints(again) == e0);
  CHECK(ints(Dataset::range(100).shuffle(1000, 8)) != e0);

  CHECK(ints(Dataset::range(5).shuffle(1, 3)) == V{0, 1, 2, 3, 4});  // buffer 1: no shuffling
  // buffer 2: the k-th output is one of the first k + 2 inputs, and each input comes out once.
  const V small = ints(Dataset::range(50).shuffle(2, 11));
  for (size_t k = 0; k < small.size(); ++k) CHECK(small[k] <= int64_t(k) + 1);
  V ss = small;
  std::sort(ss.begin(), ss.end());
  CHECK(std::adjacent_find(ss.begin(), ss.end()) == ss.end());
  CHECK(ss.size() == 50);
}

TEST_CASE("shuffle with the whole pass in its buffer: epoch_permutation's order, fit's", "[data][dataset]") {
  // The order of epoch e written out from the rule of data/order.hpp: positions n-1, ..., 0 take
  // the elements drawn one after the other, each drawn uniformly from those left, the last one
  // left taking the slot of the one drawn.
  auto by_hand = [](int64_t n, uint64_t seed, uint64_t e) {
    gd::Rng rng = gd::data::shuffle_rng(seed, e);
    V left(static_cast<size_t>(n)), order(static_cast<size_t>(n));
    std::iota(left.begin(), left.end(), 0);
    for (size_t i = order.size(); i > 0; --i) {
      const size_t j = size_t(rng.below(left.size()));
      order[i - 1] = left[j];
      left[j] = left.back();
      left.pop_back();
    }
    return order;
  };
  for (int64_t n : {1, 2, 10, 37}) {
    for (int64_t buffer : {n, n + 1, int64_t(1000)}) {
      auto ds = Dataset::range(n).shuffle(buffer, 9);
      for (uint64_t e = 0; e < 3; ++e) {
        const V order = ints(ds);
        CHECK(order == by_hand(n, 9, e));
        CHECK(order == gd::data::epoch_permutation(n, 9, e));
      }
    }
  }
  // A smaller buffer draws from the buffer and refills it from the input.
  CHECK(ints(Dataset::range(10).shuffle(9, 9)) != gd::data::epoch_permutation(10, 9, 0));
}

TEST_CASE("Shard: rounds of num_shards parts, one part each; bad arguments named", "[data][dataset]") {
  const gd::data::Shard s = gd::data::Shard::checked(3, 1, "test");
  CHECK(s.first(0, 1) == 1);     // Dataset::shard: element 1 of the round [0, 3)
  CHECK(s.after(1) == 1);        // then element 2 is skipped
  CHECK(s.first(12, 4) == 16);   // a round of 3 parts of 4 items from item 12: [16, 20) is shard 1's
  CHECK(s.after(4) == 4);
  CHECK_THROWS_WITH(Dataset::range(3).shard(2, 2),
                    Contains("shard: expected num_shards >= 1 and shard_index in [0, num_shards), got num_shards 2, "
                             "shard_index 2"));
  CHECK_THROWS_WITH(gd::data::Shard::checked(0, 0, "fit"), Contains("fit: expected num_shards >= 1"));
}

TEST_CASE("batch: stacked on a new axis, remainder kept or dropped, mismatch explained", "[data][dataset]") {
  auto b = Dataset::range(7).batch(3).collect();
  REQUIRE(b.size() == 3);
  CHECK(values(b[0].tensor<int64_t>(0)) == V{0, 1, 2});
  CHECK(b[0].tensor<int64_t>(0).shape() == gd::Shape{3});
  CHECK(values(b[2].tensor<int64_t>(0)) == V{6});
  CHECK(Dataset::range(7).batch(3, true).collect().size() == 2);

  const auto x = gd::Tensor<float>::from({0, 1, 2, 3, 4, 5}, {3, 2});
  auto xb = Dataset::from_tensor_slices({{"x", x}, {"s", Strings{"a", "b", "c"}}}).batch(2).collect();
  REQUIRE(xb.size() == 2);
  CHECK(xb[0].tensor<float>("x").shape() == gd::Shape{2, 2});
  CHECK(values(xb[0].tensor<float>("x")) == std::vector<float>{0, 1, 2, 3});
  CHECK(xb[0].strings("s") == Strings{"a", "b"});
  CHECK(xb[1].strings("s") == Strings{"c"});

  auto ragged = Dataset::generator([](int64_t i) -> std::optional<Example> {
    if (i == 3) return std::nullopt;
    return Example(gd::Tensor<float>::zeros({i + 1}));
  });
  CHECK_THROWS_WITH(ragged.batch(3).collect(),
                    Contains("batch: field 0 of element 1") && Contains("[2]") && Contains("[1]") && Contains("padded_batch"));
  CHECK_THROWS_AS(Dataset::range(3).batch(0), gd::value_error);
}

TEST_CASE("padded_batch: a padded shape beyond any tensor is a shape_error, not an allocation failure",
          "[data][dataset]") {
  const Dataset ds = Dataset::from_tensor_slices(gd::Tensor<float>::zeros({4, 3}));
  CHECK_THROWS_WITH(ds.padded_batch(2, {.padded_shapes = {{int64_t(1) << 40}}}).collect(),
                    Contains("kMaxTensorBytes"));
}

TEST_CASE("padded_batch: to the longest, to given shapes, with a padding value", "[data][dataset]") {
  // element i: [i+1] filled with i+1, and a [i+1, 2] matrix of ones.
  auto ds = Dataset::generator([](int64_t i) -> std::optional<Example> {
    if (i == 4) return std::nullopt;
    return Example::tuple(gd::Tensor<int64_t>::full({i + 1}, i + 1), gd::Tensor<float>::ones({i + 1, 2}));
  });
  auto b = ds.padded_batch(2).collect();
  REQUIRE(b.size() == 2);
  CHECK(b[0].tensor<int64_t>(0).shape() == gd::Shape{2, 2});
  CHECK(values(b[0].tensor<int64_t>(0)) == V{1, 0, 2, 2});
  CHECK(values(b[1].tensor<int64_t>(0)) == V{3, 3, 3, 0, 4, 4, 4, 4});
  CHECK(b[1].tensor<float>(1).shape() == gd::Shape{2, 4, 2});
  CHECK(values(b[0].tensor<float>(1)) == std::vector<float>{1, 1, 0, 0, 1, 1, 1, 1});

  auto fixed = ds.padded_batch(3, {.padded_shapes = {{5}, {-1, 3}}, .padding_value = -1}).collect();
  REQUIRE(fixed.size() == 2);
  CHECK(values(fixed[0].tensor<int64_t>(0)) == V{1, -1, -1, -1, -1, 2, 2, -1, -1, -1, 3, 3, 3, -1, -1});
  CHECK(fixed[0].tensor<float>(1).shape() == gd::Shape{3, 3, 3});
  CHECK(fixed[1].tensor<float>(1).shape() == gd::Shape{1, 4, 3});
  CHECK(values(fixed[1].tensor<float>(1)) == std::vector<float>{1, 1, -1, 1, 1, -1, 1, 1, -1, 1, 1, -1});
  CHECK(ds.padded_batch(3, {.drop_remainder = true}).collect().size() == 1);

  CHECK_THROWS_WITH(ds.padded_batch(4, {.padded_shapes = {{3}}}).collect(),
                    Contains("dimension 0 of 4") && Contains("padded shape allows (3)"));
  CHECK_THROWS_WITH(ds.padded_batch(2, {.padded_shapes = {{3, 3}}}).collect(), Contains("has rank 2 but the field has rank 1"));
}

TEST_CASE("repeat, skip, take, shard", "[data][dataset]") {
  CHECK(ints(Dataset::range(2).repeat(3)) == V{0, 1, 0, 1, 0, 1});
  CHECK(ints(Dataset::range(2).repeat().take(5)) == V{0, 1, 0, 1, 0});
  CHECK(ints(Dataset::range(0).repeat()).empty());  // an empty pass ends a forever repeat
  CHECK(ints(Dataset::range(10).skip(3).take(2)) == V{3, 4});
  CHECK(ints(Dataset::range(3).take(-1)) == V{0, 1, 2});
  CHECK(ints(Dataset::range(3).skip(5)).empty());
  CHECK(ints(Dataset::range(10).shard(3, 1)) == V{1, 4, 7});
  CHECK(ints(Dataset::range(10).shard(3, 0)) == V{0, 3, 6, 9});
  CHECK(ints(Dataset::range(2).shard(3, 2)).empty());
  CHECK_THROWS_AS(Dataset::range(3).shard(2, 2), gd::value_error);

  // Each repetition reshuffles.
  const V r = ints(Dataset::range(10).shuffle(10, 1).repeat(2));
  REQUIRE(r.size() == 20);
  V a(r.begin(), r.begin() + 10), b(r.begin() + 10, r.end());
  CHECK(a != b);
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  CHECK(a == b);
}

TEST_CASE("zip: side by side, to the shortest", "[data][dataset]") {
  auto z = Dataset::zip({Dataset::range(3), Dataset::from_strings({"a", "b", "c", "d"})}).collect();
  REQUIRE(z.size() == 3);
  CHECK(first(z[2]) == 2);
  CHECK(z[2].string(1) == "c");
  // Inputs shuffled with the same seed stay aligned, epoch after epoch.
  auto x = Dataset::range(20).shuffle(20, 9), y = Dataset::range(20).map([](Example e) {
    return gd::Tensor<int64_t>::scalar(first(e) * 100);
  }).shuffle(20, 9);
  auto pairs = Dataset::zip({x, y});
  for (int epoch = 0; epoch < 2; ++epoch)
    for (const auto& e : pairs) CHECK(e.tensor<int64_t>(1).item() == 100 * first(e));
}

TEST_CASE("interleave: tf.data's order for cycle_length and block_length", "[data][dataset]") {
  // tf.data.Dataset.range(1, 6).interleave(lambda x: from_tensors(x).repeat(6), cycle_length=2, block_length=4)
  auto ds = Dataset::range(1, 6).interleave(
      [](const Example& e) { return Dataset::generator([v = first(e)](int64_t i) -> std::optional<Example> {
                               if (i == 6) return std::nullopt;
                               return scalar(v);
                             }); },
      2, 4);
  CHECK(ints(ds) == V{1, 1, 1, 1, 2, 2, 2, 2, 1, 1, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 3, 3, 4, 4, 5, 5, 5, 5, 5, 5});

  TempDir dir;
  data_test::write_file(dir / "f0.txt", "a0\na1\na2\n");
  data_test::write_file(dir / "f1.txt", "b0\nb1\n");
  data_test::write_file(dir / "f2.txt", "c0\n");
  auto lines = Dataset::from_strings(gd::data::list_files(dir / "f*.txt"))
                   .interleave([](const Example& f) { return Dataset::text_lines({f.string(0)}); }, 2);
  Strings got;
  for (const auto& e : lines) got.push_back(e.string(0));
  CHECK(got == Strings{"a0", "b0", "a1", "b1", "a2", "c0"});
}

TEST_CASE("cache(): the first complete pass is kept in memory", "[data][dataset]") {
  auto calls = std::make_shared<std::atomic<int>>(0);
  auto ds = Dataset::range(5)
                .map([calls](Example e) {
                  ++*calls;
                  return e;
                })
                .cache();
  {
    auto it = ds.iterator();  // stops early: nothing cached
    it.next();
    it.next();
  }
  CHECK(*calls == 2);
  CHECK(ints(ds) == V{0, 1, 2, 3, 4});
  CHECK(*calls == 7);
  CHECK(ints(ds) == V{0, 1, 2, 3, 4});
  CHECK(*calls == 7);  // replayed
}

TEST_CASE("cache(file): written once, read by later passes and datasets; corruption is an io_error", "[data][dataset]") {
  TempDir dir;
  const std::string path = dir / "cache.bin";
  auto source = Dataset::from_tensor_slices({{"x", gd::Tensor<float>::from({1.5f, 2.5f, 3.5f, 4.5f}, {2, 2})},
                                             {"id", gd::Tensor<int64_t>::from({10, 20})},
                                             {"s", Strings{"one", "two, with \"quotes\""}}})
                    .batch(1);
  auto ds = source.cache(path);
  auto first_pass = ds.collect();
  REQUIRE(std::filesystem::exists(path));
  auto never = Dataset::generator([](int64_t) -> std::optional<Example> { throw std::runtime_error("not cached"); });
  auto replay = never.cache(path).collect();
  REQUIRE(replay.size() == 2);
  CHECK(replay[1].tensor<float>("x").shape() == gd::Shape{1, 2});
  CHECK(values(replay[1].tensor<float>("x")) == std::vector<float>{3.5f, 4.5f});
  CHECK(values(replay[0].tensor<int64_t>("id")) == V{10});
  CHECK(replay[1].strings("s") == Strings{"two, with \"quotes\""});

  const auto size = std::filesystem::file_size(path);
  std::filesystem::resize_file(path, size - 3);
  CHECK_THROWS_WITH(never.cache(path).collect(), Contains("cache: truncated file") && Contains(path));
  data_test::write_file(path, "not a cache");
  CHECK_THROWS_WITH(never.cache(path).collect(), Contains("not a gradus cache file"));
}

// --- threads -----------------------------------------------------------------------------------------

TEST_CASE("parallel_map: input order kept whatever the thread timing", "[data][dataset][threads]") {
  auto f = [](Example e) {
    const int64_t v = first(e);
    std::this_thread::sleep_for(std::chrono::microseconds((v * 7919) % 500));
    return gd::Tensor<int64_t>::scalar(v * v);
  };
  V want(200);
  for (int64_t i = 0; i < 200; ++i) want[size_t(i)] = i * i;
  CHECK(ints(Dataset::range(200).parallel_map(f, 4)) == want);
  CHECK(ints(Dataset::range(200).parallel_map(f, 3, 1)) == want);
  CHECK_THROWS_AS(Dataset::range(2).parallel_map(f, 0), gd::value_error);
  // sizes beyond the documented bounds: a value_error naming them, before any thread starts
  CHECK_THROWS_WITH(Dataset::range(2).parallel_map(f, 100000),
                    Catch::Contains("parallel_map: threads must be in [1, 1024]") &&
                        Catch::Contains("kMaxPipelineThreads") && Catch::Contains("100000"));
  CHECK_THROWS_WITH(Dataset::range(2).parallel_map(f, 2, 1 << 30), Catch::Contains("kMaxPipelineBuffer"));
  CHECK_THROWS_WITH(Dataset::range(2).prefetch(int64_t(1) << 40), Catch::Contains("prefetch: buffer size must be in [1, "));
  CHECK(ints(Dataset::range(3).parallel_map(f, gd::data::kMaxPipelineThreads, 1)) == V{0, 1, 4});  // the bound itself runs

  // Deterministic pipelines give the same stream every run.
  auto pipe = [&] { return Dataset::range(60).shuffle(20, 3).parallel_map(f, 3).batch(4).prefetch(2); };
  auto a = pipe(), b = pipe();
  for (int epoch = 0; epoch < 2; ++epoch) {
    auto ea = a.collect(), eb = b.collect();
    REQUIRE(ea.size() == eb.size());
    for (size_t i = 0; i < ea.size(); ++i) CHECK(values(ea[i].tensor<int64_t>(0)) == values(eb[i].tensor<int64_t>(0)));
  }
}

TEST_CASE("parallel_map and prefetch: a worker's exception reaches the consumer with its message", "[data][dataset][threads]") {
  auto f = [](Example e) {
    if (first(e) == 37) throw gd::value_error("decode: bad element 37");
    return e;
  };
  for (int variant = 0; variant < 3; ++variant) {
    Dataset ds = variant == 0 ? Dataset::range(100).parallel_map(f, 4)
                 : variant == 1 ? Dataset::range(100).map(f).prefetch(3)
                                : Dataset::range(100).parallel_map(f, 2).prefetch(2);
    auto it = ds.iterator();
    for (int64_t i = 0; i < 37; ++i) {
      auto e = it.next();
      REQUIRE(e);
      CHECK(first(*e) == i);
    }
    CHECK_THROWS_WITH(it.next(), "decode: bad element 37");
  }
  // An exception in the source under parallel_map ends the stream after it.
  auto src = Dataset::generator([](int64_t i) -> std::optional<Example> {
    if (i == 5) throw gd::io_error("reader: corrupt record 5");
    return scalar(i);
  });
  auto it = src.parallel_map([](Example e) { return e; }, 3).iterator();
  for (int i = 0; i < 5; ++i) REQUIRE(it.next());
  CHECK_THROWS_AS(it.next(), gd::io_error);
  CHECK_FALSE(it.next());
}

TEST_CASE("prefetch and parallel_map: a half-consumed pipeline tears down at once", "[data][dataset][threads]") {
  auto forever = Dataset::range(1).repeat();
  auto slow_map = [](Example e) {
    std::this_thread::sleep_for(20ms);
    return e;
  };
  const std::vector<Dataset> pipelines = {
      forever.prefetch(2),                                    // producer blocked on a full queue
      forever.parallel_map(slow_map, 4).prefetch(2),          // workers busy, then blocked
      forever.prefetch(1).parallel_map(slow_map, 2, 2).prefetch(1),
      Dataset::range(1000).interleave([&](const Example&) { return forever.prefetch(2); }, 3).prefetch(2),
  };
  for (Dataset ds : pipelines) {
    double teardown = 0;
    {
      auto it = ds.iterator();
      for (int i = 0; i < 3; ++i) REQUIRE(it.next());
      std::this_thread::sleep_for(30ms);  // let the threads fill their queues and block
      teardown = seconds([&] { it = Dataset::range(0).iterator(); });
    }
    CHECK(teardown < 1.0);
  }
  // A range-for left with break.
  int n = 0;
  const double t = seconds([&] {
    for (const auto& e : forever.parallel_map(slow_map, 3).prefetch(4)) {
      (void)e;
      if (++n == 5) break;
    }
  });
  CHECK(n == 5);
  CHECK(t < 2.0);
}

// --- epochs and resume ------------------------------------------------------------------------------

TEST_CASE("Iterator::state and Dataset::iterator(state) resume the exact stream", "[data][dataset]") {
  auto make = [] {
    return Dataset::range(23)
        .shuffle(8, 42)
        .map([](Example e) { return gd::Tensor<int64_t>::scalar(first(e) * 2); })
        .batch(3)
        .prefetch(2);
  };
  auto ds = make();
  std::vector<V> epoch[2];
  for (int e = 0; e < 2; ++e) {
    auto it = ds.iterator();
    CHECK(it.state() == gd::data::IteratorState{e, 0});
    while (auto b = it.next()) epoch[e].push_back(values(b->tensor<int64_t>(0)));
    CHECK(it.state() == gd::data::IteratorState{e, 8});
  }
  CHECK(epoch[0] != epoch[1]);
  for (int e = 0; e < 2; ++e)
    for (int64_t k = 0; k <= 8; ++k) {
      auto fresh = make();  // as after a restart
      auto it = fresh.iterator({e, k});
      CHECK(it.state() == gd::data::IteratorState{e, k});
      std::vector<V> rest;
      while (auto b = it.next()) rest.push_back(values(b->tensor<int64_t>(0)));
      CHECK(rest == std::vector<V>(epoch[e].begin() + k, epoch[e].end()));
      CHECK(fresh.epoch() == e + 1);
    }
  // Resume over parallel_map, repeat and filter (skipping by producing).
  auto make2 = [] {
    return Dataset::range(10).shuffle(10, 1).repeat(2).filter([](const Example& e) { return first(e) != 3; })
        .parallel_map([](Example e) { return e; }, 2);
  };
  auto d2 = make2();
  const V full = ints(d2);
  CHECK(full.size() == 18);
  auto it = make2().iterator({0, 11});
  V rest;
  while (auto e = it.next()) rest.push_back(first(*e));
  CHECK(rest == V(full.begin() + 11, full.end()));
}

TEST_CASE("Dataset: a default-constructed one cannot be iterated", "[data][dataset]") {
  Dataset d;
  CHECK_THROWS_WITH(d.iterator(), Contains("default-constructed"));
  CHECK_THROWS_AS(d.batch(2), gd::value_error);
}

TEST_CASE("A new source is one small class", "[data][dataset]") {
  struct Countdown : gd::data::Source {
    std::unique_ptr<gd::data::Stream> open(uint64_t) const override {
      struct S : gd::data::Stream {
        int64_t i = 3;
        std::optional<Example> next() override {
          if (i == 0) return std::nullopt;
          return Example(gd::Tensor<int64_t>::scalar(i--));
        }
      };
      return std::make_unique<S>();
    }
  };
  CHECK(ints(Dataset(std::make_shared<Countdown>()).repeat(2)) == V{3, 2, 1, 3, 2, 1});
}
