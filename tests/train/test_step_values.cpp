// The step's own values in the hooks: Logging::record (tf.train.LoggingTensorHook's tensors) and
// SummarySaver's time schedule and "global_step/sec" (TF's StepCounterHook).
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include <gradus/gradus.hpp>
#include <gradus/train.hpp>

namespace gd = gradus;

namespace {

struct Line : gd::nn::Module<double> {
  gd::Var<double> w;
  Line() : w(register_parameter("w", gd::Tensor<double>::from({1.0, -2.0, 0.5}))) {}
};

}  // namespace

TEST_CASE("Logging::record: the step's values on the next line, as numbers or short tensors", "[train][hooks][logging]") {
  Line net;
  gd::optim::SGD<double> opt(net.parameters(), {.lr = 0.25});
  std::ostringstream out;
  gd::train::Logging log({.every_steps = 2, .epochs = false, .max_values = 2}, out);
  gd::train::Session session(net, opt, {.hooks = {&log}});
  for (int step = 1; step <= 4; ++step)
    session.run([&] {
      log.record("step_twice", 2.0 * step);
      log.record("w", net.w);                                           // a Var: its value
      log.record("ids", gd::Tensor<int64_t>::from({step, step + 1}));   // an int64 tensor
      return gd::Var<double>(gd::sum(gd::square(net.w)));
    });
  session.close();
  // w after step 2: each step halves it (w -= 0.25 * 2 w): [0.25, -0.5, 0.125]; after step 4: [0.0625, -0.125, ...]
  const std::string text = out.str();
  INFO(text);
  CHECK(text.find("  step_twice 4  w [0.25, -0.5, ...] [3]  ids [2, 3] [2]\n") != std::string::npos);
  CHECK(text.find("  step_twice 8  w [0.0625, -0.125, ...] [3]  ids [4, 5] [2]\n") != std::string::npos);
  CHECK_THROWS_AS(gd::train::Logging({.max_values = 0}), gd::value_error);
  CHECK_THROWS_AS(log.record("", 1.0), gd::value_error);
}

TEST_CASE("SummarySaver: by seconds as well as steps, and global_step/sec", "[train][hooks][summary]") {
  const std::filesystem::path dir = "summary_by_time";
  std::filesystem::remove_all(dir);
  Line net;
  gd::optim::SGD<double> opt(net.parameters(), {.lr = 0.1});
  std::filesystem::path file;
  {
    gd::summary::FileWriter writer(dir);
    file = writer.path();
    // every_secs below any step's time: a write after every step, whatever every_steps says
    gd::train::SummarySaver summaries(writer, {.every_steps = 0, .every_secs = 1e-9});
    gd::train::Session session(net, opt, {.hooks = {&summaries}});
    for (int step = 1; step <= 3; ++step) session.run([&] { return gd::Var<double>(gd::sum(gd::square(net.w))); });
    session.close();
  }
  std::vector<std::string> seen;
  double rate = 0;
  for (const auto& e : gd::summary::read_events(file))
    for (const auto& v : e.values) {
      seen.push_back(std::to_string(e.step) + " " + v.tag);
      if (v.tag == "global_step/sec" && v.simple_value) rate = *v.simple_value;
    }
  auto has = [&](const std::string& s) { return std::find(seen.begin(), seen.end(), s) != seen.end(); };
  CHECK(has("1 loss"));
  CHECK(has("2 loss"));
  CHECK(has("3 loss"));
  CHECK(has("3 global_step/sec"));
  CHECK(rate > 0);
  gd::summary::FileWriter other(dir / "other");
  CHECK_THROWS_AS(gd::train::SummarySaver(other, {.every_steps = 0}), gd::value_error);
}
