// gradus/losses.hpp — the losses area: tf.losses (TF 1.x semantics) in namespace gd::losses,
// fused and differentiable, with gd::Reduction and weights; sequence_loss and perplexity for
// [N, T, V] logits.
//   auto loss = gd::losses::sparse_softmax_cross_entropy_with_logits(labels, logits);
#pragma once
#include "gradus/losses/losses.hpp"
#include "gradus/losses/sequence.hpp"
