// gradus/nn/tied_output.hpp — TiedOutput: an output projection to the vocabulary that reuses an
// Embedding's table (weight tying).
#pragma once
#include <cstdint>

#include "gradus/nn/dense.hpp"

namespace gradus::nn {

/// Options of `TiedOutput`.
struct TiedOutputOptions {
  bool use_bias = true;  ///< add a trainable bias [vocab], initially zeros
};

/// Logits over the vocabulary from hidden vectors with the embedding table E [vocab, dim] as the
/// output weights (weight tying, Press & Wolf 2017; Inan et al. 2017):
///   logits = h · Eᵀ + b: h [..., dim] -> [..., vocab].
/// Only the bias is this module's parameter: the table stays the Embedding's, so an optimizer
/// given both modules' parameters updates it once, with the sum of the gradients of its two
/// uses. The Embedding must outlive this module's forward calls (the table is shared, not
/// copied).
///   gd::nn::Embedding<float> emb({.vocab = 10000, .dim = 256}, rng);
///   gd::nn::TiedOutput<float> out(emb);
///   gd::Var<float> logits = out(lstm_h);   // [N, T, 256] -> [N, T, 10000]
template <Real T = float>
class TiedOutput : public Module<T, TiedOutput<T>> {
 public:
  explicit TiedOutput(const Embedding<T>& embedding, const TiedOutputOptions& o = {})
      : table_(embedding.embeddings()), use_bias_(o.use_bias) {
    if (o.use_bias) bias_ = this->register_parameter("bias", Tensor<T>::zeros({table_.shape()[0]}));
  }

  /// h [..., dim] -> logits [..., vocab].
  template <Expression H>
  Var<T> forward(const H& h) const {
    const Var<T> hv = to_var(h);
    detail::check_last_dim(hv.shape(), table_.shape()[1], "TiedOutput", "the embedding dim");
    const Var<T> logits = gradus::matmul(hv, table_, {.transpose_b = true});
    if (!use_bias_) return logits;
    return detail::bias_activation(logits, bias_, Activation{});  // the bias pass of Dense: one kernel each way
  }

  /// The shared table [vocab, dim] (the Embedding's parameter).
  Var<T> embeddings() const { return table_; }
  /// The bias [vocab] (undefined without use_bias).
  Var<T> bias() const { return bias_; }

 private:
  Var<T> table_;
  bool use_bias_;
  Var<T> bias_;
};

}  // namespace gradus::nn
