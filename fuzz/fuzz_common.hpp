// Shared by the fuzz harnesses: the entry point, a scratch folder for the harnesses that need
// files, and what a harness does with a tensor a reader accepted, so that a shape that passed the
// reader's checks but breaks an op is found as well.
#pragma once
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>
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

/// A folder of this process for a harness whose code under test reads or writes files: made by
/// mkdtemp in memory (/dev/shm) where that is writable, else in /tmp, and removed with what it
/// holds when the process exits (a harness keeps its own in a function-local static).
class ScratchDir {
 public:
  explicit ScratchDir(std::string_view harness) {
    std::string t = std::string(::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp") + "/gradus-fuzz-";
    t.append(harness).append("-XXXXXX");
    if (!::mkdtemp(t.data())) __builtin_trap();
    path_ = t;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

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
