// gradus/nn/recurrent.hpp — SimpleRNN, LSTM and GRU: cells (one time step) and sequence layers
// (a cell run over time by a plain loop; the tape is define-by-run; an LSTM on the CPU runs its
// whole sequence as one lstm_sequence op instead). Equations, weight layout,
// names and default initializers follow tf.keras (2.x): kernel [in, units*gates], recurrent_kernel
// [units, units*gates], bias; gate order i, f, c, o (LSTM) and z, r, h (GRU, reset_after = true).
//   gd::nn::LSTM<float> lstm({.in = 32, .units = 128, .return_sequences = true}, rng);
//   gd::Var<float> h = lstm.forward(x);   // x [N, T, 32] -> h [N, T, 128]
#pragma once
#include <algorithm>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "gradus/init/initializers.hpp"
#include "gradus/nn/activations.hpp"
#include "gradus/nn/module.hpp"
#include "gradus/ops/linalg.hpp"
#include "gradus/ops/recurrent.hpp"
#include "gradus/ops/shape.hpp"

namespace gradus::nn {

/// The state of an LSTM: hidden state h and cell state c, both [N, units].
template <Real T = float>
struct LSTMState {
  Var<T> h, c;
};

namespace detail {

inline void check_cell_sizes(int64_t in, int64_t units, const char* layer) {
  GRADUS_CHECK(value_error, in > 0 && units > 0, layer, ": in and units must be positive, got in ", in, ", units ",
               units);
}

/// Gate k of a gate block z [N, units*gates]: its columns [k*units, (k+1)*units).
template <Real T>
Var<T> gate(const Var<T>& z, int64_t k, int64_t units) {
  return to_var(gradus::slice(z, {0, k * units}, {z.shape()[0], units}));
}

/// Row `r` of a [2, n] bias as [n] (GRU's input and recurrent biases).
template <Real T>
Var<T> bias_row(const Var<T>& b, int64_t r) {
  const int64_t n = b.shape()[1];
  return to_var(gradus::reshape(gradus::slice(b, {r, 0}, {1, n}), {n}));
}

template <Real T>
const Var<T>& hidden_of(const Var<T>& h) { return h; }
template <Real T>
const Var<T>& hidden_of(const LSTMState<T>& s) { return s.h; }
template <Real T>
Var<T> detach_state(const Var<T>& h) { return h.detach(); }
template <Real T>
LSTMState<T> detach_state(const LSTMState<T>& s) { return {s.h.detach(), s.c.detach()}; }
template <Real T>
int64_t state_batch(const Var<T>& h) { return h.shape()[0]; }
template <Real T>
int64_t state_batch(const LSTMState<T>& s) { return s.h.shape()[0]; }

}  // namespace detail

// ------------------------------------------------------------------------------------ cells

/// Options of `SimpleRNNCell`.
struct SimpleRNNCellOptions {
  int64_t in = 0;     ///< input features
  int64_t units = 0;  ///< size of the hidden state
  Activation activation = tanh;
};

/// h' = activation(x · kernel + h · recurrent_kernel + bias) (tf.keras.layers.SimpleRNNCell);
/// kernel [in, units] Glorot uniform, recurrent_kernel [units, units] orthogonal, bias [units] zeros.
template <Real T = float>
class SimpleRNNCell : public Module<T, SimpleRNNCell<T>> {
 public:
  using State = Var<T>;  ///< h [N, units]

  SimpleRNNCell(const SimpleRNNCellOptions& o, Rng& rng) : in_(o.in), units_(o.units), activation_(o.activation) {
    detail::check_cell_sizes(o.in, o.units, "SimpleRNNCell");
    kernel_ = this->register_parameter("kernel", init::make<T>(init::glorot_uniform{}, {o.in, o.units}, rng));
    recurrent_kernel_ =
        this->register_parameter("recurrent_kernel", init::make<T>(init::orthogonal{}, {o.units, o.units}, rng));
    bias_ = this->register_parameter("bias", Tensor<T>::zeros({o.units}));
  }

  /// One step: x_t [N, in], h [N, units] -> h' [N, units].
  template <Expression X>
  State step(const X& x, const State& h) const {
    const Var<T> xv = detail::to_var(x);
    detail::check_last_dim(xv.shape(), in_, "SimpleRNNCell", "in");
    return step_projected(project(xv), h);
  }
  /// The input's share of the pre-activation, x · kernel: [..., in] -> [..., units]; a sequence
  /// layer computes it for all time steps in one matmul.
  Var<T> project(const Var<T>& x) const { return gradus::matmul(x, kernel_); }
  /// One step from a projected input xp = project(x_t) [N, units].
  State step_projected(const Var<T>& xp, const State& h) const {
    return detail::bias_activation(Var<T>(xp + gradus::matmul(h, recurrent_kernel_)), bias_, activation_);
  }
  /// The zero state for a batch of `batch` sequences.
  State initial_state(int64_t batch) const { return Var<T>::constant(Tensor<T>::zeros({batch, units_})); }

  int64_t in() const { return in_; }
  int64_t units() const { return units_; }
  Var<T> kernel() const { return kernel_; }
  Var<T> recurrent_kernel() const { return recurrent_kernel_; }
  Var<T> bias() const { return bias_; }

 private:
  int64_t in_, units_;
  Activation activation_;
  Var<T> kernel_, recurrent_kernel_, bias_;
};

/// Options of `LSTMCell`.
struct LSTMCellOptions {
  int64_t in = 0;     ///< input features; 0: set later by build(in) (an LSTM layer: from its first input)
  int64_t units = 0;  ///< size of h and c
  bool unit_forget_bias = true;  ///< start the forget-gate bias at 1 (Keras' default)
};

/// tf.keras.layers.LSTMCell: z = x · kernel + h · recurrent_kernel + bias split into i, f, g, o;
/// c' = σ(f) c + σ(i) tanh(g), h' = σ(o) tanh(c'). kernel [in, 4u] Glorot uniform,
/// recurrent_kernel [u, 4u] orthogonal, bias [4u] zeros (ones for f with unit_forget_bias).
template <Real T = float>
class LSTMCell : public Module<T, LSTMCell<T>> {
 public:
  using State = LSTMState<T>;

  LSTMCell(const LSTMCellOptions& o, Rng& rng) : in_(o.in), units_(o.units) {
    GRADUS_CHECK(value_error, o.in >= 0 && o.units > 0, "LSTMCell: units must be positive and in positive (or 0, ",
                 "to build later), got in ", o.in, ", units ", o.units);
    kernel_ = this->register_parameter("kernel", Tensor<T>::zeros({0, 4 * o.units}));
    recurrent_kernel_ = this->register_parameter("recurrent_kernel", Tensor<T>::zeros({o.units, 4 * o.units}));
    Tensor<T> b = Tensor<T>::zeros({4 * o.units});
    if (o.unit_forget_bias) std::fill(b.data() + o.units, b.data() + 2 * o.units, T(1));
    bias_ = this->register_parameter("bias", std::move(b));
    rng_ = &rng;
    if (o.in > 0) build(o.in);
  }

  /// Draws kernel [in, 4u] (Glorot uniform) and then recurrent_kernel (orthogonal), as the
  /// constructor does when `.in` is given; an LSTM layer without `.in` calls it at its first
  /// input (in = the input's last axis). Once only.
  void build(int64_t in) {
    GRADUS_CHECK(value_error, !built(), "LSTMCell: build: already built with in = ", in_);
    GRADUS_CHECK(value_error, in > 0, "LSTMCell: build: in must be positive, got ", in);
    kernel_.value() = init::make<T>(init::glorot_uniform{}, {in, 4 * units_}, *rng_);
    recurrent_kernel_.value() = init::make<T>(init::orthogonal{}, {units_, 4 * units_}, *rng_);
    in_ = in;
    rng_ = nullptr;
  }
  /// False while a lazy cell (no `.in`) waits for build.
  bool built() const { return rng_ == nullptr; }

  /// One step: x_t [N, in], {h, c} [N, units] each -> {h', c'}.
  template <Expression X>
  State step(const X& x, const State& s) const {
    const Var<T> xv = detail::to_var(x);
    detail::check_last_dim(xv.shape(), in_, "LSTMCell", "in");
    return step_projected(project(xv), s);
  }
  /// The input's share of the gates, x · kernel + bias: [..., in] -> [..., 4 units].
  Var<T> project(const Var<T>& x) const { return Var<T>(gradus::matmul(x, kernel_) + bias_); }
  /// One step from a projected input xp = project(x_t) [N, 4 units].
  State step_projected(const Var<T>& xp, const State& s) const {
    const Var<T> z(xp + gradus::matmul(s.h, recurrent_kernel_));
    const Var<T> i = detail::gate(z, 0, units_), f = detail::gate(z, 1, units_), g = detail::gate(z, 2, units_),
                 o = detail::gate(z, 3, units_);
    Var<T> c(gradus::sigmoid(f) * s.c + gradus::sigmoid(i) * gradus::tanh(g));
    Var<T> h(gradus::sigmoid(o) * gradus::tanh(c));
    return {std::move(h), std::move(c)};
  }
  /// Every step from projected inputs xp = project(x) [N, T, 4 units] and the state s: every h
  /// [N, T, units] and the final {h, c}, as one `lstm_sequence` op (one tape node for the whole
  /// sequence, equal to step_projected run over t; CPU only).
  std::pair<Var<T>, State> sequence_projected(const Var<T>& xp, const State& s) const {
    LstmSequenceOutputs<T> o = gradus::lstm_sequence(xp, recurrent_kernel_, s.h, s.c);
    return {std::move(o.h), State{std::move(o.h_final), std::move(o.c_final)}};
  }
  /// The zero state {h, c} for a batch of `batch` sequences.
  State initial_state(int64_t batch) const {
    return {Var<T>::constant(Tensor<T>::zeros({batch, units_})), Var<T>::constant(Tensor<T>::zeros({batch, units_}))};
  }

  int64_t in() const { return in_; }
  int64_t units() const { return units_; }
  Var<T> kernel() const { return kernel_; }
  Var<T> recurrent_kernel() const { return recurrent_kernel_; }
  Var<T> bias() const { return bias_; }

 private:
  int64_t in_, units_;
  Rng* rng_ = nullptr;  ///< until built
  Var<T> kernel_, recurrent_kernel_, bias_;
};

/// Options of `GRUCell`.
struct GRUCellOptions {
  int64_t in = 0;     ///< input features
  int64_t units = 0;  ///< size of the hidden state
};

/// tf.keras.layers.GRUCell with reset_after = true (Keras 2's default): with x · kernel + b_in
/// split into x_z, x_r, x_h and h · recurrent_kernel + b_rec into r_z, r_r, r_h,
/// z = σ(x_z + r_z), r = σ(x_r + r_r), h~ = tanh(x_h + r r_h), h' = z h + (1 - z) h~.
/// kernel [in, 3u] Glorot uniform, recurrent_kernel [u, 3u] orthogonal, bias [2, 3u] zeros
/// (row 0 b_in, row 1 b_rec).
template <Real T = float>
class GRUCell : public Module<T, GRUCell<T>> {
 public:
  using State = Var<T>;  ///< h [N, units]

  GRUCell(const GRUCellOptions& o, Rng& rng) : in_(o.in), units_(o.units) {
    detail::check_cell_sizes(o.in, o.units, "GRUCell");
    kernel_ = this->register_parameter("kernel", init::make<T>(init::glorot_uniform{}, {o.in, 3 * o.units}, rng));
    recurrent_kernel_ =
        this->register_parameter("recurrent_kernel", init::make<T>(init::orthogonal{}, {o.units, 3 * o.units}, rng));
    bias_ = this->register_parameter("bias", Tensor<T>::zeros({2, 3 * o.units}));
  }

  /// One step: x_t [N, in], h [N, units] -> h' [N, units].
  template <Expression X>
  State step(const X& x, const State& h) const {
    const Var<T> xv = detail::to_var(x);
    detail::check_last_dim(xv.shape(), in_, "GRUCell", "in");
    return step_projected(project(xv), h);
  }
  /// The input's share of the gates, x · kernel + b_in: [..., in] -> [..., 3 units].
  Var<T> project(const Var<T>& x) const {
    return Var<T>(gradus::matmul(x, kernel_) + detail::bias_row(bias_, 0));
  }
  /// One step from a projected input xp = project(x_t) [N, 3 units].
  State step_projected(const Var<T>& xp, const State& h) const {
    const Var<T> hr(gradus::matmul(h, recurrent_kernel_) + detail::bias_row(bias_, 1));
    const Var<T> z(gradus::sigmoid(detail::gate(xp, 0, units_) + detail::gate(hr, 0, units_)));
    const Var<T> r_h = detail::gate(hr, 2, units_);
    const Var<T> hh(gradus::tanh(detail::gate(xp, 2, units_) +
                                 gradus::sigmoid(detail::gate(xp, 1, units_) + detail::gate(hr, 1, units_)) * r_h));
    return Var<T>(hh + z * (h - hh));
  }
  /// The zero state for a batch of `batch` sequences.
  State initial_state(int64_t batch) const { return Var<T>::constant(Tensor<T>::zeros({batch, units_})); }

  int64_t in() const { return in_; }
  int64_t units() const { return units_; }
  Var<T> kernel() const { return kernel_; }
  Var<T> recurrent_kernel() const { return recurrent_kernel_; }
  Var<T> bias() const { return bias_; }

 private:
  int64_t in_, units_;
  Var<T> kernel_, recurrent_kernel_, bias_;
};

// ---------------------------------------------------------------------------- sequence layers

/// A cell run over the time axis of x [N, T, in] (the common part of SimpleRNN, LSTM and GRU;
/// tf.keras.layers.RNN). Its cell is the child "cell", so parameters read "cell.kernel", ...
template <class Cell>
class Recurrent : public Module<typename Cell::value_type, Recurrent<Cell>> {
 public:
  using T = typename Cell::value_type;
  using State = typename Cell::State;

  /// x [N, T, in] -> the last h [N, units], or every h [N, T, units] with return_sequences.
  /// Starts from the zero state, or (stateful) from the previous call's final state.
  template <Expression X>
  Var<T> forward(const X& x) {
    return run(detail::to_var(x), std::nullopt);
  }
  /// As forward(x), starting from `initial` (an LSTM takes {h, c}).
  template <Expression X>
  Var<T> forward(const X& x, const State& initial) {
    return run(detail::to_var(x), initial);
  }

  /// Forgets the carried state (stateful layers): the next call starts from zeros.
  void reset_states() { state_.reset(); }
  /// The carried state (detached) after the last call of a stateful layer; empty otherwise.
  const std::optional<State>& states() const { return state_; }

  Cell& cell() { return cell_; }
  const Cell& cell() const { return cell_; }
  int64_t units() const { return cell_.units(); }
  bool return_sequences() const { return return_sequences_; }
  bool stateful() const { return stateful_; }

 protected:
  Recurrent(Cell cell, bool return_sequences, bool stateful, const char* name)
      : cell_(std::move(cell)), return_sequences_(return_sequences), stateful_(stateful), name_(name) {
    this->register_module("cell", cell_);
  }

 private:
  Var<T> run(const Var<T>& x, const std::optional<State>& initial) {
    const Shape& s = x.shape();
    if constexpr (requires { cell_.build(int64_t{}); })
      if (!cell_.built() && s.rank() == 3 && s[2] > 0) cell_.build(s[2]);  // a lazy layer: in from the input
    GRADUS_CHECK(shape_error, s.rank() == 3 && s[2] == cell_.in() && s[1] >= 1, name_, ": expected input [N, T, ",
                 cell_.in(), "] with T >= 1, got ", s);
    const int64_t n = s[0], steps = s[1];
    State st = initial ? *initial : cell_.initial_state(n);
    if (!initial && stateful_ && state_) {
      GRADUS_CHECK(shape_error, detail::state_batch(*state_) == n, name_, ": a stateful layer carries a state for ",
                   detail::state_batch(*state_), " sequences, got a batch of ", n, "; call reset_states() first");
      st = *state_;
    }
    const Var<T> xp = cell_.project(x);  // [N, T, G]: the input's share of every step, one matmul
    if constexpr (requires { cell_.sequence_projected(xp, st); }) {
      if (xp.value().device().is_cpu()) {  // the whole sequence as one op (an LSTM)
        auto [hs, last] = cell_.sequence_projected(xp, st);
        if (stateful_) state_ = detail::detach_state(last);
        return return_sequences_ ? hs : detail::hidden_of(last);
      }
    }
    const int64_t g = xp.shape()[2];
    std::vector<Var<T>> hs;
    if (return_sequences_) hs.reserve(size_t(steps));
    for (int64_t t = 0; t < steps; ++t) {
      const Var<T> xt = detail::to_var(gradus::reshape(gradus::slice(xp, {0, t, 0}, {n, 1, g}), {n, g}));
      st = cell_.step_projected(xt, st);
      if (return_sequences_) hs.push_back(detail::hidden_of(st));
    }
    if (stateful_) state_ = detail::detach_state(st);
    if (return_sequences_) return detail::to_var(gradus::stack(hs, 1));
    return detail::hidden_of(st);
  }

  Cell cell_;
  bool return_sequences_, stateful_;
  const char* name_;
  std::optional<State> state_;
};

/// Options of `SimpleRNN`.
struct SimpleRNNOptions {
  int64_t in = 0;     ///< input features
  int64_t units = 0;  ///< size of the hidden state
  Activation activation = tanh;
  bool return_sequences = false;  ///< return every h [N, T, units] instead of the last [N, units]
  bool stateful = false;          ///< carry the final state (detached) to the next call
};

/// tf.keras.layers.SimpleRNN: a `SimpleRNNCell` over time.
///   gd::nn::SimpleRNN<double> rnn({.in = 8, .units = 16}, rng);   // [N, T, 8] -> [N, 16]
template <Real T = float>
class SimpleRNN : public Recurrent<SimpleRNNCell<T>> {
 public:
  SimpleRNN(const SimpleRNNOptions& o, Rng& rng)
      : Recurrent<SimpleRNNCell<T>>(SimpleRNNCell<T>({.in = o.in, .units = o.units, .activation = o.activation}, rng),
                                    o.return_sequences, o.stateful, "SimpleRNN") {}
};

/// Options of `LSTM`.
struct LSTMOptions {
  int64_t in = 0;     ///< input features; 0: taken from the first input (the weights drawn then)
  int64_t units = 0;  ///< size of h and c
  bool return_sequences = false;  ///< return every h [N, T, units] instead of the last [N, units]
  bool stateful = false;          ///< carry the final {h, c} (detached) to the next call
  bool unit_forget_bias = true;   ///< start the forget-gate bias at 1
};

/// tf.keras.layers.LSTM: an `LSTMCell` over time; 4 (in·u + u·u + u) parameters.
///   gd::nn::LSTM<float> lstm({.in = 32, .units = 128, .stateful = true}, rng);
/// Without `.in` the layer is lazy as Dense is: kernel [0, 4u] until the first input [N, T, in].
template <Real T = float>
class LSTM : public Recurrent<LSTMCell<T>> {
 public:
  LSTM(const LSTMOptions& o, Rng& rng)
      : Recurrent<LSTMCell<T>>(LSTMCell<T>({.in = o.in, .units = o.units, .unit_forget_bias = o.unit_forget_bias}, rng),
                               o.return_sequences, o.stateful, "LSTM") {}
};

/// Options of `GRU`.
struct GRUOptions {
  int64_t in = 0;     ///< input features
  int64_t units = 0;  ///< size of the hidden state
  bool return_sequences = false;  ///< return every h [N, T, units] instead of the last [N, units]
  bool stateful = false;          ///< carry the final state (detached) to the next call
};

/// tf.keras.layers.GRU (reset_after = true): a `GRUCell` over time; 3 (in·u + u·u + 2u) parameters.
template <Real T = float>
class GRU : public Recurrent<GRUCell<T>> {
 public:
  GRU(const GRUOptions& o, Rng& rng)
      : Recurrent<GRUCell<T>>(GRUCell<T>({.in = o.in, .units = o.units}, rng), o.return_sequences, o.stateful, "GRU") {}
};

}  // namespace gradus::nn
