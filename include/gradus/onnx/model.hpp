// gradus/onnx/model.hpp — an ONNX model as a gradus module: gd::onnx::load.
//
// `gd::onnx::load("net.onnx")` reads an ONNX model (a ModelProto, any opset from 7 to 17) and
// returns a `gd::onnx::Model`: a `gd::nn::Module<float>` whose parameters are the model's float
// initializers, named by their ONNX names ("fc1.weight" is the parameter `weight` of the child
// module `fc1`, so `named_parameters()` gives the ONNX names back), and whose forward pass runs
// each node of the graph as gradus ops. It is differentiable (fine-tune it with any optimizer, or
// freeze it: `LoadOptions::trainable`, `freeze()`), runs on the device its parameters are moved
// to (`model.to(gd::cuda(0))`), and computes every batch size the graph allows.
//
//   auto net = gd::onnx::load("mnist.onnx");
//   gd::Var<float> logits = net(gd::Var<float>::constant(images));   // [N, 1, 28, 28] -> [N, 10]
//
// ONNX tensors are NCHW; a convolution or pooling node transposes to gradus' NHWC and back.
// The graph computes in float32 (float16, bfloat16 and double initializers are converted to
// float; bool tensors are float masks of 0 and 1) and carries int64 tensors (shapes, indices) on
// the host. An operator gradus does not import, an attribute value it does not support, or an
// element type other than float32, int64 and bool at the graph's inputs is a gd::value_error at load time that names every such node, so
// that a model either loads whole or says all that stops it. docs/onnx.md lists the operators.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "gradus/autodiff/var.hpp"
#include "gradus/core/tensor.hpp"
#include "gradus/nn/module.hpp"

namespace gradus::onnx {

/// A tensor of an ONNX graph, in one of the two element types the importer computes with.
using Value = std::variant<Tensor<float>, Tensor<int64_t>>;

/// Reads a serialized TensorProto (the input_0.pb / output_0.pb files of ONNX's test data).
/// FLOAT comes back as Tensor<float>; INT64, INT32, INT16, INT8, UINT32, UINT16 and UINT8 as
/// Tensor<int64_t>; DOUBLE, FLOAT16 and BFLOAT16 are converted to float, and BOOL to a float
/// mask of 0 and 1 (as gradus' comparisons give). Anything else (strings, complex, external
/// data) is a gd::value_error naming the type; unreadable bytes are a gd::io_error.
Value read_tensor(const std::string& path);
/// The same, from the bytes of a TensorProto; `what` names them in errors.
Value parse_tensor(std::string_view bytes, std::string_view what = "tensor");

/// A tensor as the bytes of a TensorProto (FLOAT or INT64, raw little-endian data), named
/// `name`: what read_tensor reads, and what ONNX's tools read (onnx.numpy_helper.to_array).
std::string serialize_tensor(const Value& value, std::string_view name = {});
/// Writes serialize_tensor(value) to `path` (atomically).
void write_tensor(const std::string& path, const Value& value, std::string_view name = {});

/// How `load` makes the module.
struct LoadOptions {
  bool trainable = true;  ///< false: every parameter starts frozen (as `model.freeze()`)
};

namespace detail {
struct Graph;
}  // namespace detail

/// An imported ONNX graph as a module (make one with gd::onnx::load).
class Model : public nn::Module<float, Model> {
 public:
  ~Model() override;
  Model(Model&&) noexcept;
  Model& operator=(Model&&) noexcept;

  /// Runs the graph on one Var per graph input, in `input_names()` order, and returns one Var
  /// per graph output (an int64 output, such as ArgMax's, comes back as a float constant).
  std::vector<Var<float>> forward(const std::vector<Var<float>>& inputs);
  /// The graph of one input and one output.
  Var<float> forward(const Var<float>& x);
  /// Runs the graph without recording gradients on inputs of either element type (int64 inputs,
  /// such as an Embedding's token ids, need this form), giving each output in its own type.
  std::vector<Value> run(const std::vector<Value>& inputs);

  const std::vector<std::string>& input_names() const;
  const std::vector<std::string>& output_names() const;
  /// The default-domain opset the model was written for.
  int64_t opset() const;
  /// The distinct operator types of the graph, in first-use order.
  std::vector<std::string> operators() const;

 private:
  friend Model parse(std::string_view bytes, const LoadOptions& options, std::string_view what);
  explicit Model(std::unique_ptr<detail::Graph> graph);
  std::unique_ptr<detail::Graph> graph_;
};

/// Loads the ONNX model at `path`. A file that is not an ONNX model is a gd::io_error; a model
/// with operators, attributes or input types gradus does not import is a gd::value_error that
/// lists each (operator, node name, why).
Model load(const std::string& path, const LoadOptions& options = {});
/// The same, from the bytes of a ModelProto; `what` names them in errors.
Model parse(std::string_view bytes, const LoadOptions& options = {}, std::string_view what = "model");

/// The ONNX operator types (default domain) that `load` imports, sorted.
std::vector<std::string> supported_operators();

}  // namespace gradus::onnx
