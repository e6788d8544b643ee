// gradus/nn/bidirectional.hpp — Bidirectional: a sequence layer run forwards and backwards over the
// same input, the two outputs merged (tf.keras.layers.Bidirectional).
//   gd::nn::Bidirectional<gd::nn::LSTM<float>> bi({.in = 32, .units = 64, .return_sequences = true}, rng);
//   gd::Var<float> y = bi.forward(x, mask);   // x [N, T, 32], mask [N, T] -> y [N, T, 128]
#pragma once
#include <optional>
#include <utility>

#include "gradus/nn/recurrent.hpp"

namespace gradus::nn {

/// How Bidirectional merges its two outputs (Keras' merge_mode).
enum class MergeMode {
  concat,  ///< [forward, backward] along the last axis: 2·units features
  sum,     ///< forward + backward
  mul,     ///< forward · backward
  ave,     ///< (forward + backward) / 2
};

/// Options of `Bidirectional`.
struct BidirectionalOptions {
  MergeMode merge_mode = MergeMode::concat;
};

/// What one call of a Bidirectional layer takes besides x: each direction's initial state
/// (differentiable) and the [N, T] mask of valid steps, all optional (see RecurrentCall).
template <class State>
struct BidirectionalCall {
  using T = typename detail::state_value<State>::type;
  std::optional<State> initial_forward = std::nullopt;
  std::optional<State> initial_backward = std::nullopt;
  const Tensor<T>* mask = nullptr;
};

/// What Bidirectional::forward_with_state returns: the merged output and each direction's
/// final state (the backward one after each row's first step), all differentiable.
template <class State>
struct BidirectionalOutput {
  Var<typename detail::state_value<State>::type> output;
  State forward_state, backward_state;
};

/// tf.keras.layers.Bidirectional: two copies of a sequence layer (SimpleRNN, LSTM, GRU, a
/// stacked layer), children "forward" and "backward" (parameters "forward.cell.kernel", ...,
/// "backward.cell.kernel", ...); the backward copy has go_backwards. With return_sequences the
/// backward outputs are put back in input order before merging (with a mask, within each row's
/// length, so step t of both directions belongs to input step t and padded steps are zero);
/// without, the two last outputs are merged (the backward one is after each row's first step).
///   x [N, T, in] -> [N, T, 2 units] (concat, return_sequences), [N, 2 units] without; sum, mul and
///   ave give units features.
template <class Layer>
class Bidirectional : public Module<typename Layer::T, Bidirectional<Layer>> {
 public:
  using T = typename Layer::T;
  using State = typename Layer::State;
  using Call = BidirectionalCall<State>;
  using Output = BidirectionalOutput<State>;

  /// Builds both copies from the layer's options (the backward one with go_backwards), drawing
  /// the forward copy's weights first.
  Bidirectional(const typename Layer::Options& o, Rng& rng, const BidirectionalOptions& b = {})
      : forward_(with_direction(o, false), rng), backward_(with_direction(o, true), rng), merge_(b.merge_mode) {
    register_layers();
  }
  /// Wraps two given layers; `backward` must have go_backwards and `forward` not, and both the
  /// same return_sequences and input size (Keras' backward_layer argument).
  Bidirectional(Layer forward, Layer backward, const BidirectionalOptions& b = {})
      : forward_(std::move(forward)), backward_(std::move(backward)), merge_(b.merge_mode) {
    GRADUS_CHECK(value_error, !forward_.go_backwards() && backward_.go_backwards(),
                 "Bidirectional: expected a forward layer and a go_backwards layer, got go_backwards = ",
                 forward_.go_backwards(), " and ", backward_.go_backwards());
    GRADUS_CHECK(value_error, forward_.return_sequences() == backward_.return_sequences(),
                 "Bidirectional: both layers must agree on return_sequences, got ", forward_.return_sequences(),
                 " and ", backward_.return_sequences());
    GRADUS_CHECK(value_error, forward_.cell().in() == backward_.cell().in(),
                 "Bidirectional: both layers must take the same input size, got ", forward_.cell().in(), " and ",
                 backward_.cell().in());
    register_layers();
  }

  /// x [N, T, in] -> the merged output (see the class comment).
  template <Expression X>
  Var<T> forward(const X& x) {
    return forward_with_state(x).output;
  }
  /// As forward(x) with a [N, T] mask of valid steps (0 = padding).
  template <Expression X>
  Var<T> forward(const X& x, const Tensor<T>& mask) {
    return forward_with_state(x, Call{.mask = &mask}).output;
  }
  /// The merged output and both final states.
  ///   auto [y, s_fw, s_bw] = bi.forward_with_state(x, {.mask = &mask});
  template <Expression X>
  Output forward_with_state(const X& x_expr, const Call& call = {}) {
    const Var<T> x = detail::to_var(x_expr);
    auto fw = forward_.forward_with_state(x, {.initial = call.initial_forward, .mask = call.mask});
    auto bw = backward_.forward_with_state(x, {.initial = call.initial_backward, .mask = call.mask});
    Var<T> b = bw.output;
    if (backward_.return_sequences()) {  // back to input order
      const int64_t n = x.shape()[0], steps = x.shape()[1];
      b = detail::to_var(call.mask ? reverse_sequence(b, *call.mask)
                                   : reverse_sequence(b, Tensor<int64_t>::full({n}, steps)));
    }
    return {merge(fw.output, b), std::move(fw.state), std::move(bw.state)};
  }

  Layer& forward_layer() { return forward_; }
  Layer& backward_layer() { return backward_; }
  MergeMode merge_mode() const { return merge_; }

 private:
  template <class O>
  static O with_direction(O o, bool backwards) {
    o.go_backwards = backwards;
    return o;
  }
  void register_layers() {
    this->register_module("forward", forward_);
    this->register_module("backward", backward_);
  }
  Var<T> merge(const Var<T>& a, const Var<T>& b) const {
    switch (merge_) {
      case MergeMode::concat: return detail::to_var(gradus::concat({a, b}, a.shape().rank() - 1));
      case MergeMode::sum: return Var<T>(a + b);
      case MergeMode::mul: return Var<T>(a * b);
      case MergeMode::ave: return Var<T>((a + b) * T(0.5));
    }
    throw value_error("Bidirectional: unknown merge_mode");
  }

  Layer forward_, backward_;
  MergeMode merge_;
};

}  // namespace gradus::nn
