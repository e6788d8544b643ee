// Optimizers against trajectories computed here in plain double loops, each update rule written
// out from its published formula; state_dict round trips; option checks; steady-state allocation.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include <gradus/gradus.hpp>
#include <gradus/optim.hpp>

namespace gd = gradus;
namespace opt = gradus::optim;
using V = gd::Var<double>;
using Td = gd::Tensor<double>;
using Vec = std::vector<double>;
using OptPtr = std::unique_ptr<opt::Optimizer<double>>;
using Factory = std::function<OptPtr(std::vector<V>)>;

namespace {

// The problem: loss = Σ c·(w - target)² over two parameters, w [2,3] and b [2]; the reference
// sees them as one flat vector of 8 weights, with gradient g = 2·c·(w - target).
const Vec kW0{0.0, 0.5, -1.0, 1.0, 2.0, -0.3, 0.7, 1.2};
const Vec kC{1.0, 0.5, 2.0, 3.0, 0.25, 1.5, 4.0, 0.1};
const Vec kTarget{1.0, -2.0, 0.5, 3.0, -1.0, 0.0, 2.0, -0.5};

struct Problem {
  V w{Td::from(Vec(kW0.begin(), kW0.begin() + 6), {2, 3})};
  V b{Td::from(Vec(kW0.begin() + 6, kW0.end()))};
  Td cw = Td::from(Vec(kC.begin(), kC.begin() + 6), {2, 3}), cb = Td::from(Vec(kC.begin() + 6, kC.end()));
  Td tw = Td::from(Vec(kTarget.begin(), kTarget.begin() + 6), {2, 3}),
     tb = Td::from(Vec(kTarget.begin() + 6, kTarget.end()));

  std::vector<V> params() const { return {w, b}; }
  V loss() const { return gd::sum(cw * gd::square(w - tw)) + gd::sum(cb * gd::square(b - tb)); }
  Vec flat() const {
    Vec out(w.value().begin(), w.value().end());
    out.insert(out.end(), b.value().begin(), b.value().end());
    return out;
  }
};

// One step of a reference rule: updates the flat weights w from gradient g at step t (1-based).
using Rule = std::function<void(Vec& w, const Vec& g, int t)>;

// Runs `steps` optimizer steps (minimize) and the reference side by side, comparing every step.
void check_trajectory(const Factory& make, const Rule& rule, int steps = 8) {
  Problem p;
  OptPtr o = make(p.params());
  Vec w = kW0, g(w.size());
  for (int t = 1; t <= steps; ++t) {
    for (size_t i = 0; i < w.size(); ++i) g[i] = 2 * kC[i] * (w[i] - kTarget[i]);
    rule(w, g, t);
    o->minimize(p.loss());
    const Vec got = p.flat();
    for (size_t i = 0; i < w.size(); ++i) {
      INFO(o->name() << " step " << t << " weight " << i);
      CHECK(got[i] == Approx(w[i]).epsilon(1e-9).margin(1e-12));
    }
  }
  CHECK(o->iterations() == steps);
}

template <class O, class Options>
Factory factory(Options options) {
  return [options](std::vector<V> ps) -> OptPtr { return std::make_unique<O>(std::move(ps), options); };
}

}  // namespace

TEST_CASE("optim: SGD, with momentum and Nesterov momentum as TF's MomentumOptimizer", "[optim]") {
  const double lr = 0.05, mu = 0.9;
  check_trajectory(factory<opt::SGD<double>>(opt::SGDOptions{.lr = lr}), [&](Vec& w, const Vec& g, int) {
    for (size_t i = 0; i < w.size(); ++i) w[i] -= lr * g[i];
  });
  // Heavy ball: a <- μa + g, w <- w - lr·a.
  Vec a(8, 0.0);
  check_trajectory(factory<opt::SGD<double>>(opt::SGDOptions{.lr = lr, .momentum = mu}),
                   [&](Vec& w, const Vec& g, int) {
                     for (size_t i = 0; i < w.size(); ++i) {
                       a[i] = mu * a[i] + g[i];
                       w[i] -= lr * a[i];
                     }
                   });
  // Nesterov (Sutskever et al. 2013) in TF's reformulation: w <- w - lr·g - lr·μ·a with the new a.
  Vec an(8, 0.0);
  check_trajectory(factory<opt::SGD<double>>(opt::SGDOptions{.lr = lr, .momentum = mu, .nesterov = true}),
                   [&](Vec& w, const Vec& g, int) {
                     for (size_t i = 0; i < w.size(); ++i) {
                       an[i] = mu * an[i] + g[i];
                       w[i] -= lr * (g[i] + mu * an[i]);
                     }
                   });
}

namespace {
// Adam (Kingma & Ba 2015, Algorithm 1 with the efficient step of §2):
// α_t = α·√(1-β2^t)/(1-β1^t), θ <- θ - α_t·m/(√v + ε̂); AMSGrad (Reddi et al. 2018): v̂ = max(v̂, v);
// AdamW (Loshchilov & Hutter 2019, Algorithm 2, η_t = 1, λ = lr·wd): θ <- θ - λθ - α_t·m/(√v̂ + ε).
// The rule for n weights (the problem's 8 unless said).
Rule adam_rule(double lr, double b1, double b2, double eps, bool amsgrad, double wd, size_t n = 8) {
  auto m = std::make_shared<Vec>(n, 0.0), v = std::make_shared<Vec>(n, 0.0), vh = std::make_shared<Vec>(n, 0.0);
  return [=](Vec& w, const Vec& g, int t) {
    const double at = lr * std::sqrt(1 - std::pow(b2, t)) / (1 - std::pow(b1, t));
    for (size_t i = 0; i < w.size(); ++i) {
      (*m)[i] = b1 * (*m)[i] + (1 - b1) * g[i];
      (*v)[i] = b2 * (*v)[i] + (1 - b2) * g[i] * g[i];
      (*vh)[i] = std::max((*vh)[i], (*v)[i]);
      const double denom = std::sqrt(amsgrad ? (*vh)[i] : (*v)[i]) + eps;
      w[i] = w[i] - lr * wd * w[i] - at * (*m)[i] / denom;
    }
  };
}
}  // namespace

TEST_CASE("optim: Adam, AMSGrad and AdamW follow their papers", "[optim]") {
  check_trajectory(factory<opt::Adam<double>>(opt::AdamOptions{.lr = 0.1}), adam_rule(0.1, 0.9, 0.999, 1e-8, false, 0));
  check_trajectory(factory<opt::Adam<double>>(opt::AdamOptions{.lr = 0.05, .beta1 = 0.8, .beta2 = 0.99, .epsilon = 1e-3}),
                   adam_rule(0.05, 0.8, 0.99, 1e-3, false, 0));
  // Large β2 and a quickly shrinking gradient make v decrease, so the max matters.
  check_trajectory(factory<opt::AMSGrad<double>>(opt::AdamOptions{.lr = 0.2, .beta2 = 0.9}),
                   adam_rule(0.2, 0.9, 0.9, 1e-8, true, 0), 12);
  check_trajectory(factory<opt::Adam<double>>(opt::AdamOptions{.lr = 0.2, .beta2 = 0.9, .amsgrad = true}),
                   adam_rule(0.2, 0.9, 0.9, 1e-8, true, 0), 12);
  check_trajectory(factory<opt::AdamW<double>>(opt::AdamWOptions{.lr = 0.1, .weight_decay = 0.05}),
                   adam_rule(0.1, 0.9, 0.999, 1e-8, false, 0.05));
  check_trajectory(factory<opt::AdamW<double>>(opt::AdamWOptions{.lr = 0.1, .weight_decay = 0.05, .amsgrad = true}),
                   adam_rule(0.1, 0.9, 0.999, 1e-8, true, 0.05));
}

namespace {
// Adam on parameters of n weights each: loss = Σ c·(w - target)², against adam_rule's formulas in
// double for the same n weights, run side by side for `steps` steps.
template <class T>
void check_adam_sizes(int which, const std::vector<int64_t>& sizes, int steps, double tolerance) {
  gd::Rng rng(51);
  std::vector<gd::Var<T>> ws;
  std::vector<gd::Tensor<T>> cs, ts;
  Vec w, c, target;
  for (int64_t n : sizes) {
    ws.emplace_back(gd::Tensor<T>::random_uniform({n}, rng, -1, 1), true);
    cs.push_back(gd::Tensor<T>::random_uniform({n}, rng, 0.1, 2));
    ts.push_back(gd::Tensor<T>::random_uniform({n}, rng, -1, 1));
    w.insert(w.end(), ws.back().value().begin(), ws.back().value().end());
    c.insert(c.end(), cs.back().begin(), cs.back().end());
    target.insert(target.end(), ts.back().begin(), ts.back().end());
  }
  std::unique_ptr<opt::Optimizer<T>> o;
  double wd = 0;
  if (which == 0) o = std::make_unique<opt::Adam<T>>(ws, opt::AdamOptions{.lr = 0.05});
  if (which == 1) o = std::make_unique<opt::Adam<T>>(ws, opt::AdamOptions{.lr = 0.05, .beta2 = 0.9, .amsgrad = true});
  if (which == 2) o = std::make_unique<opt::AdamW<T>>(ws, opt::AdamWOptions{.lr = 0.05, .weight_decay = wd = 0.1});
  const Rule rule = adam_rule(0.05, 0.9, which == 1 ? 0.9 : 0.999, 1e-8, which == 1, wd, w.size());
  Vec g(w.size());
  for (int t = 1; t <= steps; ++t) {
    gd::Var<T> loss = gd::Var<T>::constant(gd::Tensor<T>::scalar(T(0)));
    for (size_t k = 0; k < ws.size(); ++k) loss = gd::to_var(loss + gd::sum(cs[k] * gd::square(ws[k] - ts[k])));
    o->minimize(loss);
    for (size_t i = 0; i < w.size(); ++i) g[i] = 2 * c[i] * (w[i] - target[i]);
    rule(w, g, t);
  }
  size_t i = 0, wrong = 0;
  for (const gd::Var<T>& p : ws)
    for (const T x : p.value()) {
      const double want = w[i++];
      wrong += std::abs(double(x) - want) > tolerance * (1 + std::abs(want));
    }
  CHECK(wrong == 0);
}
}  // namespace

TEST_CASE("optim: Adam, AMSGrad and AdamW over many weights (the CPU's one-pass update in pieces and threads)",
          "[optim]") {
  REQUIRE(gd::backend::implements<gd::backend::kernel::AdamUpdate, float>(gd::cpu));
  // one weight, a piece less one, pieces and a remainder, and a parameter the thread pool splits
  const std::vector<int64_t> sizes = {1, 1023, 3 * 1024 + 17, 300001};
  for (int which = 0; which < 3; ++which) {
    INFO((which == 0 ? "Adam" : which == 1 ? "AMSGrad" : "AdamW"));
    check_adam_sizes<double>(which, sizes, 6, 1e-12);
    check_adam_sizes<float>(which, sizes, 6, 2e-5);
  }
}

TEST_CASE("optim: the CPU's one-pass Adam update gives the bits of Adam's three expressions", "[optim]") {
  // Adam's defining expressions (as TF1 and Keras write the update) against the kernel on copies
  // of the same tensors: the same operations in the same order
  const auto check = []<class T>(T, int variant) {
    INFO((variant == 0 ? "Adam" : variant == 1 ? "AMSGrad" : "AdamW") << (sizeof(T) == 4 ? " float" : " double"));
    gd::Rng rng(61);
    const int64_t n = 3 * 1024 + 29;
    gd::Tensor<T> w = gd::Tensor<T>::random_uniform({n}, rng, -1, 1), g = gd::Tensor<T>::random_uniform({n}, rng, -1, 1);
    gd::Tensor<T> m = gd::Tensor<T>::random_uniform({n}, rng, -0.1, 0.1), v = gd::Tensor<T>::random_uniform({n}, rng, 0, 0.01);
    gd::Tensor<T> vhat = gd::Tensor<T>::random_uniform({n}, rng, 0, 0.01);
    gd::Tensor<T> w2 = w.clone(), m2 = m.clone(), v2 = v.clone(), vhat2 = vhat.clone();
    const T b1 = T(0.9), b2 = T(0.999), alpha = T(0.0123), eps = T(1e-8), decay = variant == 2 ? T(1e-4) : T(0);
    m.assign(b1 * m + T(1 - 0.9) * g);
    v.assign(b2 * v + T(1 - 0.999) * gd::square(g));
    gd::Tensor<T>* denom = &v;
    if (variant == 1) {
      vhat.assign(gd::maximum(vhat, v));
      denom = &vhat;
    }
    if (decay == T(0))
      w.assign(w - alpha * m / (gd::sqrt(*denom) + eps));
    else
      w.assign(w - decay * w - alpha * m / (gd::sqrt(*denom) + eps));
    const gd::backend::AdamStep<T> step{b1, T(1 - 0.9), b2, T(1 - 0.999), alpha, eps, decay};
    const gd::backend::AdamTensors<T> p{w2.data(), g.data(), m2.data(), v2.data(), variant == 1 ? vhat2.data() : nullptr, n};
    gd::backend::run<gd::backend::kernel::AdamUpdate, T>(gd::cpu, step, &p, 1);
    const auto same = [&](const gd::Tensor<T>& a, const gd::Tensor<T>& b) {
      return std::memcmp(a.data(), b.data(), size_t(n) * sizeof(T)) == 0;
    };
    CHECK(same(m, m2));
    CHECK(same(v, v2));
    CHECK(same(vhat, vhat2));
    CHECK(same(w, w2));
  };
  for (int variant = 0; variant < 3; ++variant) {
    check(0.f, variant);
    check(0.0, variant);
  }
}

TEST_CASE("optim: Adam's first step moves every weight by lr, whatever the gradient", "[optim]") {
  gd::Rng rng(7);
  gd::Var<float> w(gd::Tensor<float>::ones({3, 3}));
  gd::Tensor<float> x = gd::Tensor<float>::random_uniform({3, 3}, rng, 0.5, 20);
  for (int64_t i = 0; i < x.size(); i += 2) x.data()[i] = -x.data()[i];
  gd::optim::Adam adam(std::vector{w}, {.lr = 0.1});  // CTAD: Adam<float>
  adam.minimize(gd::sum(w * x));
  for (int64_t i = 0; i < 9; ++i) CHECK(w.value().data()[i] == Approx(i % 2 ? 0.9f : 1.1f).margin(1e-6));
  CHECK(adam.iterations() == 1);
}

TEST_CASE("optim: RMSProp (Tieleman & Hinton), centered and with momentum, as Keras", "[optim]") {
  const double lr = 0.01, rho = 0.9, eps = 1e-7;
  for (const bool centered : {false, true})
    for (const double momentum : {0.0, 0.5}) {
      // ms <- ρ·ms + (1-ρ)·g²; mg <- ρ·mg + (1-ρ)·g; Δ = lr·g/√(ms - mg² + ε); mom <- μ·mom + Δ; w -= mom.
      Vec ms(8, 0.0), mg(8, 0.0), mom(8, 0.0);
      check_trajectory(
          factory<opt::RMSProp<double>>(opt::RMSPropOptions{.lr = lr, .momentum = momentum, .centered = centered}),
          [&](Vec& w, const Vec& g, int) {
            for (size_t i = 0; i < w.size(); ++i) {
              ms[i] = rho * ms[i] + (1 - rho) * g[i] * g[i];
              mg[i] = rho * mg[i] + (1 - rho) * g[i];
              const double d = lr * g[i] / std::sqrt(ms[i] - (centered ? mg[i] * mg[i] : 0.0) + eps);
              mom[i] = momentum * mom[i] + d;
              w[i] -= momentum > 0 ? mom[i] : d;
            }
          });
    }
}

TEST_CASE("optim: Adagrad (Duchi et al. 2011) with TF's initial accumulator 0.1", "[optim]") {
  const double lr = 0.3, eps = 1e-7;
  Vec acc(8, 0.1);
  check_trajectory(factory<opt::Adagrad<double>>(opt::AdagradOptions{.lr = lr}), [&](Vec& w, const Vec& g, int) {
    for (size_t i = 0; i < w.size(); ++i) {
      acc[i] += g[i] * g[i];
      w[i] -= lr * g[i] / std::sqrt(acc[i] + eps);
    }
  });
}

TEST_CASE("optim: Adadelta (Zeiler 2012, Algorithm 1) with lr 1 as Keras", "[optim]") {
  const double rho = 0.95, eps = 1e-7;
  for (const double lr : {1.0, 0.5}) {
    Vec eg(8, 0.0), ex(8, 0.0);
    check_trajectory(factory<opt::Adadelta<double>>(opt::AdadeltaOptions{.lr = lr}), [&](Vec& w, const Vec& g, int) {
      for (size_t i = 0; i < w.size(); ++i) {
        eg[i] = rho * eg[i] + (1 - rho) * g[i] * g[i];
        const double dx = std::sqrt(ex[i] + eps) / std::sqrt(eg[i] + eps) * g[i];
        ex[i] = rho * ex[i] + (1 - rho) * dx * dx;
        w[i] -= lr * dx;
      }
    });
  }
}

TEST_CASE("optim: Adamax (Kingma & Ba 2015, Algorithm 2)", "[optim]") {
  const double lr = 0.02, b1 = 0.9, b2 = 0.999, eps = 1e-7;
  Vec m(8, 0.0), u(8, 0.0);
  check_trajectory(factory<opt::Adamax<double>>(opt::AdamaxOptions{.lr = lr}), [&](Vec& w, const Vec& g, int t) {
    for (size_t i = 0; i < w.size(); ++i) {
      m[i] = b1 * m[i] + (1 - b1) * g[i];
      u[i] = std::max(b2 * u[i], std::abs(g[i]));
      w[i] -= lr / (1 - std::pow(b1, t)) * m[i] / (u[i] + eps);
    }
  });
}

TEST_CASE("optim: Nadam (Dozat 2016) with Keras' momentum schedule", "[optim]") {
  const double lr = 0.05, b1 = 0.9, b2 = 0.999, eps = 1e-7;
  // μ_t = β1(1 - ½·0.96^t); m̂ = μ_{t+1}·m/(1 - Π_{i≤t+1}μ_i) + (1-μ_t)·g/(1 - Π_{i≤t}μ_i); v̂ = v/(1-β2^t).
  auto mu = [&](int t) { return b1 * (1 - 0.5 * std::pow(0.96, t)); };
  Vec m(8, 0.0), v(8, 0.0);
  check_trajectory(
      factory<opt::Nadam<double>>(opt::NadamOptions{.lr = lr}),
      [&](Vec& w, const Vec& g, int t) {
        double prod_t = 1;
        for (int i = 1; i <= t; ++i) prod_t *= mu(i);
        const double prod_next = prod_t * mu(t + 1);
        for (size_t i = 0; i < w.size(); ++i) {
          m[i] = b1 * m[i] + (1 - b1) * g[i];
          v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
          const double mhat = mu(t + 1) * m[i] / (1 - prod_next) + (1 - mu(t)) * g[i] / (1 - prod_t);
          const double vhat = v[i] / (1 - std::pow(b2, t));
          w[i] -= lr * mhat / (std::sqrt(vhat) + eps);
        }
      },
      10);
}

namespace {
std::vector<std::pair<const char*, Factory>> every_optimizer() {
  return {
      {"SGD", factory<opt::SGD<double>>(opt::SGDOptions{.lr = 0.05})},
      {"SGD momentum", factory<opt::SGD<double>>(opt::SGDOptions{.lr = 0.05, .momentum = 0.9})},
      {"SGD nesterov", factory<opt::SGD<double>>(opt::SGDOptions{.lr = 0.05, .momentum = 0.9, .nesterov = true})},
      {"Adam", factory<opt::Adam<double>>(opt::AdamOptions{.lr = 0.1})},
      {"AMSGrad", factory<opt::AMSGrad<double>>(opt::AdamOptions{.lr = 0.1, .beta2 = 0.9})},
      {"AdamW", factory<opt::AdamW<double>>(opt::AdamWOptions{.lr = 0.1, .weight_decay = 0.01})},
      {"RMSProp", factory<opt::RMSProp<double>>(opt::RMSPropOptions{.lr = 0.01, .momentum = 0.5, .centered = true})},
      {"Adagrad", factory<opt::Adagrad<double>>(opt::AdagradOptions{.lr = 0.3})},
      {"Adadelta", factory<opt::Adadelta<double>>(opt::AdadeltaOptions{})},
      {"Adamax", factory<opt::Adamax<double>>(opt::AdamaxOptions{.lr = 0.02})},
      {"Nadam", factory<opt::Nadam<double>>(opt::NadamOptions{.lr = 0.05})},
  };
}
}  // namespace

TEST_CASE("optim: state_dict then load_state_dict continues bit-identically", "[optim]") {
  for (const auto& [name, make] : every_optimizer()) {
    INFO(name);
    Problem a;
    OptPtr oa = make(a.params());
    for (int s = 0; s < 3; ++s) oa->minimize(a.loss());
    const opt::StateDict<double> saved = oa->state_dict();
    const Td saved_w = a.w.value().clone(), saved_b = a.b.value().clone();
    for (int s = 0; s < 4; ++s) oa->minimize(a.loss());

    Problem b;
    b.w.value().copy_(saved_w);
    b.b.value().copy_(saved_b);
    OptPtr ob = make(b.params());
    ob->load_state_dict(saved);
    CHECK(ob->iterations() == 3);
    for (int s = 0; s < 4; ++s) ob->minimize(b.loss());
    CHECK(ob->iterations() == 7);
    CHECK(a.flat() == b.flat());  // exact
    const auto sa = oa->state_dict(), sb = ob->state_dict();
    REQUIRE(sa.size() == sb.size());
    for (size_t i = 0; i < sa.size(); ++i) {
      CHECK(sa[i].first == sb[i].first);
      CHECK(std::vector<double>(sa[i].second.begin(), sa[i].second.end()) ==
            std::vector<double>(sb[i].second.begin(), sb[i].second.end()));
    }
  }
}

TEST_CASE("optim: state_dict names its entries; load_state_dict rejects a mismatched state", "[optim]") {
  Problem p;
  opt::Adam<double> adam(p.params(), {.lr = 0.1, .amsgrad = true});
  adam.minimize(p.loss());
  const auto sd = adam.state_dict();
  std::vector<std::string> names;
  for (const auto& e : sd) names.push_back(e.first);
  CHECK(names == std::vector<std::string>{"step", "param0/m", "param0/v", "param0/vhat", "param1/m", "param1/v",
                                          "param1/vhat"});
  CHECK(sd[0].second.item() == 1.0);
  CHECK(sd[1].second.shape() == gd::Shape{2, 3});

  opt::Adam<double> fresh(Problem().params(), {.lr = 0.1, .amsgrad = true});
  auto missing = sd;
  missing.pop_back();
  CHECK_THROWS_AS(fresh.load_state_dict(missing), gd::value_error);
  auto renamed = sd;
  renamed[2].first = "param0/w";
  CHECK_THROWS_WITH(fresh.load_state_dict(renamed), Catch::Contains("missing entry 'param0/v'"));
  auto reshaped = sd;
  reshaped[4].second = Td::zeros({3});
  CHECK_THROWS_AS(fresh.load_state_dict(reshaped), gd::shape_error);
  auto bad_step = sd;
  bad_step[0].second = Td::scalar(1.5);
  CHECK_THROWS_AS(fresh.load_state_dict(bad_step), gd::value_error);
  CHECK(fresh.iterations() == 0);  // nothing was restored by the failed loads
  opt::Adam<double> plain(Problem().params(), {.lr = 0.1});
  CHECK_THROWS_AS(plain.load_state_dict(sd), gd::value_error);  // vhat entries it does not have
}

TEST_CASE("optim: minimize = zero_grad, backward, step; set_lr; parameters without a gradient are skipped",
          "[optim]") {
  Problem p;
  opt::SGD<double> sgd(p.params(), {.lr = 0.1});
  CHECK(sgd.lr() == 0.1);
  p.w.grad().fill_(100.0);  // stale: minimize clears it before backward
  sgd.minimize(p.loss());
  CHECK(p.w.value()(0, 0) == Approx(0.0 - 0.1 * 2 * 1.0 * (0.0 - 1.0)));
  sgd.set_lr(0.0);
  sgd.minimize(p.loss());
  CHECK(p.w.value()(0, 0) == Approx(0.2));
  CHECK(sgd.iterations() == 2);
  CHECK_THROWS_AS(sgd.set_lr(-1), gd::value_error);

  // Only w gets a gradient: b and its momentum stay untouched.
  Problem q;
  opt::SGD<double> mom(q.params(), {.lr = 0.1, .momentum = 0.9});
  mom.zero_grad();
  gd::backward(gd::sum(q.w));
  mom.step();
  CHECK(q.w.value()(0, 0) == Approx(-0.1));
  CHECK(q.b.value()(0) == 0.7);
  CHECK(mom.state_dict()[2].second(0) == 0.0);  // param1/momentum
}

TEST_CASE("optim: bad options and parameter lists throw value_error", "[optim]") {
  const auto ps = Problem().params();
  CHECK_THROWS_WITH(opt::Adam<double>(ps, {.lr = -1}), Catch::Contains("Adam: lr must be >= 0, got -1"));
  CHECK_THROWS_AS(opt::Adam<double>(ps, {.beta1 = 1.0}), gd::value_error);
  CHECK_THROWS_AS(opt::Adam<double>(ps, {.beta2 = -0.1}), gd::value_error);
  CHECK_THROWS_AS(opt::Adam<double>(ps, {.epsilon = -1e-8}), gd::value_error);
  CHECK_THROWS_AS(opt::AMSGrad<double>(ps, {.lr = std::nan("")}), gd::value_error);
  CHECK_THROWS_AS(opt::AdamW<double>(ps, {.weight_decay = -0.1}), gd::value_error);
  CHECK_THROWS_AS(opt::SGD<double>(ps, {.lr = -0.1}), gd::value_error);
  CHECK_THROWS_AS(opt::SGD<double>(ps, {.momentum = -0.9}), gd::value_error);
  CHECK_THROWS_AS(opt::RMSProp<double>(ps, {.rho = 1.5}), gd::value_error);
  CHECK_THROWS_AS(opt::RMSProp<double>(ps, {.momentum = -1}), gd::value_error);
  CHECK_THROWS_AS(opt::Adagrad<double>(ps, {.initial_accumulator_value = -0.1}), gd::value_error);
  CHECK_THROWS_AS(opt::Adagrad<double>(ps, {.initial_accumulator_value = 0, .epsilon = 0}), gd::value_error);
  CHECK_THROWS_AS(opt::Adadelta<double>(ps, {.epsilon = 0}), gd::value_error);
  CHECK_THROWS_AS(opt::Adadelta<double>(ps, {.rho = 1}), gd::value_error);
  CHECK_THROWS_AS(opt::Adamax<double>(ps, {.beta1 = 2}), gd::value_error);
  CHECK_THROWS_AS(opt::Nadam<double>(ps, {.lr = -3}), gd::value_error);

  V w(Td::ones({2}));
  CHECK_THROWS_WITH(opt::SGD<double>({w, w}), Catch::Contains("parameter 1 is the same Var as parameter 0"));
  CHECK_THROWS_AS(opt::SGD<double>({w, V::constant(Td::ones({2}))}), gd::value_error);
  CHECK_THROWS_AS(opt::SGD<double>({w, V()}), gd::value_error);
}

TEST_CASE("optim: a steady-state step allocates no tensor memory", "[optim][memory]") {
  for (const auto& [name, make] : every_optimizer()) {
    INFO(name);
    Problem p;
    OptPtr o = make(p.params());
    p.w.grad().fill_(0.5);
    p.b.grad().fill_(-0.25);
    o->step();
    const gd::MemoryStats before = gd::memory_stats();
    for (int s = 0; s < 5; ++s) o->step();
    const gd::MemoryStats after = gd::memory_stats();
    CHECK(after.system_allocations + after.cache_hits == before.system_allocations + before.cache_hits);
  }
}
