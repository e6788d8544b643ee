// gradus/profile/flops.hpp — how the profiler counts floating-point operations.
//
// One multiply, add, compare, exp, ... counts as one operation, as tfprof does (a multiply-add
// is two). With n(s) the element count of shape s, out the result, x/w the operands:
//
//   op                         forward                                   backward
//   matmul [..,m,k]x[..,k,n]   2·batch·m·k·n (counted by the op)         forward × operands receiving a gradient
//   conv2d                     2·n(out)·n(w)/out_channels (+ n(out) bias) forward × operands receiving a gradient
//   conv2d_bias_relu           conv2d + 2·n(out)                         conv2d backward + n(out)
//   elementwise expression     n(out) × operations in the expression     the same (an estimate: one fused pass)
//   sum, mean                  n(expression) × (1 + its operations)      the same
//   max, min, prod, argmax     n(x)                                      n(x)
//   logsumexp                  3·n(x) + n(out)                           3/5 of forward
//   softmax, log_softmax       5·n(x)                                    3·n(x)
//   sparse softmax x-entropy   5·n(logits)                               3·n(logits)
//   (a conv2d backward's operands: x and w cost the forward product each, a bias n(out))
//   bias_activation            2·n(out)                                  2·n(out) + n(out) for the bias
//   dropout                    n(out)                                    n(out)
//   lstm_sequence [N,T,4u]     T·(2·N·u·4u + 10·N·u)                     2 × forward
//   max/avg pooling            n(x) (exact for windows that do not overlap) n(x)
//   reshape, transpose, slice, pad, gather, concat, stack, cast, flips, resizes: 0 (data movement)
//   a custom op: 0 unless it calls OpScope::flops; user Scopes: 0 of their own
#pragma once
#include <algorithm>
#include <string_view>

#include "gradus/core/compiled.hpp"
#include "gradus/profile/event.hpp"

namespace gradus::profile::detail {

inline double numel(const Shape& s) { return double(s.numel()); }

/// The FLOPs of a forward event, by the table above; `expr_ops` is an elementwise expression's
/// operation count per element.
/// A convolution's product, 2·n(out)·n(w)/out_channels, from its forward event (operands x, w[, b]);
/// 0 for any other event. A backward event cannot give it: it lists only the operands that
/// receive a gradient, so the profiler keeps it with the node.
double conv_product_flops(const Event& e);

double forward_flops(const Event& e, int expr_ops);

/// The FLOPs of a backward event, given its node's forward count and, for a convolution, its
/// forward product (conv_product_flops of the forward event; both 0 when unknown), and the
/// operands that receive a gradient (Event::input_shapes of a backward event).
double backward_flops(const Event& e, double forward, double conv_product = 0);

}  // namespace gradus::profile::detail

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::profile::detail {
GRADUS_INLINE double conv_product_flops(const Event& e) {
  const std::string_view op = e.name;
  if (op != "conv2d" && op != "conv2d_bias_relu") return 0;
  if (e.input_shapes.size() < 2 || e.output_shape.rank() == 0 || e.output_shape.back() == 0) return 0;
  return 2 * numel(e.output_shape) * numel(e.input_shapes[1]) / double(e.output_shape.back());
}

GRADUS_INLINE double forward_flops(const Event& e, int expr_ops) {
  const std::string_view op = e.name;
  const double out = numel(e.output_shape);
  const double in0 = e.input_shapes.empty() ? 0.0 : numel(e.input_shapes[0]);
  if (op == "elementwise") return out * expr_ops;
  if (op == "conv2d" || op == "conv2d_bias_relu") {
    if (e.input_shapes.size() < 2 || e.output_shape.rank() == 0 || e.output_shape.back() == 0) return 0;
    double f = conv_product_flops(e);
    if (e.input_shapes.size() > 2) f += out;
    if (op == "conv2d_bias_relu") f += out;  // the ReLU
    return f;
  }
  if (op == "max" || op == "min" || op == "prod" || op == "argmax" || op == "argmin") return in0;
  if (op == "logsumexp") return 3 * in0 + out;
  if (op == "softmax" || op == "log_softmax" || op == "sparse_softmax_cross_entropy_with_logits") return 5 * in0;
  if (op == "bias_activation") return 2 * out;
  if (op == "dropout") return out;
  if (op == "max_pool2d" || op == "avg_pool2d") return in0;
  if (op == "lstm_sequence" && e.input_shapes.size() >= 2 && e.input_shapes[0].rank() == 3) {
    const double n = double(e.input_shapes[0][0]), t = double(e.input_shapes[0][1]), u = double(e.input_shapes[1][0]);
    return t * (2 * n * u * 4 * u + 10 * n * u);
  }
  return 0;
}

GRADUS_INLINE double backward_flops(const Event& e, double forward, double conv_product) {
  const std::string_view op = e.name;
  const double out = numel(e.output_shape);
  if (op == "matmul") return forward * double(e.input_shapes.size());
  if (op == "conv2d" || op == "conv2d_bias_relu") {
    // a product for each of x and w that receives a gradient; the bias (rank 1) a sum over out
    double f = op == "conv2d_bias_relu" ? out : 0;  // the ReLU mask
    for (const Shape& s : e.input_shapes) f += s.rank() == 1 ? out : conv_product;
    return f;
  }
  if (op == "logsumexp" || op == "softmax" || op == "log_softmax" || op == "sparse_softmax_cross_entropy_with_logits")
    return forward * 3 / 5;
  if (op == "bias_activation") return 3 * out;
  if (op == "lstm_sequence") return 2 * forward;
  return forward;
}
}  // namespace gradus::profile::detail
#endif  // GRADUS_DEFINE_COMPILED
