// greedy_decode and beam_search: hand-worked beam examples with scripted step functions (a table
// of next-token probabilities), the length penalty changing the ranking, beam width 1 against
// greedy, a batch against single runs, reorder_state on every supported state type, and errors.
#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include <gradus/gradus.hpp>
#include <gradus/nn.hpp>
#include <gradus/nn/decode.hpp>

#include "../support/short_names.hpp"

using Td = gd::Tensor<double>;
using Ti = gd::Tensor<int64_t>;
using V = gd::Var<double>;

namespace {

// A scripted decoder over the vocabulary {0: end, 1: a, 2: b}. The state of a row is the code of
// the prefix it has generated (root 0; appending token x maps code c to 3c + x + 1), so a state
// row that does not follow its beam reads the wrong table entry. A start token (-1) keeps the
// root. The logits are log(p) of the table's probabilities, so log_softmax gives back log(p).
struct Scripted {
  std::map<int64_t, std::vector<double>> table;  // prefix code -> p(next token)
  int calls = 0;
  std::pair<Td, Ti> operator()(const Ti& ids, const Ti& state) {
    ++calls;
    const int64_t r = ids.size();
    Ti next = Ti::zeros({r});
    Td logits = Td::zeros({r, 3});
    for (int64_t i = 0; i < r; ++i) {
      next.data()[i] = ids.data()[i] < 0 ? 0 : 3 * state.data()[i] + ids.data()[i] + 1;
      const auto it = table.find(next.data()[i]);
      const std::vector<double> p = it != table.end() ? it->second : std::vector<double>{1.0 / 3, 1.0 / 3, 1.0 / 3};
      for (int64_t v = 0; v < 3; ++v) logits(i, v) = std::log(p[size_t(v)]);
    }
    return {logits, next};
  }
};
constexpr int64_t A = 1, B = 2, END = 0;
int64_t code(std::initializer_list<int64_t> prefix) {
  int64_t c = 0;
  for (int64_t x : prefix) c = 3 * c + x + 1;
  return c;
}

std::vector<int64_t> ids_row(const Ti& ids, int64_t b, int64_t k) {
  const int64_t l = ids.shape()[2];
  const int64_t* p = ids.data() + (b * ids.shape()[1] + k) * l;
  return std::vector<int64_t>(p, p + l);
}

// A small LSTM language model: embedding -> LSTM cell -> logits. Its state carries, besides the
// LSTM's {h, c}, each row's batch index (a beam must never move to another batch row) and a
// vector of Vars, so decoding reorders a tuple of every supported kind.
struct TinyLM {
  gd::Rng rng{5};
  nn::Embedding<double> emb{{.vocab = 7, .dim = 4}, rng};
  nn::LSTMCell<double> cell{{.in = 4, .units = 5}, rng};
  nn::Dense<double> out{{.in = 5, .out = 7, .bias_initializer = gd::init::random_normal{.stddev = 1.0}}, rng};
  int64_t beam_width = 1;
  int64_t first_tag = 0;  // the batch index of the first row
  bool recorded = false;  // set if a step ever ran with the tape on
  using State = std::tuple<nn::LSTMState<double>, Ti, std::vector<V>>;

  TinyLM() {
    // bigger weights: sharper, more varied next-token distributions
    for (auto& v : cell.parameters()) v.value() = gd::eval(v.value() * 3.0);
  }
  State initial(int64_t rows, uint64_t seed) {
    gd::Rng r(seed);
    Ti tag = Ti::zeros({rows});
    for (int64_t i = 0; i < rows; ++i) tag.data()[i] = i;
    return {nn::LSTMState<double>{V::constant(Td::random_normal({rows, 5}, r)), V::constant(Td::random_normal({rows, 5}, r))},
            tag, std::vector<V>{V::constant(Td::random_normal({rows, 2}, r))}};
  }
  std::pair<Td, State> operator()(const Ti& ids, const State& s) {
    recorded = recorded || gd::grad_enabled();
    const auto& [lstm, tag, extra] = s;
    const int64_t rows = ids.size();
    for (int64_t i = 0; i < rows; ++i) REQUIRE(tag.data()[i] == first_tag + i / beam_width);  // rows stay in their batch row
    REQUIRE(extra[0].shape() == gd::Shape{rows, 2});
    const nn::LSTMState<double> h = cell.step(emb.forward(ids), lstm);
    return {out.forward(h.h).value(), State{h, tag, extra}};
  }
};

}  // namespace

TEST_CASE("beam_search: a hand-worked two-step example beats greedy", "[nn][decode]") {
  // p(first):        end 0.1, a 0.5, b 0.4          -> beams after step 1: [a] 0.5, [b] 0.4
  // p(next | a):     end 0.2, a 0.3, b 0.5          -> [a end] 0.10, [a a] 0.15, [a b] 0.25
  // p(next | b):     end 0.1, a 0.8, b 0.1          -> [b end] 0.04, [b a] 0.32, [b b] 0.04
  // beam width 2 keeps [b a] 0.32, [a b] 0.25; greedy takes a, then b: [a b] 0.25.
  Scripted s;
  s.table[code({})] = {0.1, 0.5, 0.4};
  s.table[code({A})] = {0.2, 0.3, 0.5};
  s.table[code({B})] = {0.1, 0.8, 0.1};
  const nn::DecodeOptions o{.start_tokens = {-1}, .end_token = END, .max_length = 2, .beam_width = 2};
  const auto r = nn::beam_search(std::ref(s), Ti::zeros({1}), o);
  REQUIRE(r.ids.shape() == gd::Shape{1, 2, 2});
  CHECK(ids_row(r.ids, 0, 0) == std::vector<int64_t>{B, A});
  CHECK(ids_row(r.ids, 0, 1) == std::vector<int64_t>{A, B});
  CHECK(r.scores(0, 0) == Approx(std::log(0.32)).epsilon(1e-12));
  CHECK(r.scores(0, 1) == Approx(std::log(0.25)).epsilon(1e-12));
  CHECK(r.lengths(0, 0) == 2);
  CHECK(r.lengths(0, 1) == 2);
  CHECK(s.calls == 2);

  const auto g = nn::greedy_decode(std::ref(s), Ti::zeros({1}), o);
  REQUIRE(g.ids.shape() == gd::Shape{1, 1, 2});
  CHECK(ids_row(g.ids, 0, 0) == std::vector<int64_t>{A, B});
  CHECK(g.scores(0, 0) == Approx(std::log(0.25)).epsilon(1e-12));
}

TEST_CASE("beam_search: finished beams stay finished; the length penalty changes the ranking", "[nn][decode]") {
  // p(first):      end 0.45, a 0.35, b 0.20
  // p(next | a):   end 0.05, a 0.60, b 0.35
  // p(next | a a): end 0.50, a 0.30, b 0.20
  Scripted s;
  s.table[code({})] = {0.45, 0.35, 0.20};
  s.table[code({A})] = {0.05, 0.60, 0.35};
  s.table[code({A, A})] = {0.50, 0.30, 0.20};
  nn::DecodeOptions o{.start_tokens = {-1}, .end_token = END, .max_length = 3, .beam_width = 2};

  SECTION("alpha = 0: plain log-probabilities") {
    // step 1: [end] 0.45 (finished, length 1), [a] 0.35
    // step 2: [end] 0.45 frozen; [a a] 0.21, [a b] 0.1225, [a end] 0.0175 -> keep [end], [a a]
    // step 3: [end] 0.45; [a a end] 0.105, [a a a] 0.063, [a a b] 0.042 -> keep [end], [a a end];
    // all finished.
    const auto r = nn::beam_search(std::ref(s), Ti::zeros({1}), o);
    REQUIRE(r.ids.shape() == gd::Shape{1, 2, 3});
    CHECK(ids_row(r.ids, 0, 0) == std::vector<int64_t>{END, END, END});  // padded with the end token
    CHECK(ids_row(r.ids, 0, 1) == std::vector<int64_t>{A, A, END});
    CHECK(r.lengths(0, 0) == 1);
    CHECK(r.lengths(0, 1) == 3);
    CHECK(r.scores(0, 0) == Approx(std::log(0.45)).epsilon(1e-12));
    CHECK(r.scores(0, 1) == Approx(std::log(0.105)).epsilon(1e-12));
  }
  SECTION("alpha = 5: longer sequences rise") {
    // lp(1) = 1, lp(2) = (7/6)^5 = 2.16144, lp(3) = (8/6)^5 = 4.21399; score = log p / lp.
    // step 1: [end] -0.7985, [a] -1.0498, [b] -1.6094 -> keep [end], [a]
    // step 2: [end] -0.7985 (frozen); [a a] ln 0.21 / lp(2) = -0.7220, [a b] -0.9718,
    //         [a end] -1.8718 -> keep [a a], [end]
    // step 3: [a a end] ln 0.105 / lp(3) = -0.5348, [a a a] ln 0.063 / lp(3) = -0.6561,
    //         [a a b] -0.7523, [end] -0.7985 -> keep [a a end], [a a a]
    o.length_penalty = 5;
    const auto r = nn::beam_search(std::ref(s), Ti::zeros({1}), o);
    REQUIRE(r.ids.shape() == gd::Shape{1, 2, 3});
    CHECK(ids_row(r.ids, 0, 0) == std::vector<int64_t>{A, A, END});
    CHECK(ids_row(r.ids, 0, 1) == std::vector<int64_t>{A, A, A});
    CHECK(r.lengths(0, 0) == 3);
    CHECK(r.lengths(0, 1) == 3);
    const double lp3 = std::pow(8.0 / 6.0, 5);
    CHECK(r.scores(0, 0) == Approx(std::log(0.105) / lp3).epsilon(1e-12));
    CHECK(r.scores(0, 1) == Approx(std::log(0.063) / lp3).epsilon(1e-12));
    CHECK(r.scores(0, 0) == Approx(-0.5348).margin(1e-4));
  }
}

TEST_CASE("beam_search with beam width 1 equals greedy_decode exactly", "[nn][decode]") {
  TinyLM lm;
  for (double alpha : {0.0, 0.7}) {
    const nn::DecodeOptions o{.start_tokens = {1, 2, 3}, .end_token = 0, .max_length = 12, .beam_width = 1,
                              .length_penalty = alpha};
    const auto g = nn::greedy_decode(std::ref(lm), lm.initial(3, 1), o);
    const auto b = nn::beam_search(std::ref(lm), lm.initial(3, 1), o);
    REQUIRE(g.ids.shape() == b.ids.shape());
    CHECK(std::equal(g.ids.begin(), g.ids.end(), b.ids.begin()));
    CHECK(std::equal(g.lengths.begin(), g.lengths.end(), b.lengths.begin()));
    CHECK(std::equal(g.scores.begin(), g.scores.end(), b.scores.begin()));
  }
  CHECK_FALSE(lm.recorded);
}

TEST_CASE("beam_search: a batch of two rows equals two single runs", "[nn][decode]") {
  TinyLM lm;
  lm.beam_width = 3;
  const nn::DecodeOptions both{.start_tokens = {2, 5}, .end_token = 0, .max_length = 10, .beam_width = 3,
                               .length_penalty = 0.6};
  const auto init = lm.initial(2, 3);
  const auto r = nn::beam_search(std::ref(lm), init, both);
  REQUIRE(r.ids.shape()[0] == 2);
  REQUIRE(r.ids.shape()[1] == 3);
  bool some_finished_early = false;
  for (int64_t b = 0; b < 2; ++b) {
    INFO("batch row " << b);
    nn::DecodeOptions one = both;
    one.start_tokens = {both.start_tokens[size_t(b)]};
    lm.first_tag = b;
    const auto single = nn::beam_search(std::ref(lm), nn::reorder_state(init, {b}), one);
    const int64_t l = single.ids.shape()[2];
    REQUIRE(l <= r.ids.shape()[2]);
    for (int64_t k = 0; k < 3; ++k) {
      const std::vector<int64_t> got = ids_row(r.ids, b, k), want = ids_row(single.ids, 0, k);
      for (int64_t t = 0; t < r.ids.shape()[2]; ++t) CHECK(got[size_t(t)] == (t < l ? want[size_t(t)] : int64_t(0)));
      CHECK(r.lengths(b, k) == single.lengths(0, k));
      CHECK(r.scores(b, k) == Approx(single.scores(0, k)).epsilon(1e-12));
      some_finished_early = some_finished_early || r.lengths(b, k) < r.ids.shape()[2];
    }
    for (int64_t k = 0; k + 1 < 3; ++k) CHECK(r.scores(b, k) >= r.scores(b, k + 1));  // best first
  }
  CHECK(some_finished_early);  // the example does exercise finished beams
}

TEST_CASE("reorder_state: Var, Tensor, LSTMState, vectors, pairs and tuples", "[nn][decode]") {
  const Td x = Td::from({0, 1, 10, 11, 20, 21}, {3, 2});
  const std::vector<int64_t> rows{2, 0, 0};
  const Td want = Td::from({20, 21, 0, 1, 0, 1}, {3, 2});
  auto same = [&](const Td& t) { return t.shape() == want.shape() && std::equal(t.begin(), t.end(), want.begin()); };
  CHECK(same(nn::reorder_state(x, rows)));
  CHECK(same(nn::reorder_state(V(x), rows).value()));
  const Ti tags = nn::reorder_state(Ti::from({7, 8, 9}), rows);
  CHECK(std::vector<int64_t>(tags.begin(), tags.end()) == std::vector<int64_t>{9, 7, 7});
  const auto lstm = nn::reorder_state(nn::LSTMState<double>{V(x), V(x)}, rows);
  CHECK(same(lstm.h.value()));
  CHECK(same(lstm.c.value()));
  const auto nested = nn::reorder_state(std::pair<std::vector<Td>, std::tuple<V, Ti>>{{x, x}, {V(x), Ti::from({1, 2, 3})}}, rows);
  CHECK(same(nested.first[1]));
  CHECK(same(std::get<0>(nested.second).value()));
  CHECK(std::get<1>(nested.second).data()[0] == 3);
  CHECK_THROWS_AS(nn::reorder_state(x, {3}), gd::value_error);
}

TEST_CASE("greedy_decode and beam_search: bad options and logits of the wrong shape", "[nn][decode]") {
  Scripted s;
  const nn::DecodeOptions o{.start_tokens = {-1}, .end_token = END, .max_length = 2, .beam_width = 2};
  auto wrong_rows = [](const Ti& ids, const Ti& st) { return std::pair<Td, Ti>{Td::zeros({ids.size() + 1, 3}), st}; };
  auto wrong_rank = [](const Ti& ids, const Ti& st) { return std::pair<Td, Ti>{Td::zeros({ids.size() * 3}), st}; };
  CHECK_THROWS_WITH(nn::beam_search(wrong_rows, Ti::zeros({1}), o),
                    Catch::Contains("beam_search") && Catch::Contains("[3,3]") && Catch::Contains("R = 2"));
  CHECK_THROWS_AS(nn::greedy_decode(wrong_rows, Ti::zeros({1}), o), gd::shape_error);
  CHECK_THROWS_AS(nn::beam_search(wrong_rank, Ti::zeros({1}), o), gd::shape_error);
  CHECK_THROWS_AS(nn::greedy_decode(wrong_rank, Ti::zeros({1}), o), gd::shape_error);
  nn::DecodeOptions bad = o;
  bad.end_token = 3;  // not below V = 3
  CHECK_THROWS_AS(nn::greedy_decode(std::ref(s), Ti::zeros({1}), bad), gd::shape_error);
  bad = o, bad.beam_width = 0;
  CHECK_THROWS_WITH(nn::beam_search(std::ref(s), Ti::zeros({1}), bad), Catch::Contains("beam_width"));
  bad = o, bad.max_length = 0;
  CHECK_THROWS_AS(nn::greedy_decode(std::ref(s), Ti::zeros({1}), bad), gd::value_error);
  bad = o, bad.start_tokens = {1, 2}, bad.batch_size = 3;
  CHECK_THROWS_WITH(nn::greedy_decode(std::ref(s), Ti::zeros({3}), bad), Catch::Contains("start_tokens"));
  bad = o, bad.start_tokens = {};
  CHECK_THROWS_AS(nn::beam_search(std::ref(s), Ti::zeros({1}), bad), gd::value_error);
}

TEST_CASE("beam_search and greedy_decode bound their rows: a value_error, not a wrapped index or bad_alloc",
          "[nn][decode]") {
  Scripted s;  // never called: the options are rejected first
  const int64_t huge = (int64_t(1) << 62) + 1;
  // 4 x (2^62 + 1) wraps to 4 in int64 arithmetic; it used to index past every buffer
  nn::DecodeOptions o{.start_tokens = {-1}, .batch_size = 4, .end_token = END, .max_length = 2, .beam_width = huge};
  CHECK_THROWS_WITH(nn::beam_search(std::ref(s), Ti::zeros({4}), o),
                    Catch::Contains("beam_search: batch_size 4 x beam_width 4611686018427387905 rows exceed the limit") &&
                        Catch::Contains("kMaxDecodeRows"));
  o.beam_width = int64_t(1) << 40;
  CHECK_THROWS_AS(nn::beam_search(std::ref(s), Ti::zeros({4}), o), gd::value_error);
  o.beam_width = 1;
  o.batch_size = int64_t(1) << 40;
  CHECK_THROWS_WITH(nn::greedy_decode(std::ref(s), Ti::zeros({4}), o), Catch::Contains("greedy_decode: batch_size"));
  CHECK(s.calls == 0);
}

TEST_CASE("greedy_decode and beam_search refuse an initial state whose rows are not the batch's", "[nn][decode]") {
  TinyLM lm;
  lm.beam_width = 2;
  const nn::DecodeOptions one{.start_tokens = {1}, .end_token = 0, .max_length = 4, .beam_width = 2};
  // 3 rows for a batch of 1: row 0 alone would have been used, silently
  CHECK_THROWS_WITH(nn::beam_search(std::ref(lm), lm.initial(3, 1), one),
                    Catch::Contains("beam_search: the initial state must have batch_size (1) rows") &&
                        Catch::Contains("[3,5]"));
  CHECK_THROWS_AS(nn::greedy_decode(std::ref(lm), lm.initial(3, 1), one), gd::shape_error);
  // one tensor deep inside the state is enough: the vector's [2, 2] in a batch of 1
  TinyLM::State mixed = lm.initial(1, 1);
  std::get<2>(mixed)[0] = V::constant(Td::zeros({2, 2}));
  CHECK_THROWS_WITH(nn::beam_search(std::ref(lm), mixed, one), Catch::Contains("[2,2]"));
  Scripted s;  // a state that is one scalar
  const nn::DecodeOptions scripted{.start_tokens = {-1}, .end_token = END, .max_length = 2, .beam_width = 2};
  CHECK_THROWS_WITH(nn::beam_search(std::ref(s), Ti::zeros({}), scripted), Catch::Contains("shape []"));
  CHECK(s.calls == 0);
  CHECK_NOTHROW(nn::beam_search(std::ref(lm), lm.initial(1, 1), one));
}
