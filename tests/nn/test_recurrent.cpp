// SimpleRNN, LSTM and GRU: gradients of every cell and sequence layer (check_module_gradient, in
// double), one LSTM and one GRU step against the Keras equations written as plain loops,
// stateful carry-over, and Keras' parameter counts.
#include <catch2/catch.hpp>
#include <cmath>

#include <gradus/gradus.hpp>
#include <gradus/nn.hpp>
#include <gradus/nn/recurrent.hpp>
#include <gradus/testing/module_check.hpp>

#include "../support/module_gradient.hpp"
#include "../support/short_names.hpp"

using gradus_test::check_gradient;
using Td = gd::Tensor<double>;
using V = gd::Var<double>;

namespace {

V random_var(gd::Shape s, gd::Rng& rng) { return V::constant(Td::random_normal(s, rng, 0, 0.5)); }

// Non-zero biases, so the checks see them.
template <class M>
void randomize_bias(M& m, gd::Rng& rng) {
  Td b = m.bias().value();
  b.copy_(Td::random_normal(b.shape(), rng, 0, 0.3));
}

// One step of a cell from a fixed non-zero state; the output is h (and c for an LSTM, joined).
template <class Cell>
struct OneStep : nn::Module<double> {
  Cell cell;
  typename Cell::State s0;
  OneStep(Cell c, typename Cell::State s) : cell(std::move(c)), s0(std::move(s)) { register_module("cell", cell); }
  V forward(const V& x) {
    auto s = cell.step(x, s0);
    if constexpr (std::same_as<typename Cell::State, nn::LSTMState<double>>)
      return gd::concat({s.h, s.c}, 1);
    else
      return s;
  }
};

double sigm(double v) { return 1 / (1 + std::exp(-v)); }

// a [N, I] · w [I, J] columns [j0, j0 + J') for row n, column j: sum_k a(n, k) w(k, j0 + j).
double dot(const Td& a, const Td& w, int64_t n, int64_t col) {
  double s = 0;
  for (int64_t k = 0; k < a.shape()[1]; ++k) s += a(n, k) * w(k, col);
  return s;
}

}  // namespace

TEST_CASE("rnn: cell gradients (one step from a non-zero state)", "[rnn][gradients]") {
  gd::Rng rng(1);
  const int64_t n = 2, in = 3, u = 2;
  const Td x = Td::random_normal({n, in}, rng);
  SECTION("SimpleRNNCell") {
    nn::SimpleRNNCell<double> c({.in = in, .units = u}, rng);
    randomize_bias(c, rng);
    OneStep<nn::SimpleRNNCell<double>> m(std::move(c), random_var({n, u}, rng));
    check_gradient(m, x);
  }
  SECTION("LSTMCell") {
    nn::LSTMCell<double> c({.in = in, .units = u}, rng);
    randomize_bias(c, rng);
    OneStep<nn::LSTMCell<double>> m(std::move(c), {random_var({n, u}, rng), random_var({n, u}, rng)});
    check_gradient(m, x);
  }
  SECTION("GRUCell") {
    nn::GRUCell<double> c({.in = in, .units = u}, rng);
    randomize_bias(c, rng);
    OneStep<nn::GRUCell<double>> m(std::move(c), random_var({n, u}, rng));
    check_gradient(m, x);
  }
}

TEST_CASE("rnn: sequence layer gradients (T = 3)", "[rnn][gradients]") {
  gd::Rng rng(2);
  const Td x = Td::random_normal({2, 3, 3}, rng);
  for (bool seq : {false, true}) {
    INFO("return_sequences " << seq);
    nn::SimpleRNN<double> rnn({.in = 3, .units = 2, .return_sequences = seq}, rng);
    randomize_bias(rnn.cell(), rng);
    check_gradient(rnn, x);
    nn::LSTM<double> lstm({.in = 3, .units = 2, .return_sequences = seq}, rng);
    randomize_bias(lstm.cell(), rng);
    check_gradient(lstm, x);
    nn::GRU<double> gru({.in = 3, .units = 2, .return_sequences = seq}, rng);
    randomize_bias(gru.cell(), rng);
    check_gradient(gru, x);
    CHECK(lstm.forward(x).shape() == (seq ? gd::Shape{2, 3, 2} : gd::Shape{2, 2}));
  }
}

// Reference: the Keras 2 LSTMCell.call (keras/layers/recurrent.py, implementation 2):
//   z = x·kernel + h·recurrent_kernel + bias; i, f, g, o = split(z, 4);
//   c' = σ(f)·c + σ(i)·tanh(g); h' = σ(o)·tanh(c').
TEST_CASE("rnn: one LSTM step matches the Keras equations", "[rnn]") {
  gd::Rng rng(3);
  const int64_t n = 2, in = 3, u = 4;
  nn::LSTMCell<double> cell({.in = in, .units = u}, rng);
  randomize_bias(cell, rng);
  const Td x = Td::random_normal({n, in}, rng), h = Td::random_normal({n, u}, rng), c = Td::random_normal({n, u}, rng);
  const auto s = cell.step(x, {V::constant(h), V::constant(c)});
  const Td k = cell.kernel().value(), r = cell.recurrent_kernel().value(), b = cell.bias().value();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < u; ++j) {
      double z[4];
      for (int64_t q = 0; q < 4; ++q) z[q] = dot(x, k, i, q * u + j) + dot(h, r, i, q * u + j) + b.data()[q * u + j];
      const double c1 = sigm(z[1]) * c(i, j) + sigm(z[0]) * std::tanh(z[2]);
      const double h1 = sigm(z[3]) * std::tanh(c1);
      CHECK(s.c.value()(i, j) == Approx(c1).epsilon(1e-12));
      CHECK(s.h.value()(i, j) == Approx(h1).epsilon(1e-12));
    }
}

TEST_CASE("rnn: a cell's step names a state of the wrong shape", "[rnn]") {
  gd::Rng rng(4);
  const int64_t n = 3, in = 2, u = 4;
  const V x = random_var({n, in}, rng), good = random_var({n, u}, rng);
  // each wrong in one way: the batch, the units, a broadcastable [1, units]
  for (const gd::Shape& bad : {gd::Shape{2, u}, gd::Shape{n, 5}, gd::Shape{1, u}}) {
    INFO(bad);
    const V wrong = random_var(bad, rng);
    const std::string expected = "must be [3, 4], got " + bad.str();
    nn::LSTMCell<double> lstm({.in = in, .units = u}, rng);
    CHECK_THROWS_WITH(lstm.step(x, {wrong, good}),
                      Catch::Contains("LSTMCell: step: state h " + expected));
    CHECK_THROWS_WITH(lstm.step(x, {good, wrong}),
                      Catch::Contains("LSTMCell: step: state c " + expected));
    nn::LSTMCell<float> lstm_f({.in = in, .units = u}, rng);  // the fused path's element type
    CHECK_THROWS_WITH(lstm_f.step(gd::Tensor<float>::zeros({n, in}),
                                  {gd::Var<float>::constant(gd::Tensor<float>::zeros(bad)),
                                   gd::Var<float>::constant(gd::Tensor<float>::zeros({n, u}))}),
                      Catch::Contains("LSTMCell: step: state h " + expected));
    nn::GRUCell<double> gru({.in = in, .units = u}, rng);
    CHECK_THROWS_WITH(gru.step(x, wrong), Catch::Contains("GRUCell: step: state h " + expected));
    nn::SimpleRNNCell<double> rnn({.in = in, .units = u}, rng);
    CHECK_THROWS_WITH(rnn.step(x, wrong), Catch::Contains("SimpleRNNCell: step: state h " + expected));
  }
}

// Reference: the Keras 2 GRUCell.call with reset_after = True (keras/layers/recurrent.py):
//   matrix_x = x·kernel + bias[0]; matrix_inner = h·recurrent_kernel + bias[1];
//   z = σ(x_z + inner_z); r = σ(x_r + inner_r); hh = tanh(x_h + r·inner_h); h' = z·h + (1 − z)·hh.
TEST_CASE("rnn: one GRU step matches the Keras equations (reset_after)", "[rnn]") {
  gd::Rng rng(4);
  const int64_t n = 2, in = 3, u = 4;
  nn::GRUCell<double> cell({.in = in, .units = u}, rng);
  randomize_bias(cell, rng);
  const Td x = Td::random_normal({n, in}, rng), h = Td::random_normal({n, u}, rng);
  const V h1 = cell.step(x, V::constant(h));
  const Td k = cell.kernel().value(), r = cell.recurrent_kernel().value(), b = cell.bias().value();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < u; ++j) {
      double mx[3], mi[3];
      for (int64_t q = 0; q < 3; ++q) {
        mx[q] = dot(x, k, i, q * u + j) + b(0, q * u + j);
        mi[q] = dot(h, r, i, q * u + j) + b(1, q * u + j);
      }
      const double z = sigm(mx[0] + mi[0]), rr = sigm(mx[1] + mi[1]), hh = std::tanh(mx[2] + rr * mi[2]);
      CHECK(h1.value()(i, j) == Approx(z * h(i, j) + (1 - z) * hh).epsilon(1e-12));
    }
}

TEST_CASE("rnn: SimpleRNN sequence matches the Keras equations as loops", "[rnn]") {
  gd::Rng rng(5);
  nn::SimpleRNN<double> rnn({.in = 3, .units = 4, .return_sequences = true}, rng);
  randomize_bias(rnn.cell(), rng);
  const Td x = Td::random_normal({2, 3, 3}, rng);
  const V all = rnn.forward(x);
  // h_t = tanh(x_t kernel + h_{t-1} recurrent_kernel + bias), h_0 = 0
  const Td k = rnn.cell().kernel().value(), u = rnn.cell().recurrent_kernel().value(), b = rnn.cell().bias().value();
  double h[2][4] = {};
  for (int64_t t = 0; t < 3; ++t) {
    double next[2][4];
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < 4; ++j) {
        double s = b(j);
        for (int64_t m = 0; m < 3; ++m) s += x(i, t, m) * k(m, j);
        for (int64_t m = 0; m < 4; ++m) s += h[i][m] * u(m, j);
        next[i][j] = std::tanh(s);
      }
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < 4; ++j) {
        h[i][j] = next[i][j];
        CHECK(all.value()(i, t, j) == Approx(h[i][j]).epsilon(1e-12));
      }
  }
}

TEST_CASE("rnn: stateful layers carry the detached final state until reset_states", "[rnn]") {
  gd::Rng rng(6);
  const Td x1 = Td::random_normal({2, 3, 3}, rng), x2 = Td::random_normal({2, 2, 3}, rng);
  const Td both = gd::concat({x1, x2}, 1);
  SECTION("LSTM") {
    nn::LSTM<double> lstm({.in = 3, .units = 4, .stateful = true}, rng);
    nn::LSTM<double> plain({.in = 3, .units = 4}, rng);
    for (size_t i = 0; i < 3; ++i) plain.parameters()[i].value().copy_(lstm.parameters()[i].value());
    lstm.forward(x1);
    REQUIRE(lstm.states().has_value());
    CHECK(!lstm.states()->h.requires_grad());
    CHECK(!lstm.states()->c.requires_grad());
    const V h2 = lstm.forward(x2);  // continues from x1's final {h, c}
    const V ref = plain.forward(both);
    for (int64_t i = 0; i < h2.size(); ++i) CHECK(h2.value().data()[i] == Approx(ref.value().data()[i]).epsilon(1e-12));
    lstm.reset_states();
    CHECK(!lstm.states().has_value());
    const V fresh = lstm.forward(x2), ref2 = plain.forward(x2);
    for (int64_t i = 0; i < fresh.size(); ++i)
      CHECK(fresh.value().data()[i] == Approx(ref2.value().data()[i]).epsilon(1e-12));
    CHECK_THROWS_AS(lstm.forward(Td::random_normal({3, 2, 3}, rng)), gd::shape_error);  // batch changed
  }
  SECTION("GRU: the backward pass stops at the carried state") {
    nn::GRU<double> gru({.in = 3, .units = 4, .stateful = true}, rng);
    nn::GRU<double> plain({.in = 3, .units = 4}, rng);
    for (size_t i = 0; i < 3; ++i) plain.parameters()[i].value().copy_(gru.parameters()[i].value());
    gru.forward(x1);
    REQUIRE(gru.states().has_value());
    const V carried = *gru.states();
    CHECK(!carried.requires_grad());
    const V h2 = gru.forward(x2);
    const auto g = gd::gradients(V(gd::sum(h2)), gru.parameters());
    // The same second batch run from the carried value as a given constant start.
    const V ref = plain.forward(x2, V::constant(carried.value().clone()));
    const auto g_ref = gd::gradients(V(gd::sum(ref)), plain.parameters());
    for (size_t k = 0; k < g.size(); ++k)
      for (int64_t i = 0; i < g[k].size(); ++i) CHECK(g[k].data()[i] == Approx(g_ref[k].data()[i]).epsilon(1e-12));
    for (int64_t i = 0; i < h2.size(); ++i) CHECK(h2.value().data()[i] == Approx(ref.value().data()[i]).epsilon(1e-12));
  }
}

TEST_CASE("rnn: parameter counts equal Keras'", "[rnn]") {
  gd::Rng rng(7);
  CHECK(nn::LSTM<float>({.in = 8, .units = 16}, rng).parameter_count() == 4 * (8 * 16 + 16 * 16 + 16));  // 1600
  CHECK(nn::GRU<float>({.in = 8, .units = 16}, rng).parameter_count() == 3 * (8 * 16 + 16 * 16 + 2 * 16));  // 1248
  CHECK(nn::SimpleRNN<float>({.in = 8, .units = 16}, rng).parameter_count() == 8 * 16 + 16 * 16 + 16);
  nn::LSTM<float> lstm({.in = 8, .units = 16}, rng);
  const auto names = lstm.named_parameters();
  REQUIRE(names.size() == 3);
  CHECK(names[0].first == "cell.kernel");
  CHECK(names[1].first == "cell.recurrent_kernel");
  CHECK(names[2].first == "cell.bias");
  const gd::Tensor<float> b = lstm.cell().bias().value();
  CHECK(b.data()[0] == 0.f);
  CHECK(b.data()[16] == 1.f);  // forget gate
  CHECK(b.data()[31] == 1.f);
  CHECK(b.data()[32] == 0.f);
}
