// libFuzzer harness: restoring a fit checkpoint (model, Adam state, Rng, loop counters, History,
// EarlyStopping state) from arbitrary bytes must resume training or throw gd::error.
#include <cstdio>
#include <filesystem>
#include <string>

#include "fuzz_common.hpp"
#include "tiny_training.hpp"

namespace {
namespace fs = std::filesystem;

/// A run directory whose state file names the checkpoint each input is written to.
struct RunDir {
  gradus::fuzz::ScratchDir base{"checkpoint"};
  fs::path run = base.path() / "run", out = base.path() / "export", ckpt = run / "model.ckpt-1.safetensors";
  RunDir() {
    fs::create_directories(run);
    gradus::io::write_file_atomic(run / "checkpoint",
                                  gradus::io::encode_checkpoint_state({"model.ckpt-1.safetensors", {"model.ckpt-1.safetensors"}}));
  }
};
}  // namespace

GRADUS_FUZZ_TARGET(checkpoint) {
  static RunDir dir;
  FILE* f = std::fopen(dir.ckpt.c_str(), "wb");
  if (!f) __builtin_trap();
  if (size) std::fwrite(data, 1, size, f);
  std::fclose(f);
  try {
    (void)gradus::fuzz::tiny_training(dir.run, dir.out);
  } catch (const gradus::error&) {
  }
  return 0;
}
