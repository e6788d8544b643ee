// gradus/core/interop_eigen.hpp — zero-copy Eigen views of tensors, and tensors from Eigen.
#pragma once
#include "gradus/core/eigen.hpp"

#include <cstdint>
#include <utility>

#include "gradus/core/error.hpp"
#include "gradus/core/shape.hpp"
#include "gradus/core/tensor.hpp"

namespace gradus {

/// A dynamic-size row-major Eigen matrix of `T`: the layout of a rank-2 tensor.
template <Element T>
using RowMajorMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

namespace detail {
template <class T>
std::pair<Eigen::Index, Eigen::Index> eigen_dims(const Tensor<T>& t) {
  GRADUS_CHECK(shape_error, t.rank() == 1 || t.rank() == 2,
               "eigen_map: expected a tensor of rank 1 or 2, got shape ", t.shape());
  return {Eigen::Index(t.dim(0)), Eigen::Index(t.rank() == 2 ? t.dim(1) : 1)};
}
}  // namespace detail

/// A zero-copy Eigen view of `t`'s elements: [r, c] for a rank-2 tensor, [n, 1] (a column)
/// for a rank-1 one; other ranks throw shape_error. Writes through the map change `t`; the map
/// must not outlive the tensor's storage.
///   gd::eigen_map(w) = gd::eigen_map(a) * gd::eigen_map(b);   // an Eigen GEMM into w
template <Element T>
Eigen::Map<RowMajorMatrix<T>> eigen_map(Tensor<T>& t) {
  const auto [r, c] = detail::eigen_dims(t);
  return {t.data(), r, c};
}
/// A read-only zero-copy view of `t`, as above.
template <Element T>
Eigen::Map<const RowMajorMatrix<T>> eigen_map(const Tensor<T>& t) {
  const auto [r, c] = detail::eigen_dims(t);
  return {t.data(), r, c};
}
/// Deleted: a map of a temporary tensor could outlive its storage.
template <Element T>
void eigen_map(Tensor<T>&&) = delete;

/// Copies any Eigen matrix or expression into a new row-major tensor of shape [rows, cols]
/// (a vector gives [n, 1]); column-major input is transposed into row-major order.
///   Eigen::MatrixXd m(2, 3);  gd::Tensor<double> t = gd::from_eigen(m);   // t(i, j) == m(i, j)
template <class D>
  requires Element<typename D::Scalar>
Tensor<typename D::Scalar> from_eigen(const Eigen::DenseBase<D>& m) {
  using T = typename D::Scalar;
  Tensor<T> t(Shape{int64_t(m.rows()), int64_t(m.cols())});
  Eigen::Map<RowMajorMatrix<T>>(t.data(), m.rows(), m.cols()) = m.derived();
  return t;
}

}  // namespace gradus
