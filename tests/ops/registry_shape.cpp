// Registry entries of the shape ops: transpose reshape flatten expand_dims squeeze concat stack
// slice gather one_hot pad cast, and of the sparse ones: sparse_to_dense unsorted_segment_sum
// embedding_lookup_sparse (their references: TensorFlow's documented definitions written as loops). References: each output element computed from its multi-index
// (op_registry.hpp: build, at). Vector arguments are built once and captured, so the
// steady-state check counts the op's allocations, not the test's.
#include "op_registry.hpp"

namespace op_registry {
namespace {

using V = std::vector<VarD>;
using Refs = std::vector<TensorD>;

/// x's data read in row-major order into dims `d` (what every reshaping op must give).
TensorD same_data(const TensorD& x, const Idx& d) {
  return build(d, [&](const Idx& i) { return x.data()[ravel(i, d)]; });
}

TensorD transpose_ref(const TensorD& x, Idx perm) {
  const Idx d = dims(x.shape());
  if (perm.empty())
    for (size_t k = d.size(); k-- > 0;) perm.push_back(int64_t(k));
  Idx od;
  for (int64_t p : perm) od.push_back(d[size_t(p)]);
  return build(od, [&](const Idx& i) {
    Idx j(d.size());
    for (size_t k = 0; k < perm.size(); ++k) j[size_t(perm[k])] = i[k];
    return at(x, j);
  });
}

/// Inputs joined along `axis` (stack: each input first given a size-1 axis there).
TensorD concat_ref(const std::vector<TensorD>& xs, int64_t axis, bool stack) {
  std::vector<TensorD> parts;
  for (const TensorD& x : xs) {
    Idx d = dims(x.shape());
    if (stack) d.insert(d.begin() + (axis < 0 ? axis + int64_t(d.size()) + 1 : axis), 1);
    parts.push_back(x.reshape(gd::Shape(d)));
  }
  Idx od = dims(parts[0].shape());
  const auto a = size_t(axis < 0 ? axis + int64_t(od.size()) : axis);
  od[a] = 0;
  for (const TensorD& p : parts) od[a] += p.shape()[int(a)];
  return build(od, [&](const Idx& i) {
    Idx j = i;
    for (const TensorD& p : parts) {
      if (j[a] < p.shape()[int(a)]) return at(p, j);
      j[a] -= p.shape()[int(a)];
    }
    return std::nan("");
  });
}

TensorD gather_ref(const TensorD& x, const TensorI64& idx, int64_t axis) {
  const Idx d = dims(x.shape()), id = dims(idx.shape());
  Idx od(d.begin(), d.begin() + axis);
  od.insert(od.end(), id.begin(), id.end());
  od.insert(od.end(), d.begin() + axis + 1, d.end());
  return build(od, [&](const Idx& i) {
    Idx j(i.begin(), i.begin() + axis);
    const Idx ii(i.begin() + axis, i.begin() + axis + int64_t(id.size()));
    j.push_back(idx.data()[ravel(ii, id)]);
    j.insert(j.end(), i.begin() + axis + int64_t(id.size()), i.end());
    return at(x, j);
  });
}

}  // namespace

void add_shape(std::vector<OpInfo>& r) {
  const TensorD x234 = uniform({2, 3, 4}, 100);
  {
    OpInfo o{.name = "transpose"};
    o.samples.push_back(sample("[3,4], no perm (matrix transpose)", gd::ops::kind::plain, {uniform({3, 4}, 101)},
                               [](const auto& v) { return as_var(v, gd::transpose(v[0])); },
                               [](const Refs& t) { return transpose_ref(t[0], {}); }));
    for (const Idx& perm : {Idx{2, 0, 1}, Idx{0, 2, 1}, Idx{0, 1, 2}}) {
      o.samples.push_back(sample("[2,3,4] perm " + std::to_string(perm[0]) + std::to_string(perm[1]) + std::to_string(perm[2]),
                                 gd::ops::kind::params, {x234}, [perm](const auto& v) { return as_var(v, gd::transpose(v[0], perm)); },
                                 [perm](const Refs& t) { return transpose_ref(t[0], perm); }));
    }
    o.samples.push_back(sample("[2,3,2,3] perm 1032, no perm", gd::ops::kind::edge, {uniform({2, 3, 2, 3}, 102)},
                               [p = Idx{1, 0, 3, 2}](const auto& v) { return as_var(v, gd::transpose(gd::transpose(v[0], p))); },
                               [](const Refs& t) { return transpose_ref(transpose_ref(t[0], {1, 0, 3, 2}), {}); }));
    o.samples.push_back(sample("of x * 2 + 1", gd::ops::kind::fused, {uniform({3, 2}, 103)},
                               [](const auto& v) { return as_var(v, gd::transpose(v[0] * 2.0 + 1.0)); },
                               [](const Refs& t) { return transpose_ref(map1(t[0], [](double a) { return a * 2 + 1; }), {}); }));
    r.push_back(std::move(o));
  }
  {
    OpInfo o{.name = "reshape"};
    o.samples.push_back(sample("[2,3,4] -> [3,8]", gd::ops::kind::plain, {x234},
                               [d = Idx{3, 8}](const auto& v) { return as_var(v, gd::reshape(v[0], d)); },
                               [](const Refs& t) { return same_data(t[0], {3, 8}); }));
    o.samples.push_back(sample("[2,3,4] -> [4,-1] (inferred)", gd::ops::kind::params, {x234},
                               [d = Idx{4, -1}](const auto& v) { return as_var(v, gd::reshape(v[0], d)); },
                               [](const Refs& t) { return same_data(t[0], {4, 6}); }));
    o.samples.push_back(sample("[2,3,4] -> Shape{24}", gd::ops::kind::params, {x234},
                               [](const auto& v) { return as_var(v, gd::reshape(v[0], gd::Shape{24})); },
                               [](const Refs& t) { return same_data(t[0], {24}); }));
    o.samples.push_back(sample("[1] -> [] (rank 0)", gd::ops::kind::edge, {uniform({1}, 104)},
                               [d = Idx{}](const auto& v) { return as_var(v, gd::reshape(v[0], d)); },
                               [](const Refs& t) { return same_data(t[0], {}); }));
    o.samples.push_back(sample("of exp(x)", gd::ops::kind::fused, {uniform({3, 2}, 105)},
                               [d = Idx{-1}](const auto& v) { return as_var(v, gd::reshape(gd::exp(v[0]), d)); },
                               [](const Refs& t) { return same_data(map1(t[0], [](double a) { return std::exp(a); }), {6}); }));
    r.push_back(std::move(o));
  }
  {
    OpInfo o{.name = "flatten"};
    o.samples.push_back(sample("[2,3,4] -> [2,12]", gd::ops::kind::plain, {x234}, [](const auto& v) { return as_var(v, gd::flatten(v[0])); },
                               [](const Refs& t) { return same_data(t[0], {2, 12}); }));
    o.samples.push_back(sample("[5] -> [5,1]", gd::ops::kind::edge, {uniform({5}, 106)}, [](const auto& v) { return as_var(v, gd::flatten(v[0])); },
                               [](const Refs& t) { return same_data(t[0], {5, 1}); }));
    r.push_back(std::move(o));
  }
  {
    OpInfo o{.name = "expand_dims"};
    for (int64_t a : {0, 1, 2, -1, -3}) {
      o.samples.push_back(sample("[2,3] at " + std::to_string(a), a == 1 ? gd::ops::kind::plain : gd::ops::kind::params, {uniform({2, 3}, 107)},
                                 [a](const auto& v) { return as_var(v, gd::expand_dims(v[0], a)); },
                                 [a](const Refs& t) {
                                   Idx d{2, 3};
                                   d.insert(d.begin() + (a < 0 ? a + 3 : a), 1);
                                   return same_data(t[0], d);
                                 }));
    }
    r.push_back(std::move(o));
  }
  {
    OpInfo o{.name = "squeeze"};
    const TensorD x = uniform({2, 1, 3, 1}, 108);
    o.samples.push_back(sample("[2,1,3,1], all", gd::ops::kind::plain, {x}, [](const auto& v) { return as_var(v, gd::squeeze(v[0])); },
                               [](const Refs& t) { return same_data(t[0], {2, 3}); }));
    o.samples.push_back(sample("axis 1", gd::ops::kind::params, {x}, [](const auto& v) { return as_var(v, gd::squeeze(v[0], 1)); },
                               [](const Refs& t) { return same_data(t[0], {2, 3, 1}); }));
    o.samples.push_back(sample("axes {-1, 1}", gd::ops::kind::params, {x},
                               [a = Idx{-1, 1}](const auto& v) { return as_var(v, gd::squeeze(v[0], a)); },
                               [](const Refs& t) { return same_data(t[0], {2, 3}); }));
    o.samples.push_back(sample("[1,1] -> [] (rank 0)", gd::ops::kind::edge, {uniform({1, 1}, 109)},
                               [](const auto& v) { return as_var(v, gd::squeeze(v[0])); }, [](const Refs& t) { return same_data(t[0], {}); }));
    r.push_back(std::move(o));
  }
  {
    OpInfo o{.name = "concat"};
    o.samples.push_back(sample("[2,3], [2,4], [2,1] on axis 1", gd::ops::kind::plain,
                               {uniform({2, 3}, 110), uniform({2, 4}, 111), uniform({2, 1}, 112)},
                               [](const auto& v) { return as_var(v, gd::concat(v, 1)); },
                               [](const Refs& t) { return concat_ref(t, 1, false); }));
    o.samples.push_back(sample("[1,2,3], [2,2,3] on axis -3", gd::ops::kind::params, {uniform({1, 2, 3}, 113), uniform({2, 2, 3}, 114)},
                               [](const auto& v) { return as_var(v, gd::concat(v, -3)); },
                               [](const Refs& t) { return concat_ref(t, 0, false); }));
    o.samples.push_back(sample("one input; [3] and [0] (empty)", gd::ops::kind::edge, {uniform({3}, 115)},
                               [e = TensorD::zeros({0})](const auto& v) {
                                 return as_var(v, gd::concat({v[0], gd::Var<element_of<decltype(v)>>::constant(like(v, e))}, 0));
                               },
                               [](const Refs& t) { return t[0]; }));
    allocates(o, "the input list and its parts, ops/shape.hpp join");
    r.push_back(std::move(o));
  }
  {
    OpInfo o{.name = "stack"};
    const std::vector<TensorD> xs{uniform({2, 3}, 116), uniform({2, 3}, 117), uniform({2, 3}, 118)};
    for (int64_t a : {0, 1, -1}) {
      o.samples.push_back(sample("three [2,3] on axis " + std::to_string(a), a == 0 ? gd::ops::kind::plain : gd::ops::kind::params, xs,
                                 [a](const auto& v) { return as_var(v, gd::stack(v, a)); },
                                 [a](const Refs& t) { return concat_ref(t, a, true); }));
    }
    o.samples.push_back(sample("rank-0 inputs", gd::ops::kind::edge, {uniform({}, 119), uniform({}, 120)},
                               [](const auto& v) { return as_var(v, gd::stack(v, 0)); },
                               [](const Refs& t) { return concat_ref(t, 0, true); }));
    allocates(o, "the input list and its parts, ops/shape.hpp join");
    r.push_back(std::move(o));
  }
  {
    OpInfo o{.name = "slice"};
    auto slice_ref = [](const TensorD& x, Idx begin, Idx size) {
      const Idx d = dims(x.shape());
      for (size_t k = 0; k < d.size(); ++k)
        if (size[k] < 0) size[k] = d[k] - begin[k];
      return build(size, [&](const Idx& i) {
        Idx j = i;
        for (size_t k = 0; k < j.size(); ++k) j[k] += begin[k];
        return at(x, j);
      });
    };
    o.samples.push_back(sample("[3,2,4] begin {1,0,1} size {2,-1,2}", gd::ops::kind::plain, {uniform({3, 2, 4}, 121)},
                               [b = Idx{1, 0, 1}, s = Idx{2, -1, 2}](const auto& v) { return as_var(v, gd::slice(v[0], b, s)); },
                               [slice_ref](const Refs& t) { return slice_ref(t[0], {1, 0, 1}, {2, -1, 2}); }));
    o.samples.push_back(sample("the whole tensor; one element", gd::ops::kind::edge, {uniform({2, 3}, 122)},
                               [b = Idx{0, 0}, s = Idx{-1, -1}, b1 = Idx{1, 2}, s1 = Idx{1, 1}](const auto& v) {
                                 return as_var(v, gd::slice(v[0], b, s) * gd::slice(v[0], b1, s1));
                               },
                               [slice_ref](const Refs& t) {
                                 const double e = at(t[0], {1, 2});
                                 return map1(t[0], [e](double a) { return a * e; });
                               }));
    o.samples.push_back(sample("of tanh(x) * x", gd::ops::kind::fused, {uniform({3, 2}, 123)},
                               [b = Idx{1, 0}, s = Idx{2, -1}](const auto& v) { return as_var(v, gd::slice(gd::tanh(v[0]) * v[0], b, s)); },
                               [slice_ref](const Refs& t) {
                                 return slice_ref(map1(t[0], [](double a) { return std::tanh(a) * a; }), {1, 0}, {2, -1});
                               }));
    r.push_back(std::move(o));
  }
  {
    OpInfo o{.name = "gather"};
    const TensorI64 i2 = TensorI64::from({2, 0, 2, 1, 2, 2}, {3, 2}), i1 = TensorI64::from({1, 1, 0});
    o.samples.push_back(sample("[3,2] by [3,2] indices (repeated) on axis 0", gd::ops::kind::plain, {uniform({3, 2}, 124)},
                               [i2](const auto& v) { return as_var(v, gd::gather(v[0], on_device(i2), 0)); },
                               [i2](const Refs& t) { return gather_ref(t[0], i2, 0); }));
    o.samples.push_back(sample("[2,3,2] by [3] on axis 1", gd::ops::kind::params, {uniform({2, 3, 2}, 125)},
                               [i1](const auto& v) { return as_var(v, gd::gather(v[0], on_device(i1), 1)); },
                               [i1](const Refs& t) { return gather_ref(t[0], i1, 1); }));
    o.samples.push_back(sample("[2,3,2] by [3] on axis -1", gd::ops::kind::params, {uniform({2, 3, 2}, 126)},
                               [i = TensorI64::from({1, 0, 1})](const auto& v) { return as_var(v, gd::gather(v[0], on_device(i), -1)); },
                               [](const Refs& t) { return gather_ref(t[0], TensorI64::from({1, 0, 1}), 2); }));
    o.samples.push_back(sample("no indices", gd::ops::kind::edge, {uniform({3, 2}, 127)},
                               [i = TensorI64::zeros({0})](const auto& v) { return as_var(v, gd::gather(v[0], on_device(i), 0)); },
                               [](const Refs&) { return TensorD::zeros({0, 2}); }));
    r.push_back(std::move(o));
  }
  {
    OpInfo o{.name = "sparse_to_dense"};
    const TensorI64 idx = TensorI64::from({0, 1, 2, 3, 1, 0, 2, 0}, {4, 2});
    auto dense_ref = [idx](const TensorD& v, double dflt) {
      return build({3, 4}, [&](const Idx& i) {
        for (int64_t k = 0; k < 4; ++k)
          if (idx.data()[2 * k] == i[0] && idx.data()[2 * k + 1] == i[1]) return v.data()[k];
        return dflt;
      });
    };
    o.samples.push_back(sample("4 values in [3,4], default 0", gd::ops::kind::plain, {uniform({4}, 140)},
                               [idx](const auto& v) { return as_var(v, gd::sparse_to_dense(idx, {3, 4}, v[0])); },
                               [dense_ref](const Refs& t) { return dense_ref(t[0], 0.0); }));
    o.samples.push_back(sample("default -1.5", gd::ops::kind::params, {uniform({4}, 141)},
                               [idx](const auto& v) { return as_var(v, gd::sparse_to_dense(idx, {3, 4}, v[0], -1.5)); },
                               [dense_ref](const Refs& t) { return dense_ref(t[0], -1.5); }));
    o.samples.push_back(sample("no values", gd::ops::kind::edge, {TensorD::zeros({0})},
                               [i = TensorI64::zeros({0, 1})](const auto& v) { return as_var(v, gd::sparse_to_dense(i, {3}, v[0], 2.0)); },
                               [](const Refs&) { return values({2, 2, 2}, {3}); }));
    o.samples.push_back(sample("of exp(v) * 0.5", gd::ops::kind::fused, {uniform({4}, 142)},
                               [idx](const auto& v) { return as_var(v, gd::sparse_to_dense(idx, {3, 4}, gd::exp(v[0]) * 0.5)); },
                               [dense_ref](const Refs& t) { return dense_ref(map1(t[0], [](double a) { return std::exp(a) * 0.5; }), 0.0); }));
    r.push_back(std::move(o));
  }
  {
    OpInfo o{.name = "unsorted_segment_sum", .needs_fused = true};
    auto seg_ref = [](const TensorD& x, const TensorI64& ids, int64_t n) {
      const Idx xd = dims(x.shape());
      const int64_t k = ids.size(), inner = numel(xd) / std::max<int64_t>(k, 1);
      Idx od{n};
      for (size_t d = size_t(ids.rank()); d < xd.size(); ++d) od.push_back(xd[d]);
      return build(od, [&](const Idx& i) {
        double acc = 0;
        const int64_t col = numel(od) ? ravel(i, od) % inner : 0;
        for (int64_t j = 0; j < k; ++j)
          if (ids.data()[j] == i[0]) acc += x.data()[j * inner + col];
        return acc;
      });
    };
    const TensorI64 ids = TensorI64::from({0, 2, 0, 3});
    o.samples.push_back(sample("[4,3] rows into 5 segments (two empty, one repeated)", gd::ops::kind::plain, {uniform({4, 3}, 143)},
                               [ids](const auto& v) { return as_var(v, gd::unsorted_segment_sum(v[0], ids, 5)); },
                               [ids, seg_ref](const Refs& t) { return seg_ref(t[0], ids, 5); }));
    const TensorI64 ids2 = TensorI64::from({1, 0, 1, 1, 0, 2}, {3, 2});
    o.samples.push_back(sample("[3,2,2] by [3,2] ids", gd::ops::kind::params, {uniform({3, 2, 2}, 144)},
                               [ids2](const auto& v) { return as_var(v, gd::unsorted_segment_sum(v[0], ids2, 3)); },
                               [ids2, seg_ref](const Refs& t) { return seg_ref(t[0], ids2, 3); }));
    o.samples.push_back(sample("of x * x (a leaf used twice) * 0.5", gd::ops::kind::fused | gd::ops::kind::repeated, {uniform({4, 3}, 145)},
                               [ids](const auto& v) { return as_var(v, gd::unsorted_segment_sum(v[0] * v[0] * 0.5, ids, 4)); },
                               [ids, seg_ref](const Refs& t) { return seg_ref(map1(t[0], [](double a) { return a * a * 0.5; }), ids, 4); }));
    r.push_back(std::move(o));
  }
  {
    OpInfo o{.name = "embedding_lookup_sparse"};
    // 4 examples: ids {1, 3}, none, {2}, {0, 0, 4} (a repeated id), into a [5, 3] table
    const gd::SparseTensor<int64_t> sp{TensorI64::from({0, 0, 0, 1, 2, 0, 3, 0, 3, 1, 3, 2}, {6, 2}),
                                       TensorI64::from({1, 3, 2, 0, 0, 4}), {4, 3}};
    auto lookup_ref = [sp](const TensorD& table, const TensorD* w, gd::Combiner c) {
      return build({4, 3}, [&](const Idx& i) {
        double acc = 0, norm = 0;
        for (int64_t j = 0; j < sp.nnz(); ++j) {
          if (sp.indices.data()[2 * j] != i[0]) continue;
          const double wj = w ? w->data()[j] : 1.0;
          acc += wj * at(table, {sp.values.data()[j], i[1]});
          norm += c == gd::Combiner::mean ? wj : wj * wj;
        }
        return c == gd::Combiner::sum || norm == 0 ? acc : c == gd::Combiner::mean ? acc / norm : acc / std::sqrt(norm);
      });
    };
    for (gd::Combiner c : {gd::Combiner::sum, gd::Combiner::mean, gd::Combiner::sqrtn}) {
      const std::string name(gd::to_string(c));
      o.samples.push_back(sample("combiner " + name + ", no weights", c == gd::Combiner::mean ? gd::ops::kind::plain : gd::ops::kind::params,
                                 {uniform({5, 3}, 146)},
                                 [sp, c](const auto& v) { return as_var(v, gd::embedding_lookup_sparse(v[0], sp, c)); },
                                 [lookup_ref, c](const Refs& t) { return lookup_ref(t[0], nullptr, c); }));
      o.samples.push_back(sample("combiner " + name + ", weights (differentiable too)", gd::ops::kind::params,
                                 {uniform({5, 3}, 147), uniform({6}, 148, 0.5, 2)},
                                 [sp, c](const auto& v) { return as_var(v, gd::embedding_lookup_sparse(v[0], sp, v[1], c)); },
                                 [lookup_ref, c](const Refs& t) { return lookup_ref(t[0], &t[1], c); }));
    }
    o.samples.push_back(sample("of a table tanh(x), a SparseTensor of weights", gd::ops::kind::fused, {uniform({5, 3}, 149)},
                               [sp, wd = gd::SparseTensor<double>{sp.indices, TensorD::from({0.5, 2, 1, 1.5, 1, 0.25}), sp.dense_shape},
                                wf = gd::SparseTensor<float>{sp.indices, gd::Tensor<float>::from({0.5f, 2, 1, 1.5f, 1, 0.25f}), sp.dense_shape}](const auto& v) {
                                 using T = element_of<decltype(v)>;
                                 const auto& w = [&]() -> const gd::SparseTensor<T>& {
                                   if constexpr (std::is_same_v<T, float>) return wf; else return wd;
                                 }();
                                 return as_var(v, gd::embedding_lookup_sparse(gd::tanh(v[0]), sp, w, gd::Combiner::sqrtn));
                               },
                               [lookup_ref](const Refs& t) {
                                 const TensorD w = values({0.5, 2, 1, 1.5, 1, 0.25}, {6});
                                 return lookup_ref(map1(t[0], [](double a) { return std::tanh(a); }), &w, gd::Combiner::sqrtn);
                               }));
    r.push_back(std::move(o));
  }
  {
    OpInfo o{.name = "one_hot", .differentiable = false};
    const TensorI64 labels = TensorI64::from({2, 0, -1, 3, 1, 5}, {2, 3});  // -1 and 5 are out of range: rows of `off`
    o.samples.push_back(no_gradient(sample("[2,3] labels, depth 4, out-of-range ones", gd::ops::kind::edge, {},
                                           [labels](const auto& v) {
                                             using T = element_of<decltype(v)>;
                                             return gd::Var<T>::constant(gd::one_hot<T>(on_device(labels), 4));
                                           },
                                           [labels](const Refs&) {
                                             return build({2, 3, 4}, [&](const Idx& i) {
                                               return labels.data()[i[0] * 3 + i[1]] == i[2] ? 1.0 : 0.0;
                                             });
                                           })));
    o.samples.push_back(no_gradient(sample("on 2.5, off -1", gd::ops::kind::params, {},
                                           [l = TensorI64::from({1, 0})](const auto& v) {
                                             using T = element_of<decltype(v)>;
                                             return gd::Var<T>::constant(gd::one_hot<T>(on_device(l), 3, 2.5, -1.0));
                                           },
                                           [](const Refs&) { return values({-1, 2.5, -1, 2.5, -1, -1}, {2, 3}); })));
    r.push_back(std::move(o));
  }
  {
    OpInfo o{.name = "pad"};
    using P = std::vector<std::pair<int64_t, int64_t>>;
    auto pad_ref = [](const TensorD& x, const P& p, double c) {
      const Idx d = dims(x.shape());
      Idx od;
      for (size_t k = 0; k < d.size(); ++k) od.push_back(d[k] + p[k].first + p[k].second);
      return build(od, [&](const Idx& i) {
        Idx j = i;
        for (size_t k = 0; k < d.size(); ++k) {
          j[k] -= p[k].first;
          if (j[k] < 0 || j[k] >= d[k]) return c;
        }
        return at(x, j);
      });
    };
    const P p1{{1, 2}, {0, 0}, {2, 1}};
    o.samples.push_back(sample("[2,3,2] {{1,2},{0,0},{2,1}}", gd::ops::kind::plain, {uniform({2, 3, 2}, 128)},
                               [p1](const auto& v) { return as_var(v, gd::pad(v[0], p1)); },
                               [pad_ref, p1](const Refs& t) { return pad_ref(t[0], p1, 0); }));
    const P p2{{1, 1}, {0, 2}};
    o.samples.push_back(sample("[2,3] constant 0.5", gd::ops::kind::params, {uniform({2, 3}, 129)},
                               [p2](const auto& v) { return as_var(v, gd::pad(v[0], p2, 0.5)); },
                               [pad_ref, p2](const Refs& t) { return pad_ref(t[0], p2, 0.5); }));
    const P p0{{0, 0}, {0, 0}};
    o.samples.push_back(sample("no padding", gd::ops::kind::edge, {uniform({2, 3}, 130)}, [p0](const auto& v) { return as_var(v, gd::pad(v[0], p0)); },
                               [pad_ref, p0](const Refs& t) { return pad_ref(t[0], p0, 0); }));
    r.push_back(std::move(o));
  }
  {
    OpInfo o{.name = "cast"};
    o.samples.push_back(sample("double -> double (the input itself)", gd::ops::kind::plain, {uniform({2, 3}, 131)},
                               [](const auto& v) { return as_var(v, gd::cast<element_of<decltype(v)>>(v[0] * v[0])); },
                               [](const Refs& t) { return map1(t[0], [](double a) { return a * a; }); }));
    // through float and back: values rounded to float; the gradient is cast back (linear, so
    // central differences over a large step see only the rounding)
    OpSample f = sample("double -> float -> double", gd::ops::kind::params, {uniform({2, 3}, 132)},
                        [](const auto& v) {  // in float: float -> double -> float
                          using T = element_of<decltype(v)>;
                          using U = std::conditional_t<std::is_same_v<T, double>, float, double>;
                          return as_var(v, gd::cast<T>(gd::cast<U>(v[0]) * U(3)));
                        },
                        [](const Refs& t) { return map1(t[0], [](double a) { return double(float(a) * 3.0f); }); });
    r.push_back(std::move(o));
    r.back().samples.push_back(with_tol(std::move(f), 0, 1e-4, 1e-2));
  }
}

}  // namespace op_registry
