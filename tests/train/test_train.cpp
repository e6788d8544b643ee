// Tests of gd::train: fit / evaluate / predict, exact resume from checkpoints, and every hook.
// One model type (Dense-BatchNorm-ReLU-Dropout-Dense in double) and one loss keep compile time low.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iostream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <gradus/gradus.hpp>
#include <gradus/train.hpp>

#include "../support/classification_net.hpp"
#include "../support/same_bits.hpp"

namespace gd = gradus;
namespace fs = std::filesystem;
using gd::Tensor;
using Data = gd::train::Data<double, int64_t>;

namespace {

using Net = gradus_test::DenseBatchNormNet;
using gradus_test::make_data;
using gradus_test::same_bits;
using gradus_test::same_state;
using gradus_test::xent;

/// `text` is exactly one line per pattern, each matching its (ECMAScript) pattern.
void check_lines(const std::string& text, const std::vector<std::string>& patterns) {
  INFO(text);
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  CHECK(text.back() == '\n');
  REQUIRE(lines.size() == patterns.size());
  for (size_t i = 0; i < lines.size(); ++i) {
    INFO(lines[i] << "  vs  " << patterns[i]);
    CHECK(std::regex_match(lines[i], std::regex(patterns[i])));
  }
}

fs::path fresh_dir(const std::string& name) {
  fs::remove_all(name);
  return fs::path(name);
}

/// Every parameter and buffer of `net` compared bit for bit.
bool same_model(const Net& a, const Net& b) {
  auto pa = a.named_parameters(), pb = b.named_parameters();
  auto ba = a.named_buffers(), bb = b.named_buffers();
  if (pa.size() != pb.size() || ba.size() != bb.size()) return false;
  for (size_t i = 0; i < pa.size(); ++i)
    if (pa[i].first != pb[i].first || !same_bits(pa[i].second.value(), pb[i].second.value())) return false;
  for (size_t i = 0; i < ba.size(); ++i)
    if (ba[i].first != bb[i].first || !same_bits(ba[i].second, bb[i].second)) return false;
  return true;
}

/// Records what hooks see: lr and loss per step, epochs ended, weights after the first epoch.
struct Recorder : gd::train::Hook {
  std::vector<double> lrs, losses;
  std::vector<int64_t> steps, epochs;
  std::vector<Tensor<double>> first_epoch_weights;
  int begins = 0, ends = 0, creates = 0;
  void begin(gd::train::Session&) override { ++begins; }
  void after_create_session(gd::train::Session&) override { ++creates; }
  void after_step(gd::train::Session& s, const gd::train::StepResult& r) override {
    lrs.push_back(s.lr());
    losses.push_back(r.loss);
    steps.push_back(r.global_step);
  }
  void after_epoch(gd::train::Session& s, const gd::train::EpochLogs& logs) override {
    epochs.push_back(logs.epoch);
    if (logs.epoch == 0)
      for (const auto& p : s.parameters()) first_epoch_weights.push_back(std::get<Tensor<double>>(p.value).clone());
  }
  void end(gd::train::Session&) override { ++ends; }
};

/// Calls `f` after each step.
struct OnStep : gd::train::Hook {
  std::function<void(gd::train::Session&, const gd::train::StepResult&)> f;
  explicit OnStep(decltype(f) fn) : f(std::move(fn)) {}
  void after_step(gd::train::Session& s, const gd::train::StepResult& r) override { f(s, r); }
};

}  // namespace

TEST_CASE("fit: a run stopped mid-epoch and resumed is bit-identical to an uninterrupted one", "[train][resume]") {
  const Data train = make_data(44, 4, 3, 1), val = make_data(20, 4, 3, 2);  // 6 steps per epoch, last batch 4

  struct Run {
    gd::Rng init, dropout;
    Net net;
    gd::optim::Adam<double> opt;
    gd::metrics::SparseCategoricalAccuracy acc;
    gd::train::EarlyStopping early{{.patience = 100, .restore_best = true}};
    Run(uint64_t seed)
        : init(seed), dropout(seed + 1), net(4, 16, 3, 0.25, init, dropout), opt(net.parameters(), {.lr = 0.01}) {}
    gd::train::FitOptions<double, int64_t> options(const Data& v, fs::path dir, std::vector<gd::train::Hook*> extra) {
      std::vector<gd::train::Hook*> hooks{&early};
      hooks.insert(hooks.end(), extra.begin(), extra.end());
      return {.epochs = 3, .batch_size = 8, .seed = 99, .validation = &v, .metrics = {&acc}, .hooks = hooks,
              .run_dir = dir, .rng = &dropout};
    }
  };

  Run a(1);
  const gd::train::History ha = gd::train::fit(a.net, a.opt, xent, train, a.options(val, {}, {}));
  REQUIRE(ha.epochs.size() == 3);
  CHECK(ha.global_step == 18);
  CHECK(ha.stop_reason.empty());
  CHECK(ha.epochs[2].has("val_loss"));
  CHECK(ha.epochs[2].has("val_sparse_categorical_accuracy"));
  CHECK(ha.epochs[2].loss < ha.epochs[0].loss);

  const fs::path dir = fresh_dir("resume_run");
  Run b1(1);
  gd::train::StopAtStep stop({.last_step = 8});  // epoch 1, batch 2 of 6
  const gd::train::History hb1 = gd::train::fit(b1.net, b1.opt, xent, train, b1.options(val, dir, {&stop}));
  CHECK(hb1.global_step == 8);
  CHECK(hb1.epochs.size() == 1);
  CHECK(hb1.stop_reason == "StopAtStep: reached step 8");
  REQUIRE(gd::io::latest_checkpoint(dir) == dir / "model.ckpt-8.safetensors");

  {  // Mid-epoch, other batching cannot continue the same epoch.
    Run other(5);
    auto o = other.options(val, dir, {});
    o.batch_size = 4;
    CHECK_THROWS_WITH(gd::train::fit(other.net, other.opt, xent, train, o), Catch::Contains("mid-epoch under other batching"));
  }

  Run b2(1234);  // other initial weights, dropout stream, optimizer: everything must come from the checkpoint
  Recorder rec;
  const gd::train::History hb2 = gd::train::fit(b2.net, b2.opt, xent, train, b2.options(val, dir, {&rec}));
  CHECK(rec.steps.front() == 9);
  CHECK(hb2 == ha);
  CHECK(same_model(b2.net, a.net));
  CHECK(same_state(b2.opt.state_dict(), a.opt.state_dict()));
  CHECK(b2.dropout.state() == a.dropout.state());
  CHECK(b2.early.best() == a.early.best());
  CHECK(b2.early.best_epoch() == a.early.best_epoch());
  CHECK(gd::io::latest_checkpoint(dir) == dir / "model.ckpt-18.safetensors");
  CHECK(b2.net.is_training());

  // A finished run resumed again does nothing.
  Run b3(77);
  const gd::train::History hb3 = gd::train::fit(b3.net, b3.opt, xent, train, b3.options(val, dir, {}));
  CHECK(hb3 == ha);
  CHECK(same_model(b3.net, a.net));

  // The checkpoint layout.
  const gd::io::Safetensors ck = gd::io::load_safetensors(dir / "model.ckpt-18.safetensors");
  CHECK(gd::io::checkpoint_step(ck) == 18);
  for (const char* name : {"model/d1.kernel", "model/bn.moving_mean", "optimizer/step", "rng", "train/counters",
                           "train/values", "train/config", "train/history/global_step", "train/history/values",
                           "train/history/present", "hooks/early_stopping/state", "hooks/early_stopping/best/d1.kernel"})
    CHECK(ck.find(name) != nullptr);
  CHECK(ck.metadata.at("train/history/keys") == "val_loss\nval_sparse_categorical_accuracy");
  CHECK(ck.get<int64_t>("train/counters").data()[0] == 3);
}

TEST_CASE("fit: evaluate and predict match a manual computation; modes are restored", "[train][evaluate]") {
  const Data data = make_data(23, 4, 3, 5);
  gd::Rng init(3), dropout(4);
  Net net(4, 8, 3, 0.5, init, dropout);
  for (auto& [name, b] : net.named_buffers()) b.fill_(name == "bn.moving_mean" ? 0.25 : 2.0);
  gd::metrics::SparseCategoricalAccuracy acc;
  const gd::Rng::State before = dropout.state();
  const gd::train::Evaluation ev = gd::train::evaluate(net, xent, data, {.batch_size = 7, .metrics = {&acc}});
  const Tensor<double> pred = gd::train::predict(net, data.x, {.batch_size = 5});
  CHECK(net.is_training());
  CHECK(dropout.state() == before);  // eval mode: no dropout draws

  Tensor<double> logits;
  {
    gd::no_grad guard;
    net.eval();
    logits = net.forward(data.x).value();
    net.train();
  }
  const double manual_loss = xent(data.y, gd::Var<double>::constant(logits)).item();
  const Tensor<int64_t> cls = gd::argmax(logits, 1);
  int64_t correct = 0;
  for (int64_t i = 0; i < 23; ++i) correct += cls.data()[i] == data.y.data()[i];
  CHECK(ev.loss == Approx(manual_loss).epsilon(1e-12));
  CHECK(ev.get("sparse_categorical_accuracy") == Approx(double(correct) / 23.0).epsilon(1e-15));
  REQUIRE(pred.shape() == logits.shape());
  for (int64_t i = 0; i < pred.size(); ++i) CHECK(pred.data()[i] == Approx(logits.data()[i]).epsilon(1e-12));

  net.eval();
  gd::train::predict(net, data.x);
  CHECK(!net.is_training());
}

TEST_CASE("fit: a linearly separable problem reaches 100% accuracy", "[train][fit]") {
  gd::Rng rng(11);
  Tensor<double> x = Tensor<double>::random_uniform({64, 2}, rng, -1, 1);
  Tensor<int64_t> y({64});
  for (int64_t i = 0; i < 64; ++i) {
    if (std::abs(x(i, 0) + x(i, 1)) < 0.2) x(i, 0) += x(i, 0) + x(i, 1) >= 0 ? 0.3 : -0.3;  // a margin
    y.data()[i] = x(i, 0) + x(i, 1) > 0;
  }
  const Data data{x, y};
  gd::Rng init(5), dropout(6);
  Net net(2, 8, 2, 0.0, init, dropout);
  gd::optim::Adam<double> opt(net.parameters(), {.lr = 0.05});
  gd::metrics::SparseCategoricalAccuracy acc;
  const gd::train::History h =
      gd::train::fit(net, opt, xent, data, {.epochs = 40, .batch_size = 16, .validation = &data, .metrics = {&acc}});
  CHECK(h.epochs.back().get("val_sparse_categorical_accuracy") == 1.0);
  CHECK(gd::train::evaluate(net, xent, data, {.metrics = {&acc}}).get("sparse_categorical_accuracy") == 1.0);
  CHECK(h.values("loss").back() < 0.2);
}

TEST_CASE("hooks: StopAtStep stops exactly; the lifecycle calls come in order", "[train][hooks]") {
  const Data data = make_data(40, 4, 3, 7);  // 10 steps per epoch with batch 4
  gd::Rng init(1), dropout(2);
  Net net(4, 8, 3, 0.0, init, dropout);
  gd::optim::SGD<double> opt(net.parameters(), {.lr = 0.01});
  Recorder rec;
  gd::train::StopAtStep stop({.num_steps = 13});
  auto h = gd::train::fit(net, opt, xent, data, {.epochs = 5, .batch_size = 4, .hooks = {&stop, &rec}});
  CHECK(h.global_step == 13);
  CHECK(h.epochs.size() == 1);
  CHECK(rec.steps.size() == 13);
  CHECK(rec.epochs == std::vector<int64_t>{0});
  CHECK((rec.begins == 1 && rec.creates == 1 && rec.ends == 1));
  CHECK(opt.iterations() == 13);

  gd::train::StopAtStep at0({.last_step = 0});
  h = gd::train::fit(net, opt, xent, data, {.epochs = 5, .batch_size = 4, .hooks = {&at0}});
  CHECK(h.global_step == 0);
  CHECK(opt.iterations() == 13);
  CHECK_THROWS_AS(gd::train::StopAtStep({.num_steps = 1, .last_step = 2}), gd::value_error);

  // drop_remainder: 40 / 16 -> 2 steps per epoch
  h = gd::train::fit(net, opt, xent, data, {.epochs = 2, .batch_size = 16, .drop_remainder = true});
  CHECK(h.global_step == 4);
}

TEST_CASE("hooks: NanGuard names the step of a non-finite loss", "[train][hooks]") {
  Data data = make_data(40, 4, 3, 8);
  data.x = data.x.clone();
  data.x(9, 2) = std::nan("");  // batch 3 without shuffling, batch_size 4
  gd::Rng init(1), dropout(2);
  Net net(4, 8, 3, 0.0, init, dropout);
  gd::optim::SGD<double> opt(net.parameters(), {.lr = 0.01});
  gd::train::NanGuard guard;
  try {
    gd::train::fit(net, opt, xent, data, {.batch_size = 4, .shuffle = false, .hooks = {&guard}});
    FAIL("no exception");
  } catch (const gd::train::nan_error& e) {
    CHECK(e.step == 3);
    CHECK(std::string(e.what()) == "NanGuard: loss is nan at step 3 (epoch 0, batch 3 of 10)");
  }
  Net net2(4, 8, 3, 0.0, init, dropout);  // the first net's weights are NaN now
  gd::optim::SGD<double> opt2(net2.parameters(), {.lr = 0.01});
  gd::train::NanGuard soft({.fail = false});
  const auto h = gd::train::fit(net2, opt2, xent, data, {.batch_size = 4, .shuffle = false, .hooks = {&soft}});
  CHECK(h.global_step == 3);
  CHECK(h.stop_reason.find("at step 3") != std::string::npos);
}

TEST_CASE("fit: without NanGuard a non-finite loss runs on but shows in History, ProgressBar and stderr",
          "[train][hooks]") {
  Data data = make_data(40, 4, 3, 8);
  data.x = data.x.clone();
  data.x(9, 2) = std::nan("");  // batch 3 without shuffling, batch_size 4: NaN from step 3 on
  const auto run = [&](std::vector<gd::train::Hook*> hooks, std::string* err) {
    gd::Rng init(1), dropout(2);
    Net net(4, 8, 3, 0.0, init, dropout);
    gd::optim::SGD<double> opt(net.parameters(), {.lr = 0.01});
    std::ostringstream captured;
    std::streambuf* old = std::cerr.rdbuf(captured.rdbuf());
    const auto h = gd::train::fit(net, opt, xent, data, {.batch_size = 4, .shuffle = false, .hooks = hooks});
    std::cerr.rdbuf(old);
    *err = captured.str();
    return h;
  };
  const std::string warning =
      "warning: the loss was not finite (nan or inf) first at step 3; training went on to step 10 "
      "(History::nonfinite_step; gd::train::NanGuard stops at the first one)\n";
  std::string err;
  const auto h = run({}, &err);
  CHECK(h.global_step == 10);  // fit is not stopped...
  CHECK(std::isnan(h.epochs.back().loss));
  REQUIRE(h.nonfinite_step);  // ...but the History says where it went wrong
  CHECK(*h.nonfinite_step == 3);
  CHECK(err == warning);  // and so does stderr, once

  std::ostringstream bar_out;
  gd::train::ProgressBar bar({.every_steps = 100}, bar_out);
  const auto h2 = run({&bar}, &err);
  CHECK(h2.nonfinite_step == h.nonfinite_step);
  CHECK(err.empty());  // the bar says it instead
  CHECK(bar_out.str() == "epoch 1/1  step 10  loss nan\n" + warning);

  const Data clean = make_data(40, 4, 3, 8);
  gd::Rng init(1), dropout(2);
  Net net(4, 8, 3, 0.0, init, dropout);
  gd::optim::SGD<double> opt(net.parameters(), {.lr = 0.01});
  CHECK_FALSE(gd::train::fit(net, opt, xent, clean, {.batch_size = 4}).nonfinite_step);
}

TEST_CASE("hooks: CheckpointSaver honours every_steps and max_to_keep", "[train][hooks][checkpoint]") {
  const Data data = make_data(40, 4, 3, 9);
  const fs::path dir = fresh_dir("saver_run");
  gd::Rng init(1), dropout(2);
  Net net(4, 8, 3, 0.0, init, dropout);
  gd::optim::SGD<double> opt(net.parameters(), {.lr = 0.01});
  gd::train::CheckpointSaver saver({.every_steps = 3, .max_to_keep = 2});
  Recorder rec;
  OnStep save_at_5([](gd::train::Session& s, const gd::train::StepResult& r) {
    if (r.global_step == 5) CHECK(s.save_checkpoint() == fs::path("saver_run/model.ckpt-5.safetensors"));
  });
  gd::train::fit(net, opt, xent, data, {.batch_size = 4, .hooks = {&saver, &rec, &save_at_5}, .run_dir = dir});
  REQUIRE(saver.saver() != nullptr);
  CHECK(saver.saver()->checkpoints() == std::vector<std::string>{"model.ckpt-9.safetensors", "model.ckpt-10.safetensors"});
  std::vector<std::string> files;
  for (const auto& f : fs::directory_iterator(dir)) files.push_back(f.path().filename().string());
  std::sort(files.begin(), files.end());
  CHECK(files == std::vector<std::string>{"checkpoint", "model.ckpt-10.safetensors", "model.ckpt-9.safetensors"});
  CHECK(saver.last_path() == dir / "model.ckpt-10.safetensors");
  // CheckpointSaver runs after the other hooks, and without a directory it refuses to start.
  gd::train::CheckpointSaver nowhere;
  CHECK_THROWS_AS(gd::train::fit(net, opt, xent, data, {.hooks = {&nowhere}}), gd::value_error);
}

TEST_CASE("hooks: CheckpointSaver saves by time only when asked, or when given no schedule", "[train][hooks][checkpoint]") {
  CHECK(gd::train::CheckpointSaver({.every_steps = 100}).every_secs() == 0);
  CHECK(gd::train::CheckpointSaver({.every_epochs = 1}).every_secs() == 0);
  CHECK(gd::train::CheckpointSaver({.every_steps = 100, .every_secs = 30}).every_secs() == 30);
  CHECK(gd::train::CheckpointSaver().every_secs() == 600);  // TF's CheckpointSaverHook default
  CHECK(gd::train::CheckpointSaver({.every_secs = 0}).every_secs() == 0);
  CHECK_THROWS_MATCHES(gd::train::CheckpointSaver({.every_steps = 10, .every_secs = -1}), gd::value_error,
                       Catch::Message("CheckpointSaver: every_steps, every_secs and every_epochs must be >= 0, got 10, -1 "
                                      "and 0"));
}

TEST_CASE("train: Evaluation and History print as Logging's lines", "[train]") {
  const gd::train::Evaluation ev{.loss = 0.35124, .metrics = {{"accuracy", 0.875}, {"auc", 0.9}}};
  std::ostringstream e;
  e << ev;
  CHECK(e.str() == "loss 0.3512  accuracy 0.8750  auc 0.9000");

  gd::train::History h;
  std::ostringstream empty;
  empty << h;
  CHECK(empty.str() == "no epochs (global step 0)");
  h.epochs.push_back({.epoch = 0, .global_step = 5, .loss = 1.0986123, .val_loss = 0.9,
                      .val_metrics = {{"val_accuracy", 0.5}}});
  h.epochs.push_back({.epoch = 1, .global_step = 10, .loss = 0.75});
  h.global_step = 10;
  h.stop_reason = "EarlyStopping: val_accuracy did not improve";
  h.nonfinite_step = 7;
  std::ostringstream o;
  o << h;
  CHECK(o.str() == "epoch 1  step 5  loss 1.0986  val_loss 0.9000  val_accuracy 0.5000\n"
                   "epoch 2  step 10  loss 0.7500\n"
                   "stopped: EarlyStopping: val_accuracy did not improve\n"
                   "the loss was not finite first at step 7");
}

TEST_CASE("hooks: CheckpointSaver every_epochs saves finished epochs, which resume without redoing them",
          "[train][hooks][checkpoint]") {
  const Data data = make_data(40, 4, 3, 12), val = make_data(8, 4, 3, 13);  // 5 steps per epoch
  const fs::path dir = fresh_dir("epoch_saver_run");
  gd::Rng init(1), dropout(2);
  Net net(4, 8, 3, 0.0, init, dropout);
  gd::optim::SGD<double> opt(net.parameters(), {.lr = 0.01});
  gd::train::CheckpointSaver saver({.every_secs = 0, .every_epochs = 1});
  Recorder rec;
  const auto h = gd::train::fit(net, opt, xent, data,
                                {.epochs = 3, .batch_size = 8, .validation = &val, .hooks = {&saver, &rec}, .run_dir = dir});
  REQUIRE(saver.saver() != nullptr);
  CHECK(saver.saver()->checkpoints() == std::vector<std::string>{"model.ckpt-5.safetensors", "model.ckpt-10.safetensors",
                                                                 "model.ckpt-15.safetensors"});
  CHECK(rec.epochs == std::vector<int64_t>{0, 1, 2});
  // The last checkpoint holds the finished third epoch: a new run with the same options has
  // nothing to do (no step, no validation, no after_epoch) and returns the same History.
  gd::Rng init2(5), dropout2(6);
  Net net2(4, 8, 3, 0.0, init2, dropout2);
  gd::optim::SGD<double> opt2(net2.parameters(), {.lr = 0.01});
  gd::train::CheckpointSaver saver2({.every_secs = 0, .every_epochs = 1});
  Recorder rec2;
  const auto h2 = gd::train::fit(net2, opt2, xent, data,
                                 {.epochs = 3, .batch_size = 8, .validation = &val, .hooks = {&saver2, &rec2}, .run_dir = dir});
  CHECK(rec2.steps.empty());
  CHECK(rec2.epochs.empty());
  CHECK(h2 == h);
  CHECK(saver2.last_path() == std::nullopt);  // nothing changed, nothing written at the end
}

TEST_CASE("hooks: Logging and ProgressBar write their documented lines", "[train][hooks]") {
  const Data data = make_data(16, 4, 3, 10), val = make_data(8, 4, 3, 11);
  gd::Rng init(1), dropout(2);
  Net net(4, 8, 3, 0.0, init, dropout);
  gd::optim::SGD<double> opt(net.parameters(), {.lr = 0.01});
  std::ostringstream log_out, bar_out;
  gd::train::Logging log({.every_steps = 2}, log_out);
  gd::train::ProgressBar bar({.every_steps = 3}, bar_out);
  gd::train::fit(net, opt, xent, data,
                 {.epochs = 2, .batch_size = 4, .validation = &val, .hooks = {&log, &bar}});
  const std::string num = R"([0-9]+\.[0-9]{4})", rate = R"(  [0-9]+\.[0-9] steps/s)";
  const std::string epoch = "  loss " + num + "  val_loss " + num;
  check_lines(log_out.str(), {"step 2  epoch 1/2  batch 2/4  loss " + num + "  lr 0\\.01" + rate,
                              "step 4  epoch 1/2  batch 4/4  loss " + num + "  lr 0\\.01" + rate,
                              "epoch 1/2  step 4" + epoch,
                              "step 6  epoch 2/2  batch 2/4  loss " + num + "  lr 0\\.01" + rate,
                              "step 8  epoch 2/2  batch 4/4  loss " + num + "  lr 0\\.01" + rate,
                              "epoch 2/2  step 8" + epoch});
  check_lines(bar_out.str(), {"epoch 1/2  batch 3/4  step 3  loss " + num + rate + "  ETA [0-9?:]+",
                              "epoch 1/2  step 4" + epoch,
                              "epoch 2/2  batch 2/4  step 6  loss " + num + rate + "  ETA [0-9?:]+",
                              "epoch 2/2  step 8" + epoch});
  CHECK(bar_out.str().find('\r') == std::string::npos);

  std::ostringstream tty_out;
  gd::train::ProgressBar live({.width = 8, .tty = true}, tty_out);
  gd::train::fit(net, opt, xent, data, {.batch_size = 4, .hooks = {&live}});
  INFO(tty_out.str());
  CHECK(tty_out.str().find("\r\x1b[Kepoch 1/1 [========] 4/4  loss ") != std::string::npos);
  CHECK(tty_out.str().find("ETA 0:00\nepoch 1/1  step 4  loss ") != std::string::npos);
}

TEST_CASE("hooks: EarlyStopping stops after patience and restores the best weights", "[train][hooks]") {
  const Data data = make_data(32, 4, 3, 12);
  gd::Rng init(1), dropout(2);
  Net net(4, 8, 3, 0.0, init, dropout);
  gd::optim::Adam<double> opt(net.parameters(), {.lr = 0.01});
  // The training loss falls every epoch, so with mode max only epoch 0 is an "improvement".
  gd::train::EarlyStopping early({.monitor = "loss", .patience = 2, .mode = gd::train::Mode::max, .restore_best = true});
  Recorder rec;
  const auto h = gd::train::fit(net, opt, xent, data, {.epochs = 10, .batch_size = 8, .hooks = {&rec, &early}});
  REQUIRE(h.epochs.size() == 3);
  CHECK(h.epochs[1].loss < h.epochs[0].loss);
  CHECK(early.stopped());
  CHECK(early.best_epoch() == 0);
  CHECK(h.stop_reason.find("EarlyStopping: loss did not improve for 2 epochs") == 0);
  const auto params = net.named_parameters();
  REQUIRE(rec.first_epoch_weights.size() == params.size());
  for (size_t i = 0; i < params.size(); ++i) CHECK(same_bits(params[i].second.value(), rec.first_epoch_weights[i]));

  gd::train::EarlyStopping bad({.monitor = "val_loss"});  // no validation data
  CHECK_THROWS_AS(gd::train::fit(net, opt, xent, data, {.hooks = {&bad}}), gd::value_error);
}

TEST_CASE("hooks: LrScheduler sets the learning rate before each step", "[train][hooks]") {
  const Data data = make_data(24, 4, 3, 13);
  gd::Rng init(1), dropout(2);
  Net net(4, 8, 3, 0.0, init, dropout);
  gd::optim::SGD<double> opt(net.parameters(), {.lr = 1.0});
  gd::train::LrScheduler sched([](int64_t step) { return 0.1 / double(1 + step); });
  Recorder rec;
  gd::train::fit(net, opt, xent, data, {.epochs = 2, .batch_size = 8, .hooks = {&sched, &rec}});
  REQUIRE(rec.lrs.size() == 6);
  for (size_t i = 0; i < 6; ++i) CHECK(rec.lrs[i] == 0.1 / double(1 + i));

  gd::train::LrScheduler decay(gd::optim::exponential_decay(0.1, 2, 0.5, true));
  rec = Recorder{};
  gd::train::fit(net, opt, xent, data, {.epochs = 1, .batch_size = 8, .hooks = {&decay, &rec}});
  CHECK(rec.lrs == std::vector<double>{0.1, 0.1, 0.05});
}

TEST_CASE("hooks: SummarySaver writes loss, learning rate and histograms", "[train][hooks][summary]") {
  const Data data = make_data(16, 4, 3, 14);
  const fs::path dir = fresh_dir("summary_run");
  gd::Rng init(1), dropout(2);
  Net net(4, 8, 3, 0.0, init, dropout);
  gd::optim::SGD<double> opt(net.parameters(), {.lr = 0.01});
  fs::path file;
  {
    gd::summary::FileWriter writer(dir);
    file = writer.path();
    gd::train::SummarySaver summaries(writer, {.every_steps = 2, .histograms = true});
    gd::train::fit(net, opt, xent, data, {.batch_size = 4, .hooks = {&summaries}});
  }
  std::vector<std::string> seen;
  for (const auto& e : gd::summary::read_events(file))
    for (const auto& v : e.values) seen.push_back(std::to_string(e.step) + " " + v.tag);
  auto has = [&](const std::string& s) { return std::find(seen.begin(), seen.end(), s) != seen.end(); };
  CHECK(has("2 loss"));
  CHECK(has("4 learning_rate"));
  CHECK(has("2 d1.kernel"));
  CHECK(has("4 d2.bias/gradient"));
  CHECK(has("4 epoch_loss"));
  CHECK(!has("3 loss"));
}

TEST_CASE("fit: bad options are refused with clear errors", "[train][errors]") {
  const Data data = make_data(8, 4, 3, 15);
  gd::Rng init(1), dropout(2);
  Net net(4, 8, 3, 0.0, init, dropout);
  gd::optim::SGD<double> opt(net.parameters(), {.lr = 0.01});
  gd::metrics::SparseCategoricalAccuracy acc;
  CHECK_THROWS_WITH(gd::train::fit(net, opt, xent, data, {.batch_size = 0}),
                    "fit: batch_size must be > 0, got 0");
  CHECK_THROWS_AS(gd::train::fit(net, opt, xent, data, {.metrics = {&acc}}), gd::value_error);
  CHECK_THROWS_AS(gd::train::fit(net, opt, xent, data, {.batch_size = 16, .drop_remainder = true}), gd::value_error);
  const Data bad{data.x, Tensor<int64_t>::zeros({7})};
  CHECK_THROWS_WITH(gd::train::fit(net, opt, xent, bad), Catch::Contains("data.y must have shape [N, ...] with N = 8"));
  CHECK(opt.iterations() == 0);
}

namespace {

// Net with its last layer held but not registered: parameters() misses d2.
struct Unregistered : gd::nn::Module<double> {
  gd::nn::Dense<double> d1, d2;
  explicit Unregistered(gd::Rng& init) : d1({.in = 4, .out = 5, .activation = gd::nn::relu}, init), d2({.in = 5, .out = 3}, init) {
    register_module("d1", d1);
  }
  gd::Var<double> forward(const Tensor<double>& x) { return d2.forward(d1.forward(x)); }
};

}  // namespace

TEST_CASE("fit: the first step refuses a sub-module that was never registered", "[train][registration]") {
  const Data data = make_data(8, 4, 3, 21);
  gd::Rng init(5);
  Unregistered net(init);
  gd::optim::SGD<double> opt(net.parameters(), {.lr = 0.1});
  const Tensor<double> d1_before = net.d1.kernel().value().clone();
  CHECK_THROWS_AS(gd::train::fit(net, opt, xent, data, {.batch_size = 4}), gd::value_error);
  CHECK_THROWS_WITH(gd::train::fit(net, opt, xent, data, {.batch_size = 4}),
                    "fit: 2 leaves ([5,3], [3]) receive a gradient but are not parameters of the model: forgot "
                    "register_module?");
  // refused before the optimizer moved anything
  CHECK(opt.iterations() == 0);
  CHECK(gd::eval(gd::max(gd::abs(net.d1.kernel().value() - d1_before))).item() == 0.0);

  // as a warning: one line on std::cerr, and training goes on
  std::ostringstream captured;
  std::streambuf* old = std::cerr.rdbuf(captured.rdbuf());
  const gd::train::History h =
      gd::train::fit(net, opt, xent, data, {.epochs = 2, .batch_size = 4, .unregistered = gd::nn::Unregistered::warn});
  std::cerr.rdbuf(old);
  CHECK(h.epochs.size() == 2);
  CHECK(opt.iterations() == 4);
  CHECK(captured.str() ==
        "warning: fit: 2 leaves ([5,3], [3]) receive a gradient but are not parameters of the model: forgot "
        "register_module?\n");

  // a Var the optimizer trains on purpose beside the model is not reported
  struct Scaled : gd::nn::Module<double> {
    gd::nn::Dense<double> d;
    gd::Var<double> s{Tensor<double>::ones({3})};  // trained by the optimizer, not a model parameter
    explicit Scaled(gd::Rng& rng) : d({.in = 4, .out = 3}, rng) { register_module("d", d); }
    gd::Var<double> forward(const Tensor<double>& x) { return gd::Var<double>(d.forward(x) * s); }
  };
  Scaled scaled(init);
  std::vector<gd::Var<double>> params = scaled.parameters();
  params.push_back(scaled.s);
  gd::optim::SGD<double> opt2(params, {.lr = 0.1});
  CHECK(gd::train::fit(scaled, opt2, xent, data, {.batch_size = 4}).epochs.size() == 1);
  CHECK(scaled.s.value()(0) != 1.0);
}

namespace {

// A model whose forward takes a Var, like its blocks: fit, evaluate and predict pass the batch as one.
struct VarNet : gd::nn::Module<double, VarNet> {
  gd::nn::Dense<double> d1, d2;
  explicit VarNet(gd::Rng& init) : d1({.out = 8, .activation = gd::nn::relu}, init), d2({.in = 8, .out = 3}, init) {
    register_module("d1", d1);
    register_module("d2", d2);
  }
  gd::Var<double> forward(const gd::Var<double>& x) { return d2(d1(x)); }
};

}  // namespace

TEST_CASE("fit: forward(const Var&) models train, evaluate and predict; d1 is lazy", "[train][fit][var]") {
  const Data data = make_data(64, 4, 3, 31);
  gd::Rng init(4);
  VarNet net(init);
  gd::optim::Adam<double> opt(net.parameters(), {.lr = 0.05});  // before d1 knows its input width
  const double before = gd::train::evaluate(net, xent, data).loss;
  const gd::train::History h = gd::train::fit(net, opt, xent, data, {.epochs = 20, .batch_size = 16});
  CHECK(h.epochs.size() == 20);
  CHECK(net.d1.in() == 4);
  const gd::train::Evaluation ev = gd::train::evaluate(net, xent, data);
  CHECK(ev.loss < 0.5 * before);
  const Tensor<double> p = gd::train::predict(net, data.x, {.batch_size = 7});
  const Tensor<double> direct = net(gd::Var<double>::constant(data.x)).value();
  REQUIRE(p.shape() == direct.shape());
  for (int64_t i = 0; i < p.size(); ++i) CHECK(p.data()[i] == Approx(direct.data()[i]).epsilon(1e-12));
}

TEST_CASE("fit: a Dropout layer's Rng is checkpointed without FitOptions::rng", "[train][resume][rng]") {
  const Data train = make_data(40, 4, 3, 41);
  struct Run {
    gd::Rng init, dropout;
    Net net;
    gd::optim::SGD<double> opt;
    explicit Run(uint64_t seed)
        : init(seed), dropout(seed + 1), net(4, 8, 3, 0.4, init, dropout), opt(net.parameters(), {.lr = 0.05}) {}
  };
  Run a(1);
  gd::train::fit(a.net, a.opt, xent, train, {.epochs = 2, .batch_size = 8, .seed = 3});

  const fs::path dir = fresh_dir("resume_layer_rng");
  Run b1(1);
  gd::train::StopAtStep stop({.last_step = 7});
  gd::train::fit(b1.net, b1.opt, xent, train, {.epochs = 2, .batch_size = 8, .seed = 3, .hooks = {&stop}, .run_dir = dir});
  const gd::io::Safetensors ck = gd::io::load_safetensors(dir / "model.ckpt-7.safetensors");
  CHECK(ck.find("rng/drop.rng") != nullptr);
  CHECK(ck.find("rng") == nullptr);
  CHECK(ck.find("optimizer/d1.kernel/momentum") == nullptr);  // plain SGD: step only
  Run b2(500);  // another dropout stream: it must come from the checkpoint
  gd::train::fit(b2.net, b2.opt, xent, train, {.epochs = 2, .batch_size = 8, .seed = 3, .run_dir = dir});
  CHECK(b2.dropout.state() == a.dropout.state());
  CHECK(same_model(b2.net, a.net));
}
