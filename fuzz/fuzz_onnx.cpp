// libFuzzer harness: gd::onnx::parse (a ModelProto: initializers, attributes, Constant nodes, the
// operator checks, the module's parameter names) and gd::onnx::parse_tensor (a TensorProto) on
// arbitrary bytes must give a model or a tensor, or throw gd::error. The graph is not run: a
// model's shapes are its own to choose. Built where ONNX (libonnx-dev) is found.
#include <variant>

#include <gradus/onnx.hpp>

#include "fuzz_common.hpp"

GRADUS_FUZZ_TARGET(onnx) {
  const std::string_view in = gradus::fuzz::bytes(data, size);
  try {
    const gradus::onnx::Model model = gradus::onnx::parse(in, {}, "fuzz.onnx");
    (void)model.operators();
    for (const auto& [name, v] : model.named_parameters()) gradus::fuzz::exercise(v.value());
  } catch (const gradus::error&) {
  }
  try {
    std::visit([](const auto& t) { gradus::fuzz::exercise(t); }, gradus::onnx::parse_tensor(in, "fuzz.pb"));
  } catch (const gradus::error&) {
  }
  return 0;
}
