// gradus/nn/recurrent_cells.hpp — the recurrent cells, one time step each: SimpleRNNCell, LSTMCell and
// GRUCell (tf.keras' equations, weight layout and initializers: see gradus/nn/recurrent.hpp), their
// states and dropout, and the sequence helpers sequence_mask and reverse_sequence.
#pragma once
#include <algorithm>
#include <concepts>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
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

/// Checks that a state given by the caller is [batch, units] (each part of it); `role` names it in
/// the message ("initial state" for a sequence layer, "state" for a cell's step).
template <Real T>
void check_state(const Var<T>& h, int64_t batch, int64_t units, const char* layer, const char* what,
                 const char* role = "initial state") {
  GRADUS_CHECK(shape_error, (h.shape() == Shape{batch, units}), layer, ": ", role, " ", what, " must be [", batch,
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
  const Tensor<T> pos =
      gradus::reshape(gradus::cast<T>(Tensor<int64_t>::arange(steps)), {1, steps}).to(mask.device()) + T(1);
  return gradus::cast<int64_t>(Tensor<T>(gradus::max(Tensor<T>(pos * (mask != T(0))), 1)));
}

/// Reverses the first lengths[i] steps of each row of x [N, T, ...] and leaves the rest in
/// place, as tf.reverse_sequence(seq_axis = 1, batch_axis = 0); differentiable (one gather).
/// lengths [N] in [0, T]. A Tensor in gives a Tensor, a Var a Var. The gather's N·T row indices
/// are written on the host (index bookkeeping, from lengths read back if they are on a GPU; x
/// itself is only reshaped and gathered on its device).
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
  const Tensor<int64_t> host_lengths = lengths.to(gradus::cpu);
  const int64_t* len = host_lengths.data();
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

namespace detail {

/// What SimpleRNNCell, LSTMCell and GRUCell (Derived, whose state is S) share: the weights
/// "kernel" [in, gates·units] (Glorot uniform), "recurrent_kernel" [units, gates·units]
/// (orthogonal) and "bias", the zero state and its check, the dropout and the accessors.
/// With dropout / recurrent_dropout, a sequence layer draws one input mask [N, in] and one
/// recurrent mask [N, units] per call in training mode (draw_masks) and uses them at every step
/// (Keras' semantics, one mask shared by all gates where Keras draws one per gate); the
/// generator given to the cell (which must then outlive it) is registered as "rng", so
/// checkpoints save it. `step` on its own applies no dropout.
template <Real T, class Derived, class S>
class RecurrentCell : public Module<T, Derived> {
 public:
  using State = S;

  /// The zero state for a batch of `batch` sequences (h, and c for an LSTM, [batch, units]).
  State initial_state(int64_t batch) const {
    const Device dev = recurrent_kernel_.value().device();  // the state lives with the weights
    const auto zeros = [&] { return Var<T>::constant(Tensor<T>::empty({batch, units_}, dev).fill_(T(0))); };
    if constexpr (std::same_as<State, LSTMState<T>>)
      return {zeros(), zeros()};
    else
      return zeros();
  }
  /// Throws shape_error unless `s` is a state for `batch` sequences (each part [batch, units]).
  void check_state(const State& s, int64_t batch, const char* layer, const char* role = "initial state") const {
    if constexpr (std::same_as<State, LSTMState<T>>) {
      detail::check_state(s.h, batch, units_, layer, "h", role);
      detail::check_state(s.c, batch, units_, layer, "c", role);
    } else {
      detail::check_state(s, batch, units_, layer, "h", role);
    }
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

 protected:
  /// Registers "kernel" [0, gates·units] and "recurrent_kernel" [units, gates·units] (zeros
  /// until draw_kernels), "bias" (zeros of `bias_shape`) and the dropout rates of `o` (a cell's
  /// options), with `rng` as "rng" when a rate is non-zero; `cell` names the cell in errors.
  template <class Options>
  void init_cell(const Options& o, int64_t gates, const Shape& bias_shape, Rng& rng, const char* cell) {
    in_ = o.in;
    units_ = o.units;
    gates_ = gates;
    rng_ = &rng;
    kernel_ = this->register_parameter("kernel", Tensor<T>::zeros({0, gates * o.units}));
    recurrent_kernel_ = this->register_parameter("recurrent_kernel", Tensor<T>::zeros({o.units, gates * o.units}));
    bias_ = this->register_parameter("bias", Tensor<T>::zeros(bias_shape));
    drop_.init(o.dropout, o.recurrent_dropout, rng, cell);
    if (drop_.active()) this->register_generator("rng", rng);
  }
  /// Draws kernel [in, gates·units] (Glorot uniform) and then recurrent_kernel (orthogonal)
  /// from the generator given to init_cell.
  void draw_kernels(int64_t in) {
    kernel_.value() = init::make<T>(init::glorot_uniform{}, {in, gates_ * units_}, *rng_);
    recurrent_kernel_.value() = init::make<T>(init::orthogonal{}, {units_, gates_ * units_}, *rng_);
    in_ = in;
  }

  int64_t in_ = 0, units_ = 0, gates_ = 0;
  Rng* rng_ = nullptr;  ///< draws the kernels
  Var<T> kernel_, recurrent_kernel_, bias_;
  CellDropout<T> drop_;
};

}  // namespace detail

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
/// Dropout, state and accessors: see detail::RecurrentCell.
template <Real T = float>
class SimpleRNNCell : public detail::RecurrentCell<T, SimpleRNNCell<T>, Var<T>> {
 public:
  using Options = SimpleRNNCellOptions;

  SimpleRNNCell(const SimpleRNNCellOptions& o, Rng& rng) : activation_(o.activation) {
    detail::check_cell_sizes(o.in, o.units, "SimpleRNNCell");
    this->init_cell(o, 1, {o.units}, rng, "SimpleRNNCell");
    this->draw_kernels(o.in);
  }

  /// One step: x_t [N, in], h [N, units] -> h' [N, units].
  template <Expression X>
  Var<T> step(const X& x, const Var<T>& h) const {
    const Var<T> xv = detail::to_var(x);
    detail::check_last_dim(xv.shape(), this->in_, "SimpleRNNCell", "in");
    if (xv.rank() == 2) this->check_state(h, xv.shape()[0], "SimpleRNNCell: step", "state");
    return step_projected(project(xv), h);
  }
  /// The input's share of the pre-activation, x · kernel: [..., in] -> [..., units]; a sequence
  /// layer computes it for all time steps in one matmul.
  Var<T> project(const Var<T>& x) const { return gradus::matmul(this->drop_.apply_input(x), this->kernel_); }
  /// One step from a projected input xp = project(x_t) [N, units].
  Var<T> step_projected(const Var<T>& xp, const Var<T>& h) const {
    return detail::bias_activation(
        Var<T>(xp + gradus::matmul(this->drop_.apply_recurrent(h), this->recurrent_kernel_)), this->bias_,
        activation_);
  }

 private:
  Activation activation_;
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
/// Dropout, state and accessors: see detail::RecurrentCell.
template <Real T = float>
class LSTMCell : public detail::RecurrentCell<T, LSTMCell<T>, LSTMState<T>> {
 public:
  using Options = LSTMCellOptions;
  using State = LSTMState<T>;

  LSTMCell(const LSTMCellOptions& o, Rng& rng) {
    GRADUS_CHECK(value_error, o.in >= 0 && o.units > 0, "LSTMCell: units must be positive and in positive (or 0, ",
                 "to build later), got in ", o.in, ", units ", o.units);
    this->init_cell(o, 4, {4 * o.units}, rng, "LSTMCell");
    if (o.unit_forget_bias) {
      Tensor<T>& b = this->bias_.value();
      std::fill(b.data() + o.units, b.data() + 2 * o.units, T(1));
    }
    if (o.in > 0) build(o.in);
  }

  /// Draws kernel [in, 4u] (Glorot uniform) and then recurrent_kernel (orthogonal), as the
  /// constructor does when `.in` is given; an LSTM layer without `.in` calls it at its first
  /// input (in = the input's last axis). Once only.
  void build(int64_t in) {
    GRADUS_CHECK(value_error, !built(), "LSTMCell: build: already built with in = ", this->in_);
    GRADUS_CHECK(value_error, in > 0, "LSTMCell: build: in must be positive, got ", in);
    this->draw_kernels(in);
    built_ = true;
  }
  /// False while a lazy cell (no `.in`) waits for build.
  bool built() const { return built_; }
  /// A lazy cell not yet built: `saved` [in, 4 units] for "kernel" gives in (see Module); a
  /// checkpoint restored into an LSTM layer that has seen no input builds it so.
  int64_t lazy_input_size(std::string_view name, const Shape& saved) const override {
    const bool fits =
        !built_ && name == "kernel" && saved.rank() == 2 && saved[0] > 0 && saved[1] == 4 * this->units_;
    return fits ? saved[0] : 0;
  }
  void build_unfilled(int64_t in) override { set_kernel_rows(in, true); }
  void unbuild() override { set_kernel_rows(0, false); }

  /// One step: x_t [N, in], {h, c} [N, units] each -> {h', c'}. Where the device's backend has
  /// the LSTM kernels and no recurrent dropout mask is drawn, the step runs as `lstm_sequence`
  /// over one step (x · kernel, then the bias, h · recurrent_kernel and the gates in one op, one
  /// tape node with a fused backward pass) instead of a matmul, a bias add, a sum, four gate slices
  /// and two gate expressions: the same values, up to the rounding of z's three terms' order.
  template <Expression X>
  State step(const X& x, const State& s) const {
    const Var<T> xv = detail::to_var(x);
    detail::check_last_dim(xv.shape(), this->in_, "LSTMCell", "in");
    // checked here, so that a wrong state is named as the cell's whichever path runs the step
    if (xv.rank() == 2) this->check_state(s, xv.shape()[0], "LSTMCell: step", "state");
    if (xv.rank() == 2 && !this->recurrent_mask_drawn() &&
        backend::implements<backend::kernel::LstmForward, T>(xv.value().device())) {
      const int64_t n = xv.shape()[0], u = this->units_;
      const Var<T> xk = detail::to_var(
          gradus::reshape(gradus::matmul(this->drop_.apply_input(xv), this->kernel_), {n, 1, 4 * u}));
      LstmSequenceOutputs<T> o = gradus::lstm_sequence(xk, this->recurrent_kernel_, this->bias_, s.h, s.c);
      return {std::move(o.h_final), std::move(o.c_final)};
    }
    return step_projected(project(xv), s);
  }
  /// The input's share of the gates, x · kernel + bias: [..., in] -> [..., 4 units].
  Var<T> project(const Var<T>& x) const {
    return Var<T>(gradus::matmul(this->drop_.apply_input(x), this->kernel_) + this->bias_);
  }
  /// One step from a projected input xp = project(x_t) [N, 4 units].
  State step_projected(const Var<T>& xp, const State& s) const {
    const int64_t u = this->units_;
    const Var<T> z(xp + gradus::matmul(this->drop_.apply_recurrent(s.h), this->recurrent_kernel_));
    const Var<T> i = detail::gate(z, 0, u), f = detail::gate(z, 1, u), g = detail::gate(z, 2, u),
                 o = detail::gate(z, 3, u);
    Var<T> c(gradus::sigmoid(f) * s.c + gradus::sigmoid(i) * gradus::tanh(g));
    Var<T> h(gradus::sigmoid(o) * gradus::tanh(c));
    return {std::move(h), std::move(c)};
  }
  /// Every step of x [N, T, in] from the state s: every h [N, T, units] and the final {h, c}, as
  /// one matmul x · kernel and one `lstm_sequence` op that adds the bias in its gates' pass (one
  /// tape node for the whole sequence, equal to step_projected(project(x_t)) run over t; on a
  /// backend with the LSTM kernels).
  std::pair<Var<T>, State> sequence(const Var<T>& x, const State& s) const {
    const Var<T> xk = gradus::matmul(this->drop_.apply_input(x), this->kernel_);
    LstmSequenceOutputs<T> o = gradus::lstm_sequence(xk, this->recurrent_kernel_, this->bias_, s.h, s.c);
    return {std::move(o.h), State{std::move(o.h_final), std::move(o.c_final)}};
  }

 private:
  void set_kernel_rows(int64_t in, bool built) {
    Var<T>& kernel = this->kernel_;
    kernel.value() = Tensor<T>::zeros({in, 4 * this->units_}).to(kernel.value().device());
    this->in_ = in;
    built_ = built;
  }

  bool built_ = false;
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
/// (row 0 b_in, row 1 b_rec). Dropout, state and accessors: see detail::RecurrentCell.
template <Real T = float>
class GRUCell : public detail::RecurrentCell<T, GRUCell<T>, Var<T>> {
 public:
  using Options = GRUCellOptions;

  GRUCell(const GRUCellOptions& o, Rng& rng) {
    detail::check_cell_sizes(o.in, o.units, "GRUCell");
    this->init_cell(o, 3, {2, 3 * o.units}, rng, "GRUCell");
    this->draw_kernels(o.in);
  }

  /// One step: x_t [N, in], h [N, units] -> h' [N, units].
  template <Expression X>
  Var<T> step(const X& x, const Var<T>& h) const {
    const Var<T> xv = detail::to_var(x);
    detail::check_last_dim(xv.shape(), this->in_, "GRUCell", "in");
    if (xv.rank() == 2) this->check_state(h, xv.shape()[0], "GRUCell: step", "state");
    return step_projected(project(xv), h);
  }
  /// The input's share of the gates, x · kernel + b_in: [..., in] -> [..., 3 units].
  Var<T> project(const Var<T>& x) const {
    return Var<T>(gradus::matmul(this->drop_.apply_input(x), this->kernel_) + detail::bias_row(this->bias_, 0));
  }
  /// One step from a projected input xp = project(x_t) [N, 3 units].
  Var<T> step_projected(const Var<T>& xp, const Var<T>& h) const {
    const int64_t u = this->units_;
    const Var<T> hr(gradus::matmul(this->drop_.apply_recurrent(h), this->recurrent_kernel_) +
                    detail::bias_row(this->bias_, 1));
    const Var<T> z(gradus::sigmoid(detail::gate(xp, 0, u) + detail::gate(hr, 0, u)));
    const Var<T> r_h = detail::gate(hr, 2, u);
    const Var<T> hh(
        gradus::tanh(detail::gate(xp, 2, u) + gradus::sigmoid(detail::gate(xp, 1, u) + detail::gate(hr, 1, u)) * r_h));
    return Var<T>(hh + z * (h - hh));
  }
};

}  // namespace gradus::nn
