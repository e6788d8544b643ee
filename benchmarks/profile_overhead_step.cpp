// benchmarks/profile_overhead_step.cpp — the MLP training step of mlp_step.cpp (steps::GradusMlp:
// 784-500(ReLU)-10, batch 128, SGD, Fashion-MNIST), compiled twice into two shared libraries for
// bench_profile_overhead (see profile_overhead.cpp and CMakeLists.txt):
//   libbench_profile_overhead_hooks.so    the profiler hooks compiled in (no profiler running):
//                                         exports run_mlp_step_hooks
//   libbench_profile_overhead_nohooks.so  compiled with -DGRADUS_NO_PROFILER: exports
//                                         run_mlp_step_nohooks
// GRADUS_OVERHEAD_STEP_FN names the exported function; the hooks build also exports
// run_mlp_step_profiled (GRADUS_OVERHEAD_PROFILED_FN): the same steps with a Profiler recording. Each library is built with hidden
// visibility, so its inline gradus functions stay its own: the two builds of the same headers
// are never merged into one by the linker.
#include "steps.hpp"

#include <cstdint>

#include <gradus/profile/profiler.hpp>

#ifndef GRADUS_OVERHEAD_STEP_FN
#error "profile_overhead_step.cpp: define GRADUS_OVERHEAD_STEP_FN (the name of the exported function)"
#endif

/// Runs `n` (>= 1) training steps of this library's MLP (made on the first call from the seed of
/// steps.hpp, kept between calls), cycling over steps::image_batches(); returns the loss of the
/// last step (before its update). Not thread-safe: one caller at a time.
///   run_mlp_step_hooks(3);  // the first three steps' losses equal mlp_step's
extern "C++" __attribute__((visibility("default"))) float GRADUS_OVERHEAD_STEP_FN(int64_t n) {
  static steps::GradusMlp model;
  static size_t next = 0;
  const steps::Batches& d = steps::image_batches();
  float loss = 0;
  for (int64_t i = 0; i < n; ++i) {
    loss = model.step(d.x[next], d.y[next]);
    next = (next + 1) % d.x.size();
  }
  return loss;
}

#ifdef GRADUS_OVERHEAD_PROFILED_FN
/// As above, with a gd::profile::Profiler (memory counters on) recording each step; the events
/// are dropped after each call, so the cost measured is recording, not accumulating.
extern "C++" __attribute__((visibility("default"))) float GRADUS_OVERHEAD_PROFILED_FN(int64_t n) {
  static gradus::profile::Profiler profiler;
  profiler.start();
  const float loss = GRADUS_OVERHEAD_STEP_FN(n);
  profiler.stop();
  profiler.clear();
  return loss;
}
#endif
