// libFuzzer harness: read_idx (raw or gzip, detected by its magic bytes) on an arbitrary file.
#include <gradus/data/idx.hpp>

#include <cstdio>
#include <string>

#include "fuzz_common.hpp"

GRADUS_FUZZ_TARGET(idx) {
  // read_idx reads a path: the input goes to a file of this process (in memory where /dev/shm is)
  static const gradus::fuzz::ScratchDir dir("idx");
  static const std::string path = (dir.path() / "input.idx").string();
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) __builtin_trap();
  if (size) std::fwrite(data, 1, size, f);
  std::fclose(f);
  try {
    const gradus::data::IdxArray a = gradus::data::read_idx(path);
    if (a.shape.numel() != int64_t(a.bytes.size())) __builtin_trap();
  } catch (const gradus::error&) {
  }
  return 0;
}
