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
#include <initializer_list>
#include <string>
#include <string_view>
#include <type_traits>
#include <typeinfo>

#include "gradus/core/bfloat16.hpp"
#include "gradus/core/shape.hpp"

namespace gradus::detail {

/// An op's settings, for an observer that rebuilds the graph from the ops a forward pass runs
/// (gd::onnx::export_model): integers in an order each op documents where it sets them (strides,
/// axes, a permutation, ...), one real (pad's constant, an activation's alpha), a name (an
/// activation's) and an int64 tensor operand (gather's indices), which points into the op's
/// caller and is valid only while the op is being described. Set by the op just before it
/// returns (set_op_attrs), only while an observer is installed; the next description takes them.
struct OpAttrs {
  static constexpr int kMax = 24;
  std::array<int64_t, kMax> ints{};
  int n_ints = 0;
  double real = 0;
  std::string_view text;
  const void* int_tensor = nullptr;  ///< a `const Tensor<int64_t>*`
};

/// The settings of the op this thread describes next.
inline OpAttrs& pending_op_attrs() {
  thread_local OpAttrs attrs;
  return attrs;
}

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
  /// Each operand's value, a `const Tensor<T>*` valid only during `describe` (for an observer
  /// that copies constants out of the graph).
  std::array<const void*, kMaxInputs> input_values{};
  OpAttrs attrs;  ///< the op's settings (OpAttrs)
  /// An elementwise expression in postfix, for an observer that asks for it (wants_programs):
  /// space-separated tokens, "$i" the i-th operand above, "#v" a number, and each op's name
  /// (ops/elementwise_math.hpp) with its parameters as "(p1,p2)": "$0 $1 mul #1 add exp".
  std::string program;

  void add_input(const Shape& s, uint64_t node_seq, const void* value = nullptr) {
    if (n_inputs == kMaxInputs) return;
    inputs[size_t(n_inputs)] = s;
    input_values[size_t(n_inputs)] = value;
    input_nodes[size_t(n_inputs++)] = node_seq;
  }
  /// Takes the settings the op left in pending_op_attrs().
  void take_attrs() {
    OpAttrs& p = pending_op_attrs();
    attrs = p;
    p = OpAttrs{};
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
  /// A gd::name_scope opens and closes (nested properly with modules and other name scopes).
  virtual void enter_name_scope(std::string_view /*name*/) {}
  virtual void leave_name_scope() {}
  /// True for an observer that wants each elementwise expression as a program
  /// (OpDescription::program); building it costs a string per op.
  virtual bool wants_programs() const { return false; }
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

/// Records an op's settings for the next description (only while an observer is installed).
///   detail::set_op_attrs({strides[0], strides[1], int64_t(padding)});
inline void set_op_attrs(std::initializer_list<int64_t> ints, double real = 0, std::string_view text = {},
                         const void* int_tensor = nullptr) {
  if (!op_observer()) [[likely]]
    return;
  OpAttrs& a = pending_op_attrs();
  a = OpAttrs{};
  for (int64_t v : ints)
    if (a.n_ints < OpAttrs::kMax) a.ints[size_t(a.n_ints++)] = v;
  a.real = real;
  a.text = text;
  a.int_tensor = int_tensor;
}
/// The same with a list of integers after the leading ones (a permutation, a shape).
template <class List>
void set_op_attrs_list(std::initializer_list<int64_t> head, const List& tail, double real = 0) {
  if (!op_observer()) [[likely]]
    return;
  set_op_attrs(head, real);
  OpAttrs& a = pending_op_attrs();
  for (auto v : tail)
    if (a.n_ints < OpAttrs::kMax) a.ints[size_t(a.n_ints++)] = int64_t(v);
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
  else if constexpr (std::is_same_v<T, bfloat16>)
    return "bfloat16";
  else if constexpr (std::is_same_v<T, bool>)
    return "bool";
  else
    return "other";
}

}  // namespace gradus::detail

namespace gradus {

/// Names what is recorded inside it, as TensorFlow's tf.name_scope: while an observer is
/// installed (gd::profile::Profiler), every op run in the scope is filed under "<name>/" — the
/// profiler's rows, its Chrome trace and the TensorBoard graph it writes, where the scope becomes
/// a box of its own. Scopes nest ("outer/inner"); a module called inside a scope opened outside
/// any module is filed under "<scope>/<module path>"; a scope opened in a module's forward sits
/// under that module's path. An empty name names nothing. Without an observer it costs one load.
///   { gd::name_scope scope("loss"); loss = gd::losses::sparse_softmax_cross_entropy_with_logits(y, logits); }
class name_scope {
 public:
  explicit name_scope(std::string_view name) : obs_(name.empty() ? nullptr : detail::op_observer()) {
    if (obs_) [[unlikely]]
      obs_->enter_name_scope(name);
  }
  name_scope(const name_scope&) = delete;
  name_scope& operator=(const name_scope&) = delete;
  ~name_scope() {
    if (obs_) [[unlikely]]
      obs_->leave_name_scope();
  }

 private:
  detail::OpObserver* obs_;
};

}  // namespace gradus
