// gd::onnx::load on models written here with ONNX's own protobuf classes: what it refuses (and
// how it says so), frozen loading, the parameters' names, and an imported model used as the
// frozen feature extractor of a new gradus model.
#include <cmath>

#include <catch2/catch.hpp>
#include <onnx/onnx_pb.h>

#include "gradus/gradus.hpp"
#include "gradus/onnx.hpp"

namespace gd = gradus;

namespace {

/// A model builder over ONNX's classes: opset 13, float tensors.
struct Builder {
  ::onnx::ModelProto m;
  Builder() {
    m.set_ir_version(8);
    auto* op = m.add_opset_import();
    op->set_domain("");
    op->set_version(13);
  }
  ::onnx::GraphProto& g() { return *m.mutable_graph(); }
  void input(const std::string& name, std::vector<int64_t> shape, int type = ::onnx::TensorProto::FLOAT) {
    auto* v = g().add_input();
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(type);
    for (int64_t d : shape) t->mutable_shape()->add_dim()->set_dim_value(d);
  }
  void output(const std::string& name) {
    auto* v = g().add_output();
    v->set_name(name);
    v->mutable_type()->mutable_tensor_type()->set_elem_type(::onnx::TensorProto::FLOAT);
  }
  void weight(const std::string& name, std::vector<int64_t> shape, std::vector<float> values) {
    auto* t = g().add_initializer();
    t->set_name(name);
    t->set_data_type(::onnx::TensorProto::FLOAT);
    for (int64_t d : shape) t->add_dims(d);
    for (float v : values) t->add_float_data(v);
  }
  ::onnx::NodeProto* node(const std::string& op, std::vector<std::string> in, std::vector<std::string> out,
                          const std::string& name = "") {
    auto* n = g().add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (auto& s : in) n->add_input(s);
    for (auto& s : out) n->add_output(s);
    return n;
  }
  std::string bytes() const { return m.SerializeAsString(); }
};

/// y = relu(x · W + b) · V: x [N, 3], W [3, 2] "enc.w", b [2] "enc.b", V [2, 1] "head.v".
Builder two_layers() {
  Builder b;
  b.input("x", {-1, 3});
  b.weight("enc.w", {3, 2}, {0.5f, -1.0f, 1.5f, 0.25f, -0.5f, 2.0f});
  b.weight("enc.b", {2}, {0.1f, -0.2f});
  b.weight("head.v", {2, 1}, {1.0f, -3.0f});
  b.node("MatMul", {"x", "enc.w"}, {"h"});
  b.node("Add", {"h", "enc.b"}, {"hb"});
  b.node("Relu", {"hb"}, {"r"});
  b.node("MatMul", {"r", "head.v"}, {"y"});
  b.output("y");
  return b;
}

}  // namespace

TEST_CASE("onnx::load: the values of a hand-written graph, checked in double by hand", "[onnx][load]") {
  gd::onnx::Model m = gd::onnx::parse(two_layers().bytes());
  const auto x = gd::Tensor<float>::from({1.0f, 2.0f, -1.0f, -2.0f, 0.5f, 1.0f}, {2, 3});
  const gd::Tensor<float> y = m(gd::Var<float>::constant(x)).value();
  // row 0: h = [0.5 + 3 + 0.5, -1 + 0.5 - 2] + b = [4.1, -2.7] -> relu [4.1, 0] -> 4.1
  // row 1: h = [-1 + 0.75 - 0.5, 2 + 0.125 + 2] + b = [-0.65, 3.925] -> [0, 3.925] -> -11.775
  REQUIRE(y.shape() == gd::Shape{2, 1});
  CHECK(y.data()[0] == Approx(4.1));
  CHECK(y.data()[1] == Approx(-11.775));
}

TEST_CASE("onnx::load: every node it cannot import is named in one error", "[onnx][load]") {
  Builder b;
  b.input("x", {2, 2});
  b.input("s", {2}, ::onnx::TensorProto::STRING);
  b.node("Relu", {"x"}, {"a"});
  b.node("Einsum", {"a"}, {"b"}, "mixer");
  b.node("MaxPool", {"b"}, {"c", "idx"}, "pool")->add_attribute()->set_name("kernel_shape");
  b.node("FancyOp", {"c"}, {"d"});
  b.output("d");
  try {
    gd::onnx::parse(b.bytes(), {}, "handmade.onnx");
    FAIL("no error");
  } catch (const gd::value_error& e) {
    const std::string what = e.what();
    CHECK_THAT(what, Catch::Contains("handmade.onnx: 4 problems"));
    CHECK_THAT(what, Catch::Contains("graph input 's' is of element type STRING"));
    CHECK_THAT(what, Catch::Contains("Einsum node 'mixer': operator Einsum is not imported"));
    CHECK_THAT(what, Catch::Contains("MaxPool node 'pool': the Indices output is not supported"));
    CHECK_THAT(what, Catch::Contains("FancyOp node #3: operator FancyOp is not imported"));
  }
}

TEST_CASE("onnx::load: bytes that are not a model, and models it cannot run, are refused clearly", "[onnx][load]") {
  CHECK_THROWS_AS(gd::onnx::parse("not a model at all"), gd::io_error);
  CHECK_THROWS_WITH(gd::onnx::parse(std::string()), Catch::Contains("no graph"));
  CHECK_THROWS_AS(gd::onnx::load("/nonexistent/model.onnx"), gd::io_error);
  Builder newer = two_layers();
  newer.m.mutable_opset_import(0)->set_version(21);
  CHECK_THROWS_WITH(gd::onnx::parse(newer.bytes()), Catch::Contains("opset 21"));
  // a wrong shape at run time names the node
  gd::onnx::Model m = gd::onnx::parse(two_layers().bytes());
  CHECK_THROWS_WITH(m(gd::Var<float>::constant(gd::Tensor<float>::zeros({2, 4}))), Catch::Contains("MatMul node #0"));
  CHECK_THROWS_WITH(m.forward(std::vector<gd::Var<float>>{}), Catch::Contains("takes 1 inputs"));
  // a tensor file whose raw data does not fit its shape
  ::onnx::TensorProto t;
  t.set_data_type(::onnx::TensorProto::FLOAT);
  t.add_dims(4);
  t.set_raw_data(std::string(12, '\0'));
  CHECK_THROWS_WITH(gd::onnx::parse_tensor(t.SerializeAsString()), Catch::Contains("its data holds 12 bytes for 4 elements"));
  // a shape of 2^39 elements with 8 bytes of data is refused before anything is allocated
  t.clear_dims();
  t.add_dims(int64_t(1) << 39);
  t.set_raw_data(std::string(8, '\0'));
  CHECK_THROWS_WITH(gd::onnx::parse_tensor(t.SerializeAsString()), Catch::Contains("for 549755813888 elements"));
}

TEST_CASE("onnx::load: {.trainable = false} freezes every parameter; names follow the dots", "[onnx][load]") {
  gd::onnx::Model m = gd::onnx::parse(two_layers().bytes(), {.trainable = false});
  std::vector<std::string> names;
  for (auto& [name, v] : m.named_parameters()) {
    names.push_back(name);
    CHECK_FALSE(v.requires_grad());
  }
  CHECK(names == std::vector<std::string>{"enc.w", "enc.b", "head.v"});
  const gd::Var<float> x(gd::Tensor<float>::ones({1, 3}));
  gd::backward(gd::sum(m(x)));
  for (auto& v : m.parameters()) CHECK((v.grad_if_any() == nullptr || !v.grad_if_any()->defined()));
  CHECK(x.grad().size() == 3);  // the input still gets its gradient
}

TEST_CASE("an imported model as the frozen feature extractor of a new model", "[onnx][load][transfer]") {
  struct Net : gd::nn::Module<float, Net> {
    gd::onnx::Model features;
    gd::nn::Dense<float> head;
    Net(gd::onnx::Model f, gd::Rng& rng) : features(std::move(f)), head({.in = 1, .out = 1}, rng) {
      register_module("features", features);
      register_module("head", head);
      features.freeze();
    }
    gd::Var<float> forward(const gd::Var<float>& x) { return head(features(x)); }
  };
  gd::Rng rng(11);
  Net net(gd::onnx::parse(two_layers().bytes()), rng);
  std::vector<std::string> names;
  for (auto& [name, v] : net.named_parameters()) names.push_back(name);
  CHECK(names == std::vector<std::string>{"features.enc.w", "features.enc.b", "features.head.v", "head.kernel", "head.bias"});
  const gd::Tensor<float> before = net.features.parameters()[0].value().clone();
  // target: 2 * features(x) + 1, which the head alone can fit
  const auto x = gd::Tensor<float>::random_normal({64, 3}, rng);
  const gd::Tensor<float> features = std::get<gd::Tensor<float>>(net.features.run({x})[0]);
  const gd::Tensor<float> target = gd::eval(2.f * features + 1.f);
  gd::optim::Adam<float> opt(net.parameters(), {.lr = 0.05});
  double first = 0, last = 0;
  for (int step = 0; step < 200; ++step) {
    gd::Var<float> loss = gd::losses::mean_squared_error(target, net(gd::Var<float>::constant(x)));
    if (step == 0) first = loss.item();
    last = loss.item();
    opt.minimize(loss);
  }
  CHECK(last < 0.01 * first);
  const gd::Tensor<float> after = net.features.parameters()[0].value();
  for (int64_t k = 0; k < before.size(); ++k) CHECK(after.data()[k] == before.data()[k]);
}
