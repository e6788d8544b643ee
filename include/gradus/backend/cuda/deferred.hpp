// gradus/backend/cuda/deferred.hpp — checks of device data that report at the next
// synchronisation point instead of reading the data back when they are made.
//
// A sparse loss must reject a label outside [0, classes), and gather an index outside its rows, as
// the CPU does, naming the op, the value and its position; reading a GPU's labels or indices back
// for that would stop the GPU every step. Instead a
// kernel writes the first bad position into a slot (and the label there into the next), and the
// check waits here: the next copy from the GPU to the host (`.to(gd::cpu)`, `.item()`) or
// `synchronize()` reads the pending slots of that GPU and throws the CPU's error, adding that it
// was found at that point. Slots come from a small area per GPU, allocated once; when it is full
// the pending checks are read first.
//
//   const Driver::Ptr slot = DeferredChecks::get().add(ordinal, {op, "label", classes, context});  // then launch
//   DeferredChecks::get().report(ordinal);   // at a synchronisation point: throws value_error
#pragma once
#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "gradus/backend/cuda/runtime.hpp"
#include "gradus/core/compiled.hpp"
#include "gradus/core/error.hpp"

namespace gradus::backend::cuda {

void make_current(int ordinal);  // memory.hpp

/// What a range check reports: "<op>: <what> V at position P out of range [0, end)<context>" (a
/// sparse loss's label, gather's index).
struct PendingCheck {
  std::string op, what;
  int64_t end = 0;
  std::string context;
};

class DeferredChecks {
 public:
  static constexpr size_t kSlots = 256;  ///< per GPU; each slot is two 64-bit words

  static DeferredChecks& get();

  /// A fresh slot on GPU `ordinal` for `check` ({~0, 0}: the kernel that fills it writes only on a
  /// failure); the caller launches that kernel before any other work is issued.
  Driver::Ptr add(int ordinal, PendingCheck check);
  /// Reads GPU `ordinal`'s pending slots (the GPU has finished the work that wrote them) and throws
  /// the first failure's value_error; either way no check is pending afterwards.
  void report(int ordinal);
  /// True when a check of GPU `ordinal` waits for report().
  bool pending(int ordinal) {
    std::lock_guard<std::mutex> lock(mu_);
    return ordinal >= 0 && ordinal < int(kGpus) && !gpus_[size_t(ordinal)].checks.empty();
  }

 private:
  static constexpr size_t kGpus = 64;
  struct Gpu {
    Driver::Ptr area = 0;
    std::vector<PendingCheck> checks;  // slot i of the area holds checks[i]
  };
  std::mutex mu_;
  std::array<Gpu, kGpus> gpus_{};
};

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
GRADUS_INLINE DeferredChecks& DeferredChecks::get() {
  static DeferredChecks* c = new DeferredChecks;  // never destroyed: GPU memory outlives the statics
  return *c;
}

GRADUS_INLINE Driver::Ptr DeferredChecks::add(int ordinal, PendingCheck check) {
  const Driver& d = Driver::get();
  GRADUS_CHECK(device_error, ordinal >= 0 && ordinal < int(kGpus), "cuda(", ordinal, "): no such GPU");
  bool full = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    full = gpus_[size_t(ordinal)].checks.size() == kSlots;
  }
  if (full) report(ordinal);  // every slot waits: read them first
  std::lock_guard<std::mutex> lock(mu_);
  Gpu& g = gpus_[size_t(ordinal)];
  make_current(ordinal);
  if (!g.area) d.check(d.mem_alloc(&g.area, kSlots * 16), "cuMemAlloc (deferred checks)");
  const Driver::Ptr slot = g.area + g.checks.size() * 16;
  // {~0, 0}: "no bad element yet". Set by memsets, which do not make the host wait for the GPU
  // as a copy from pageable host memory would.
  d.check(d.memset_d8(slot, 0xff, 8), "cuMemsetD8 (deferred check)");
  d.check(d.memset_d8(slot + 8, 0, 8), "cuMemsetD8 (deferred check)");
  g.checks.push_back(std::move(check));
  return slot;
}

GRADUS_INLINE void DeferredChecks::report(int ordinal) {
  std::vector<PendingCheck> checks;
  Driver::Ptr area = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (ordinal < 0 || ordinal >= int(kGpus)) return;
    Gpu& g = gpus_[size_t(ordinal)];
    checks.swap(g.checks);
    area = g.area;
  }
  if (checks.empty()) return;
  const Driver& d = Driver::get();
  make_current(ordinal);
  std::vector<unsigned long long> slots(2 * checks.size());
  d.check(d.memcpy_dtoh(slots.data(), area, slots.size() * sizeof(unsigned long long)),
          "cuMemcpyDtoH (deferred checks)");
  for (size_t i = 0; i < checks.size(); ++i)
    if (slots[2 * i] != ~0ull)
      ::gradus::detail::throw_error<value_error>(
          {checks[i].op, ": ", checks[i].what, " ", static_cast<long long>(slots[2 * i + 1]), " at position ",
           slots[2 * i], " out of range [0, ", checks[i].end, ")", checks[i].context, " (checked on cuda:", ordinal,
           "; reported at the next synchronisation)"});
}
#endif  // GRADUS_DEFINE_COMPILED

}  // namespace gradus::backend::cuda
