// Adding a float tensor to a double tensor must be refused with a readable sentence.
// expect: YOU_MIXED_ELEMENT_TYPES_IN_ONE_EXPRESSION
// max-lines: 30
#include <gradus/gradus.hpp>
int main() {
  gradus::Tensor<float> a = gradus::Tensor<float>::ones({2});
  gradus::Tensor<double> b = gradus::Tensor<double>::ones({2});
  auto c = a + b;
  (void)c;
}
