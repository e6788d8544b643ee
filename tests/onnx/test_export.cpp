// gd::onnx::export_model: modules traced into ONNX, checked by ONNX's checker (in export_model)
// and read back by gd::onnx::load, which must compute what the module computes, on a batch size
// other than the example's.
#include <cmath>
#include <filesystem>

#include <catch2/catch.hpp>
#include <onnx/onnx_pb.h>

#include "gradus/gradus.hpp"
#include "gradus/io/file.hpp"
#include "gradus/onnx.hpp"

namespace gd = gradus;

namespace {

void check_same(const gd::Tensor<float>& got, const gd::Tensor<float>& want) {
  REQUIRE(got.shape() == want.shape());
  for (int64_t k = 0; k < want.size(); ++k) REQUIRE(got.data()[k] == Approx(want.data()[k]).margin(1e-5).epsilon(1e-4));
}

/// The operator types of an exported file, read with ONNX's own classes.
std::vector<std::string> operators_of(const std::string& path) {
  ::onnx::ModelProto m;
  REQUIRE(m.ParseFromString(gd::io::read_file(path)));
  std::vector<std::string> ops;
  for (const auto& n : m.graph().node())
    if (std::find(ops.begin(), ops.end(), n.op_type()) == ops.end()) ops.push_back(n.op_type());
  return ops;
}

struct CharLm : gd::nn::Module<float, CharLm> {
  gd::nn::Embedding<float> embed;
  gd::nn::LSTM<float> lstm;
  gd::nn::Dense<float> head;
  explicit CharLm(gd::Rng& rng)
      : embed({.vocab = 13, .dim = 6}, rng), lstm({.in = 6, .units = 8, .return_sequences = true}, rng),
        head({.in = 8, .out = 13}, rng) {
    register_module("embed", embed);
    register_module("lstm", lstm);
    register_module("head", head);
  }
  gd::Var<float> forward(const gd::Tensor<int64_t>& ids) {
    return head(gd::reshape(lstm(embed(ids)), {-1, 8}));
  }
};

/// Elementwise programs, reductions and shape ops that a custom forward uses.
struct Custom : gd::nn::Module<float, Custom> {
  gd::Var<float> scale{gd::Tensor<float>::from({0.5f, -1.0f, 2.0f, 0.25f})};
  Custom() { register_parameter("scale", scale); }
  gd::Var<float> forward(const gd::Var<float>& x) {  // x [N, 4]
    gd::Var<float> h = x * gd::sigmoid(x) * scale + 0.5f;
    gd::Var<float> c = gd::concat({h, gd::Var<float>(gd::exp(-gd::square(x)))}, 1);  // [N, 8]
    gd::Var<float> m = c - gd::mean(c, 1, true);
    gd::Var<float> p = gd::pad(gd::slice(m, {0, 1}, {-1, 6}), {{0, 0}, {1, 2}}, 0.25f);  // [N, 9]
    gd::Var<float> t = gd::transpose(gd::reshape(p, {-1, 3, 3}), {0, 2, 1});
    return gd::Var<float>(gd::log_softmax(gd::reshape(t, {-1, 9}), 1) + gd::max(p, 1, true) +
                          gd::clamp(gd::sum(gd::abs(p), 1, true), 0.0, 4.0));
  }
};

/// The other layer kinds: recurrent layers that run step by step, both normalizations, dropout
/// and a softmax activation.
struct Layers : gd::nn::Module<float, Layers> {
  gd::nn::SimpleRNN<float> rnn;
  gd::nn::GRU<float> gru;
  gd::nn::BatchNorm<float> bn;
  gd::nn::LayerNorm<float> ln;
  gd::nn::Dropout<float> drop;
  gd::nn::Dense<float> head;
  explicit Layers(gd::Rng& rng)
      : rnn({.in = 4, .units = 6, .return_sequences = true}, rng), gru({.in = 6, .units = 8}, rng),
        bn({.features = 8}), ln({.features = 8}), drop({.rate = 0.5}, rng),
        head({.in = 8, .out = 3, .activation = gd::nn::softmax}, rng) {
    register_module("rnn", rnn);
    register_module("gru", gru);
    register_module("bn", bn);
    register_module("ln", ln);
    register_module("drop", drop);
    register_module("head", head);
  }
  gd::Var<float> forward(const gd::Var<float>& x) { return head(drop(ln(bn(gru(rnn(x)))))); }
};

/// Self-attention: MultiHeadAttention's projections, head split, scaled dot products and softmax.
struct SelfAttention : gd::nn::Module<float, SelfAttention> {
  gd::nn::MultiHeadAttention<float> mha;
  explicit SelfAttention(gd::Rng& rng) : mha({.num_heads = 2, .key_dim = 3, .query_units = 4}, rng) {
    register_module("mha", mha);
  }
  gd::Var<float> forward(const gd::Var<float>& x) { return mha.forward(x, x, x).context; }
};

const std::string kDir = "export";

}  // namespace

TEST_CASE("export_model: an MLP, exported and loaded back, computes what it computed", "[onnx][export]") {
  std::filesystem::create_directories(kDir);
  gd::Rng rng(3);
  gd::nn::Sequential net(gd::nn::Dense<float>({.in = 20, .out = 16, .activation = gd::nn::relu}, rng),
                         gd::nn::Dense<float>({.in = 16, .out = 16, .activation = gd::nn::tanh}, rng),
                         gd::nn::Dense<float>({.in = 16, .out = 5}, rng));
  gd::onnx::export_model(net, gd::Tensor<float>::zeros({2, 20}), kDir + "/mlp.onnx");
  gd::onnx::Model back = gd::onnx::load(kDir + "/mlp.onnx");
  const gd::Tensor<float> x = gd::Tensor<float>::random_normal({7, 20}, rng);
  check_same(back(gd::Var<float>::constant(x)).value(), net.forward(gd::Var<float>::constant(x)).value());
  std::vector<std::string> names, back_names;
  for (auto& [n, v] : net.named_parameters()) names.push_back(n);
  for (auto& [n, v] : back.named_parameters()) back_names.push_back(n);
  CHECK(back_names == names);  // the parameters keep their paths
}

TEST_CASE("export_model: a CNN (NHWC convolutions and pooling as ONNX's NCHW operators)", "[onnx][export]") {
  std::filesystem::create_directories(kDir);
  gd::Rng rng(4);
  gd::nn::Sequential net(
      gd::nn::Conv2d<float>({.in = 1, .filters = 4, .kernel_size = {3, 3}, .padding = gd::Padding::same, .activation = gd::nn::relu}, rng),
      gd::nn::MaxPool2d{},
      gd::nn::Conv2d<float>({.in = 4, .filters = 6, .kernel_size = {3, 3}, .strides = {2, 2}}, rng),
      gd::nn::AvgPool2d{.pool_size = {2, 2}, .strides = {1, 1}},
      gd::nn::Flatten{},
      gd::nn::Dense<float>({.in = 6, .out = 3}, rng));
  gd::onnx::export_model(net, gd::Tensor<float>::zeros({2, 10, 10, 1}), kDir + "/cnn.onnx", {.opset = 17});
  const auto ops = operators_of(kDir + "/cnn.onnx");
  CHECK(std::find(ops.begin(), ops.end(), "Conv") != ops.end());
  CHECK(std::find(ops.begin(), ops.end(), "MaxPool") != ops.end());
  gd::onnx::Model back = gd::onnx::load(kDir + "/cnn.onnx");
  const gd::Tensor<float> x = gd::Tensor<float>::random_normal({5, 10, 10, 1}, rng);
  check_same(back(gd::Var<float>::constant(x)).value(), net.forward(gd::Var<float>::constant(x)).value());
}

TEST_CASE("export_model: a character LSTM (Embedding, lstm_sequence as ONNX's LSTM) with int64 ids", "[onnx][export]") {
  std::filesystem::create_directories(kDir);
  gd::Rng rng(5);
  CharLm lm(rng);
  auto ids = gd::Tensor<int64_t>::empty({2, 5});
  for (int64_t k = 0; k < ids.size(); ++k) ids.data()[k] = (k * 7) % 13;
  gd::onnx::export_model(lm, ids, kDir + "/char_lstm.onnx");
  gd::onnx::Model back = gd::onnx::load(kDir + "/char_lstm.onnx");
  auto more = gd::Tensor<int64_t>::empty({3, 4});
  for (int64_t k = 0; k < more.size(); ++k) more.data()[k] = (k * 5 + 1) % 13;
  const auto got = back.run({more});
  check_same(std::get<gd::Tensor<float>>(got[0]), lm.forward(more).value());
}

TEST_CASE("export_model: elementwise expressions, reductions and shape ops of a custom forward", "[onnx][export]") {
  std::filesystem::create_directories(kDir);
  Custom net;
  gd::onnx::export_model(net, gd::Tensor<float>::zeros({2, 4}), kDir + "/custom.onnx");
  gd::onnx::Model back = gd::onnx::load(kDir + "/custom.onnx");
  gd::Rng rng(6);
  const gd::Tensor<float> x = gd::Tensor<float>::random_normal({3, 4}, rng);
  check_same(back(gd::Var<float>::constant(x)).value(), net.forward(gd::Var<float>::constant(x)).value());
}

TEST_CASE("export_model: SimpleRNN, GRU, BatchNorm (moving statistics), LayerNorm, Dropout, softmax", "[onnx][export]") {
  std::filesystem::create_directories(kDir);
  gd::Rng rng(8);
  Layers net(rng);
  for (int k = 0; k < 3; ++k)  // training-mode calls move BatchNorm's statistics away from 0 and 1
    net.forward(gd::Var<float>::constant(gd::Tensor<float>::random_normal({16, 5, 4}, rng, 1.0, 2.0)));
  gd::onnx::export_model(net, gd::Tensor<float>::zeros({2, 5, 4}), kDir + "/layers.onnx");
  CHECK(net.is_training());  // restored
  gd::onnx::Model back = gd::onnx::load(kDir + "/layers.onnx");
  std::vector<std::string> buffers, back_buffers;
  for (auto& [name, t] : net.named_buffers()) buffers.push_back(name);
  for (auto& [name, t] : back.named_buffers()) back_buffers.push_back(name);
  CHECK(back_buffers == buffers);  // the moving statistics stay buffers, not parameters
  CHECK(back.named_parameters().size() == net.named_parameters().size());
  net.eval();
  const gd::Tensor<float> x = gd::Tensor<float>::random_normal({5, 5, 4}, rng);
  check_same(back(gd::Var<float>::constant(x)).value(), net.forward(gd::Var<float>::constant(x)).value());
}

TEST_CASE("export_model: multi-head attention, as its primitive ops", "[onnx][export]") {
  std::filesystem::create_directories(kDir);
  gd::Rng rng(9);
  SelfAttention net(rng);
  gd::onnx::export_model(net, gd::Tensor<float>::zeros({2, 5, 4}), kDir + "/attention.onnx");
  gd::onnx::Model back = gd::onnx::load(kDir + "/attention.onnx");
  const gd::Tensor<float> x = gd::Tensor<float>::random_normal({3, 5, 4}, rng);
  check_same(back(gd::Var<float>::constant(x)).value(), net.forward(gd::Var<float>::constant(x)).value());
}

TEST_CASE("export_model: an op with no ONNX form is an error naming it; options are checked", "[onnx][export]") {
  std::filesystem::create_directories(kDir);
  gd::Rng rng(7);
  gd::nn::Dense<float> d({.in = 3, .out = 2}, rng);
  CHECK_THROWS_WITH(gd::onnx::export_model(d, gd::Tensor<float>::zeros({1, 3}), kDir + "/x.onnx", {.opset = 9}),
                    Catch::Contains("opset 9"));
  struct WithCustomOp : gd::nn::Module<float, WithCustomOp> {
    gd::Var<float> forward(const gd::Var<float>& x) {
      const auto square = gd::custom_op([](const gd::Tensor<float>& v) { return gd::eval(v * v); },
                                        [](const gd::Tensor<float>& v, const gd::Tensor<float>&,
                                           const gd::Tensor<float>& g) { return gd::eval(2.f * g * v); },
                                        "my_square");
      return square(x);
    }
  } custom;
  CHECK_THROWS_WITH(gd::onnx::export_model(custom, gd::Tensor<float>::zeros({1, 3}), kDir + "/y.onnx"),
                    Catch::Contains("my_square") && Catch::Contains("no ONNX form"));
  CHECK_FALSE(std::filesystem::exists(kDir + "/y.onnx"));
}
