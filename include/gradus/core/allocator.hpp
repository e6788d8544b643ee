// gradus/core/allocator.hpp — the caching allocator behind every tensor buffer.
//
// First touch of fresh memory costs ~10 µs per 4 KiB page on the machines we measure, so a
// buffer released by a tensor is kept in a size-class free list and handed to the next tensor
// of that class. A steady-state training step therefore asks the system for no memory at all.
// Each block carries its own header (reference count, capacity) in its first 64 bytes, so a
// tensor handle needs no separate control block.
#pragma once
#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

#include "gradus/core/compiled.hpp"
#include "gradus/core/device.hpp"
#include "gradus/core/error.hpp"

namespace gradus {

/// Counters of the caching allocator (bytes are block capacities).
struct MemoryStats {
  int64_t system_allocations = 0;  ///< blocks obtained from the system (each one first-touches its pages)
  int64_t cache_hits = 0;          ///< requests served from the cache
  int64_t bytes_in_use = 0;        ///< held by live tensors
  int64_t bytes_cached = 0;        ///< free, waiting for reuse
  int64_t peak_bytes_in_use = 0;   ///< the most bytes_in_use has been since the start or reset_peak()
};

namespace detail {

inline constexpr size_t kAlign = 64;

/// Header at the start of every buffer; the elements follow at `data()`.
struct Block {
  std::atomic<int32_t> refs{1};
  int32_t size_class = -1;  ///< -1: external memory that is not ours to free
  size_t capacity = 0;      ///< bytes available at data()
  void* external = nullptr;
  void (*release_external)(void*) = nullptr;
  void* keepalive = nullptr;
  Device device{};                      ///< where data() lives: host memory unless a backend's block
  void (*recycle)(Block*) = nullptr;    ///< set by a backend that takes its blocks back (device memory)

  std::byte* data() { return external ? static_cast<std::byte*>(external) : reinterpret_cast<std::byte*>(this) + kAlign; }
};
static_assert(sizeof(Block) <= kAlign, "THE_BLOCK_HEADER_MUST_FIT_IN_ONE_ALIGNMENT_UNIT: allocator");

class CachingAllocator {
 public:
  static CachingAllocator& instance();

  Block* allocate(size_t bytes);

  void release(Block* b);

  MemoryStats stats() {
    std::lock_guard lock(mu_);
    return stats_;
  }

  /// Restarts the high-water mark at the bytes in use now; returns the mark it had.
  int64_t reset_peak() {
    std::lock_guard lock(mu_);
    return std::exchange(stats_.peak_bytes_in_use, stats_.bytes_in_use);
  }

  /// Returns every cached block to the system.
  void empty_cache();

  void set_limit(int64_t bytes) {
    std::lock_guard lock(mu_);
    limit_ = bytes;
  }

  /// Size classes: powers of two up to 4 KiB, then four classes per doubling (<= 25 % slack).
  static int size_class(size_t bytes) {
    if (bytes <= 4096) return std::max(0, int(std::bit_width(std::max<size_t>(bytes, 64) - 1)) - 6);
    const int e = int(std::bit_width(bytes - 1)) - 1;  // 2^e < bytes <= 2^(e+1)
    const size_t quarter = size_t(1) << (e - 2);
    const size_t q = (bytes - (size_t(1) << e) + quarter - 1) / quarter;  // 1..4
    return 7 + (e - 12) * 4 + int(q) - 1;
  }
  static size_t class_bytes(int cls) {
    if (cls < 7) return size_t(64) << cls;
    const int e = (cls - 7) / 4 + 12, q = (cls - 7) % 4 + 1;
    return (size_t(1) << e) + size_t(q) * (size_t(1) << (e - 2));
  }

 private:
  CachingAllocator();
  std::mutex mu_;
  std::array<std::vector<Block*>, 256> free_{};
  MemoryStats stats_{};
  int64_t limit_ = int64_t(4) << 30;
};

/// Wraps memory owned elsewhere; `release(keepalive)` runs when the last tensor lets go.
Block* wrap_external(void* data, size_t bytes, void* keepalive, void (*release)(void*));

inline void retain(Block* b) {
  if (b) b->refs.fetch_add(1, std::memory_order_relaxed);
}
inline void release(Block* b) {
  if (b && b->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) CachingAllocator::instance().release(b);
}

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
GRADUS_INLINE CachingAllocator& CachingAllocator::instance() {
  static CachingAllocator* a = new CachingAllocator;  // never destroyed: tensors may outlive statics
  return *a;
}
GRADUS_INLINE Block* CachingAllocator::allocate(size_t bytes) {
  const int cls = size_class(bytes);
  const size_t cap = class_bytes(cls);
  {
    std::lock_guard lock(mu_);
    auto& list = free_[size_t(cls)];
    if (!list.empty()) {
      Block* b = list.back();
      list.pop_back();
      stats_.cache_hits++;
      stats_.bytes_cached -= int64_t(cap);
      stats_.bytes_in_use += int64_t(cap);
      stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
      b->refs.store(1, std::memory_order_relaxed);
      return b;
    }
    stats_.system_allocations++;
    stats_.bytes_in_use += int64_t(cap);
    stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
  }
  void* raw;
  try {
    raw = ::operator new(cap + kAlign, std::align_val_t(kAlign));
  } catch (const std::bad_alloc&) {  // the counters as they were; Tensor names the shape
    std::lock_guard lock(mu_);
    stats_.system_allocations--;
    stats_.bytes_in_use -= int64_t(cap);
    throw;
  }
  Block* b = new (raw) Block;
  b->size_class = cls;
  b->capacity = cap;
  return b;
}
GRADUS_INLINE void CachingAllocator::release(Block* b) {
  if (b->recycle) {  // a backend's block (device memory): its own cache takes it back
    b->recycle(b);
    return;
  }
  if (b->size_class < 0) {
    if (b->release_external) b->release_external(b->keepalive);
    b->~Block();
    ::operator delete(static_cast<void*>(b), std::align_val_t(kAlign));
    return;
  }
  const size_t cap = b->capacity;
  {
    std::lock_guard lock(mu_);
    stats_.bytes_in_use -= int64_t(cap);
    if (stats_.bytes_cached + int64_t(cap) <= limit_) {
      auto& list = free_[size_t(b->size_class)];
      if (list.capacity() == list.size()) list.reserve(list.size() * 2 + 8);
      list.push_back(b);
      stats_.bytes_cached += int64_t(cap);
      return;
    }
  }
  b->~Block();
  ::operator delete(static_cast<void*>(b), std::align_val_t(kAlign));
}
GRADUS_INLINE void CachingAllocator::empty_cache() {
  std::lock_guard lock(mu_);
  for (auto& list : free_) {
    for (Block* b : list) {
      stats_.bytes_cached -= int64_t(b->capacity);
      b->~Block();
      ::operator delete(static_cast<void*>(b), std::align_val_t(kAlign));
    }
    list.clear();
  }
}
GRADUS_INLINE CachingAllocator::CachingAllocator() {
  if (const char* env = std::getenv("GRADUS_CACHE_LIMIT_MB")) limit_ = std::atoll(env) * (int64_t(1) << 20);
}
GRADUS_INLINE Block* wrap_external(void* data, size_t bytes, void* keepalive, void (*release)(void*)) {
  void* raw = ::operator new(sizeof(Block) < kAlign ? kAlign : sizeof(Block), std::align_val_t(kAlign));
  Block* b = new (raw) Block;
  b->external = data;
  b->capacity = bytes;
  b->keepalive = keepalive;
  b->release_external = release;
  return b;
}
#endif  // GRADUS_DEFINE_COMPILED

}  // namespace detail

/// Counters of the tensor allocator: how often it went to the system and how much it caches.
inline MemoryStats memory_stats() { return detail::CachingAllocator::instance().stats(); }
/// Frees every cached (unused) tensor buffer.
inline void empty_cache() { detail::CachingAllocator::instance().empty_cache(); }

}  // namespace gradus
