// Tests of gd::train::ProfilerHook: which steps it profiles in a fit, and the files it writes
// (Chrome trace, tables, graph and step stats in an event file), read back.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "gradus/gradus.hpp"
#include "gradus/losses.hpp"
#include "gradus/nn.hpp"
#include "gradus/optim.hpp"
#include "gradus/profile.hpp"
#include "gradus/summary.hpp"
#include "gradus/train.hpp"
#include "../support/trace_check.hpp"

namespace gd = gradus;
namespace fs = std::filesystem;
using gd::Tensor;

namespace {

struct Mlp : gd::nn::Module<float, Mlp> {
  gd::nn::Dense<float> d1, d2;
  explicit Mlp(gd::Rng& init) : d1({.in = 4, .out = 8, .activation = gd::nn::relu}, init), d2({.in = 8, .out = 3}, init) {
    register_module("d1", d1);
    register_module("d2", d2);
  }
  gd::Var<float> forward(const Tensor<float>& x) { return d2(d1(x)); }
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("ProfilerHook profiles every N-th step of a fit and writes trace, tables and graph", "[profile][train]") {
  const fs::path dir = fs::absolute("profiler_hook_run");
  fs::remove_all(dir);
  gd::Rng init(1), data_rng(2);
  Mlp net(init);
  gd::optim::SGD<float> opt(net.parameters(), {.lr = 0.1});
  Tensor<float> x = Tensor<float>::random_normal({32, 4}, data_rng);
  Tensor<int64_t> y({32});
  for (int64_t i = 0; i < 32; ++i) y.data()[i] = int64_t(x(i, 0) > 0) + int64_t(x(i, 1) > 0);
  const auto xent = [](const Tensor<int64_t>& labels, const gd::Var<float>& logits) {
    return gd::losses::sparse_softmax_cross_entropy_with_logits(labels, logits);
  };
  std::ostringstream printed;
  gd::train::ProfilerHook prof(net, {.every_steps = 3, .output_dir = dir, .print = &printed});
  gd::train::fit(net, opt, xent, gd::train::Data<float, int64_t>{x, y},
                 {.epochs = 1, .batch_size = 4, .seed = 3, .hooks = {&prof}});  // 8 steps: 0..7

  CHECK(prof.profiled_steps() == std::vector<int64_t>{0, 3, 6});
  // one step's events: two matmuls forward and backward, under the modules' paths; each kernel's
  // gradient is a backward matmul event of its own at the end of the pass (autodiff LeafNode)
  int forward_mm = 0, backward_mm = 0;
  for (const auto& e : prof.last_events()) {
    if (e.name != "matmul") continue;
    (e.kind == gd::profile::EventKind::forward ? forward_mm : backward_mm)++;
    CHECK((e.scope == "d1" || e.scope == "d2"));
  }
  CHECK(forward_mm == 2);
  CHECK(backward_mm == 4);
  CHECK(printed.str().find("matmul") != std::string::npos);

  for (int step : {0, 3, 6}) {
    const std::string tag = std::to_string(step);
    INFO("step " << tag);
    REQUIRE(fs::exists(dir / ("trace-" + tag + ".json")));
    const auto trace = nlohmann::json::parse(slurp(dir / ("trace-" + tag + ".json")));
    CHECK(gradus_test::trace_nesting_problem(trace).empty());
    int complete = 0;
    for (const auto& ev : trace["traceEvents"]) complete += ev["ph"] == "X";
    CHECK(complete >= 8);
    const std::string tables = slurp(dir / ("profile-" + tag + ".txt"));
    CHECK(tables.find("matmul") != std::string::npos);
    CHECK(tables.find("d1.kernel") != std::string::npos);  // the parameter table
  }
  // the event file: one graph, three step-stats records
  int graphs = 0, stats = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().filename().string().find("tfevents") == std::string::npos) continue;
    for (const auto& event : gd::summary::read_events(entry.path())) {
      graphs += event.graph_def.has_value();
      stats += event.run_metadata.has_value();
    }
  }
  CHECK(graphs == 1);
  CHECK(stats == 3);
  fs::remove_all(dir);
}

TEST_CASE("ProfilerHook rejects bad options", "[profile][train]") {
  gd::Rng init(1);
  Mlp net(init);
  CHECK_THROWS_WITH(gd::train::ProfilerHook(net, {.every_steps = 0}), Catch::Contains("every_steps must be > 0"));
}
