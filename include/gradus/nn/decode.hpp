// gradus/nn/decode.hpp — greedy decoding and beam search over any step function
// (tf.contrib.seq2seq's GreedyEmbeddingHelper and BeamSearchDecoder), and `reorder_state`, the
// customization point that picks and repeats rows of a decoder state.
//
// A step function maps the last token of each running sequence and the decoder state to the
// next-token logits and the new state:
//   (const Tensor<int64_t>& ids [R], const State& state) -> std::pair<Tensor<T> logits [R, V], State>
// (a Var<T> for the logits is accepted too). R = B for greedy_decode; R = B * beam_width for
// beam_search, beam k of batch row b being row b * beam_width + k. Decoding runs under `no_grad`:
// nothing is recorded on the tape. Both take the initial state with B rows (beam_search repeats
// each row beam_width times with reorder_state).
//
// Scores are log-probabilities (log_softmax of the logits) summed over the generated tokens and
// divided by GNMT's length penalty lp = ((5 + length) / 6)^alpha (alpha = length_penalty; 0 gives
// the plain log-probability), as TF's BeamSearchDecoder. The end token counts in the length. A
// sequence that emits end_token is finished: it stays finished, its later positions hold
// end_token and its log-probability and length are frozen. Decoding stops after max_length steps
// or when every sequence is finished.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "gradus/nn/recurrent.hpp"
#include "gradus/ops/reduce.hpp"
#include "gradus/ops/shape.hpp"
#include "gradus/ops/softmax.hpp"

namespace gradus::nn {

// ------------------------------------------------------------------------------ reorder_state

/// The state with row i of the result = row rows[i] of `state` (along axis 0): what beam search
/// does to the decoder state when it keeps, drops and repeats beams. Overloads for Var, Tensor,
/// LSTMState, std::vector, std::pair and std::tuple of those (nested freely); for a state type of
/// your own, declare `reorder_state(const MyState&, const std::vector<int64_t>&)` in its
/// namespace (found by argument-dependent lookup).
///   gd::nn::reorder_state(h, {0, 0, 1});   // h [2, U] -> [3, U]: row 0 twice, then row 1
template <Real T>
Var<T> reorder_state(const Var<T>& state, const std::vector<int64_t>& rows);
template <Element T>
Tensor<T> reorder_state(const Tensor<T>& state, const std::vector<int64_t>& rows);
template <Real T>
LSTMState<T> reorder_state(const LSTMState<T>& state, const std::vector<int64_t>& rows);
template <class S>
std::vector<S> reorder_state(const std::vector<S>& state, const std::vector<int64_t>& rows);
template <class A, class B>
std::pair<A, B> reorder_state(const std::pair<A, B>& state, const std::vector<int64_t>& rows);
template <class... S>
std::tuple<S...> reorder_state(const std::tuple<S...>& state, const std::vector<int64_t>& rows);

namespace detail {
inline Tensor<int64_t> rows_tensor(const std::vector<int64_t>& rows) {
  return Tensor<int64_t>::from(rows, Shape{int64_t(rows.size())});
}

/// Checks that every tensor of a decoder state (the types reorder_state takes) has `b` rows along
/// axis 0; a state type of the user's own is not looked into.
template <class S>
void check_state_rows(const S&, int64_t, const char*) {}
template <Element T>
void check_state_rows(const Tensor<T>& s, int64_t b, const char* op);
template <Real T>
void check_state_rows(const Var<T>& s, int64_t b, const char* op);
template <Real T>
void check_state_rows(const LSTMState<T>& s, int64_t b, const char* op);
template <class S>
void check_state_rows(const std::vector<S>& s, int64_t b, const char* op);
template <class A, class B>
void check_state_rows(const std::pair<A, B>& s, int64_t b, const char* op);
template <class... S>
void check_state_rows(const std::tuple<S...>& s, int64_t b, const char* op);

template <Element T>
void check_state_rows(const Tensor<T>& s, int64_t b, const char* op) {
  GRADUS_CHECK(shape_error, s.rank() >= 1 && s.shape()[0] == b, op, ": the initial state must have batch_size (", b,
               ") rows along axis 0, got a tensor of shape ", s.shape());
}
template <Real T>
void check_state_rows(const Var<T>& s, int64_t b, const char* op) {
  check_state_rows(s.value(), b, op);
}
template <Real T>
void check_state_rows(const LSTMState<T>& s, int64_t b, const char* op) {
  check_state_rows(s.h, b, op);
  check_state_rows(s.c, b, op);
}
template <class S>
void check_state_rows(const std::vector<S>& s, int64_t b, const char* op) {
  for (const S& x : s) check_state_rows(x, b, op);
}
template <class A, class B>
void check_state_rows(const std::pair<A, B>& s, int64_t b, const char* op) {
  check_state_rows(s.first, b, op);
  check_state_rows(s.second, b, op);
}
template <class... S>
void check_state_rows(const std::tuple<S...>& s, int64_t b, const char* op) {
  std::apply([&](const S&... x) { (check_state_rows(x, b, op), ...); }, s);
}
}  // namespace detail

template <Real T>
Var<T> reorder_state(const Var<T>& state, const std::vector<int64_t>& rows) {
  return gradus::gather(state, detail::rows_tensor(rows), 0);
}
template <Element T>
Tensor<T> reorder_state(const Tensor<T>& state, const std::vector<int64_t>& rows) {
  return gradus::gather(state, detail::rows_tensor(rows), 0);
}
template <Real T>
LSTMState<T> reorder_state(const LSTMState<T>& state, const std::vector<int64_t>& rows) {
  return {reorder_state(state.h, rows), reorder_state(state.c, rows)};
}
template <class S>
std::vector<S> reorder_state(const std::vector<S>& state, const std::vector<int64_t>& rows) {
  std::vector<S> out;
  out.reserve(state.size());
  for (const S& s : state) out.push_back(reorder_state(s, rows));
  return out;
}
template <class A, class B>
std::pair<A, B> reorder_state(const std::pair<A, B>& state, const std::vector<int64_t>& rows) {
  return {reorder_state(state.first, rows), reorder_state(state.second, rows)};
}
template <class... S>
std::tuple<S...> reorder_state(const std::tuple<S...>& state, const std::vector<int64_t>& rows) {
  return std::apply([&](const S&... s) { return std::tuple<S...>(reorder_state(s, rows)...); }, state);
}

// ------------------------------------------------------------------------------ decoding

/// Options of greedy_decode and beam_search (see the file comment).
/// The most rows a decode runs: batch_size (times beam_width for beam_search), each with a
/// sequence, a state row and a row of logits. More is a value_error, not an allocation failure.
inline constexpr int64_t kMaxDecodeRows = int64_t(1) << 24;

struct DecodeOptions {
  std::vector<int64_t> start_tokens;  ///< the first input of each batch row, or one for every row
  int64_t batch_size = 0;             ///< B; 0: the number of start_tokens
  int64_t end_token = 0;              ///< the token that finishes a sequence
  int64_t max_length = 0;             ///< most tokens generated per sequence (> 0)
  int64_t beam_width = 1;             ///< beams kept per batch row (beam_search)
  double length_penalty = 0;          ///< alpha of GNMT's length penalty ((5 + length) / 6)^alpha
};

/// Decoded sequences, best first: ids [B, K, L] (L = the steps run; positions after the end hold
/// end_token), scores [B, K] and lengths [B, K] (tokens generated, the end token included).
/// K = 1 for greedy_decode, beam_width for beam_search.
template <Real T>
struct DecodeResult {
  Tensor<int64_t> ids;
  Tensor<T> scores;
  Tensor<int64_t> lengths;
};

namespace detail {

template <class Step, class State>
using step_result_t = std::remove_cvref_t<std::invoke_result_t<Step&, const Tensor<int64_t>&, const State&>>;
template <class Step, class State>
using logits_type_t = std::remove_cvref_t<typename step_result_t<Step, State>::first_type>;

/// The checked batch size B and the start token of each row.
inline std::vector<int64_t> start_ids(const DecodeOptions& o, const char* op, int64_t beams) {
  const int64_t given = int64_t(o.start_tokens.size());
  const int64_t b = o.batch_size > 0 ? o.batch_size : given;
  GRADUS_CHECK(value_error, given == 1 || (given == b && given > 0), op, ": expected 1 or batch_size (", b,
               ") start_tokens, got ", given);
  GRADUS_CHECK(value_error, o.batch_size >= 0 && o.max_length > 0 && o.end_token >= 0 && o.beam_width > 0 &&
                                std::isfinite(o.length_penalty),
               op, ": expected batch_size >= 0, max_length > 0, end_token >= 0, beam_width > 0 and a finite "
               "length_penalty, got batch_size ", o.batch_size, ", max_length ", o.max_length, ", end_token ",
               o.end_token, ", beam_width ", o.beam_width, ", length_penalty ", o.length_penalty);
  // b * beams rows, checked without forming the product (it could wrap)
  GRADUS_CHECK(value_error, b <= kMaxDecodeRows / beams, op, ": batch_size ", b, " x beam_width ", beams,
               " rows exceed the limit of ", kMaxDecodeRows, " (nn::kMaxDecodeRows)");
  return given == 1 ? std::vector<int64_t>(size_t(b), o.start_tokens[0]) : o.start_tokens;
}

/// log_softmax of the step's logits, checked to be [rows, V] with V > end_token.
template <class L>
auto step_log_probs(const L& logits, int64_t rows, int64_t end_token, const char* op, const char* rows_are) {
  const auto& z = [&]() -> const auto& {
    if constexpr (is_var_v<L>)
      return logits.value();
    else
      return logits;
  }();
  GRADUS_CHECK(shape_error, z.rank() == 2 && z.shape()[0] == rows && z.shape()[1] > end_token, op,
               ": the step function must return logits [R, V] with R = ", rows, " (", rows_are,
               ") and V > end_token = ", end_token, ", got ", z.shape());
  return gradus::log_softmax(z.to(gradus::cpu), -1);
}

/// GNMT's length penalty ((5 + length) / 6)^alpha.
inline double length_penalty(int64_t length, double alpha) {
  return alpha == 0 ? 1.0 : std::pow((5.0 + double(length)) / 6.0, alpha);
}

/// The result tensors from per-sequence tokens (each padded with end_token to the longest).
template <Real T>
DecodeResult<T> decode_result(int64_t b, int64_t k, const std::vector<std::vector<int64_t>>& tokens,
                              const std::vector<T>& scores, const std::vector<int64_t>& lengths, int64_t end) {
  size_t l = 0;
  for (const auto& t : tokens) l = std::max(l, t.size());
  DecodeResult<T> r{Tensor<int64_t>::full({b, k, int64_t(l)}, end), Tensor<T>::from(scores, {b, k}),
                    Tensor<int64_t>::from(lengths, {b, k})};
  for (size_t i = 0; i < tokens.size(); ++i) std::copy(tokens[i].begin(), tokens[i].end(), r.ids.data() + i * l);
  return r;
}

}  // namespace detail

/// Greedy decoding: at each step every unfinished row takes its most likely token (the first
/// one on ties). `initial` has B rows (shape_error otherwise, for the state types reorder_state
/// takes). Returns K = 1 sequence per row.
///   auto r = gd::nn::greedy_decode(step, state0, {.start_tokens = {go}, .batch_size = 8,
///                                                 .end_token = eos, .max_length = 50});
///   r.ids   // [8, 1, L]
template <class Step, class State>
auto greedy_decode(Step&& step, const State& initial, const DecodeOptions& o) {
  using L = detail::logits_type_t<Step, State>;
  using T = value_type_t<L>;
  const char* op = "greedy_decode";
  no_grad guard;
  const std::vector<int64_t> start = detail::start_ids(o, op, 1);
  const int64_t b = int64_t(start.size());
  detail::check_state_rows(initial, b, op);
  Tensor<int64_t> ids = Tensor<int64_t>::from(start, {b});
  State state = initial;
  std::vector<std::vector<int64_t>> tokens(static_cast<size_t>(b));
  std::vector<double> logp(size_t(b), 0.0);  // summed in double, as beam_search does
  std::vector<int64_t> lengths(size_t(b), 0);
  std::vector<char> finished(size_t(b), 0);
  for (int64_t t = 0; t < o.max_length; ++t) {
    auto [logits, next] = step(ids, state);
    const Tensor<T> lp = detail::step_log_probs(logits, b, o.end_token, op, "the batch size");
    const Tensor<int64_t> best = gradus::argmax(lp, -1);
    const int64_t v = lp.shape()[1];
    bool all = true;
    for (int64_t r = 0; r < b; ++r) {
      int64_t id = o.end_token;
      if (!finished[size_t(r)]) {
        id = best.data()[r];
        logp[size_t(r)] += double(lp.data()[r * v + id]);
        ++lengths[size_t(r)];
        finished[size_t(r)] = id == o.end_token;
      }
      tokens[size_t(r)].push_back(id);
      ids.data()[r] = id;
      all = all && finished[size_t(r)];
    }
    state = std::move(next);
    if (all) break;
  }
  std::vector<T> scores(static_cast<size_t>(b));
  for (int64_t r = 0; r < b; ++r)
    scores[size_t(r)] = T(logp[size_t(r)] / detail::length_penalty(lengths[size_t(r)], o.length_penalty));
  return detail::decode_result<T>(b, 1, tokens, scores, lengths, o.end_token);
}

/// Beam search (TF's BeamSearchDecoder): keeps the beam_width best sequences of each batch row.
/// At each step every beam's continuations (only end_token for a finished beam, at no cost) are
/// scored by log-probability / length penalty; the beam_width best of each row survive (ties: the
/// lower beam, then the lower token), and the state rows follow their beams through
/// reorder_state. At the first step only beam 0 is live, so the beams start distinct. `initial`
/// has B rows (shape_error otherwise, for the state types reorder_state takes). Returns the beams
/// best first.
///   auto r = gd::nn::beam_search(step, state0, {.start_tokens = {go}, .batch_size = 8, .end_token = eos,
///                                               .max_length = 50, .beam_width = 5, .length_penalty = 0.6});
///   r.ids   // [8, 5, L]; r.ids[b][0] is the best sequence of row b
template <class Step, class State>
auto beam_search(Step&& step, const State& initial, const DecodeOptions& o) {
  using L = detail::logits_type_t<Step, State>;
  using T = value_type_t<L>;
  const char* op = "beam_search";
  no_grad guard;
  const std::vector<int64_t> start = detail::start_ids(o, op, o.beam_width);
  const int64_t b = int64_t(start.size()), k = o.beam_width, rows = b * k;
  detail::check_state_rows(initial, b, op);
  std::vector<int64_t> tile(static_cast<size_t>(rows)), first(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) tile[size_t(r)] = r / k, first[size_t(r)] = start[size_t(r / k)];
  Tensor<int64_t> ids = Tensor<int64_t>::from(first, {rows});
  State state = reorder_state(initial, tile);

  constexpr double dead = -std::numeric_limits<double>::infinity();
  std::vector<std::vector<int64_t>> tokens(static_cast<size_t>(rows));
  std::vector<double> logp(size_t(rows), dead), score(size_t(rows), dead);
  for (int64_t i = 0; i < b; ++i) logp[size_t(i * k)] = 0;  // only beam 0 is live at first
  std::vector<int64_t> lengths(size_t(rows), 0);
  std::vector<char> finished(size_t(rows), 0);

  struct Candidate {
    double score, logp;
    int64_t beam, token, length;
  };
  std::vector<Candidate> cand;
  std::vector<int64_t> parent(static_cast<size_t>(rows));
  for (int64_t t = 0; t < o.max_length; ++t) {
    auto [logits, next] = step(ids, state);
    const Tensor<T> lp = detail::step_log_probs(logits, rows, o.end_token, op, "batch size × beam_width");
    const int64_t v = lp.shape()[1];
    std::vector<std::vector<int64_t>> new_tokens(static_cast<size_t>(rows));
    std::vector<double> new_logp(static_cast<size_t>(rows)), new_score(static_cast<size_t>(rows));
    std::vector<int64_t> new_lengths(static_cast<size_t>(rows));
    std::vector<char> new_finished(static_cast<size_t>(rows));
    for (int64_t i = 0; i < b; ++i) {
      cand.clear();
      for (int64_t j = 0; j < k; ++j) {
        const int64_t r = i * k + j;
        if (finished[size_t(r)]) {
          cand.push_back({score[size_t(r)], logp[size_t(r)], j, o.end_token, lengths[size_t(r)]});
          continue;
        }
        const double pen = detail::length_penalty(lengths[size_t(r)] + 1, o.length_penalty);
        for (int64_t w = 0; w < v; ++w) {
          const double total = logp[size_t(r)] + double(lp.data()[r * v + w]);
          cand.push_back({total / pen, total, j, w, lengths[size_t(r)] + 1});
        }
      }
      // the k best; candidates are in (beam, token) order, so a stable order keeps ties by it
      const auto better = [](const Candidate& x, const Candidate& y) { return x.score > y.score; };
      const size_t keep = std::min(size_t(k), cand.size());
      std::partial_sort(cand.begin(), cand.begin() + ptrdiff_t(keep), cand.end(), [&](const Candidate& x, const Candidate& y) {
        if (x.score != y.score) return better(x, y);
        return x.beam != y.beam ? x.beam < y.beam : x.token < y.token;
      });
      for (int64_t j = 0; j < k; ++j) {
        const int64_t r = i * k + j;
        const Candidate c = size_t(j) < keep ? cand[size_t(j)] : Candidate{dead, dead, 0, o.end_token, 0};
        const int64_t from = i * k + c.beam;
        parent[size_t(r)] = from;
        new_tokens[size_t(r)] = tokens[size_t(from)];
        new_tokens[size_t(r)].push_back(c.token);
        new_logp[size_t(r)] = c.logp;
        new_score[size_t(r)] = c.score;
        new_lengths[size_t(r)] = c.length;
        new_finished[size_t(r)] = finished[size_t(from)] || c.token == o.end_token;
        ids.data()[r] = c.token;
      }
    }
    tokens = std::move(new_tokens);
    logp = std::move(new_logp);
    score = std::move(new_score);
    lengths = std::move(new_lengths);
    finished = std::move(new_finished);
    state = reorder_state(next, parent);
    if (std::all_of(finished.begin(), finished.end(), [](char f) { return f != 0; })) break;
  }
  std::vector<T> scores(score.begin(), score.end());
  return detail::decode_result<T>(b, k, tokens, scores, lengths, o.end_token);
}

}  // namespace gradus::nn
