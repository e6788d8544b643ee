// gradus/core/op_events.hpp — how ops tell a profiler what they do.
//
// Every op opens an `OpScope` on entry and describes itself (name, operand and result shapes,
// the tape nodes it read and made) before it returns; the backward pass does the same around
// each node's backward, and `Module::operator()` marks which module is running. All of it goes
// to the one process-wide `OpObserver` (gd::profile::Profiler implements it), and when none is
// installed every hook is one relaxed atomic load and a branch. Defining GRADUS_NO_PROFILER
// compiles the hooks out entirely (benchmarks/profile_overhead measures the difference).
//
// core/ names no profiler: the observer is an interface, installed by a higher layer.
#pragma once
#include <array>
#include <atomic>
#include <cstdint>
#include <string_view>
#include <type_traits>
#include <typeinfo>

#include "gradus/core/shape.hpp"

namespace gradus::detail {

/// What an op says about one run of itself (filled only while an observer is installed).
struct OpDescription {
  static constexpr int kMaxInputs = 8;
  const char* op = nullptr;     ///< "matmul"
  const char* dtype = nullptr;  ///< "float32"
  int element_bytes = 0;
  Shape output;
  std::array<Shape, kMaxInputs> inputs{};
  std::array<uint64_t, kMaxInputs> input_nodes{};  ///< tape node of each operand; 0 for a Tensor
  int n_inputs = 0;                                ///< operands beyond kMaxInputs are not listed
  uint64_t node = 0;                               ///< tape node made (forward) or run (backward)
  double flops = -1;                               ///< counted by the op; < 0: the observer's formula
  int expr_ops = 0;                                ///< operations per element of an elementwise expression

  void add_input(const Shape& s, uint64_t node_seq) {
    if (n_inputs == kMaxInputs) return;
    inputs[size_t(n_inputs)] = s;
    input_nodes[size_t(n_inputs++)] = node_seq;
  }
};

enum class OpPhase : uint8_t { forward, backward, scope };

/// The receiver of op events. Calls on one thread nest: begin, [describe], (nested pairs), end.
class OpObserver {
 public:
  virtual ~OpObserver() = default;
  virtual void begin(OpPhase phase, std::string_view label) = 0;
  virtual void describe(const OpDescription& d) = 0;  ///< about the innermost open op of this thread
  virtual void set_flops(double flops) = 0;            ///< the innermost open op's count, from the op itself
  virtual void end() = 0;
  virtual void enter_module(const void* module, const std::type_info& type) = 0;
  virtual void leave_module() = 0;
};

inline std::atomic<OpObserver*> g_op_observer{nullptr};

/// The installed observer, or nullptr (the common case: one relaxed load).
inline OpObserver* op_observer() {
#ifdef GRADUS_NO_PROFILER
  return nullptr;
#else
  return g_op_observer.load(std::memory_order_relaxed);
#endif
}

/// Times the enclosing op while an observer is installed:
///   detail::OpScope prof;  ...  prof.flops(2.0 * m * k * n);  return make_result("matmul", ...);
class OpScope {
 public:
  explicit OpScope(OpPhase phase = OpPhase::forward) : obs_(op_observer()) {
    if (obs_) [[unlikely]]
      obs_->begin(phase, {});
  }
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;
  ~OpScope() {
    if (obs_) [[unlikely]]
      obs_->end();
  }
  explicit operator bool() const { return obs_ != nullptr; }
  /// Counts `n` floating-point operations for this op (instead of the profiler's formula).
  void flops(double n) const {
    if (obs_) [[unlikely]]
      obs_->set_flops(n);
  }
  OpObserver* observer() const { return obs_; }

 private:
  OpObserver* obs_;
};

/// Marks `module` as running while it lives (Module::operator() opens one).
class ModuleScope {
 public:
  ModuleScope(const void* module, const std::type_info& type) : obs_(op_observer()) {
    if (obs_) [[unlikely]]
      obs_->enter_module(module, type);
  }
  ModuleScope(const ModuleScope&) = delete;
  ModuleScope& operator=(const ModuleScope&) = delete;
  ~ModuleScope() {
    if (obs_) [[unlikely]]
      obs_->leave_module();
  }

 private:
  OpObserver* obs_;
};

}  // namespace gradus::detail

namespace gradus::detail {

/// "float32" for float, as the profiler and TensorBoard name element types.
template <class T>
constexpr const char* dtype_name_of() {
  if constexpr (std::is_same_v<T, float>)
    return "float32";
  else if constexpr (std::is_same_v<T, double>)
    return "float64";
  else if constexpr (std::is_same_v<T, int64_t>)
    return "int64";
  else if constexpr (std::is_same_v<T, int32_t>)
    return "int32";
  else if constexpr (std::is_same_v<T, uint8_t>)
    return "uint8";
  else if constexpr (std::is_same_v<T, bool>)
    return "bool";
  else
    return "other";
}

}  // namespace gradus::detail
