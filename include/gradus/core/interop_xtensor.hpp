// gradus/core/interop_xtensor.hpp — xtensor views of tensors, and tensors from xtensor.
// Needs xtensor 0.24 (libxtensor-dev): link gradus::xtensor.
#pragma once
#include <xtensor/xadapt.hpp>
#include <xtensor/xarray.hpp>
#include <xtensor/xexpression.hpp>
#include <xtensor/xnoalias.hpp>
#include <xtensor/xtensor.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "gradus/core/error.hpp"
#include "gradus/core/shape.hpp"
#include "gradus/core/tensor.hpp"

namespace gradus {

namespace detail {
template <class S>
Shape shape_from_xtensor(const S& dims) {
  GRADUS_CHECK(shape_error, dims.size() <= size_t(kMaxRank), "from_xtensor: rank ", dims.size(),
               " exceeds the largest tensor rank ", kMaxRank);
  Shape s;
  for (auto d : dims) s.push_back(int64_t(d));
  return s;
}

template <class T>
auto xtensor_alias(T* data, const Shape& shape, std::shared_ptr<Tensor<std::remove_const_t<T>>> keep) {
  std::vector<size_t> dims(shape.begin(), shape.end());
  return xt::adapt_smart_ptr<xt::layout_type::row_major>(data, dims, std::move(keep));
}

/// Moves a row-major xtensor container to the heap and hands its buffer to a tensor.
template <class C>
Tensor<typename C::value_type> adopt_xtensor(C&& c) {
  using T = typename C::value_type;
  const Shape shape = shape_from_xtensor(c.shape());
  auto held = std::make_unique<C>(std::move(c));
  Tensor<T> t = Tensor<T>::wrap(held->data(), shape, held.get(), [](void* p) { delete static_cast<C*>(p); });
  held.release();
  return t;
}
}  // namespace detail

/// A zero-copy xtensor array (an `xt::xarray_adaptor`, row-major) over `t`'s elements with
/// `t`'s shape. It aliases the tensor: writes through either are seen by the other. It holds
/// a handle to the storage, so it stays valid even after `t` (or a temporary) is gone.
///   auto x = gd::to_xtensor(t);  x(1, 2) = 5.f;   // now t(1, 2) == 5
template <Element T>
auto to_xtensor(Tensor<T>& t) {
  return detail::xtensor_alias(t.data(), t.shape(), std::make_shared<Tensor<T>>(t));
}
/// As above, for a temporary tensor (the adaptor keeps its storage alive).
template <Element T>
auto to_xtensor(Tensor<T>&& t) {
  return to_xtensor(t);
}
/// A read-only zero-copy xtensor adaptor over `t`, as above.
template <Element T>
auto to_xtensor(const Tensor<T>& t) {
  return detail::xtensor_alias(t.data(), t.shape(), std::make_shared<Tensor<T>>(t));
}

/// Copies any xtensor expression (any layout, strided views, lazy expressions) into a new
/// row-major tensor with its shape.
///   gd::Tensor<double> t = gd::from_xtensor(xt::transpose(a) + 1.0);
template <class E>
  requires Element<typename E::value_type>
Tensor<typename E::value_type> from_xtensor(const xt::xexpression<E>& e) {
  using T = typename E::value_type;
  const E& x = e.derived_cast();
  Tensor<T> t(detail::shape_from_xtensor(x.shape()));
  auto dst = xt::adapt<xt::layout_type::row_major>(t.data(), size_t(t.size()), xt::no_ownership(),
                                                   std::vector<size_t>(t.shape().begin(), t.shape().end()));
  xt::noalias(dst) = x;
  return t;
}

/// Takes over a temporary row-major `xt::xarray` without copying: the tensor keeps the moved
/// array's buffer alive. (An lvalue array goes to the copying overload; `std::move` it to adopt.)
///   gd::Tensor<float> t = gd::from_xtensor(xt::xarray<float>{{1, 2}, {3, 4}});
template <class EC, xt::layout_type L, class SC, class Tag>
  requires(L == xt::layout_type::row_major && Element<typename EC::value_type>)
Tensor<typename EC::value_type> from_xtensor(xt::xarray_container<EC, L, SC, Tag>&& a) {
  return detail::adopt_xtensor(std::move(a));
}
/// Takes over a temporary row-major `xt::xtensor<T, N>` without copying, as above.
template <class EC, size_t N, xt::layout_type L, class Tag>
  requires(L == xt::layout_type::row_major && Element<typename EC::value_type>)
Tensor<typename EC::value_type> from_xtensor(xt::xtensor_container<EC, N, L, Tag>&& a) {
  return detail::adopt_xtensor(std::move(a));
}

}  // namespace gradus
