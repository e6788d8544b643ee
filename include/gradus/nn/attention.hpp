// gradus/nn/attention.hpp — attention: scaled dot-product attention (with memory, full and causal
// masks), the additive and multiplicative attention of seq2seq decoders (Bahdanau, Luong, as
// tf.contrib.seq2seq) and Keras' MultiHeadAttention, all on one masked-softmax code path.
//
// Masks are constant tensors of the scores' element type, non-zero = keep (attend), zero = masked:
//   [N, Tk]      a memory mask (padding of the memory / keys), the same for every query;
//   [N, Tq, Tk]  a mask per query and key;
// and `causal` (Keras' use_causal_mask) keeps key j for query i only when j <= i. A masked score
// is replaced by the lowest finite value before the softmax and the weights are then multiplied by
// the mask, so a masked weight is exactly 0 and each row sums to 1 over its unmasked keys. A row
// with no unmasked key gets all-zero weights (and so a zero context), not a uniform average of
// the masked memory; its gradient is zero too.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>

#include "gradus/init/initializers.hpp"
#include "gradus/nn/dense.hpp"
#include "gradus/nn/module.hpp"
#include "gradus/ops/elementwise.hpp"
#include "gradus/ops/linalg.hpp"
#include "gradus/ops/reduce.hpp"
#include "gradus/ops/shape.hpp"
#include "gradus/ops/softmax.hpp"

namespace gradus::nn {

/// Options of `scaled_dot_product_attention`.
struct AttentionOptions {
  double scale = 0;     ///< multiplies q·kᵀ; 0 means 1/sqrt(d), d the depth of q and k
  bool causal = false;  ///< query i attends to keys j <= i only (Keras' use_causal_mask)
};

/// The result of scaled dot-product and multi-head attention: the context (or output) and the
/// attention weights.
template <Real T>
struct AttentionResult {
  Var<T> context;  ///< [..., Tq, dv] (MultiHeadAttention: the projected output [N, Tq, D])
  Var<T> weights;  ///< [..., Tq, Tk]; each row sums to 1 over its unmasked keys
};

/// The result of BahdanauAttention and LuongAttention (tf.contrib.seq2seq's names).
template <Real T>
struct AttentionOutput {
  Var<T> context;     ///< [N, Dm] for a query [N, Dq]; [N, Tq, Dm] for a query [N, Tq, Dq]
  Var<T> alignments;  ///< [N, Tm] or [N, Tq, Tm]
};

namespace detail {

/// The 0/1 keep-mask for scores of shape `scores` [B0, ..., Tq, Tk] from `mask` (see the file
/// comment; undefined for none) and `causal`, shaped to broadcast against the scores; undefined
/// when nothing is masked.
template <Real T>
Tensor<T> attention_keep(const Shape& scores, const Tensor<T>& mask, bool causal, const char* op) {
  const int r = scores.rank();
  const int64_t tq = scores[r - 2], tk = scores[r - 1];
  Tensor<T> keep;
  if (mask.defined()) {
    const Shape& m = mask.shape();
    Shape to;  // the mask's shape with 1 for each axis it broadcasts over
    if (m.rank() == 2 && m[0] == scores[0] && m[1] == tk) {
      to.push_back(scores[0]);
      for (int i = 1; i < r - 1; ++i) to.push_back(1);
      to.push_back(tk);
    } else if (m.rank() == 3 && m[0] == scores[0] && m[1] == tq && m[2] == tk) {
      to.push_back(scores[0]);
      for (int i = 1; i < r - 2; ++i) to.push_back(1);
      to.push_back(tq);
      to.push_back(tk);
    } else {
      GRADUS_CHECK(shape_error, m == scores, op, ": expected a mask [N, Tk] = [", scores[0], ",", tk,
                   "] or [N, Tq, Tk] = [", scores[0], ",", tq, ",", tk, "] (or the scores' shape ", scores, "), got ",
                   m);
      to = scores;
    }
    keep = eval(gradus::reshape(mask, to) != T(0));
  }
  if (causal) {
    const Tensor<T> rows = gradus::reshape(Tensor<T>::arange(tq), {tq, 1});
    const Tensor<T> cols = gradus::reshape(Tensor<T>::arange(tk), {1, tk});
    keep = keep.defined() ? eval(keep * (cols <= rows)) : eval(cols <= rows);
  }
  return keep;
}

/// softmax over the last axis of `scores` with the keep-mask applied (see the file comment).
template <Real T>
Var<T> masked_softmax(const Var<T>& scores, const Tensor<T>& keep) {
  if (!keep.defined()) return gradus::softmax(scores, -1);
  return gradus::softmax(where(keep, scores, std::numeric_limits<T>::lowest()), -1) * keep;
}

template <Real T>
AttentionResult<T> sdpa(const Var<T>& q, const Var<T>& k, const Var<T>& v, const Tensor<T>& mask,
                        const AttentionOptions& opt) {
  const char* op = "scaled_dot_product_attention";
  const Shape &qs = q.shape(), &ks = k.shape(), &vs = v.shape();
  const int r = qs.rank();
  GRADUS_CHECK(shape_error, r >= 3 && ks.rank() == r && vs.rank() == r, op,
               ": expected q [N,Tq,d], k [N,Tk,d], v [N,Tk,dv] (or with more batch axes, one rank), got q ", qs,
               ", k ", ks, ", v ", vs);
  bool same_batch = true;
  for (int i = 0; i < r - 2; ++i) same_batch = same_batch && qs[i] == ks[i] && qs[i] == vs[i];
  GRADUS_CHECK(shape_error, same_batch && qs[r - 1] == ks[r - 1] && ks[r - 2] == vs[r - 2], op,
               ": q [..., Tq, d], k [..., Tk, d] and v [..., Tk, dv] must agree in batch axes, d and Tk, got q ", qs,
               ", k ", ks, ", v ", vs);
  GRADUS_CHECK(value_error, opt.scale >= 0 && std::isfinite(opt.scale), op,
               ": scale must be finite and >= 0 (0: 1/sqrt(d)), got ", opt.scale);
  const double scale = opt.scale > 0 ? opt.scale : 1.0 / std::sqrt(double(qs[r - 1]));
  const Var<T> scores = gradus::matmul(q, k, {.transpose_b = true}) * T(scale);
  const Var<T> weights = masked_softmax(scores, attention_keep(scores.shape(), mask, opt.causal, op));
  return {gradus::matmul(weights, v), weights};
}

/// A query [N, Dq] as [N, 1, Dq]; [N, Tq, Dq] as it is.
template <Real T>
Var<T> query_as_sequence(const Var<T>& query, const char* op) {
  GRADUS_CHECK(shape_error, query.rank() == 2 || query.rank() == 3, op,
               ": expected a query [N, Dq] or [N, Tq, Dq], got ", query.shape());
  if (query.rank() == 3) return query;
  return gradus::reshape(query, {query.shape()[0], 1, query.shape()[1]});
}

/// Alignments = masked softmax of scores [N, Tq, Tm], context = alignments · memory; both back to
/// [N, ...] without the Tq axis when the query was one step.
template <Real T>
AttentionOutput<T> attend_memory(const Var<T>& scores, const Var<T>& memory, const Tensor<T>& mask, bool one_step,
                                 const char* op) {
  GRADUS_CHECK(shape_error, !mask.defined() || mask.rank() == 2, op, ": expected a memory mask [N, Tm] = [",
               memory.shape()[0], ",", memory.shape()[1], "], got ", mask.shape());
  const Var<T> alignments = masked_softmax(scores, attention_keep(scores.shape(), mask, false, op));
  const Var<T> context = gradus::matmul(alignments, memory);
  if (!one_step) return {context, alignments};
  return {gradus::reshape(context, {context.shape()[0], context.shape()[2]}),
          gradus::reshape(alignments, {alignments.shape()[0], alignments.shape()[2]})};
}

inline void check_memory(const Shape& memory, const Shape& keys, int64_t batch, int64_t memory_units, const char* op) {
  GRADUS_CHECK(shape_error, memory.rank() == 3 && memory[0] == batch && memory[2] == memory_units, op,
               ": expected memory [N, Tm, memory_units] = [", batch, ",Tm,", memory_units, "], got ", memory);
  GRADUS_CHECK(shape_error, keys.rank() == 3 && keys[0] == memory[0] && keys[1] == memory[1], op,
               ": keys ", keys, " do not belong to memory ", memory, " (expected keys(memory))");
}

}  // namespace detail

/// softmax(scale · q·kᵀ, masked) · v over the last two axes: q [N, Tq, d], k [N, Tk, d],
/// v [N, Tk, dv] (more leading batch axes allowed, e.g. [N, heads, T, d]) -> context [N, Tq, dv]
/// and weights [N, Tq, Tk]. `mask` (optional) is [N, Tk] or [N, Tq, Tk], non-zero = keep; see the
/// file comment for the masking rule and rows with nothing unmasked. Scale 0 means 1/sqrt(d).
///   auto [context, weights] = gd::nn::scaled_dot_product_attention(q, k, v, mask, {.causal = true});
template <Expression Q, Expression K, Expression V>
  requires Real<value_type_t<Q>>
AttentionResult<value_type_t<Q>> scaled_dot_product_attention(const Q& q, const K& k, const V& v,
                                                              const Tensor<value_type_t<Q>>& mask = {},
                                                              const AttentionOptions& opt = {}) {
  static_assert(gradus::detail::same_element_v<Q, K> && gradus::detail::same_element_v<Q, V>,
                "YOU_MIXED_ELEMENT_TYPES_IN_ONE_EXPRESSION: scaled_dot_product_attention");
  return detail::sdpa(to_var(q), to_var(k), to_var(v), mask, opt);
}

// ------------------------------------------------------------------------------ Bahdanau, Luong

namespace detail {

/// What BahdanauAttention and LuongAttention (Derived) share; they differ only in their scores.
/// keys = memory · W_m through Derived's `memory_layer_` (a Dense); attend checks the query and
/// the memory, then takes the masked softmax of Derived's `scores(q, keys)` (q [N, Tq, Dq],
/// keys [N, Tm, units] -> [N, Tq, Tm]) and the context over the memory.
template <Real T, class Derived>
class AttentionMechanism : public Module<T, Derived> {
 public:
  /// The projected memory, memory [N, Tm, Dm] -> keys [N, Tm, units].
  template <Expression M>
  Var<T> keys(const M& memory) {
    const Var<T> m = to_var(memory);
    GRADUS_CHECK(shape_error, m.rank() == 3 && m.shape()[2] == memory_units_, name_,
                 ": expected memory [N, Tm, memory_units] (memory_units = ", memory_units_, "), got ", m.shape());
    return self().memory_layer_.forward(m);
  }

  /// Context and alignments of `query` over `memory` (see the class comment).
  template <Expression Q, Expression M>
  AttentionOutput<T> forward(const Q& query, const M& memory, const Tensor<T>& mask = {}) {
    const Var<T> m = to_var(memory);
    return attend(query, keys(m), m, mask);
  }

  /// As `forward`, with keys = keys(memory) computed before.
  template <Expression Q>
  AttentionOutput<T> attend(const Q& query, const Var<T>& keys, const Var<T>& memory, const Tensor<T>& mask = {}) {
    const Var<T> given = to_var(query);
    const Var<T> q = query_as_sequence(given, name_);
    check_last_dim(given.shape(), query_units_, name_, query_what_);
    check_memory(memory.shape(), keys.shape(), q.shape()[0], memory_units_, name_);
    return attend_memory(self().scores(q, keys), memory, mask, given.rank() == 2, name_);
  }

 protected:
  /// `name` names the layer in errors; the query's last axis must be `query_units` (called
  /// `query_what` in errors) and the memory's `memory_units`.
  AttentionMechanism(const char* name, int64_t query_units, const char* query_what, int64_t memory_units)
      : name_(name), query_what_(query_what), query_units_(query_units), memory_units_(memory_units) {}

 private:
  Derived& self() { return static_cast<Derived&>(*this); }

  const char* name_;
  const char* query_what_;
  int64_t query_units_, memory_units_;
};

}  // namespace detail

/// Options of `BahdanauAttention`. An empty initializer means Glorot uniform (tf.get_variable's).
struct BahdanauAttentionOptions {
  int64_t units = 0;         ///< depth of the attention (num_units)
  int64_t query_units = 0;   ///< depth Dq of the query (the decoder state)
  int64_t memory_units = 0;  ///< depth Dm of the memory (the encoder outputs)
  init::Initializer kernel_initializer{};
};

/// Additive attention (tf.contrib.seq2seq.BahdanauAttention without `normalize`):
///   keys = memory · W_m [N, Tm, units],  score[n, i, j] = vᵀ tanh(q[n, i] · W_q + keys[n, j]),
///   alignments = softmax over j of the (masked) scores,  context = alignments · memory.
/// Parameters: query_layer.kernel [Dq, units], memory_layer.kernel [Dm, units], attention_v [units].
/// The query is one decoder step [N, Dq] (context [N, Dm], alignments [N, Tm]) or a sequence
/// [N, Tq, Dq] (context [N, Tq, Dm], alignments [N, Tq, Tm]); memory [N, Tm, Dm]; mask [N, Tm].
/// A decoder loop projects the memory once with `keys` and calls `attend` at every step:
///   gd::nn::BahdanauAttention<float> att({.units = 64, .query_units = 128, .memory_units = 256}, rng);
///   gd::Var<float> keys = att.keys(memory);
///   for (...) { auto [context, alignments] = att.attend(h, keys, memory, mask); ... }
template <Real T = float>
class BahdanauAttention : public detail::AttentionMechanism<T, BahdanauAttention<T>> {
 public:
  BahdanauAttention(const BahdanauAttentionOptions& o, Rng& rng)
      : detail::AttentionMechanism<T, BahdanauAttention<T>>("BahdanauAttention", o.query_units, "query_units",
                                                            o.memory_units),
        query_layer_(checked(o), rng),
        memory_layer_({.in = o.memory_units, .out = o.units, .use_bias = false,
                       .kernel_initializer = detail::or_default(o.kernel_initializer, init::glorot_uniform{})},
                      rng) {
    this->register_module("query_layer", query_layer_);
    this->register_module("memory_layer", memory_layer_);
    v_ = this->register_parameter("attention_v", init::glorot_uniform{}.template operator()<T>({o.units}, rng));
  }

 private:
  friend class detail::AttentionMechanism<T, BahdanauAttention<T>>;

  static DenseOptions checked(const BahdanauAttentionOptions& o) {
    GRADUS_CHECK(value_error, o.units > 0 && o.query_units > 0 && o.memory_units > 0,
                 "BahdanauAttention: units, query_units and memory_units must be positive, got ", o.units, ", ",
                 o.query_units, ", ", o.memory_units);
    return {.in = o.query_units, .out = o.units, .use_bias = false,
            .kernel_initializer = detail::or_default(o.kernel_initializer, init::glorot_uniform{})};
  }
  /// score[n, i, j] = vᵀ tanh(q[n, i] · W_q + keys[n, j]): q [N, Tq, Dq], keys [N, Tm, units].
  Var<T> scores(const Var<T>& q, const Var<T>& keys) {
    const int64_t n = q.shape()[0], tq = q.shape()[1], tm = keys.shape()[1], u = keys.shape()[2];
    const Var<T> pq = gradus::reshape(query_layer_.forward(q), {n, tq, 1, u});
    return gradus::sum(gradus::tanh(pq + gradus::reshape(keys, {n, 1, tm, u})) * v_, -1);
  }

  Dense<T> query_layer_, memory_layer_;
  Var<T> v_;
};

/// Options of `LuongAttention`. An empty initializer means Glorot uniform.
struct LuongAttentionOptions {
  int64_t units = 0;         ///< depth of the attention (num_units); the query's depth must equal it
  int64_t memory_units = 0;  ///< depth Dm of the memory
  int64_t query_units = 0;   ///< depth of the query: 0 or units (Luong's score has no query layer)
  bool scale = false;        ///< multiply the scores by a learned scalar g, initially 1 (TF's scale=True)
  init::Initializer kernel_initializer{};
};

/// Multiplicative attention (tf.contrib.seq2seq.LuongAttention):
///   keys = memory · W_m [N, Tm, units],  score[n, i, j] = q[n, i] · keys[n, j]  (times g with scale),
///   alignments = softmax over j of the (masked) scores,  context = alignments · memory.
/// Parameters: memory_layer.kernel [Dm, units] and, with scale, attention_g []. Query, memory,
/// mask, `keys` and `attend` as BahdanauAttention's.
///   gd::nn::LuongAttention<float> att({.units = 128, .memory_units = 256, .scale = true}, rng);
///   auto [context, alignments] = att(h, memory, mask);   // h [N, 128], memory [N, Tm, 256]
template <Real T = float>
class LuongAttention : public detail::AttentionMechanism<T, LuongAttention<T>> {
 public:
  LuongAttention(const LuongAttentionOptions& o, Rng& rng)
      : detail::AttentionMechanism<T, LuongAttention<T>>("LuongAttention", o.units, "query depth = units",
                                                         o.memory_units),
        memory_layer_(checked(o), rng),
        scale_(o.scale) {
    this->register_module("memory_layer", memory_layer_);
    if (o.scale) g_ = this->register_parameter("attention_g", Tensor<T>::scalar(T(1)));
  }

 private:
  friend class detail::AttentionMechanism<T, LuongAttention<T>>;

  static DenseOptions checked(const LuongAttentionOptions& o) {
    GRADUS_CHECK(value_error, o.units > 0 && o.memory_units > 0 && (o.query_units == 0 || o.query_units == o.units),
                 "LuongAttention: units and memory_units must be positive and query_units 0 or units, got units ",
                 o.units, ", memory_units ", o.memory_units, ", query_units ", o.query_units);
    return {.in = o.memory_units, .out = o.units, .use_bias = false,
            .kernel_initializer = detail::or_default(o.kernel_initializer, init::glorot_uniform{})};
  }
  /// score[n, i, j] = q[n, i] · keys[n, j] (times g with scale).
  Var<T> scores(const Var<T>& q, const Var<T>& keys) const {
    Var<T> s = gradus::matmul(q, keys, {.transpose_b = true});
    if (scale_) s = s * g_;
    return s;
  }

  Dense<T> memory_layer_;
  bool scale_;
  Var<T> g_;
};

// ------------------------------------------------------------------------ MultiHeadAttention

/// Options of `MultiHeadAttention` (Keras' names; input depths are given since layers here are
/// built eagerly). Empty initializers mean Glorot uniform kernels and zero biases (Keras).
struct MultiHeadAttentionOptions {
  int64_t num_heads = 0;
  int64_t key_dim = 0;        ///< depth of each head's query and key
  int64_t value_dim = 0;      ///< depth of each head's value; 0 means key_dim
  int64_t query_units = 0;    ///< depth Dq of the query input
  int64_t value_units = 0;    ///< depth of the value input; 0 means query_units
  int64_t key_units = 0;      ///< depth of the key input; 0 means value_units
  int64_t output_units = 0;   ///< depth D of the output; 0 means query_units (Keras' output_shape)
  bool use_bias = true;
  init::Initializer kernel_initializer{};
  init::Initializer bias_initializer{};
};

/// Multi-head attention (tf.keras.layers.MultiHeadAttention, without dropout): each input is
/// projected to heads (query_dense [Dq, H·key_dim], key_dense [Dk, H·key_dim], value_dense
/// [Dv, H·value_dim], with biases), every head runs scaled_dot_product_attention with scale
/// 1/sqrt(key_dim), and the heads' contexts, joined, go through output_dense [H·value_dim, D].
/// query [N, Tq, Dq], value [N, Tk, Dv], key [N, Tk, Dk] (`mha(q, v)`: key = value); mask [N, Tk] or
/// [N, Tq, Tk] (Keras' attention_mask), non-zero = attend; `causal` as Keras' use_causal_mask.
/// Returns the output [N, Tq, D] and the weights [N, H, Tq, Tk].
///   gd::nn::MultiHeadAttention<float> mha({.num_heads = 4, .key_dim = 16, .query_units = 64}, rng);
///   auto [out, weights] = mha(x, x, x, {}, /*causal=*/true);   // causal self-attention
///   auto [y, w] = mha(x, memory);                               // key = value = memory
template <Real T = float>
class MultiHeadAttention : public Module<T, MultiHeadAttention<T>> {
 public:
  MultiHeadAttention(const MultiHeadAttentionOptions& o, Rng& rng)
      : heads_(checked(o).num_heads), key_dim_(o.key_dim), value_dim_(o.value_dim > 0 ? o.value_dim : o.key_dim),
        query_dense_(dense(o, o.query_units, heads_ * key_dim_), rng),
        key_dense_(dense(o, key_units(o), heads_ * key_dim_), rng),
        value_dense_(dense(o, value_units(o), heads_ * value_dim_), rng),
        output_dense_(dense(o, heads_ * value_dim_, o.output_units > 0 ? o.output_units : o.query_units), rng) {
    this->register_module("query_dense", query_dense_);
    this->register_module("key_dense", key_dense_);
    this->register_module("value_dense", value_dense_);
    this->register_module("output_dense", output_dense_);
  }

  /// Attention of `query` over `key` and `value` (see the class comment). With a mask or causal
  /// and key = value, pass the value twice: `mha(x, m, m, mask)`.
  template <Expression Q, Expression V, Expression K>
  AttentionResult<T> forward(const Q& query, const V& value, const K& key, const Tensor<T>& mask = {},
                             bool causal = false) {
    const char* op = "MultiHeadAttention";
    const Var<T> q = to_var(query), v = to_var(value), k = to_var(key);
    GRADUS_CHECK(shape_error, q.rank() == 3 && v.rank() == 3 && k.rank() == 3 && v.shape()[0] == q.shape()[0] &&
                                  k.shape()[0] == q.shape()[0] && k.shape()[1] == v.shape()[1],
                 op, ": expected query [N, Tq, Dq], value [N, Tk, Dv] and key [N, Tk, Dk], got query ", q.shape(),
                 ", value ", v.shape(), ", key ", k.shape());
    detail::check_last_dim(q.shape(), query_dense_.in(), op, "query_units");
    detail::check_last_dim(v.shape(), value_dense_.in(), op, "value_units");
    detail::check_last_dim(k.shape(), key_dense_.in(), op, "key_units");
    const int64_t n = q.shape()[0], tq = q.shape()[1];
    const AttentionResult<T> r =
        detail::sdpa(split_heads(query_dense_.forward(q), key_dim_), split_heads(key_dense_.forward(k), key_dim_),
                     split_heads(value_dense_.forward(v), value_dim_), mask,
                     {.scale = 1.0 / std::sqrt(double(key_dim_)), .causal = causal});
    // [N, H, Tq, dv] -> [N, Tq, H*dv]
    const Var<T> joined = gradus::reshape(gradus::transpose(r.context, {0, 2, 1, 3}), {n, tq, heads_ * value_dim_});
    return {output_dense_.forward(joined), r.weights};
  }
  /// Unmasked attention of `query` over `value` with key = value.
  template <Expression Q, Expression V>
  AttentionResult<T> forward(const Q& query, const V& value) {
    const Var<T> v = to_var(value);
    return forward(query, v, v);
  }

  int64_t num_heads() const { return heads_; }

 private:
  static const MultiHeadAttentionOptions& checked(const MultiHeadAttentionOptions& o) {
    GRADUS_CHECK(value_error, o.num_heads > 0 && o.key_dim > 0 && o.value_dim >= 0 && o.query_units > 0 &&
                                  o.value_units >= 0 && o.key_units >= 0 && o.output_units >= 0,
                 "MultiHeadAttention: num_heads, key_dim and query_units must be positive and value_dim, "
                 "value_units, key_units, output_units >= 0 (0: the default), got num_heads ", o.num_heads,
                 ", key_dim ", o.key_dim, ", value_dim ", o.value_dim, ", query_units ", o.query_units,
                 ", value_units ", o.value_units, ", key_units ", o.key_units, ", output_units ", o.output_units);
    return o;
  }
  static int64_t value_units(const MultiHeadAttentionOptions& o) {
    return o.value_units > 0 ? o.value_units : o.query_units;
  }
  static int64_t key_units(const MultiHeadAttentionOptions& o) {
    return o.key_units > 0 ? o.key_units : value_units(o);
  }
  static DenseOptions dense(const MultiHeadAttentionOptions& o, int64_t in, int64_t out) {
    return {.in = in, .out = out, .use_bias = o.use_bias,
            .kernel_initializer = detail::or_default(o.kernel_initializer, init::glorot_uniform{}),
            .bias_initializer = o.bias_initializer};
  }
  /// [N, T, H*depth] -> [N, H, T, depth]
  Var<T> split_heads(const Var<T>& x, int64_t depth) const {
    const int64_t n = x.shape()[0], t = x.shape()[1];
    return gradus::transpose(gradus::reshape(x, {n, t, heads_, depth}), {0, 2, 1, 3});
  }

  int64_t heads_, key_dim_, value_dim_;
  Dense<T> query_dense_, key_dense_, value_dense_, output_dense_;
};

}  // namespace gradus::nn
