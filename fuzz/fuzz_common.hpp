// Shared by the fuzz harnesses: what a harness does with a tensor a reader accepted, so that a
// shape that passed the reader's checks but breaks an op is found as well.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string_view>
#include <variant>

#include <gradus/gradus.hpp>
#include <gradus/io.hpp>

// GRADUS_FUZZ_TARGET(name) { ... } is a harness's entry point: libFuzzer's LLVMFuzzerTestOneInput
// in the harness's own executable (fuzz_<name>), or `fuzz_one_input` of the harness's namespace
// in fuzz_all (fuzz/fuzz_all.cpp), which holds every harness and runs the one GRADUS_FUZZ_TARGET names.
#ifdef GRADUS_FUZZ_ALL
#define GRADUS_FUZZ_TARGET(name) int fuzz_one_input(const uint8_t* data, size_t size)
#else
#define GRADUS_FUZZ_TARGET(name) extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
#endif

namespace gradus::fuzz {

/// The bytes libFuzzer hands a harness.
inline std::string_view bytes(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

/// Sums, reduces over the first axis and transposes `t` when the results are small (a reader
/// may accept [0, 2^40, 2^20]; reducing its zero axis would rightly ask for 2^60 elements).
template <class T>
void exercise(const Tensor<T>& t) {
  constexpr int64_t kSmall = int64_t(1) << 20;
  if (t.size() > kSmall) return;
  (void)t.reshape({-1});
  if constexpr (Real<T>) {
    volatile T total = eval(sum(t)).item();
    (void)total;
    if (t.rank() >= 1) {
      int64_t rest = 1;
      for (int i = 1; i < t.rank(); ++i)
        if (t.shape()[i] == 0) rest = 0;
      for (int i = 1; i < t.rank() && rest > 0 && rest <= kSmall; ++i) rest *= t.shape()[i];
      if (rest <= kSmall) (void)eval(sum(t, 0));
    }
    if (t.rank() >= 2) (void)eval(transpose(t));
  }
}
inline void exercise(const io::AnyTensor& t) {
  std::visit([](const auto& x) { exercise(x); }, t);
}

}  // namespace gradus::fuzz
