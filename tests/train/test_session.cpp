// Tests of a user-driven gd::train::Session: the user's own step loop gets hooks, restore-or-init
// and checkpoints exactly as fit does; RunDir and CollectiveBroadcast, the values that bring the
// checkpoint code, and a Collective made by hand.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <gradus/gradus.hpp>
#include <gradus/train.hpp>

#include "../support/same_bits.hpp"

namespace gd = gradus;
namespace fs = std::filesystem;
using gd::Tensor;
using gradus_test::same_bits;
using gradus_test::same_state;

namespace {

/// Dense-Dropout-Dense in double: parameters, an optimizer state and a registered generator.
struct Net : gd::nn::Module<double> {
  gd::nn::Dense<double> d1;
  gd::nn::Dropout<double> drop;
  gd::nn::Dense<double> d2;
  Net(uint64_t seed, gd::Rng& dropout_rng) : Net(seed, dropout_rng, gd::Rng(seed)) {}
  gd::Var<double> forward(const Tensor<double>& x) { return d2.forward(drop.forward(gd::tanh(d1.forward(x)))); }

 private:
  Net(uint64_t, gd::Rng& dropout_rng, gd::Rng init)
      : d1({.in = 3, .out = 5}, init), drop({.rate = 0.25}, dropout_rng), d2({.in = 5, .out = 2}, init) {
    register_module("d1", d1);
    register_module("drop", drop);
    register_module("d2", d2);
  }
};

/// A fixed data set of 40 examples (3 features, 2 targets) the user's loop draws batches from.
struct Problem {
  Tensor<double> x, y;
  Problem() {
    gd::Rng rng(11);
    x = Tensor<double>::random_normal({40, 3}, rng);
    y = Tensor<double>::random_normal({40, 2}, rng);
  }
  /// A batch of 8 rows drawn with `rng` (so a resumed run must restore that generator).
  std::pair<Tensor<double>, Tensor<double>> batch(gd::Rng& rng) const {
    Tensor<int64_t> rows({8});
    for (int64_t i = 0; i < 8; ++i) rows.data()[i] = int64_t(rng.below(40));
    return {gd::gather(x, rows, 0), gd::gather(y, rows, 0)};
  }
};

/// The user's loss on one batch (labels first, as every gd::losses function).
gd::Var<double> batch_loss(Net& net, const std::pair<Tensor<double>, Tensor<double>>& b) {
  return gd::losses::mean_squared_error(b.second, net.forward(b.first));
}

bool same_model(const Net& a, const Net& b) {
  auto pa = a.named_parameters(), pb = b.named_parameters();
  if (pa.size() != pb.size()) return false;
  for (size_t i = 0; i < pa.size(); ++i)
    if (pa[i].first != pb[i].first || !same_bits(pa[i].second.value(), pb[i].second.value())) return false;
  return true;
}

fs::path fresh_dir(const std::string& name) {
  fs::remove_all(name);
  return fs::path(name);
}

/// Appends "<name>:<event>" for every hook call to a shared log.
struct Tracer : gd::train::Hook {
  std::string name;
  std::vector<std::string>* log;
  Tracer(std::string n, std::vector<std::string>& l) : name(std::move(n)), log(&l) {}
  void begin(gd::train::Session&) override { log->push_back(name + ":begin"); }
  void after_create_session(gd::train::Session&) override { log->push_back(name + ":create"); }
  void before_step(gd::train::Session&) override { log->push_back(name + ":before"); }
  void after_step(gd::train::Session&, const gd::train::StepResult& r) override {
    log->push_back(name + ":after " + std::to_string(r.global_step) + " n=" + std::to_string(r.batch_size));
  }
  void after_epoch(gd::train::Session&, const gd::train::EpochLogs& l) override {
    log->push_back(name + ":epoch " + std::to_string(l.epoch));
  }
  void end(gd::train::Session&) override { log->push_back(name + ":end"); }
};

/// Records the learning rate and loss each step saw.
struct Recorder : gd::train::Hook {
  std::vector<double> lrs, losses;
  int ends = 0;
  void after_step(gd::train::Session& s, const gd::train::StepResult& r) override {
    lrs.push_back(s.lr());
    losses.push_back(r.loss);
  }
  void end(gd::train::Session&) override { ++ends; }
};

}  // namespace

TEST_CASE("Session: a user loop with StopAtStep runs exactly to the step", "[train][session]") {
  const Problem p;
  gd::Rng drop(1), data(2);
  Net net(3, drop);
  gd::optim::SGD<double> opt(net.parameters(), {.lr = 0.05});
  gd::train::StopAtStep stop({.num_steps = 7});
  int calls = 0;
  {
    gd::train::Session session(net, opt, {.hooks = {&stop}});
    CHECK(session.global_step() == 0);
    CHECK(std::isnan(session.last_loss()));
    while (!session.should_stop()) {
      CHECK(session.run([&] {
        ++calls;
        return batch_loss(net, p.batch(data));
      }));
    }
    CHECK(session.global_step() == 7);
    CHECK(session.stop_reason() == "StopAtStep: reached step 7");
    CHECK_FALSE(session.run([&] { return batch_loss(net, p.batch(data)); }));  // stopped: nothing runs
    const gd::train::History& h = session.close();
    CHECK(h.global_step == 7);
    CHECK(h.stop_reason == "StopAtStep: reached step 7");
    CHECK(h.epochs.empty());
  }
  CHECK(calls == 7);
  CHECK(opt.iterations() == 7);
}

TEST_CASE("Session: hooks are called in order, CheckpointSavers last, end once", "[train][session][hooks]") {
  const Problem p;
  gd::Rng drop(1), data(2);
  Net net(3, drop);
  gd::optim::SGD<double> opt(net.parameters(), {.lr = 0.05});
  const fs::path dir = fresh_dir("session_hooks_order");
  std::vector<std::string> log;
  Tracer a("a", log), b("b", log);
  gd::train::CheckpointSaver saver({.every_steps = 1});
  // Sees, after each step, whether that step's checkpoint exists already: it must not, since the
  // saver runs after every other hook even when given first.
  struct Probe : gd::train::Hook {
    fs::path dir;
    std::vector<bool> seen;
    void after_step(gd::train::Session&, const gd::train::StepResult& r) override {
      seen.push_back(fs::exists(dir / ("model.ckpt-" + std::to_string(r.global_step) + ".safetensors")));
    }
  } probe;
  probe.dir = dir;
  {
    gd::train::Session session(net, opt, {.run_dir = dir, .hooks = {&saver, &a, &probe, &b}});
    log.push_back("opened");
    session.run([&] {
      log.push_back("fn");
      return std::pair{batch_loss(net, p.batch(data)), 8};
    });
    session.run([&] {
      log.push_back("fn");
      return batch_loss(net, p.batch(data));  // no batch size: 0
    });
    const gd::train::EpochLogs& e = session.end_epoch(0.5, {{"val_mae", 0.25}});
    CHECK(e.epoch == 0);
    CHECK(e.global_step == 2);
    CHECK(e.val_loss == 0.5);
    CHECK(e.get("val_mae") == 0.25);
    CHECK(session.steps_per_epoch() == 2);
    CHECK(session.epoch() == 1);
    session.close();
    session.close();  // once
  }  // and not again by the destructor
  const std::vector<std::string> expected = {
      "a:begin",  "b:begin",         "a:create",        "b:create",  "opened",    "a:before", "b:before", "fn",
      "a:after 1 n=8", "b:after 1 n=8", "a:before", "b:before", "fn", "a:after 2 n=0", "b:after 2 n=0",
      "a:epoch 0", "b:epoch 0",     "a:end",           "b:end"};
  CHECK(log == expected);
  CHECK(probe.seen == std::vector<bool>{false, false});
  CHECK(fs::exists(dir / "model.ckpt-1.safetensors"));
  CHECK(fs::exists(dir / "model.ckpt-2.safetensors"));
  fs::remove_all(dir);
}

TEST_CASE("Session: a step equals a hand-written optimizer step and a plain-loop SGD update",
          "[train][session]") {
  const Problem p;
  gd::Rng drop_a(1), drop_b(1), data_a(2), data_b(2);
  Net a(3, drop_a), b(3, drop_b);
  gd::optim::Adam<double> opt_a(a.parameters(), {.lr = 0.01}), opt_b(b.parameters(), {.lr = 0.01});
  {
    gd::train::Session session(a, opt_a);
    for (int i = 0; i < 4; ++i) session.run([&] { return batch_loss(a, p.batch(data_a)); });
  }
  for (int i = 0; i < 4; ++i) {
    opt_b.zero_grad();
    gd::Var<double> loss = batch_loss(b, p.batch(data_b));
    gd::backward(loss);
    opt_b.step();
  }
  CHECK(same_model(a, b));
  CHECK(same_state(opt_a.state_dict(), opt_b.state_dict()));

  // A linear model y = x W + c under mean squared error and SGD, updated in a plain double loop:
  // dL/dW[j][k] = 2/(N K) Σ_i (pred[i][k] - y[i][k]) x[i][j], dL/dc[k] = 2/(N K) Σ_i (pred[i][k] - y[i][k]).
  gd::Rng init(5);
  gd::nn::Dense<double> lin({.in = 3, .out = 2}, init);
  std::vector<double> w(lin.named_parameters()[0].second.value().data(),
                        lin.named_parameters()[0].second.value().data() + 6);
  std::vector<double> c(lin.named_parameters()[1].second.value().data(),
                        lin.named_parameters()[1].second.value().data() + 2);
  REQUIRE(lin.named_parameters()[0].first == "kernel");
  gd::optim::SGD<double> sgd(lin.parameters(), {.lr = 0.1});
  gd::train::Session session(lin, sgd);
  const double lr = 0.1, N = 40, K = 2;
  for (int step = 0; step < 3; ++step) {
    double loss = 0;
    std::vector<double> gw(6, 0.0), gc(2, 0.0);
    for (int i = 0; i < 40; ++i)
      for (int k = 0; k < 2; ++k) {
        double pred = c[size_t(k)];
        for (int j = 0; j < 3; ++j) pred += p.x(i, j) * w[size_t(j * 2 + k)];
        const double r = pred - p.y(i, k);
        loss += r * r / (N * K);
        for (int j = 0; j < 3; ++j) gw[size_t(j * 2 + k)] += 2 * r * p.x(i, j) / (N * K);
        gc[size_t(k)] += 2 * r / (N * K);
      }
    REQUIRE(session.run([&] { return gd::losses::mean_squared_error(p.y, lin.forward(p.x)); }));
    CHECK(session.last_loss() == Approx(loss).epsilon(1e-12));
    for (size_t q = 0; q < 6; ++q) w[q] -= lr * gw[q];
    for (size_t q = 0; q < 2; ++q) c[q] -= lr * gc[q];
  }
  const Tensor<double> kw = lin.named_parameters()[0].second.value(), kc = lin.named_parameters()[1].second.value();
  for (size_t q = 0; q < 6; ++q) CHECK(kw.data()[q] == Approx(w[q]).epsilon(1e-12));
  for (size_t q = 0; q < 2; ++q) CHECK(kc.data()[q] == Approx(c[q]).epsilon(1e-12));
}

TEST_CASE("Session: clip_global_norm clips between backward and the optimizer step", "[train][session]") {
  const Problem p;
  gd::Rng drop_a(1), drop_b(1), data_a(2), data_b(2);
  Net a(3, drop_a), b(3, drop_b);
  gd::optim::SGD<double> opt_a(a.parameters(), {.lr = 0.5}), opt_b(b.parameters(), {.lr = 0.5});
  {
    gd::train::Session session(a, opt_a, {.clip_global_norm = 0.05});
    for (int i = 0; i < 3; ++i) session.run([&] { return batch_loss(a, p.batch(data_a)); });
  }
  double norm_before = 0;
  for (int i = 0; i < 3; ++i) {
    opt_b.zero_grad();
    gd::Var<double> loss = batch_loss(b, p.batch(data_b));
    gd::backward(loss);
    // the global norm by hand: it must exceed the clip for the test to mean anything
    double sq = 0;
    for (const auto& v : opt_b.params())
      for (int64_t k = 0; k < v.grad().size(); ++k) sq += v.grad().data()[k] * v.grad().data()[k];
    if (i == 0) norm_before = std::sqrt(sq);
    gd::optim::clip_by_global_norm(opt_b.params(), 0.05);
    opt_b.step();
  }
  CHECK(norm_before > 0.05);
  CHECK(same_model(a, b));
  CHECK_THROWS_WITH(gd::train::Session(a, opt_a, {.clip_global_norm = -1}),
                    Catch::Contains("clip_global_norm must be >= 0"));
}

TEST_CASE("Session: a run stopped and restarted in the same run_dir is bit-identical to an uninterrupted one",
          "[train][session][resume]") {
  const Problem p;
  const fs::path dir = fresh_dir("session_resume");
  auto train = [&](Net& net, gd::optim::Optimizer<double>& opt, gd::Rng& data, gd::train::SessionOptions o) {
    gd::train::Session session(net, opt, o);
    while (!session.should_stop()) session.run([&] { return batch_loss(net, p.batch(data)); });
    return session.close();
  };
  // uninterrupted: 10 steps
  gd::Rng drop_a(1), data_a(2);
  Net a(3, drop_a);
  gd::optim::Adam<double> opt_a(a.parameters(), {.lr = 0.01});
  gd::train::StopAtStep stop_a({.last_step = 10});
  train(a, opt_a, data_a, {.hooks = {&stop_a}, .rng = &data_a});

  // 6 steps, checkpoint at the end of the run (close), then a restart from other initial values
  {
    gd::Rng drop_b(1), data_b(2);
    Net b(3, drop_b);
    gd::optim::Adam<double> opt_b(b.parameters(), {.lr = 0.01});
    gd::train::StopAtStep stop_b({.last_step = 6});
    const auto h = train(b, opt_b, data_b, {.run_dir = dir, .hooks = {&stop_b}, .rng = &data_b});
    CHECK(h.global_step == 6);
    CHECK(fs::exists(dir / "model.ckpt-6.safetensors"));
  }
  gd::Rng drop_c(77), data_c(78);  // both generators come back from the checkpoint
  Net c(99, drop_c);
  gd::optim::Adam<double> opt_c(c.parameters(), {.lr = 0.01});
  gd::train::StopAtStep stop_c({.last_step = 10});
  Recorder rec;
  {
    gd::train::Session session(c, opt_c, {.run_dir = dir, .hooks = {&stop_c, &rec}, .rng = &data_c});
    REQUIRE(session.restored_from());
    CHECK(session.global_step() == 6);
    CHECK(opt_c.iterations() == 6);
    while (!session.should_stop()) session.run([&] { return batch_loss(c, p.batch(data_c)); });
    CHECK(session.global_step() == 10);
  }
  CHECK(rec.losses.size() == 4);
  CHECK(rec.ends == 1);
  CHECK(same_model(a, c));
  CHECK(same_state(opt_a.state_dict(), opt_c.state_dict()));
  CHECK(data_a.next() == data_c.next());
  CHECK(drop_a.next() == drop_c.next());

  // the checkpoint has fit's layout
  const gd::io::Safetensors ckpt = gd::io::load_safetensors(dir / "model.ckpt-10.safetensors");
  for (const char* name : {"model/d1.kernel", "optimizer/step", "rng", "rng/drop.rng", "train/counters", "train/values",
                           "train/config"})
    CHECK(ckpt.find(name));
  CHECK(ckpt.get<int64_t>("train/counters").data()[3] == 10);
  CHECK(ckpt.get<int64_t>("train/config").data()[0] == -1);
  fs::remove_all(dir);
}

TEST_CASE("Session: NanGuard stops or fails on a NaN loss; a failed session runs no end hooks",
          "[train][session][hooks]") {
  const Problem p;
  gd::Rng drop(1), data(2);
  Net net(3, drop);
  gd::optim::SGD<double> opt(net.parameters(), {.lr = 0.05});
  auto loss_at = [&](const gd::train::Session& s) {
    gd::Var<double> l = batch_loss(net, p.batch(data));
    // the third step's loss is NaN
    return s.global_step() == 2 ? gd::Var<double>(l * std::numeric_limits<double>::quiet_NaN()) : l;
  };
  SECTION("fail = false: the session stops after the step") {
    gd::train::NanGuard guard({.fail = false});
    gd::train::Session session(net, opt, {.hooks = {&guard}});
    while (!session.should_stop()) session.run([&] { return loss_at(session); });
    CHECK(session.global_step() == 3);
    CHECK(session.stop_reason().find("NanGuard: loss is nan at step 3") != std::string::npos);
    CHECK(session.close().nonfinite_step == 3);
  }
  SECTION("fail = true: run throws, the session is failed, end is not called") {
    gd::train::NanGuard guard;
    Recorder rec;
    {
      gd::train::Session session(net, opt, {.hooks = {&guard, &rec}});
      session.run([&] { return loss_at(session); });
      session.run([&] { return loss_at(session); });
      CHECK_THROWS_AS(session.run([&] { return loss_at(session); }), gd::train::nan_error);
      CHECK(session.should_stop());
      CHECK_THROWS_WITH(session.run([&] { return loss_at(session); }), Catch::Contains("an earlier step"));
    }
    CHECK(rec.ends == 0);
  }
}

TEST_CASE("Session: LrScheduler sets the learning rate before each step", "[train][session][hooks]") {
  const Problem p;
  gd::Rng drop(1), data(2);
  Net net(3, drop);
  gd::optim::SGD<double> opt(net.parameters(), {.lr = 1.0});
  gd::train::LrScheduler sched([](int64_t step) { return 0.1 / double(1 + step); });
  Recorder rec;
  gd::train::Session session(net, opt, {.hooks = {&sched, &rec}});
  for (int i = 0; i < 4; ++i) session.run([&] { return batch_loss(net, p.batch(data)); });
  CHECK(rec.lrs == std::vector<double>{0.1, 0.05, 0.1 / 3, 0.025});
  CHECK(opt.lr() == 0.025);
}

TEST_CASE("Session: bad use is refused with clear errors", "[train][session][errors]") {
  const Problem p;
  gd::Rng drop(1), data(2);
  Net net(3, drop);
  gd::optim::SGD<double> opt(net.parameters(), {.lr = 0.05});
  gd::train::Session session(net, opt);
  CHECK_THROWS_WITH(session.end_epoch(), Catch::Contains("Session::end_epoch: no step ran"));
  gd::Var<float> wrong(Tensor<float>::ones({1}));
  CHECK_THROWS_WITH(session.run([&] { return gd::Var<float>(wrong * 2.f); }),
                    Catch::Contains("Session: the loss is a Var<float> but the model's element type is double"));
  gd::train::Session other(net, opt);
  CHECK_THROWS_WITH(other.run([&] { return net.forward(p.x); }), Catch::Contains("Session: the loss must be a scalar"));
  gd::train::Session third(net, opt);
  gd::Var<double> stray(Tensor<double>::ones({1}));
  CHECK_THROWS_WITH(third.run([&] { return gd::Var<double>(gd::sum(stray * batch_loss(net, p.batch(data)))); }),
                    Catch::Contains("Session"));
  gd::train::CheckpointSaver nowhere;
  CHECK_THROWS_WITH(gd::train::Session(net, opt, {.hooks = {&nowhere}}), Catch::Contains("CheckpointSaver: no directory"));
}

TEST_CASE("CheckpointSaver: a diverged run never rotates its finite checkpoints out", "[train][session][hooks]") {
  const Problem p;
  const auto run = [&](const fs::path& dir, bool skip) {
    gd::Rng drop(1), data(2);
    Net net(3, drop);
    gd::optim::SGD<double> opt(net.parameters(), {.lr = 0.05});
    gd::train::CheckpointSaver saver({.every_steps = 1, .max_to_keep = 3, .skip_non_finite = skip});
    gd::train::Session session(net, opt, {.run_dir = dir, .hooks = {&saver}});
    for (int step = 0; step < 9; ++step)
      session.run([&] {
        gd::Var<double> l = batch_loss(net, p.batch(data));
        // step 6's loss is NaN: its gradient, then every weight, becomes NaN
        return session.global_step() == 5 ? gd::Var<double>(l * std::numeric_limits<double>::quiet_NaN()) : l;
      });
    session.close();
    return saver.saver()->checkpoints();
  };
  const fs::path kept = fresh_dir("saver_finite"), all = fresh_dir("saver_all");
  // by default the checkpoints of steps 6 to 9 (and the end's) are not written: 3, 4 and 5 stay
  CHECK(run(kept, true) == std::vector<std::string>{"model.ckpt-3.safetensors", "model.ckpt-4.safetensors",
                                                    "model.ckpt-5.safetensors"});
  const auto latest = gd::io::load_safetensors(*gd::io::latest_checkpoint(kept));
  CHECK(gd::io::checkpoint_step(latest) == 5);
  for (const auto& [name, t] : latest.tensors)
    if (const auto* d = std::get_if<Tensor<double>>(&t); d && name.starts_with("model/"))
      for (int64_t i = 0; i < d->size(); ++i) CHECK(std::isfinite(d->data()[i]));
  // a resumed run starts from the last finite state
  gd::Rng drop(1);
  Net net(3, drop);
  gd::optim::SGD<double> opt(net.parameters(), {.lr = 0.05});
  gd::train::Session resumed(net, opt, {.run_dir = kept});
  CHECK(resumed.global_step() == 5);
  // skip_non_finite = false writes them all: the three kept hold NaN weights
  CHECK(run(all, false) == std::vector<std::string>{"model.ckpt-7.safetensors", "model.ckpt-8.safetensors",
                                                    "model.ckpt-9.safetensors"});
}

TEST_CASE("RunDir: a path made from what makes a path; with a value it sets the checkpoint code",
          "[train][session]") {
  const gd::train::RunDir none;
  CHECK(none.empty());
  CHECK(none.path().empty());

  const gd::train::RunDir from_chars = "runs/a";
  const gd::train::RunDir from_string = std::string("runs/b");
  const gd::train::RunDir from_path = fs::path("runs") / "c";
  CHECK(from_chars.path() == fs::path("runs/a"));
  CHECK(from_string.string() == "runs/b");
  const fs::path& as_path = from_path;  // where a path is expected
  CHECK(as_path == fs::path("runs/c"));
  CHECK_FALSE(from_path.empty());
  const gd::train::RunDir copy = from_chars;
  CHECK(copy.path() == from_chars.path());
  CHECK(copy == from_chars);
  CHECK_FALSE(copy == from_string);
  std::ostringstream text;
  text << from_chars;
  CHECK(text.str() == "\"runs/a\"");

  const auto* code = gd::train::detail::checkpoint_code_slot().load();
  REQUIRE(code != nullptr);
  CHECK(code->restore_latest != nullptr);
  CHECK(code->sync_state != nullptr);
  CHECK(code->default_saver != nullptr);
}

TEST_CASE("CollectiveBroadcast: a std::function made from any callable", "[train][session]") {
  gd::train::CollectiveBroadcast none;
  CHECK_FALSE(none);
  gd::train::CollectiveBroadcast null = nullptr;
  CHECK_FALSE(null);
  gd::train::Collective c;
  c.broadcast = [](std::string& bytes) { bytes += "!"; };
  REQUIRE(c.broadcast);
  std::string s = "state";
  c.broadcast(s);
  CHECK(s == "state!");
  CHECK(gd::train::detail::checkpoint_code_slot().load() != nullptr);
}

TEST_CASE("Session: a Collective made by hand, of one rank, trains as no collective does", "[train][session]") {
  const Problem p;
  const auto train = [&](const gd::train::Collective& c) {
    gd::Rng drop(1), data(2);
    Net net(3, drop);
    gd::optim::Adam<double> opt(net.parameters(), {.lr = 0.01});
    gd::train::StopAtStep stop({.num_steps = 6});
    gd::train::Session session(net, opt, {.hooks = {&stop}, .collective = c});
    std::vector<double> losses;
    while (!session.should_stop()) {
      session.run([&] { return batch_loss(net, p.batch(data)); });
      losses.push_back(session.last_loss());
    }
    session.close();
    return std::pair{std::move(losses), net.named_parameters()};
  };
  int broadcasts = 0, averages = 0;
  gd::train::Collective one;  // rank 0 of 1: every collective leaves its argument as it is
  one.sum = [](std::vector<double>&) {};
  one.max = [](std::vector<double>&) {};
  one.broadcast = [&](std::string&) { ++broadcasts; };
  one.average = [&](std::vector<gd::train::AnyTensor>&) { ++averages; };
  const auto [with_losses, with_params] = train(one);
  const auto [plain_losses, plain_params] = train({});
  CHECK(broadcasts == 1);  // the chief's state at the start (a checkpoint in memory)
  CHECK(averages == 6);    // the gradients of every step
  REQUIRE(with_losses.size() == 6);
  CHECK(with_losses == plain_losses);
  REQUIRE(with_params.size() == plain_params.size());
  for (size_t i = 0; i < with_params.size(); ++i)
    CHECK(same_bits(with_params[i].second.value(), plain_params[i].second.value()));
}
