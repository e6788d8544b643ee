// gradus/train/data.hpp — the in-memory dataset that fit / evaluate / predict batch, and the
// batch order: the permutation of epoch e is a pure function of (seed, e), so a run resumed
// mid-epoch from a checkpoint sees exactly the batches the uninterrupted run would have seen.
#pragma once
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include "gradus/core/error.hpp"
#include "gradus/core/rng.hpp"
#include "gradus/core/tensor.hpp"
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

/// splitmix64's finaliser: a bijective mix of one 64-bit word.
inline uint64_t mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

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

/// The order in which epoch `epoch` visits `n` examples: a Fisher–Yates shuffle driven by an Rng
/// seeded from (seed, epoch) alone, so it never depends on what ran before.
inline std::vector<int64_t> epoch_permutation(int64_t n, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> order(size_t(std::max<int64_t>(n, 0)));
  std::iota(order.begin(), order.end(), int64_t(0));
  Rng rng(detail::mix64(seed) ^ detail::mix64(0xD1B54A32D192ED03ull * uint64_t(epoch + 1)));
  for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
  return order;
}

/// Number of batches of `batch_size` over `n` examples: ceil(n / batch_size), or floor with
/// `drop_remainder` (the last partial batch is then skipped).
inline int64_t batches_per_epoch(int64_t n, int64_t batch_size, bool drop_remainder) {
  return drop_remainder ? n / batch_size : (n + batch_size - 1) / batch_size;
}

}  // namespace gradus::train
