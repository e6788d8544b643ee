// A Sequential whose layers disagree on the element type must be refused with a readable sentence.
// expect: ALL_MODULES_OF_A_SEQUENTIAL_MUST_HAVE_THE_SAME_ELEMENT_TYPE
// max-lines: 30
#include <gradus/gradus.hpp>
int main() {
  gradus::Rng rng(1);
  gradus::nn::Sequential net(gradus::nn::Dense<float>({.in = 4, .out = 3}, rng), gradus::nn::ReLU{},
                             gradus::nn::Dense<double>({.in = 3, .out = 2}, rng));
  (void)net;
}
