// tests/dist/test_fit.cpp — fit on 2 ranks through gd::dist::collective(): against one process
// training on the concatenated batch, a stopped-and-resumed 2-rank run against an uninterrupted
// one, the chief's files, shared logs, and a NaN on one rank stopping both.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include <unistd.h>

#include "gradus/dist.hpp"
#include "gradus/dist/collective.hpp"
#include "gradus/losses.hpp"
#include "gradus/nn.hpp"
#include "gradus/optim.hpp"
#include "gradus/summary.hpp"
#include "gradus/train.hpp"
#include "models.hpp"

namespace gd = gradus;
namespace fs = std::filesystem;

namespace {

using dist_models::Mlp;

const auto mse = [](const gd::Tensor<float>& y, const gd::Var<float>& p) {
  return gd::losses::mean_squared_error(y, p);
};

// Rows [first, first + n): x [n, 5], y [n, 3], smooth functions of the row index.
gd::train::Data<float, float> make_rows(int64_t first, int64_t n, double salt) {
  gd::Tensor<float> x = gd::Tensor<float>::empty({n, 5}), y = gd::Tensor<float>::empty({n, 3});
  for (int64_t k = 0; k < n; ++k) {
    const double i = double(first + k);
    for (int64_t j = 0; j < 5; ++j) x.data()[k * 5 + j] = float(std::sin(0.7 * i + 1.3 * double(j) + salt));
    for (int64_t j = 0; j < 3; ++j) y.data()[k * 3 + j] = float(std::cos(0.4 * i - 0.9 * double(j) + salt));
  }
  return {x, y};
}
gd::train::Data<float, float> make_data(int64_t n, double salt) { return make_rows(0, n, salt); }

std::vector<gd::Tensor<float>> snapshot(Mlp& net) {
  std::vector<gd::Tensor<float>> out;
  for (auto& [name, v] : net.named_parameters()) out.push_back(v.value().clone());
  return out;
}

bool bit_identical(const std::vector<gd::Tensor<float>>& a, const std::vector<gd::Tensor<float>>& b) {
  if (a.size() != b.size()) return false;
  for (size_t k = 0; k < a.size(); ++k)
    if (a[k].size() != b[k].size() || std::memcmp(a[k].data(), b[k].data(), size_t(a[k].size()) * sizeof(float)) != 0)
      return false;
  return true;
}

// Rank 0's copy of `v` on every rank.
template <class T>
std::vector<T> rank0_copy(const std::vector<T>& v) {
  std::string bytes(v.size() * sizeof(T), '\0');
  if (!v.empty()) std::memcpy(bytes.data(), v.data(), bytes.size());
  gd::dist::collective().broadcast(bytes);
  std::vector<T> out(bytes.size() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}
std::vector<gd::Tensor<float>> rank0_copy(const std::vector<gd::Tensor<float>>& ts) {
  std::vector<gd::Tensor<float>> out;
  for (const auto& t : ts) {
    gd::Tensor<float> c = t.clone();
    gd::dist::broadcast(c, 0);
    out.push_back(c);
  }
  return out;
}

// A fresh directory that both ranks see (rank 0 names it), removed at scope exit.
struct SharedDir {
  fs::path path;
  SharedDir() {
    std::string name;
    if (gd::dist::rank() == 0) {
      name = (fs::temp_directory_path() / ("gradus_dist_fit_" + std::to_string(::getpid()))).string();
      fs::remove_all(name);
      fs::create_directories(name);
    }
    gd::dist::collective().broadcast(name);
    path = name;
  }
  ~SharedDir() {
    gd::dist::barrier();
    if (gd::dist::rank() == 0) fs::remove_all(path);
  }
};

// Records what hooks see on this rank.
struct Record : gd::train::Hook {
  std::vector<double> losses;
  std::optional<fs::path> restored;
  void after_create_session(gd::train::Session& s) override { restored = s.restored_from(); }
  void after_step(gd::train::Session&, const gd::train::StepResult& r) override { losses.push_back(r.loss); }
};

// A hook that writes files would do it here: it must run on the chief only.
struct ChiefOnly : gd::train::Hook {
  int steps = 0;
  bool chief_only() const override { return true; }
  void after_step(gd::train::Session&, const gd::train::StepResult&) override { ++steps; }
};

std::vector<double> epoch_values(const gd::train::History& h) {
  std::vector<double> v;
  for (const auto& e : h.epochs) {
    v.push_back(e.loss);
    v.push_back(e.val_loss.value_or(-1));
  }
  return v;
}

std::string file_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Every file under `dir` (none when it does not exist).
std::vector<fs::path> files_under(const fs::path& dir) {
  std::vector<fs::path> out;
  if (!fs::exists(dir)) return out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) out.push_back(e.path());
  return out;
}

constexpr int64_t kExamples = 24, kBatch = 4;  // per rank; 2 ranks: a global batch of 8, 3 steps per epoch

}  // namespace

TEST_CASE("dist fit: 2 ranks = one process on the concatenated batch; the chief writes the files", "[dist][fit]") {
  REQUIRE(gd::dist::size() == 2);
  const int r = gd::dist::rank();
  SharedDir dir;
  const auto train = make_data(kExamples, 0.0), val = make_data(6, 0.5);

  Mlp net(1000 + uint64_t(r));  // different on each rank: fit starts every rank from rank 0's
  gd::optim::Adam<float> adam(net.parameters(), {.lr = 0.05});
  Record record;
  ChiefOnly chief_only;
  gd::train::CheckpointSaver saver({.every_steps = 2, .dir = dir.path / ("ckpt" + std::to_string(r))});
  // A writer creates its event file at once, so a program makes it on the chief only; here each
  // rank has one, to show that the SummarySaver writes nothing on rank 1.
  gd::summary::FileWriter writer(dir.path / ("summaries" + std::to_string(r)));
  gd::train::SummarySaver summaries(writer, {.every_steps = 1});
  const gd::train::History h =
      gd::train::fit(net, adam, mse, train,
                     {.epochs = 2, .batch_size = kBatch, .seed = 3, .validation = &val,
                      .hooks = {&record, &chief_only, &saver, &summaries}, .run_dir = dir.path / "run",
                      .collective = gd::dist::collective()});
  writer.flush();
  const auto params = snapshot(net);

  // both ranks: the same bits, the same logs
  CHECK(bit_identical(params, rank0_copy(params)));
  REQUIRE(record.losses.size() == 6);
  CHECK(record.losses == rank0_copy(record.losses));
  CHECK(epoch_values(h) == rank0_copy(epoch_values(h)));
  CHECK(h.global_step == 6);

  // files: rank 0's only
  CHECK(chief_only.steps == (r == 0 ? 6 : 0));
  const auto ckpt_files = files_under(dir.path / ("ckpt" + std::to_string(r)));
  size_t checkpoints = 0;
  for (const auto& f : ckpt_files) checkpoints += f.extension() == ".safetensors";
  CHECK(checkpoints == (r == 0 ? 3u : 0u));  // steps 2, 4, 6
  CHECK(ckpt_files.size() == (r == 0 ? 4u : 0u));  // and the saver's state file "checkpoint"
  const auto events = files_under(dir.path / ("summaries" + std::to_string(r)));
  REQUIRE(events.size() == 1);
  CHECK((file_bytes(events[0]).find("learning_rate") != std::string::npos) == (r == 0));
  CHECK(files_under(dir.path / "run").empty());  // the saver given in hooks replaces the default one

  // one process, batch 8 (the two ranks' batches concatenated), rank 0's initial weights
  Mlp ref(1000);
  gd::optim::Adam<float> ref_adam(ref.parameters(), {.lr = 0.05});
  Record ref_record;
  const gd::train::History ref_h =
      gd::train::fit(ref, ref_adam, mse, train,
                     {.epochs = 2, .batch_size = 2 * kBatch, .seed = 3, .validation = &val, .hooks = {&ref_record}});
  const auto want = snapshot(ref);
  REQUIRE(want.size() == params.size());
  for (size_t k = 0; k < want.size(); ++k)
    for (int64_t i = 0; i < want[k].size(); ++i) {
      INFO("parameter " << k << " element " << i);
      REQUIRE(params[k].data()[i] == Approx(want[k].data()[i]).epsilon(1e-5).margin(1e-6));
    }
  // the logged step losses are the global batch's mean loss; the epochs' too
  for (size_t s = 0; s < ref_record.losses.size(); ++s) {
    INFO("step " << s + 1);
    CHECK(record.losses[s] == Approx(ref_record.losses[s]).epsilon(1e-5));
  }
  const auto got_epochs = epoch_values(h), want_epochs = epoch_values(ref_h);
  REQUIRE(got_epochs.size() == want_epochs.size());
  for (size_t k = 0; k < got_epochs.size(); ++k) CHECK(got_epochs[k] == Approx(want_epochs[k]).epsilon(1e-5));
  // and training moved the weights
  Mlp init(1000);
  CHECK_FALSE(bit_identical(snapshot(init), params));
}

TEST_CASE("dist fit: a 2-rank run stopped at step 5 and resumed = an uninterrupted 2-rank run, bit for bit",
          "[dist][fit][resume]") {
  REQUIRE(gd::dist::size() == 2);
  const int r = gd::dist::rank();
  SharedDir dir;
  const auto train = make_data(kExamples, 0.25), val = make_data(6, 0.75);
  auto run = [&](const fs::path& run_dir, uint64_t seed, std::vector<gd::train::Hook*> hooks) {
    Mlp net(seed + uint64_t(r));
    gd::optim::Adam<float> adam(net.parameters(), {.lr = 0.05});
    gd::train::History h = gd::train::fit(net, adam, mse, train,
                                          {.epochs = 3, .batch_size = kBatch, .seed = 9, .validation = &val,
                                           .hooks = hooks, .run_dir = run_dir, .collective = gd::dist::collective()});
    return std::pair{snapshot(net), h};
  };
  const auto [whole, whole_h] = run(dir.path / "whole", 10, {});

  gd::train::StopAtStep stop({.last_step = 5});  // mid-epoch 2 (3 steps per epoch)
  const auto [first, first_h] = run(dir.path / "stopped", 10, {&stop});
  CHECK(first_h.global_step == 5);
  CHECK(first_h.epochs.size() == 1);
  CHECK_FALSE(bit_identical(first, whole));
  // resumed from other initial weights on both ranks: the chief's checkpoint is every rank's start
  Record record;
  const auto [resumed, resumed_h] = run(dir.path / "stopped", 77, {&record});
  REQUIRE(record.restored.has_value());  // rank 1 knows what the chief restored
  CHECK(record.restored->filename().string().find("-5.") != std::string::npos);
  CHECK(record.losses.size() == 4);  // steps 6 .. 9
  CHECK(bit_identical(resumed, whole));
  CHECK(resumed_h == whole_h);
  CHECK(bit_identical(resumed, rank0_copy(resumed)));
  // checkpoints only in the shared run_dir, by the chief (one writer: no clash)
  CHECK_FALSE(gd::io::latest_checkpoint(dir.path / "stopped").value_or("").empty());
}

TEST_CASE("dist fit: a NaN loss on one rank stops both after the same step", "[dist][fit][nan]") {
  REQUIRE(gd::dist::size() == 2);
  const int r = gd::dist::rank();
  // no shuffle: step s covers rows [8s, 8s + 8), rank 1 takes [8s + 4, 8s + 8); row 13 is rank 1's at step 2
  auto train = make_data(kExamples, 0.0);
  train.x.data()[13 * 5 + 2] = std::numeric_limits<float>::quiet_NaN();
  for (bool fail : {false, true}) {
    INFO("fail " << fail);
    Mlp net(5);
    gd::optim::SGD<float> sgd(net.parameters(), {.lr = 0.01});
    Record record;
    gd::train::NanGuard guard({.fail = fail});
    const gd::train::FitOptions<float, float> o{.epochs = 2, .batch_size = kBatch, .shuffle = false,
                                                .hooks = {&record, &guard}, .collective = gd::dist::collective()};
    if (fail) {
      CHECK_THROWS_AS(gd::train::fit(net, sgd, mse, train, o), gd::train::nan_error);
    } else {
      const gd::train::History h = gd::train::fit(net, sgd, mse, train, o);
      CHECK(h.global_step == 2);
      CHECK(h.stop_reason.find("NanGuard: loss is nan at step 2") == 0);
      REQUIRE(h.nonfinite_step.has_value());
      CHECK(*h.nonfinite_step == 2);
    }
    REQUIRE(record.losses.size() == 2);  // both ranks saw the NaN
    CHECK(std::isfinite(record.losses[0]));
    CHECK(std::isnan(record.losses[1]));
    const int mine = r;
    CHECK(rank0_copy(std::vector<int>{mine})[0] == 0);  // both ranks are still in step with each other
  }
}

TEST_CASE("dist Session: a user's loop on 2 ranks = one process on the concatenated batch; reopened, the "
          "chief's checkpoint on every rank",
          "[dist][session]") {
  REQUIRE(gd::dist::size() == 2);
  const int r = gd::dist::rank();
  SharedDir dir;
  // step s: global rows [8s, 8s + 8); rank r its 4 rows from 8s + 4r
  auto run = [&](Mlp& net, gd::optim::Adam<float>& adam, const gd::train::SessionOptions& o, int64_t last, int64_t per,
                 int64_t offset) {
    gd::train::Session session(net, adam, o);
    while (!session.should_stop() && session.global_step() < last)
      session.run([&] {
        const auto b = make_rows(8 * session.global_step() + offset, per, 1.5);
        return std::pair{gd::losses::mean_squared_error(b.y, net.forward(b.x)), per};
      });
    return session.close();
  };
  Mlp net(300 + uint64_t(r));
  gd::optim::Adam<float> adam(net.parameters(), {.lr = 0.05});
  Record record;
  const gd::train::History h =
      run(net, adam, {.run_dir = dir.path / "session", .hooks = {&record}, .collective = gd::dist::collective()}, 4,
          kBatch, kBatch * r);
  const auto params = snapshot(net);
  CHECK(h.global_step == 4);
  CHECK(bit_identical(params, rank0_copy(params)));
  CHECK(record.losses == rank0_copy(record.losses));

  Mlp ref(300);
  gd::optim::Adam<float> ref_adam(ref.parameters(), {.lr = 0.05});
  Record ref_record;
  run(ref, ref_adam, {.hooks = {&ref_record}}, 4, 2 * kBatch, 0);
  const auto want = snapshot(ref);
  for (size_t k = 0; k < want.size(); ++k)
    for (int64_t i = 0; i < want[k].size(); ++i) {
      INFO("parameter " << k << " element " << i);
      REQUIRE(params[k].data()[i] == Approx(want[k].data()[i]).epsilon(1e-5).margin(1e-6));
    }
  for (size_t s = 0; s < 4; ++s) CHECK(record.losses[s] == Approx(ref_record.losses[s]).epsilon(1e-5));

  // reopened with other initial weights: every rank holds the chief's step-4 state
  Mlp again(900 + uint64_t(r));
  gd::optim::Adam<float> again_adam(again.parameters(), {.lr = 0.05});
  gd::train::Session reopened(again, again_adam,
                              {.run_dir = dir.path / "session", .collective = gd::dist::collective()});
  CHECK(reopened.global_step() == 4);
  CHECK(reopened.restored_from().has_value());
  CHECK(bit_identical(snapshot(again), params));
  CHECK(again_adam.iterations() == 4);
  reopened.close();
}
