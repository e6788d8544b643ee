// Built against an installed gradus by the install_consumer test.
#include <gradus/gradus.hpp>

#include <iostream>

int main() {
  namespace gd = gradus;
  gd::Tensor<float> a = gd::Tensor<float>::ones({2, 3});
  gd::Tensor<float> b = gd::eval(a * 2.f + 1.f);
  std::cout << "b(1, 2) = " << b(1, 2) << '\n';
  return b(1, 2) == 3.f ? 0 : 1;
}
