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
#pragma once
#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gradus/init/initializers.hpp"
#include "gradus/nn/activations.hpp"
#include "gradus/nn/module.hpp"
#include "gradus/ops/dropout.hpp"
#include "gradus/ops/linalg.hpp"
#include "gradus/ops/recurrent.hpp"
#include "gradus/ops/reduce.hpp"
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

template <class S>
const auto& hidden_of(const std::vector<S>& s) { return hidden_of(s.back()); }
template <class S>
std::vector<S> detach_state(const std::vector<S>& s) {
  std::vector<S> out;
  for (const S& x : s) out.push_back(detach_state(x));
  return out;
}
template <class S>
int64_t state_batch(const std::vector<S>& s) { return state_batch(s.front()); }

/// The element type of a state: T for Var<T>, LSTMState<T> and vectors of them.
template <class S>
struct state_value;
template <Real T>
struct state_value<Var<T>> { using type = T; };
template <Real T>
struct state_value<LSTMState<T>> { using type = T; };
template <class S>
struct state_value<std::vector<S>> : state_value<S> {};

/// A masked step: m · next + (1 - m) · prev, m [N, 1] of 0/1 (where m = 0 the state is carried
/// and neither `next` nor what it was computed from gets any gradient).
template <Real T>
Var<T> blend_state(const Var<T>& m, const Var<T>& next, const Var<T>& prev) {
  return Var<T>(m * next + (T(1) - m) * prev);
}
template <Real T>
LSTMState<T> blend_state(const Var<T>& m, const LSTMState<T>& next, const LSTMState<T>& prev) {
  return {blend_state(m, next.h, prev.h), blend_state(m, next.c, prev.c)};
}
template <Real T, class S>
std::vector<S> blend_state(const Var<T>& m, const std::vector<S>& next, const std::vector<S>& prev) {
  std::vector<S> out;
  for (size_t k = 0; k < next.size(); ++k) out.push_back(blend_state(m, next[k], prev[k]));
  return out;
}

/// Checks that an initial state given by the caller is [batch, units] (each part of it).
template <Real T>
void check_state(const Var<T>& h, int64_t batch, int64_t units, const char* layer, const char* what) {
  GRADUS_CHECK(shape_error, (h.shape() == Shape{batch, units}), layer, ": initial state ", what, " must be [", batch,
               ", ", units, "], got ", h.shape());
}

/// One dropout mask [shape] of 0 and 1 / (1 - rate) (inverted dropout of ones) on `device`.
template <Real T>
Tensor<T> dropout_mask(const Shape& shape, double rate, Rng& rng, Device device) {
  return Tensor<T>(gradus::dropout(Tensor<T>::ones(shape), rate, rng, true)).to(device);
}

/// The dropout of a cell (Keras' `dropout` and `recurrent_dropout`): a sequence layer draws one
/// input mask [N, in] and one recurrent mask [N, units] per call (training mode only) and every
/// step uses the same two. One mask per input is shared by all gates (Keras draws one per gate).
template <Real T>
struct CellDropout {
  double rate = 0, recurrent_rate = 0;
  Rng* rng = nullptr;           ///< set when a rate is non-zero
  Tensor<T> input, recurrent;   ///< the masks of the call under way; undefined outside one

  void init(double r, double rr, Rng& g, const char* cell) {
    GRADUS_CHECK(value_error, r >= 0 && r < 1 && rr >= 0 && rr < 1, cell,
                 ": dropout and recurrent_dropout must be in [0, 1), got ", r, " and ", rr);
    rate = r;
    recurrent_rate = rr;
    if (r > 0 || rr > 0) rng = &g;
  }
  bool active() const { return rng != nullptr; }
  void draw(int64_t n, int64_t in, int64_t units, bool training, Device device) {
    clear();
    if (!training) return;
    if (rate > 0) input = dropout_mask<T>({n, in}, rate, *rng, device);
    if (recurrent_rate > 0) recurrent = dropout_mask<T>({n, units}, recurrent_rate, *rng, device);
  }
  void clear() { input = recurrent = Tensor<T>(); }
  /// x [N, in] or [N, T, in] times the input mask (broadcast over time).
  Var<T> apply_input(const Var<T>& x) const {
    if (!input.defined()) return x;
    const Shape& s = input.shape();
    if (x.shape().rank() == 3) return Var<T>(x * gradus::reshape(input, {s[0], 1, s[1]}));
    return Var<T>(x * input);
  }
  Var<T> apply_recurrent(const Var<T>& h) const { return recurrent.defined() ? Var<T>(h * recurrent) : h; }
};

}  // namespace detail

/// A [N, max_len] mask (type T) of the first lengths[i] steps of each row, as tf.sequence_mask:
/// mask(i, t) = t < lengths[i]. lengths [N] (int64).
///   gd::nn::sequence_mask<float>(gd::Tensor<int64_t>::from({2, 3}), 3);   // [[1,1,0],[1,1,1]]
template <Real T>
Tensor<T> sequence_mask(const Tensor<int64_t>& lengths, int64_t max_len) {
  GRADUS_CHECK(shape_error, lengths.rank() == 1, "sequence_mask: lengths must be [N], got ", lengths.shape());
  GRADUS_CHECK(value_error, max_len >= 0, "sequence_mask: max_len must be >= 0, got ", max_len);
  const int64_t n = lengths.shape()[0];
  const Tensor<T> steps = gradus::reshape(gradus::cast<T>(Tensor<int64_t>::arange(max_len)), {1, max_len});
  const Tensor<T> len = gradus::reshape(gradus::cast<T>(lengths), {n, 1});
  return gradus::eval(steps < len);
}

/// The length of each row of a [N, T] mask: one past its last non-zero step (0 for an empty row).
template <Real T>
Tensor<int64_t> mask_lengths(const Tensor<T>& mask) {
  GRADUS_CHECK(shape_error, mask.rank() == 2, "mask_lengths: mask must be [N, T], got ", mask.shape());
  const int64_t steps = mask.shape()[1];
  const Tensor<T> pos = gradus::reshape(gradus::cast<T>(Tensor<int64_t>::arange(steps)), {1, steps}) + T(1);
  return gradus::cast<int64_t>(Tensor<T>(gradus::max(Tensor<T>(pos * (mask != T(0))), 1)));
}

/// Reverses the first lengths[i] steps of each row of x [N, T, ...] and leaves the rest in
/// place, as tf.reverse_sequence(seq_axis = 1, batch_axis = 0); differentiable (one gather).
/// lengths [N] in [0, T]. A Tensor in gives a Tensor, a Var a Var. The gather's N·T row indices
/// are written on the host (index bookkeeping; x itself is only reshaped and gathered). CPU.
///   reverse_sequence(x, lengths);   // x [2, 4, D], lengths {2, 4}: rows (x1 x0 x2 x3), (x3 x2 x1 x0)
template <Expression E>
auto reverse_sequence(const E& x_expr, const Tensor<int64_t>& lengths) {
  auto x = materialize(x_expr);
  const Shape& s = x.shape();
  GRADUS_CHECK(shape_error, s.rank() >= 2, "reverse_sequence: x must be [N, T, ...], got ", s);
  const int64_t n = s[0], steps = s[1];
  GRADUS_CHECK(shape_error, (lengths.shape() == Shape{n}), "reverse_sequence: lengths must be [", n,
               "] for x ", s, ", got ", lengths.shape());
  Tensor<int64_t> idx = Tensor<int64_t>::empty({n * steps});  // row-major (i, t) -> the source row i·T + t'
  const int64_t* len = lengths.data();
  int64_t* out = idx.data();
  for (int64_t i = 0; i < n; ++i) {
    GRADUS_CHECK(value_error, len[i] >= 0 && len[i] <= steps, "reverse_sequence: lengths[", i, "] = ", len[i],
                 " is outside [0, ", steps, "]");
    for (int64_t t = 0; t < steps; ++t) out[i * steps + t] = i * steps + (t < len[i] ? len[i] - 1 - t : t);
  }
  Shape flat = s;  // [N·T, ...]
  flat.erase(0);
  flat[0] = n * steps;
  return gradus::reshape(gradus::gather(gradus::reshape(x, flat), idx, 0), s);
}

/// reverse_sequence with the lengths of a [N, T] mask (one past each row's last valid step).
template <Expression E>
auto reverse_sequence(const E& x_expr, const Tensor<value_type_t<E>>& mask) {
  auto x = materialize(x_expr);
  GRADUS_CHECK(shape_error, mask.rank() == 2 && x.shape().rank() >= 2 && mask.shape()[0] == x.shape()[0] &&
                                mask.shape()[1] == x.shape()[1],
               "reverse_sequence: mask must be [N, T] for x ", x.shape(), ", got ", mask.shape());
  return reverse_sequence(x, mask_lengths(mask));
}

// ------------------------------------------------------------------------------------ cells

/// Options of `SimpleRNNCell`.
struct SimpleRNNCellOptions {
  int64_t in = 0;     ///< input features
  int64_t units = 0;  ///< size of the hidden state
  Activation activation = tanh;
  double dropout = 0;            ///< input dropout rate in [0, 1) (training only; one mask per call)
  double recurrent_dropout = 0;  ///< dropout rate of h before h · recurrent_kernel (training only; one mask per call)
};

/// h' = activation(x · kernel + h · recurrent_kernel + bias) (tf.keras.layers.SimpleRNNCell);
/// kernel [in, units] Glorot uniform, recurrent_kernel [units, units] orthogonal, bias [units] zeros.
/// With dropout / recurrent_dropout, a sequence layer draws one input mask [N, in] and one
/// recurrent mask [N, units] per call in training mode (draw_masks) and uses them at every step
/// (Keras' semantics, one mask shared by all gates where Keras draws one per gate); the
/// generator `rng` (which must then outlive the cell) is registered as "rng", so checkpoints
/// save it. `step` on its own applies no dropout.
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
    drop_.init(o.dropout, o.recurrent_dropout, rng, "SimpleRNNCell");
    if (drop_.active()) this->register_generator("rng", rng);
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
  Var<T> project(const Var<T>& x) const { return gradus::matmul(drop_.apply_input(x), kernel_); }
  /// One step from a projected input xp = project(x_t) [N, units].
  State step_projected(const Var<T>& xp, const State& h) const {
    return detail::bias_activation(Var<T>(xp + gradus::matmul(drop_.apply_recurrent(h), recurrent_kernel_)), bias_,
                                   activation_);
  }
  /// The zero state for a batch of `batch` sequences.
  State initial_state(int64_t batch) const { return Var<T>::constant(Tensor<T>::zeros({batch, units_})); }
  /// Throws shape_error unless `s` is a state for `batch` sequences ([batch, units]).
  void check_state(const State& s, int64_t batch, const char* layer) const {
    detail::check_state(s, batch, units_, layer, "h");
  }

  /// Draws this call's dropout masks for a batch of `batch` (training mode and a non-zero rate
  /// only; otherwise clears them). A sequence layer calls it before its steps, clear_masks after.
  void draw_masks(int64_t batch) { drop_.draw(batch, in_, units_, this->is_training(), this->device()); }
  void clear_masks() { drop_.clear(); }
  /// True while this call's recurrent dropout mask is drawn (each step then differs from the fused op).
  bool recurrent_mask_drawn() const { return drop_.recurrent.defined(); }
  double dropout() const { return drop_.rate; }
  double recurrent_dropout() const { return drop_.recurrent_rate; }

  int64_t in() const { return in_; }
  int64_t units() const { return units_; }
  Var<T> kernel() const { return kernel_; }
  Var<T> recurrent_kernel() const { return recurrent_kernel_; }
  Var<T> bias() const { return bias_; }

 private:
  int64_t in_, units_;
  Activation activation_;
  Var<T> kernel_, recurrent_kernel_, bias_;
  detail::CellDropout<T> drop_;
};

/// Options of `LSTMCell`.
struct LSTMCellOptions {
  int64_t in = 0;     ///< input features; 0: set later by build(in) (an LSTM layer: from its first input)
  int64_t units = 0;  ///< size of h and c
  bool unit_forget_bias = true;  ///< start the forget-gate bias at 1 (Keras' default)
  double dropout = 0;            ///< input dropout rate in [0, 1) (training only; one mask per call)
  double recurrent_dropout = 0;  ///< dropout rate of h before h · recurrent_kernel (training only; one mask per call)
};

/// tf.keras.layers.LSTMCell: z = x · kernel + h · recurrent_kernel + bias split into i, f, g, o;
/// c' = σ(f) c + σ(i) tanh(g), h' = σ(o) tanh(c'). kernel [in, 4u] Glorot uniform,
/// recurrent_kernel [u, 4u] orthogonal, bias [4u] zeros (ones for f with unit_forget_bias).
/// With dropout / recurrent_dropout, a sequence layer draws one input mask [N, in] and one
/// recurrent mask [N, units] per call in training mode (draw_masks) and uses them at every step
/// (Keras' semantics, one mask shared by all gates where Keras draws one per gate); the
/// generator `rng` (which must then outlive the cell) is registered as "rng", so checkpoints
/// save it. `step` on its own applies no dropout.
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
    drop_.init(o.dropout, o.recurrent_dropout, rng, "LSTMCell");
    if (drop_.active()) this->register_generator("rng", rng);
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
    built_ = true;
  }
  /// False while a lazy cell (no `.in`) waits for build.
  bool built() const { return built_; }
  /// A lazy cell not yet built: `saved` [in, 4 units] for "kernel" gives in (see Module); a
  /// checkpoint restored into an LSTM layer that has seen no input builds it so.
  int64_t lazy_input_size(std::string_view name, const Shape& saved) const override {
    const bool fits = !built_ && name == "kernel" && saved.rank() == 2 && saved[0] > 0 && saved[1] == 4 * units_;
    return fits ? saved[0] : 0;
  }
  void build_unfilled(int64_t in) override { set_kernel_rows(in, true); }
  void unbuild() override { set_kernel_rows(0, false); }

  /// One step: x_t [N, in], {h, c} [N, units] each -> {h', c'}.
  template <Expression X>
  State step(const X& x, const State& s) const {
    const Var<T> xv = detail::to_var(x);
    detail::check_last_dim(xv.shape(), in_, "LSTMCell", "in");
    return step_projected(project(xv), s);
  }
  /// The input's share of the gates, x · kernel + bias: [..., in] -> [..., 4 units].
  Var<T> project(const Var<T>& x) const { return Var<T>(gradus::matmul(drop_.apply_input(x), kernel_) + bias_); }
  /// One step from a projected input xp = project(x_t) [N, 4 units].
  State step_projected(const Var<T>& xp, const State& s) const {
    const Var<T> z(xp + gradus::matmul(drop_.apply_recurrent(s.h), recurrent_kernel_));
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
  /// Throws shape_error unless `s` is a state for `batch` sequences (h and c [batch, units]).
  void check_state(const State& s, int64_t batch, const char* layer) const {
    detail::check_state(s.h, batch, units_, layer, "h");
    detail::check_state(s.c, batch, units_, layer, "c");
  }

  /// Draws this call's dropout masks for a batch of `batch` (training mode and a non-zero rate
  /// only; otherwise clears them). A sequence layer calls it before its steps, clear_masks after.
  void draw_masks(int64_t batch) { drop_.draw(batch, in_, units_, this->is_training(), this->device()); }
  void clear_masks() { drop_.clear(); }
  /// True while this call's recurrent dropout mask is drawn (each step then differs from the fused op).
  bool recurrent_mask_drawn() const { return drop_.recurrent.defined(); }
  double dropout() const { return drop_.rate; }
  double recurrent_dropout() const { return drop_.recurrent_rate; }

  int64_t in() const { return in_; }
  int64_t units() const { return units_; }
  Var<T> kernel() const { return kernel_; }
  Var<T> recurrent_kernel() const { return recurrent_kernel_; }
  Var<T> bias() const { return bias_; }

 private:
  void set_kernel_rows(int64_t in, bool built) {
    kernel_.value() = Tensor<T>::zeros({in, 4 * units_}).to(kernel_.value().device());
    in_ = in;
    built_ = built;
  }

  int64_t in_, units_;
  Rng* rng_ = nullptr;  ///< draws the kernels when a lazy cell is built
  bool built_ = false;
  Var<T> kernel_, recurrent_kernel_, bias_;
  detail::CellDropout<T> drop_;
};

/// Options of `GRUCell`.
struct GRUCellOptions {
  int64_t in = 0;     ///< input features
  int64_t units = 0;  ///< size of the hidden state
  double dropout = 0;            ///< input dropout rate in [0, 1) (training only; one mask per call)
  double recurrent_dropout = 0;  ///< dropout rate of h before h · recurrent_kernel (training only; one mask per call)
};

/// tf.keras.layers.GRUCell with reset_after = true (Keras 2's default): with x · kernel + b_in
/// split into x_z, x_r, x_h and h · recurrent_kernel + b_rec into r_z, r_r, r_h,
/// z = σ(x_z + r_z), r = σ(x_r + r_r), h~ = tanh(x_h + r r_h), h' = z h + (1 - z) h~.
/// kernel [in, 3u] Glorot uniform, recurrent_kernel [u, 3u] orthogonal, bias [2, 3u] zeros
/// (row 0 b_in, row 1 b_rec).
/// With dropout / recurrent_dropout, a sequence layer draws one input mask [N, in] and one
/// recurrent mask [N, units] per call in training mode (draw_masks) and uses them at every step
/// (Keras' semantics, one mask shared by all gates where Keras draws one per gate); the
/// generator `rng` (which must then outlive the cell) is registered as "rng", so checkpoints
/// save it. `step` on its own applies no dropout.
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
    drop_.init(o.dropout, o.recurrent_dropout, rng, "GRUCell");
    if (drop_.active()) this->register_generator("rng", rng);
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
    return Var<T>(gradus::matmul(drop_.apply_input(x), kernel_) + detail::bias_row(bias_, 0));
  }
  /// One step from a projected input xp = project(x_t) [N, 3 units].
  State step_projected(const Var<T>& xp, const State& h) const {
    const Var<T> hr(gradus::matmul(drop_.apply_recurrent(h), recurrent_kernel_) + detail::bias_row(bias_, 1));
    const Var<T> z(gradus::sigmoid(detail::gate(xp, 0, units_) + detail::gate(hr, 0, units_)));
    const Var<T> r_h = detail::gate(hr, 2, units_);
    const Var<T> hh(gradus::tanh(detail::gate(xp, 2, units_) +
                                 gradus::sigmoid(detail::gate(xp, 1, units_) + detail::gate(hr, 1, units_)) * r_h));
    return Var<T>(hh + z * (h - hh));
  }
  /// The zero state for a batch of `batch` sequences.
  State initial_state(int64_t batch) const { return Var<T>::constant(Tensor<T>::zeros({batch, units_})); }
  /// Throws shape_error unless `s` is a state for `batch` sequences ([batch, units]).
  void check_state(const State& s, int64_t batch, const char* layer) const {
    detail::check_state(s, batch, units_, layer, "h");
  }

  /// Draws this call's dropout masks for a batch of `batch` (training mode and a non-zero rate
  /// only; otherwise clears them). A sequence layer calls it before its steps, clear_masks after.
  void draw_masks(int64_t batch) { drop_.draw(batch, in_, units_, this->is_training(), this->device()); }
  void clear_masks() { drop_.clear(); }
  /// True while this call's recurrent dropout mask is drawn (each step then differs from the fused op).
  bool recurrent_mask_drawn() const { return drop_.recurrent.defined(); }
  double dropout() const { return drop_.rate; }
  double recurrent_dropout() const { return drop_.recurrent_rate; }

  int64_t in() const { return in_; }
  int64_t units() const { return units_; }
  Var<T> kernel() const { return kernel_; }
  Var<T> recurrent_kernel() const { return recurrent_kernel_; }
  Var<T> bias() const { return bias_; }

 private:
  int64_t in_, units_;
  Var<T> kernel_, recurrent_kernel_, bias_;
  detail::CellDropout<T> drop_;
};

// ------------------------------------------------------------------------------ stacked cells

namespace detail {

/// The cells of a MultiRNNCell, children "0", "1", ... (owned, so they keep their place when the
/// MultiRNNCell moves).
template <class Cell>
class CellList : public Module<typename Cell::value_type> {
 public:
  CellList() = default;
  void add(Cell cell) {
    items_.push_back(&this->register_module(std::to_string(items_.size()), std::make_unique<Cell>(std::move(cell))));
  }
  Cell& operator[](size_t k) { return *items_[k]; }
  const Cell& operator[](size_t k) const { return *items_[k]; }
  size_t size() const { return items_.size(); }

 private:
  std::vector<Cell*> items_;
};

}  // namespace detail

/// Options of `MultiRNNCell`.
struct MultiRNNCellOptions {
  double dropout = 0;  ///< dropout rate on the h passed from each cell to the next (training only; one mask per call)
};

/// Cells of one type stacked in depth (tf.nn.rnn_cell.MultiRNNCell, Keras' StackedRNNCells): at
/// each step cell 0 reads x_t, cell k reads cell k-1's new h; the output is the top cell's h.
/// State = one state per cell (bottom first); the cells are children "cells.0", "cells.1", ...,
/// so parameters read "cells.0.kernel", ... Cell k's `in` must equal cell k-1's `units`; cell 0
/// must be built (an LSTMCell with `.in`). With `.dropout`, one mask [N, units_k] per call and
/// per junction (variational, as Keras' recurrent dropout) multiplies the h between cells in
/// training mode; `rng` (which must then outlive the cell) is registered as "rng".
/// Use it as the cell of a sequence layer (Recurrent, StackedLSTM, ...):
///   std::vector<gd::nn::LSTMCell<float>> cells;
///   cells.emplace_back(gd::nn::LSTMCellOptions{.in = 8, .units = 16}, rng);
///   cells.emplace_back(gd::nn::LSTMCellOptions{.in = 16, .units = 16}, rng);
///   gd::nn::Recurrent<gd::nn::MultiRNNCell<gd::nn::LSTMCell<float>>> rnn(
///       gd::nn::MultiRNNCell<gd::nn::LSTMCell<float>>(std::move(cells), rng), {.return_sequences = true});
template <class Cell>
class MultiRNNCell : public Module<typename Cell::value_type, MultiRNNCell<Cell>> {
 public:
  using T = typename Cell::value_type;
  using State = std::vector<typename Cell::State>;

  MultiRNNCell(std::vector<Cell> cells, Rng& rng, const MultiRNNCellOptions& o = {}) : dropout_(o.dropout) {
    GRADUS_CHECK(value_error, !cells.empty(), "MultiRNNCell: needs at least one cell");
    GRADUS_CHECK(value_error, o.dropout >= 0 && o.dropout < 1, "MultiRNNCell: dropout must be in [0, 1), got ",
                 o.dropout);
    GRADUS_CHECK(value_error, cells[0].in() > 0, "MultiRNNCell: cell 0 must be built (give its .in)");
    for (size_t k = 1; k < cells.size(); ++k)
      GRADUS_CHECK(shape_error, cells[k].in() == cells[k - 1].units(), "MultiRNNCell: cell ", k, " takes in = ",
                   cells[k].in(), " but cell ", k - 1, " has units = ", cells[k - 1].units());
    for (Cell& c : cells) cells_.add(std::move(c));
    this->register_module("cells", cells_);
    if (o.dropout > 0) rng_ = &this->register_generator("rng", rng);
  }

  /// One step: x_t [N, in], a state per cell -> the new states.
  template <Expression X>
  State step(const X& x, const State& s) const {
    const Var<T> xv = detail::to_var(x);
    detail::check_last_dim(xv.shape(), in(), "MultiRNNCell", "in");
    return step_projected(project(xv), s);
  }
  /// Cell 0's projection of the input: [..., in] -> [..., G].
  Var<T> project(const Var<T>& x) const { return cells_[0].project(x); }
  /// One step from cell 0's projected input xp [N, G].
  State step_projected(const Var<T>& xp, const State& s) const {
    State out;
    out.reserve(s.size());
    out.push_back(cells_[0].step_projected(xp, s[0]));
    for (size_t k = 1; k < cells_.size(); ++k) {
      Var<T> h = detail::hidden_of(out.back());
      if (between_[k - 1].defined()) h = Var<T>(h * between_[k - 1]);
      out.push_back(cells_[k].step_projected(cells_[k].project(h), s[k]));
    }
    return out;
  }
  /// The zero state of every cell.
  State initial_state(int64_t batch) const {
    State out;
    for (size_t k = 0; k < cells_.size(); ++k) out.push_back(cells_[k].initial_state(batch));
    return out;
  }
  /// Throws shape_error unless `s` holds one state per cell, each for `batch` sequences.
  void check_state(const State& s, int64_t batch, const char* layer) const {
    GRADUS_CHECK(shape_error, s.size() == cells_.size(), layer, ": initial state must hold ", cells_.size(),
                 " cell states, got ", s.size());
    for (size_t k = 0; k < cells_.size(); ++k) cells_[k].check_state(s[k], batch, layer);
  }
  /// Draws this call's masks (every cell's, and the ones between cells); see the cells.
  void draw_masks(int64_t batch) {
    between_.assign(cells_.size() - 1, Tensor<T>());
    for (size_t k = 0; k < cells_.size(); ++k) {
      cells_[k].draw_masks(batch);
      if (k + 1 < cells_.size() && rng_ && this->is_training())
        between_[k] = detail::dropout_mask<T>({batch, cells_[k].units()}, dropout_, *rng_, this->device());
    }
  }
  void clear_masks() {
    between_.clear();
    for (size_t k = 0; k < cells_.size(); ++k) cells_[k].clear_masks();
  }

  Cell& cell(size_t k) { return cells_[k]; }
  const Cell& cell(size_t k) const { return cells_[k]; }
  size_t size() const { return cells_.size(); }
  int64_t in() const { return cells_[0].in(); }
  int64_t units() const { return cells_[cells_.size() - 1].units(); }  ///< the top cell's
  double dropout() const { return dropout_; }

 private:
  detail::CellList<Cell> cells_;
  double dropout_;
  Rng* rng_ = nullptr;
  std::vector<Tensor<T>> between_;  ///< this call's masks between cells
};

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
/// gather on the CPU (gather is CPU-only).
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
    const Var<T> xp = cell_.project(x);  // [N, T, G]: the input's share of every step, one matmul
    if constexpr (requires { cell_.sequence_projected(xp, st); }) {
      if (xp.value().device().is_cpu() && !mask.defined() && !cell_.recurrent_mask_drawn()) {
        auto [hs, last] = cell_.sequence_projected(xp, st);  // the whole sequence as one op (an LSTM)
        if (stateful_) state_ = detail::detach_state(last);
        return {return_sequences_ ? hs : detail::hidden_of(last), std::move(last)};
      }
    }
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
class SimpleRNN : public Recurrent<SimpleRNNCell<T>> {
 public:
  using Options = SimpleRNNOptions;
  SimpleRNN(const SimpleRNNOptions& o, Rng& rng)
      : Recurrent<SimpleRNNCell<T>>(SimpleRNNCell<T>({.in = o.in,
                                                      .units = o.units,
                                                      .activation = o.activation,
                                                      .dropout = o.dropout,
                                                      .recurrent_dropout = o.recurrent_dropout},
                                                     rng),
                                    {o.return_sequences, o.stateful, o.go_backwards}, "SimpleRNN") {}
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
class LSTM : public Recurrent<LSTMCell<T>> {
 public:
  using Options = LSTMOptions;
  LSTM(const LSTMOptions& o, Rng& rng)
      : Recurrent<LSTMCell<T>>(LSTMCell<T>({.in = o.in,
                                            .units = o.units,
                                            .unit_forget_bias = o.unit_forget_bias,
                                            .dropout = o.dropout,
                                            .recurrent_dropout = o.recurrent_dropout},
                                           rng),
                               {o.return_sequences, o.stateful, o.go_backwards}, "LSTM") {}
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
class GRU : public Recurrent<GRUCell<T>> {
 public:
  using Options = GRUOptions;
  GRU(const GRUOptions& o, Rng& rng)
      : Recurrent<GRUCell<T>>(GRUCell<T>({.in = o.in,
                                          .units = o.units,
                                          .dropout = o.dropout,
                                          .recurrent_dropout = o.recurrent_dropout},
                                         rng),
                              {o.return_sequences, o.stateful, o.go_backwards}, "GRU") {}
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
      : Recurrent<MultiRNNCell<Cell>>(make_cell(o, rng), {o.return_sequences, o.stateful, o.go_backwards},
                                      "StackedRNN") {}

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
