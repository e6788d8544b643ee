// fit / evaluate call the loss as loss(labels, predictions), the order of every gd::losses
// function, so a gd::losses function itself can be passed; checked with the asymmetric log loss
// against plain double loops.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include <gradus/gradus.hpp>
#include <gradus/train.hpp>

namespace gd = gradus;
using gd::Tensor;

namespace {

/// sigmoid(x w + c): probabilities of one output.
struct Logistic : gd::nn::Module<double> {
  gd::nn::Dense<double> d;
  explicit Logistic(gd::Rng& rng) : d({.in = 3, .out = 1}, rng) { register_module("d", d); }
  gd::Var<double> forward(const Tensor<double>& x) { return gd::sigmoid(d.forward(x)); }
};

/// -mean(y log(p + eps) + (1 - y) log(1 - p + eps)) and its gradient over (w, c), in plain loops.
double log_loss_by_hand(const Tensor<double>& x, const Tensor<double>& y, const std::vector<double>& w, double c,
                        std::vector<double>* gw = nullptr, double* gc = nullptr) {
  const double eps = 1e-7;
  const int64_t n = x.dim(0);
  double loss = 0;
  if (gw) *gw = {0, 0, 0}, *gc = 0;
  for (int64_t i = 0; i < n; ++i) {
    double z = c;
    for (int64_t j = 0; j < 3; ++j) z += x(i, j) * w[size_t(j)];
    const double p = 1 / (1 + std::exp(-z)), t = y(i, 0);
    loss += -(t * std::log(p + eps) + (1 - t) * std::log(1 - p + eps)) / double(n);
    if (gw) {  // dL/dz = (-t / (p + eps) + (1 - t) / (1 - p + eps)) * p (1 - p) / n
      const double dz = (-t / (p + eps) + (1 - t) / (1 - p + eps)) * p * (1 - p) / double(n);
      for (int64_t j = 0; j < 3; ++j) (*gw)[size_t(j)] += dz * x(i, j);
      *gc += dz;
    }
  }
  return loss;
}

}  // namespace

TEST_CASE("fit and evaluate take a gd::losses function: loss(labels, predictions)", "[train][fit][loss_order]") {
  gd::Rng rng(4);
  Tensor<double> x = Tensor<double>::random_normal({12, 3}, rng);
  Tensor<double> y({12, 1});
  for (int64_t i = 0; i < 12; ++i) y.data()[i] = x(i, 0) - 0.5 * x(i, 2) > 0 ? 1.0 : 0.0;
  const gd::train::Data<double, double> data{x, y};
  Logistic net(rng);
  auto params = net.named_parameters();
  std::vector<double> w(params[0].second.value().data(), params[0].second.value().data() + 3);
  double c = params[1].second.value().data()[0];

  const auto log_loss = &gd::losses::log_loss<Tensor<double>, gd::Var<double>>;
  CHECK(gd::train::evaluate(net, log_loss, data, {.batch_size = 5}).loss ==
        Approx(log_loss_by_hand(x, y, w, c)).epsilon(1e-12));

  // two full-batch SGD steps of fit against the same steps by hand
  gd::optim::SGD<double> sgd(net.parameters(), {.lr = 0.5});
  const gd::train::History h = gd::train::fit(net, sgd, log_loss, data, {.epochs = 2, .batch_size = 12, .shuffle = false});
  double first_loss = 0;
  for (int step = 0; step < 2; ++step) {
    std::vector<double> gw;
    double gc = 0;
    const double l = log_loss_by_hand(x, y, w, c, &gw, &gc);
    if (step == 0) first_loss = l;
    for (size_t j = 0; j < 3; ++j) w[j] -= 0.5 * gw[j];
    c -= 0.5 * gc;
  }
  REQUIRE(h.epochs.size() == 2);
  CHECK(h.epochs[0].loss == Approx(first_loss).epsilon(1e-12));
  params = net.named_parameters();
  for (size_t j = 0; j < 3; ++j) CHECK(params[0].second.value().data()[j] == Approx(w[j]).epsilon(1e-12));
  CHECK(params[1].second.value().data()[0] == Approx(c).epsilon(1e-12));

  // a lambda in the same order works as well
  const auto lambda = [](const Tensor<double>& labels, const gd::Var<double>& p) { return gd::losses::log_loss(labels, p); };
  CHECK(gd::train::evaluate(net, lambda, data).loss == Approx(log_loss_by_hand(x, y, w, c)).epsilon(1e-12));
}
