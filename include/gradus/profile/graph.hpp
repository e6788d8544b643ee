// gradus/profile/graph.hpp — the TensorBoard graph of a profiled run (graph_def) and the
// per-node compute time and memory of its events (step_stats), from the profiler's events.
//
//   gd::summary::FileWriter w("runs/mlp");
//   w.graph(gd::profile::graph_def(profiler.events(), profiler.parameters()));
//   w.run_metadata("step_1", 1, gd::profile::step_stats(profiler.events()));
//
// Which events make nodes. Events are taken in the order they started (on each thread, an
// enclosing event before the events nested in it, by `depth`).
//  - A forward event that created a tape node (`node != 0`) is one graph node, unless it is
//    nested in a backward event (ops that a backward pass runs are not part of the model's
//    graph) or in a forward event that created the same tape node (the inner event is then how
//    the outer op computed its result, and only the outer one is a node).
//  - A backward event that is not nested in another backward event and runs the tape node of a
//    graph node F makes the node "gradients/F" of op "<F's op>_grad" (one per F, however many
//    backward events ran it).
//  - A parameter (ParameterInfo) is a node of op "VariableV2", which TensorBoard draws as a
//    variable.
//  - A tape node read by a graph node that no earlier graph node created and no parameter owns
//    (the input batch, a leaf Var) is a node of op "Placeholder". A Tensor operand
//    (input node 0) has no node and no edge.
//
// Names ('/' separates name scopes; TensorBoard draws a box per scope):
//  - forward node: "<scope>/<op>_<k>", or "<op>_<k>" for an event outside any module, where
//    <op> is the event's name and k counts the earlier nodes of the same scope and op from 0:
//    "dense1/matmul_0", "dense1/add_0", "relu_0", "relu_1";
//  - gradient node: "gradients/" + its forward node's name: "gradients/dense1/matmul_0";
//  - parameter: "<scope>/<last part of its dotted name>", so it sits with its module's ops:
//    {name "0.kernel", scope "net/0"} -> "net/0/kernel"; with no scope, the dotted name with '.'
//    read as '/': "dense1.kernel" -> "dense1/kernel";
//  - placeholder: "input_<n>", n counting from 0 in the order the graph first reads them.
// Characters outside [A-Za-z0-9_.>] become '_' (and empty scope parts are dropped), as TensorFlow
// allows no others in a node name. Should a name be taken already, "_1", "_2", ... is appended;
// names are given in the order forward, gradient, parameter, placeholder, so the names of
// forward and gradient nodes never depend on the parameters.
//
// Edges and attrs:
//  - a forward node's inputs are the nodes of its input_nodes, in order (a repeated operand
//    appears twice), each the latest graph node created with that tape node before the event;
//  - a gradient node "gradients/F" reads F and the gradient nodes of F's consumers (the graph
//    nodes that read F), as TensorFlow's gradient graph does;
//  - attrs: forward node {"T": its dtype, "_output_shapes": [output_shape]}; gradient node {"T",
//    "_output_shapes": F's input shapes (the gradients it computes)}; VariableV2 and Placeholder
//    {"dtype", "shape", "_output_shapes": [shape]}. "T"/"dtype" are left out for a dtype
//    TensorFlow has no DataType for.
#pragma once
#include <algorithm>
#include <cstdint>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gradus/core/compiled.hpp"
#include "gradus/core/error.hpp"
#include "gradus/profile/event.hpp"
#include "gradus/summary/graph.hpp"

namespace gradus::profile {

/// The device the step statistics name: TensorFlow's name for the first CPU.
inline constexpr std::string_view cpu_device = "/job:localhost/replica:0/task:0/device:CPU:0";

namespace detail {

/// `s` with every character outside [A-Za-z0-9_.>] (and '/' where `slashes`) replaced by '_';
/// with `slashes`, empty '/'-separated parts are dropped ("/a//b/" -> "a/b").
std::string graph_name_part(std::string_view s, bool slashes);

inline summary::TensorShape graph_shape(const Shape& s) { return {s.begin(), s.end()}; }

/// The GraphDef of a run and, for each event, the name of the node its time counts for ("" for
/// none): the forward node it created, or the gradient node of a backward event.
struct NamedGraph {
  summary::GraphDef graph;
  std::vector<std::string> node_of_event;
};

/// Builds the graph by the rules of the file comment; `who` names the caller in errors.
NamedGraph build_graph(const std::vector<Event>& events, const std::vector<ParameterInfo>& params, const char* who);

}  // namespace detail

/// The TensorBoard graph of `events` (a Profiler's, or hand-made), with a VariableV2 node per
/// parameter of `params`; the rules for nodes, names, edges and attrs are in the file comment.
///   w.graph(gd::profile::graph_def(profiler.events(), profiler.parameters()));
/// value_error for an event with end_ns < start_ns, or a negative depth or thread.
summary::GraphDef graph_def(const std::vector<Event>& events, const std::vector<ParameterInfo>& params = {});

/// The compute time and memory of every graph node of `events` (graph_def's forward and gradient
/// nodes, same names), on one device `cpu_device`: one NodeExecStats per forward event that is
/// a graph node and per backward event that gradient nodes count, in the order they started.
/// Times are whole microseconds since the earliest event began: all_start_micros is the start
/// rounded down, all_end_rel_micros (= op_end_rel_micros) reaches the end rounded up, so any
/// event that took time lasts >= 1 µs. Memory, when the event allocated any: allocator "cpu",
/// total_bytes = max(peak_bytes, alloc_bytes), peak_bytes, live_bytes = max(alloc_bytes, 0).
/// timeline_label is "<op>(<input shapes>)", thread_id the event's thread.
///   w.run_metadata("step_1", 1, gd::profile::step_stats(profiler.events()));
/// value_error as graph_def.
summary::StepStats step_stats(const std::vector<Event>& events);

}  // namespace gradus::profile

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::profile {
GRADUS_INLINE std::string detail::graph_name_part(std::string_view s, bool slashes) {
  std::string out;
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                    c == '.' || c == '>';
    if (c == '/' && slashes) {
      if (!out.empty() && out.back() != '/') out.push_back('/');
    } else {
      out.push_back(ok ? c : '_');
    }
  }
  if (!out.empty() && out.back() == '/') out.pop_back();
  return out;
}

GRADUS_INLINE detail::NamedGraph detail::build_graph(const std::vector<Event>& events,
                                                     const std::vector<ParameterInfo>& params, const char* who) {
  using summary::AttrValue;
  using summary::GraphNode;
  using summary::TensorShape;
  const size_t n = events.size();
  for (size_t i = 0; i < n; ++i) {
    const Event& e = events[i];
    GRADUS_CHECK(value_error, e.end_ns >= e.start_ns && e.depth >= 0 && e.thread >= 0, who, ": event ", i, " ('",
                 e.name, "'): expected end_ns >= start_ns, depth >= 0 and thread >= 0, got start_ns ", e.start_ns,
                 ", end_ns ", e.end_ns, ", depth ", e.depth, ", thread ", e.thread);
  }
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const Event &x = events[a], &y = events[b];
    if (x.start_ns != y.start_ns) return x.start_ns < y.start_ns;
    if (x.thread != y.thread) return x.thread < y.thread;
    return x.depth < y.depth;
  });

  // An input of a forward node: the event that created it, or a leaf tape node.
  struct Input {
    int64_t producer = -1;  // event index
    uint64_t leaf = 0;
    size_t slot = 0;  // position in the consumer's input_nodes
  };
  std::set<std::string> used;
  auto unique = [&](std::string name) {
    if (used.count(name)) {
      int k = 1;
      while (used.count(name + "_" + std::to_string(k))) ++k;
      name += "_" + std::to_string(k);
    }
    used.insert(name);
    return name;
  };

  NamedGraph out;
  out.node_of_event.assign(n, "");
  std::vector<std::vector<Input>> inputs(n);
  std::vector<int64_t> grad_of(n, -1);      // backward event -> the forward event of its node
  std::vector<size_t> forward_order;        // graph forward events, in order
  std::vector<size_t> grad_order;           // forward events with a gradient node, by first backward
  std::vector<bool> has_grad(n, false);     // forward event -> in grad_order
  std::vector<uint64_t> leaf_order;         // leaves read, by first read
  std::unordered_map<uint64_t, size_t> producer;   // tape node -> latest forward event creating it
  std::set<uint64_t> leaves_seen;
  std::map<std::string, int64_t> counter;          // "<scope>/<op>" -> nodes so far
  std::vector<std::vector<size_t>> open;           // per thread: the events enclosing, by depth

  for (size_t i : order) {
    const Event& e = events[i];
    if (open.size() <= size_t(e.thread)) open.resize(size_t(e.thread) + 1);
    auto& stack = open[size_t(e.thread)];
    // Keep the ancestors: on this thread, the latest events of depth 0 .. depth-1 that enclose e.
    stack.resize(std::min(stack.size(), size_t(e.depth)));
    while (!stack.empty() && events[stack.back()].end_ns < e.start_ns) stack.pop_back();
    bool under_backward = false, same_node_above = false;
    for (size_t a : stack) {
      under_backward |= events[a].kind == EventKind::backward;
      same_node_above |= events[a].kind == EventKind::forward && e.node != 0 && events[a].node == e.node;
    }
    stack.push_back(i);
    if (under_backward || e.node == 0) continue;
    if (e.kind == EventKind::forward && !same_node_above) {
      const std::string scope = graph_name_part(e.scope, true);
      std::string op = graph_name_part(e.name, false);
      if (op.empty()) op = "op";
      const std::string key = scope.empty() ? op : scope + "/" + op;
      out.node_of_event[i] = unique(key + "_" + std::to_string(counter[key]++));
      for (size_t j = 0; j < e.input_nodes.size(); ++j) {
        const uint64_t id = e.input_nodes[j];
        if (id == 0) continue;
        if (auto p = producer.find(id); p != producer.end()) {
          inputs[i].push_back({int64_t(p->second), 0, j});
        } else {
          inputs[i].push_back({-1, id, j});
          if (leaves_seen.insert(id).second) leaf_order.push_back(id);
        }
      }
      producer[e.node] = i;
      forward_order.push_back(i);
    } else if (e.kind == EventKind::backward) {
      if (auto p = producer.find(e.node); p != producer.end()) {
        if (!has_grad[p->second]) grad_order.push_back(p->second);
        has_grad[p->second] = true;
        grad_of[i] = int64_t(p->second);
      }
    }
  }

  std::vector<std::string> grad_name(n);
  for (size_t f : grad_order) grad_name[f] = unique("gradients/" + out.node_of_event[f]);
  for (size_t i = 0; i < n; ++i)
    if (grad_of[i] >= 0) out.node_of_event[i] = grad_name[size_t(grad_of[i])];

  auto typed = [](GraphNode& node, const char* key, const std::string& dtype) {
    if (const auto t = summary::data_type(dtype); t != summary::DataType::DT_INVALID)
      node.attrs.emplace_back(key, AttrValue{t});
  };
  auto& nodes = out.graph.nodes;
  std::unordered_map<uint64_t, std::string> leaf_name;
  for (const ParameterInfo& p : params) {
    std::string path = p.name;
    if (p.scope.empty()) std::replace(path.begin(), path.end(), '.', '/');
    else path = p.scope + "/" + p.name.substr(p.name.rfind('.') + 1);  // npos + 1 == 0: the whole name
    GraphNode node{.name = unique(graph_name_part(path, true)), .op = "VariableV2"};
    typed(node, "dtype", p.dtype);
    node.attrs.emplace_back("shape", AttrValue{graph_shape(p.shape)});
    node.attrs.emplace_back("_output_shapes", AttrValue{std::vector<TensorShape>{graph_shape(p.shape)}});
    if (p.node != 0) leaf_name.emplace(p.node, node.name);
    nodes.push_back(std::move(node));
  }
  std::unordered_map<uint64_t, std::string> placeholder;
  for (uint64_t id : leaf_order)
    if (!leaf_name.count(id)) placeholder[id] = "";
  int64_t next_input = 0;
  for (uint64_t id : leaf_order)
    if (placeholder.count(id)) placeholder[id] = unique("input_" + std::to_string(next_input++));

  std::vector<std::vector<size_t>> consumers(n);  // forward event -> forward events reading it
  for (size_t i : forward_order) {
    const Event& e = events[i];
    GraphNode node{.name = out.node_of_event[i], .op = e.name};
    for (const Input& in : inputs[i]) {
      if (in.producer >= 0) {
        node.inputs.push_back(out.node_of_event[size_t(in.producer)]);
        auto& c = consumers[size_t(in.producer)];
        if (c.empty() || c.back() != i) c.push_back(i);
        continue;
      }
      if (auto l = leaf_name.find(in.leaf); l != leaf_name.end()) {
        node.inputs.push_back(l->second);
        continue;
      }
      // First read of a leaf that is no parameter: its placeholder goes just before this node,
      // with this node's dtype and the operand's shape.
      const std::string& name = placeholder.at(in.leaf);
      node.inputs.push_back(name);
      GraphNode ph{.name = name, .op = "Placeholder"};
      typed(ph, "dtype", e.dtype);
      if (in.slot < e.input_shapes.size()) {
        const TensorShape s = graph_shape(e.input_shapes[in.slot]);
        ph.attrs.emplace_back("shape", AttrValue{s});
        ph.attrs.emplace_back("_output_shapes", AttrValue{std::vector<TensorShape>{s}});
      }
      leaf_name.emplace(in.leaf, name);
      nodes.push_back(std::move(ph));
    }
    typed(node, "T", e.dtype);
    node.attrs.emplace_back("_output_shapes", AttrValue{std::vector<TensorShape>{graph_shape(e.output_shape)}});
    nodes.push_back(std::move(node));
  }
  for (size_t f : grad_order) {
    const Event& e = events[f];
    GraphNode node{.name = grad_name[f], .op = e.name + "_grad", .inputs = {out.node_of_event[f]}};
    for (size_t c : consumers[f])
      if (!grad_name[c].empty()) node.inputs.push_back(grad_name[c]);
    typed(node, "T", e.dtype);
    std::vector<TensorShape> shapes;
    for (const Shape& s : e.input_shapes) shapes.push_back(graph_shape(s));
    node.attrs.emplace_back("_output_shapes", AttrValue{std::move(shapes)});
    nodes.push_back(std::move(node));
  }
  return out;
}

GRADUS_INLINE summary::GraphDef graph_def(const std::vector<Event>& events, const std::vector<ParameterInfo>& params) {
  return detail::build_graph(events, params, "graph_def").graph;
}

GRADUS_INLINE summary::StepStats step_stats(const std::vector<Event>& events) {
  const detail::NamedGraph g = detail::build_graph(events, {}, "step_stats");
  summary::StepStats out;
  if (events.empty()) return out;
  int64_t t0 = events[0].start_ns;
  for (const Event& e : events) t0 = std::min(t0, e.start_ns);
  std::vector<size_t> order;
  for (size_t i = 0; i < events.size(); ++i)
    if (!g.node_of_event[i].empty()) order.push_back(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return events[a].start_ns < events[b].start_ns; });
  summary::DeviceStepStats dev{.device = std::string(cpu_device)};
  for (size_t i : order) {
    const Event& e = events[i];
    const int64_t start = (e.start_ns - t0) / 1000, end = (e.end_ns - t0 + 999) / 1000;
    std::string label = e.name + "(";
    for (size_t j = 0; j < e.input_shapes.size(); ++j) label += (j ? ", " : "") + e.input_shapes[j].str();
    summary::NodeExecStats s{.node_name = g.node_of_event[i],
                             .all_start_micros = start,
                             .op_start_rel_micros = 0,
                             .op_end_rel_micros = end - start,
                             .all_end_rel_micros = end - start,
                             .timeline_label = label + ")",
                             .thread_id = uint32_t(e.thread)};
    const int64_t total = std::max(e.peak_bytes, e.alloc_bytes);
    if (total > 0)
      s.memory.push_back({.allocator_name = "cpu",
                          .total_bytes = total,
                          .peak_bytes = std::max<int64_t>(e.peak_bytes, 0),
                          .live_bytes = std::max<int64_t>(e.alloc_bytes, 0)});
    dev.node_stats.push_back(std::move(s));
  }
  out.dev_stats.push_back(std::move(dev));
  return out;
}
}  // namespace gradus::profile
#endif  // GRADUS_DEFINE_COMPILED
