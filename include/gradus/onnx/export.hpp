// gradus/onnx/export.hpp — a module's inference forward pass as an ONNX model:
// gd::onnx::export_model.
//
// The model is traced: the module runs once, in evaluation mode and without recording
// gradients, on an example input, and every op its forward runs (matmul, conv2d, an elementwise
// expression, a reduction, reshape, lstm_sequence, ...) becomes ONNX nodes, with the parameters
// and buffers as initializers named by their paths (`named_parameters()`: "0.kernel",
// "encoder.lstm.recurrent_kernel"). Tensors the forward reads that are neither become constant
// initializers. So whatever a forward computes with gradus ops is exported, custom modules
// included; an op with no ONNX form (a custom_op, an image op) is a gd::value_error naming it.
// The example's values do not matter, only its shape and type; with `dynamic_batch`, axis 0 of
// the inputs and outputs is a named dimension, and reshapes that kept the example's batch keep
// any batch.
//
//   gd::onnx::export_model(net, x_example, "mlp.onnx");                  // a Tensor<float> input
//   gd::onnx::export_model(lm, ids_example, "lm.onnx", {.opset = 17});  // a Tensor<int64_t> input
//
// NHWC convolutions and pooling become ONNX's NCHW operators between two Transposes (runtimes
// fold them); an LSTM run as gd::lstm_sequence becomes an ONNX LSTM (gates reordered to i, o, f,
// c). docs/onnx.md lists the ops.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "gradus/autodiff/var.hpp"
#include "gradus/core/tensor.hpp"
#include "gradus/nn/module.hpp"
#include "gradus/onnx/model.hpp"

namespace gradus::onnx {

/// How export_model writes the model.
struct ExportOptions {
  int64_t opset = 13;          ///< the default-domain opset, 13 to 17
  bool dynamic_batch = true;   ///< axis 0 of every input and output is the dimension "batch"
  std::vector<std::string> input_names = {};   ///< default "input" (one) or "input_0", "input_1", ...
  std::vector<std::string> output_names = {};  ///< default "output"
};

namespace detail {

/// Records the ops of one traced forward pass and writes them as ONNX (src/onnx/export.cpp).
class Tracer {
 public:
  explicit Tracer(const ExportOptions& options);
  ~Tracer();
  Tracer(const Tracer&) = delete;
  Tracer& operator=(const Tracer&) = delete;

  void module_path(const void* module, const std::string& path);
  void parameter(const std::string& name, const Var<float>& v);
  void buffer(const std::string& name, const Tensor<float>& t);
  void input(const Var<float>& v);
  void input(const Tensor<int64_t>& ids);
  /// Installs the tracer as the op observer until stop().
  void start();
  void stop();
  void output(const Var<float>& y);
  /// The ONNX ModelProto's bytes, checked by ONNX's checker.
  std::string serialize() const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

template <class M>
void trace_module(Tracer& t, M& module) {
  for (auto& [name, v] : module.named_parameters()) t.parameter(name, v);
  for (auto& [name, b] : module.named_buffers()) t.buffer(name, b);
  for (auto& [path, m] : module.named_modules()) t.module_path(static_cast<const void*>(m), path);
}

inline Var<float> as_input(Tracer& t, const Tensor<float>& x) {
  Var<float> v = Var<float>::constant(x);
  t.input(v);
  return v;
}
inline const Tensor<int64_t>& as_input(Tracer& t, const Tensor<int64_t>& ids) {
  t.input(ids);
  return ids;
}

void write_model(const std::string& path, const std::string& bytes);

}  // namespace detail

/// Traces `module.forward(inputs...)` on the example inputs (each a Tensor<float> or a
/// Tensor<int64_t>, given as one tensor or a std::tuple of them) and writes the ONNX model to
/// `path` (atomically). The module's training mode is restored afterwards.
template <class M, class... In>
void export_model(M& module, const std::tuple<In...>& example_inputs, const std::string& path,
                  const ExportOptions& options = {}) {
  static_assert(((std::is_same_v<In, Tensor<float>> || std::is_same_v<In, Tensor<int64_t>>) && ...),
                "EXPORT_MODEL_TAKES_TENSOR_FLOAT_OR_TENSOR_INT64_EXAMPLE_INPUTS: gd::onnx::export_model");
  detail::Tracer tracer(options);
  detail::trace_module(tracer, module);
  const bool training = module.is_training();
  module.eval();
  try {
    no_grad off;
    std::apply(
        [&](const auto&... x) {
          auto args = std::make_tuple(detail::as_input(tracer, x)...);
          tracer.start();
          Var<float> y = std::apply([&](const auto&... a) { return Var<float>(module(a...)); }, args);
          tracer.stop();
          tracer.output(y);
        },
        example_inputs);
  } catch (...) {
    tracer.stop();
    module.train(training);
    throw;
  }
  module.train(training);
  detail::write_model(path, tracer.serialize());
}
/// One example input.
template <class M, class In>
  requires(std::is_same_v<In, Tensor<float>> || std::is_same_v<In, Tensor<int64_t>>)
void export_model(M& module, const In& example_input, const std::string& path, const ExportOptions& options = {}) {
  export_model(module, std::tuple<In>(example_input), path, options);
}

}  // namespace gradus::onnx
