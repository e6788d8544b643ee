// gradus/train/data.hpp — the in-memory dataset that fit / evaluate / predict batch, and the
// batch order: the permutation of epoch e is a pure function of (seed, e), so a run resumed
// mid-epoch from a checkpoint sees exactly the batches the uninterrupted run would have seen.
// The permutation and the sharding rule are gradus::data's (data/order.hpp), those of
// Dataset::shuffle and Dataset::shard.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "gradus/core/compiled.hpp"
#include "gradus/core/error.hpp"
#include "gradus/core/tensor.hpp"
#include "gradus/data/order.hpp"
#include "gradus/ops/shape.hpp"

namespace gradus::train {

/// Examples along axis 0 of `x` (any shape [N, ...]) with their labels `y` ([N, ...]: class ids
/// as int64_t, or float/double targets). Both tensors are read, never modified.
///   gd::train::Data<double, int64_t> train{x, labels};
template <Element X, Element Y>
struct Data {
  Tensor<X> x;
  Tensor<Y> y;
  /// Number of examples (x's first dimension).
  int64_t size() const { return x.defined() && x.rank() > 0 ? x.dim(0) : 0; }
};

template <Element X, Element Y>
Data(Tensor<X>, Tensor<Y>) -> Data<X, Y>;

namespace detail {

/// Throws value_error unless `d` holds N > 0 examples with N labels; `who` names the caller.
template <Element X, Element Y>
void check_data(const Data<X, Y>& d, const char* who, const char* what) {
  GRADUS_CHECK(value_error, d.x.defined() && d.x.rank() >= 1 && d.x.dim(0) > 0, who, ": ", what,
               ".x must have shape [N, ...] with N > 0, got ",
               d.x.defined() ? d.x.shape() : Shape{});
  GRADUS_CHECK(value_error, d.y.defined() && d.y.rank() >= 1 && d.y.dim(0) == d.x.dim(0), who, ": ", what,
               ".y must have shape [N, ...] with N = ", d.x.dim(0), " (x's first dimension), got ",
               d.y.defined() ? d.y.shape() : Shape{});
}

/// Rows `index[0..n)` of `t` (shape [N, ...]) as a new tensor [n, ...] (gd::gather on axis 0).
template <Element T>
Tensor<T> gather_rows(const Tensor<T>& t, const int64_t* index, int64_t n) {
  Tensor<int64_t> rows({n});
  std::copy_n(index, n, rows.data());
  return gradus::gather(t, rows, 0);
}

/// Rows [first, first + n) of `t` as a new tensor [n, ...] (gd::slice on axis 0).
template <Element T>
Tensor<T> slice_rows(const Tensor<T>& t, int64_t first, int64_t n) {
  std::vector<int64_t> begin(size_t(t.rank()), 0), size(size_t(t.rank()), -1);
  begin[0] = first;
  size[0] = n;
  return gradus::slice(t, begin, size);
}

}  // namespace detail

/// The order in which epoch e visits n examples: epoch_permutation(n, seed, e), a Fisher–Yates
/// shuffle seeded from (seed, e) alone (data/order.hpp), so it never depends on what ran before.
using data::epoch_permutation;

/// Number of batches of `batch_size` over `n` examples: ceil(n / batch_size), or floor with
/// `drop_remainder` (the last partial batch is then skipped).
inline int64_t batches_per_epoch(int64_t n, int64_t batch_size, bool drop_remainder) {
  return drop_remainder ? n / batch_size : (n + batch_size - 1) / batch_size;
}

}  // namespace gradus::train

#if GRADUS_INSTANCES  // compiled once in libgradus with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::train {
GRADUS_INSTANCE Tensor<float> detail::gather_rows(const Tensor<float>&, const int64_t*, int64_t);
GRADUS_INSTANCE_DOUBLE Tensor<double> detail::gather_rows(const Tensor<double>&, const int64_t*, int64_t);
GRADUS_INSTANCE Tensor<int64_t> detail::gather_rows(const Tensor<int64_t>&, const int64_t*, int64_t);
GRADUS_INSTANCE Tensor<float> detail::slice_rows(const Tensor<float>&, int64_t, int64_t);
GRADUS_INSTANCE_DOUBLE Tensor<double> detail::slice_rows(const Tensor<double>&, int64_t, int64_t);
GRADUS_INSTANCE Tensor<int64_t> detail::slice_rows(const Tensor<int64_t>&, int64_t, int64_t);
}  // namespace gradus::train
#endif
