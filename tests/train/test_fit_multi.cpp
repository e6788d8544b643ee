// fit / evaluate on MultiData: a model of two inputs and two outputs, one loss per output with
// loss weights, against the same steps written by hand; resume; errors.
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <tuple>

#include <gradus/gradus.hpp>
#include <gradus/train.hpp>
#include <gradus/train/fit_multi.hpp>

namespace gd = gradus;
namespace fs = std::filesystem;
using gd::Tensor;

namespace {

/// (a [N,3], b [N,2]) → h = tanh(a W1 + b W2) → (class logits [N,3], a regression [N,1]).
struct TwoHeads : gd::nn::Module<double> {
  gd::nn::Dense<double> da, db, cls, reg;
  explicit TwoHeads(gd::Rng&& rng)
      : da({.in = 3, .out = 4}, rng), db({.in = 2, .out = 4}, rng), cls({.in = 4, .out = 3}, rng), reg({.in = 4, .out = 1}, rng) {
    register_module("da", da);
    register_module("db", db);
    register_module("cls", cls);
    register_module("reg", reg);
  }
  std::tuple<gd::Var<double>, gd::Var<double>> forward(const Tensor<double>& a, const Tensor<double>& b) {
    gd::Var<double> h = gd::tanh(da.forward(a) + db.forward(b));
    return {cls.forward(h), reg.forward(h)};
  }
};

const auto xent = [](const Tensor<int64_t>& y, const gd::Var<double>& logits) {
  return gd::losses::sparse_softmax_cross_entropy_with_logits(y, logits);
};
const auto mse = [](const Tensor<double>& y, const gd::Var<double>& p) { return gd::losses::mean_squared_error(y, p); };

struct Problem {
  Tensor<double> a, b, t;
  Tensor<int64_t> c;
  Problem() {
    gd::Rng rng(21);
    a = Tensor<double>::random_normal({10, 3}, rng);
    b = Tensor<double>::random_normal({10, 2}, rng);
    t = Tensor<double>::random_normal({10, 1}, rng);
    c = Tensor<int64_t>({10});
    for (int64_t i = 0; i < 10; ++i) c.data()[i] = int64_t(rng.below(3));
  }
  gd::train::MultiData<std::tuple<Tensor<double>, Tensor<double>>, std::tuple<Tensor<int64_t>, Tensor<double>>> data()
      const {
    return {std::tuple{a, b}, std::tuple{c, t}};
  }
};

bool same_bits(const Tensor<double>& x, const Tensor<double>& y) {
  return x.shape() == y.shape() && std::memcmp(x.data(), y.data(), size_t(x.size()) * sizeof(double)) == 0;
}
bool same_model(const TwoHeads& x, const TwoHeads& y) {
  auto px = x.named_parameters(), py = y.named_parameters();
  for (size_t i = 0; i < px.size(); ++i)
    if (!same_bits(px[i].second.value(), py[i].second.value())) return false;
  return px.size() == py.size();
}

}  // namespace

TEST_CASE("fit on MultiData: weighted per-output losses, the same steps as written by hand", "[train][fit][multi]") {
  const Problem p;
  const auto data = p.data();
  TwoHeads net(gd::Rng(3)), twin(gd::Rng(3));
  gd::optim::SGD<double> opt(net.parameters(), {.lr = 0.2}), opt_twin(twin.parameters(), {.lr = 0.2});

  // evaluate: each output's loss from gd::losses directly, and their weighted sum
  const gd::train::Evaluation ev0 = gd::train::evaluate(net, std::tuple{xent, mse}, data, {.batch_size = 4, .loss_weights = {1.0, 0.5}});
  auto [o1, o2] = twin.forward(p.a, p.b);
  const double l1 = gd::losses::sparse_softmax_cross_entropy_with_logits(p.c, o1).item();
  const double l2 = gd::losses::mean_squared_error(p.t, o2).item();
  CHECK(ev0.get("loss_0") == Approx(l1).epsilon(1e-12));
  CHECK(ev0.get("loss_1") == Approx(l2).epsilon(1e-12));
  CHECK(ev0.loss == Approx(l1 + 0.5 * l2).epsilon(1e-12));

  const gd::train::History h = gd::train::fit(net, opt, std::tuple{xent, mse}, data,
                                              {.epochs = 3, .batch_size = 10, .shuffle = false, .loss_weights = {1.0, 0.5},
                                               .validation = &data});
  std::vector<double> losses;
  for (int step = 0; step < 3; ++step) {
    auto [y1, y2] = twin.forward(p.a, p.b);
    gd::Var<double> loss(gd::losses::sparse_softmax_cross_entropy_with_logits(p.c, y1) +
                         gd::losses::mean_squared_error(p.t, y2) * 0.5);
    losses.push_back(loss.item());
    opt_twin.minimize(loss);
  }
  REQUIRE(h.epochs.size() == 3);
  for (size_t e = 0; e < 3; ++e) CHECK(h.epochs[e].loss == Approx(losses[e]).epsilon(1e-12));
  CHECK(same_model(net, twin));
  CHECK(h.epochs[2].has("val_loss_0"));
  CHECK(h.epochs[2].has("val_loss_1"));
}

TEST_CASE("fit on MultiData: a run stopped and resumed is bit-identical", "[train][fit][multi][resume]") {
  const Problem p;
  const auto data = p.data();
  const fs::path dir = "multi_resume";
  fs::remove_all(dir);
  TwoHeads a(gd::Rng(3));
  gd::optim::Adam<double> opt_a(a.parameters(), {.lr = 0.01});
  gd::train::fit(a, opt_a, std::tuple{xent, mse}, data, {.epochs = 2, .batch_size = 4, .seed = 5});

  TwoHeads b1(gd::Rng(3));
  gd::optim::Adam<double> opt_b1(b1.parameters(), {.lr = 0.01});
  gd::train::StopAtStep stop({.last_step = 4});  // mid-epoch 2 (3 batches per epoch)
  gd::train::fit(b1, opt_b1, std::tuple{xent, mse}, data, {.epochs = 2, .batch_size = 4, .seed = 5, .hooks = {&stop}, .run_dir = dir});
  TwoHeads b2(gd::Rng(8));
  gd::optim::Adam<double> opt_b2(b2.parameters(), {.lr = 0.01});
  const auto h = gd::train::fit(b2, opt_b2, std::tuple{xent, mse}, data, {.epochs = 2, .batch_size = 4, .seed = 5, .run_dir = dir});
  CHECK(h.global_step == 6);
  CHECK(same_model(a, b2));
  fs::remove_all(dir);
}

TEST_CASE("fit on MultiData: bad data and weights are refused with clear errors", "[train][fit][multi][errors]") {
  const Problem p;
  TwoHeads net(gd::Rng(3));
  gd::optim::SGD<double> opt(net.parameters(), {.lr = 0.1});
  CHECK_THROWS_WITH(gd::train::fit(net, opt, std::tuple{xent, mse}, p.data(), {.loss_weights = {1.0}}),
                    Catch::Contains("fit: loss_weights must hold one weight per output (2), got 1"));
  auto bad = p.data();
  std::get<1>(bad.y) = Tensor<double>::zeros({9, 1});
  CHECK_THROWS_WITH(gd::train::fit(net, opt, std::tuple{xent, mse}, bad),
                    Catch::Contains("fit: data: label tensor 1 must have shape [N, ...] with N = 10"));
}
