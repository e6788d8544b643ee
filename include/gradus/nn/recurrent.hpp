// gradus/nn/recurrent.hpp — SimpleRNN, LSTM and GRU: cells (one time step) and sequence layers
// (a cell run over time by a plain loop; the tape is define-by-run; an LSTM on the CPU runs its
// whole sequence as one lstm_sequence op instead). Equations, weight layout,
// names and default initializers follow tf.keras (2.x): kernel [in, units*gates], recurrent_kernel
// [units, units*gates], bias; gate order i, f, c, o (LSTM) and z, r, h (GRU, reset_after = true).
//   gd::nn::LSTM<float> lstm({.in = 32, .units = 128, .return_sequences = true}, rng);
//   gd::Var<float> h = lstm.forward(x);   // x [N, T, 32] -> h [N, T, 128]
// For encoder-decoder models and padded batches a sequence layer also returns its final state
// as a differentiable value, takes an initial state and a [N, T] mask of valid steps, runs
// backwards (go_backwards), and applies Keras' dropout / recurrent_dropout:
//   auto [y, state] = encoder.forward_with_state(x, {.mask = &mask});   // mask = sequence_mask<float>(lengths, T)
//   gd::Var<float> out = decoder.forward_with_state(y_in, {.initial = state}).output;
// MultiRNNCell stacks cells (StackedLSTM, ...); Bidirectional (nn/bidirectional.hpp) runs a layer
// both ways. Helpers: sequence_mask (tf.sequence_mask), reverse_sequence (tf.reverse_sequence).
// This header holds the sequence layers; the cells are in nn/recurrent_cells.hpp, the stacked cell
// in nn/stacked_cells.hpp (both included here).
#pragma once
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "gradus/nn/recurrent_cells.hpp"
#include "gradus/nn/stacked_cells.hpp"

namespace gradus::nn {

// ---------------------------------------------------------------------------- sequence layers

/// Options of a sequence layer built from any cell (`Recurrent(cell, options)`).
struct RecurrentOptions {
  bool return_sequences = false;  ///< return every h [N, T, units] instead of the last [N, units]
  bool stateful = false;          ///< carry the final state (detached) to the next call
  bool go_backwards = false;      ///< run from the last step to the first (see Recurrent)
};

/// What one call of a sequence layer takes besides x (all optional):
///   initial  the state to start from (h [N, units]; {h, c} for an LSTM; one per cell for a
///            MultiRNNCell), differentiable: the gradient flows back into it;
///   mask     [N, T] of 0/1 (type T): 0 marks a padded step (see Recurrent); the pointee must
///            live until the call returns.
///   lstm.forward_with_state(x, {.initial = s, .mask = &m});
template <class State>
struct RecurrentCall {
  using T = typename detail::state_value<State>::type;
  std::optional<State> initial = std::nullopt;
  const Tensor<T>* mask = nullptr;
};

/// What forward_with_state returns: the layer's output (every h [N, T, units] with
/// return_sequences, else the last h [N, units]) and the final state, both differentiable.
template <class State>
struct RecurrentOutput {
  Var<typename detail::state_value<State>::type> output;
  State state;
};

/// A cell run over the time axis of x [N, T, in] (the common part of SimpleRNN, LSTM, GRU and
/// the stacked layers; tf.keras.layers.RNN). Its cell is the child "cell", so parameters read
/// "cell.kernel", ...
///
/// Masks (Keras' semantics): at a step where mask(i, t) = 0 row i's state (h, and c for an LSTM)
/// is carried unchanged and the output at that step is zero (zero_output_for_mask); the final
/// state (and the last output without return_sequences) is the state after each row's last
/// valid step. x at a masked step gets an exactly zero gradient. An LSTM on the CPU runs its whole
/// sequence as one lstm_sequence op only without a mask and without recurrent dropout in
/// training; otherwise it runs the per-step loop (about a dozen tape nodes per step instead of
/// one op for the sequence: some times slower and more tape memory).
///
/// go_backwards: each row is processed from its last valid step to its first, as
/// tf.reverse_sequence orders it (without a mask: from step T-1 to 0, as Keras); with
/// return_sequences the output lists the steps in that processing order (Keras' order without
/// a mask; with a mask, row i's first lengths[i] outputs are its steps reversed and its padded
/// steps stay at the end, zero). Bidirectional puts them back in input order.
///
/// Dropout (the cell's dropout / recurrent_dropout): masks drawn once per call in training mode.
/// Masks and dropout masks are moved to the input's device; go_backwards and reverse_sequence
/// gather on it too (their row indices are made on the host).
template <class Cell>
class Recurrent : public Module<typename Cell::value_type, Recurrent<Cell>> {
 public:
  using T = typename Cell::value_type;
  using State = typename Cell::State;
  using Call = RecurrentCall<State>;
  using Output = RecurrentOutput<State>;

  /// A sequence layer running `cell`; `name` appears in error messages.
  explicit Recurrent(Cell cell, const RecurrentOptions& o = {}, const char* name = "RNN")
      : cell_(std::move(cell)),
        return_sequences_(o.return_sequences),
        stateful_(o.stateful),
        go_backwards_(o.go_backwards),
        name_(name) {
    this->register_module("cell", cell_);
  }

  /// x [N, T, in] -> the last h [N, units], or every h [N, T, units] with return_sequences.
  /// Starts from the zero state, or (stateful) from the previous call's final state.
  template <Expression X>
  Var<T> forward(const X& x) {
    return run(detail::to_var(x), Call{}).output;
  }
  /// As forward(x), starting from `initial` (an LSTM takes {h, c}).
  template <Expression X>
  Var<T> forward(const X& x, const State& initial) {
    return run(detail::to_var(x), Call{.initial = initial}).output;
  }
  /// As forward(x) with a [N, T] mask of valid steps (see the class comment).
  template <Expression X>
  Var<T> forward(const X& x, const Tensor<T>& mask) {
    return run(detail::to_var(x), Call{.mask = &mask}).output;
  }
  /// The output and the final state, both differentiable (an encoder's state feeds a decoder):
  ///   auto [y, state] = lstm.forward_with_state(x, {.initial = s, .mask = &m});
  template <Expression X>
  Output forward_with_state(const X& x, const Call& call = {}) {
    return run(detail::to_var(x), call);
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
  bool go_backwards() const { return go_backwards_; }

 private:
  struct MaskGuard {  // clears the cell's dropout masks when a call ends, however it ends
    Cell& cell;
    ~MaskGuard() { cell.clear_masks(); }
  };

  Output run(const Var<T>& x_in, const Call& call) {
    const Shape& s = x_in.shape();
    if constexpr (requires { cell_.build(int64_t{}); })
      if (!cell_.built() && s.rank() == 3 && s[2] > 0) cell_.build(s[2]);  // a lazy layer: in from the input
    GRADUS_CHECK(shape_error, s.rank() == 3 && s[2] == cell_.in() && s[1] >= 1, name_, ": expected input [N, T, ",
                 cell_.in(), "] with T >= 1, got ", s);
    const int64_t n = s[0], steps = s[1];
    if (call.mask)
      GRADUS_CHECK(shape_error, (call.mask->shape() == Shape{n, steps}), name_, ": mask must be [", n, ", ", steps,
                   "] (N and T of the input ", s, "), got ", call.mask->shape());
    State st = call.initial ? *call.initial : cell_.initial_state(n);
    if (call.initial) cell_.check_state(st, n, name_);
    if (!call.initial && stateful_ && state_) {
      GRADUS_CHECK(shape_error, detail::state_batch(*state_) == n, name_, ": a stateful layer carries a state for ",
                   detail::state_batch(*state_), " sequences, got a batch of ", n, "; call reset_states() first");
      st = *state_;
    }
    Var<T> x = x_in;
    Tensor<T> mask;  // in processing order; undefined without a mask
    if (go_backwards_) {
      const Tensor<int64_t> lengths = call.mask ? mask_lengths(*call.mask) : Tensor<int64_t>::full({n}, steps);
      x = detail::to_var(reverse_sequence(x, lengths));
      if (call.mask) mask = reverse_sequence(*call.mask, lengths);
    } else if (call.mask) {
      mask = *call.mask;
    }
    if (mask.defined()) mask = mask.to(x.value().device());
    MaskGuard guard{cell_};
    cell_.draw_masks(n);
    if constexpr (requires { cell_.sequence(x, st); }) {
      if (backend::implements<backend::kernel::LstmForward, T>(x.value().device()) && !mask.defined() &&
          !cell_.recurrent_mask_drawn()) {
        auto [hs, last] = cell_.sequence(x, st);  // the whole sequence as one op (an LSTM)
        if (stateful_) state_ = detail::detach_state(last);
        return {return_sequences_ ? hs : detail::hidden_of(last), std::move(last)};
      }
    }
    const Var<T> xp = cell_.project(x);  // [N, T, G]: the input's share of every step, one matmul
    const int64_t g = xp.shape()[2];
    std::vector<Var<T>> hs;
    if (return_sequences_) hs.reserve(size_t(steps));
    for (int64_t t = 0; t < steps; ++t) {
      const Var<T> xt = detail::to_var(gradus::reshape(gradus::slice(xp, {0, t, 0}, {n, 1, g}), {n, g}));
      State next = cell_.step_projected(xt, st);
      if (mask.defined()) {
        const Var<T> m = Var<T>::constant(gradus::slice(mask, {0, t}, {n, 1}));  // [N, 1]
        if (return_sequences_) hs.push_back(Var<T>(m * detail::hidden_of(next)));
        st = detail::blend_state(m, next, st);
      } else {
        st = std::move(next);
        if (return_sequences_) hs.push_back(detail::hidden_of(st));
      }
    }
    if (stateful_) state_ = detail::detach_state(st);
    Var<T> out = return_sequences_ ? detail::to_var(gradus::stack(hs, 1)) : detail::hidden_of(st);
    return {std::move(out), std::move(st)};
  }

  Cell cell_;
  bool return_sequences_, stateful_, go_backwards_;
  const char* name_;
  std::optional<State> state_;
};

namespace detail {

/// The cell's options within a layer's options `o` (SimpleRNNOptions -> SimpleRNNCellOptions,
/// LSTMOptions -> LSTMCellOptions, GRUOptions -> GRUCellOptions): every field they share.
template <class CellOptions, class LayerOptions>
CellOptions cell_options(const LayerOptions& o) {
  CellOptions c{.in = o.in, .units = o.units, .dropout = o.dropout, .recurrent_dropout = o.recurrent_dropout};
  if constexpr (requires { c.activation = o.activation; }) c.activation = o.activation;
  if constexpr (requires { c.unit_forget_bias = o.unit_forget_bias; }) c.unit_forget_bias = o.unit_forget_bias;
  return c;
}

/// The RecurrentOptions within a layer's options.
template <class LayerOptions>
RecurrentOptions recurrent_options(const LayerOptions& o) {
  return {.return_sequences = o.return_sequences, .stateful = o.stateful, .go_backwards = o.go_backwards};
}

/// A Recurrent of one Cell built from a layer's options (SimpleRNN, LSTM, GRU): the cell from
/// the fields its options share with `Options`, the layer from the rest; `name` appears in errors.
template <class Cell, class LayerOptions>
class CellLayer : public Recurrent<Cell> {
 public:
  using Options = LayerOptions;
  CellLayer(const Options& o, Rng& rng, const char* name)
      : Recurrent<Cell>(Cell(cell_options<typename Cell::Options>(o), rng), recurrent_options(o), name) {}
};

}  // namespace detail

/// Options of `SimpleRNN`.
struct SimpleRNNOptions {
  int64_t in = 0;     ///< input features
  int64_t units = 0;  ///< size of the hidden state
  Activation activation = tanh;
  bool return_sequences = false;  ///< return every h [N, T, units] instead of the last [N, units]
  bool stateful = false;          ///< carry the final state (detached) to the next call
  bool go_backwards = false;      ///< run from the last step to the first (see Recurrent)
  double dropout = 0;             ///< input dropout (training only, one mask per call; see SimpleRNNCell)
  double recurrent_dropout = 0;   ///< dropout of h before the recurrent kernel (likewise)
};

/// tf.keras.layers.SimpleRNN: a `SimpleRNNCell` over time.
///   gd::nn::SimpleRNN<double> rnn({.in = 8, .units = 16}, rng);   // [N, T, 8] -> [N, 16]
template <Real T = float>
class SimpleRNN : public detail::CellLayer<SimpleRNNCell<T>, SimpleRNNOptions> {
 public:
  SimpleRNN(const SimpleRNNOptions& o, Rng& rng)
      : detail::CellLayer<SimpleRNNCell<T>, SimpleRNNOptions>(o, rng, "SimpleRNN") {}
};

/// Options of `LSTM`.
struct LSTMOptions {
  int64_t in = 0;     ///< input features; 0: taken from the first input (the weights drawn then)
  int64_t units = 0;  ///< size of h and c
  bool return_sequences = false;  ///< return every h [N, T, units] instead of the last [N, units]
  bool stateful = false;          ///< carry the final {h, c} (detached) to the next call
  bool unit_forget_bias = true;   ///< start the forget-gate bias at 1
  bool go_backwards = false;      ///< run from the last step to the first (see Recurrent)
  double dropout = 0;             ///< input dropout (training only, one mask per call; see LSTMCell)
  double recurrent_dropout = 0;   ///< dropout of h before the recurrent kernel (likewise; runs the per-step loop)
};

/// tf.keras.layers.LSTM: an `LSTMCell` over time; 4 (in·u + u·u + u) parameters.
///   gd::nn::LSTM<float> lstm({.in = 32, .units = 128, .stateful = true}, rng);
/// Without `.in` the layer is lazy as Dense is: kernel [0, 4u] until the first input [N, T, in].
template <Real T = float>
class LSTM : public detail::CellLayer<LSTMCell<T>, LSTMOptions> {
 public:
  LSTM(const LSTMOptions& o, Rng& rng) : detail::CellLayer<LSTMCell<T>, LSTMOptions>(o, rng, "LSTM") {}
};

/// Options of `GRU`.
struct GRUOptions {
  int64_t in = 0;     ///< input features
  int64_t units = 0;  ///< size of the hidden state
  bool return_sequences = false;  ///< return every h [N, T, units] instead of the last [N, units]
  bool stateful = false;          ///< carry the final state (detached) to the next call
  bool go_backwards = false;      ///< run from the last step to the first (see Recurrent)
  double dropout = 0;             ///< input dropout (training only, one mask per call; see GRUCell)
  double recurrent_dropout = 0;   ///< dropout of h before the recurrent kernel (likewise)
};

/// tf.keras.layers.GRU (reset_after = true): a `GRUCell` over time; 3 (in·u + u·u + 2u) parameters.
template <Real T = float>
class GRU : public detail::CellLayer<GRUCell<T>, GRUOptions> {
 public:
  GRU(const GRUOptions& o, Rng& rng) : detail::CellLayer<GRUCell<T>, GRUOptions>(o, rng, "GRU") {}
};

/// Options of the stacked layers (StackedLSTM, StackedGRU, StackedSimpleRNN).
struct StackedRNNOptions {
  int64_t in = 0;              ///< input features of the bottom layer
  std::vector<int64_t> units;  ///< size of each layer's state, bottom first (at least one)
  bool return_sequences = false;  ///< return every top h [N, T, units.back()] instead of the last
  bool stateful = false;          ///< carry the final states (detached) to the next call
  bool go_backwards = false;      ///< run from the last step to the first (see Recurrent)
  double dropout = 0;             ///< every cell's input dropout (training only, one mask per call)
  double recurrent_dropout = 0;   ///< every cell's recurrent dropout (likewise)
  double between_dropout = 0;     ///< dropout of h between layers (MultiRNNCell's dropout)
};

/// Cells of one type stacked in depth and run over time: a Recurrent of a MultiRNNCell, one
/// pass over the sequence for all layers (parameters "cell.cells.0.kernel", ...); State is one
/// cell state per layer. The same as chaining single layers with return_sequences, except that
/// all final states come back together.
///   gd::nn::StackedLSTM<float> enc({.in = 32, .units = {128, 128}, .between_dropout = 0.2}, rng);
///   auto [y, states] = enc.forward_with_state(x);   // states[k] = {h, c} of layer k
template <class Cell>
class StackedRNN : public Recurrent<MultiRNNCell<Cell>> {
 public:
  using Options = StackedRNNOptions;
  StackedRNN(const StackedRNNOptions& o, Rng& rng)
      : Recurrent<MultiRNNCell<Cell>>(make_cell(o, rng), detail::recurrent_options(o), "StackedRNN") {}

 private:
  static MultiRNNCell<Cell> make_cell(const StackedRNNOptions& o, Rng& rng) {
    GRADUS_CHECK(value_error, !o.units.empty(), "StackedRNN: units must list at least one layer");
    std::vector<Cell> cells;
    int64_t in = o.in;
    for (int64_t u : o.units) {
      cells.push_back(Cell({.in = in, .units = u, .dropout = o.dropout, .recurrent_dropout = o.recurrent_dropout}, rng));
      in = u;
    }
    return MultiRNNCell<Cell>(std::move(cells), rng, {.dropout = o.between_dropout});
  }
};

template <Real T = float>
using StackedSimpleRNN = StackedRNN<SimpleRNNCell<T>>;
template <Real T = float>
using StackedLSTM = StackedRNN<LSTMCell<T>>;
template <Real T = float>
using StackedGRU = StackedRNN<GRUCell<T>>;

}  // namespace gradus::nn
