// gradus/summary/graph.hpp — a TensorBoard graph (GraphDef) and per-node run statistics
// (StepStats), as plain structs, and their protocol-buffer encoders.
//
// TensorBoard's Graphs tab draws the GraphDef of an Event {graph_def = 4}; it groups nodes by
// the '/'-separated name scopes of their names ("dense1/matmul_0" sits in the box "dense1"),
// draws an edge per input, and shows the attrs (the "_output_shapes" attr on hover). A
// TaggedRunMetadata event (Event {tagged_run_metadata = 8}) adds compute time and memory per
// node, joined to the graph by node name. FileWriter::graph and FileWriter::run_metadata
// (writer.hpp) write both.
//
// The messages, only the fields written here (tensorflow/core/framework/graph.proto,
// node_def.proto, attr_value.proto, tensor_shape.proto, types.proto, versions.proto,
// step_stats.proto; protobuf/config.proto for RunMetadata; util/event.proto):
//   GraphDef            node=1 repeated NodeDef, versions=4 VersionDef
//   VersionDef          producer=1 int32
//   NodeDef             name=1, op=2, input=3 repeated string, device=4,
//                       attr=5 map<string, AttrValue> (entries {key=1, value=2})
//   AttrValue           oneof: list=1 ListValue, s=2 bytes, i=3 int64, f=4 float, type=6 DataType,
//                       shape=7 TensorShapeProto
//   AttrValue.ListValue shape=7 repeated TensorShapeProto
//   TensorShapeProto    dim=2 repeated {size=1 int64}, unknown_rank=3 bool
//   TaggedRunMetadata   tag=1 string, run_metadata=2 bytes (an encoded RunMetadata)
//   RunMetadata         step_stats=1 StepStats
//   StepStats           dev_stats=1 repeated DeviceStepStats
//   DeviceStepStats     device=1 string, node_stats=2 repeated NodeExecStats
//   NodeExecStats       node_name=1, all_start_micros=2, op_start_rel_micros=3, op_end_rel_micros=4,
//                       all_end_rel_micros=5 (int64), memory=6 repeated AllocatorMemoryUsed,
//                       timeline_label=8 string, thread_id=10 uint32
//   AllocatorMemoryUsed allocator_name=1, total_bytes=2, peak_bytes=3, live_bytes=4 (int64)
// As in proto3, a scalar equal to 0 (or an empty string) is left out, except members of a oneof
// (an AttrValue's value always goes out).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "gradus/core/compiled.hpp"
#include "gradus/detail/protobuf.hpp"

namespace gradus::summary {

namespace detail {
namespace proto = ::gradus::detail::proto;  // the protocol-buffer wire format, shared with gd::io
}  // namespace detail

/// TensorFlow's DataType enum (types.proto), the values a graph uses.
enum class DataType : int {
  DT_INVALID = 0,
  DT_FLOAT = 1,
  DT_DOUBLE = 2,
  DT_INT32 = 3,
  DT_UINT8 = 4,
  DT_INT16 = 5,
  DT_INT8 = 6,
  DT_STRING = 7,
  DT_INT64 = 9,
  DT_BOOL = 10,
};

/// The DataType of a gradus dtype name: "float32" -> DT_FLOAT, "float64" -> DT_DOUBLE,
/// "int32", "int64", "uint8", "int16", "int8", "bool"; DT_INVALID for anything else ("").
DataType data_type(std::string_view dtype);

/// A tensor shape as TensorShapeProto holds it: one size per dimension ([] is a scalar).
using TensorShape = std::vector<int64_t>;

/// One attr value of a node: a string, an int, a float, a type, a shape or a list of shapes.
///   AttrValue{std::string("SAME")}, AttrValue{int64_t(2)}, AttrValue{0.5f},
///   AttrValue{DataType::DT_FLOAT}, AttrValue{TensorShape{32, 10}},
///   AttrValue{std::vector<TensorShape>{{32, 10}}}   // "_output_shapes"
struct AttrValue {
  std::variant<std::string, int64_t, float, DataType, TensorShape, std::vector<TensorShape>> value;
};

/// One node (NodeDef). `name` is unique in its graph; '/' separates name scopes, by which
/// TensorBoard groups nodes ("dense1/matmul_0"). `inputs` are names of other nodes.
struct GraphNode {
  std::string name = {};
  std::string op = {};  // "MatMul", "VariableV2", "Placeholder", or any name: TensorBoard draws it
  std::vector<std::string> inputs = {};
  std::string device = {};  // "" or "/job:localhost/replica:0/task:0/device:CPU:0"
  std::vector<std::pair<std::string, AttrValue>> attrs = {};  // written in this order
};

/// A graph (GraphDef): its nodes and the producer version of VersionDef.
///   GraphDef g{.nodes = {{.name = "x", .op = "Placeholder"}, {.name = "y", .op = "Relu", .inputs = {"x"}}}};
struct GraphDef {
  std::vector<GraphNode> nodes = {};
  int producer = 22;  // TensorFlow's GraphDef version; TensorBoard draws any
};

/// Memory one node used from one allocator (AllocatorMemoryUsed); TensorBoard shows the sum of
/// the positive total_bytes of a node.
struct AllocatorMemoryUsed {
  std::string allocator_name = {};  // "cpu"
  int64_t total_bytes = 0;     // bytes the node allocated
  int64_t peak_bytes = 0;      // the node's high-water mark
  int64_t live_bytes = 0;      // bytes still allocated when it ended
};

/// How one run of one node went (NodeExecStats). Times are in microseconds; a node ran from
/// all_start_micros to all_start_micros + all_end_rel_micros, which TensorBoard shows as its
/// compute time.
struct NodeExecStats {
  std::string node_name = {};  // a GraphNode's name
  int64_t all_start_micros = 0;
  int64_t op_start_rel_micros = 0;
  int64_t op_end_rel_micros = 0;
  int64_t all_end_rel_micros = 0;
  std::vector<AllocatorMemoryUsed> memory = {};
  std::string timeline_label = {};  // "matmul [32,784] x [784,10]", shown by timeline tools
  uint32_t thread_id = 0;
};

/// The nodes run on one device (DeviceStepStats).
struct DeviceStepStats {
  std::string device = {};  // "/job:localhost/replica:0/task:0/device:CPU:0"
  std::vector<NodeExecStats> node_stats = {};
};

/// The statistics of one step (StepStats), as RunMetadata.step_stats carries them.
struct StepStats {
  std::vector<DeviceStepStats> dev_stats = {};
};

namespace detail {

std::string encode_shape(const TensorShape& shape);

std::string encode_attr_value(const AttrValue& a);

std::string encode_node(const GraphNode& n);

std::string encode_node_exec_stats(const NodeExecStats& s);

}  // namespace detail

/// The GraphDef message of `g` (the bytes of Event.graph_def).
///   std::string bytes = gd::summary::encode_graph_def(g);
std::string encode_graph_def(const GraphDef& g);

/// The StepStats message of `s`.
std::string encode_step_stats(const StepStats& s);

/// The RunMetadata message {step_stats} of `s`.
std::string encode_run_metadata(const StepStats& s);

/// Event {wall_time, graph_def} (not framed).
std::string encode_graph_event(double wall_time, const GraphDef& g);

/// Event {wall_time, step, tagged_run_metadata {tag, run_metadata {step_stats}}} (not framed).
std::string encode_run_metadata_event(double wall_time, int64_t step, std::string_view tag,
                                      const StepStats& s);

}  // namespace gradus::summary

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::summary {
GRADUS_INLINE DataType data_type(std::string_view dtype) {
  if (dtype == "float32") return DataType::DT_FLOAT;
  if (dtype == "float64") return DataType::DT_DOUBLE;
  if (dtype == "int32") return DataType::DT_INT32;
  if (dtype == "int64") return DataType::DT_INT64;
  if (dtype == "uint8") return DataType::DT_UINT8;
  if (dtype == "int16") return DataType::DT_INT16;
  if (dtype == "int8") return DataType::DT_INT8;
  if (dtype == "bool") return DataType::DT_BOOL;
  return DataType::DT_INVALID;
}
}  // namespace gradus::summary

namespace gradus::summary::detail {
GRADUS_INLINE std::string encode_shape(const TensorShape& shape) {
  std::string s;
  for (int64_t size : shape) {
    std::string dim;
    if (size != 0) proto::put_int(dim, 1, size);
    proto::put_bytes(s, 2, dim);
  }
  return s;
}

GRADUS_INLINE std::string encode_attr_value(const AttrValue& a) {
  std::string v;
  std::visit(
      [&](const auto& x) {
        using X = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<X, std::string>) {
          proto::put_bytes(v, 2, x);
        } else if constexpr (std::is_same_v<X, int64_t>) {
          proto::put_int(v, 3, x);
        } else if constexpr (std::is_same_v<X, float>) {
          proto::put_float(v, 4, x);
        } else if constexpr (std::is_same_v<X, DataType>) {
          proto::put_int(v, 6, int64_t(x));
        } else if constexpr (std::is_same_v<X, TensorShape>) {
          proto::put_bytes(v, 7, encode_shape(x));
        } else {
          std::string list;
          for (const TensorShape& s : x) proto::put_bytes(list, 7, encode_shape(s));
          proto::put_bytes(v, 1, list);
        }
      },
      a.value);
  return v;
}

GRADUS_INLINE std::string encode_node(const GraphNode& n) {
  std::string m;
  if (!n.name.empty()) proto::put_bytes(m, 1, n.name);
  if (!n.op.empty()) proto::put_bytes(m, 2, n.op);
  for (const std::string& in : n.inputs) proto::put_bytes(m, 3, in);
  if (!n.device.empty()) proto::put_bytes(m, 4, n.device);
  for (const auto& [key, value] : n.attrs) {
    std::string entry;
    proto::put_bytes(entry, 1, key);
    proto::put_bytes(entry, 2, encode_attr_value(value));
    proto::put_bytes(m, 5, entry);
  }
  return m;
}

GRADUS_INLINE std::string encode_node_exec_stats(const NodeExecStats& s) {
  std::string m;
  if (!s.node_name.empty()) proto::put_bytes(m, 1, s.node_name);
  if (s.all_start_micros != 0) proto::put_int(m, 2, s.all_start_micros);
  if (s.op_start_rel_micros != 0) proto::put_int(m, 3, s.op_start_rel_micros);
  if (s.op_end_rel_micros != 0) proto::put_int(m, 4, s.op_end_rel_micros);
  if (s.all_end_rel_micros != 0) proto::put_int(m, 5, s.all_end_rel_micros);
  for (const AllocatorMemoryUsed& a : s.memory) {
    std::string u;
    if (!a.allocator_name.empty()) proto::put_bytes(u, 1, a.allocator_name);
    if (a.total_bytes != 0) proto::put_int(u, 2, a.total_bytes);
    if (a.peak_bytes != 0) proto::put_int(u, 3, a.peak_bytes);
    if (a.live_bytes != 0) proto::put_int(u, 4, a.live_bytes);
    proto::put_bytes(m, 6, u);
  }
  if (!s.timeline_label.empty()) proto::put_bytes(m, 8, s.timeline_label);
  if (s.thread_id != 0) proto::put_int(m, 10, s.thread_id);
  return m;
}
}  // namespace gradus::summary::detail

namespace gradus::summary {
GRADUS_INLINE std::string encode_graph_def(const GraphDef& g) {
  std::string out;
  for (const GraphNode& n : g.nodes) detail::proto::put_bytes(out, 1, detail::encode_node(n));
  std::string versions;
  if (g.producer != 0) detail::proto::put_int(versions, 1, g.producer);
  detail::proto::put_bytes(out, 4, versions);
  return out;
}

GRADUS_INLINE std::string encode_step_stats(const StepStats& s) {
  std::string out;
  for (const DeviceStepStats& d : s.dev_stats) {
    std::string dev;
    if (!d.device.empty()) detail::proto::put_bytes(dev, 1, d.device);
    for (const NodeExecStats& n : d.node_stats) detail::proto::put_bytes(dev, 2, detail::encode_node_exec_stats(n));
    detail::proto::put_bytes(out, 1, dev);
  }
  return out;
}

GRADUS_INLINE std::string encode_run_metadata(const StepStats& s) {
  std::string out;
  detail::proto::put_bytes(out, 1, encode_step_stats(s));
  return out;
}

GRADUS_INLINE std::string encode_graph_event(double wall_time, const GraphDef& g) {
  std::string e;
  if (wall_time != 0) detail::proto::put_double(e, 1, wall_time);
  detail::proto::put_bytes(e, 4, encode_graph_def(g));
  return e;
}

GRADUS_INLINE std::string encode_run_metadata_event(double wall_time, int64_t step, std::string_view tag,
                                                    const StepStats& s) {
  std::string tagged;
  detail::proto::put_bytes(tagged, 1, tag);
  detail::proto::put_bytes(tagged, 2, encode_run_metadata(s));
  std::string e;
  if (wall_time != 0) detail::proto::put_double(e, 1, wall_time);
  if (step != 0) detail::proto::put_int(e, 2, step);
  detail::proto::put_bytes(e, 8, tagged);
  return e;
}
}  // namespace gradus::summary
#endif  // GRADUS_DEFINE_COMPILED
