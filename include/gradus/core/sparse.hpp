// gradus/core/sparse.hpp — a sparse tensor in coordinate form (tf.sparse.SparseTensor): the
// positions of its non-default elements, their values, and the dense shape they live in. What
// parsing a batch of variable-length features gives (io::parse_example), and what
// gd::sparse_to_dense and gd::embedding_lookup_sparse (ops/sparse.hpp) take.
//
//   gd::SparseTensor<int64_t> ids{gd::Tensor<int64_t>::from({0, 0, 0, 1, 2, 0}, {3, 2}),
//                                 gd::Tensor<int64_t>::from({7, 3, 5}, {3}), {4, 2}};
//   ids.check("my_op");      // shapes and positions checked, value_error naming my_op
#pragma once
#include <algorithm>
#include <cstdint>
#include <ostream>

#include "gradus/core/error.hpp"
#include "gradus/core/shape.hpp"
#include "gradus/core/tensor.hpp"

namespace gradus {

namespace detail {

/// Throws value_error, naming `who`, unless every row of `indices` ([nnz, rank], host memory) is a
/// position inside `dense_shape`.
inline void check_sparse_indices(const Tensor<int64_t>& indices, const Shape& dense_shape, const char* who) {
  const int rank = dense_shape.rank();
  const int64_t* ix = indices.data();
  for (int64_t i = 0; i < indices.size() / std::max(rank, 1); ++i)
    for (int d = 0; d < rank; ++d) {
      const int64_t v = ix[i * rank + d];
      GRADUS_CHECK(value_error, v >= 0 && v < dense_shape[d], who, ": sparse index ", v, " of element ", i,
                   " is outside [0, ", dense_shape[d], ") along axis ", d, " of the dense shape ", dense_shape);
    }
}

}  // namespace detail

/// A sparse tensor (tf.sparse.SparseTensor): element `indices[i]` (a row of `rank` coordinates)
/// of a tensor of `dense_shape` is `values[i]`; every other element is a default (0 unless the
/// consumer takes another). Indices are in host memory; TensorFlow's canonical order is
/// row-major, which the producers here keep but the consumers do not require.
template <Element T>
struct SparseTensor {
  Tensor<int64_t> indices;  ///< [nnz, rank]
  Tensor<T> values;         ///< [nnz]
  Shape dense_shape;

  int64_t nnz() const { return values.size(); }
  int rank() const { return dense_shape.rank(); }

  /// Throws value_error, naming `who`, unless indices is [nnz, rank] in host memory, values is
  /// [nnz], and every index is inside dense_shape.
  void check(const char* who) const {
    GRADUS_CHECK(value_error, values.rank() == 1, who, ": the sparse values must be 1-D [nnz], got ", values.shape());
    GRADUS_CHECK(value_error, indices.rank() == 2 && indices.shape()[0] == values.size() && indices.shape()[1] == rank(),
                 who, ": the sparse indices must be [nnz, rank] = [", values.size(), ", ", rank(), "], got ",
                 indices.shape(), " (dense shape ", dense_shape, ")");
    GRADUS_CHECK(value_error, indices.device() == gradus::cpu, who, ": the sparse indices must be in host memory, not on ",
                 indices.device());
    detail::check_sparse_indices(indices, dense_shape, who);
  }

  friend std::ostream& operator<<(std::ostream& os, const SparseTensor& s) {
    return os << "SparseTensor(indices=" << s.indices << ", values=" << s.values << ", dense_shape=" << s.dense_shape
              << ")";
  }
};

}  // namespace gradus
