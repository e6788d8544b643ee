// Tests of the text helpers: Vocabulary, read_words, ptb_batches and pad_sequences, against
// hand-worked examples (pad_sequences' from the Keras documentation's semantics).
#include <catch2/catch.hpp>

#include "data_support.hpp"
#include "gradus/data/text.hpp"

namespace gd = gradus;
using gd::data::Vocabulary;
using Catch::Matchers::Contains;
using data_test::TempDir;
using data_test::values;
using V = std::vector<int64_t>;
using W = std::vector<std::string>;

TEST_CASE("Vocabulary: frequency order, ties bytewise, specials first", "[data][text]") {
  const W text = {"the", "cat", "the", "dog", "a", "cat", "the", "<unk>", "<eos>"};
  auto v = Vocabulary::build(text);
  CHECK(v.words() == W{"<unk>", "<eos>", "the", "cat", "a", "dog"});
  CHECK(v.unk_id() == 0);
  CHECK(v.eos_id() == 1);
  CHECK(v.id("cat") == 3);
  CHECK(v.id("zebra") == 0);
  CHECK(v.word(5) == "dog");
  CHECK_THROWS_WITH(v.word(6), Contains("id 6 is not in [0, 6)"));
  CHECK(v.encode({"a", "the", "bird"}) == V{4, 2, 0});
  CHECK(v.decode({2, 3}) == W{"the", "cat"});

  CHECK(Vocabulary::build(text, {.max_size = 4}).words() == W{"<unk>", "<eos>", "the", "cat"});
  CHECK(Vocabulary::build(text, {.min_count = 2}).words() == W{"<unk>", "<eos>", "the", "cat"});
  auto plain = Vocabulary::build({"b", "a", "b"}, {.unk = "", .eos = ""});
  CHECK(plain.words() == W{"b", "a"});
  CHECK_THROWS_WITH(plain.id("c"), Contains("'c' is not in the vocabulary"));
}

TEST_CASE("Vocabulary: save and load, one word per line", "[data][text]") {
  TempDir dir;
  auto v = Vocabulary::build({"x", "y", "y"});
  v.save(dir / "vocab.txt");
  std::ifstream f(dir / "vocab.txt");
  std::string all((std::istreambuf_iterator<char>(f)), {});
  CHECK(all == "<unk>\n<eos>\ny\nx\n");
  auto w = Vocabulary::load(dir / "vocab.txt");
  CHECK(w.words() == v.words());
  CHECK(w.unk_id() == 0);
  CHECK(w.id("x") == 3);
  data_test::write_file(dir / "dup.txt", "a\nb\na\n");
  CHECK_THROWS_WITH(Vocabulary::load(dir / "dup.txt"), Contains("line 3: 'a' appears twice"));
  data_test::write_file(dir / "gap.txt", "a\n\nb\n");
  CHECK_THROWS_WITH(Vocabulary::load(dir / "gap.txt"), Contains("line 2 is empty"));
}

TEST_CASE("read_words: words with <eos> after every line", "[data][text]") {
  TempDir dir;
  data_test::write_file(dir / "t.txt", " a  b\n\nc\td\n");
  CHECK(gd::data::read_words(dir / "t.txt") == W{"a", "b", "<eos>", "<eos>", "c", "d", "<eos>"});
  CHECK(gd::data::read_words(dir / "t.txt", "") == W{"a", "b", "c", "d"});
  CHECK_THROWS_AS(gd::data::read_words(dir / "none.txt"), gd::io_error);
}

TEST_CASE("ptb_batches: [batch, L] rows cut into (x, y) windows shifted by one", "[data][text]") {
  V ids(11);
  for (int i = 0; i < 11; ++i) ids[size_t(i)] = i;  // 11 ids, batch 2: rows 0..4 and 5..9, id 10 dropped
  auto b = gd::data::ptb_batches(ids, 2, 2).collect();
  REQUIRE(b.size() == 2);  // (5 - 1) / 2
  auto [x0, y0] = b[0].as<int64_t, int64_t>();
  CHECK(x0.shape() == gd::Shape{2, 2});
  CHECK(values(x0) == V{0, 1, 5, 6});
  CHECK(values(y0) == V{1, 2, 6, 7});
  CHECK(values(b[1].tensor<int64_t>("x")) == V{2, 3, 7, 8});
  CHECK(values(b[1].tensor<int64_t>("y")) == V{3, 4, 8, 9});
  CHECK(gd::data::ptb_batches(ids, 1, 3).collect().size() == 3);  // (11 - 1) / 3
  CHECK_THROWS_WITH(gd::data::ptb_batches(ids, 4, 3), Contains("make no batch of 4 x 3"));
}

TEST_CASE("pad_sequences: Keras' padding and truncating", "[data][text]") {
  const std::vector<V> s = {{1, 2, 3}, {4, 5}, {6}};
  auto a = gd::data::pad_sequences(s);
  CHECK(a.shape() == gd::Shape{3, 3});
  CHECK(values(a) == V{1, 2, 3, 0, 4, 5, 0, 0, 6});
  CHECK(values(gd::data::pad_sequences(s, {.padding = gd::data::Pad::post})) == V{1, 2, 3, 4, 5, 0, 6, 0, 0});
  CHECK(values(gd::data::pad_sequences(s, {.maxlen = 2})) == V{2, 3, 4, 5, 0, 6});
  CHECK(values(gd::data::pad_sequences(s, {.maxlen = 2, .truncating = gd::data::Pad::post})) == V{1, 2, 4, 5, 0, 6});
  CHECK(values(gd::data::pad_sequences(s, {.maxlen = 4, .padding = gd::data::Pad::post, .value = -1})) ==
        V{1, 2, 3, -1, 4, 5, -1, -1, 6, -1, -1, -1});
  CHECK(gd::data::pad_sequences({{}, {}}).shape() == gd::Shape{2, 0});
  auto f = gd::data::pad_sequences<float>({{0.5f}, {1.f, 2.f}});
  CHECK(values(f) == std::vector<float>{0, 0.5f, 1, 2});
}
