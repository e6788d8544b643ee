// The GraphDef and RunMetadata encoders (summary/graph.hpp) and FileWriter::graph / run_metadata:
// hand-computed bytes, `protoc --decode_raw`, and protoc with TensorFlow's field numbers
// (tests/fixtures/graph_def.proto).
#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "gradus/summary.hpp"
#include "../support/hex_bytes.hpp"

namespace gd = gradus;
namespace sm = gradus::summary;
namespace fs = std::filesystem;
using gradus_test::hex_bytes;

namespace {

bool have_protoc() { return std::system("protoc --version > /dev/null 2>&1") == 0; }

// protoc's output for `message`, whitespace runs collapsed to one space; `how` is "--decode_raw"
// or a message type of tests/fixtures/graph_def.proto ("tensorflow.GraphDef").
std::string protoc(std::string_view message, const std::string& how) {
  fs::create_directories("graph_tmp");
  {
    std::ofstream f("graph_tmp/msg.bin", std::ios::binary | std::ios::trunc);
    f.write(message.data(), std::streamsize(message.size()));
  }
  const std::string args = how == "--decode_raw" ? how
                                                 : "--decode=" + how + " -I " GRADUS_TEST_DATA_DIR
                                                   " " GRADUS_TEST_DATA_DIR "/graph_def.proto";
  std::string out;
  if (std::FILE* p = popen(("protoc " + args + " < graph_tmp/msg.bin 2>&1").c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    pclose(p);
  }
  std::string flat;
  for (char c : out) {
    const bool space = c == ' ' || c == '\n' || c == '\t';
    if (!space) flat.push_back(c);
    else if (!flat.empty() && flat.back() != ' ') flat.push_back(' ');
  }
  return flat;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// x (Placeholder) and w (VariableV2) into dense/matmul_0, with an attr of every kind.
sm::GraphDef small_graph() {
  using sm::AttrValue, sm::DataType, sm::TensorShape;
  sm::GraphDef g;
  g.nodes.push_back({.name = "x",
                     .op = "Placeholder",
                     .attrs = {{"dtype", AttrValue{DataType::DT_FLOAT}}, {"shape", AttrValue{TensorShape{2, 3}}}}});
  g.nodes.push_back({.name = "dense/kernel", .op = "VariableV2", .attrs = {{"dtype", {DataType::DT_DOUBLE}}}});
  g.nodes.push_back({.name = "dense/matmul_0",
                     .op = "MatMul",
                     .inputs = {"x", "dense/kernel"},
                     .device = "/job:localhost/replica:0/task:0/device:CPU:0",
                     .attrs = {{"T", {DataType::DT_INT64}},
                               {"_output_shapes", {std::vector<TensorShape>{{2, 4}, {}}}},
                               {"padding", {std::string("SAME")}},
                               {"axis", {int64_t(-1)}},
                               {"alpha", {0.5f}}}});
  return g;
}

sm::StepStats small_stats() {
  sm::StepStats s;
  s.dev_stats.push_back({.device = "/job:localhost/replica:0/task:0/device:CPU:0"});
  s.dev_stats[0].node_stats.push_back({.node_name = "dense/matmul_0",
                                       .all_start_micros = 0,
                                       .op_start_rel_micros = 0,
                                       .op_end_rel_micros = 7,
                                       .all_end_rel_micros = 7,
                                       .memory = {{.allocator_name = "cpu", .total_bytes = 64, .peak_bytes = 64,
                                                   .live_bytes = 32}},
                                       .timeline_label = "matmul",
                                       .thread_id = 0});
  s.dev_stats[0].node_stats.push_back(
      {.node_name = "gradients/dense/matmul_0", .all_start_micros = 300, .all_end_rel_micros = 150, .thread_id = 2});
  return s;
}

}  // namespace

TEST_CASE("encode_graph_def: bytes computed by hand", "[summary][graph]") {
  // GraphDef {node {name "a" op "B"}, versions {producer 22}}
  CHECK(sm::encode_graph_def({.nodes = {{.name = "a", .op = "B"}}, .producer = 22}) ==
        hex_bytes("0a 06 0a 01 \"a\" 12 01 \"B\" 22 02 08 16"));
  // An empty graph still says its versions; producer 0 is left out (proto3).
  CHECK(sm::encode_graph_def({.producer = 0}) == hex_bytes("22 00"));
  // NodeDef {name "n", input "p", input "q", attr {key "T" value {type DT_FLOAT}}}
  CHECK(sm::encode_graph_def({.nodes = {{.name = "n",
                                         .inputs = {"p", "q"},
                                         .attrs = {{"T", {sm::DataType::DT_FLOAT}}}}},
                              .producer = 1}) ==
        hex_bytes("0a 12 0a 01 \"n\" 1a 01 \"p\" 1a 01 \"q\" 2a 07 0a 01 \"T\" 12 02 30 01 22 02 08 01"));
  // _output_shapes = [[2, 3], []]: AttrValue {list {shape {dim {size 2} dim {size 3}} shape {}}}
  CHECK(sm::encode_graph_def({.nodes = {{.name = "s", .attrs = {{"o", {std::vector<sm::TensorShape>{{2, 3}, {}}}}}}},
                              .producer = 0}) ==
        hex_bytes("0a 18 0a 01 \"s\" 2a 13 0a 01 \"o\" 12 0e 0a 0c 3a 08 12 02 08 02 12 02 08 03 3a 00 22 00"));
  // AttrValue {s "ab"}, {i -1} (a 10-byte varint), {f 0.5}, {shape {}} (a scalar): oneof members,
  // written even when empty or zero.
  CHECK(sm::detail::encode_attr_value({std::string("ab")}) == hex_bytes("12 02 \"ab\""));
  CHECK(sm::detail::encode_attr_value({std::string()}) == hex_bytes("12 00"));
  CHECK(sm::detail::encode_attr_value({int64_t(-1)}) == hex_bytes("18 ff ff ff ff ff ff ff ff ff 01"));
  CHECK(sm::detail::encode_attr_value({int64_t(0)}) == hex_bytes("18 00"));
  CHECK(sm::detail::encode_attr_value({0.5f}) == hex_bytes("25 00 00 00 3f"));
  CHECK(sm::detail::encode_attr_value({sm::TensorShape{}}) == hex_bytes("3a 00"));
}

TEST_CASE("encode_run_metadata: bytes computed by hand", "[summary][graph]") {
  sm::StepStats s;
  s.dev_stats.push_back({.device = "d"});
  s.dev_stats[0].node_stats.push_back({.node_name = "n",
                                       .all_start_micros = 5,
                                       .op_end_rel_micros = 3,
                                       .all_end_rel_micros = 300,
                                       .memory = {{.allocator_name = "cpu", .total_bytes = 8}}});
  // NodeExecStats {node_name "n", all_start_micros 5, op_end_rel_micros 3, all_end_rel_micros 300
  // (ac 02), memory {allocator_name "cpu", total_bytes 8}}
  const std::string node = hex_bytes("0a 01 \"n\" 10 05 20 03 28 ac 02 32 07 0a 03 \"cpu\" 10 08");
  REQUIRE(node.size() == 19);
  // RunMetadata {step_stats {dev_stats {device "d", node_stats {...}}}}
  CHECK(sm::encode_run_metadata(s) == hex_bytes("0a 1a 0a 18 0a 01 \"d\" 12 13") + node);
  CHECK(sm::encode_step_stats(s) == hex_bytes("0a 18 0a 01 \"d\" 12 13") + node);
}

TEST_CASE("decode_event: graph and tagged run metadata events", "[summary][graph]") {
  const sm::Event g = sm::decode_event(hex_bytes("10 02 22 04 22 02 08 16"));  // step 2, graph_def {versions {producer 22}}
  CHECK(g.step == 2);
  REQUIRE(g.graph_def);
  CHECK(*g.graph_def == hex_bytes("22 02 08 16"));
  CHECK_FALSE(g.run_metadata);
  // tagged_run_metadata {tag "t", run_metadata ""}
  const sm::Event r = sm::decode_event(hex_bytes("42 05 0a 01 \"t\" 12 00"));
  CHECK(r.run_metadata == std::string());
  CHECK(r.run_metadata_tag == "t");
  CHECK_FALSE(r.graph_def);
  CHECK(sm::encode_graph_event(0, {.producer = 22}) == hex_bytes("22 04 22 02 08 16"));
  // RunMetadata {step_stats {}}: the (empty) StepStats message is still there
  CHECK(sm::encode_run_metadata_event(0, 0, "t", {}) == hex_bytes("42 07 0a 01 \"t\" 12 02 0a 00"));
  CHECK_THROWS_WITH(sm::decode_event(hex_bytes("42 01 00")),
                    Catch::Contains("decode_event") && Catch::Contains("TaggedRunMetadata"));
}

TEST_CASE("data_type: gradus dtype names to TensorFlow's DataType", "[summary][graph]") {
  CHECK(sm::data_type("float32") == sm::DataType::DT_FLOAT);
  CHECK(int(sm::data_type("float64")) == 2);
  CHECK(int(sm::data_type("int32")) == 3);
  CHECK(int(sm::data_type("int64")) == 9);
  CHECK(int(sm::data_type("bool")) == 10);
  CHECK(sm::data_type("") == sm::DataType::DT_INVALID);
  CHECK(sm::data_type("complex64") == sm::DataType::DT_INVALID);
}

TEST_CASE("protoc decodes a GraphDef field by field, raw and with TensorFlow's schema", "[summary][graph]") {
  if (!have_protoc()) {
    WARN("protoc not found: skipping the protoc checks");
    return;
  }
  const std::string bytes = sm::encode_graph_def(small_graph());
  const std::string raw = protoc(bytes, "--decode_raw");
  INFO("protoc --decode_raw:\n" << raw);
  // node 1: name, op (which --decode_raw happens to read as a message), attr dtype {type 1},
  // attr shape {shape {dim {size 2} dim {size 3}}}
  CHECK(contains(raw, R"(1 { 1: "x" 2 )"));
  CHECK(contains(raw, R"(} 5 { 1: "dtype" 2 { 6: 1 } } 5 { 1: "shape" 2 { 7 { 2 { 1: 2 } 2 { 1: 3 } } } } })"));
  CHECK(contains(raw, R"(1 { 1: "dense/kernel" 2: "VariableV2" 5 { 1: "dtype" 2 { 6: 2 } } })"));
  CHECK(contains(raw, R"(1 { 1: "dense/matmul_0" 2: "MatMul" 3: "x" 3: "dense/kernel" 4: "/job:localhost/replica:0/task:0/device:CPU:0")"));
  CHECK(contains(raw, R"(5 { 1: "T" 2 { 6: 9 } })"));
  CHECK(contains(raw, R"(5 { 1: "_output_shapes" 2 { 1 { 7 { 2 { 1: 2 } 2 { 1: 4 } } 7: "" } } })"));  // the empty shape reads as ""
  CHECK(contains(raw, R"(5 { 1: "padding" 2 { 2: "SAME" } })"));
  CHECK(contains(raw, R"(5 { 1: "axis" 2 { 3: 18446744073709551615 } })"));
  CHECK(contains(raw, R"(5 { 1: "alpha" 2 { 4: 0x3f000000 } })"));
  CHECK(contains(raw, R"(4 { 1: 22 })"));

  const std::string text = protoc(bytes, "tensorflow.GraphDef");
  INFO("protoc --decode=tensorflow.GraphDef:\n" << text);
  CHECK(contains(text, R"(node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } )"
                       R"(attr { key: "shape" value { shape { dim { size: 2 } dim { size: 3 } } } } })"));
  CHECK(contains(text, R"(node { name: "dense/kernel" op: "VariableV2" attr { key: "dtype" value { type: DT_DOUBLE } } })"));
  CHECK(contains(text, R"(name: "dense/matmul_0" op: "MatMul" input: "x" input: "dense/kernel" )"
                       R"(device: "/job:localhost/replica:0/task:0/device:CPU:0")"));
  CHECK(contains(text, R"(attr { key: "T" value { type: DT_INT64 } })"));
  CHECK(contains(text, R"(attr { key: "_output_shapes" value { list { shape { dim { size: 2 } dim { size: 4 } } shape { } } } })"));
  CHECK(contains(text, R"(attr { key: "padding" value { s: "SAME" } })"));
  CHECK(contains(text, R"(attr { key: "axis" value { i: -1 } })"));
  CHECK(contains(text, R"(attr { key: "alpha" value { f: 0.5 } })"));
  CHECK(contains(text, R"(versions { producer: 22 })"));
}

TEST_CASE("protoc decodes RunMetadata with TensorFlow's schema", "[summary][graph]") {
  if (!have_protoc()) {
    WARN("protoc not found: skipping the protoc checks");
    return;
  }
  const std::string text = protoc(sm::encode_run_metadata(small_stats()), "tensorflow.RunMetadata");
  INFO("protoc --decode=tensorflow.RunMetadata:\n" << text);
  CHECK(contains(text, R"(step_stats { dev_stats { device: "/job:localhost/replica:0/task:0/device:CPU:0" node_stats { )"
                       R"(node_name: "dense/matmul_0" op_end_rel_micros: 7 all_end_rel_micros: 7 memory { )"
                       R"(allocator_name: "cpu" total_bytes: 64 peak_bytes: 64 live_bytes: 32 } timeline_label: "matmul" } )"
                       R"(node_stats { node_name: "gradients/dense/matmul_0" all_start_micros: 300 )"
                       R"(all_end_rel_micros: 150 thread_id: 2 } } })"));
}

TEST_CASE("FileWriter::graph and run_metadata: events read back, decoded by protoc", "[summary][graph]") {
  const fs::path dir = "graph_tmp/writer";
  fs::remove_all(dir);
  const sm::GraphDef g = small_graph();
  const sm::StepStats s = small_stats();
  fs::path path;
  {
    sm::FileWriter w(dir);
    w.graph(g);
    w.run_metadata("step_3", 3, s);
    w.scalar("loss", 1, 3);
    CHECK_THROWS_MATCHES(w.run_metadata("", 3, s), gd::value_error,
                         Catch::Matchers::Message("FileWriter::run_metadata: the tag is empty"));
    path = w.path();
  }
  const auto ev = sm::read_events(path);
  REQUIRE(ev.size() == 4);
  CHECK(ev[0].file_version == "brain.Event:2");
  REQUIRE(ev[1].graph_def);
  CHECK(*ev[1].graph_def == sm::encode_graph_def(g));
  CHECK(ev[1].step == 0);
  CHECK(ev[1].wall_time >= ev[0].wall_time);
  CHECK_FALSE(ev[1].run_metadata);
  CHECK_FALSE(ev[1].has_summary);
  REQUIRE(ev[2].run_metadata);
  CHECK(*ev[2].run_metadata == sm::encode_run_metadata(s));
  CHECK(ev[2].run_metadata_tag == "step_3");
  CHECK(ev[2].step == 3);
  CHECK_FALSE(ev[2].graph_def);
  CHECK((ev[3].has_summary && !ev[3].graph_def && !ev[3].run_metadata));
  CHECK_FALSE(ev[0].graph_def);

  if (!have_protoc()) {
    WARN("protoc not found: skipping the protoc checks");
    return;
  }
  const auto recs = gradus::io::read_tfrecords(path);
  const std::string graph_event = protoc(recs.at(1), "tensorflow.Event");
  INFO("graph event:\n" << graph_event);
  CHECK(contains(graph_event, "wall_time: 1"));
  CHECK(contains(graph_event, R"(graph_def: "\n)"));  // bytes starting with field 1 (node), wire type 2
  const std::string run_event = protoc(recs.at(2), "tensorflow.Event");
  INFO("run metadata event:\n" << run_event);
  CHECK(contains(run_event, R"(step: 3 tagged_run_metadata { tag: "step_3" run_metadata: ")"));
}
