// Registering a stateless layer (it holds no parameters) must be refused with one readable sentence.
// expect: STATELESS_LAYERS_NEED_NO_REGISTRATION
// max-lines: 12
#include <gradus/gradus.hpp>
struct Net : gradus::nn::Module<float, Net> {
  gradus::nn::MaxPool2d pool;
  Net() { register_module("pool", pool); }
};
int main() {
  Net net;
  (void)net;
}
