// tests/dist/test_parameter_server.cpp — the parameter-server job (run_parameter_server and
// AsyncOptimizer) on 3 ranks, ctest `dist.ps` (hidden from the 2-rank run): against sequential
// SGD and Adam written out in double, against init − lr × (the sum of every pushed gradient), the
// staleness bound read off parameters that record which pushes they hold, linear regression
// trained with fit on two workers, and the errors every rank must see together.
// Gradients and learning rates are dyadic rationals with few bits, so that every sum and product
// below is exact in double whatever the order of the updates or the contraction into FMAs.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <vector>

#include <unistd.h>

#include "gradus/dist.hpp"
#include "gradus/losses.hpp"
#include "gradus/nn.hpp"
#include "gradus/optim.hpp"
#include "gradus/train.hpp"

namespace gd = gradus;

namespace {

// Three parameters of shapes [4], [2,3], [1]; their values depend on `salt` (every rank makes
// its own, and the job starts all of them from rank 0's).
std::vector<gd::Var<double>> ps_params(int salt) {
  std::vector<gd::Var<double>> out;
  for (gd::Shape shape : {gd::Shape{4}, gd::Shape{2, 3}, gd::Shape{1}}) {
    gd::Tensor<double> t = gd::Tensor<double>::empty(shape);
    for (int64_t j = 0; j < t.size(); ++j) t.data()[j] = double((j * 5 + int64_t(out.size()) * 3 + salt) % 11 - 5) / 8;
    out.emplace_back(t);
  }
  return out;
}

std::vector<gd::Tensor<double>> ps_values(const std::vector<gd::Var<double>>& vs) {
  std::vector<gd::Tensor<double>> out;
  for (const auto& v : vs) out.push_back(v.value().clone());
  return out;
}

bool ps_equal(const std::vector<gd::Tensor<double>>& a, const std::vector<gd::Tensor<double>>& b) {
  if (a.size() != b.size()) return false;
  for (size_t k = 0; k < a.size(); ++k)
    if (a[k].size() != b[k].size() || std::memcmp(a[k].data(), b[k].data(), size_t(a[k].size()) * sizeof(double)) != 0)
      return false;
  return true;
}

// Replaces `ts` on every rank by rank `root`'s.
void ps_broadcast(std::vector<gd::Tensor<double>>& ts, int root) {
  for (auto& t : ts) gd::dist::broadcast(t, root);
}

// The gradient of step k: 0.5·w + c(k, p, j), a function of the parameters pulled last, so that
// a server that applied pushes to the wrong values would send back different ones.
gd::Tensor<double> ps_gradient(const gd::Tensor<double>& w, int k, size_t p) {
  gd::Tensor<double> g = gd::Tensor<double>::empty(w.shape());
  for (int64_t j = 0; j < w.size(); ++j)
    g.data()[j] = 0.5 * w.data()[j] + double((k * 7 + j * 3 + int64_t(p)) % 9 - 4) / 4;
  return g;
}

constexpr int kPsSteps = 12;

}  // namespace

TEST_CASE("parameter server: one worker, two servers, SGD = sequential SGD in double, exactly", "[.][ps][dist]") {
  REQUIRE(gd::dist::size() == 3);
  const gd::dist::AsyncOptions ps{.num_servers = 2};
  const int r = gd::dist::rank();
  auto params = ps_params(r);  // differ on every rank until the job starts
  std::vector<gd::Tensor<double>> want = ps_values(ps_params(0));
  if (gd::dist::is_parameter_server(ps)) {
    gd::optim::SGD<double> sgd(params, {.lr = 0.25});
    const gd::dist::ServerStats st = gd::dist::run_parameter_server(sgd, ps);
    CHECK(st.pushes == kPsSteps);
    CHECK(st.updates == kPsSteps);  // every push holds a gradient for each server's shard
    CHECK(st.pushes_by_worker == std::vector<int64_t>{kPsSteps});
    CHECK(st.held == 0);
    CHECK(st.max_lag == 0);  // one worker: always the newest parameters
  } else {
    gd::dist::AsyncOptimizer<double> opt(params, ps);
    CHECK(opt.worker_index() == 0);
    CHECK(opt.num_workers() == 1);
    CHECK(ps_equal(ps_values(params), want));  // rank 0's initial values
    int bad = 0;
    for (int k = 0; k < kPsSteps; ++k) {
      for (size_t p = 0; p < params.size(); ++p) {
        params[p].grad() = ps_gradient(params[p].value(), k, p);
        const gd::Tensor<double> g = ps_gradient(want[p], k, p);  // the reference, in double
        for (int64_t j = 0; j < g.size(); ++j) want[p].data()[j] -= 0.25 * g.data()[j];
      }
      opt.step();
      bad += !ps_equal(ps_values(params), want);
    }
    CHECK(bad == 0);
    CHECK(opt.pushes() == kPsSteps);
    CHECK(opt.versions() == std::vector<int64_t>{kPsSteps, kPsSteps});
    opt.finish();
  }
  ps_broadcast(want, 2);
  CHECK(ps_equal(ps_values(params), want));  // the final model on every rank, servers included
  // and training moved the weights
  CHECK_FALSE(ps_equal(ps_values(params), ps_values(ps_params(0))));
}

TEST_CASE("parameter server: Adam on two servers with one worker = one process's Adam, bit for bit", "[.][ps][dist]") {
  const gd::dist::AsyncOptions ps{.num_servers = 2};
  auto params = ps_params(gd::dist::rank());
  auto local = ps_params(0);  // the reference: plain Adam in one process
  gd::optim::Adam<double> local_adam(local, {.lr = 0.125});
  if (gd::dist::is_parameter_server(ps)) {
    gd::optim::Adam<double> adam(params, {.lr = 0.125});
    const gd::dist::ServerStats st = gd::dist::run_parameter_server(adam, ps);
    CHECK(adam.iterations() == kPsSteps);  // one Adam step per push
    CHECK(st.updates == kPsSteps);
  } else {
    gd::dist::AsyncOptimizer<double> opt(params, ps);
    for (int k = 0; k < kPsSteps; ++k) {
      local_adam.zero_grad();
      for (size_t p = 0; p < params.size(); ++p) {
        params[p].grad() = ps_gradient(params[p].value(), k, p);
        local[p].grad() = ps_gradient(local[p].value(), k, p);
      }
      opt.step();
      local_adam.step();
    }
    opt.finish();
  }
  std::vector<gd::Tensor<double>> want = ps_values(local);
  ps_broadcast(want, 2);
  CHECK(ps_equal(ps_values(params), want));
  CHECK_FALSE(ps_equal(want, ps_values(ps_params(0))));
}

TEST_CASE("parameter server: two workers, every push applied exactly once (init - lr x the sum of the pushes)",
          "[.][ps][dist]") {
  for (int staleness : {-1, 1}) {
    INFO("max_staleness " << staleness);
    const gd::dist::AsyncOptions ps{.num_servers = 1, .max_staleness = staleness};
    auto params = ps_params(gd::dist::rank());
    const std::vector<gd::Tensor<double>> init = ps_values(ps_params(0));
    // what this rank pushed, summed (zeros on the server)
    std::vector<gd::Tensor<double>> pushed;
    for (const auto& t : init) pushed.push_back(gd::Tensor<double>::zeros(t.shape()));
    const int steps_of[2] = {15, 9};  // worker 1 finishes first: the server must not wait for it
    if (gd::dist::is_parameter_server(ps)) {
      gd::optim::SGD<double> sgd(params, {.lr = 0.5});
      const gd::dist::ServerStats st = gd::dist::run_parameter_server(sgd, ps);
      CHECK(st.pushes_by_worker == std::vector<int64_t>{15, 9});
      CHECK(st.pushes == 24);
      CHECK(st.updates == 24);
    } else {
      gd::dist::AsyncOptimizer<double> opt(params, ps);
      const int w = opt.worker_index();
      for (int k = 0; k < steps_of[w]; ++k) {
        std::vector<gd::Tensor<double>> g;
        for (size_t p = 0; p < params.size(); ++p) {
          if (p == 1 && w == 1 && k % 2 == 1) {  // no gradient for this parameter on this push
            g.emplace_back();
            continue;
          }
          gd::Tensor<double> t = gd::Tensor<double>::empty(params[p].shape());
          for (int64_t j = 0; j < t.size(); ++j) t.data()[j] = double((k * 5 + w * 11 + j + int64_t(p)) % 7 - 3) / 8;
          for (int64_t j = 0; j < t.size(); ++j) pushed[p].data()[j] += t.data()[j];
          g.push_back(t);
        }
        opt.apply_gradients(g);
      }
      CHECK(opt.pushes() == steps_of[w]);
      opt.finish();
    }
    int bad = 0;
    for (size_t p = 0; p < params.size(); ++p) {
      gd::dist::all_reduce_sum(pushed[p]);  // every gradient pushed by either worker
      for (int64_t j = 0; j < init[p].size(); ++j)
        bad += params[p].value().data()[j] != init[p].data()[j] - 0.5 * pushed[p].data()[j];
    }
    CHECK(bad == 0);
  }
}

TEST_CASE("parameter server: max_staleness bounds how far a worker runs ahead of a slow one", "[.][ps][dist]") {
  // One parameter with a slot per push: worker u's push c writes a 1 at u·K + c (SGD, lr 1,
  // gradient -1 there), so the parameters a worker pulls say which pushes of each worker they hold.
  constexpr int64_t K = 8;
  for (int s : {0, 2}) {
    INFO("max_staleness " << s);
    const gd::dist::AsyncOptions ps{.num_servers = 1, .max_staleness = s};
    std::vector<gd::Var<double>> params = {gd::Var<double>(gd::Tensor<double>::zeros({2 * K}))};
    if (gd::dist::is_parameter_server(ps)) {
      gd::optim::SGD<double> sgd(params, {.lr = 1.0});
      const gd::dist::ServerStats st = gd::dist::run_parameter_server(sgd, ps);
      CHECK(st.pushes == 2 * K);
      CHECK(st.max_lag <= 2 * s + 1);  // (workers - 1)(2s + 1)
      // rounds: in each, the first push waits for the other worker's
      if (s == 0) CHECK(st.held == K);
    } else {
      gd::dist::AsyncOptimizer<double> opt(params, ps);
      const int w = opt.worker_index();
      int bad_own = 0, bad_bound = 0, bad_round = 0;
      for (int64_t c = 0; c < K; ++c) {
        if (w == 1) usleep(3000);  // the slow worker
        gd::Tensor<double> g = gd::Tensor<double>::zeros({2 * K});
        g.data()[w * K + c] = -1.0;
        opt.apply_gradients({g});
        int64_t held[2] = {0, 0};  // pushes of each worker that the pulled parameters hold
        for (int u = 0; u < 2; ++u)
          for (int64_t j = 0; j < K; ++j) held[u] += params[0].value().data()[u * K + j] == 1.0;
        const int64_t mine = c + 1, other = held[1 - w];
        bad_own += held[w] != mine;
        bad_bound += other < mine - s || other > mine + s + 1;
        if (s == 0) bad_round += other != mine;
      }
      CHECK(bad_own == 0);
      CHECK(bad_bound == 0);
      CHECK(bad_round == 0);
      opt.finish();
    }
    // every push landed once
    int bad = 0;
    for (int64_t j = 0; j < 2 * K; ++j) bad += params[0].value().data()[j] != 1.0;
    CHECK(bad == 0);
  }
}

namespace {

// y = x·w* + b* for 4 inputs, noise-free: the model can reach a loss of 0.
struct PsLinear : gd::nn::Module<float> {
  gd::Rng rng;
  gd::nn::Dense<float> d;
  explicit PsLinear(uint64_t seed) : rng(seed), d({.in = 4, .out = 1}, rng) { register_module("d", d); }
  gd::Var<float> forward(const gd::Tensor<float>& x) { return d.forward(x); }
};

gd::train::Data<float, float> ps_regression_data(int64_t n) {
  gd::Tensor<float> x = gd::Tensor<float>::empty({n, 4}), y = gd::Tensor<float>::empty({n, 1});
  const float w[4] = {0.5f, -1.25f, 2.f, 0.75f};
  for (int64_t i = 0; i < n; ++i) {
    float acc = 0.3f;
    for (int64_t j = 0; j < 4; ++j) {
      const float v = float(std::sin(0.9 * double(i) + 1.7 * double(j)));
      x.data()[i * 4 + j] = v;
      acc += w[j] * v;
    }
    y.data()[i] = acc;
  }
  return {x, y};
}

float ps_mse(PsLinear& net, const gd::train::Data<float, float>& d) {
  gd::no_grad off;
  return gd::Var<float>(gd::losses::mean_squared_error(d.y, net.forward(d.x))).item();
}

}  // namespace

TEST_CASE("parameter server: linear regression trained by fit on two workers against one Adam server",
          "[.][ps][dist]") {
  const gd::dist::AsyncOptions ps{.num_servers = 1, .max_staleness = 2};
  const auto data = ps_regression_data(256);
  PsLinear net(11 + uint64_t(gd::dist::rank()));
  PsLinear start(11);  // rank 0's initial weights
  const float initial = ps_mse(start, data);
  if (gd::dist::is_parameter_server(ps)) {
    gd::optim::Adam<float> adam(net.parameters(), {.lr = 0.02});
    const gd::dist::ServerStats st = gd::dist::run_parameter_server(adam, ps);
    CHECK(st.pushes == 2 * 30 * 8);  // 2 workers × 30 epochs × 128 / 16 steps
  } else {
    gd::dist::AsyncOptimizer<float> opt(net.parameters(), ps);
    const auto mse = [](const gd::Tensor<float>& y, const gd::Var<float>& p) {
      return gd::losses::mean_squared_error(y, p);
    };
    // each worker its own half of every epoch's order
    gd::train::fit(net, opt, mse, data,
                   {.epochs = 30, .batch_size = 16, .seed = 5, .num_shards = 2, .shard_index = opt.worker_index()});
    opt.finish();
  }
  const float final_loss = ps_mse(net, data);
  INFO("initial loss " << initial << ", final loss " << final_loss);
  CHECK(final_loss < 1e-3f * initial);
  // the same model on every rank
  int bad = 0;
  for (auto& [name, v] : net.named_parameters()) {
    gd::Tensor<float> mine = v.value().clone(), chief = mine.clone();
    gd::dist::broadcast(chief, 0);
    bad += std::memcmp(mine.data(), chief.data(), size_t(mine.size()) * sizeof(float)) != 0;
  }
  CHECK(bad == 0);
}

TEST_CASE("parameter server: bad layouts and mismatched models throw on every rank, without a hang",
          "[.][ps][dist]") {
  const int r = gd::dist::rank();
  auto params = ps_params(r);
  gd::optim::SGD<double> sgd(params, {.lr = 0.5});
  // Each rank takes the part its options give it, as a program would.
  const auto take_part = [&](const gd::dist::AsyncOptions& o, std::vector<gd::Var<double>>& ps_vars) {
    if (gd::dist::is_parameter_server(o)) {
      gd::optim::SGD<double> opt(ps_vars, {.lr = 0.5});
      gd::dist::run_parameter_server(opt, o);
    } else {
      gd::dist::AsyncOptimizer<double> opt(ps_vars, o);
      opt.finish();
    }
  };
  SECTION("no worker") {
    CHECK_THROWS_WITH(take_part({.num_servers = 3}, params),
                      Catch::Contains("num_servers must be in [1, 2] (a job of 3 ranks needs a server and a worker), got 3"));
  }
  SECTION("no server") {
    CHECK_THROWS_WITH(take_part({.num_servers = 0}, params), Catch::Contains("num_servers must be in [1, 2]"));
  }
  SECTION("options that differ between ranks") {
    CHECK_THROWS_WITH(take_part({.num_servers = 1, .max_staleness = r == 2 ? 3 : 0}, params),
                      Catch::Contains("the ranks pass different AsyncOptions") && Catch::Contains("max_staleness from 0 to 3"));
  }
  SECTION("a rank in the wrong role") {
    const gd::dist::AsyncOptions o{.num_servers = 1};
    try {
      if (r <= 1) {  // rank 1 serves although it is a worker
        gd::dist::run_parameter_server(sgd, o);
      } else {
        gd::dist::AsyncOptimizer<double> opt(params, o);
      }
      FAIL("a wrong role must throw");
    } catch (const gd::value_error& e) {
      if (r == 1)
        CHECK_THAT(e.what(), Catch::Contains("rank 1 is a worker of this job") &&
                                 Catch::Contains("make a gd::dist::AsyncOptimizer there"));
      else
        CHECK_THAT(e.what(), Catch::Contains("rank 1 took the wrong role"));
    }
  }
  SECTION("parameters of different shapes") {
    std::vector<gd::Var<double>> other = {gd::Var<double>(gd::Tensor<double>::zeros({r == 2 ? 4 : 3}))};
    try {
      take_part({.num_servers = 1}, other);
      FAIL("mismatched shapes must throw");
    } catch (const gd::shape_error& e) {
      if (r == 2)
        CHECK_THAT(e.what(), Catch::Contains("parameter 0 has shape [3] on rank 0 and [4] on this rank (2)"));
      else
        CHECK_THAT(e.what(), Catch::Contains("rank 2's parameters do not match rank 0's"));
    }
  }
  SECTION("a different number of parameters, and another element type") {
    std::vector<gd::Var<double>> fewer(params.begin(), params.begin() + (r == 1 ? 2 : 3));
    CHECK_THROWS_AS(take_part({.num_servers = 1}, fewer), gd::shape_error);
    std::vector<gd::Var<float>> floats = {gd::Var<float>(gd::Tensor<float>::zeros({3}))};
    std::vector<gd::Var<double>> doubles = {gd::Var<double>(gd::Tensor<double>::zeros({3}))};
    try {
      if (r == 0) {
        gd::optim::SGD<float> opt(floats, {.lr = 0.5});
        gd::dist::run_parameter_server(opt, {.num_servers = 1});
      } else {
        gd::dist::AsyncOptimizer<double> opt(doubles, {.num_servers = 1});
      }
      FAIL("mismatched element types must throw");
    } catch (const gd::shape_error& e) {
      if (r != 0) CHECK_THAT(e.what(), Catch::Contains("rank 0's parameters are float, this rank's (") && Catch::Contains("double"));
    }
  }
  SECTION("a step after finish, and a worker that never pushes") {
    const gd::dist::AsyncOptions o{.num_servers = 1};
    if (gd::dist::is_parameter_server(o)) {
      const gd::dist::ServerStats st = gd::dist::run_parameter_server(sgd, o);
      CHECK(st.pushes == 0);
    } else {
      gd::dist::AsyncOptimizer<double> opt(params, o);
      opt.finish();
      opt.finish();  // a second call does nothing
      for (auto& p : params) p.grad() = gd::Tensor<double>::ones(p.shape());
      CHECK_THROWS_WITH(opt.step(), Catch::Contains("dist::AsyncOptimizer: a step after finish()"));
    }
  }
  // after any of the above the ranks are still in step: a job whose workers finish in their destructor
  const gd::dist::AsyncOptions o{.num_servers = 1};
  if (gd::dist::is_parameter_server(o)) {
    CHECK(gd::dist::run_parameter_server(sgd, o).pushes == 2);
  } else {
    gd::dist::AsyncOptimizer<double> opt(params, o);
    for (auto& p : params) p.grad() = gd::Tensor<double>::ones(p.shape());
    opt.step();
  }
  CHECK(ps_equal(ps_values(params), [&] {
    auto v = ps_values(params);
    ps_broadcast(v, 0);
    return v;
  }()));
}
