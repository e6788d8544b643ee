// Only float and double can be differentiated.
// expect: Real
// max-lines: 30
#include <gradus/gradus.hpp>
int main() {
  gradus::Var<int> v;
  (void)v;
}
