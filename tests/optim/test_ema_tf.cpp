// optim::ExponentialMovingAverage against TensorFlow's own tf.train.ExponentialMovingAverage
// (tests/fixtures/optim/ema_tf.json, written by make_ema_tf.py with TensorFlow 2.21.0): the
// shadows of two float variables after each of 12 assignments, with a fixed decay and with
// num_updates (TensorFlow's warm-up decay).
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <vector>

#include <nlohmann/json.hpp>

#include <gradus/gradus.hpp>
#include <gradus/optim.hpp>

namespace gd = gradus;

namespace {

std::vector<float> flat_floats(const nlohmann::json& j) {
  std::vector<float> out;
  if (!j.is_array()) return {j.get<float>()};
  for (const auto& e : j)
    for (float v : flat_floats(e)) out.push_back(v);
  return out;
}

void assign(gd::Var<float>& v, const nlohmann::json& values) {
  const std::vector<float> f = flat_floats(values);
  REQUIRE(int64_t(f.size()) == v.value().size());
  std::copy(f.begin(), f.end(), v.value().data());
}

}  // namespace

TEST_CASE("optim ema: the shadows of TensorFlow's ExponentialMovingAverage, step by step", "[optim][ema]") {
  std::ifstream in(std::filesystem::path(GRADUS_TEST_DATA_DIR) / "optim" / "ema_tf.json");
  REQUIRE(in.good());
  const nlohmann::json fx = nlohmann::json::parse(in);
  REQUIRE(fx["runs"].size() == 2);
  for (const auto& run : fx["runs"]) {
    const bool with_step = run["num_updates"].get<bool>();
    INFO("decay " << run["decay"].get<double>() << (with_step ? " with num_updates" : ""));
    gd::Var<float> a(gd::Tensor<float>::zeros({3})), b(gd::Tensor<float>::zeros({2, 2}));
    assign(a, fx["initial"][0]);
    assign(b, fx["initial"][1]);
    gd::optim::ExponentialMovingAverage<float> ema({a, b}, {.decay = run["decay"].get<double>()});
    const auto& shadows = run["shadows"];
    for (size_t t = 0; t < shadows.size(); ++t) {
      assign(a, fx["values"][t][0]);
      assign(b, fx["values"][t][1]);
      if (with_step)
        ema.apply(int64_t(t + 1));
      else
        ema.apply();
      for (int k = 0; k < 2; ++k) {
        const std::vector<float> want = flat_floats(shadows[t][size_t(k)]);
        const gd::Tensor<float>& got = ema.average(k == 0 ? a : b);
        for (size_t i = 0; i < want.size(); ++i) {
          INFO("step " << t + 1 << ", variable " << k << ", element " << i);
          CHECK(got.data()[i] == Approx(want[i]).epsilon(1e-6).margin(1e-6));
        }
      }
    }
  }
}
