// gradus/testing/op_info.hpp — the form of an op registry entry (PyTorch's OpInfo). Test-only:
// no library header includes gradus/testing/, nor does the umbrella header.
//
// Every public differentiable op has one `OpInfo`: its public name, and samples, each with
// inputs, the call with its parameter values, tolerances and an independent forward reference
// (a formula in double, naive loops or hand/NumPy values — never the op itself). The entries are
// test data and live with the test that walks them (tests/ops/registry_*.cpp), so the umbrella
// header does not compile them; that test checks each sample's forward, its gradient in double
// (gd::compute_gradient_error), a fused chain, a broadcast case and a leaf used twice, and that a
// warm call allocates nothing, and it fails when a public op function has no entry. Its device
// pass runs every sample in float (`call_float`) and double on every device of the process and
// compares value and gradients with the CPU's in double; `no_kernel_on` lists the device types
// where the op is known to have no kernel.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "gradus/autodiff/var.hpp"
#include "gradus/core/tensor.hpp"

namespace gradus::ops {

/// What a sample exercises (bits of OpSample::kinds); the registry test requires the kinds an
/// op's `OpInfo` asks for.
namespace kind {
inline constexpr unsigned plain = 0;
inline constexpr unsigned broadcast = 1;  ///< operands of different shapes broadcast together
inline constexpr unsigned fused = 2;      ///< the op inside a longer elementwise chain (one fused pass)
inline constexpr unsigned params = 4;     ///< parameter values other than the defaults
inline constexpr unsigned edge = 8;       ///< edge cases: size-1 or empty axes, rank 0/1, extreme values, ties
inline constexpr unsigned repeated = 16;  ///< one leaf used more than once in the expression
}  // namespace kind

/// One call of an op on double inputs, with its reference.
struct OpSample {
  std::string label;                         ///< what is special about it: "axis=-1 keepdims", "[3,1]x[1,4]"
  unsigned kinds = kind::plain;              ///< kind:: bits
  std::vector<Tensor<double>> inputs;        ///< the differentiable inputs (other operands are captured by `call`)
  std::function<Var<double>(const std::vector<Var<double>>&)> call;            ///< the op under test
  std::function<Var<float>(const std::vector<Var<float>>&)> call_float;        ///< the same call in float (empty: double only)
  std::function<Tensor<double>(const std::vector<Tensor<double>>&)> reference;  ///< independent forward
  double forward_tolerance = 1e-12;  ///< |value - reference| <= tol * max(1, |reference|)
  double gradient_tolerance = 1e-6;  ///< largest gd::gradient_error accepted
  double delta = 1e-6;               ///< central-difference step
  bool check_gradient = true;        ///< false where the op has no gradient: it must then be zero
  bool steady_state = true;          ///< a warm forward + backward allocates nothing; false: known to allocate
  double float_ulps = 16;            ///< device pass: float within float_ulps * FLT_EPSILON * max(1, |reference|)
};

/// One public op: its name as user code writes it (the function list of docs/tensors-and-autodiff.md) and its samples.
struct OpInfo {
  std::string name;
  std::vector<OpSample> samples = {};
  bool differentiable = true;       ///< false: the gradient it passes is zero (comparisons, sign, argmax)
  bool needs_broadcast = false;     ///< a sample of kind::broadcast is required
  bool needs_fused = false;         ///< a sample of kind::fused is required
  bool needs_repeated = false;      ///< a sample of kind::repeated is required
  /// Device types whose backend has no kernel for the op (or for some of its samples): there the
  /// device pass expects gd::device_error, and fails once every sample runs (a stale mark).
  std::vector<DeviceType> no_kernel_on = {};
};

}  // namespace gradus::ops
