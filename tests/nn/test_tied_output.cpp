// TiedOutput: logits = h · Eᵀ + b against a plain loop; only the bias is its parameter; the
// table's gradient equals the sum of the gradients of an untied model's two copies of it.
#include <catch2/catch.hpp>
#include <cmath>

#include <gradus/gradus.hpp>
#include <gradus/nn.hpp>
#include <gradus/nn/tied_output.hpp>
#include <gradus/testing/module_check.hpp>

#include "../support/short_names.hpp"

using Td = gd::Tensor<double>;
using Ti = gd::Tensor<int64_t>;
using V = gd::Var<double>;

namespace {

// ids -> embedding -> tanh -> tied output: the table is used twice.
struct TiedLM : nn::Module<double> {
  nn::Embedding<double> emb;
  nn::TiedOutput<double> out;
  TiedLM(gd::Rng& rng) : emb({.vocab = 6, .dim = 3, .initializer = gd::init::random_normal{.stddev = 1.0}}, rng), out(emb) {
    register_module("emb", emb);
    register_module("out", out);
    out.bias().value().copy_(Td::random_normal({6}, rng));
  }
  V forward(const Ti& ids) { return out(gd::tanh(emb(ids))); }
};

}  // namespace

TEST_CASE("TiedOutput: logits = h · Eᵀ + b against a plain loop", "[nn][tied]") {
  gd::Rng rng(31);
  nn::Embedding<double> emb({.vocab = 5, .dim = 3}, rng);
  nn::TiedOutput<double> out(emb);
  out.bias().value().copy_(Td::random_normal({5}, rng));
  const Td h = Td::random_normal({2, 4, 3}, rng);
  const V logits = out(h);
  REQUIRE(logits.shape() == gd::Shape{2, 4, 5});
  const Td e = emb.embeddings().value(), b = out.bias().value();
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t t = 0; t < 4; ++t)
      for (int64_t v = 0; v < 5; ++v) {
        double want = b(v);
        for (int64_t d = 0; d < 3; ++d) want += h(n, t, d) * e(v, d);
        CHECK(logits.value()(n, t, v) == Approx(want).margin(1e-13));
      }
  // only the bias is registered; the table stays the embedding's
  const auto params = out.named_parameters();
  REQUIRE(params.size() == 1);
  CHECK(params[0].first == "bias");
  CHECK(out.embeddings().node() == emb.embeddings().node());
  nn::TiedOutput<double> no_bias(emb, {.use_bias = false});
  CHECK(no_bias.parameters().empty());
  CHECK(no_bias(h).value()(1, 2, 3) == Approx(logits.value()(1, 2, 3) - b(3)).margin(1e-13));
  CHECK_THROWS_WITH(out(Td::zeros({2, 4})), Catch::Contains("TiedOutput") && Catch::Contains("[2,4]"));
}

TEST_CASE("TiedOutput: the table's gradient is the sum over both uses; one parameter in the model",
          "[nn][tied][gradients]") {
  gd::Rng rng(32);
  TiedLM lm(rng);
  CHECK(lm.parameters().size() == 2);  // emb.embeddings and out.bias: the table once
  CHECK(lm.parameter_count() == 6 * 3 + 6);
  const Ti ids = Ti::from({0, 3, 5, 3, 1, 2}, {2, 3});
  const Td w = Td::random_normal({2, 3, 6}, rng);

  const V table = lm.emb.embeddings();
  const std::vector<Td> tied = gd::gradients(gd::sum(lm.forward(ids) * w), {table});

  // the untied model: one copy of the table for the lookup, another for the output
  const V e1(table.value().clone()), e2(table.value().clone());
  const V untied_logits = gd::matmul(gd::tanh(gd::gather(e1, ids, 0)), e2, {.transpose_b = true}) + lm.out.bias().detach();
  const std::vector<Td> g = gd::gradients(gd::sum(untied_logits * w), {e1, e2});
  for (int64_t i = 0; i < table.size(); ++i) {
    CHECK(tied[0].data()[i] == Approx(g[0].data()[i] + g[1].data()[i]).margin(1e-13));
    CHECK(g[1].data()[i] != 0.0);  // both uses contribute
  }

  // and numerically, for the table and the bias
  const nn::GradientReport report = nn::check_module_gradient(lm, ids, {.delta = 1e-6, .tolerance = 1e-7});
  INFO(report);
  CHECK(report.ok());
}
