// src/onnx/graph.hpp — the ONNX graph as gd::onnx holds it: the nodes of a ModelProto with their
// attributes, inputs and outputs numbered as value slots, free of protobuf (load.cpp fills it,
// run.cpp runs it).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "gradus/onnx/model.hpp"

namespace gradus::onnx::detail {

/// One attribute of a node (AttributeProto), the kinds the importer reads.
struct Attr {
  enum Kind { kFloat = 1, kInt = 2, kString = 3, kTensor = 4, kGraph = 5, kFloats = 6, kInts = 7, kStrings = 8, kOther = 0 };
  Kind kind = kOther;
  float f = 0;
  int64_t i = 0;
  std::string s;
  std::vector<float> floats;
  std::vector<int64_t> ints;
  std::vector<std::string> strings;
  std::optional<Value> t;
};

struct Exec;

/// One node (NodeProto). `in` and `out` are value slots; -1 is an optional input or output left
/// out (an empty name in the file).
struct Node {
  std::string op, name;
  std::vector<int> in, out;
  std::map<std::string, Attr, std::less<>> attrs;
  void (*run)(const Exec&) = nullptr;  // from op_table()

  const Attr* find(std::string_view key) const {
    auto it = attrs.find(key);
    return it == attrs.end() ? nullptr : &it->second;
  }
  bool has(std::string_view key) const { return find(key) != nullptr; }
  int64_t i(std::string_view key, int64_t otherwise) const {
    const Attr* a = find(key);
    return a ? a->i : otherwise;
  }
  float f(std::string_view key, float otherwise) const {
    const Attr* a = find(key);
    return a ? a->f : otherwise;
  }
  std::string s(std::string_view key, std::string otherwise) const {
    const Attr* a = find(key);
    return a ? a->s : otherwise;
  }
  std::vector<int64_t> ints(std::string_view key, std::vector<int64_t> otherwise = {}) const {
    const Attr* a = find(key);
    return a ? a->ints : otherwise;
  }
  /// "Conv node 'conv1'" (or "Conv node #3" for an unnamed one), for messages.
  std::string label;
  /// Input k is present.
  bool given(size_t k) const { return k < in.size() && in[k] >= 0; }
  /// Output k is asked for.
  bool wanted(size_t k) const { return k < out.size() && out[k] >= 0; }
};

/// What a value slot holds while the graph runs: nothing yet, a float Var, or an int64 tensor
/// on the host.
using Slot = std::variant<std::monostate, Var<float>, Tensor<int64_t>>;

/// An initializer: its slot, ONNX name and value, and what it becomes in the module.
struct Initializer {
  int slot = -1;
  std::string name;
  Value value;
  bool buffer = false;  ///< a statistic (BatchNormalization's mean and variance): a buffer, not a parameter
  bool constant = false;  ///< a constant of the forward pass (export_model marks them): neither
};

struct Graph {
  int64_t opset = 0;
  std::vector<Node> nodes;
  std::vector<std::string> slot_names;
  std::vector<int> inputs, outputs;  // slots
  std::vector<std::string> input_names, output_names;
  std::vector<int> input_types;  // TensorProto element types: 1 FLOAT, 7 INT64
  std::vector<Initializer> initializers;  // until the Model registers them
  std::vector<std::pair<int, Slot>> constants;  // int64 initializers and the float ones not registered
  std::vector<std::pair<int, Var<float>>> params;  // slot -> parameter
  struct BufferRef {
    int slot;
    nn::Module<float>* owner;  // nullptr: the Model itself
    std::string name;
  };
  std::vector<BufferRef> buffers;
};

/// A child module that holds what the initializers' dotted names put in it ("fc1.weight":
/// the parameter `weight` of the child `fc1`).
struct Scope final : nn::Module<float> {
  using nn::Module<float>::register_parameter;
  using nn::Module<float>::register_buffer;
  using nn::Module<float>::register_module;
  Tensor<float> get(const std::string& name) { return buffer(name); }
};

/// The run of one node: its inputs and outputs, and where it runs.
struct Exec {
  const Node& node;
  std::vector<Slot>& env;
  int64_t opset;
  Device device;  // where the graph's float values live in this run

  bool given(size_t k) const { return node.given(k); }
  const Slot& slot(size_t k) const;
  bool is_int(size_t k) const { return std::holds_alternative<Tensor<int64_t>>(slot(k)); }
  /// Input k as a float Var (an int64 tensor is converted to a float constant).
  Var<float> var(size_t k) const;
  /// Input k as int64 values on the host (a float Var is truncated, as Cast does).
  Tensor<int64_t> ints(size_t k) const;
  /// Input k as a list of int64 (a shape, axes, pads).
  std::vector<int64_t> int_list(size_t k) const;
  /// Input k, a one-element float tensor, as a number.
  double number(size_t k) const;
  void set(size_t k, Slot v) const;
  [[noreturn]] void fail(std::string_view why) const;
};

using OpRun = void (*)(const Exec&);
/// Returns why a node cannot be imported ("" when it can), from its attributes and opset alone.
using OpCheck = std::string (*)(const Node&, int64_t opset);
struct OpEntry {
  OpRun run;
  OpCheck check;  // may be null: every form is supported
};
/// Every operator the importer knows, by ONNX op type (run.cpp).
const std::map<std::string, OpEntry, std::less<>>& op_table();

/// The error of a node that cannot run (a shape the op refuses, say), naming it.
[[noreturn]] void node_error(const Node& n, std::string_view why);

}  // namespace gradus::onnx::detail
