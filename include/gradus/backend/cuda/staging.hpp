// gradus/backend/cuda/staging.hpp — the CUDA backend's Stager (backend/staging.hpp): host batches
// copied to a GPU while it computes.
//
// Each copy gets a slot: a pinned host buffer (page-locked, so the copy engine reads it without
// the driver's own staging) and an event. start() waits for the copy that last used the slot
// (the copy engine's work, `depth` copies back, not the kernels), packs the pieces into the
// pinned buffer, and queues their transfers on a non-blocking copy stream. Before them, the
// copy stream waits for an event recorded on the default stream: the kernels queued so far have
// finished with whatever device memory the caching allocator has just handed out again. ready()
// makes the default stream wait for the slot's event. The host waits for neither.
#pragma once
#include <cstring>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "gradus/backend/cuda/memory.hpp"
#include "gradus/backend/cuda/runtime.hpp"
#include "gradus/backend/staging.hpp"
#include "gradus/core/compiled.hpp"

namespace gradus::backend::cuda {

class CudaStager final : public Stager {
 public:
  CudaStager(Device device, int depth);
  // GRADUS_INLINE_DECL (core/compiled.hpp): header-only, no key function, so the vtable — and
  // with it these functions and the driver's loader — is compiled only where a CudaStager is made
  GRADUS_INLINE_DECL ~CudaStager() override;
  GRADUS_INLINE_DECL uint64_t start(std::span<const StagedPiece> pieces) override;
  GRADUS_INLINE_DECL void ready(uint64_t ticket) override;

 private:
  struct Slot {
    void* pinned = nullptr;
    size_t capacity = 0;
    void* done = nullptr;  // recorded on the copy stream after the slot's transfers
    bool used = false;
  };
  Device device_;
  void* stream_ = nullptr;
  void* order_ = nullptr;  // recorded on the default stream before each copy
  std::vector<Slot> slots_;
  uint64_t tickets_ = 0;
  std::mutex mu_;
};

/// The StagerFactory of CUDA devices; gd::cuda's constructor registers it.
std::unique_ptr<Stager> make_cuda_stager(Device device, int depth);

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
GRADUS_INLINE CudaStager::CudaStager(Device device, int depth) : device_(device), slots_(size_t(depth) + 1) {
  const Driver& d = Driver::get();
  make_current(device.index);
  constexpr unsigned kNonBlocking = 1;  // CU_STREAM_NON_BLOCKING: no implicit sync with the default stream
  d.check(d.stream_create(&stream_, kNonBlocking), "cuStreamCreate");
  constexpr unsigned kDisableTiming = 2;  // CU_EVENT_DISABLE_TIMING
  d.check(d.event_create(&order_, kDisableTiming), "cuEventCreate");
  for (Slot& s : slots_) d.check(d.event_create(&s.done, kDisableTiming), "cuEventCreate");
}

GRADUS_INLINE CudaStager::~CudaStager() {
  const Driver& d = Driver::get();
  make_current(device_.index);
  d.stream_synchronize(stream_);  // no transfer may outlive its pinned buffer
  for (Slot& s : slots_) {
    if (s.pinned) d.mem_free_host(s.pinned);
    d.event_destroy(s.done);
  }
  d.event_destroy(order_);
  d.stream_destroy(stream_);
}

GRADUS_INLINE uint64_t CudaStager::start(std::span<const StagedPiece> pieces) {
  const Driver& d = Driver::get();
  std::lock_guard lock(mu_);
  make_current(device_.index);
  const uint64_t ticket = ++tickets_;
  Slot& s = slots_[size_t((ticket - 1) % slots_.size())];
  if (s.used) d.check(d.event_synchronize(s.done), "cuEventSynchronize");  // its last transfer has read it
  size_t total = 0;
  for (const StagedPiece& p : pieces) total += (p.bytes + 255) / 256 * 256;
  if (s.capacity < total) {
    if (s.pinned) d.check(d.mem_free_host(s.pinned), "cuMemFreeHost");
    s.pinned = nullptr;
    s.capacity = 0;
    d.check(d.mem_host_alloc(&s.pinned, total, 0), "cuMemHostAlloc");
    s.capacity = total;
  }
  char* at = static_cast<char*>(s.pinned);
  for (const StagedPiece& p : pieces) {
    if (p.bytes > 0) std::memcpy(at, p.src, p.bytes);
    at += (p.bytes + 255) / 256 * 256;
  }
  d.check(d.event_record(order_, nullptr), "cuEventRecord");
  d.check(d.stream_wait_event(stream_, order_, 0), "cuStreamWaitEvent");
  at = static_cast<char*>(s.pinned);
  for (const StagedPiece& p : pieces) {
    if (p.bytes > 0)
      d.check(d.memcpy_htod_async(reinterpret_cast<Driver::Ptr>(p.dst), at, p.bytes, stream_), "cuMemcpyHtoDAsync");
    at += (p.bytes + 255) / 256 * 256;
  }
  d.check(d.event_record(s.done, stream_), "cuEventRecord");
  s.used = true;
  return ticket;
}

GRADUS_INLINE void CudaStager::ready(uint64_t ticket) {
  GRADUS_CHECK(value_error, ticket >= 1, "Stager::ready: no copy has ticket ", ticket);
  const Driver& d = Driver::get();
  std::lock_guard lock(mu_);
  GRADUS_CHECK(value_error, ticket <= tickets_, "Stager::ready: no copy has ticket ", ticket, " yet");
  make_current(device_.index);
  // The slot's event marks this copy or a later one: the copy stream runs in order, so either
  // way the default stream's later work sees this copy's data.
  const Slot& s = slots_[size_t((ticket - 1) % slots_.size())];
  d.check(d.stream_wait_event(nullptr, s.done, 0), "cuStreamWaitEvent");
}

GRADUS_INLINE std::unique_ptr<Stager> make_cuda_stager(Device device, int depth) {
  return std::make_unique<CudaStager>(device, depth);
}
#endif  // GRADUS_DEFINE_COMPILED

}  // namespace gradus::backend::cuda
