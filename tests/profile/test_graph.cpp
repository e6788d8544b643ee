// gd::profile::graph_def and step_stats on hand-made events of a 2-layer MLP's forward and
// backward pass; every expected name, edge, attr and time below was worked out by hand from the
// events and the rules of profile/graph.hpp.
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "gradus/gradus.hpp"
#include "gradus/nn.hpp"
#include "gradus/profile.hpp"
#include "gradus/profile/graph.hpp"
#include "gradus/summary/writer.hpp"

namespace gd = gradus;
namespace gp = gradus::profile;
namespace sm = gradus::summary;

namespace {

gp::Event forward(std::string name, std::string scope, int64_t start, int64_t end, uint64_t node,
                  std::vector<uint64_t> inputs, std::vector<gd::Shape> input_shapes, gd::Shape output,
                  int depth = 1, int thread = 0) {
  gp::Event e;
  e.name = std::move(name);
  e.scope = std::move(scope);
  e.kind = gp::EventKind::forward;
  e.thread = thread;
  e.depth = depth;
  e.start_ns = start;
  e.end_ns = end;
  e.node = node;
  e.input_nodes = std::move(inputs);
  e.input_shapes = std::move(input_shapes);
  e.output_shape = output;
  e.dtype = "float32";
  return e;
}

gp::Event backward(std::string name, std::string scope, int64_t start, int64_t end, uint64_t node, gd::Shape output,
                   int depth = 1, int thread = 0) {
  gp::Event e = forward(std::move(name), std::move(scope), start, end, node, {}, {}, output, depth, thread);
  e.kind = gp::EventKind::backward;
  return e;
}

// Tape nodes: x = 100 (the input batch), parameters 1..4, forward results 11..18.
// Labels are a Tensor operand (input node 0).
std::vector<gp::ParameterInfo> mlp_parameters() {
  return {{.name = "dense1.kernel", .scope = "dense1", .shape = {3, 5}, .dtype = "float32", .count = 15, .bytes = 60,
           .node = 1},
          {.name = "dense1.bias", .scope = "dense1", .shape = {5}, .dtype = "float32", .count = 5, .bytes = 20,
           .node = 2},
          {.name = "dense2.kernel", .scope = "dense2", .shape = {5, 2}, .dtype = "float32", .count = 10, .bytes = 40,
           .node = 3},
          {.name = "dense2.bias", .scope = "dense2", .shape = {2}, .dtype = "float32", .count = 2, .bytes = 8,
           .node = 4}};
}

std::vector<gp::Event> mlp_events() {
  std::vector<gp::Event> ev;
  gp::Event step;  // a user Scope around the whole step: not a node, does not hide what it encloses
  step.name = "train_step";
  step.kind = gp::EventKind::scope;
  step.start_ns = 500;
  step.end_ns = 14000;
  ev.push_back(step);
  // forward
  ev.push_back(forward("matmul", "dense1", 1700, 3200, 11, {100, 1}, {{4, 3}, {3, 5}}, {4, 5}));
  ev.back().alloc_bytes = 80;
  ev.back().peak_bytes = 80;
  ev.push_back(forward("elementwise", "dense1", 3200, 3500, 12, {11, 2}, {{4, 5}, {5}}, {4, 5}));
  ev.push_back(forward("matmul", "dense2", 4000, 6000, 13, {12, 3}, {{4, 5}, {5, 2}}, {4, 2}));
  ev.push_back(forward("elementwise", "dense2", 6000, 6001, 14, {13, 4}, {{4, 2}, {2}}, {4, 2}));
  ev.push_back(forward("elementwise", "", 6500, 6800, 15, {14, 0}, {{4, 2}, {4, 2}}, {4, 2}));  // pred - labels
  ev.push_back(forward("elementwise", "", 6800, 7000, 18, {15, 15}, {{4, 2}, {4, 2}}, {4, 2}));  // square
  ev.push_back(forward("mean", "", 7000, 8000, 16, {18}, {{4, 2}}, {}));
  // how mean computed its node: the same tape node, so not a node of its own
  ev.push_back(forward("sum", "", 7100, 7500, 16, {18}, {{4, 2}}, {}, 2));
  // backward, with ops run inside (not graph nodes)
  ev.push_back(backward("mean", "", 9000, 9200, 16, {}));
  ev.push_back(forward("elementwise", "", 9050, 9150, 99, {0}, {{4, 2}}, {4, 2}, 2));
  ev.push_back(backward("elementwise", "", 9200, 9300, 18, {4, 2}));
  ev.push_back(backward("elementwise", "", 9300, 9400, 15, {4, 2}));
  ev.push_back(backward("elementwise", "dense2", 9500, 9700, 14, {4, 2}));
  ev.push_back(backward("matmul", "dense2", 10000, 11000, 13, {4, 2}));
  ev.back().alloc_bytes = -20;
  ev.back().peak_bytes = 100;
  ev.push_back(forward("matmul", "", 10100, 10400, 98, {0, 0}, {{4, 5}, {4, 2}}, {5, 2}, 2));
  ev.push_back(forward("matmul", "", 10500, 10900, 97, {0, 0}, {{4, 2}, {5, 2}}, {4, 5}, 2));
  ev.push_back(backward("elementwise", "dense1", 11000, 11300, 12, {4, 5}));
  // the last backward on a second thread, with an op nested in it there
  ev.push_back(backward("matmul", "dense1", 11500, 12500, 11, {4, 5}, 0, 1));
  ev.push_back(forward("matmul", "", 11600, 12000, 96, {0, 0}, {{3, 4}, {4, 5}}, {3, 5}, 1, 1));
  return ev;
}

const sm::GraphNode& node_named(const sm::GraphDef& g, const std::string& name) {
  for (const sm::GraphNode& n : g.nodes)
    if (n.name == name) return n;
  FAIL("no node named " << name);
  throw;
}

const sm::AttrValue* attr(const sm::GraphNode& n, const std::string& key) {
  for (const auto& [k, v] : n.attrs)
    if (k == key) return &v;
  return nullptr;
}

using Shapes = std::vector<sm::TensorShape>;

}  // namespace

TEST_CASE("graph_def: nodes, names, scopes and edges of an MLP's forward and backward", "[profile][graph]") {
  const sm::GraphDef g = gp::graph_def(mlp_events(), mlp_parameters());
  struct Expected {
    std::string name, op;
    std::vector<std::string> inputs;
  };
  // Parameters first, then the forward nodes in order (each placeholder just before its first
  // reader), then the gradient nodes in the order of their first backward event.
  const std::vector<Expected> expected = {
      {"dense1/kernel", "VariableV2", {}},
      {"dense1/bias", "VariableV2", {}},
      {"dense2/kernel", "VariableV2", {}},
      {"dense2/bias", "VariableV2", {}},
      {"input_0", "Placeholder", {}},
      {"dense1/matmul_0", "matmul", {"input_0", "dense1/kernel"}},
      {"dense1/elementwise_0", "elementwise", {"dense1/matmul_0", "dense1/bias"}},
      {"dense2/matmul_0", "matmul", {"dense1/elementwise_0", "dense2/kernel"}},
      {"dense2/elementwise_0", "elementwise", {"dense2/matmul_0", "dense2/bias"}},
      {"elementwise_0", "elementwise", {"dense2/elementwise_0"}},  // the labels (a Tensor) make no edge
      {"elementwise_1", "elementwise", {"elementwise_0", "elementwise_0"}},
      {"mean_0", "mean", {"elementwise_1"}},
      {"gradients/mean_0", "mean_grad", {"mean_0"}},
      {"gradients/elementwise_1", "elementwise_grad", {"elementwise_1", "gradients/mean_0"}},
      {"gradients/elementwise_0", "elementwise_grad", {"elementwise_0", "gradients/elementwise_1"}},
      {"gradients/dense2/elementwise_0", "elementwise_grad", {"dense2/elementwise_0", "gradients/elementwise_0"}},
      {"gradients/dense2/matmul_0", "matmul_grad", {"dense2/matmul_0", "gradients/dense2/elementwise_0"}},
      {"gradients/dense1/elementwise_0", "elementwise_grad", {"dense1/elementwise_0", "gradients/dense2/matmul_0"}},
      {"gradients/dense1/matmul_0", "matmul_grad", {"dense1/matmul_0", "gradients/dense1/elementwise_0"}},
  };
  REQUIRE(g.nodes.size() == expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    INFO("node " << i);
    CHECK(g.nodes[i].name == expected[i].name);
    CHECK(g.nodes[i].op == expected[i].op);
    CHECK(g.nodes[i].inputs == expected[i].inputs);
    CHECK(g.nodes[i].device.empty());
  }
}

TEST_CASE("graph_def: attrs of variables, placeholders, ops and gradients", "[profile][graph]") {
  const sm::GraphDef g = gp::graph_def(mlp_events(), mlp_parameters());
  using sm::DataType;
  {
    const sm::GraphNode& k = node_named(g, "dense1/kernel");
    REQUIRE(k.attrs.size() == 3);
    CHECK(k.attrs[0].first == "dtype");
    CHECK(std::get<DataType>(k.attrs[0].second.value) == DataType::DT_FLOAT);
    CHECK(k.attrs[1].first == "shape");
    CHECK(std::get<sm::TensorShape>(k.attrs[1].second.value) == sm::TensorShape{3, 5});
    CHECK(k.attrs[2].first == "_output_shapes");
    CHECK(std::get<Shapes>(k.attrs[2].second.value) == Shapes{{3, 5}});
  }
  {
    const sm::GraphNode& x = node_named(g, "input_0");
    REQUIRE(attr(x, "dtype"));
    CHECK(std::get<DataType>(attr(x, "dtype")->value) == DataType::DT_FLOAT);
    CHECK(std::get<sm::TensorShape>(attr(x, "shape")->value) == sm::TensorShape{4, 3});
    CHECK(std::get<Shapes>(attr(x, "_output_shapes")->value) == Shapes{{4, 3}});
  }
  {
    const sm::GraphNode& m = node_named(g, "dense2/matmul_0");
    REQUIRE(m.attrs.size() == 2);
    CHECK(m.attrs[0].first == "T");
    CHECK(std::get<DataType>(m.attrs[0].second.value) == DataType::DT_FLOAT);
    CHECK(m.attrs[1].first == "_output_shapes");
    CHECK(std::get<Shapes>(m.attrs[1].second.value) == Shapes{{4, 2}});
    CHECK(std::get<Shapes>(attr(node_named(g, "mean_0"), "_output_shapes")->value) == Shapes{{}});  // a scalar
  }
  {
    const sm::GraphNode& d = node_named(g, "gradients/dense1/matmul_0");
    CHECK(std::get<DataType>(attr(d, "T")->value) == DataType::DT_FLOAT);
    CHECK(std::get<Shapes>(attr(d, "_output_shapes")->value) == Shapes{{4, 3}, {3, 5}});  // dx, dkernel
  }
  // float64 is DT_DOUBLE; a dtype TensorFlow has no DataType for gets no "T".
  auto ev = mlp_events();
  ev[1].dtype = "float64";
  ev[2].dtype = "complex32";
  const sm::GraphDef g2 = gp::graph_def(ev);
  CHECK(std::get<DataType>(attr(node_named(g2, "dense1/matmul_0"), "T")->value) == DataType::DT_DOUBLE);
  CHECK(attr(node_named(g2, "dense1/elementwise_0"), "T") == nullptr);
  CHECK(attr(node_named(g2, "dense1/elementwise_0"), "_output_shapes") != nullptr);
}

TEST_CASE("graph_def: without parameters their leaves are placeholders", "[profile][graph]") {
  const sm::GraphDef g = gp::graph_def(mlp_events());
  REQUIRE(g.nodes.size() == 19);
  // Leaves in the order first read: x, dense1's kernel, dense1's bias, dense2's kernel, dense2's bias.
  CHECK(node_named(g, "dense1/matmul_0").inputs == std::vector<std::string>{"input_0", "input_1"});
  CHECK(node_named(g, "dense1/elementwise_0").inputs == std::vector<std::string>{"dense1/matmul_0", "input_2"});
  CHECK(node_named(g, "dense2/elementwise_0").inputs == std::vector<std::string>{"dense2/matmul_0", "input_4"});
  CHECK(node_named(g, "input_1").op == "Placeholder");
  CHECK(std::get<sm::TensorShape>(attr(node_named(g, "input_1"), "shape")->value) == sm::TensorShape{3, 5});
  CHECK(std::get<sm::TensorShape>(attr(node_named(g, "input_4"), "shape")->value) == sm::TensorShape{2});
  CHECK(g.nodes[0].name == "input_0");
  CHECK(g.nodes[1].name == "input_1");
  CHECK(g.nodes[2].name == "dense1/matmul_0");
}

TEST_CASE("graph_def: name rules — sanitised scopes, clashes, reused tape nodes", "[profile][graph]") {
  std::vector<gp::Event> ev;
  ev.push_back(forward("relu", "", 0, 10, 11, {1}, {{2}}, {2}, 0));
  ev.push_back(forward("conv 2d", "/enc oder//lstm/", 10, 20, 12, {11}, {{2}}, {2}, 0));
  ev.push_back(forward("relu", "", 20, 30, 13, {12}, {{2}}, {2}, 0));
  ev.push_back(forward("input", "", 30, 40, 14, {2}, {{2}}, {2}, 0));
  // A tape node id used again later (a second step reusing the arena): edges go to the latest creator.
  ev.push_back(forward("relu", "", 40, 50, 11, {14}, {{2}}, {2}, 0));
  ev.push_back(forward("add", "", 50, 60, 15, {11, 13}, {{2}, {2}}, {2}, 0));
  const std::vector<gp::ParameterInfo> params = {
      {.name = "relu_0", .scope = "", .shape = {2}, .dtype = "float32", .count = 2, .bytes = 8, .node = 1}};
  const sm::GraphDef g = gp::graph_def(ev, params);
  std::vector<std::string> names;
  for (const auto& n : g.nodes) names.push_back(n.name);
  // Forward names are given first; the parameter "relu_0" and the placeholder "input_0" are
  // renamed, never the forward nodes.
  CHECK(names == std::vector<std::string>{"relu_0_1", "relu_0", "enc_oder/lstm/conv_2d_0", "relu_1", "input_0_1",
                                          "input_0", "relu_2", "add_0"});
  CHECK(node_named(g, "relu_0").inputs == std::vector<std::string>{"relu_0_1"});
  CHECK(node_named(g, "input_0").inputs == std::vector<std::string>{"input_0_1"});
  CHECK(node_named(g, "input_0").op == "input");
  CHECK(node_named(g, "input_0_1").op == "Placeholder");
  CHECK(node_named(g, "relu_2").inputs == std::vector<std::string>{"input_0"});
  CHECK(node_named(g, "add_0").inputs == std::vector<std::string>{"relu_2", "relu_1"});
  CHECK(node_named(g, "enc_oder/lstm/conv_2d_0").op == "conv 2d");
  CHECK(gp::graph_def({}).nodes.empty());

  // A parameter sits with its module's ops: "<scope>/<own name>"; without a scope its dotted
  // name is read as a path.
  const sm::GraphDef p = gp::graph_def(
      {}, {{.name = "0.kernel", .scope = "net/0", .shape = {2}, .dtype = "float32", .count = 2, .bytes = 8, .node = 1},
           {.name = "dense1.bias", .scope = "", .shape = {2}, .dtype = "float32", .count = 2, .bytes = 8, .node = 2},
           {.name = "w", .scope = "top", .shape = {2}, .dtype = "float32", .count = 2, .bytes = 8, .node = 3}});
  REQUIRE(p.nodes.size() == 3);
  CHECK(p.nodes[0].name == "net/0/kernel");
  CHECK(p.nodes[1].name == "dense1/bias");
  CHECK(p.nodes[2].name == "top/w");
}

TEST_CASE("graph_def and step_stats reject malformed events", "[profile][graph]") {
  auto ev = mlp_events();
  ev[3].end_ns = ev[3].start_ns - 1;
  CHECK_THROWS_AS(gp::graph_def(ev), gd::value_error);
  CHECK_THROWS_WITH(gp::graph_def(ev), Catch::Contains("graph_def: event 3 ('matmul'): expected end_ns >= start_ns") &&
                                           Catch::Contains("start_ns 4000, end_ns 3999"));
  ev = mlp_events();
  ev[2].depth = -1;
  CHECK_THROWS_AS(gp::step_stats(ev), gd::value_error);
  CHECK_THROWS_WITH(gp::step_stats(ev),
                    Catch::Contains("step_stats: event 2 ('elementwise')") && Catch::Contains("depth -1"));
}

TEST_CASE("step_stats: one NodeExecStats per graph node run, times in µs since the first event", "[profile][graph]") {
  const sm::StepStats s = gp::step_stats(mlp_events());
  REQUIRE(s.dev_stats.size() == 1);
  CHECK(s.dev_stats[0].device == "/job:localhost/replica:0/task:0/device:CPU:0");
  // The first event (the scope) starts at 500 ns: start = floor((start_ns - 500) / 1000),
  // end = ceil((end_ns - 500) / 1000), all_end_rel = op_end_rel = end - start.
  struct Expected {
    std::string name;
    int64_t start, rel;
    int thread;
  };
  const std::vector<Expected> expected = {
      {"dense1/matmul_0", 1, 2, 0},                  // 1700..3200 ns -> 1.2..2.7 µs
      {"dense1/elementwise_0", 2, 1, 0},             // 3200..3500 -> 2.7..3.0
      {"dense2/matmul_0", 3, 3, 0},                  // 4000..6000 -> 3.5..5.5
      {"dense2/elementwise_0", 5, 1, 0},             // 6000..6001 -> 5.5..5.501
      {"elementwise_0", 6, 1, 0},                    // 6500..6800 -> 6.0..6.3
      {"elementwise_1", 6, 1, 0},                    // 6800..7000 -> 6.3..6.5
      {"mean_0", 6, 2, 0},                           // 7000..8000 -> 6.5..7.5
      {"gradients/mean_0", 8, 1, 0},                 // 9000..9200 -> 8.5..8.7
      {"gradients/elementwise_1", 8, 1, 0},          // 9200..9300 -> 8.7..8.8
      {"gradients/elementwise_0", 8, 1, 0},          // 9300..9400 -> 8.8..8.9
      {"gradients/dense2/elementwise_0", 9, 1, 0},   // 9500..9700 -> 9.0..9.2
      {"gradients/dense2/matmul_0", 9, 2, 0},        // 10000..11000 -> 9.5..10.5
      {"gradients/dense1/elementwise_0", 10, 1, 0},  // 11000..11300 -> 10.5..10.8
      {"gradients/dense1/matmul_0", 11, 1, 1},       // 11500..12500 -> 11.0..12.0, thread 1
  };
  const auto& st = s.dev_stats[0].node_stats;
  REQUIRE(st.size() == expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    INFO("stats " << i << ": " << expected[i].name);
    CHECK(st[i].node_name == expected[i].name);
    CHECK(st[i].all_start_micros == expected[i].start);
    CHECK(st[i].op_start_rel_micros == 0);
    CHECK(st[i].op_end_rel_micros == expected[i].rel);
    CHECK(st[i].all_end_rel_micros == expected[i].rel);
    CHECK(st[i].thread_id == uint32_t(expected[i].thread));
  }
  // Memory only where the event allocated.
  REQUIRE(st[0].memory.size() == 1);
  CHECK(st[0].memory[0].allocator_name == "cpu");
  CHECK(st[0].memory[0].total_bytes == 80);
  CHECK(st[0].memory[0].peak_bytes == 80);
  CHECK(st[0].memory[0].live_bytes == 80);
  REQUIRE(st[11].memory.size() == 1);  // gradients/dense2/matmul_0: freed 20 net, peaked at 100
  CHECK(st[11].memory[0].total_bytes == 100);
  CHECK(st[11].memory[0].peak_bytes == 100);
  CHECK(st[11].memory[0].live_bytes == 0);
  CHECK(st[1].memory.empty());
  CHECK(st[0].timeline_label == "matmul([4,3], [3,5])");
  CHECK(st[7].timeline_label == "mean()");
  // Every stats name is a node of the graph, so TensorBoard can join them.
  const sm::GraphDef g = gp::graph_def(mlp_events(), mlp_parameters());
  for (const auto& n : st) CHECK_NOTHROW(node_named(g, n.node_name));
  CHECK(gp::step_stats({}).dev_stats.empty());
}

TEST_CASE("the MLP's graph and step stats in an event file, decoded by protoc", "[profile][graph]") {
  namespace fs = std::filesystem;
  const fs::path dir = "graph_tmp/mlp";
  fs::remove_all(dir);
  struct Cleanup {
    ~Cleanup() { std::filesystem::remove_all("graph_tmp"); }
  } cleanup;  // also when a REQUIRE ends the test early
  fs::path path;
  {
    sm::FileWriter w(dir);
    w.graph(gp::graph_def(mlp_events(), mlp_parameters()));
    w.run_metadata("step_1", 1, gp::step_stats(mlp_events()));
    path = w.path();
  }
  const auto ev = sm::read_events(path);
  REQUIRE(ev.size() == 3);
  REQUIRE(ev[1].graph_def);
  REQUIRE(ev[2].run_metadata);
  CHECK(ev[2].run_metadata_tag == "step_1");
  if (std::system("protoc --version > /dev/null 2>&1") != 0) {
    WARN("protoc not found: skipping the protoc checks");
    return;
  }
  // protoc --decode=<type> with TensorFlow's field numbers, whitespace runs collapsed.
  auto decode = [](const std::string& bytes, const std::string& type) {
    {
      std::ofstream f("graph_tmp/mlp.bin", std::ios::binary | std::ios::trunc);
      f.write(bytes.data(), std::streamsize(bytes.size()));
    }
    const std::string cmd = "protoc --decode=" + type + " -I " GRADUS_TEST_DATA_DIR " " GRADUS_TEST_DATA_DIR
                            "/graph_def.proto < graph_tmp/mlp.bin 2>&1";
    std::string out, flat;
    if (std::FILE* p = popen(cmd.c_str(), "r")) {
      char buf[4096];
      size_t n;
      while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
      pclose(p);
    }
    for (char c : out) {
      if (c != ' ' && c != '\n') flat.push_back(c);
      else if (!flat.empty() && flat.back() != ' ') flat.push_back(' ');
    }
    return flat;
  };
  const std::string graph = decode(*ev[1].graph_def, "tensorflow.GraphDef");
  INFO("GraphDef:\n" << graph);
  // (protoc prints map entries sorted by key)
  CHECK(graph.find(R"~(node { name: "dense1/kernel" op: "VariableV2" attr { key: "_output_shapes" )~") !=
        std::string::npos);
  CHECK(graph.find(R"~(attr { key: "dtype" value { type: DT_FLOAT } } )~"
                   R"~(attr { key: "shape" value { shape { dim { size: 3 } dim { size: 5 } } } } })~") !=
        std::string::npos);
  CHECK(graph.find(R"~(node { name: "dense1/matmul_0" op: "matmul" input: "input_0" input: "dense1/kernel" )~"
                   R"~(attr { key: "T" value { type: DT_FLOAT } } attr { key: "_output_shapes" value { list { )~"
                   R"~(shape { dim { size: 4 } dim { size: 5 } } } } } })~") != std::string::npos);
  CHECK(graph.find(R"~(name: "gradients/dense1/matmul_0" op: "matmul_grad" input: "dense1/matmul_0" )~"
                   R"~(input: "gradients/dense1/elementwise_0")~") != std::string::npos);
  const std::string stats = decode(*ev[2].run_metadata, "tensorflow.RunMetadata");
  INFO("RunMetadata:\n" << stats);
  CHECK(stats.find(R"~(step_stats { dev_stats { device: "/job:localhost/replica:0/task:0/device:CPU:0" node_stats { )~"
                   R"~(node_name: "dense1/matmul_0" all_start_micros: 1 op_end_rel_micros: 2 all_end_rel_micros: 2 )~"
                   R"~(memory { allocator_name: "cpu" total_bytes: 80 peak_bytes: 80 live_bytes: 80 } )~"
                   R"~(timeline_label: "matmul([4,3], [3,5])" })~") != std::string::npos);
  CHECK(stats.find(R"~(node_name: "gradients/dense1/matmul_0" all_start_micros: 11 op_end_rel_micros: 1 )~"
                   R"~(all_end_rel_micros: 1 timeline_label: "matmul()" thread_id: 1 })~") != std::string::npos);
}

TEST_CASE("graph_def and step_stats of a real profiled MLP step", "[profile][graph]") {
  namespace nn = gradus::nn;
  gd::Rng rng(3);
  auto net = nn::Sequential(nn::Dense<float>({.in = 5, .out = 7}, rng), nn::ReLU{},
                            nn::Dense<float>({.in = 7, .out = 3}, rng));
  const gd::Tensor<float> x = gd::Tensor<float>::ones({4, 5});
  gp::Profiler prof;
  prof.attach(net, "net");
  prof.start();
  gd::backward(gd::mean(net(x)));
  prof.stop();
  const sm::GraphDef g = gp::graph_def(prof.events(), prof.parameters());
  std::string listing;
  for (const auto& n : g.nodes) {
    listing += n.name + " [" + n.op + "] <-";
    for (const auto& in : n.inputs) listing += " " + in;
    listing += "\n";
  }
  INFO("graph:\n" << listing);

  const auto shape_of = [&](const std::string& name) {
    return std::get<sm::TensorShape>(attr(node_named(g, name), "shape")->value);
  };
  CHECK(node_named(g, "net/0/kernel").op == "VariableV2");
  CHECK(shape_of("net/0/kernel") == sm::TensorShape{5, 7});
  CHECK(shape_of("net/0/bias") == sm::TensorShape{7});
  CHECK(shape_of("net/2/kernel") == sm::TensorShape{7, 3});
  CHECK(shape_of("net/2/bias") == sm::TensorShape{3});
  CHECK(node_named(g, "input_0").op == "Placeholder");
  CHECK(shape_of("input_0") == sm::TensorShape{4, 5});
  CHECK(node_named(g, "net/0/matmul_0").inputs == std::vector<std::string>{"input_0", "net/0/kernel"});
  const auto& mm2 = node_named(g, "net/2/matmul_0").inputs;
  REQUIRE(mm2.size() == 2);
  CHECK(mm2[1] == "net/2/kernel");
  CHECK(node_named(g, "mean_0").op == "mean");
  CHECK(node_named(g, "gradients/net/0/matmul_0").inputs.at(0) == "net/0/matmul_0");
  CHECK(node_named(g, "gradients/mean_0").inputs == std::vector<std::string>{"mean_0"});

  // Names are unique, every edge comes from a node of the graph, and the step statistics name
  // every op and gradient node (nothing else) in the order they started.
  std::set<std::string> names;
  for (const auto& n : g.nodes) CHECK(names.insert(n.name).second);
  for (const auto& n : g.nodes)
    for (const auto& in : n.inputs) CHECK(names.count(in) == 1);
  const sm::StepStats s = gp::step_stats(prof.events());
  REQUIRE(s.dev_stats.size() == 1);
  std::set<std::string> timed;
  int64_t last = 0;
  for (const auto& n : s.dev_stats[0].node_stats) {
    CHECK(names.count(n.node_name) == 1);
    CHECK(n.all_start_micros >= last);
    last = n.all_start_micros;
    timed.insert(n.node_name);
  }
  for (const auto& n : g.nodes)
    CHECK(timed.count(n.name) == size_t(n.op != "VariableV2" && n.op != "Placeholder"));
}
