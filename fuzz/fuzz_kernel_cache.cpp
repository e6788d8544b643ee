// libFuzzer harness: a disk entry of the generated-kernel cache (backend/cuda/kernel_cache.hpp)
// on arbitrary bytes. A damaged entry must be rejected (the kernel compiled again and the entry
// rewritten), never returned; a well-formed one must come back exactly.
#include <filesystem>
#include <fstream>
#include <string>

#include <gradus/backend/cuda/kernel_cache.hpp>

#include "fuzz_common.hpp"

GRADUS_FUZZ_TARGET(kernel_cache) {
  // the cache's directory, this process's own, removed when it exits
  static const gradus::fuzz::ScratchDir cache_dir("kernel-cache");
  const std::string dir = cache_dir.path().string();
  const std::string key = "fuzz/backward/compute_90/nvrtc-13.0", fresh = "// compiled again\n";
  gradus::backend::cuda::KernelCache cache(dir);
  const std::string bytes(gradus::fuzz::bytes(data, size));
  std::ofstream(cache.path(key), std::ios::binary | std::ios::trunc) << bytes;
  const std::string got = cache.ptx(key, [&] { return fresh; });
  if (cache.disk_hits() == 1) {  // accepted: the bytes were exactly header + key + this PTX
    const std::string header = "gradus-ptx " + std::to_string(key.size()) + ' ' + std::to_string(got.size()) + ' ' +
                               std::to_string(gradus::backend::cuda::fnv1a(got, gradus::backend::cuda::fnv1a(key))) + '\n';
    if (bytes != header + key + got) __builtin_trap();  // only the exact entry write() makes is accepted
  } else if (got != fresh || cache.compiles() != 1) {
    __builtin_trap();
  }
  return 0;
}
