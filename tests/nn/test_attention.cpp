// Attention: scaled_dot_product_attention, BahdanauAttention, LuongAttention and
// MultiHeadAttention. Forward values against the defining equations written below as plain
// loops in double (TF's seq2seq and Keras' formulas, see nn/attention.hpp); masked weights exactly
// 0, rows summing to 1 over their unmasked keys, all-zero rows when nothing is unmasked; every
// function and module gradient-checked in double, with and without masks.
#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include <gradus/gradus.hpp>
#include <gradus/nn.hpp>
#include <gradus/nn/attention.hpp>
#include <gradus/testing/module_check.hpp>

namespace gd = gradus;
namespace nn = gradus::nn;
using Td = gd::Tensor<double>;
using V = gd::Var<double>;

namespace {

// Softmax over the kept entries of one row of scores; zeros elsewhere; all zeros when none is kept.
std::vector<double> ref_weights(const std::vector<double>& s, const std::vector<bool>& keep) {
  double mx = -INFINITY;
  for (size_t j = 0; j < s.size(); ++j)
    if (keep[j]) mx = std::max(mx, s[j]);
  std::vector<double> w(s.size(), 0.0);
  if (mx == -INFINITY) return w;
  double z = 0;
  for (size_t j = 0; j < s.size(); ++j)
    if (keep[j]) z += std::exp(s[j] - mx);
  for (size_t j = 0; j < s.size(); ++j)
    if (keep[j]) w[j] = std::exp(s[j] - mx) / z;
  return w;
}

// Plain-loop reference of attention over a [N, Tk, dv] value from per-(n, i, j) scores and keeps.
struct RefAttention {
  std::vector<double> context;  // [N, Tq, dv]
  std::vector<double> weights;  // [N, Tq, Tk]
};
template <class Score, class Keep>
RefAttention ref_attention(int64_t n, int64_t tq, int64_t tk, const Td& value, Score score, Keep keep) {
  const int64_t dv = value.shape()[2];
  RefAttention r{std::vector<double>(size_t(n * tq * dv), 0.0), {}};
  for (int64_t b = 0; b < n; ++b)
    for (int64_t i = 0; i < tq; ++i) {
      std::vector<double> s(static_cast<size_t>(tk));
      std::vector<bool> k(static_cast<size_t>(tk));
      for (int64_t j = 0; j < tk; ++j) s[size_t(j)] = score(b, i, j), k[size_t(j)] = keep(b, i, j);
      const std::vector<double> w = ref_weights(s, k);
      r.weights.insert(r.weights.end(), w.begin(), w.end());
      for (int64_t j = 0; j < tk; ++j)
        for (int64_t d = 0; d < dv; ++d) r.context[size_t((b * tq + i) * dv + d)] += w[size_t(j)] * value(b, j, d);
    }
  return r;
}

void check_close(const Td& got, const std::vector<double>& want, double tol = 1e-12) {
  REQUIRE(got.size() == int64_t(want.size()));
  for (int64_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    CHECK(got.data()[i] == Approx(want[size_t(i)]).margin(tol));
  }
}

// Every row of weights [..., Tk] sums to 1 over its kept entries, masked entries are exactly 0,
// rows with nothing kept are all 0.
template <class Keep>
void check_rows(const Td& w, Keep keep_flat) {
  const int64_t tk = w.shape()[w.rank() - 1], rows = w.size() / tk;
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0;
    bool any = false;
    for (int64_t j = 0; j < tk; ++j) {
      const double x = w.data()[r * tk + j];
      if (keep_flat(r, j)) {
        sum += x, any = true;
      } else {
        CHECK(x == 0.0);
      }
    }
    CHECK(sum == Approx(any ? 1.0 : 0.0).margin(1e-14));
  }
}

// Context and weights flattened into one output, for the gradient checks.
V joined(const V& context, const V& weights) {
  return gd::concat({gd::reshape(context, {-1}), gd::reshape(weights, {-1})}, 0);
}

std::map<std::string, Td> params_of(const nn::Module<double>& m) {
  std::map<std::string, Td> out;
  for (auto& [name, p] : m.named_parameters()) out[name] = p.value();
  return out;
}

// An attention module over a fixed memory (a parameter here, so its gradient is checked too),
// as a module of the query alone for check_module_gradient.
template <class Att>
struct OverMemory : nn::Module<double> {
  Att att;
  V memory;
  Td mask;
  OverMemory(Att a, const Td& m, Td mk) : att(std::move(a)), mask(std::move(mk)) {
    register_module("att", att);
    memory = register_parameter("memory", m.clone());
  }
  V forward(const V& q) {
    auto [context, alignments] = att.forward(q, memory, mask);
    return joined(context, alignments);
  }
};

template <class M, class X>
void check_module(M& m, const X& x) {
  const nn::GradientReport report = nn::check_module_gradient(m, x, {.delta = 1e-6, .tolerance = 1e-6});
  INFO(report);
  CHECK(report.ok());
}

}  // namespace

TEST_CASE("scaled_dot_product_attention: forward against a plain loop, masks and causal", "[nn][attention]") {
  gd::Rng rng(7);
  const int64_t n = 2, tq = 3, tk = 5, d = 4, dv = 3;
  const Td q = Td::random_normal({n, tq, d}, rng), k = Td::random_normal({n, tk, d}, rng),
           v = Td::random_normal({n, tk, dv}, rng);
  // memory mask: batch row 1 has its last two keys masked
  const Td mem = Td::from({1, 1, 1, 1, 1, 1, 1, 1, 0, 0}, {n, tk});
  // full mask: a mix, with (n=1, i=0) masked entirely
  Td full = Td::ones({n, tq, tk});
  for (int64_t j = 0; j < tk; ++j) full(1, 0, j) = 0;
  full(0, 2, 1) = 0, full(0, 0, 4) = 0, full(1, 2, 0) = 0;

  struct Case {
    const char* name;
    Td mask;
    bool causal;
    double scale;
  };
  for (const Case& c : {Case{"no mask", Td(), false, 0.0}, Case{"memory mask", mem, false, 0.0},
                        Case{"full mask", full, false, 0.7}, Case{"causal", Td(), true, 0.0},
                        Case{"causal and memory mask", mem, true, 0.0}}) {
    INFO(c.name);
    auto keep = [&](int64_t b, int64_t i, int64_t j) {
      bool kp = true;
      if (c.mask.defined()) kp = c.mask.rank() == 2 ? c.mask(b, j) != 0 : c.mask(b, i, j) != 0;
      if (c.causal) kp = kp && j <= i;
      return kp;
    };
    const double scale = c.scale > 0 ? c.scale : 1 / std::sqrt(double(d));
    auto score = [&](int64_t b, int64_t i, int64_t j) {
      double s = 0;
      for (int64_t e = 0; e < d; ++e) s += q(b, i, e) * k(b, j, e);
      return s * scale;
    };
    const RefAttention ref = ref_attention(n, tq, tk, v, score, keep);
    const auto r = nn::scaled_dot_product_attention(V(q), V(k), V(v), c.mask, {.scale = c.scale, .causal = c.causal});
    REQUIRE(r.context.shape() == gd::Shape{n, tq, dv});
    REQUIRE(r.weights.shape() == gd::Shape{n, tq, tk});
    check_close(r.context.value(), ref.context);
    check_close(r.weights.value(), ref.weights);
    check_rows(r.weights.value(), [&](int64_t row, int64_t j) { return keep(row / tq, row % tq, j); });
  }

  SECTION("a row with nothing unmasked has zero weights and a zero context") {
    const auto r = nn::scaled_dot_product_attention(q, k, v, full);
    for (int64_t j = 0; j < tk; ++j) CHECK(r.weights.value()(1, 0, j) == 0.0);
    for (int64_t e = 0; e < dv; ++e) CHECK(r.context.value()(1, 0, e) == 0.0);
  }
  SECTION("masked scores are ignored however large they are") {
    Td kbig = k.clone();
    for (int64_t e = 0; e < d; ++e) kbig(1, 4, e) = 1e6 * q(1, 0, e);  // score of a masked key: huge
    const auto r = nn::scaled_dot_product_attention(q, kbig, v, mem);
    check_rows(r.weights.value(), [&](int64_t row, int64_t j) { return row / tq == 0 || j < 3; });
    CHECK(std::isfinite(r.context.value()(1, 0, 0)));
  }
}

TEST_CASE("scaled_dot_product_attention: more batch axes broadcast the masks", "[nn][attention]") {
  gd::Rng rng(8);
  const Td q = Td::random_normal({2, 3, 4, 5}, rng), k = Td::random_normal({2, 3, 6, 5}, rng),
           v = Td::random_normal({2, 3, 6, 2}, rng);
  const Td mem = Td::from({1, 1, 0, 1, 1, 1, 0, 0, 1, 1, 1, 1}, {2, 6});
  const auto r = nn::scaled_dot_product_attention(q, k, v, mem, {.causal = true});
  REQUIRE(r.weights.shape() == gd::Shape{2, 3, 4, 6});
  // each head equals the rank-3 call on its own slices
  for (int64_t h = 0; h < 3; ++h) {
    auto head = [&](const Td& x) { return Td(gd::reshape(gd::slice(x, {0, h, 0, 0}, {-1, 1, -1, -1}), {2, x.shape()[2], x.shape()[3]})); };
    const auto one = nn::scaled_dot_product_attention(head(q), head(k), head(v), mem, {.causal = true});
    const Td c = gd::eval(gd::reshape(gd::slice(r.context.value(), {0, h, 0, 0}, {-1, 1, -1, -1}), {2, 4, 2}));
    for (int64_t i = 0; i < c.size(); ++i) CHECK(c.data()[i] == Approx(one.context.value().data()[i]).margin(1e-14));
  }
}

TEST_CASE("scaled_dot_product_attention: gradients with and without masks", "[nn][attention][gradients]") {
  gd::Rng rng(9);
  const Td q = Td::random_normal({2, 3, 4}, rng), k = Td::random_normal({2, 4, 4}, rng),
           v = Td::random_normal({2, 4, 2}, rng);
  const Td mem = Td::from({1, 1, 1, 0, 0, 1, 1, 1}, {2, 4});
  Td full = Td::ones({2, 3, 4});
  for (int64_t j = 0; j < 4; ++j) full(0, 1, j) = 0;  // one row with nothing unmasked
  full(1, 2, 3) = 0;
  struct Case {
    const char* name;
    Td mask;
    bool causal;
  };
  for (const Case& c : {Case{"no mask", Td(), false}, Case{"memory mask", mem, false}, Case{"full mask", full, false},
                        Case{"causal and memory mask", mem, true}}) {
    INFO(c.name);
    auto f = [&](const V& qv, const V& kv, const V& vv) {
      const auto r = nn::scaled_dot_product_attention(qv, kv, vv, c.mask, {.causal = c.causal});
      return joined(r.context, r.weights);
    };
    CHECK(gd::compute_gradient_error(f, {q, k, v}) < 1e-7);
  }
}

TEST_CASE("scaled_dot_product_attention: shape errors name the function", "[nn][attention]") {
  const Td q = Td::zeros({2, 3, 4}), k = Td::zeros({2, 5, 4}), v = Td::zeros({2, 5, 3});
  CHECK_THROWS_AS(nn::scaled_dot_product_attention(q, Td::zeros({2, 5, 3}), v), gd::shape_error);
  CHECK_THROWS_AS(nn::scaled_dot_product_attention(q, k, Td::zeros({2, 4, 3})), gd::shape_error);
  CHECK_THROWS_AS(nn::scaled_dot_product_attention(Td::zeros({3, 4}), k, v), gd::shape_error);
  CHECK_THROWS_WITH(nn::scaled_dot_product_attention(q, k, v, Td::ones({2, 4})),
                    Catch::Contains("scaled_dot_product_attention") && Catch::Contains("[2,4]"));
  CHECK_THROWS_AS(nn::scaled_dot_product_attention(q, k, v, Td::ones({2, 3, 4})), gd::shape_error);
  CHECK_THROWS_AS(nn::scaled_dot_product_attention(q, k, v, {}, {.scale = -1}), gd::value_error);
}

TEST_CASE("BahdanauAttention: the TF equations as a plain loop, one step and a sequence, masked", "[nn][attention]") {
  gd::Rng rng(11);
  const int64_t n = 2, tm = 4, dq = 3, dm = 5, u = 6, tq = 2;
  nn::BahdanauAttention<double> att({.units = u, .query_units = dq, .memory_units = dm}, rng);
  auto p = params_of(att);
  REQUIRE(p.size() == 3);
  const Td wq = p.at("query_layer.kernel"), wm = p.at("memory_layer.kernel"), va = p.at("attention_v");
  REQUIRE(wq.shape() == gd::Shape{dq, u});
  REQUIRE(wm.shape() == gd::Shape{dm, u});
  REQUIRE(va.shape() == gd::Shape{u});
  const Td memory = Td::random_normal({n, tm, dm}, rng);
  const Td mask = Td::from({1, 1, 1, 1, 1, 1, 0, 0}, {n, tm});
  const Td query = Td::random_normal({n, tq, dq}, rng);

  auto score = [&](int64_t b, int64_t i, int64_t j) {
    double s = 0;
    for (int64_t c = 0; c < u; ++c) {
      double pq = 0, key = 0;
      for (int64_t e = 0; e < dq; ++e) pq += query(b, i, e) * wq(e, c);
      for (int64_t e = 0; e < dm; ++e) key += memory(b, j, e) * wm(e, c);
      s += va(c) * std::tanh(pq + key);
    }
    return s;
  };
  for (bool masked : {false, true}) {
    INFO((masked ? "masked" : "unmasked"));
    auto keep = [&](int64_t b, int64_t, int64_t j) { return !masked || mask(b, j) != 0; };
    const RefAttention ref = ref_attention(n, tq, tm, memory, score, keep);
    const Td m = masked ? mask : Td();
    const auto seq = att(query, memory, m);
    REQUIRE(seq.context.shape() == gd::Shape{n, tq, dm});
    REQUIRE(seq.alignments.shape() == gd::Shape{n, tq, tm});
    check_close(seq.context.value(), ref.context);
    check_close(seq.alignments.value(), ref.weights);
    check_rows(seq.alignments.value(), [&](int64_t row, int64_t j) { return keep(row / tq, 0, j); });

    // one decoder step: the query [N, Dq] is row i = 1 of the sequence
    const Td step = gd::eval(gd::reshape(gd::slice(query, {0, 1, 0}, {-1, 1, -1}), {n, dq}));
    const auto one = att(step, memory, m);
    REQUIRE(one.context.shape() == gd::Shape{n, dm});
    REQUIRE(one.alignments.shape() == gd::Shape{n, tm});
    for (int64_t b = 0; b < n; ++b) {
      for (int64_t e = 0; e < dm; ++e) CHECK(one.context.value()(b, e) == Approx(ref.context[size_t((b * tq + 1) * dm + e)]).margin(1e-12));
      for (int64_t j = 0; j < tm; ++j) CHECK(one.alignments.value()(b, j) == Approx(ref.weights[size_t((b * tq + 1) * tm + j)]).margin(1e-12));
    }
    // keys once, attend per step: the same values
    const V keys = att.keys(memory);
    const auto again = att.attend(step, keys, V::constant(memory), m);
    check_close(again.context.value(), std::vector<double>(one.context.value().begin(), one.context.value().end()), 0);
  }
}

TEST_CASE("BahdanauAttention: gradients of query, memory and parameters", "[nn][attention][gradients]") {
  gd::Rng rng(12);
  const Td memory = Td::random_normal({2, 4, 3}, rng);
  const Td mask = Td::from({1, 1, 0, 1, 1, 0, 0, 0}, {2, 4});
  for (bool masked : {false, true})
    for (int rank : {2, 3}) {
      INFO((masked ? "masked" : "unmasked") << ", query rank " << rank);
      OverMemory<nn::BahdanauAttention<double>> m(
          nn::BahdanauAttention<double>({.units = 3, .query_units = 2, .memory_units = 3}, rng), memory,
          masked ? mask : Td());
      check_module(m, rank == 2 ? Td::random_normal({2, 2}, rng) : Td::random_normal({2, 3, 2}, rng));
    }
}

TEST_CASE("LuongAttention: the TF equations as a plain loop, with and without scale", "[nn][attention]") {
  gd::Rng rng(13);
  const int64_t n = 2, tm = 4, dm = 3, u = 5, tq = 3;
  const Td memory = Td::random_normal({n, tm, dm}, rng);
  const Td mask = Td::from({1, 0, 1, 1, 1, 1, 1, 0}, {n, tm});
  const Td query = Td::random_normal({n, tq, u}, rng);
  for (bool scale : {false, true}) {
    nn::LuongAttention<double> att({.units = u, .memory_units = dm, .scale = scale}, rng);
    auto params = att.named_parameters();
    REQUIRE(params.size() == (scale ? 2u : 1u));
    double g = 1;
    if (scale) {
      REQUIRE(params[0].first == "attention_g");
      CHECK(params[0].second.item() == 1.0);  // TF initialises g to 1
      params[0].second.value().copy_(Td::scalar(1.7));
      g = 1.7;
    }
    const Td wm = params_of(att).at("memory_layer.kernel");
    auto score = [&](int64_t b, int64_t i, int64_t j) {
      double s = 0;
      for (int64_t c = 0; c < u; ++c) {
        double key = 0;
        for (int64_t e = 0; e < dm; ++e) key += memory(b, j, e) * wm(e, c);
        s += query(b, i, c) * key;
      }
      return g * s;
    };
    auto keep = [&](int64_t b, int64_t, int64_t j) { return mask(b, j) != 0; };
    const RefAttention ref = ref_attention(n, tq, tm, memory, score, keep);
    const auto r = att(query, memory, mask);
    check_close(r.context.value(), ref.context);
    check_close(r.alignments.value(), ref.weights);
    check_rows(r.alignments.value(), [&](int64_t row, int64_t j) { return keep(row / tq, 0, j); });
    const Td step = gd::eval(gd::reshape(gd::slice(query, {0, 2, 0}, {-1, 1, -1}), {n, u}));
    const auto one = att.attend(step, att.keys(memory), V::constant(memory), mask);
    REQUIRE(one.alignments.shape() == gd::Shape{n, tm});
    for (int64_t j = 0; j < tm; ++j) CHECK(one.alignments.value()(1, j) == Approx(ref.weights[size_t((tq + 2) * tm + j)]).margin(1e-12));
  }
}

TEST_CASE("LuongAttention: gradients of query, memory and parameters", "[nn][attention][gradients]") {
  gd::Rng rng(14);
  const Td memory = Td::random_normal({2, 4, 3}, rng);
  const Td mask = Td::from({1, 1, 1, 0, 0, 1, 0, 1}, {2, 4});
  for (bool scale : {false, true})
    for (bool masked : {false, true}) {
      INFO((scale ? "scaled" : "plain") << (masked ? ", masked" : ""));
      OverMemory<nn::LuongAttention<double>> m(
          nn::LuongAttention<double>({.units = 2, .memory_units = 3, .scale = scale}, rng), memory,
          masked ? mask : Td());
      if (scale) m.att.named_parameters()[0].second.value().copy_(Td::scalar(0.6));
      check_module(m, Td::random_normal({2, 2}, rng));
      check_module(m, Td::random_normal({2, 3, 2}, rng));
    }
}

TEST_CASE("BahdanauAttention and LuongAttention: bad input names the layer", "[nn][attention]") {
  gd::Rng rng(15);
  nn::BahdanauAttention<double> b({.units = 3, .query_units = 2, .memory_units = 4}, rng);
  nn::LuongAttention<double> l({.units = 2, .memory_units = 4}, rng);
  const Td memory = Td::zeros({2, 5, 4});
  CHECK_THROWS_WITH(b(Td::zeros({2, 3}), memory), Catch::Contains("BahdanauAttention") && Catch::Contains("[2,3]"));
  CHECK_THROWS_AS(b(Td::zeros({2, 2}), Td::zeros({2, 5, 3})), gd::shape_error);
  CHECK_THROWS_AS(b(Td::zeros({3, 2}), memory), gd::shape_error);
  CHECK_THROWS_AS(b(Td::zeros({2, 2}), memory, Td::ones({2, 4})), gd::shape_error);
  CHECK_THROWS_AS(b(Td::zeros({2}), memory), gd::shape_error);
  CHECK_THROWS_WITH(l(Td::zeros({2, 3}), memory), Catch::Contains("LuongAttention"));
  CHECK_THROWS_AS(l.attend(Td::zeros({2, 2}), l.keys(Td::zeros({2, 4, 4})), V::constant(memory)), gd::shape_error);
  CHECK_THROWS_AS(nn::BahdanauAttention<double>({.units = 0, .query_units = 2, .memory_units = 4}, rng),
                  gd::value_error);
  CHECK_THROWS_AS(nn::LuongAttention<double>({.units = 2, .memory_units = 4, .query_units = 3}, rng), gd::value_error);
}

namespace {

// Keras' MultiHeadAttention as plain loops: projections, per-head softmax(q·k/sqrt(kd)), output.
struct RefMHA {
  std::vector<double> output;   // [N, Tq, D]
  std::vector<double> weights;  // [N, H, Tq, Tk]
};
RefMHA ref_mha(const std::map<std::string, Td>& p, const Td& query, const Td& value, const Td& key, int64_t heads,
               int64_t kd, int64_t vd, const Td& mask, bool causal) {
  const int64_t n = query.shape()[0], tq = query.shape()[1], tk = value.shape()[1];
  auto project = [&](const Td& x, const std::string& layer) {
    const Td& w = p.at(layer + ".kernel");
    const Td& b = p.at(layer + ".bias");
    const int64_t t = x.shape()[1], in = x.shape()[2], out = w.shape()[1];
    Td y = Td::zeros({n, t, out});
    for (int64_t i = 0; i < n; ++i)
      for (int64_t s = 0; s < t; ++s)
        for (int64_t o = 0; o < out; ++o) {
          double acc = b(o);
          for (int64_t e = 0; e < in; ++e) acc += x(i, s, e) * w(e, o);
          y(i, s, o) = acc;
        }
    return y;
  };
  const Td qp = project(query, "query_dense"), kp = project(key, "key_dense"), vp = project(value, "value_dense");
  Td joined = Td::zeros({n, tq, heads * vd});
  RefMHA r;
  std::vector<std::vector<double>> per_head(static_cast<size_t>(heads));
  for (int64_t h = 0; h < heads; ++h) {
    Td vh = Td::zeros({n, tk, vd});
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < tk; ++j)
        for (int64_t e = 0; e < vd; ++e) vh(i, j, e) = vp(i, j, h * vd + e);
    auto score = [&](int64_t b, int64_t i, int64_t j) {
      double s = 0;
      for (int64_t e = 0; e < kd; ++e) s += qp(b, i, h * kd + e) * kp(b, j, h * kd + e);
      return s / std::sqrt(double(kd));
    };
    auto keep = [&](int64_t b, int64_t i, int64_t j) {
      bool kp_ = true;
      if (mask.defined()) kp_ = mask.rank() == 2 ? mask(b, j) != 0 : mask(b, i, j) != 0;
      return kp_ && (!causal || j <= i);
    };
    const RefAttention a = ref_attention(n, tq, tk, vh, score, keep);
    per_head[size_t(h)] = a.weights;
    for (int64_t b = 0; b < n; ++b)
      for (int64_t i = 0; i < tq; ++i)
        for (int64_t e = 0; e < vd; ++e) joined(b, i, h * vd + e) = a.context[size_t((b * tq + i) * vd + e)];
  }
  for (int64_t b = 0; b < n; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t k = 0; k < tq * tk; ++k) r.weights.push_back(per_head[size_t(h)][size_t(b * tq * tk + k)]);
  const Td out = project(joined, "output_dense");
  r.output.assign(out.begin(), out.end());
  return r;
}

struct MHAOver : nn::Module<double> {
  nn::MultiHeadAttention<double> mha;
  V value, key;
  Td mask;
  bool causal;
  MHAOver(nn::MultiHeadAttention<double> m, const Td& v, const Td& k, Td mk, bool c)
      : mha(std::move(m)), mask(std::move(mk)), causal(c) {
    register_module("mha", mha);
    value = register_parameter("value", v.clone());
    key = register_parameter("key", k.clone());
  }
  V forward(const V& q) {
    const auto r = mha(q, value, key, mask, causal);
    return joined(r.context, r.weights);
  }
};

}  // namespace

TEST_CASE("MultiHeadAttention: Keras' equations as plain loops, masks and causal", "[nn][attention]") {
  gd::Rng rng(16);
  const int64_t n = 2, tq = 3, tk = 4, dq = 4, dv = 3, dk = 2, heads = 2, kd = 3, vd = 2;
  nn::MultiHeadAttention<double> mha({.num_heads = heads, .key_dim = kd, .value_dim = vd, .query_units = dq,
                                      .value_units = dv, .key_units = dk,
                                      .bias_initializer = gd::init::random_normal{.stddev = 0.5}},
                                     rng);
  const auto p = params_of(mha);
  REQUIRE(p.size() == 8);
  CHECK(p.at("query_dense.kernel").shape() == gd::Shape{dq, heads * kd});
  CHECK(p.at("key_dense.kernel").shape() == gd::Shape{dk, heads * kd});
  CHECK(p.at("value_dense.kernel").shape() == gd::Shape{dv, heads * vd});
  CHECK(p.at("output_dense.kernel").shape() == gd::Shape{heads * vd, dq});
  const Td query = Td::random_normal({n, tq, dq}, rng), value = Td::random_normal({n, tk, dv}, rng),
           key = Td::random_normal({n, tk, dk}, rng);
  const Td mem = Td::from({1, 1, 1, 0, 0, 1, 1, 1}, {n, tk});
  Td full = Td::ones({n, tq, tk});
  full(0, 1, 2) = 0, full(1, 0, 0) = 0, full(1, 0, 1) = 0;
  struct Case {
    const char* name;
    Td mask;
    bool causal;
  };
  for (const Case& c : {Case{"no mask", Td(), false}, Case{"memory mask", mem, false}, Case{"full mask", full, false},
                        Case{"causal", Td(), true}, Case{"causal and memory mask", mem, true}}) {
    INFO(c.name);
    const RefMHA ref = ref_mha(p, query, value, key, heads, kd, vd, c.mask, c.causal);
    const auto r = mha(query, value, key, c.mask, c.causal);
    REQUIRE(r.context.shape() == gd::Shape{n, tq, dq});
    REQUIRE(r.weights.shape() == gd::Shape{n, heads, tq, tk});
    check_close(r.context.value(), ref.output);
    check_close(r.weights.value(), ref.weights);
  }
  SECTION("self-attention: key defaults to value") {
    nn::MultiHeadAttention<double> self({.num_heads = 2, .key_dim = 2, .query_units = dq}, rng);
    const auto a = self(query, query);
    const auto b = self(query, query, query);
    check_close(a.context.value(), std::vector<double>(b.context.value().begin(), b.context.value().end()), 0);
  }
  SECTION("errors") {
    CHECK_THROWS_WITH(mha(query, value, Td::zeros({n, tk, 5})),
                      Catch::Contains("MultiHeadAttention") && Catch::Contains("key_units"));
    CHECK_THROWS_AS(mha(query, value, Td::zeros({n, tk + 1, dk})), gd::shape_error);
    CHECK_THROWS_AS(mha(query, value, key, Td::ones({n, tk + 1})), gd::shape_error);
    CHECK_THROWS_AS(nn::MultiHeadAttention<double>({.num_heads = 0, .key_dim = 2, .query_units = 2}, rng),
                    gd::value_error);
  }
}

TEST_CASE("MultiHeadAttention: gradients with and without masks", "[nn][attention][gradients]") {
  gd::Rng rng(17);
  const Td value = Td::random_normal({2, 3, 3}, rng), key = Td::random_normal({2, 3, 2}, rng);
  const Td mem = Td::from({1, 1, 0, 1, 1, 1}, {2, 3});
  for (int k = 0; k < 3; ++k) {
    const Td mask = k == 1 ? mem : Td();
    const bool causal = k == 2;
    INFO("case " << k);
    MHAOver m(nn::MultiHeadAttention<double>({.num_heads = 2, .key_dim = 2, .value_dim = 1, .query_units = 2,
                                              .value_units = 3, .key_units = 2, .output_units = 3,
                                              .bias_initializer = gd::init::random_normal{.stddev = 0.5}},
                                             rng),
              value, key, mask, causal);
    check_module(m, Td::random_normal({2, 3, 2}, rng));
  }
}
