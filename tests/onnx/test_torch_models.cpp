// Models trained elsewhere, served and fine-tuned here: networks exported by PyTorch's
// torch.onnx.export (tests/fixtures/onnx/make_torch_models.py wrote them, with PyTorch's outputs
// and gradients) load into gradus, give PyTorch's outputs on a batch size other than the exported
// one, and give PyTorch's gradients of sum(output * cotangent) for the input and for parameters
// found by their PyTorch names.
#include <cmath>
#include <string>

#include <catch2/catch.hpp>

#include "gradus/gradus.hpp"
#include "gradus/onnx.hpp"

namespace {

const std::string kDir = std::string(GRADUS_TEST_DATA_DIR) + "/onnx/";

gradus::Tensor<float> fixture(const std::string& name) {
  return std::get<gradus::Tensor<float>>(gradus::onnx::read_tensor(kDir + name + ".pb"));
}

void check_close(const gradus::Tensor<float>& got, const gradus::Tensor<float>& want, const std::string& what) {
  INFO(what);
  REQUIRE(got.shape() == want.shape());
  double worst = 0;
  for (int64_t k = 0; k < want.size(); ++k) {
    const double err = std::fabs(double(got.data()[k]) - double(want.data()[k]));
    worst = std::max(worst, err / (1e-5 + 1e-4 * std::fabs(double(want.data()[k]))));
  }
  CHECK(worst <= 1.0);
}

/// Runs the fixture `name` and compares the output and the gradients with PyTorch's.
void check_model(const std::string& name, bool int_input, const std::vector<std::string>& params) {
  gradus::onnx::Model model = gradus::onnx::load(kDir + name + ".onnx");
  gradus::Var<float> x;
  if (int_input) {
    const auto ids = std::get<gradus::Tensor<int64_t>>(gradus::onnx::read_tensor(kDir + name + "_input.pb"));
    x = gradus::Var<float>::constant(gradus::cast<float>(ids));
  } else {
    x = gradus::Var<float>(fixture(name + "_input"));
  }
  const gradus::Var<float> y = model(x);
  check_close(y.value(), fixture(name + "_output"), name + " output");
  gradus::backward(gradus::sum(y * gradus::Var<float>::constant(fixture(name + "_cotangent"))));
  if (!int_input) check_close(x.grad(), fixture(name + "_grad_input"), name + " gradient of the input");
  const auto named = model.named_parameters();
  for (const std::string& p : params) {
    auto it = std::find_if(named.begin(), named.end(), [&](const auto& kv) { return kv.first == p; });
    REQUIRE(it != named.end());
    std::string file = p;
    std::replace(file.begin(), file.end(), '.', '_');
    check_close(it->second.grad(), fixture(name + "_grad_" + file), name + " gradient of " + p);
  }
}

}  // namespace

TEST_CASE("a CNN exported by PyTorch: Conv, BatchNormalization, pooling, Gemm, LogSoftmax", "[onnx][torch]") {
  check_model("torch_cnn", false, {"conv1.weight", "bn1.weight", "fc.bias"});
}

TEST_CASE("an MLP exported by PyTorch, with a dynamic batch", "[onnx][torch]") {
  check_model("torch_mlp", false, {"hidden.weight", "out.weight"});
}

TEST_CASE("a character LSTM exported by PyTorch: Embedding as Gather, LSTM, shape arithmetic", "[onnx][torch]") {
  check_model("torch_char_lstm", true, {"embed.weight", "lstm.weight_ih_l0", "lstm.bias_hh_l0", "head.weight"});
}

TEST_CASE("a bidirectional GRU exported by PyTorch", "[onnx][torch]") {
  check_model("torch_gru", false, {"gru.weight_hh_l0_reverse"});
}

TEST_CASE("an imported model's parameters carry their ONNX names; statistics are buffers", "[onnx]") {
  gradus::onnx::Model model = gradus::onnx::load(kDir + "torch_cnn.onnx");
  std::vector<std::string> names;
  for (const auto& [name, v] : model.named_parameters()) names.push_back(name);
  CHECK(names == std::vector<std::string>{"conv1.weight", "conv1.bias", "bn1.weight", "bn1.bias", "conv2.weight",
                                          "conv2.bias", "fc.weight", "fc.bias"});
  std::vector<std::string> buffers;
  for (const auto& [name, t] : model.named_buffers()) buffers.push_back(name);
  CHECK(buffers == std::vector<std::string>{"bn1.running_mean", "bn1.running_var"});
  CHECK(model.input_names() == std::vector<std::string>{"x"});
  CHECK(model.output_names() == std::vector<std::string>{"y"});
  CHECK(model.opset() == 13);
}
