// tests/gpu_emu/context.hpp — what the emulated device (emu.cpp) and a kernel compiled for it
// (shim.hpp) share: the CUDA built-in variables of the thread that runs, and the block's barrier.
// Plain C++, included by both.
#pragma once

namespace gradus_emu {

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

/// One launch's state as the running thread sees it; the emulator sets the indices before it
/// switches to a thread.
struct Context {
  Dim3 thread_idx, block_idx, block_dim, grid_dim;
  /// __syncthreads(): suspends the calling thread until every thread of its block has called it
  /// (or has returned).
  void (*sync)() = nullptr;
  /// The warp-shuffle exchange: one 8-byte slot per thread of the block.
  unsigned long long shuffle[1024] = {};
};

}  // namespace gradus_emu
