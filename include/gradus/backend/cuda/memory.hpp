// gradus/backend/cuda/memory.hpp — GPU memory: contexts, a caching allocator per GPU, copies,
// and the hooks that give gd::Tensor its `to(gd::cuda(i))`.
//
// cuMemAlloc and cuMemFree synchronise the device and cost tens of microseconds, so, as on the
// CPU (core/allocator.hpp), a buffer a tensor lets go of is kept on a free list of its size
// class and handed to the next tensor of that class: a steady-state training step makes no
// device allocation. When the GPU runs out of memory, the cache is returned to the driver and
// the allocation tried once more before gd::device_error says how much was asked and held.
//
// Copies use the synchronous cuMemcpy calls on the legacy default stream, the stream every
// generated kernel is launched on, so a copy back to the host sees every kernel before it and a
// program needs no explicit synchronisation.
//
//   gd::Tensor<float> g = x.to(gd::cuda(0));    // host -> device (registers these hooks)
//   gd::cuda::memory_stats(0).device_allocations;
#pragma once
#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "gradus/backend/cuda/deferred.hpp"
#include "gradus/backend/cuda/runtime.hpp"
#include "gradus/core/allocator.hpp"
#include "gradus/core/compiled.hpp"
#include "gradus/core/device.hpp"

namespace gradus::backend::cuda {

/// Counters of one GPU's caching allocator (bytes are block capacities).
struct DeviceMemoryStats {
  int64_t device_allocations = 0;  ///< blocks obtained from the driver
  int64_t cache_hits = 0;          ///< requests served from the cache
  int64_t bytes_in_use = 0;        ///< held by live tensors
  int64_t bytes_cached = 0;        ///< free, waiting for reuse
  int64_t peak_bytes_in_use = 0;
};

/// A caching allocator of buffer blocks over `Raw`, which provides the device's memory:
/// `void* allocate(size_t)` (nullptr when the memory is exhausted) and `void free(void*)`. The
/// block headers live on the host and point at the device memory (`Block::external`); their
/// `recycle` returns them here when the last tensor lets go. Sizes are the host allocator's
/// size classes. Generic in Raw so its policy is tested on the CPU with a fake device.
template <class Raw>
class BlockCache {
 public:
  BlockCache(Raw raw, Device device) : raw_(std::move(raw)), device_(device) {}
  BlockCache(const BlockCache&) = delete;
  BlockCache& operator=(const BlockCache&) = delete;
  ~BlockCache() { empty(); }  // blocks still held by tensors are theirs to return

  detail::Block* allocate(size_t bytes) {
    const int cls = detail::CachingAllocator::size_class(bytes);
    const size_t cap = detail::CachingAllocator::class_bytes(cls);
    std::unique_lock lock(mu_);
    if (auto& list = free_[size_t(cls)]; !list.empty()) {
      detail::Block* b = list.back();
      list.pop_back();
      stats_.cache_hits++;
      stats_.bytes_cached -= int64_t(cap);
      take(cap);
      b->refs.store(1, std::memory_order_relaxed);
      return b;
    }
    lock.unlock();
    void* p = raw_.allocate(cap);
    if (!p) {  // out of memory: give the cache back to the driver and try once more
      empty();
      p = raw_.allocate(cap);
      if (!p) {
        const DeviceMemoryStats s = stats();
        ::gradus::detail::throw_error<device_error>({"out of memory on ", device_, ": a tensor of ", bytes,
                                                     " bytes does not fit (", s.bytes_in_use,
                                                     " bytes held by live tensors)"});
      }
    }
    auto* b = new detail::Block;
    b->external = p;
    b->capacity = cap;
    b->size_class = cls;
    b->device = device_;
    b->keepalive = this;
    b->recycle = [](detail::Block* blk) { static_cast<BlockCache*>(blk->keepalive)->release(blk); };
    lock.lock();
    stats_.device_allocations++;
    take(cap);
    return b;
  }

  /// Keeps `b` for the next request of its size class.
  void release(detail::Block* b) {
    std::lock_guard lock(mu_);
    stats_.bytes_in_use -= int64_t(b->capacity);
    stats_.bytes_cached += int64_t(b->capacity);
    auto& list = free_[size_t(b->size_class)];
    if (list.capacity() == list.size()) list.reserve(list.size() * 2 + 8);
    list.push_back(b);
  }

  /// Returns every cached block to the device.
  void empty() {
    std::vector<detail::Block*> out;
    {
      std::lock_guard lock(mu_);
      for (auto& list : free_) {
        out.insert(out.end(), list.begin(), list.end());
        list.clear();
      }
      stats_.bytes_cached = 0;
    }
    for (detail::Block* b : out) {
      raw_.free(b->external);
      delete b;
    }
  }

  DeviceMemoryStats stats() {
    std::lock_guard lock(mu_);
    return stats_;
  }
  Raw& raw() { return raw_; }

 private:
  void take(size_t cap) {
    stats_.bytes_in_use += int64_t(cap);
    if (stats_.bytes_in_use > stats_.peak_bytes_in_use) stats_.peak_bytes_in_use = stats_.bytes_in_use;
  }

  Raw raw_;
  Device device_;
  std::mutex mu_;
  std::array<std::vector<detail::Block*>, 256> free_{};
  DeviceMemoryStats stats_{};
};

// ------------------------------------------------------------------------------ the driver side

/// The primary context of GPU `ordinal`, retained once and made current on the calling thread
/// (a cheap no-op when it already is).
void make_current(int ordinal);

/// Device memory from the driver (cuMemAlloc / cuMemFree) on GPU `ordinal`.
struct DriverMemory {
  int ordinal = 0;
  void* allocate(size_t bytes) {
    make_current(ordinal);
    const Driver& d = Driver::get();
    Driver::Ptr p = 0;
    const int rc = d.mem_alloc(&p, bytes);
    if (rc == kOutOfMemory) return nullptr;
    d.check(rc, "cuMemAlloc");
    return reinterpret_cast<void*>(p);
  }
  void free(void* p) {
    make_current(ordinal);
    const Driver& d = Driver::get();
    d.check(d.mem_free(reinterpret_cast<Driver::Ptr>(p)), "cuMemFree");
  }
  static constexpr int kOutOfMemory = 2;  // CUDA_ERROR_OUT_OF_MEMORY
};

/// The caching allocator of GPU `ordinal` (made on first use, never destroyed: tensors may
/// outlive static destructors).
BlockCache<DriverMemory>& device_cache(int ordinal);

/// Copies `bytes` between host and GPU memory or within one GPU (synchronous with the host).
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes);

/// Registers the CUDA backend's memory hooks with core/ (once; gd::cuda's constructor calls it).
void register_memory_hooks();

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
GRADUS_INLINE void make_current(int ordinal) {
  static std::mutex mu;
  static std::array<std::atomic<void*>, 64> contexts{};
  thread_local int current = -1;
  const Driver& d = Driver::get();
  if (current == ordinal) {
    // still ours? another library on this thread (the CUDA runtime, PyTorch) may have made its
    // own context current since
    void* now = nullptr;
    if (!d.ctx_get_current) return;
    if (d.ctx_get_current(&now) == 0 && now == contexts[size_t(ordinal)].load(std::memory_order_relaxed)) return;
  }
  GRADUS_CHECK(device_error, d.problem.empty(), "cuda(", ordinal, "): ", d.problem);
  GRADUS_CHECK(device_error, ordinal >= 0 && ordinal < d.devices && ordinal < int(contexts.size()), "cuda(",
               ordinal, "): no such GPU; the driver reports ", d.devices);
  void* ctx = nullptr;
  {
    std::lock_guard lock(mu);
    if (!contexts[size_t(ordinal)].load(std::memory_order_relaxed)) {
      int dev = 0;
      void* retained = nullptr;
      d.check(d.device_get(&dev, ordinal), "cuDeviceGet");
      d.check(d.primary_ctx_retain(&retained, dev), "cuDevicePrimaryCtxRetain");
      contexts[size_t(ordinal)].store(retained, std::memory_order_relaxed);
    }
    ctx = contexts[size_t(ordinal)].load(std::memory_order_relaxed);
  }
  d.check(d.ctx_set_current(ctx), "cuCtxSetCurrent");
  current = ordinal;
}

GRADUS_INLINE BlockCache<DriverMemory>& device_cache(int ordinal) {
  static std::mutex mu;
  static std::array<BlockCache<DriverMemory>*, 64> caches{};
  GRADUS_CHECK(device_error, ordinal >= 0 && ordinal < int(caches.size()), "cuda(", ordinal, "): ordinal out of range");
  std::lock_guard lock(mu);
  auto& c = caches[size_t(ordinal)];
  if (!c) c = new BlockCache<DriverMemory>(DriverMemory{ordinal}, Device{DeviceType::cuda, ordinal});
  return *c;
}

GRADUS_INLINE void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) {
  const Driver& d = Driver::get();
  const auto ptr = [](const void* p) { return reinterpret_cast<Driver::Ptr>(p); };
  if (dst_device.is_cuda() && src_device.is_cuda()) {
    GRADUS_CHECK(device_error, dst_device == src_device, "copy from ", src_device, " to ", dst_device,
                 ": copies between two GPUs go through the host: .to(gd::cpu).to(", dst_device, ")");
    make_current(dst_device.index);
    d.check(d.memcpy_dtod(ptr(dst), ptr(src), bytes), "cuMemcpyDtoD");
  } else if (dst_device.is_cuda()) {
    make_current(dst_device.index);
    d.check(d.memcpy_htod(ptr(dst), src, bytes), "cuMemcpyHtoD");
  } else {
    make_current(src_device.index);
    d.check(d.memcpy_dtoh(dst, ptr(src), bytes), "cuMemcpyDtoH");
    DeferredChecks::get().report(src_device.index);  // a synchronisation point: checks made on the GPU report
  }
}

GRADUS_INLINE void register_memory_hooks() {
  static const bool once = [] {
    DeviceHooks& h = device_hooks(DeviceType::cuda);
    h.allocate = [](Device dev, size_t bytes) { return device_cache(dev.index).allocate(bytes); };
    h.copy = copy_bytes;
    return true;
  }();
  (void)once;
}
#endif  // GRADUS_DEFINE_COMPILED
}  // namespace gradus::backend::cuda

#if GRADUS_INSTANCES  // compiled once in libgradus with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::backend::cuda {
GRADUS_INSTANCE class BlockCache<DriverMemory>;
}  // namespace gradus::backend::cuda
#endif
