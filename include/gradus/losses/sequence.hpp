// gradus/losses/sequence.hpp — sequence_loss (tf.contrib.seq2seq.sequence_loss) and perplexity:
// weighted token cross-entropy of [N, T, V] logits against [N, T] target ids.
//
// The token cross-entropies are those of sparse_softmax_cross_entropy_with_logits: on the CPU
// one fused op, logsumexp(row) - row[target] per token, finite for any logits and without a
// dense one-hot [N*T, V] (a vocabulary of 10,000 would make that huge). (On a GPU that loss
// still builds the one-hot rows where the logits are: gather runs on the CPU only.)
#pragma once
#include <cstdint>

#include "gradus/losses/losses.hpp"

namespace gradus::losses {

/// Options of `sequence_loss`, with TF's names and defaults. Setting both average_across_X and
/// sum_over_X for one axis is an error.
struct SequenceLossOptions {
  bool average_across_timesteps = true;
  bool average_across_batch = true;
  bool sum_over_timesteps = false;
  bool sum_over_batch = false;
};

namespace detail {
template <Real T>
Var<T> sequence_loss_var(const Tensor<int64_t>& targets, const Var<T>& logits, const Tensor<T>& weights,
                         const SequenceLossOptions& o);

template <class P>
auto sequence_loss_of(const Tensor<int64_t>& targets, const P& logits, const Tensor<value_type_t<P>>& weights,
                      const SequenceLossOptions& o) {
  using T = value_type_t<P>;
  const char* op = "sequence_loss";
  const Shape ls = logits.shape();
  GRADUS_CHECK(shape_error, ls.rank() == 3, op, ": expected logits [N, T, V], got ", ls);
  GRADUS_CHECK(shape_error, (targets.shape() == Shape{ls[0], ls[1]}), op, ": expected targets [N, T] = [", ls[0], ",",
               ls[1], "] for logits ", ls, ", got ", targets.shape());
  GRADUS_CHECK(shape_error, weights.defined() && weights.shape() == targets.shape(), op, ": expected weights [N, T] = [",
               ls[0], ",", ls[1], "], got ", weights.defined() ? weights.shape().str() : std::string("none"));
  GRADUS_CHECK(value_error, !(o.average_across_timesteps && o.sum_over_timesteps) &&
                                !(o.average_across_batch && o.sum_over_batch),
               op, ": average_across_timesteps and sum_over_timesteps (or average_across_batch and sum_over_batch) "
               "cannot both be set");
  // the per-token cross-entropy [N, T] (labels and the loss's own checks: ids in [0, V), not empty)
  const auto ce = sparse_softmax_cross_entropy_with_logits(targets, logits, {.reduction = Reduction::none});
  const Tensor<T> w = weights.to(backend::device_of(logits));
  // 1 / d where d != 0, else 0: TF's div_no_nan as a multiplier
  auto inverse = [](const Tensor<T>& d) { return Tensor<T>(where(d != T(0), T(1) / d, T(0))); };
  const bool avg_t = o.average_across_timesteps, avg_n = o.average_across_batch;
  const bool sum_t = o.sum_over_timesteps, sum_n = o.sum_over_batch;
  if ((avg_t && avg_n) || (sum_t && sum_n)) {
    const Tensor<T> d = avg_t ? Tensor<T>(sum(w)) : Tensor<T>(sum(w != T(0)));
    return to_var(sum(ce * (w * inverse(d))));
  }
  if (avg_t || avg_n || sum_t || sum_n) {
    const int64_t axis = (avg_n || sum_n) ? 0 : 1;
    const Tensor<T> d = (avg_t || avg_n) ? Tensor<T>(sum(w, axis, true)) : Tensor<T>(sum(w != T(0), axis, true));
    return to_var(sum(ce * (w * inverse(d)), axis));
  }
  return to_var(ce * w);
}
}  // namespace detail

/// Weighted cross-entropy of logits [N, T, V] against integer targets [N, T] in [0, V), with
/// constant weights [N, T] (a mask: 0 for padding), as tf.contrib.seq2seq.sequence_loss (TF 1.13+,
/// tfa.seq2seq.sequence_loss). With ce = the per-token cross-entropy and w the weights, the
/// divisions are TF's, each a div_no_nan (a zero denominator gives 0):
///   average_across_timesteps and average_across_batch   sum(ce·w) / sum(w)                        -> []
///   sum_over_timesteps and sum_over_batch               sum(ce·w) / count_nonzero(w)              -> []
///   average_across_batch only                           sum_n(ce·w) / sum_n(w)       per timestep -> [T]
///   average_across_timesteps only                       sum_t(ce·w) / sum_t(w)       per sequence -> [N]
///   sum_over_batch only                                 sum_n(ce·w) / count_nonzero_n(w)          -> [T]
///   sum_over_timesteps only                             sum_t(ce·w) / count_nonzero_t(w)          -> [N]
///   none of them                                        ce·w                                      -> [N, T]
/// (TF's names: "sum_over" divides by the number of non-zero weights, "average_across" by their
/// sum.) Unlike TF's (logits, targets, weights), gd::losses take the labels first. The result is
/// a Var, differentiable in the logits (a constant Var for Tensor logits).
///   auto loss = gd::losses::sequence_loss(targets, logits, mask);   // rank 0
///   auto per_step = gd::losses::sequence_loss(targets, logits, mask, {.average_across_timesteps = false});   // [T]
template <Expression P>
  requires Real<value_type_t<P>>
auto sequence_loss(const Tensor<int64_t>& targets, const P& logits, const Tensor<value_type_t<P>>& weights,
                   const SequenceLossOptions& o = {}) {
  if constexpr (is_var_v<P>)  // a training step's operands: compiled in libgradus (losses.hpp, TrainingOperands)
    return detail::sequence_loss_var(targets, logits, weights, o);
  else
    return detail::sequence_loss_of(targets, logits, weights, o);
}

/// exp of the weighted mean token cross-entropy, exp(sum(ce·w) / sum(w)) (1 when every weight
/// is 0): the perplexity of a language model, differentiable in the logits; targets [N, T],
/// logits [N, T, V], weights [N, T]. For a perplexity accumulated over many batches use the
/// streaming gd::metrics::Perplexity.
///   double ppl = gd::losses::perplexity(targets, logits, mask).item();
template <Expression P>
  requires Real<value_type_t<P>>
auto perplexity(const Tensor<int64_t>& targets, const P& logits, const Tensor<value_type_t<P>>& weights) {
  return to_var(exp(sequence_loss(targets, logits, weights)));
}

namespace detail {
template <Real T>
Var<T> sequence_loss_var(const Tensor<int64_t>& targets, const Var<T>& logits, const Tensor<T>& weights,
                         const SequenceLossOptions& o) {
  return sequence_loss_of(targets, logits, weights, o);
}
}  // namespace detail

}  // namespace gradus::losses

#if GRADUS_INSTANCES  // compiled once in libgradus with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::losses {
GRADUS_INSTANCE Var<float> detail::sequence_loss_var(const Tensor<int64_t>&, const Var<float>&, const Tensor<float>&,
                                                     const SequenceLossOptions&);
GRADUS_INSTANCE_DOUBLE Var<double> detail::sequence_loss_var(const Tensor<int64_t>&, const Var<double>&,
                                                             const Tensor<double>&, const SequenceLossOptions&);
}  // namespace gradus::losses
#endif
