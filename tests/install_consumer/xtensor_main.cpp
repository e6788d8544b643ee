// Built against an installed gradus by the install_consumer test, with the xtensor component.
#include <gradus/core/interop_xtensor.hpp>

#include <xtensor/xarray.hpp>

#include <iostream>

int main() {
  namespace gd = gradus;
  gd::Tensor<float> t = gd::Tensor<float>::zeros({2, 3});
  auto x = gd::to_xtensor(t);
  x(1, 2) = 5.f;  // writes through to t
  xt::xarray<double> a = {{1.0, 2.0}, {3.0, 4.0}};
  const gd::Tensor<double> b = gd::from_xtensor(a);
  std::cout << "t(1, 2) = " << t(1, 2) << ", b(1, 0) = " << b(1, 0) << '\n';
  return t(1, 2) == 5.f && b(1, 0) == 3.0 ? 0 : 1;
}
