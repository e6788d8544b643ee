// Recurrent layers for encoder-decoder models and padded batches: final state out and initial
// state in (with gradient), masks, go_backwards, dropout / recurrent_dropout, stacked cells and
// Bidirectional. Forward values are compared with the Keras 2 equations written below as plain
// loops in double (keras/layers/recurrent.py: SimpleRNNCell, LSTMCell, GRUCell with reset_after;
// K.rnn's masking: a masked step keeps the state and outputs zero), gradients with central
// differences (check_module_gradient, double).
#include <catch2/catch.hpp>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include <gradus/gradus.hpp>
#include <gradus/nn.hpp>
#include <gradus/nn/bidirectional.hpp>
#include <gradus/nn/recurrent.hpp>
#include <gradus/testing/module_check.hpp>

#include "../support/module_gradient.hpp"
#include "../support/short_names.hpp"

using gradus_test::check_gradient;
using Td = gd::Tensor<double>;
using Ti = gd::Tensor<int64_t>;
using V = gd::Var<double>;

namespace {

double sigm(double v) { return 1 / (1 + std::exp(-v)); }

// ---------------------------------------------------------------- the independent reference

enum class Kind { simple, lstm, gru };

template <class L>
constexpr Kind kind_of() {
  if constexpr (std::same_as<L, nn::SimpleRNN<double>>) return Kind::simple;
  else if constexpr (std::same_as<L, nn::LSTM<double>>) return Kind::lstm;
  else return Kind::gru;
}

struct Weights {
  Td k, r, b;
};
template <class Cell>
Weights weights_of(const Cell& c) {
  return {c.kernel().value(), c.recurrent_kernel().value(), c.bias().value()};
}

// One step of one row (Keras 2 cell equations; SimpleRNN with tanh): x [in], h and c [u] updated.
void ref_step(Kind kind, const Weights& w, const std::vector<double>& x, std::vector<double>& h,
              std::vector<double>& c) {
  const size_t in = x.size(), u = h.size();
  auto xk = [&](size_t col) {
    double s = 0;
    for (size_t k = 0; k < in; ++k) s += x[k] * w.k(int64_t(k), int64_t(col));
    return s;
  };
  auto hr = [&](size_t col) {
    double s = 0;
    for (size_t k = 0; k < u; ++k) s += h[k] * w.r(int64_t(k), int64_t(col));
    return s;
  };
  std::vector<double> hn(u), cn = c;
  const double* b = w.b.data();
  for (size_t j = 0; j < u; ++j) {
    if (kind == Kind::simple) {
      hn[j] = std::tanh(xk(j) + hr(j) + b[j]);
    } else if (kind == Kind::lstm) {
      double z[4];
      for (size_t q = 0; q < 4; ++q) z[q] = xk(q * u + j) + hr(q * u + j) + b[q * u + j];
      cn[j] = sigm(z[1]) * c[j] + sigm(z[0]) * std::tanh(z[2]);
      hn[j] = sigm(z[3]) * std::tanh(cn[j]);
    } else {
      double mx[3], mi[3];
      for (size_t q = 0; q < 3; ++q) {
        mx[q] = xk(q * u + j) + b[q * u + j];
        mi[q] = hr(q * u + j) + b[3 * u + q * u + j];
      }
      const double z = sigm(mx[0] + mi[0]), r = sigm(mx[1] + mi[1]), hh = std::tanh(mx[2] + r * mi[2]);
      hn[j] = z * h[j] + (1 - z) * hh;
    }
  }
  h = hn;
  c = cn;
}

struct Ref {
  std::vector<double> y;     // [N, T, u]: the output of each processed step, 0 where masked
  std::vector<double> h, c;  // [N, u]: the final state
};

// The layer run row by row: backwards processes steps L-1 .. 0 (L = one past the row's last
// valid step) then L .. T-1 (tf.reverse_sequence's order); a masked step keeps h and c and
// outputs zeros.
Ref reference(Kind kind, const Weights& w, const Td& x, const Td* mask, bool backwards, int64_t u,
              const Td* h0 = nullptr, const Td* c0 = nullptr) {
  const int64_t n = x.shape()[0], steps = x.shape()[1], in = x.shape()[2];
  Ref out{std::vector<double>(size_t(n * steps * u), 0.0), {}, {}};
  for (int64_t i = 0; i < n; ++i) {
    int64_t len = steps;
    if (mask) {
      len = 0;
      for (int64_t t = 0; t < steps; ++t)
        if ((*mask)(i, t) != 0) len = t + 1;
    }
    std::vector<double> h(size_t(u), 0.0), c(size_t(u), 0.0);
    for (int64_t j = 0; j < u; ++j) {
      if (h0) h[size_t(j)] = (*h0)(i, j);
      if (c0) c[size_t(j)] = (*c0)(i, j);
    }
    for (int64_t tp = 0; tp < steps; ++tp) {
      const int64_t s = backwards && tp < len ? len - 1 - tp : tp;
      if (mask && (*mask)(i, s) == 0) continue;
      std::vector<double> xs(static_cast<size_t>(in));
      for (int64_t k = 0; k < in; ++k) xs[size_t(k)] = x(i, s, k);
      ref_step(kind, w, xs, h, c);
      for (int64_t j = 0; j < u; ++j) out.y[size_t((i * steps + tp) * u + j)] = h[size_t(j)];
    }
    out.h.insert(out.h.end(), h.begin(), h.end());
    out.c.insert(out.c.end(), c.begin(), c.end());
  }
  return out;
}

void check_values(const Td& got, const std::vector<double>& want) {
  REQUIRE(size_t(got.size()) == want.size());
  for (size_t k = 0; k < want.size(); ++k) CHECK(got.data()[k] == Approx(want[k]).epsilon(1e-12).margin(1e-14));
}

// ------------------------------------------------------------------------------ layer helpers

template <class L>
L make_layer(int64_t in, int64_t u, bool seq, bool back, gd::Rng& rng, double drop = 0, double rdrop = 0) {
  typename L::Options o{};
  o.in = in;
  o.units = u;
  o.return_sequences = seq;
  o.go_backwards = back;
  o.dropout = drop;
  o.recurrent_dropout = rdrop;
  L layer(o, rng);
  Td b = layer.cell().bias().value();  // non-zero biases, so the checks see them
  b.copy_(Td::random_normal(b.shape(), rng, 0, 0.3));
  return layer;
}

template <class L>
void copy_weights(L& to, const L& from) {
  const auto src = from.parameters();
  auto dst = to.parameters();
  REQUIRE(src.size() == dst.size());
  for (size_t k = 0; k < src.size(); ++k) dst[k].value().copy_(src[k].value());
}

void parts(const V& s, std::vector<V>& out) { out.push_back(s); }
void parts(const nn::LSTMState<double>& s, std::vector<V>& out) {
  out.push_back(s.h);
  out.push_back(s.c);
}
template <class S>
void parts(const std::vector<S>& s, std::vector<V>& out) {
  for (const S& x : s) parts(x, out);
}

// A random trainable state shaped like `zero`.
V random_like(const V& zero, gd::Rng& rng) { return V(Td::random_normal(zero.shape(), rng, 0, 0.5)); }
nn::LSTMState<double> random_like(const nn::LSTMState<double>& zero, gd::Rng& rng) {
  return {random_like(zero.h, rng), random_like(zero.c, rng)};
}
template <class S>
std::vector<S> random_like(const std::vector<S>& zero, gd::Rng& rng) {
  std::vector<S> out;
  for (const S& s : zero) out.push_back(random_like(s, rng));
  return out;
}

// Every output flattened to [N, ...] and joined: output, then each part of the final state.
V joined(const V& y, const std::vector<V>& state) {
  std::vector<V> all{V(gd::reshape(y, {y.shape()[0], -1}))};
  for (const V& s : state) all.push_back(s);
  return gd::concat(all, 1);
}

// The layer with its initial state as parameters ("s0_0", ...) and its final state joined to its
// output, so check_module_gradient differentiates through both.
template <class L>
struct WithState : nn::Module<double> {
  L layer;
  std::optional<typename L::State> s0;
  const Td* mask = nullptr;
  WithState(L l, const Td* m, bool with_initial, gd::Rng& rng) : layer(std::move(l)), mask(m) {
    register_module("layer", layer);
    if (!with_initial) return;
    s0 = random_like(layer.cell().initial_state(3), rng);
    std::vector<V> p;
    parts(*s0, p);
    for (size_t k = 0; k < p.size(); ++k) register_parameter("s0_" + std::to_string(k), p[k]);
  }
  V forward(const V& x) {
    auto [y, st] = layer.forward_with_state(x, {.initial = s0, .mask = mask});
    std::vector<V> p;
    parts(st, p);
    return joined(y, p);
  }
};

// [N, T] mask of rows with lengths 4, 2, 3 and a hole (1 0 1 0): the general case.
Td padded_mask() { return Td::from({1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0}, {3, 4}); }
Td holey_mask() { return Td::from({1, 1, 1, 1, 1, 0, 1, 0, 1, 1, 0, 0}, {3, 4}); }

}  // namespace

// ------------------------------------------------------------------------------ helpers

TEST_CASE("rnn-seq2seq: sequence_mask and reverse_sequence", "[rnn-seq2seq]") {
  const Td m = nn::sequence_mask<double>(Ti::from(std::vector<int64_t>{2, 0, 3}), 3);
  REQUIRE(m.shape() == gd::Shape{3, 3});
  const double want[] = {1, 1, 0, 0, 0, 0, 1, 1, 1};  // tf.sequence_mask([2, 0, 3], 3)
  for (int k = 0; k < 9; ++k) CHECK(m.data()[k] == want[k]);
  CHECK(nn::sequence_mask<double>(Ti::from(std::vector<int64_t>{5}), 3).data()[2] == 1);  // longer than max_len

  // x(i, t, d) = 10 t + d; rows reversed within lengths {2, 4, 0}
  Td x = Td::zeros({3, 4, 2});
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t t = 0; t < 4; ++t)
      for (int64_t d = 0; d < 2; ++d) x(i, t, d) = 10.0 * double(t) + double(d) + 100.0 * double(i);
  const Td r = nn::reverse_sequence(x, Ti::from(std::vector<int64_t>{2, 4, 0}));
  const int64_t src[3][4] = {{1, 0, 2, 3}, {3, 2, 1, 0}, {0, 1, 2, 3}};
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t t = 0; t < 4; ++t)
      for (int64_t d = 0; d < 2; ++d) CHECK(r(i, t, d) == x(i, src[i][t], d));
  // from a mask: the length is one past the last valid step (row 1: 1 0 1 0 -> 3)
  const Td rm = nn::reverse_sequence(x, holey_mask());
  const int64_t src_m[3][4] = {{3, 2, 1, 0}, {2, 1, 0, 3}, {1, 0, 2, 3}};
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t t = 0; t < 4; ++t) CHECK(rm(i, t, 1) == x(i, src_m[i][t], 1));
  // differentiable: it is a permutation
  gd::Rng rng(1);
  auto f = [](const V& v) { return V(nn::reverse_sequence(v, Ti::from(std::vector<int64_t>{3, 1}))); };
  CHECK(gd::compute_gradient_error(f, Td::random_normal({2, 3, 2}, rng)) < 1e-8);

  CHECK_THROWS_AS(nn::reverse_sequence(x, Ti::from(std::vector<int64_t>{2, 5, 0})), gd::value_error);
  CHECK_THROWS_AS(nn::reverse_sequence(x, Ti::from(std::vector<int64_t>{2, 4})), gd::shape_error);
  CHECK_THROWS_AS(nn::reverse_sequence(x, Td::ones({3, 3})), gd::shape_error);
  CHECK_THROWS_AS(nn::sequence_mask<double>(Ti::zeros({2, 2}), 3), gd::shape_error);
}

// ------------------------------------------------------------------------------ forward values

TEMPLATE_TEST_CASE("rnn-seq2seq: outputs and final state match the Keras equations as loops", "[rnn-seq2seq]",
                   nn::SimpleRNN<double>, nn::LSTM<double>, nn::GRU<double>) {
  constexpr Kind kind = kind_of<TestType>();
  gd::Rng rng(10);
  const int64_t n = 3, steps = 4, in = 3, u = 2;
  const Td x = Td::random_normal({n, steps, in}, rng);
  const Td h0 = Td::random_normal({n, u}, rng), c0 = Td::random_normal({n, u}, rng);
  const Td masks[] = {padded_mask(), holey_mask()};
  for (bool back : {false, true})
    for (int mk = -1; mk < 2; ++mk)
      for (bool with_initial : {false, true}) {
        INFO("go_backwards " << back << ", mask " << mk << ", initial " << with_initial);
        const Td* mask = mk < 0 ? nullptr : &masks[mk];
        TestType layer = make_layer<TestType>(in, u, true, back, rng);
        std::optional<typename TestType::State> s0;
        if (with_initial) {
          if constexpr (kind == Kind::lstm)
            s0 = nn::LSTMState<double>{V::constant(h0), V::constant(c0)};
          else
            s0 = V::constant(h0);
        }
        const auto [y, st] = layer.forward_with_state(x, {.initial = s0, .mask = mask});
        const Ref ref =
            reference(kind, weights_of(layer.cell()), x, mask, back, u, with_initial ? &h0 : nullptr,
                      with_initial ? &c0 : nullptr);
        REQUIRE(y.shape() == gd::Shape{n, steps, u});
        check_values(y.value(), ref.y);
        if constexpr (kind == Kind::lstm) {
          check_values(st.h.value(), ref.h);
          check_values(st.c.value(), ref.c);
        } else {
          check_values(st.value(), ref.h);
        }
        // without return_sequences: the last output is the final h
        TestType last = make_layer<TestType>(in, u, false, back, rng);
        copy_weights(last, layer);
        const auto [y_last, st_last] = last.forward_with_state(x, {.initial = s0, .mask = mask});
        check_values(y_last.value(), ref.h);
        if (mask) check_values(last.forward(x, *mask).value(), reference(kind, weights_of(layer.cell()), x, mask,
                                                                        back, u).h);
      }
}

TEMPLATE_TEST_CASE("rnn-seq2seq: the masked final state equals the unmasked run on the truncated sequence",
                   "[rnn-seq2seq]", nn::SimpleRNN<double>, nn::LSTM<double>, nn::GRU<double>) {
  gd::Rng rng(11);
  const int64_t steps = 5, in = 3, u = 3;
  const std::vector<int64_t> lengths{5, 2, 1, 4};
  const Td x = Td::random_normal({4, steps, in}, rng);
  const Td mask = nn::sequence_mask<double>(Ti::from(lengths), steps);
  for (bool back : {false, true}) {
    INFO("go_backwards " << back);
    TestType layer = make_layer<TestType>(in, u, false, back, rng);
    const auto [y, st] = layer.forward_with_state(x, {.mask = &mask});
    std::vector<V> got;
    parts(st, got);
    for (int64_t i = 0; i < 4; ++i) {
      const Td xi = gd::slice(x, {i, 0, 0}, {1, lengths[size_t(i)], in});
      const auto [yi, sti] = layer.forward_with_state(xi);  // no mask: the LSTM's fused op
      std::vector<V> want;
      parts(sti, want);
      for (size_t p = 0; p < got.size(); ++p)
        for (int64_t j = 0; j < u; ++j) CHECK(got[p].value()(i, j) == Approx(want[p].value()(0, j)).epsilon(1e-12));
      for (int64_t j = 0; j < u; ++j) CHECK(y.value()(i, j) == Approx(yi.value()(0, j)).epsilon(1e-12));
    }
  }
}

TEMPLATE_TEST_CASE("rnn-seq2seq: padded steps get an exactly zero input gradient", "[rnn-seq2seq]",
                   nn::SimpleRNN<double>, nn::LSTM<double>, nn::GRU<double>) {
  gd::Rng rng(12);
  const int64_t steps = 4, in = 3, u = 2;
  const Td mask = holey_mask();
  for (bool back : {false, true})
    for (bool seq : {false, true}) {
      INFO("go_backwards " << back << ", return_sequences " << seq);
      TestType layer = make_layer<TestType>(in, u, seq, back, rng);
      const V x(Td::random_normal({3, steps, in}, rng));
      const auto [y, st] = layer.forward_with_state(x, {.mask = &mask});
      std::vector<V> p;
      parts(st, p);
      const V out = joined(y, p);
      const Td w = Td::random_normal(out.shape(), rng);
      const Td g = gd::gradients(V(gd::sum(w * out)), {x})[0];
      for (int64_t i = 0; i < 3; ++i)
        for (int64_t t = 0; t < steps; ++t) {
          double total = 0;
          for (int64_t k = 0; k < in; ++k) {
            if (mask(i, t) == 0) CHECK(g(i, t, k) == 0.0);
            total += std::abs(g(i, t, k));
          }
          if (mask(i, t) != 0) CHECK(total > 0);  // valid steps do get a gradient
        }
    }
}

// ------------------------------------------------------------------------------ gradients

TEMPLATE_TEST_CASE("rnn-seq2seq: gradients through the final state, the initial state, masks and go_backwards",
                   "[rnn-seq2seq][gradients]", nn::SimpleRNN<double>, nn::LSTM<double>, nn::GRU<double>) {
  gd::Rng rng(13);
  const Td x = Td::random_normal({3, 4, 3}, rng);
  const Td mask = holey_mask();
  for (bool back : {false, true})
    for (bool masked : {false, true})
      for (bool seq : {false, true}) {
        INFO("go_backwards " << back << ", mask " << masked << ", return_sequences " << seq);
        WithState<TestType> m(make_layer<TestType>(3, 2, seq, back, rng), masked ? &mask : nullptr, true, rng);
        check_gradient(m, x);
      }
}

TEMPLATE_TEST_CASE("rnn-seq2seq: an encoder's final state starts a decoder and gets its gradient",
                   "[rnn-seq2seq][gradients]", nn::SimpleRNN<double>, nn::LSTM<double>, nn::GRU<double>) {
  gd::Rng rng(14);
  TestType enc = make_layer<TestType>(3, 2, false, false, rng), dec = make_layer<TestType>(2, 2, true, false, rng);
  const Td mask = padded_mask();
  const Td y_in = Td::random_normal({3, 3, 2}, rng);
  struct Seq2Seq : nn::Module<double> {
    TestType &enc, &dec;
    const Td &mask, &y_in;
    Seq2Seq(TestType& e, TestType& d, const Td& m, const Td& y) : enc(e), dec(d), mask(m), y_in(y) {}
    V forward(const V& x) {
      auto [h, state] = enc.forward_with_state(x, {.mask = &mask});
      return dec.forward_with_state(y_in, {.initial = state}).output;
    }
  } model(enc, dec, mask, y_in);
  const Td x = Td::random_normal({3, 4, 3}, rng);
  check_gradient(model, x);  // the input (only through the encoder's state)
  // and the encoder's kernel gets a gradient through the decoder's output alone
  const V out = model.forward(V::constant(x));
  const Td g = gd::gradients(V(gd::sum(out)), {enc.cell().kernel()})[0];
  double total = 0;
  for (int64_t k = 0; k < g.size(); ++k) total += std::abs(g.data()[k]);
  CHECK(total > 0);
}

// ------------------------------------------------------------------------------ dropout

TEMPLATE_TEST_CASE("rnn-seq2seq: dropout is the identity in eval mode", "[rnn-seq2seq][dropout]",
                   nn::SimpleRNN<double>, nn::LSTM<double>, nn::GRU<double>) {
  gd::Rng rng(15);
  const Td x = Td::random_normal({3, 4, 3}, rng);
  const Td mask = padded_mask();
  TestType plain = make_layer<TestType>(3, 2, true, false, rng);
  gd::Rng drop_rng(3);
  TestType dropped = make_layer<TestType>(3, 2, true, false, drop_rng, 0.5, 0.4);
  copy_weights(dropped, plain);
  dropped.eval();
  for (const Td* m : {static_cast<const Td*>(nullptr), &mask}) {
    const Td a = plain.forward_with_state(x, {.mask = m}).output.value(),
             b = dropped.forward_with_state(x, {.mask = m}).output.value();
    for (int64_t k = 0; k < a.size(); ++k) CHECK(a.data()[k] == b.data()[k]);
  }
  // the generator is registered (checkpoints save it as rng/<path>) only when a rate is set
  const auto gens = dropped.named_generators();
  REQUIRE(gens.size() == 1);
  CHECK(gens[0].first == "cell.rng");
  CHECK(plain.named_generators().empty());
  dropped.train();
  const Td c = dropped.forward(x).value();
  bool differs = false;
  const Td a = plain.forward(x).value();
  for (int64_t k = 0; k < a.size(); ++k) differs = differs || a.data()[k] != c.data()[k];
  CHECK(differs);
  CHECK_THROWS_AS(make_layer<TestType>(3, 2, true, false, rng, 1.0, 0), gd::value_error);
  CHECK_THROWS_AS(make_layer<TestType>(3, 2, true, false, rng, 0, -0.1), gd::value_error);
}

// A linear SimpleRNN that exposes the masks: with kernel = I, recurrent_kernel = 0 and bias 0,
// h_t = x_t · m_in; with kernel = 0, recurrent_kernel = I and h_0 = 1, h_t = h_{t-1} · m_rec, so
// h_t = m_rec^t only if the same mask is used at every step.
TEST_CASE("rnn-seq2seq: dropout uses one mask per call, the same at every step, scaled by 1/(1-rate)",
          "[rnn-seq2seq][dropout]") {
  gd::Rng rng(16);
  const int64_t n = 8, steps = 4, u = 6;
  const Td ones = Td::ones({n, steps, u});
  const Td eye = gd::eval(gd::reshape(gd::one_hot<double>(Ti::arange(u), u), {u, u}));
  SECTION("input dropout") {
    nn::SimpleRNN<double> rnn(
        {.in = u, .units = u, .activation = nn::linear, .return_sequences = true, .dropout = 0.5}, rng);
    rnn.cell().kernel().value().copy_(eye);
    rnn.cell().recurrent_kernel().value().copy_(Td::zeros({u, u}));
    const Td y = rnn.forward(ones).value();
    int zeros = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < u; ++j) {
        const double m = y(i, 0, j);
        CHECK((m == 0.0 || m == 2.0));
        zeros += m == 0.0;
        for (int64_t t = 1; t < steps; ++t) CHECK(y(i, t, j) == m);
      }
    CHECK(zeros > 0);
    CHECK(zeros < n * u);
    const Td y2 = rnn.forward(ones).value();  // a new call draws a new mask
    bool differs = false;
    for (int64_t k = 0; k < y.size(); ++k) differs = differs || y.data()[k] != y2.data()[k];
    CHECK(differs);
  }
  SECTION("recurrent dropout") {
    nn::SimpleRNN<double> rnn(
        {.in = u, .units = u, .activation = nn::linear, .return_sequences = true, .recurrent_dropout = 0.5}, rng);
    rnn.cell().kernel().value().copy_(Td::zeros({u, u}));
    rnn.cell().recurrent_kernel().value().copy_(eye);
    const Td y = rnn.forward(ones, V::constant(Td::ones({n, u}))).value();
    int zeros = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < u; ++j) {
        const double m = y(i, 0, j);
        CHECK((m == 0.0 || m == 2.0));
        zeros += m == 0.0;
        for (int64_t t = 1; t < steps; ++t) CHECK(y(i, t, j) == std::pow(m, double(t + 1)));
      }
    CHECK(zeros > 0);
    CHECK(zeros < n * u);
  }
}

// check_module_gradient calls forward many times: the wrapper reseeds the generator so every
// call draws the same masks.
template <class L>
struct Reseeded : nn::Module<double> {
  L layer;
  gd::Rng& rng;
  Reseeded(L l, gd::Rng& r) : layer(std::move(l)), rng(r) { register_module("layer", layer); }
  V forward(const V& x) {
    rng = gd::Rng(99);
    auto [y, st] = layer.forward_with_state(x);
    std::vector<V> p;
    parts(st, p);
    return joined(y, p);
  }
};

TEMPLATE_TEST_CASE("rnn-seq2seq: gradients with dropout and recurrent dropout (training)",
                   "[rnn-seq2seq][gradients][dropout]", nn::SimpleRNN<double>, nn::LSTM<double>, nn::GRU<double>) {
  gd::Rng rng(17), drop_rng(5);
  const Td x = Td::random_normal({3, 4, 3}, rng);
  for (double rdrop : {0.0, 0.3}) {
    INFO("recurrent_dropout " << rdrop);
    Reseeded<TestType> m(make_layer<TestType>(3, 2, true, false, drop_rng, 0.3, rdrop), drop_rng);
    check_gradient(m, x);
  }
}

// ------------------------------------------------------------------------------ stacked

TEMPLATE_TEST_CASE("rnn-seq2seq: a stacked layer equals its layers chained by hand", "[rnn-seq2seq][stacked]",
                   nn::SimpleRNN<double>, nn::LSTM<double>, nn::GRU<double>) {
  using Cell = std::remove_cvref_t<decltype(std::declval<TestType&>().cell())>;
  gd::Rng rng(18);
  const Td x = Td::random_normal({3, 4, 3}, rng);
  const Td mask = padded_mask();
  for (bool back : {false, true}) {
    INFO("go_backwards " << back);
    nn::StackedRNN<Cell> stacked({.in = 3, .units = {4, 2}, .return_sequences = true, .go_backwards = back}, rng);
    const auto names = stacked.named_parameters();
    REQUIRE(names.size() == 6);
    CHECK(names[0].first == "cell.cells.0.kernel");
    CHECK(names[3].first == "cell.cells.1.kernel");
    CHECK(stacked.cell().named_parameters()[5].first == "cells.1.bias");
    TestType l1 = make_layer<TestType>(3, 4, true, back, rng), l2 = make_layer<TestType>(4, 2, true, false, rng);
    for (size_t k = 0; k < 3; ++k) {
      l1.parameters()[k].value().copy_(stacked.parameters()[k].value());
      l2.parameters()[k].value().copy_(stacked.parameters()[3 + k].value());
    }
    const auto [y, st] = stacked.forward_with_state(x, {.mask = &mask});
    // layer 2 reads layer 1's outputs in layer 1's processing order, with the mask in that order
    const Td m2 = back ? Td(nn::reverse_sequence(mask, mask)) : mask;
    const auto [y1, s1] = l1.forward_with_state(x, {.mask = &mask});
    const auto [y2, s2] = l2.forward_with_state(y1, {.mask = &m2});
    check_values(y.value(), std::vector<double>(y2.value().data(), y2.value().data() + y2.size()));
    REQUIRE(st.size() == 2);
    std::vector<V> got, want;
    parts(st, got);
    parts(s1, want);
    parts(s2, want);
    REQUIRE(got.size() == want.size());
    for (size_t p = 0; p < got.size(); ++p)
      check_values(got[p].value(),
                   std::vector<double>(want[p].value().data(), want[p].value().data() + want[p].size()));
  }
}

TEMPLATE_TEST_CASE("rnn-seq2seq: stacked gradients (initial states, mask, dropout between layers)",
                   "[rnn-seq2seq][stacked][gradients]", nn::SimpleRNN<double>, nn::LSTM<double>, nn::GRU<double>) {
  using Cell = std::remove_cvref_t<decltype(std::declval<TestType&>().cell())>;
  gd::Rng rng(19);
  const Td x = Td::random_normal({3, 4, 3}, rng);
  const Td mask = holey_mask();
  for (bool back : {false, true}) {
    INFO("go_backwards " << back);
    WithState<nn::StackedRNN<Cell>> m(
        nn::StackedRNN<Cell>({.in = 3, .units = {2, 3}, .return_sequences = true, .go_backwards = back}, rng), &mask,
        true, rng);
    check_gradient(m, x);
  }
  gd::Rng drop_rng(4);
  Reseeded<nn::StackedRNN<Cell>> d(nn::StackedRNN<Cell>({.in = 3, .units = {2, 2}, .between_dropout = 0.4}, drop_rng),
                                   drop_rng);
  check_gradient(d, x);
  CHECK(d.named_generators().size() == 1);
}

TEST_CASE("rnn-seq2seq: MultiRNNCell checks its cells and its states", "[rnn-seq2seq][stacked]") {
  gd::Rng rng(20);
  std::vector<nn::GRUCell<double>> bad;
  bad.emplace_back(nn::GRUCellOptions{.in = 3, .units = 4}, rng);
  bad.emplace_back(nn::GRUCellOptions{.in = 5, .units = 2}, rng);
  CHECK_THROWS_AS(nn::MultiRNNCell<nn::GRUCell<double>>(std::move(bad), rng), gd::shape_error);
  CHECK_THROWS_AS(nn::MultiRNNCell<nn::GRUCell<double>>({}, rng), gd::value_error);
  nn::StackedLSTM<double> s({.in = 3, .units = {2, 2}}, rng);
  const Td x = Td::random_normal({3, 4, 3}, rng);
  auto st = s.cell().initial_state(3);
  st.pop_back();
  CHECK_THROWS_AS(s.forward(x, st), gd::shape_error);
  auto st2 = s.cell().initial_state(2);
  CHECK_THROWS_AS(s.forward(x, st2), gd::shape_error);
  // one step, by the caller: a state short of a cell, or of the wrong batch, is named
  const Td x1 = Td::random_normal({3, 3}, rng);
  CHECK_THROWS_WITH(s.cell().step(x1, st), Catch::Contains("MultiRNNCell: step: state must hold 2 cell states, got 1"));
  CHECK_THROWS_WITH(s.cell().step_projected(V::constant(Td::zeros({3, 8})), st),
                    Catch::Contains("MultiRNNCell: step: the state must hold 2 cell states, got 1"));
  CHECK_THROWS_WITH(s.cell().step(x1, st2), Catch::Contains("MultiRNNCell: step: state h must be [3, 2], got [2,2]"));
}

// ------------------------------------------------------------------------------ bidirectional

TEMPLATE_TEST_CASE("rnn-seq2seq: Bidirectional equals its two layers run by hand", "[rnn-seq2seq][bidirectional]",
                   nn::SimpleRNN<double>, nn::LSTM<double>, nn::GRU<double>) {
  gd::Rng rng(21);
  const int64_t n = 3, steps = 4, in = 3, u = 2;
  const Td x = Td::random_normal({n, steps, in}, rng);
  const Td mask = padded_mask();  // lengths 4, 2, 3
  const int64_t lengths[] = {4, 2, 3};
  typename TestType::Options o{};
  o.in = in;
  o.units = u;
  o.return_sequences = true;
  for (nn::MergeMode mode : {nn::MergeMode::concat, nn::MergeMode::sum, nn::MergeMode::mul, nn::MergeMode::ave})
    for (bool masked : {false, true}) {
      INFO("merge_mode " << int(mode) << ", mask " << masked);
      nn::Bidirectional<TestType> bi(o, rng, {.merge_mode = mode});
      const auto names = bi.named_parameters();
      CHECK(names[0].first == "forward.cell.kernel");
      CHECK(names[3].first == "backward.cell.kernel");
      TestType fw = make_layer<TestType>(in, u, true, false, rng), bw = make_layer<TestType>(in, u, true, true, rng);
      copy_weights(fw, bi.forward_layer());
      copy_weights(bw, bi.backward_layer());
      const Td* m = masked ? &mask : nullptr;
      const auto [y, sf, sb] = bi.forward_with_state(x, {.mask = m});
      const auto [yf, sf_ref] = fw.forward_with_state(x, {.mask = m});
      const auto [yb, sb_ref] = bw.forward_with_state(x, {.mask = m});
      const int64_t width = mode == nn::MergeMode::concat ? 2 * u : u;
      REQUIRE(y.shape() == gd::Shape{n, steps, width});
      for (int64_t i = 0; i < n; ++i)
        for (int64_t t = 0; t < steps; ++t) {
          const int64_t len = masked ? lengths[i] : steps;
          const int64_t tb = t < len ? len - 1 - t : t;  // the backward output of input step t
          for (int64_t j = 0; j < u; ++j) {
            const double a = yf.value()(i, t, j), b = yb.value()(i, tb, j);
            if (mode == nn::MergeMode::concat) {
              CHECK(y.value()(i, t, j) == a);
              CHECK(y.value()(i, t, u + j) == b);
            } else {
              const double want = mode == nn::MergeMode::sum ? a + b : mode == nn::MergeMode::mul ? a * b : (a + b) / 2;
              CHECK(y.value()(i, t, j) == Approx(want).epsilon(1e-14).margin(1e-15));
            }
            if (masked && t >= len) CHECK(y.value()(i, t, j) == 0.0);
          }
        }
      std::vector<V> got, want;
      parts(sf, got);
      parts(sb, got);
      parts(sf_ref, want);
      parts(sb_ref, want);
      for (size_t p = 0; p < got.size(); ++p)
        for (int64_t k = 0; k < got[p].size(); ++k) CHECK(got[p].value().data()[k] == want[p].value().data()[k]);
    }
  // without return_sequences: the two final h merged
  o.return_sequences = false;
  nn::Bidirectional<TestType> last(o, rng);
  const Td y = last.forward(x, mask).value();
  const auto [yy, sf, sb] = last.forward_with_state(x, {.mask = &mask});
  std::vector<V> f, b;
  parts(sf, f);
  parts(sb, b);
  REQUIRE(y.shape() == gd::Shape{n, 2 * u});
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < u; ++j) {
      CHECK(y(i, j) == f[0].value()(i, j));
      CHECK(y(i, u + j) == b[0].value()(i, j));
    }
}

TEMPLATE_TEST_CASE("rnn-seq2seq: Bidirectional gradients (mask, initial states, final states)",
                   "[rnn-seq2seq][bidirectional][gradients]", nn::SimpleRNN<double>, nn::LSTM<double>,
                   nn::GRU<double>) {
  gd::Rng rng(22);
  const Td x = Td::random_normal({3, 4, 3}, rng);
  const Td mask = holey_mask();
  typename TestType::Options o{};
  o.in = 3;
  o.units = 2;
  o.return_sequences = true;
  struct Bi : nn::Module<double> {
    nn::Bidirectional<TestType> bi;
    typename TestType::State s_fw, s_bw;
    const Td& mask;
    Bi(const typename TestType::Options& o, gd::Rng& rng, const Td& m)
        : bi(o, rng, {.merge_mode = nn::MergeMode::mul}), mask(m) {
      register_module("bi", bi);
      s_fw = random_like(bi.forward_layer().cell().initial_state(3), rng);
      s_bw = random_like(bi.backward_layer().cell().initial_state(3), rng);
      std::vector<V> p;
      parts(s_fw, p);
      parts(s_bw, p);
      for (size_t k = 0; k < p.size(); ++k) register_parameter("s0_" + std::to_string(k), p[k]);
    }
    V forward(const V& x) {
      auto [y, sf, sb] = bi.forward_with_state(x, {.initial_forward = s_fw, .initial_backward = s_bw, .mask = &mask});
      std::vector<V> p;
      parts(sf, p);
      parts(sb, p);
      return joined(y, p);
    }
  } m(o, rng, mask);
  check_gradient(m, x);
}

TEST_CASE("rnn-seq2seq: Bidirectional of stacked layers, and its checks", "[rnn-seq2seq][bidirectional]") {
  gd::Rng rng(23);
  const Td x = Td::random_normal({3, 4, 3}, rng);
  const Td mask = padded_mask();
  nn::Bidirectional<nn::StackedGRU<double>> bi({.in = 3, .units = {2, 2}, .return_sequences = true}, rng);
  CHECK(bi.forward(x, mask).shape() == gd::Shape{3, 4, 4});
  CHECK(bi.named_parameters()[0].first == "forward.cell.cells.0.kernel");
  nn::LSTM<double> a({.in = 3, .units = 2}, rng), b({.in = 3, .units = 2}, rng);
  CHECK_THROWS_AS(nn::Bidirectional<nn::LSTM<double>>(std::move(a), std::move(b)), gd::value_error);
  nn::LSTM<double> c({.in = 3, .units = 2}, rng), d({.in = 3, .units = 2, .go_backwards = true}, rng);
  nn::Bidirectional<nn::LSTM<double>> ok(std::move(c), std::move(d), {.merge_mode = nn::MergeMode::sum});
  CHECK(ok.forward(x).shape() == gd::Shape{3, 2});
  CHECK_THROWS_AS(ok.forward(x, Td::ones({3, 5})), gd::shape_error);
}

// ------------------------------------------------------------------------------ errors

TEST_CASE("rnn-seq2seq: a bad mask or initial state is a clear shape_error", "[rnn-seq2seq]") {
  gd::Rng rng(24);
  const Td x = Td::random_normal({3, 4, 3}, rng);
  nn::LSTM<double> lstm({.in = 3, .units = 2}, rng);
  nn::GRU<double> gru({.in = 3, .units = 2}, rng);
  for (const Td& bad : {Td::ones({3, 5}), Td::ones({2, 4}), Td::ones({3, 4, 1})}) {
    CHECK_THROWS_AS(lstm.forward(x, bad), gd::shape_error);
    CHECK_THROWS_AS(gru.forward(x, bad), gd::shape_error);
  }
  CHECK_THROWS_WITH(gru.forward(x, Td::ones({3, 5})), Catch::Contains("GRU: mask must be [3, 4]"));
  CHECK_THROWS_WITH(gru.forward(x, V::constant(Td::zeros({3, 4}))),
                    Catch::Contains("GRU: initial state h must be [3, 2]"));
  const V h = V::constant(Td::zeros({3, 2}));
  CHECK_THROWS_WITH(lstm.forward(x, nn::LSTMState<double>{h, V::constant(Td::zeros({2, 2}))}),
                    Catch::Contains("LSTM: initial state c must be [3, 2]"));
  CHECK_NOTHROW(lstm.forward(x, nn::LSTMState<double>{h, h}));
}
