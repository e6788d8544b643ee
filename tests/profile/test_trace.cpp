// gd::profile::chrome_trace_json and write_chrome_trace: the JSON parsed back with nlohmann-json
// and compared field by field with the hand-made events it was written from.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <string>
#include <unistd.h>
#include <vector>

#include <nlohmann/json.hpp>

#include "gradus/gradus.hpp"
#include "gradus/io/file.hpp"
#include "gradus/nn.hpp"
#include "gradus/profile.hpp"
#include "gradus/profile/report.hpp"
#include "gradus/profile/trace.hpp"
#include "../support/profile_events.hpp"
#include "../support/trace_check.hpp"

namespace gd = gradus;
namespace nn = gradus::nn;
namespace gp = gradus::profile;
using nlohmann::json;
using gradus_test::event;

namespace {

// Thread 0: step [0, 2'000'000] ⊃ matmul [1'234'567, 1'500'000] ⊃ (backward) add, and a
// zero-length relu at 1'500'000; thread 3: a matmul at 1'234'567'891 ns.
std::vector<gp::Event> sample() {
  std::vector<gp::Event> ev;
  ev.push_back(event("step", "", gp::EventKind::scope, 0, 0, 0, 2'000'000, 265'433));
  gp::Event mm = event("matmul", "net/dense1", gp::EventKind::forward, 0, 1, 1'234'567, 1'500'000, 100'000);
  mm.input_shapes = {gd::Shape{2, 3}, gd::Shape{3, 4}};
  mm.output_shape = gd::Shape{2, 4};
  mm.flops = 48;
  mm.bytes = 80;
  mm.alloc_bytes = -32;
  mm.peak_bytes = 64;
  mm.node = 7;
  mm.input_nodes = {1, 0};
  ev.push_back(mm);
  gp::Event add = event("add", "net/dense1", gp::EventKind::backward, 0, 2, 1'300'000, 1'400'000, 0);
  add.output_shape = gd::Shape{};
  add.flops = 0.1;
  ev.push_back(add);
  ev.push_back(event("relu", "net", gp::EventKind::forward, 0, 1, 1'500'000, 1'500'000, 0));
  gp::Event late = event("matmul", "", gp::EventKind::forward, 3, 0, 1'234'567'891, 1'234'568'000, 0);
  late.dtype = "float64";
  late.flops = 1e15;
  ev.push_back(late);
  return ev;
}

const json* find(const json& trace, const std::string& name, const std::string& ph, double ts = -1) {
  for (const auto& e : trace["traceEvents"])
    if (e["name"] == name && e["ph"] == ph && (ts < 0 || e["ts"].get<double>() == ts)) return &e;
  return nullptr;
}

}  // namespace

TEST_CASE("chrome trace: every event with its times, lane, category and args", "[profile][trace]") {
  const auto events = sample();
  const std::string text = gp::chrome_trace_json(events);
  const json trace = json::parse(text);
  INFO(text);
  CHECK(trace["displayTimeUnit"] == "ms");
  REQUIRE(trace["traceEvents"].is_array());
  CHECK(trace["traceEvents"].size() == 1 + 2 + events.size());  // process, 2 threads, events

  // Times in microseconds, written exactly from the nanoseconds.
  CHECK(text.find(R"("ts":1234.567,"dur":265.433)") != std::string::npos);
  CHECK(text.find(R"("ts":1234567.891,"dur":0.109)") != std::string::npos);

  const json* mm = find(trace, "matmul", "X", 1234.567);
  REQUIRE(mm);
  CHECK((*mm)["cat"] == "forward");
  CHECK((*mm)["pid"] == 1);
  CHECK((*mm)["tid"] == 0);
  CHECK((*mm)["dur"].get<double>() == 265.433);
  const json& a = (*mm)["args"];
  CHECK(a["scope"] == "net/dense1");
  CHECK(a["input_shapes"] == json::parse("[[2,3],[3,4]]"));
  CHECK(a["output_shape"] == json::parse("[2,4]"));
  CHECK(a["dtype"] == "float32");
  CHECK(a["flops"] == 48);
  CHECK(a["bytes"] == 80);
  CHECK(a["alloc_bytes"] == -32);
  CHECK(a["peak_bytes"] == 64);
  CHECK(a["node"] == 7);
  CHECK(a["input_nodes"] == json::parse("[1,0]"));
  CHECK(a["self_us"].get<double>() == 165.433);

  const json* add = find(trace, "add", "X");
  REQUIRE(add);
  CHECK((*add)["cat"] == "backward");
  CHECK((*add)["ts"].get<double>() == 1300.0);
  CHECK((*add)["dur"].get<double>() == 100.0);
  CHECK((*add)["args"]["output_shape"] == json::array());
  CHECK((*add)["args"]["flops"].get<double>() == 0.1);  // written to read back exactly
  CHECK(!(*add)["args"].contains("node"));              // node 0: none

  const json* step = find(trace, "step", "X");
  REQUIRE(step);
  CHECK((*step)["cat"] == "scope");
  CHECK((*step)["ts"].get<double>() == 0.0);
  CHECK((*step)["dur"].get<double>() == 2000.0);
  CHECK(!(*step)["args"].contains("dtype"));

  const json* relu = find(trace, "relu", "X");
  REQUIRE(relu);
  CHECK((*relu)["dur"].get<double>() == 0.0);
  CHECK((*relu)["args"]["scope"] == "net");

  const json* late = find(trace, "matmul", "X", 1234567.891);
  REQUIRE(late);
  CHECK((*late)["tid"] == 3);
  CHECK((*late)["args"]["scope"] == "");
  CHECK((*late)["args"]["dtype"] == "float64");
  CHECK((*late)["args"]["flops"].get<double>() == 1e15);

  // Metadata: the process and one lane per thread.
  const json* process = find(trace, "process_name", "M");
  REQUIRE(process);
  CHECK((*process)["pid"] == 1);
  CHECK((*process)["args"]["name"] == "gradus");
  int lanes = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e["name"] != "thread_name") continue;
    ++lanes;
    CHECK(e["ph"] == "M");
    CHECK(e["pid"] == 1);
    CHECK(e["args"]["name"] == "thread " + std::to_string(e["tid"].get<int>()));
    CHECK((e["tid"] == 0 || e["tid"] == 3));
  }
  CHECK(lanes == 2);

  CHECK(gradus_test::trace_nesting_problem(trace) == "");
}

TEST_CASE("chrome trace: events are written in nesting order whatever their order in", "[profile][trace]") {
  auto events = sample();
  std::reverse(events.begin(), events.end());
  const json trace = json::parse(gp::chrome_trace_json(events));
  std::vector<std::string> names;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "X") names.push_back(e["name"]);
  CHECK(names == std::vector<std::string>{"step", "matmul", "add", "relu", "matmul"});
  CHECK(gradus_test::trace_nesting_problem(trace) == "");
}

TEST_CASE("chrome trace: names are escaped, bytes that are not UTF-8 replaced", "[profile][trace]") {
  std::vector<gp::Event> events = {event("a\"b\\c\nd\te\x01", "caf\xc3\xa9/\xe2\x82\xac", gp::EventKind::scope, 0, 0, 0, 10, 0),
                                   event("bad\xff\xc3(\xed\xa0\x80z", "", gp::EventKind::forward, 0, 1, 2, 3, 0)};
  const std::string text = gp::chrome_trace_json(events);
  CHECK(text.find(R"("a\"b\\c\nd\te\u0001")") != std::string::npos);
  const json trace = json::parse(text);
  CHECK((*find(trace, "a\"b\\c\nd\te\x01", "X"))["args"]["scope"] == "caf\xc3\xa9/\xe2\x82\xac");
  // \xff, a lead byte without its continuation, and an encoded surrogate (3 bytes) are not UTF-8.
  CHECK(find(trace, "bad\xef\xbf\xbd\xef\xbf\xbd(\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbdz", "X"));
}

TEST_CASE("chrome trace: an empty run, and malformed events", "[profile][trace]") {
  const json trace = json::parse(gp::chrome_trace_json({}));
  REQUIRE(trace["traceEvents"].size() == 1);
  CHECK(trace["traceEvents"][0]["name"] == "process_name");

  auto bad = sample();
  bad.push_back(event("relu", "", gp::EventKind::forward, 3, 0, 1'234'567'900, 1'234'570'000, 0));
  CHECK_THROWS_WITH(gp::chrome_trace_json(bad),
                    Catch::Contains("chrome_trace_json:") && Catch::Contains("overlap without one containing the other"));
  bad = sample();
  bad[0].end_ns = -1;
  CHECK_THROWS_AS(gp::chrome_trace_json(bad), gd::value_error);
}

TEST_CASE("trace_nesting_problem finds events that overlap without nesting", "[profile][trace]") {
  const auto x = [](double ts, double dur, int tid) {
    return json{{"name", "e" + std::to_string(ts)}, {"ph", "X"}, {"ts", ts}, {"dur", dur}, {"pid", 1}, {"tid", tid}};
  };
  json trace = {{"traceEvents", json::array({x(0, 10, 0), x(1, 2, 0), x(3, 7, 0), x(10, 1, 0), x(5, 10, 1)})}};
  CHECK(gradus_test::trace_nesting_problem(trace) == "");
  // [0,10] ⊃ [1,3] and [3,10] ⊃ [3.5,9]; then [9.5,10.5] straddles the end of [3,10] and [0,10].
  trace["traceEvents"].push_back(x(3.5, 5.5, 0));
  CHECK(gradus_test::trace_nesting_problem(trace) == "");
  trace["traceEvents"].push_back(x(9.5, 1, 0));
  CHECK(gradus_test::trace_nesting_problem(trace).find("overlap without one containing the other") != std::string::npos);
  // The same on another lane is fine.
  trace["traceEvents"].back()["tid"] = 2;
  CHECK(gradus_test::trace_nesting_problem(trace) == "");
  CHECK(gradus_test::trace_nesting_problem(json::object()) != "");
}

TEST_CASE("write_chrome_trace writes the JSON atomically to a file", "[profile][trace]") {
  const auto dir = std::filesystem::temp_directory_path() / ("gradus_trace_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto path = dir / "step.trace.json";
  gp::write_chrome_trace(path, sample());
  CHECK(gd::io::read_file(path) == gp::chrome_trace_json(sample()));
  std::size_t files = 0;
  for ([[maybe_unused]] const auto& f : std::filesystem::directory_iterator(dir)) ++files;
  CHECK(files == 1);  // no temporary left behind
  CHECK_THROWS_AS(gp::write_chrome_trace(dir / "missing" / "t.json", sample()), gd::io_error);
  std::filesystem::remove_all(dir);
}

TEST_CASE("a profiled MLP step: its trace nests, its report adds up", "[profile][trace][report]") {
  gd::Rng rng(5);
  auto net = nn::Sequential(nn::Dense<float>({.in = 5, .out = 7}, rng), nn::ReLU{}, nn::Dense<float>({.in = 7, .out = 3}, rng));
  gd::Tensor<float> x({4, 5});
  for (int64_t i = 0; i < x.size(); ++i) x.data()[i] = 0.1f * float(i % 7) - 0.3f;
  gp::Profiler prof;
  prof.attach(net, "net");
  prof.start();
  {
    gp::Scope step("step");
    gd::backward(gd::mean(net(x)));
  }
  prof.stop();
  const auto& events = prof.events();
  REQUIRE(events.size() >= 8);

  const json trace = json::parse(gp::chrome_trace_json(events));
  CHECK(gradus_test::trace_nesting_problem(trace) == "");
  std::size_t complete = 0;
  for (const auto& e : trace["traceEvents"]) complete += e["ph"] == "X";
  CHECK(complete == events.size());

  // Every op event counted once: the rows' self times add up to the summary's, and with the
  // Scope to the wall time of the one thread.
  const auto summary = gp::summarize(events);
  int64_t self = 0, all_self = 0, calls = 0;
  for (const auto& r : gp::report(events)) self += r.self_ns, calls += r.calls;
  for (const auto& r : gp::report(events, {.include_scopes = true})) all_self += r.self_ns;
  CHECK(self == summary.op_self_ns);
  CHECK(all_self == summary.wall_ns);
  CHECK(calls == int64_t(events.size()) - 1);

  // The layers' rows sum into "net" when scopes nest.
  const auto flat = gp::report(events, {.group_by = gp::GroupBy::scope});
  const auto nested = gp::report(events, {.group_by = gp::GroupBy::scope, .nested_scopes = true});
  int64_t under_net = 0;
  for (const auto& r : flat)
    if (r.key == "net" || r.key.rfind("net/", 0) == 0) under_net += r.self_ns;
  const auto net_row = std::find_if(nested.begin(), nested.end(), [](const gp::ReportRow& r) { return r.key == "net"; });
  REQUIRE(net_row != nested.end());
  CHECK(net_row->self_ns == under_net);

  // 5*7 + 7 + 7*3 + 3 = 66 parameters of 4 bytes.
  CHECK(gp::format_parameters(prof.parameters()).find("total (4 parameters)") != std::string::npos);
  CHECK(gp::format_parameters(prof.parameters()).find("66    264\n") != std::string::npos);
}
