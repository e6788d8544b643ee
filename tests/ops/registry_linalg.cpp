// Registry entries of matmul (2-D, batched, broadcast batch axes, rank-1 operands) and of
// softmax / log_softmax (each axis, extreme logits). References: naive triple loops with NumPy's
// matmul rules, and softmax written out per line with the maximum subtracted.
#include "op_registry.hpp"

namespace op_registry {
namespace {

using V = std::vector<VarD>;

/// NumPy matmul: rank-1 operands promoted ([k] -> [1,k] on the left, [k,1] on the right, then
/// dropped), batch axes broadcast.
TensorD matmul_ref(const TensorD& a, const TensorD& b) {
  Idx da = dims(a.shape()), db = dims(b.shape());
  const bool va = da.size() == 1, vb = db.size() == 1;
  if (va) da.insert(da.begin(), 1);
  if (vb) db.push_back(1);
  const int64_t m = da[da.size() - 2], k = da.back(), n = db.back();
  const Idx ba(da.begin(), da.end() - 2), bb(db.begin(), db.end() - 2);
  const Idx batch = broadcast_dims({ba, bb});
  Idx full = batch;
  full.push_back(m);
  full.push_back(n);
  TensorD out = build(full, [&](const Idx& i) {
    const Idx bi(i.begin(), i.end() - 2);
    auto index = [&](const Idx& own, int64_t r, int64_t c) {
      Idx j(own.size() + 2);
      for (size_t q = 0; q < own.size(); ++q) j[q] = own[q] == 1 ? 0 : bi[bi.size() - own.size() + q];
      j[own.size()] = r;
      j[own.size() + 1] = c;
      return j;
    };
    double s = 0;
    Idx fa = ba, fb = bb;
    fa.push_back(m), fa.push_back(k), fb.push_back(k), fb.push_back(n);
    for (int64_t p = 0; p < k; ++p)
      s += a.data()[ravel(index(ba, i[i.size() - 2], p), fa)] * b.data()[ravel(index(bb, p, i.back()), fb)];
    return s;
  });
  Idx od = batch;
  if (!va) od.push_back(m);
  if (!vb) od.push_back(n);
  return out.reshape(gd::Shape(od));
}

/// x with its last two axes swapped.
TensorD swap_last(const TensorD& x) {
  Idx d = dims(x.shape());
  std::swap(d[d.size() - 1], d[d.size() - 2]);
  return build(d, [&](const Idx& i) {
    Idx j = i;
    std::swap(j[j.size() - 1], j[j.size() - 2]);
    return at(x, j);
  });
}

/// softmax (or log_softmax) of x along `axis`, line by line.
TensorD softmax_ref(const TensorD& x, int64_t axis, bool log) {
  const Idx d = dims(x.shape());
  const auto a = size_t(axis < 0 ? axis + int64_t(d.size()) : axis);
  return build(d, [&](const Idx& i) {
    Idx j = i;
    double m = -INFINITY;
    for (j[a] = 0; j[a] < d[a]; ++j[a]) m = std::max(m, at(x, j));
    double s = 0;
    for (j[a] = 0; j[a] < d[a]; ++j[a]) s += std::exp(at(x, j) - m);
    return log ? at(x, i) - m - std::log(s) : std::exp(at(x, i) - m) / s;
  });
}

}  // namespace

void add_linalg_softmax(std::vector<OpInfo>& r) {
  {
    OpInfo o{.name = "matmul", .needs_broadcast = true};
    auto call = [](const auto& v) { return as_var(v, gd::matmul(v[0], v[1])); };
    auto ref = [](const std::vector<TensorD>& t) { return matmul_ref(t[0], t[1]); };
    struct Case {
      const char* label;
      gd::Shape a, b;
      unsigned kinds;
    };
    const Case cases[] = {
        {"[3,4] x [4,5]", {3, 4}, {4, 5}, gd::ops::kind::plain},
        {"batched [2,3,4] x [2,4,5]", {2, 3, 4}, {2, 4, 5}, gd::ops::kind::plain},
        {"[2,3,4] x [4,5] (batch broadcast)", {2, 3, 4}, {4, 5}, gd::ops::kind::broadcast},
        {"[3,4] x [2,4,2] (batch broadcast)", {3, 4}, {2, 4, 2}, gd::ops::kind::broadcast},
        {"[2,1,3,4] x [3,4,2] (both broadcast)", {2, 1, 3, 4}, {3, 4, 2}, gd::ops::kind::broadcast},
        {"[4] x [4,5] (rank-1 left)", {4}, {4, 5}, gd::ops::kind::edge},
        {"[3,4] x [4] (rank-1 right)", {3, 4}, {4}, gd::ops::kind::edge},
        {"[4] x [4] (dot)", {4}, {4}, gd::ops::kind::edge},
        {"[2,3,4] x [4] (batched, rank-1 right)", {2, 3, 4}, {4}, gd::ops::kind::edge},
        {"[1,1] x [1,1]", {1, 1}, {1, 1}, gd::ops::kind::edge},
    };
    uint64_t seed = 60;
    for (const Case& c : cases) {
      o.samples.push_back(sample(c.label, c.kinds, {uniform(c.a, seed), uniform(c.b, seed + 1)}, call, ref));
      seed += 2;
    }
    // tf.matmul's transpose_a / transpose_b: the reference transposes a copy first.
    struct TCase {
      const char* label;
      gd::Shape a, b;
      bool ta, tb;
    };
    const TCase tcases[] = {
        {"[4,3]ᵀ x [4,5] (transpose_a)", {4, 3}, {4, 5}, true, false},
        {"[3,4] x [5,4]ᵀ (transpose_b)", {3, 4}, {5, 4}, false, true},
        {"[4,3]ᵀ x [5,4]ᵀ (both)", {4, 3}, {5, 4}, true, true},
        {"batched [2,4,3]ᵀ x [2,4,5] (transpose_a)", {2, 4, 3}, {2, 4, 5}, true, false},
        {"[2,3,4] x [5,4]ᵀ (batch folded, transpose_b)", {2, 3, 4}, {5, 4}, false, true},
        {"[2,4,3]ᵀ x [5,4]ᵀ (batch broadcast, both)", {2, 4, 3}, {5, 4}, true, true},
        {"[4,3]ᵀ x [2,4,5] (batch broadcast, transpose_a)", {4, 3}, {2, 4, 5}, true, false},
    };
    for (const TCase& c : tcases) {
      o.samples.push_back(sample(
          c.label, gd::ops::kind::plain, {uniform(c.a, seed), uniform(c.b, seed + 1)},
          [c](const auto& v) { return as_var(v, gd::matmul(v[0], v[1], {.transpose_a = c.ta, .transpose_b = c.tb})); },
          [c](const std::vector<TensorD>& t) { return matmul_ref(c.ta ? swap_last(t[0]) : t[0], c.tb ? swap_last(t[1]) : t[1]); }));
      seed += 2;
    }
    o.samples.push_back(sample("matmul(tanh(x), w) + b, b [5]", gd::ops::kind::fused | gd::ops::kind::broadcast,
                               {uniform({3, 4}, 80), uniform({4, 5}, 81), uniform({5}, 82)},
                               [](const auto& v) { return as_var(v, gd::matmul(gd::tanh(v[0]), v[1]) + v[2]); },
                               [](const std::vector<TensorD>& t) {
                                 return map2(matmul_ref(map1(t[0], [](double a) { return std::tanh(a); }), t[1]), t[2],
                                             [](double a, double b) { return a + b; });
                               }));
    r.push_back(std::move(o));
  }
  for (bool log : {false, true}) {
    OpInfo o{.name = log ? "log_softmax" : "softmax"};
    auto f = [log](const auto& x, int64_t axis) { return log ? gd::to_var(gd::log_softmax(x, axis)) : gd::to_var(gd::softmax(x, axis)); };
    const TensorD x = uniform({2, 3, 4}, 90, -3, 3);
    for (int64_t axis : {0, 1, -1, 2}) {
      o.samples.push_back(sample("[2,3,4] axis " + std::to_string(axis), axis == -1 ? gd::ops::kind::plain : gd::ops::kind::params, {x},
                                 [f, axis](const auto& v) { return f(v[0], axis); },
                                 [log, axis](const std::vector<TensorD>& t) { return softmax_ref(t[0], axis, log); }));
    }
    o.samples.push_back(sample("default axis, [5]", gd::ops::kind::edge, {uniform({5}, 91)},
                               [log](const auto& v) { return log ? as_var(v, gd::log_softmax(v[0])) : as_var(v, gd::softmax(v[0])); },
                               [log](const std::vector<TensorD>& t) { return softmax_ref(t[0], -1, log); }));
    o.samples.push_back(sample("one class [3,1]", gd::ops::kind::edge, {uniform({3, 1}, 92)},
                               [f](const auto& v) { return f(v[0], -1); },
                               [log](const std::vector<TensorD>&) { return TensorD::full({3, 1}, log ? 0.0 : 1.0); }));
    // hand values: softmax([1000, 0, -1000]) = [1, e^-1000, e^-2000] = [1, 0, 0]
    o.samples.push_back(sample("logits of +-1000", gd::ops::kind::edge, {values({1000, 0, -1000, -1000, -1000, -1000}, {2, 3})},
                               [f](const auto& v) { return f(v[0], 1); },
                               [log](const std::vector<TensorD>&) {
                                 const double l3 = 1.0986122886681098;  // log 3
                                 return log ? values({0, -1000, -2000, -l3, -l3, -l3}, {2, 3})
                                            : values({1, 0, 0, 1 / 3.0, 1 / 3.0, 1 / 3.0}, {2, 3});
                               }));
    o.samples.push_back(sample("of x * 2 + b, b [4]", gd::ops::kind::fused | gd::ops::kind::broadcast, {x, uniform({4}, 93)},
                               [f](const auto& v) { return f(v[0] * 2.0 + v[1], -1); },
                               [log](const std::vector<TensorD>& t) {
                                 return softmax_ref(map2(t[0], t[1], [](double a, double b) { return a * 2 + b; }), -1, log);
                               }));
    r.push_back(std::move(o));
  }
}

}  // namespace op_registry
