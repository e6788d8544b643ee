// gradus/profile/event.hpp — what the profiler records: one Event per op run, forward or
// backward, and per user Scope; one ParameterInfo per trainable parameter.
//
// These are plain data, so the reports (profile/report.hpp), the Chrome trace
// (profile/trace.hpp) and the TensorBoard graph (profile/graph.hpp) are functions of a
// `std::vector<Event>` and can be tested on hand-made events.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "gradus/core/shape.hpp"

namespace gradus::profile {

/// What an Event timed.
enum class EventKind : uint8_t {
  forward,   ///< an op computing its value (a kernel op, or an elementwise expression evaluated)
  backward,  ///< a tape node pushing its adjoint into its inputs' (and anything it runs meanwhile)
  scope,     ///< a user's `gd::profile::Scope`, around whatever it encloses
};

inline const char* to_string(EventKind k) {
  return k == EventKind::forward ? "forward" : k == EventKind::backward ? "backward" : "scope";
}

/// One timed interval on one thread. Events on a thread nest properly (an op that runs other ops
/// encloses their events); `self_ns()` is the time not spent in nested events, so the self times
/// of a thread's events add up to the time covered by its outermost events.
struct Event {
  std::string name;   ///< the op ("matmul", "conv2d", "elementwise", "sum", ...) or the Scope's label
  std::string scope;  ///< module path that ran it, '/'-separated ("encoder/lstm"); "" outside any module
  EventKind kind = EventKind::forward;
  int thread = 0;            ///< lane: 0 for the first thread that recorded, then 1, 2, ...
  int depth = 0;             ///< nesting depth on its thread (0: outermost)
  int64_t start_ns = 0;      ///< since the profiler started (steady clock)
  int64_t end_ns = 0;        ///< end_ns >= start_ns
  int64_t child_ns = 0;      ///< time inside events nested directly in this one
  std::vector<Shape> input_shapes;  ///< the tensor operands' shapes (a Var's value or a Tensor)
  Shape output_shape;               ///< the value computed (forward) or whose adjoint is pushed (backward)
  std::string dtype;                ///< "float32", "float64"; "" for a scope
  double flops = 0;   ///< floating-point operations, by the formulas of profile/flops.hpp
  double bytes = 0;   ///< bytes read and written: every operand read once, the output written once
  int64_t alloc_bytes = 0;  ///< net change of the tensor allocator's bytes in use across the event
  int64_t peak_bytes = 0;   ///< the allocator's high-water mark during the event, above its level at the start
  uint64_t node = 0;        ///< tape node created (forward) or run (backward); 0 for none
  std::vector<uint64_t> input_nodes;  ///< tape nodes read (forward; 0 for a Tensor operand)

  int64_t duration_ns() const { return end_ns - start_ns; }
  int64_t self_ns() const { return end_ns - start_ns - child_ns; }
};

/// One trainable parameter of the model a Profiler was attached to.
struct ParameterInfo {
  std::string name;   ///< dotted path as named_parameters() gives it: "block.dense1.kernel"
  std::string scope;  ///< the module path of its owner, '/'-separated: "block/dense1"
  Shape shape;
  std::string dtype;  ///< "float32", "float64"
  int64_t count = 0;  ///< elements
  int64_t bytes = 0;  ///< count × element size
  uint64_t node = 0;  ///< its tape leaf, matching Event::input_nodes
};

}  // namespace gradus::profile
