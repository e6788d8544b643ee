// gradus/backend/cpu/parallel.hpp — splitting large loops over the CPU's cores.
//
// A loop over [0, n) is cut into chunks, kTasksPerThread per thread, that the thread pool
// (thread_pool.hpp) hands out one at a time: a thread that gets its core back late, or never
// during the loop, only runs fewer chunks. Chunk edges are a function of n, `align` and the
// thread count alone, so a loop that keeps one partial result per chunk and adds them in chunk
// order computes the same bits whichever thread ran which chunk.
#pragma once
#include <algorithm>
#include <cstdint>
#include <memory>
#include <type_traits>

#include "gradus/backend/cpu/thread_pool.hpp"
#include "gradus/core/compiled.hpp"

namespace gradus::backend::cpu {

/// Loops shorter than this many elements run on the calling thread: below it, waking a second
/// thread costs about what it saves.
inline constexpr int64_t kParallelThreshold = 1 << 16;
/// Chunks per thread: more balance a thread that loses its core; each costs a claim.
inline constexpr int kTasksPerThread = 4;
/// Most chunks `parallel_chunks` cuts a loop into (per-chunk scratch is sized by it).
inline constexpr int kMaxChunks = kMaxThreads * kTasksPerThread;

/// Number of chunks `parallel_chunks(n, align, f, threshold, max_chunks)` cuts [0, n) into: 1
/// below `threshold` or with one thread, else kTasksPerThread per thread, at most one per
/// `align` elements and at most `max_chunks`.
inline int chunks_for(int64_t n, int64_t align, int64_t threshold = kParallelThreshold, int max_chunks = kMaxChunks) {
  const int nt = n >= threshold ? num_threads() : 1;
  if (nt <= 1 || n <= align) return 1;
  const int64_t most = std::min<int64_t>(int64_t(nt) * kTasksPerThread, std::clamp(max_chunks, 1, kMaxChunks));
  return int(std::min<int64_t>(most, (n + align - 1) / align));
}

/// The chunks of parallel_chunks, with the loop body as a function and its context: calls
/// fn(ctx, chunk, begin, end).
void run_chunks(int64_t n, int64_t align, int64_t threshold, int max_chunks,
                void (*fn)(void* ctx, int chunk, int64_t begin, int64_t end), void* ctx);

/// Calls `f(chunk, begin, end)` on the chunks_for(n, align, threshold, max_chunks) contiguous
/// chunks of [0, n), chunk edges multiples of `align`, on the pool's threads; every chunk exactly
/// once, chunk numbers in [0, chunks). From inside another parallel loop the chunks run one
/// after the other on the calling thread. `f` is compiled once, behind a function pointer: the
/// planning and the serial and parallel paths are run_chunks', compiled once for every loop.
template <class F>
void parallel_chunks(int64_t n, int64_t align, F&& f, int64_t threshold = kParallelThreshold,
                     int max_chunks = kMaxChunks) {
  using Fn = std::remove_reference_t<F>;
  run_chunks(
      n, align, threshold, max_chunks,
      [](void* c, int t, int64_t begin, int64_t end) { (*static_cast<Fn*>(c))(t, begin, end); },
      const_cast<void*>(static_cast<const void*>(std::addressof(f))));
}

}  // namespace gradus::backend::cpu

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::backend::cpu {
GRADUS_INLINE void run_chunks(int64_t n, int64_t align, int64_t threshold, int max_chunks,
                              void (*fn)(void* ctx, int chunk, int64_t begin, int64_t end), void* ctx) {
  const int chunks = chunks_for(n, align, threshold, max_chunks);
  if (chunks <= 1) {
    fn(ctx, 0, int64_t(0), n);
    return;
  }
  const int64_t blocks = (n + align - 1) / align;
  ThreadPool::instance().run(chunks, num_threads(), [&](int64_t t) {
    const int64_t b0 = blocks * t / chunks, b1 = blocks * (t + 1) / chunks;
    fn(ctx, int(t), std::min(n, b0 * align), std::min(n, b1 * align));
  });
}
}  // namespace gradus::backend::cpu
#endif  // GRADUS_DEFINE_COMPILED
