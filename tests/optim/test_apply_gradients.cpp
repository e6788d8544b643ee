// Optimizer::apply_gradients: gradients computed elsewhere give the same update as step() on the
// same gradients, and the SGD update matches a plain double loop; bad gradients are refused.
#include <catch2/catch.hpp>

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

namespace {

// loss = Σ c·(w - t)² + Σ (b - 1)⁴ over w [2,3] and b [2].
struct Problem {
  V w{Td::from(Vec{0.0, 0.5, -1.0, 1.0, 2.0, -0.3}, {2, 3})};
  V b{Td::from(Vec{0.7, 1.2})};
  Td c = Td::from(Vec{1.0, 0.5, 2.0, 3.0, 0.25, 1.5}, {2, 3});
  Td t = Td::from(Vec{1.0, -2.0, 0.5, 3.0, -1.0, 0.0}, {2, 3});
  std::vector<V> params() const { return {w, b}; }
  V loss() const { return gd::sum(c * gd::square(w - t)) + gd::sum(gd::square(gd::square(b - 1.0))); }
  V loss_w() const { return gd::sum(c * gd::square(w - t)); }  // depends on w alone
};

bool same_bits(const Td& a, const Td& b) {
  return a.shape() == b.shape() && std::memcmp(a.data(), b.data(), size_t(a.size()) * sizeof(double)) == 0;
}

using Make = std::function<OptPtr(std::vector<V>)>;

}  // namespace

TEST_CASE("apply_gradients: a vector of gradients updates as step() does", "[optim][apply_gradients]") {
  const std::vector<std::pair<const char*, Make>> kinds = {
      {"SGD", [](std::vector<V> p) { return OptPtr(new opt::SGD<double>(std::move(p), {.lr = 0.1, .momentum = 0.9})); }},
      {"Adam", [](std::vector<V> p) { return OptPtr(new opt::Adam<double>(std::move(p), {.lr = 0.05})); }},
      {"RMSProp", [](std::vector<V> p) { return OptPtr(new opt::RMSProp<double>(std::move(p), {.lr = 0.01})); }},
  };
  for (const auto& [name, make] : kinds) {
    INFO(name);
    Problem a, b;
    OptPtr by_step = make(a.params()), by_apply = make(b.params());
    for (int i = 0; i < 4; ++i) {
      by_step->minimize(a.loss());
      std::vector<Td> g = gd::gradients(b.loss(), b.params());
      by_apply->apply_gradients(g);
      CHECK_FALSE(b.w.grad_if_any());  // .grad() is neither read nor written
      CHECK(same_bits(a.w.value(), b.w.value()));
      CHECK(same_bits(a.b.value(), b.b.value()));
    }
    CHECK(by_apply->iterations() == 4);
    const auto sa = by_step->state_dict(), sb = by_apply->state_dict();
    REQUIRE(sa.size() == sb.size());
    for (size_t i = 0; i < sa.size(); ++i) CHECK(same_bits(sa[i].second, sb[i].second));
  }
}

TEST_CASE("apply_gradients: (parameter, gradient) pairs; a parameter not named is skipped", "[optim][apply_gradients]") {
  Problem a, b;
  opt::Adam<double> by_step(a.params(), {.lr = 0.05}), by_apply(b.params(), {.lr = 0.05});
  for (int i = 0; i < 3; ++i) {
    by_step.minimize(a.loss_w());  // b gets no gradient: step() skips it
    const std::vector<Td> g = gd::gradients(b.loss_w(), {b.w});
    by_apply.apply_gradients({{b.w, g[0]}});
  }
  CHECK(same_bits(a.w.value(), b.w.value()));
  CHECK(same_bits(b.b.value(), Td::from(Vec{0.7, 1.2})));
  CHECK(same_bits(a.b.value(), b.b.value()));
}

TEST_CASE("apply_gradients: SGD matches w - lr·g computed in a plain loop", "[optim][apply_gradients]") {
  Problem p;
  opt::SGD<double> sgd(p.params(), {.lr = 0.1});
  Vec w(p.w.value().begin(), p.w.value().end());
  const Vec c(p.c.begin(), p.c.end()), t(p.t.begin(), p.t.end());
  Vec b(p.b.value().begin(), p.b.value().end());
  for (int step = 0; step < 3; ++step) {
    Vec gw(6), gb(2);
    for (size_t i = 0; i < 6; ++i) gw[i] = 2 * c[i] * (w[i] - t[i]);
    for (size_t i = 0; i < 2; ++i) gb[i] = 4 * (b[i] - 1) * (b[i] - 1) * (b[i] - 1);
    sgd.apply_gradients({Td::from(gw, {2, 3}), Td::from(gb)});
    for (size_t i = 0; i < 6; ++i) w[i] -= 0.1 * gw[i];
    for (size_t i = 0; i < 2; ++i) b[i] -= 0.1 * gb[i];
  }
  for (size_t i = 0; i < 6; ++i) CHECK(p.w.value().data()[i] == Approx(w[i]).epsilon(1e-14));
  for (size_t i = 0; i < 2; ++i) CHECK(p.b.value().data()[i] == Approx(b[i]).epsilon(1e-14));
  // an undefined tensor skips its parameter
  const Vec before_b(p.b.value().begin(), p.b.value().end());
  sgd.apply_gradients({Td::ones({2, 3}), Td()});
  CHECK(Vec(p.b.value().begin(), p.b.value().end()) == before_b);
  CHECK(p.w.value().data()[0] == Approx(w[0] - 0.1).epsilon(1e-14));
}

TEST_CASE("apply_gradients: bad gradients are refused and change nothing", "[optim][apply_gradients][errors]") {
  Problem p;
  opt::Adam<double> adam(p.params(), {.lr = 0.05});
  const Td w0 = p.w.value().clone();
  CHECK_THROWS_AS(adam.apply_gradients({Td::ones({2, 3})}), gd::shape_error);
  CHECK_THROWS_WITH(adam.apply_gradients({Td::ones({2, 3})}),
                    Catch::Contains("Adam: apply_gradients: expected 2 gradients"));
  CHECK_THROWS_WITH(adam.apply_gradients({Td::ones({2, 3}), Td::ones({3})}),
                    Catch::Contains("Adam: apply_gradients: the gradient of parameter 1 has shape [3] but the parameter "
                                    "has shape [2]"));
  V stranger(Td::ones({2}));
  CHECK_THROWS_WITH(adam.apply_gradients({{stranger, Td::ones({2})}}),
                    Catch::Contains("pair 0 names a Var of shape [2] that is not a parameter of this optimizer"));
  CHECK_THROWS_WITH(adam.apply_gradients({{p.b, Td::ones({2})}, {p.b, Td::ones({2})}}),
                    Catch::Contains("parameter 1 is given twice (pair 1)"));
  CHECK_THROWS_WITH(adam.apply_gradients({{p.w, Td()}}), Catch::Contains("the gradient of pair 0 is undefined"));
  CHECK_THROWS_AS(adam.apply_gradients({{p.w, Td::ones({3, 2})}}), gd::shape_error);
  CHECK(adam.iterations() == 0);
  CHECK(same_bits(p.w.value(), w0));
}
