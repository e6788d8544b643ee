// gradus/core/precision.hpp — mixed precision: the precision of a float matrix product's
// inputs (tensor cores on a GPU), chosen for a scope of the program with gd::autocast.
//
//   {
//     gd::autocast mixed(gd::bf16);          // float products read their inputs as bfloat16
//     gd::Var<float> loss = loss_fn(net(x), y);
//   }                                         // back to float
//   opt.minimize(loss);                       // the backward products use bf16 as well
//
// Tensors stay float and the products accumulate in float; only the inputs of each product are
// rounded (bfloat16: 8 mantissa bits, float's range; fp16: 11 bits, largest value 65504), so
// weights, gradients and optimizer state keep full precision. A tape node records the precision
// in effect when it was made, and its backward pass runs its products in that precision too.
// What it changes: float matrix products (matmul, Dense, Conv2d, LSTM) on a GPU, which cuBLAS
// may then run on bf16/fp16 tensor cores, and under bf16 on the CPU, which rounds their inputs
// and multiplies them on AMX tiles or with AVX512-BF16 dot products where the CPU has them
// (backend/cpu/gemm.hpp).
// Double products, and CPU products under fp16, are unchanged.
#pragma once
#include <cstdint>
#include <ostream>

namespace gradus {

/// The precision of a float product's inputs.
enum class Precision : uint8_t {
  fp32 = 0,  ///< float (or TF32 where gd::cuda::allow_tf32 permits it)
  bf16 = 1,  ///< bfloat16 inputs, float accumulation
  fp16 = 2,  ///< IEEE half inputs, float accumulation (use a LossScaler: small gradients underflow)
};
inline constexpr Precision fp32 = Precision::fp32;
inline constexpr Precision bf16 = Precision::bf16;
inline constexpr Precision fp16 = Precision::fp16;

inline const char* precision_name(Precision p) {
  switch (p) {
    case Precision::bf16: return "bf16";
    case Precision::fp16: return "fp16";
    default: return "fp32";
  }
}
inline std::ostream& operator<<(std::ostream& os, Precision p) { return os << precision_name(p); }

namespace detail {
/// This thread's product precision (autocast sets it; a backward pass sets each node's own).
inline Precision& product_precision_slot() {
  thread_local Precision p = Precision::fp32;
  return p;
}
/// Sets this thread's product precision for a scope and restores the previous one after it.
class PrecisionScope {
 public:
  explicit PrecisionScope(Precision p) : prev_(product_precision_slot()) { product_precision_slot() = p; }
  ~PrecisionScope() { product_precision_slot() = prev_; }
  PrecisionScope(const PrecisionScope&) = delete;
  PrecisionScope& operator=(const PrecisionScope&) = delete;

 private:
  Precision prev_;
};
}  // namespace detail

/// The precision this thread's float products use now.
inline Precision autocast_precision() { return detail::product_precision_slot(); }

/// Mixed precision for the rest of the enclosing scope, on this thread (nested scopes restore
/// the outer setting when they end), as torch.autocast: see the top of this file.
///   gd::autocast mixed(gd::bf16);
class autocast {
 public:
  explicit autocast(Precision p) : scope_(p) {}

 private:
  detail::PrecisionScope scope_;
};

}  // namespace gradus
