// gradus/backend/cpu/parallel.hpp — splitting large loops over the CPU's cores.
#pragma once
#include <algorithm>
#include <cstdint>
#if defined(_OPENMP)
#include <omp.h>
#endif

namespace gradus::backend::cpu {

/// Most threads a gradus kernel uses (per-thread scratch is sized by it).
inline constexpr int kMaxThreads = 16;
/// Loops shorter than this many elements run on the calling thread.
inline constexpr int64_t kParallelThreshold = 1 << 16;

inline int num_threads() {
#if defined(_OPENMP)
  return std::clamp(omp_get_max_threads(), 1, kMaxThreads);
#else
  return 1;
#endif
}

/// Calls `f(thread, begin, end)` on contiguous chunks of [0, n), chunk edges multiples of
/// `align`; chunks run in parallel when n is large. Chunks are a pure function of n and the
/// thread count, so a computation is deterministic for a given thread count.
template <class F>
void parallel_chunks(int64_t n, int64_t align, F&& f, int64_t threshold = kParallelThreshold) {
  const int nt = n >= threshold ? num_threads() : 1;
  if (nt <= 1 || n <= align) {
    f(0, int64_t(0), n);
    return;
  }
#if defined(_OPENMP)
  const int64_t blocks = (n + align - 1) / align;
  const int used = int(std::min<int64_t>(nt, blocks));
#pragma omp parallel num_threads(used)
  {
    const int t = omp_get_thread_num();
    const int64_t b0 = blocks * t / used, b1 = blocks * (t + 1) / used;
    f(t, std::min(n, b0 * align), std::min(n, b1 * align));
  }
#else
  f(0, int64_t(0), n);
#endif
}

/// Number of chunks `parallel_chunks(n, ...)` will use.
inline int chunks_for(int64_t n, int64_t align, int64_t threshold = kParallelThreshold) {
  const int nt = n >= threshold ? num_threads() : 1;
  if (nt <= 1 || n <= align) return 1;
  return int(std::min<int64_t>(nt, (n + align - 1) / align));
}

}  // namespace gradus::backend::cpu
