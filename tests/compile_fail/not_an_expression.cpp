// A function of tensors called on a plain number names the unmet concept.
// expect: Expression
// max-lines: 30
#include <gradus/gradus.hpp>
int main() {
  auto y = gradus::exp(42);
  (void)y;
}
