// gradus/backend/collective.hpp — a device's collective communication library (NCCL for CUDA
// GPUs) as a table of functions that its backend registers: what gd::dist calls to all-reduce and
// broadcast tensors that stay in a device's memory, so that data-parallel training on GPUs moves
// no gradient through the host. The host's process group (MPI) only hands the group's id from
// rank 0 to the others.
//
//   const CollectiveHooks& h = collective_hooks(t.device().type);   // h.join null: none
//   std::string id = h.new_id(device);                // rank 0; the others receive it over MPI
//   void* group = h.join(device, id, ranks, rank);    // every rank
//   h.all_reduce(group, t.device_data(), t.size(), scalar_of<float>(), Reduce::sum, device);
#pragma once
#include <cstdint>
#include <string>
#include <type_traits>

#include "gradus/core/compiled.hpp"
#include "gradus/core/device.hpp"

namespace gradus::backend {

/// The element types a collective moves.
enum class Scalar : int { f32, f64, i64 };

template <class T>
constexpr Scalar scalar_of() {
  if constexpr (std::is_same_v<T, float>)
    return Scalar::f32;
  else if constexpr (std::is_same_v<T, double>)
    return Scalar::f64;
  else if constexpr (std::is_same_v<T, int64_t>)
    return Scalar::i64;
  else
    static_assert(sizeof(T) == 0, "COLLECTIVES_MOVE_FLOAT_DOUBLE_AND_INT64_TENSORS_ONLY");
}

/// How an all-reduce combines the ranks' elements: their sum, or their sum divided by the number
/// of ranks.
enum class Reduce : int { sum, mean };

/// A device type's collective library. Every function throws gd::device_error naming the call
/// and the library's message. The calls on one group are made in the same order on every rank;
/// they are ordered with the kernels on the device (asynchronous to the host, as kernels are).
struct CollectiveHooks {
  const char* library = nullptr;  ///< "NCCL"
  /// Why the library cannot be used in this process (empty when it can).
  std::string (*problem)() = nullptr;
  /// A fresh group id, made on one rank and handed to the others by the host's process group.
  std::string (*new_id)(Device device) = nullptr;
  /// Makes this process rank `rank` of `ranks` in group `id`, on `device`: every rank calls it
  /// with the same id. Returns the group's handle.
  void* (*join)(Device device, const std::string& id, int ranks, int rank) = nullptr;
  /// In place on `data` (`count` elements on `device`): the elementwise sum (or mean) over the ranks.
  void (*all_reduce)(void* group, void* data, int64_t count, Scalar type, Reduce op, Device device) = nullptr;
  /// In place on `data`: rank `root`'s elements on every rank.
  void (*broadcast)(void* group, void* data, int64_t count, Scalar type, int root, Device device) = nullptr;
  /// Leaves the group (its handle is invalid after).
  void (*leave)(void* group) = nullptr;
};

/// The collective library of device type `t` (every function null until its backend registers;
/// gd::cuda's constructor registers NCCL).
CollectiveHooks& collective_hooks(DeviceType t);

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
GRADUS_INLINE CollectiveHooks& collective_hooks(DeviceType t) {
  static CollectiveHooks hooks[kMaxDeviceTypes];
  return hooks[static_cast<int>(t)];
}
#endif  // GRADUS_DEFINE_COMPILED

}  // namespace gradus::backend
