// gradus/backend/staging.hpp — copies from host memory to a device that do not stop the host: a
// backend's Stager copies the host buffers into its own staging memory (pinned, on a GPU), starts
// the transfer on a copy stream and returns; whoever then uses the device buffers first calls
// ready(), which makes the device's later work wait for the transfer, not the host. What
// Dataset::prefetch_to and fit use to copy batch k+1 while batch k trains.
//
//   std::unique_ptr<Stager> s = make_stager(gd::cuda(0), 2);
//   Tensor<float> x = Tensor<float>::empty(host.shape(), device);
//   const uint64_t ticket = s->start({{x.device_data(), host.data(), host.size() * sizeof(float)}});
//   ...                                  // host is free again; x is not readable yet
//   s->ready(ticket);                    // kernels launched from now on see x
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "gradus/core/compiled.hpp"
#include "gradus/core/device.hpp"
#include "gradus/core/error.hpp"
#include "gradus/core/tensor.hpp"

namespace gradus::backend {

/// One piece of a staged copy: `bytes` from `src` in host memory to `dst` in the device's.
struct StagedPiece {
  void* dst;
  const void* src;
  size_t bytes;
};

/// Asynchronous host-to-device copies for one device. start() may be called on one thread (a
/// pipeline's) and ready() on another (the training loop's).
class Stager {
 public:
  virtual ~Stager() = default;
  /// Starts copying `pieces` and returns the copy's ticket. The host buffers may be reused as soon
  /// as it returns; the device buffers hold the data once ready(ticket) has been called.
  virtual uint64_t start(std::span<const StagedPiece> pieces) = 0;
  /// Makes the device's work issued after this call wait for copy `ticket` (the host does not
  /// wait). Call it on the thread that goes on to use the device buffers, before it uses them.
  virtual void ready(uint64_t ticket) = 0;
};

/// Makes a Stager for `device` that keeps up to `depth` copies in flight.
using StagerFactory = std::unique_ptr<Stager> (*)(Device device, int depth);

/// The factory of device type `t` (null until its backend registers one: gd::cuda's constructor
/// registers the CUDA backend's).
StagerFactory& stager_factory(DeviceType t);

/// A plain copy per piece, complete when start() returns: where a backend has no Stager.
class CopyingStager final : public Stager {
 public:
  explicit CopyingStager(Device device) : device_(device) {}
  uint64_t start(std::span<const StagedPiece> pieces) override {
    for (const StagedPiece& p : pieces)
      if (p.bytes > 0) ::gradus::detail::device_copy(p.dst, device_, p.src, ::gradus::cpu, p.bytes);
    return ++tickets_;
  }
  void ready(uint64_t) override {}

 private:
  Device device_;
  uint64_t tickets_ = 0;
};

/// The Stager of `device`'s backend, or a CopyingStager where it has none. `depth` >= 1.
inline std::unique_ptr<Stager> make_stager(Device device, int depth) {
  GRADUS_CHECK(value_error, depth >= 1, "make_stager: depth must be >= 1, got ", depth);
  if (StagerFactory f = stager_factory(device.type)) return f(device, depth);
  return std::make_unique<CopyingStager>(device);
}

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
GRADUS_INLINE StagerFactory& stager_factory(DeviceType t) {
  static StagerFactory factories[kMaxDeviceTypes] = {};
  return factories[static_cast<int>(t)];
}
#endif  // GRADUS_DEFINE_COMPILED

}  // namespace gradus::backend
