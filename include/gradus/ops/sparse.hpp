// gradus/ops/sparse.hpp — ops over sparse features: a sparse tensor made dense, sums by segment,
// and embedding lookups that combine a variable-length list of ids per example (TensorFlow's
// tf.sparse.to_dense, tf.math.unsorted_segment_sum and tf.nn.embedding_lookup_sparse).
//
// All three are differentiable in their dense operands (values, data, the embedding table and the
// weights) and run where those operands are: the positions and segment ids are checked in host
// memory, copied to the device once, and the work is the backend's gather and sorted
// scatter-add (backend/cpu/copy.hpp; on a GPU in a fixed order, without atomics).
//
//   gd::SparseTensor<int64_t> ids = batch.sparse_int64s("tags");        // [B, longest], from io::parse_example
//   gd::Var<float> e = gd::embedding_lookup_sparse(table, ids, gd::Combiner::sqrtn);   // [B, D]
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string_view>

#include "gradus/autodiff/materialize.hpp"
#include "gradus/backend/backend.hpp"
#include "gradus/core/compiled.hpp"
#include "gradus/core/sparse.hpp"
#include "gradus/ops/elementwise.hpp"
#include "gradus/ops/shape.hpp"

namespace gradus {

/// How embedding_lookup_sparse combines the embeddings of one example's ids (TensorFlow's
/// `combiner`): their weighted sum, the sum divided by the weights' sum, or by the square root
/// of the weights' squares' sum (1 for every weight without weights).
enum class Combiner { sum, mean, sqrtn };

std::string_view to_string(Combiner c);

namespace detail {

/// The flat row-major positions [nnz] in `dense_shape` of the rows of `indices` ([nnz, rank],
/// host, already checked to lie inside it: check_sparse_indices), checked to be distinct;
/// value_error naming `who` otherwise.
Tensor<int64_t> sparse_positions(const Tensor<int64_t>& indices, const Shape& dense_shape, const char* who);

/// A host tensor where `device` is (itself on the CPU).
template <class T>
Tensor<T> placed_on(const Tensor<T>& t, Device device) {
  return device == gradus::cpu ? t : t.to(device);
}

}  // namespace detail

/// The dense tensor of `dense_shape` holding `values` (a Tensor or a Var, [nnz]) at the rows of
/// `indices` ([nnz, rank], host memory) and `default_value` elsewhere (tf.compat.v1.sparse_to_dense
/// with validate_indices: an index outside the shape or repeated is a value_error). The gradient
/// goes to the values (the default gets none).
///   auto d = gd::sparse_to_dense(idx, {3, 4}, values);    // values [nnz] -> [3, 4]
template <Expression E>
auto sparse_to_dense(const Tensor<int64_t>& indices, const Shape& dense_shape, const E& values_expr,
                     value_type_t<E> default_value = 0) {
  static_assert(Real<value_type_t<E>>, "THE_ELEMENT_TYPE_MUST_BE_FLOAT_OR_DOUBLE: sparse_to_dense (an int64 "
                                       "SparseTensor converts with sparse_to_dense(sp))");
  using T = value_type_t<E>;
  gradus::detail::OpScope prof;
  auto values = materialize(values_expr);
  const Tensor<T>& vv = detail::value_of(values);
  GRADUS_CHECK(value_error, vv.rank() == 1 && indices.rank() == 2 && indices.shape()[0] == vv.size(),
               "sparse_to_dense: the values must be [nnz] and the indices [nnz, rank], got values ", vv.shape(),
               " and indices ", indices.shape());
  GRADUS_CHECK(value_error, indices.shape()[1] == dense_shape.rank(), "sparse_to_dense: indices of ",
               indices.shape()[1], " coordinates for the dense shape ", dense_shape);
  const Tensor<int64_t> host = indices.device() == gradus::cpu ? indices : indices.to(gradus::cpu);
  detail::check_sparse_indices(host, dense_shape, "sparse_to_dense");
  const Tensor<int64_t> pos = detail::sparse_positions(host, dense_shape, "sparse_to_dense");
  const Device dev = vv.device();
  const int64_t total = dense_shape.numel(), nnz = vv.size();
  const Tensor<int64_t> placed = detail::placed_on(pos, dev);
  Tensor<T> out = Tensor<T>::empty(dense_shape, dev);
  backend::fill(out.device_data(), total, T(0), dev);
  backend::scatter_add_rows(vv.device_data(), 1, total, 1, placed.device_data(), nnz, out.device_data(), true, dev);
  if (default_value != T(0) && total > nnz) {  // the default into the other positions
    Tensor<int64_t> hit = Tensor<int64_t>::zeros(Shape{total});
    for (int64_t i = 0; i < nnz; ++i) hit.data()[pos.data()[i]] = 1;
    const int64_t k = total - nnz;  // the positions are distinct
    Tensor<int64_t> rest(Shape{k});
    for (int64_t p = 0, j = 0; p < total; ++p)
      if (!hit.data()[p]) rest.data()[j++] = p;
    const Tensor<int64_t> rest_at = detail::placed_on(rest, dev);
    const Tensor<T> fill = Tensor<T>::full(Shape{k}, default_value).to(dev);
    backend::scatter_add_rows(fill.device_data(), 1, total, 1, rest_at.device_data(), k, out.device_data(), true, dev);
  }
  return make_result("sparse_to_dense", std::move(out), [placed, nnz, total](const Tensor<T>& g, const Tensor<T>&, const auto& v) {
    if (!detail::needs_grad(v)) return;
    Tensor<T> gv = Tensor<T>::empty(Shape{nnz}, g.device());
    backend::gather_rows(g.device_data(), 1, total, 1, placed.device_data(), nnz, gv.device_data(), g.device());
    detail::add_grad(v, gv);
  }, values);
}

/// The dense form of `sp` (tf.sparse.to_dense): `default_value` where it has no value. Any element
/// type; the result is where sp's values are.
template <Element T>
Tensor<T> sparse_to_dense(const SparseTensor<T>& sp, T default_value = T(0)) {
  if constexpr (Real<T>) {
    return sparse_to_dense(sp.indices, sp.dense_shape, sp.values, default_value);  // which checks sp
  } else {
    sp.check("sparse_to_dense");
    const Tensor<T> vals = sp.values.device() == gradus::cpu ? sp.values : sp.values.to(gradus::cpu);
    const Tensor<int64_t> pos = detail::sparse_positions(sp.indices, sp.dense_shape, "sparse_to_dense");
    Tensor<T> out = Tensor<T>::full(sp.dense_shape, default_value);
    for (int64_t i = 0; i < pos.size(); ++i) out.data()[pos.data()[i]] = vals.data()[i];
    return sp.values.device() == gradus::cpu ? out : out.to(sp.values.device());
  }
}

/// Sums of the rows of `data` by segment (tf.math.unsorted_segment_sum): segment_ids (host or the
/// data's device) has the shape of data's first axes, [d0, ..., dk-1], and the result is
/// [num_segments, data.shape[k:]...], row s the sum of the rows whose id is s (zero for a
/// segment no row names). An id outside [0, num_segments) is a value_error (TensorFlow drops
/// negative ids). The gradient gathers the segments' adjoints back to the rows.
///   gd::unsorted_segment_sum(x, gd::Tensor<int64_t>::from({0, 2, 0}, {3}), 3);   // [3, D] -> [3, D]
template <Expression E>
auto unsorted_segment_sum(const E& data_expr, const Tensor<int64_t>& segment_ids, int64_t num_segments) {
  static_assert(Real<value_type_t<E>>, "THE_ELEMENT_TYPE_MUST_BE_FLOAT_OR_DOUBLE: unsorted_segment_sum");
  using T = value_type_t<E>;
  gradus::detail::OpScope prof;
  auto data = materialize(data_expr);
  const Tensor<T>& dv = detail::value_of(data);
  const Shape& ds = dv.shape();
  const Shape& is = segment_ids.shape();
  bool prefix = is.rank() <= ds.rank();
  for (int d = 0; prefix && d < is.rank(); ++d) prefix = is[d] == ds[d];
  GRADUS_CHECK(shape_error, prefix, "unsorted_segment_sum: segment_ids of shape ", is,
               " must be a prefix of the data's shape ", ds);
  GRADUS_CHECK(value_error, num_segments >= 0, "unsorted_segment_sum: num_segments must be >= 0, got ", num_segments);
  const int64_t k = segment_ids.size(), inner = detail::dims_product(ds, is.rank(), ds.rank());
  Shape os{num_segments};
  for (int d = is.rank(); d < ds.rank(); ++d) os.push_back(ds[d]);
  backend::check_indices(segment_ids, os, 0, "unsorted_segment_sum");
  const Device dev = dv.device();
  const Tensor<int64_t> placed = segment_ids.device() == dev ? segment_ids.clone() : segment_ids.to(dev);
  Tensor<T> out = Tensor<T>::empty(os, dev);
  backend::scatter_add_rows(dv.device_data(), 1, num_segments, inner, placed.device_data(), k, out.device_data(), false,
                            dev);
  return make_result("unsorted_segment_sum", std::move(out),
                     [placed, num_segments, inner, k](const Tensor<T>& g, const Tensor<T>&, const auto& x) {
                       if (!detail::needs_grad(x)) return;
                       Tensor<T> gx = Tensor<T>::empty(detail::value_of(x).shape(), g.device());
                       backend::gather_rows(g.device_data(), 1, num_segments, inner, placed.device_data(), k,
                                            gx.device_data(), g.device());
                       detail::add_grad(x, gx);
                     },
                     data);
}

namespace detail {

/// The rows (first coordinates) of a 2-D SparseTensor of ids, checked.
template <class T>
Tensor<int64_t> sparse_rows(const SparseTensor<T>& sp, const char* who) {
  sp.check(who);
  GRADUS_CHECK(value_error, sp.rank() == 2, who, ": the sparse ids must be 2-D [batch, ids], got dense shape ",
               sp.dense_shape);
  Tensor<int64_t> rows(Shape{sp.nnz()});
  for (int64_t i = 0; i < sp.nnz(); ++i) rows.data()[i] = sp.indices.data()[2 * i];
  return rows;
}

/// The shape [nnz, 1, ..., 1] that broadcasts a per-id coefficient over embeddings of `rank`.
inline Shape coefficient_shape(int64_t nnz, int rank) {
  Shape s{nnz};
  for (int d = 1; d < rank; ++d) s.push_back(1);
  return s;
}

}  // namespace detail

/// For each row of `sp_ids` (a 2-D SparseTensor of ids into `params` [V, D...], as
/// io::parse_example gives a VarLen feature), the embeddings of its ids combined by `combiner`
/// -> [batch, D...] (tf.nn.embedding_lookup_sparse without weights; a row without ids gives
/// zeros). Differentiable in `params`; an id outside [0, V) is a value_error.
///   auto e = gd::embedding_lookup_sparse(table, ids);                    // mean of each row's embeddings
template <Expression P>
auto embedding_lookup_sparse(const P& params_expr, const SparseTensor<int64_t>& sp_ids,
                             Combiner combiner = Combiner::mean) {
  static_assert(Real<value_type_t<P>>, "THE_ELEMENT_TYPE_MUST_BE_FLOAT_OR_DOUBLE: embedding_lookup_sparse");
  using T = value_type_t<P>;
  gradus::detail::OpScope prof;
  const Tensor<int64_t> rows = detail::sparse_rows(sp_ids, "embedding_lookup_sparse");
  auto params = materialize(params_expr);
  const Tensor<T>& pv = detail::value_of(params);
  GRADUS_CHECK(shape_error, pv.rank() >= 1, "embedding_lookup_sparse: params must be [V, D...], got a scalar");
  const int64_t nnz = sp_ids.nnz(), batch = sp_ids.dense_shape[0];
  Tensor<int64_t> count = Tensor<int64_t>::zeros(Shape{batch});
  for (int64_t i = 0; i < nnz; ++i) ++count.data()[rows.data()[i]];
  Tensor<T> coef(detail::coefficient_shape(nnz, pv.rank()));
  for (int64_t i = 0; i < nnz; ++i) {
    const auto n = T(count.data()[rows.data()[i]]);
    coef.data()[i] = combiner == Combiner::sum ? T(1) : combiner == Combiner::mean ? T(1) / n : T(1) / std::sqrt(n);
  }
  const Tensor<T> c = detail::placed_on(coef, pv.device());
  return unsorted_segment_sum(gather(params, sp_ids.values, 0) * c, rows, batch);
}

/// As above, each id's embedding weighted by the matching value of `weights` ([nnz], a Tensor or a
/// Var: the values of TensorFlow's sp_weights, which shares sp_ids' indices): sum Σ w·e, mean
/// Σ w·e / Σ w, sqrtn Σ w·e / √(Σ w²) per row. Differentiable in `params` and in the weights.
///   auto e = gd::embedding_lookup_sparse(table, ids, weights.values, gd::Combiner::sum);
template <Expression P, Expression W>
auto embedding_lookup_sparse(const P& params_expr, const SparseTensor<int64_t>& sp_ids, const W& weights_expr,
                             Combiner combiner = Combiner::mean) {
  static_assert(Real<value_type_t<P>>, "THE_ELEMENT_TYPE_MUST_BE_FLOAT_OR_DOUBLE: embedding_lookup_sparse");
  static_assert(detail::same_element_v<P, W>, "YOU_MIXED_ELEMENT_TYPES_IN_ONE_EXPRESSION: embedding_lookup_sparse — "
                                              "cast the weights first (gd::cast<T>(w))");
  gradus::detail::OpScope prof;
  const Tensor<int64_t> rows = detail::sparse_rows(sp_ids, "embedding_lookup_sparse");
  auto params = materialize(params_expr);
  auto weights = materialize(weights_expr);
  const int64_t nnz = sp_ids.nnz(), batch = sp_ids.dense_shape[0];
  const auto& pv = detail::value_of(params);
  GRADUS_CHECK(shape_error, detail::value_of(weights).shape() == Shape{nnz}, "embedding_lookup_sparse: the weights must be [",
               nnz, "] (one per id), got ", detail::value_of(weights).shape());
  GRADUS_CHECK(shape_error, pv.rank() >= 1, "embedding_lookup_sparse: params must be [V, D...], got a scalar");
  const Shape cs = detail::coefficient_shape(nnz, pv.rank());
  auto e = gather(params, sp_ids.values, 0);
  auto w = reshape(weights, cs);
  if (combiner == Combiner::sum) return unsorted_segment_sum(e * w, rows, batch);
  // each id's weight over its row's Σ w (mean) or √(Σ w²) (sqrtn), gathered back to the ids
  auto norm = combiner == Combiner::mean ? gather(unsorted_segment_sum(weights, rows, batch), rows, 0)
                                         : gather(sqrt(unsorted_segment_sum(square(weights), rows, batch)), rows, 0);
  return unsorted_segment_sum(e * (w / reshape(norm, cs)), rows, batch);
}

/// embedding_lookup_sparse with a SparseTensor of weights (tf.nn.embedding_lookup_sparse's
/// sp_weights), which must have sp_ids' indices and dense shape; its values are copied to the
/// table's device when they are elsewhere (parsed features are in host memory).
template <Expression P, Element T>
auto embedding_lookup_sparse(const P& params, const SparseTensor<int64_t>& sp_ids, const SparseTensor<T>& sp_weights,
                             Combiner combiner = Combiner::mean) {
  sp_weights.check("embedding_lookup_sparse");
  bool same = sp_weights.dense_shape == sp_ids.dense_shape && sp_weights.indices.shape() == sp_ids.indices.shape();
  for (int64_t i = 0; same && i < sp_ids.indices.size(); ++i) same = sp_ids.indices.data()[i] == sp_weights.indices.data()[i];
  GRADUS_CHECK(value_error, same, "embedding_lookup_sparse: sp_weights must have the indices and dense shape of sp_ids");
  auto table = materialize(params);
  const Device dev = detail::value_of(table).device();  // parsed weights are on the host: moved to the table
  return embedding_lookup_sparse(table, sp_ids, sp_weights.values.device() == dev ? sp_weights.values : sp_weights.values.to(dev),
                                 combiner);
}

}  // namespace gradus

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus {
GRADUS_INLINE std::string_view to_string(Combiner c) {
  switch (c) {
    case Combiner::sum: return "sum";
    case Combiner::mean: return "mean";
    case Combiner::sqrtn: return "sqrtn";
  }
  return "?";
}
}  // namespace gradus
namespace gradus::detail {
GRADUS_INLINE Tensor<int64_t> sparse_positions(const Tensor<int64_t>& indices, const Shape& dense_shape,
                                               const char* who) {
  const int64_t nnz = indices.shape()[0];
  const int rank = dense_shape.rank();
  Tensor<int64_t> pos(Shape{nnz});
  for (int64_t i = 0; i < nnz; ++i) {
    int64_t p = 0;
    for (int d = 0; d < rank; ++d) p = p * dense_shape[d] + indices.data()[i * rank + d];
    pos.data()[i] = p;
  }
  Tensor<int64_t> sorted = pos.clone();
  std::sort(sorted.data(), sorted.data() + nnz);
  const int64_t* dup = std::adjacent_find(sorted.data(), sorted.data() + nnz);
  GRADUS_CHECK(value_error, dup == sorted.data() + nnz, who, ": position ", dup == sorted.data() + nnz ? 0 : *dup,
               " (row-major) of the dense shape ", dense_shape, " is given twice");
  return pos;
}
}  // namespace gradus::detail
#endif  // GRADUS_DEFINE_COMPILED
