// Tests of gradus/losses/losses.hpp. Reference values are either the ones quoted from TensorFlow
// in the issue, or computed here in double from the textbook formula of each loss (written
// independently of the library's stable forms) and TF1 compute_weighted_loss written out by hand.
// Every loss is gradient-checked by one helper that takes a std::function, so the checker is
// instantiated once.
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include <gradus/gradus.hpp>
#include <gradus/losses.hpp>

#include "../support/without_kernel.hpp"

namespace gd = gradus;
namespace L = gd::losses;
using V = gd::Var<double>;
using Td = gd::Tensor<double>;
using R = gd::Reduction;

namespace {

constexpr R kReductions[] = {R::none, R::sum, R::mean, R::sum_by_nonzero_weights};

/// A loss of one differentiable input x (predictions or logits; labels captured).
using LossFn = std::function<V(const V& x, R reduction, const Td& weights)>;

double weight_at(const Td& w, int64_t r, int64_t c) {
  if (w.rank() == 0) return w.item();
  if (w.rank() == 1) return w(w.dim(0) == 1 ? 0 : r);
  return w(w.dim(0) == 1 ? 0 : r, w.dim(1) == 1 ? 0 : c);
}

/// TF1 compute_weighted_loss written out: `ref` holds rows x cols unweighted losses.
std::vector<double> reference(const std::vector<double>& ref, int64_t rows, int64_t cols, const Td& w, R reduction) {
  std::vector<double> weighted;
  double sum = 0, wsum = 0, nonzero = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const double wi = weight_at(w, r, c);
      weighted.push_back(ref[size_t(r * cols + c)] * wi);
      sum += weighted.back(), wsum += wi, nonzero += wi != 0;
    }
  switch (reduction) {
    case R::none: return weighted;
    case R::sum: return {sum};
    case R::mean: return {wsum == 0 ? 0 : sum / wsum};
    case R::sum_by_nonzero_weights: return {nonzero == 0 ? 0 : sum / nonzero};
  }
  return {};
}

/// Checks value (every reduction, every weighting) and gradient (every reduction, the first
/// tensor weights) of one loss against per-element reference losses `ref` of shape [rows, cols].
void check_loss(const std::string& name, const LossFn& f, const Td& x0, const std::vector<double>& ref, int64_t rows,
                int64_t cols, const std::vector<Td>& weights) {
  for (size_t k = 0; k < weights.size(); ++k)
    for (R reduction : kReductions) {
      INFO(name << ", reduction " << int(reduction) << ", weights " << weights[k]);
      V x(x0.clone());
      const V out = f(x, reduction, weights[k]);
      const std::vector<double> want = reference(ref, rows, cols, weights[k], reduction);
      if (reduction == R::none)
        CHECK(out.shape().numel() == rows * cols);
      else
        CHECK(out.rank() == 0);
      REQUIRE(size_t(out.size()) == want.size());
      for (size_t i = 0; i < want.size(); ++i) CHECK(out.value().data()[i] == Approx(want[i]).epsilon(1e-12).margin(1e-12));
      if (k == 1) {
        const Td& w = weights[k];
        const double err = gd::compute_gradient_error([&](const V& v) { return f(v, reduction, w); }, x0, {.delta = 1e-6});
        CHECK(err < 1e-7);
      }
    }
}

/// Gradient error of a loss with respect to both its labels and its predictions.
double gradient_error2(const std::function<V(const V&, const V&)>& f, const Td& y0, const Td& x0) {
  return gd::compute_gradient_error(f, {y0, x0}, {.delta = 1e-6});
}

/// The message of the exception of type Exc that f throws ("" if none or another type).
template <class Exc>
std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Exc& e) {
    return e.what();
  } catch (...) {
  }
  return "";
}

double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

// Shared data, shape [3, 4]: predictions/logits, real labels, 0/1 labels, probabilities and soft labels.
const Td kX = Td::from({0.3, -1.2, 1.7, 0.45, -0.8, 2.1, -0.05, 1.1, 0.6, -1.6, 0.9, -0.35}, {3, 4});
const Td kY = Td::from({0.9, -0.4, 1.2, -0.5, 0.5, 1.6, 0.7, -0.2, 0.1, -1.0, 1.8, 0.25}, {3, 4});
const Td kBin = Td::from({1, 0, 1, 0, 0, 1, 1, 0, 1, 0, 0, 1}, {3, 4});
const Td kProb = Td::from({0.3, 0.8, 0.55, 0.1, 0.9, 0.65, 0.2, 0.45, 0.7, 0.15, 0.35, 0.6}, {3, 4});
const Td kSoft = Td::from({1, 0, 0.5, 0, 1, 0.3, 1, 0, 0.8, 0.2, 0, 1}, {3, 4});

/// scalar 1, per-example [3,1] with a zero, full [3,4] with zeros, per-column [1,4], scalar 0.5.
std::vector<Td> elementwise_weights() {
  return {Td::scalar(1.0), Td::from({2.0, 0.0, 0.5}, {3, 1}),
          Td::from({1, 0, 2, 0.5, 0, 0, 1, 3, 1, 1, 0, 2}, {3, 4}), Td::from({1, 2, 0, 0.5}, {1, 4}), Td::scalar(0.5)};
}

/// ref[i] = g(a[i], b[i]) over two [3,4] tensors.
std::vector<double> per_element(const Td& a, const Td& b, const std::function<double(double, double)>& g) {
  std::vector<double> out;
  for (int64_t i = 0; i < a.size(); ++i) out.push_back(g(a.data()[i], b.data()[i]));
  return out;
}

}  // namespace

TEST_CASE("losses: reference values quoted from TensorFlow", "[losses]") {
  // tf.losses.mean_squared_error, float32
  const auto y = gd::Tensor<float>::from({4, 4, 4, 3, 3, 3, 1, 1, 1}, {3, 3});
  const auto p = gd::Tensor<float>::from({1, 1, 1, 1, 1, 1, 2, 2, 2}, {3, 3});
  const auto mse = L::mean_squared_error(y, p);
  static_assert(std::is_same_v<decltype(mse), const gd::Tensor<float>>, "no Var in, no Var out");
  CHECK(mse.rank() == 0);
  CHECK(mse.item() == Approx(4.6666665f).epsilon(1e-6));

  // tf.nn.sparse_softmax_cross_entropy_with_logits, and the one-hot labels smoothed to 0.98/0.01
  const auto labels = gd::Tensor<int64_t>::from({2, 0});
  V logits(Td::from({2, -1, 3, 1, 0, -0.5}, {2, 3}));
  const V sparse = L::sparse_softmax_cross_entropy_with_logits(labels, logits, {.reduction = R::none});
  REQUIRE(sparse.shape() == gd::Shape{2});
  CHECK(sparse.value()(0) == Approx(0.32656264).epsilon(1e-7));
  CHECK(sparse.value()(1) == Approx(0.46436879).epsilon(1e-7));
  // by hand: log(e^2 + e^-1 + e^3) - 3 and log(e + 1 + e^-0.5) - 1
  CHECK(sparse.value()(0) == Approx(std::log(std::exp(2) + std::exp(-1) + std::exp(3)) - 3).epsilon(1e-14));
  CHECK(sparse.value()(1) == Approx(std::log(std::exp(1) + 1 + std::exp(-0.5)) - 1).epsilon(1e-14));
  const Td onehot = Td::from({0, 0, 1, 1, 0, 0}, {2, 3});
  const V smooth =
      L::softmax_cross_entropy_with_logits(onehot, logits, {.reduction = R::none, .label_smoothing = 0.03});
  CHECK(smooth.value()(0) == Approx(0.37656264).epsilon(1e-7));
  CHECK(smooth.value()(1) == Approx(0.48936878).epsilon(1e-7));
  // the smoothed labels shift each loss by -sum((y' - y) * x): +0.05 and +0.025
  CHECK(smooth.value()(0) == Approx(sparse.value()(0) + 0.05).epsilon(1e-14));
  CHECK(smooth.value()(1) == Approx(sparse.value()(1) + 0.025).epsilon(1e-14));
}

TEST_CASE("losses: elementwise losses, every reduction and weighting, values and gradients", "[losses]") {
  const auto ws = elementwise_weights();
  check_loss("mean_squared_error",
             [](const V& p, R r, const Td& w) { return L::mean_squared_error(kY, p, {.reduction = r, .weights = w}); }, kX,
             per_element(kY, kX, [](double y, double p) { return (p - y) * (p - y); }), 3, 4, ws);
  check_loss("absolute_difference",
             [](const V& p, R r, const Td& w) { return L::absolute_difference(kY, p, {.reduction = r, .weights = w}); },
             kX, per_element(kY, kX, [](double y, double p) { return std::abs(p - y); }), 3, 4, ws);
  check_loss("log_loss", [](const V& p, R r, const Td& w) { return L::log_loss(kSoft, p, {.reduction = r, .weights = w}); },
             kProb, per_element(kSoft, kProb, [](double y, double p) {
               return -y * std::log(p + 1e-7) - (1 - y) * std::log(1 - p + 1e-7);
             }),
             3, 4, ws);
  check_loss("hinge_loss", [](const V& x, R r, const Td& w) { return L::hinge_loss(kBin, x, {.reduction = r, .weights = w}); },
             kX, per_element(kBin, kX, [](double y, double x) { return std::max(0.0, 1 - (y == 1 ? x : -x)); }), 3, 4, ws);
  check_loss("huber_loss",
             [](const V& p, R r, const Td& w) { return L::huber_loss(kY, p, {.reduction = r, .weights = w, .delta = 0.7}); },
             kX, per_element(kY, kX, [](double y, double p) {
               const double a = std::abs(p - y);
               return a <= 0.7 ? a * a / 2 : 0.7 * a - 0.7 * 0.7 / 2;
             }),
             3, 4, ws);
  check_loss("log_cosh", [](const V& p, R r, const Td& w) { return L::log_cosh(kY, p, {.reduction = r, .weights = w}); }, kX,
             per_element(kY, kX, [](double y, double p) { return std::log(std::cosh(p - y)); }), 3, 4, ws);
  check_loss("exponential_loss",
             [](const V& x, R r, const Td& w) { return L::exponential_loss(kBin, x, {.reduction = r, .weights = w}); }, kX,
             per_element(kBin, kX, [](double y, double x) { return std::exp(y == 1 ? -x : x); }), 3, 4, ws);
  // -z' log sigmoid(x) - (1 - z') log(1 - sigmoid(x)) with z' = 0.9 z + 0.05 (label_smoothing 0.1)
  check_loss("sigmoid_cross_entropy_with_logits",
             [](const V& x, R r, const Td& w) {
               return L::sigmoid_cross_entropy_with_logits(kSoft, x, {.reduction = r, .weights = w, .label_smoothing = 0.1});
             },
             kX, per_element(kSoft, kX, [](double z, double x) {
               const double zs = 0.9 * z + 0.05;
               return -zs * std::log(sigmoid(x)) - (1 - zs) * std::log(1 - sigmoid(x));
             }),
             3, 4, ws);
}

TEST_CASE("losses: softmax cross-entropies, per-example weights, values and gradients", "[losses]") {
  // logits [4, 3]; soft labels rows sum to 1; sparse labels
  const Td x0 = Td::from({2, -1, 3, 1, 0, -0.5, -0.3, 0.8, 0.1, 1.5, 1.5, -2}, {4, 3});
  const Td soft = Td::from({0.1, 0.2, 0.7, 1, 0, 0, 0.3, 0.3, 0.4, 0, 0.5, 0.5}, {4, 3});
  const auto sparse = gd::Tensor<int64_t>::from({2, 0, 1, 2});
  auto lse = [&](int64_t n) {
    double s = 0;
    for (int c = 0; c < 3; ++c) s += std::exp(x0(n, c));
    return std::log(s);
  };
  std::vector<double> ref_soft, ref_smooth, ref_sparse;
  for (int64_t n = 0; n < 4; ++n) {
    double a = 0, b = 0;
    for (int c = 0; c < 3; ++c) {
      a -= soft(n, c) * (x0(n, c) - lse(n));
      b -= (soft(n, c) * 0.8 + 0.2 / 3) * (x0(n, c) - lse(n));
    }
    ref_soft.push_back(a);
    ref_smooth.push_back(b);
    ref_sparse.push_back(lse(n) - x0(n, sparse(n)));
  }
  const std::vector<Td> ws = {Td::scalar(1.0), Td::from({2.0, 0.0, 0.5, 1.0}), Td::from({0.0, 0.0, 1.0, 3.0}),
                              Td::from({1.0}), Td::scalar(0.5)};
  check_loss("softmax_cross_entropy_with_logits",
             [&](const V& x, R r, const Td& w) {
               return L::softmax_cross_entropy_with_logits(soft, x, {.reduction = r, .weights = w});
             },
             x0, ref_soft, 4, 1, ws);
  check_loss("softmax_cross_entropy_with_logits, label_smoothing 0.2",
             [&](const V& x, R r, const Td& w) {
               return L::softmax_cross_entropy_with_logits(soft, x, {.reduction = r, .weights = w, .label_smoothing = 0.2});
             },
             x0, ref_smooth, 4, 1, ws);
  check_loss("sparse_softmax_cross_entropy_with_logits",
             [&](const V& x, R r, const Td& w) {
               return L::sparse_softmax_cross_entropy_with_logits(sparse, x, {.reduction = r, .weights = w});
             },
             x0, ref_sparse, 4, 1, ws);

  // A backend without the fused kernel (the CPU's slot emptied for the test) gets the loss composed
  // of log_softmax and one-hot rows: the same values and gradients.
  namespace be = gd::backend;
  gradus_test::WithoutKernel<be::kernel::SparseXent, double> composed(gd::DeviceType::cpu);
  REQUIRE_FALSE(be::implements<be::kernel::SparseXent, double>(gd::cpu));
  check_loss("sparse_softmax_cross_entropy_with_logits, composed",
             [&](const V& x, R r, const Td& w) {
               return L::sparse_softmax_cross_entropy_with_logits(sparse, x, {.reduction = r, .weights = w});
             },
             x0, ref_sparse, 4, 1, ws);
}

TEST_CASE("losses: gradients with respect to labels (soft labels) and predictions together", "[losses]") {
  const Td logits = Td::from({2, -1, 3, 1, 0, -0.5}, {2, 3});
  const Td soft = Td::from({0.2, 0.3, 0.5, 0.6, 0.1, 0.3}, {2, 3});
  CHECK(gradient_error2([](const V& y, const V& x) { return L::softmax_cross_entropy_with_logits(y, x, {.label_smoothing = 0.1}); },
                        soft, logits) < 1e-7);
  CHECK(gradient_error2([](const V& y, const V& x) {
          return L::sigmoid_cross_entropy_with_logits(y, x, {.reduction = R::none, .label_smoothing = 0.3});
        },
                        soft, logits) < 1e-7);
  CHECK(gradient_error2([](const V& y, const V& p) { return L::mean_squared_error(y, p, {.reduction = R::sum}); }, soft,
                        logits) < 1e-7);
  // d/dlabels of softmax cross-entropy is -(1 - s) log_softmax(x)
  V y(soft.clone()), x(logits.clone());
  const auto g = gd::gradients(L::softmax_cross_entropy_with_logits(y, x, {.reduction = R::sum, .label_smoothing = 0.1}), {y, x});
  const double lse0 = std::log(std::exp(2) + std::exp(-1) + std::exp(3));
  CHECK(g[0](0, 2) == Approx(-0.9 * (3 - lse0)).epsilon(1e-12));
  CHECK(g[1](0, 2) == Approx(std::exp(3 - lse0) - (0.5 * 0.9 + 0.1 / 3)).epsilon(1e-12));  // softmax - y'
}

TEST_CASE("losses: predictions and logits may be expressions; the loss fuses into one node", "[losses]") {
  const Td z0 = Td::from({0.4, -0.9, 1.3, 0.2, -0.1, 0.7}, {2, 3});
  const Td y = Td::from({0.6, 0.2, 0.9, 0.5, 0.3, 0.6}, {2, 3});
  CHECK(gd::compute_gradient_error([&](const V& z) { return L::mean_squared_error(y, gd::sigmoid(z)); }, z0,
                                   {.delta = 1e-6}) < 1e-8);
  CHECK(gd::compute_gradient_error([&](const V& z) { return L::softmax_cross_entropy_with_logits(y, z * 2.0); }, z0,
                                   {.delta = 1e-6}) < 1e-7);
  V z(z0.clone());
  const V loss = L::mean_squared_error(y, gd::sigmoid(z));
  double want = 0;
  for (int64_t i = 0; i < 6; ++i) want += std::pow(sigmoid(z0.data()[i]) - y.data()[i], 2) / 6;
  CHECK(loss.item() == Approx(want).epsilon(1e-14));
  // one tape node (the fused sum) whose only input is the leaf z: sigmoid, difference, square,
  // weighting and reduction run in one pass
  std::vector<gd::detail::NodeBase*> inputs;
  loss.node()->inputs(inputs);
  REQUIRE(inputs.size() == 1);
  CHECK(inputs[0] == z.node());
}

TEST_CASE("losses: reductions and weights by hand", "[losses]") {
  // losses (p - 0)^2 = [[1, 4], [9, 16]]
  const Td y = Td::zeros({2, 2});
  V p(Td::from({1, 2, 3, 4}, {2, 2}));
  auto mse = [&](R r, L::Weights<double> w) { return L::mean_squared_error(y, p, {.reduction = r, .weights = w}).value(); };
  CHECK(mse(R::sum_by_nonzero_weights, 1).item() == 7.5);  // the default: a plain mean
  CHECK(L::mean_squared_error(y, p).item() == 7.5);
  // a number as weight
  CHECK(mse(R::none, 2.0)(1, 1) == 32);
  CHECK(mse(R::sum, 2.0).item() == 60);
  CHECK(mse(R::mean, 2.0).item() == 7.5);                     // 60 / (2 * 4)
  CHECK(mse(R::sum_by_nonzero_weights, 2.0).item() == 15);    // 60 / 4
  // per-example weights [2, 1]: weighted [[2, 8], [0, 0]]
  const Td per = Td::from({2.0, 0.0}, {2, 1});
  CHECK(mse(R::sum, per).item() == 10);
  CHECK(mse(R::mean, per).item() == 2.5);                     // 10 / (2 + 2 + 0 + 0)
  CHECK(mse(R::sum_by_nonzero_weights, per).item() == 5);     // 10 / 2 non-zero
  // full weights: weighted [[1, 0], [4.5, 32]]
  const Td full = Td::from({1, 0, 0.5, 2}, {2, 2});
  CHECK(mse(R::sum, full).item() == 37.5);
  CHECK(mse(R::mean, full).item() == Approx(37.5 / 3.5).epsilon(1e-15));
  CHECK(mse(R::sum_by_nonzero_weights, full).item() == 12.5);
  // all weights zero: 0 as TF (div_no_nan), with a zero gradient
  for (R r : {R::mean, R::sum_by_nonzero_weights}) {
    CHECK(mse(r, 0).item() == 0);
    CHECK(mse(r, Td::zeros({2, 1})).item() == 0);
  }
  const auto g = gd::gradients(L::mean_squared_error(y, p, {.weights = Td::zeros({2, 2})}), {p});
  CHECK(g[0](1, 1) == 0);
  // default gradient: 2 (p - y) / n
  CHECK(gd::gradients(L::mean_squared_error(y, p), {p})[0](1, 0) == 1.5);
  // compute_weighted_loss on given per-example losses
  V per_example(Td::from({1, 2, 3}));
  CHECK(L::compute_weighted_loss(per_example, {.reduction = R::mean, .weights = Td::from({1.0, 1.0, 2.0})}).item() == 2.25);
  CHECK(L::compute_weighted_loss(per_example).item() == 2);
  // l2_loss: sum(x^2) / 2, gradient x; an empty tensor gives 0
  V x(Td::from({1, -2, 3}));
  CHECK(L::l2_loss(x).item() == 7);
  CHECK(L::l2_loss(x).rank() == 0);
  CHECK(gd::compute_gradient_error([](const V& v) { return L::l2_loss(v); }, x.value(), {.delta = 1e-6}) < 1e-8);
  CHECK(L::l2_loss(V(Td::zeros({0, 3}))).item() == 0);
}

TEST_CASE("losses: finite values and gradients for logits of +-1e4", "[losses]") {
  // exact up to the denormal that the vectorised exp returns for exp(-1e4) (~5.6e-309)
  auto near = [](double want) { return Approx(want).epsilon(1e-15).margin(1e-300); };
  V x(Td::from({1e4, -1e4, 1e4, -1e4}));
  const Td z = Td::from({1, 0, 0, 1});
  const V sig = L::sigmoid_cross_entropy_with_logits(z, x, {.reduction = R::none});
  CHECK(sig.value()(0) == near(0));
  CHECK(sig.value()(1) == near(0));
  CHECK(sig.value()(2) == near(1e4));
  CHECK(sig.value()(3) == near(1e4));
  auto g = gd::gradients(L::sigmoid_cross_entropy_with_logits(z, x, {.reduction = R::sum}), {x});  // sigmoid(x) - z
  CHECK(g[0](0) == near(0));
  CHECK(g[0](2) == near(1));
  CHECK(g[0](3) == near(-1));

  V logits(Td::from({1e4, -1e4, 0, -1e4, 1e4, 0}, {2, 3}));
  const Td onehot = Td::from({1, 0, 0, 1, 0, 0}, {2, 3});
  const V soft = L::softmax_cross_entropy_with_logits(onehot, logits, {.reduction = R::none});
  const V sparse = L::sparse_softmax_cross_entropy_with_logits(gd::Tensor<int64_t>::from({0, 0}), logits,
                                                                {.reduction = R::none});
  for (const V* v : {&soft, &sparse}) {
    CHECK(v->value()(0) == near(0));
    CHECK(v->value()(1) == near(2e4));
  }
  for (const auto& gl : {gd::gradients(L::softmax_cross_entropy_with_logits(onehot, logits, {.reduction = R::sum}), {logits}),
                         gd::gradients(L::sparse_softmax_cross_entropy_with_logits(gd::Tensor<int64_t>::from({0, 0}), logits,
                                                                                   {.reduction = R::sum}),
                                       {logits})}) {
    const Td want = Td::from({0, 0, 0, -1, 1, 0}, {2, 3});  // softmax - onehot
    for (int64_t i = 0; i < 6; ++i) CHECK(gl[0].data()[i] == near(want.data()[i]));
  }

  V d(Td::from({1e4, -1e4}));
  const V lc = L::log_cosh(Td::zeros({2}), d, {.reduction = R::none});
  CHECK(lc.value()(0) == near(1e4 - std::log(2.0)));
  CHECK(lc.value()(1) == near(1e4 - std::log(2.0)));
  const auto gc = gd::gradients(L::log_cosh(Td::zeros({2}), d, {.reduction = R::sum}), {d});  // tanh
  CHECK(gc[0](0) == near(1));
  CHECK(gc[0](1) == near(-1));
}

TEST_CASE("losses: gradients at the kinks follow TensorFlow", "[losses]") {
  // sigmoid cross-entropy at x = 0: sigmoid(0) - z
  V x(Td::from({0.0, 0.0}));
  const auto g = gd::gradients(L::sigmoid_cross_entropy_with_logits(Td::from({1.0, 0.25}), x, {.reduction = R::sum}), {x});
  CHECK(g[0](0) == -0.5);
  CHECK(g[0](1) == 0.25);
  // huber at |e| = delta: delta * sign(e); at e = 0: 0
  V p(Td::from({1.0, -1.0, 0.0}));
  const auto gh = gd::gradients(L::huber_loss(Td::zeros({3}), p, {.reduction = R::sum, .delta = 1.0}), {p});
  CHECK(gh[0](0) == 1);
  CHECK(gh[0](1) == -1);
  CHECK(gh[0](2) == 0);
}

TEST_CASE("losses: mistakes throw errors that name the loss and what it got", "[losses]") {
  const Td a = Td::zeros({2, 3});
  V b(Td::zeros({3, 2}));
  V logits(Td::zeros({2, 3}));
  auto shape_msg = [](const std::function<void()>& f) { return message_of<gd::shape_error>(f); };
  auto value_msg = [](const std::function<void()>& f) { return message_of<gd::value_error>(f); };

  std::string m = shape_msg([&] { L::mean_squared_error(a, b); });
  CHECK_THAT(m, Catch::Contains("mean_squared_error") && Catch::Contains("[2,3]") && Catch::Contains("[3,2]"));
  m = shape_msg([&] { L::softmax_cross_entropy_with_logits(a, b); });
  CHECK_THAT(m, Catch::Contains("softmax_cross_entropy_with_logits") && Catch::Contains("[2,3]") && Catch::Contains("[3,2]"));
  m = shape_msg([&] { L::hinge_loss(a, b); });
  CHECK_THAT(m, Catch::Contains("hinge_loss") && Catch::Contains("[3,2]"));
  // weights follow TF's rule: a scalar or the losses' rank with dimensions 1 or equal
  m = shape_msg([&] { L::mean_squared_error(a, logits, {.weights = Td::ones({3})}); });
  CHECK_THAT(m, Catch::Contains("mean_squared_error") && Catch::Contains("weights shape [3]") && Catch::Contains("[2,3]"));
  m = shape_msg([&] { L::sparse_softmax_cross_entropy_with_logits(gd::Tensor<int64_t>::from({0, 1}), logits, {.weights = Td::ones({3})}); });
  CHECK_THAT(m, Catch::Contains("weights shape [3]") && Catch::Contains("losses shape [2]"));

  m = value_msg([&] { L::sparse_softmax_cross_entropy_with_logits(gd::Tensor<int64_t>::from({0, 3}), logits); });
  CHECK_THAT(m, Catch::Contains("sparse_softmax_cross_entropy_with_logits") && Catch::Contains("label 3") &&
                    Catch::Contains("position 1") && Catch::Contains("[0, 3)"));
  m = value_msg([&] { L::sparse_softmax_cross_entropy_with_logits(gd::Tensor<int64_t>::from({-1, 0}), logits); });
  CHECK_THAT(m, Catch::Contains("label -1") && Catch::Contains("position 0"));
  m = shape_msg([&] { L::sparse_softmax_cross_entropy_with_logits(gd::Tensor<int64_t>::from({0, 1, 2}), logits); });
  CHECK_THAT(m, Catch::Contains("labels shape [3]") && Catch::Contains("[2,3]"));

  m = value_msg([&] { L::mean_squared_error(Td::zeros({0, 3}), V(Td::zeros({0, 3}))); });
  CHECK_THAT(m, Catch::Contains("mean_squared_error") && Catch::Contains("empty batch") && Catch::Contains("[0,3]"));
  m = value_msg([&] { L::sparse_softmax_cross_entropy_with_logits(gd::Tensor<int64_t>::zeros({0}), V(Td::zeros({0, 3}))); });
  CHECK_THAT(m, Catch::Contains("empty batch"));
  m = value_msg([&] { L::softmax_cross_entropy_with_logits(Td::scalar(1.0), V(Td::scalar(1.0))); });
  CHECK_THAT(m, Catch::Contains("rank >= 1"));

  m = value_msg([&] { L::huber_loss(a, logits, {.delta = 0}); });
  CHECK_THAT(m, Catch::Contains("huber_loss") && Catch::Contains("delta"));
  m = value_msg([&] { L::sigmoid_cross_entropy_with_logits(a, logits, {.label_smoothing = 1.5}); });
  CHECK_THAT(m, Catch::Contains("label_smoothing") && Catch::Contains("1.5"));
  m = value_msg([&] { L::log_loss(a, logits, {.epsilon = -1}); });
  CHECK_THAT(m, Catch::Contains("log_loss") && Catch::Contains("epsilon"));
}
