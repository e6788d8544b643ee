// Tests of fit / evaluate / predict fed by a gd::data::Dataset (train/fit_dataset.hpp): the same
// results as on in-memory Data, and exact resume of a shuffled, threaded pipeline.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <gradus/data.hpp>
#include <gradus/gradus.hpp>
#include <gradus/train.hpp>

#include "../support/classification_net.hpp"

namespace gd = gradus;
namespace fs = std::filesystem;
using gd::Tensor;
using gd::data::Dataset;
using Data = gd::train::Data<double, int64_t>;

namespace {

using gradus_test::xent;

/// DenseBatchNormNet 4 -> 16 -> 3 with its kernels drawn from Rng(seed) and its dropout masks
/// from Rng(seed + 1), which it owns.
struct Net : gradus_test::DenseBatchNormNet {
  Net(uint64_t seed, double rate)
      : Net(rate, std::make_shared<gd::Rng>(seed), std::make_shared<gd::Rng>(seed + 1)) {}
  std::shared_ptr<gd::Rng> dropout_rng;  // outlives drop's use of it

 private:
  Net(double rate, const std::shared_ptr<gd::Rng>& init, std::shared_ptr<gd::Rng> dropout)
      : DenseBatchNormNet(4, 16, 3, rate, *init, *dropout), dropout_rng(std::move(dropout)) {}
};

/// n examples of 4 features in 3 classes.
Data make_data(int64_t n, uint64_t seed) { return gradus_test::make_data(n, 4, 3, seed); }

double max_diff(const Net& a, const Net& b) {
  double d = 0;
  auto pa = a.named_parameters(), pb = b.named_parameters();
  REQUIRE(pa.size() == pb.size());
  for (size_t i = 0; i < pa.size(); ++i) {
    const Tensor<double>& x = pa[i].second.value();
    const Tensor<double>& y = pb[i].second.value();
    REQUIRE(x.shape() == y.shape());
    for (int64_t k = 0; k < x.size(); ++k) d = std::max(d, std::abs(x.data()[k] - y.data()[k]));
  }
  return d;
}

bool same_bits(const Net& a, const Net& b) {
  auto pa = a.named_parameters(), pb = b.named_parameters();
  auto ba = a.named_buffers(), bb = b.named_buffers();
  if (pa.size() != pb.size() || ba.size() != bb.size()) return false;
  auto eq = [](const Tensor<double>& x, const Tensor<double>& y) {
    return x.shape() == y.shape() && std::memcmp(x.data(), y.data(), size_t(x.size()) * sizeof(double)) == 0;
  };
  for (size_t i = 0; i < pa.size(); ++i)
    if (!eq(pa[i].second.value(), pb[i].second.value())) return false;
  for (size_t i = 0; i < ba.size(); ++i)
    if (!eq(ba[i].second, bb[i].second)) return false;
  return true;
}

/// Records the losses of the steps and the epochs' step counts.
struct Recorder : gd::train::Hook {
  std::vector<double> losses;
  std::vector<int64_t> steps, steps_per_epoch;
  void after_step(gd::train::Session& s, const gd::train::StepResult& r) override {
    losses.push_back(r.loss);
    steps.push_back(r.global_step);
    steps_per_epoch.push_back(s.steps_per_epoch());
  }
};

}  // namespace

TEST_CASE("fit on a Dataset equals fit on the same in-memory batches", "[train][dataset]") {
  const Data train = make_data(44, 1), val = make_data(20, 2);  // 6 batches of 8 per epoch, the last of 4
  const Dataset train_ds = Dataset::from_tensor_slices(train.x, train.y).batch(8);
  const Dataset val_ds = Dataset::from_tensor_slices(val.x, val.y).batch(8);

  Net a(1, 0.25), b(1, 0.25);
  gd::optim::Adam<double> opt_a(a.parameters(), {.lr = 0.01}), opt_b(b.parameters(), {.lr = 0.01});
  gd::metrics::SparseCategoricalAccuracy acc_a, acc_b;
  Recorder rec_a, rec_b;
  const gd::train::History ha = gd::train::fit(
      a, opt_a, xent, train,
      {.epochs = 3, .batch_size = 8, .shuffle = false, .validation = &val, .metrics = {&acc_a}, .hooks = {&rec_a}});
  const gd::train::History hb =
      gd::train::fit(b, opt_b, xent, train_ds, {.epochs = 3, .validation = &val_ds, .metrics = {&acc_b}, .hooks = {&rec_b}});
  REQUIRE(hb.epochs.size() == 3);
  CHECK(hb.global_step == 18);
  CHECK(max_diff(a, b) < 1e-12);
  REQUIRE(rec_b.losses.size() == rec_a.losses.size());
  for (size_t i = 0; i < rec_a.losses.size(); ++i) CHECK(rec_b.losses[i] == Approx(rec_a.losses[i]).epsilon(1e-12));
  for (size_t e = 0; e < 3; ++e) {
    CHECK(hb.epochs[e].global_step == ha.epochs[e].global_step);
    CHECK(hb.epochs[e].loss == Approx(ha.epochs[e].loss).epsilon(1e-12));
    CHECK(hb.epochs[e].get("val_loss") == Approx(ha.epochs[e].get("val_loss")).epsilon(1e-12));
    CHECK(hb.epochs[e].get("val_sparse_categorical_accuracy") == ha.epochs[e].get("val_sparse_categorical_accuracy"));
  }
  // steps_per_epoch is learnt when the first epoch ends.
  CHECK(rec_b.steps_per_epoch.front() == 0);
  CHECK(rec_b.steps_per_epoch.back() == 6);

  // float batches train a double model (converted), and bad batches are refused clearly.
  Net c(1, 0.0);
  gd::optim::SGD<double> sgd(c.parameters(), {.lr = 0.1});
  const Tensor<float> xf = gd::eval(gd::cast<float>(train.x));
  CHECK_NOTHROW(gd::train::fit(c, sgd, xent, Dataset::from_tensor_slices(xf, train.y).batch(8), {}));
  CHECK_THROWS_WITH(gd::train::fit(c, sgd, xent, Dataset::from_tensor_slices(train.x).batch(8), {}),
                    Catch::Contains("two fields (x, y)"));
  CHECK_THROWS_WITH(gd::train::fit(c, sgd, xent, Dataset::from_tensor_slices(train.x, train.y).take(0), {}),
                    Catch::Contains("gave no batch"));
}

TEST_CASE("fit on a Dataset takes its validation set as in-memory Data too", "[train][dataset]") {
  const Data train = make_data(44, 1), val = make_data(20, 2);
  const Tensor<float> xf = gd::eval(gd::cast<float>(train.x));
  const Dataset train_ds = Dataset::from_tensor_slices({xf, train.y}).batch(8);  // braces, mixed element types
  const Dataset val_ds = Dataset::from_tensor_slices(val.x, val.y).batch(8);

  Net a(1, 0.25), b(1, 0.25);
  gd::optim::Adam<double> opt_a(a.parameters(), {.lr = 0.01}), opt_b(b.parameters(), {.lr = 0.01});
  gd::metrics::SparseCategoricalAccuracy acc_a, acc_b;
  const gd::train::History ha =
      gd::train::fit(a, opt_a, xent, train_ds, {.epochs = 2, .validation = &val_ds, .metrics = {&acc_a}});
  const gd::train::History hb = gd::train::fit(
      b, opt_b, xent, train_ds, {.epochs = 2, .validation = &val, .metrics = {&acc_b}, .validation_batch_size = 8});
  REQUIRE(hb.epochs.size() == 2);
  for (size_t e = 0; e < 2; ++e) {
    CHECK(hb.epochs[e].get("val_loss") == ha.epochs[e].get("val_loss"));
    CHECK(hb.epochs[e].get("val_sparse_categorical_accuracy") == ha.epochs[e].get("val_sparse_categorical_accuracy"));
  }
  const Data empty{Tensor<double>({0, 4}), Tensor<int64_t>({0})};
  CHECK_THROWS_WITH(gd::train::fit(b, opt_b, xent, train_ds, {.validation = &empty}),
                    Catch::Contains("fit: the validation Data must hold x [n, ...] and y [n, ...] with the same n > 0"));
}

TEST_CASE("fit on a shuffled Dataset: a run stopped and resumed is bit-identical", "[train][dataset][resume]") {
  const Data train = make_data(44, 3);
  // Shuffled, mapped on two threads, prefetched: deterministic, so exactly resumable.
  const Dataset pipeline = Dataset::from_tensor_slices(train.x, train.y)
                               .shuffle(32, 7)
                               .parallel_map(
                                   [](gd::data::Example e) {
                                     e[0] = gd::eval(e.tensor<double>(0) * 0.5);
                                     return e;
                                   },
                                   2)
                               .batch(8)
                               .prefetch(2);
  struct Run {
    Net net;
    gd::optim::Adam<double> opt;
    explicit Run(uint64_t seed) : net(seed, 0.25), opt(net.parameters(), {.lr = 0.01}) {}
  };

  Run a(1);
  Recorder rec_a;
  const gd::train::History ha = gd::train::fit(a.net, a.opt, xent, pipeline, {.epochs = 3, .hooks = {&rec_a}});
  REQUIRE(ha.global_step == 18);

  const fs::path dir = "fit_dataset_resume";
  fs::remove_all(dir);
  Run b1(1);
  gd::train::StopAtStep stop({.last_step = 9});  // epoch 1, after batch 3 of 6
  const gd::train::History hb1 = gd::train::fit(b1.net, b1.opt, xent, pipeline, {.epochs = 3, .hooks = {&stop}, .run_dir = dir});
  CHECK(hb1.global_step == 9);
  REQUIRE(gd::io::latest_checkpoint(dir) == dir / "model.ckpt-9.safetensors");
  {
    const gd::io::Safetensors ck = gd::io::load_safetensors(dir / "model.ckpt-9.safetensors");
    const Tensor<int64_t> it = ck.get<int64_t>("train/data_iterator");
    CHECK(std::vector<int64_t>(it.begin(), it.end()) == std::vector<int64_t>{1, 3});
  }
  {  // Mid-epoch, in-memory batching cannot continue a Dataset's epoch.
    Run other(5);
    CHECK_THROWS_WITH(gd::train::fit(other.net, other.opt, xent, train, {.epochs = 3, .batch_size = 8, .run_dir = dir}),
                      Catch::Contains("mid-epoch under other batching"));
  }

  Run b2(1234);  // other initial weights and dropout stream: everything comes from the checkpoint
  Recorder rec_b;
  const gd::train::History hb2 = gd::train::fit(b2.net, b2.opt, xent, pipeline, {.epochs = 3, .hooks = {&rec_b}, .run_dir = dir});
  REQUIRE(rec_b.steps.front() == 10);
  CHECK(std::vector<double>(rec_a.losses.begin() + 9, rec_a.losses.end()) == rec_b.losses);
  CHECK(hb2 == ha);
  CHECK(same_bits(b2.net, a.net));
  CHECK(b2.net.dropout_rng->state() == a.net.dropout_rng->state());
  fs::remove_all(dir);
}

TEST_CASE("evaluate and predict on a Dataset match the in-memory versions", "[train][dataset][evaluate]") {
  const Data train = make_data(44, 4), test = make_data(30, 5);
  Net net(3, 0.25);
  gd::optim::Adam<double> opt(net.parameters(), {.lr = 0.01});
  gd::train::fit(net, opt, xent, train, {.epochs = 2, .batch_size = 8});
  net.train();

  gd::metrics::SparseCategoricalAccuracy acc;
  const gd::train::Evaluation mem = gd::train::evaluate(net, xent, test, {.batch_size = 8, .metrics = {&acc}});
  const Dataset test_ds = Dataset::from_tensor_slices(test.x, test.y).batch(8);
  const gd::train::Evaluation ds = gd::train::evaluate(net, xent, test_ds, {.metrics = {&acc}});
  CHECK(ds.loss == Approx(mem.loss).epsilon(1e-12));
  CHECK(ds.get("sparse_categorical_accuracy") == mem.get("sparse_categorical_accuracy"));
  CHECK(net.is_training());  // the mode is restored

  const Tensor<double> p_mem = gd::train::predict(net, test.x, {.batch_size = 8});
  const Tensor<double> p_ds = gd::train::predict(net, test_ds);                                 // (x, y) batches
  const Tensor<double> p_x = gd::train::predict(net, Dataset::from_tensor_slices(test.x).batch(7));  // x only
  REQUIRE(p_ds.shape() == gd::Shape({30, 3}));
  REQUIRE(p_x.shape() == gd::Shape({30, 3}));
  for (int64_t k = 0; k < p_mem.size(); ++k) {
    CHECK(p_ds.data()[k] == Approx(p_mem.data()[k]).epsilon(1e-12));
    CHECK(p_x.data()[k] == Approx(p_mem.data()[k]).epsilon(1e-12));
  }
}
