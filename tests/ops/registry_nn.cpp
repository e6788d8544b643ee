// Registry entries of conv2d (valid/same, strides, dilations, bias, 1x1), max_pool2d and
// avg_pool2d (valid/same, overlapping windows), dropout (fixed seeds) and lstm_sequence. References: direct
// loops over output pixels and taps with TensorFlow's padding rule, and the dropout mask drawn
// from the documented sequence (element i of the Philox stream keyed by one rng.next(), kept when
// below 1 - rate; Philox itself is checked against its published vectors in tests/core),
// lstm_sequence (the Keras LSTM equations as loops over steps, rows and units), and resampler
// (TensorFlow contrib's resampler_ops.cc rule: the four neighbours of each point weighted by
// their distances, zero outside the image, zero for a point outside (-1, W) x (-1, H)).
#include "op_registry.hpp"

namespace op_registry {
namespace {

using V = std::vector<VarD>;
using Refs = std::vector<TensorD>;

/// One spatial axis (TensorFlow): output size and padding before the input.
std::pair<int64_t, int64_t> window(int64_t in, int64_t k, int64_t stride, int64_t dilation, bool same) {
  const int64_t span = (k - 1) * dilation + 1;
  if (!same) return {(in - span) / stride + 1, 0};
  const int64_t out = (in + stride - 1) / stride;
  return {out, std::max<int64_t>((out - 1) * stride + span - in, 0) / 2};
}

/// out[n,oy,ox,f] = sum over taps and channels of x[n, oy*sh - ph + ky*dh, ox*sw - pw + kx*dw, c] w[ky,kx,c,f] (+ b[f]).
TensorD conv_ref(const TensorD& x, const TensorD& w, const TensorD* b, std::array<int64_t, 2> s, bool same, std::array<int64_t, 2> d) {
  const Idx xd = dims(x.shape()), wd = dims(w.shape());
  const auto [oh, ph] = window(xd[1], wd[0], s[0], d[0], same);
  const auto [ow, pw] = window(xd[2], wd[1], s[1], d[1], same);
  return build({xd[0], oh, ow, wd[3]}, [&](const Idx& i) {
    double acc = b ? b->data()[i[3]] : 0.0;
    for (int64_t ky = 0; ky < wd[0]; ++ky)
      for (int64_t kx = 0; kx < wd[1]; ++kx) {
        const int64_t y = i[1] * s[0] - ph + ky * d[0], xx = i[2] * s[1] - pw + kx * d[1];
        if (y < 0 || y >= xd[1] || xx < 0 || xx >= xd[2]) continue;
        for (int64_t c = 0; c < xd[3]; ++c) acc += at(x, {i[0], y, xx, c}) * at(w, {ky, kx, c, i[3]});
      }
    return acc;
  });
}

/// Max or mean over each window's real (unpadded) elements.
TensorD pool_ref(const TensorD& x, std::array<int64_t, 2> k, std::array<int64_t, 2> s, bool same, bool max) {
  const Idx xd = dims(x.shape());
  const auto [oh, ph] = window(xd[1], k[0], s[0], 1, same);
  const auto [ow, pw] = window(xd[2], k[1], s[1], 1, same);
  return build({xd[0], oh, ow, xd[3]}, [&](const Idx& i) {
    double acc = max ? -INFINITY : 0.0;
    int count = 0;
    for (int64_t ky = 0; ky < k[0]; ++ky)
      for (int64_t kx = 0; kx < k[1]; ++kx) {
        const int64_t y = i[1] * s[0] - ph + ky, xx = i[2] * s[1] - pw + kx;
        if (y < 0 || y >= xd[1] || xx < 0 || xx >= xd[2]) continue;
        const double v = at(x, {i[0], y, xx, i[3]});
        acc = max ? std::max(acc, v) : acc + v;
        ++count;
      }
    return max ? acc : acc / count;
  });
}

TensorD dropout_ref(const TensorD& x, double rate, uint64_t seed) {
  gd::Rng rng(seed);
  const uint64_t key = rng.next();
  TensorD out(x.shape());
  for (int64_t i = 0; i < x.size(); ++i)
    out.data()[i] = double(gd::philox_uniform(key, uint64_t(i))) < 1 - rate ? x.data()[i] / (1 - rate) : 0.0;
  return out;
}

/// The Keras LSTM written out: for each step, z = xp_t + h · r split into i, f, g, o;
/// c = σ(f) c + σ(i) tanh(g), h = σ(o) tanh(c). Returns every h [N, T, u], then the final h and
/// c, flattened into one vector.
TensorD lstm_ref(const TensorD& xp, const TensorD& r, const TensorD& h0, const TensorD& c0) {
  const int64_t n = xp.shape()[0], steps = xp.shape()[1], u = xp.shape()[2] / 4;
  std::vector<double> h(h0.data(), h0.data() + n * u), c(c0.data(), c0.data() + n * u), out;
  std::vector<double> seq(size_t(n * steps * u));
  auto sig = [](double v) { return 1 / (1 + std::exp(-v)); };
  for (int64_t t = 0; t < steps; ++t) {
    std::vector<double> hn(h.size());
    for (int64_t b = 0; b < n; ++b)
      for (int64_t j = 0; j < u; ++j) {
        double z[4];
        for (int64_t q = 0; q < 4; ++q) {
          z[q] = at(xp, {b, t, q * u + j});
          for (int64_t k = 0; k < u; ++k) z[q] += h[size_t(b * u + k)] * at(r, {k, q * u + j});
        }
        double& cc = c[size_t(b * u + j)];
        cc = sig(z[1]) * cc + sig(z[0]) * std::tanh(z[2]);
        hn[size_t(b * u + j)] = sig(z[3]) * std::tanh(cc);
        seq[size_t((b * steps + t) * u + j)] = hn[size_t(b * u + j)];
      }
    h = hn;
  }
  out = seq;
  out.insert(out.end(), h.begin(), h.end());
  out.insert(out.end(), c.begin(), c.end());
  const auto size = int64_t(out.size());
  return values(std::move(out), {size});
}

/// The samples' view of lstm_sequence's three outputs, h [N, T, u], h_final and c_final [N, u],
/// in one tensor without a copy that allocates: h + 2 h_final + 3 c_final (broadcast over T).
TensorD lstm_joined_ref(const TensorD& all, int64_t n, int64_t steps, int64_t u) {
  const double* seq = all.data();
  const double* hT = seq + n * steps * u;
  const double* cT = hT + n * u;
  return build({n, steps, u}, [&](const Idx& i) {
    return seq[(i[0] * steps + i[1]) * u + i[2]] + 2 * hT[i[0] * u + i[2]] + 3 * cT[i[0] * u + i[2]];
  });
}

/// resampler: out[b, q, c] from data [B, H, W, C] at warp[b, q] = (x, y), in double.
TensorD resample_ref(const TensorD& data, const TensorD& warp) {
  const Idx dd = dims(data.shape());
  Idx od = dims(warp.shape());
  od.back() = dd[3];
  const int64_t points = numel(od) / od[0] / dd[3];
  return build(od, [&](const Idx& i) {
    const int64_t b = i[0], c = i.back();
    int64_t q = 0;  // the point's position among its batch element's points
    for (size_t k = 1; k + 1 < i.size(); ++k) q = q * od[k] + i[k];
    const double x = warp.data()[(b * points + q) * 2], y = warp.data()[(b * points + q) * 2 + 1];
    if (!(x > -1 && y > -1 && x < double(dd[2]) && y < double(dd[1]))) return 0.0;
    const double fx = std::floor(x), fy = std::floor(y);
    auto pixel = [&](double px, double py) {
      const auto ix = int64_t(px), iy = int64_t(py);
      return ix >= 0 && iy >= 0 && ix < dd[2] && iy < dd[1] ? at(data, {b, iy, ix, c}) : 0.0;
    };
    const double wx = x - fx, wy = y - fy;  // the weights of the far neighbours
    return (1 - wx) * (1 - wy) * pixel(fx, fy) + wx * (1 - wy) * pixel(fx + 1, fy) + (1 - wx) * wy * pixel(fx, fy + 1) +
           wx * wy * pixel(fx + 1, fy + 1);
  });
}

/// Points in [lo, hi] for both coordinates, away from the integers (where the interpolation has
/// kinks) and from -1 and the far borders.
TensorD points(const gd::Shape& s, uint64_t seed, double lo, double hi) {
  std::vector<double> kinks;
  for (int k = int(std::floor(lo)); k <= int(std::ceil(hi)); ++k) kinks.push_back(k);
  return uniform(s, seed, lo, hi, kinks, 0.06);
}

}  // namespace

void add_nn(std::vector<OpInfo>& r) {
  {
    OpInfo o{.name = "conv2d", .needs_fused = true};
    struct Case {
      const char* label;
      gd::Shape x, w;
      std::array<int64_t, 2> s;
      bool same;
      std::array<int64_t, 2> d;
      unsigned kinds;
    };
    const Case cases[] = {
        {"valid, stride 1", {2, 5, 5, 3}, {3, 3, 3, 4}, {1, 1}, false, {1, 1}, gd::ops::kind::plain},
        {"same, stride 2", {1, 6, 7, 2}, {3, 3, 2, 3}, {2, 2}, true, {1, 1}, gd::ops::kind::params},
        {"same, strides {1,3}, even filter", {1, 5, 7, 2}, {2, 4, 2, 2}, {1, 3}, true, {1, 1}, gd::ops::kind::params},
        {"valid, dilation 2", {1, 7, 7, 2}, {2, 3, 2, 2}, {1, 1}, false, {2, 2}, gd::ops::kind::params},
        {"same, dilations {2,1}", {1, 5, 6, 1}, {3, 3, 1, 2}, {1, 1}, true, {2, 1}, gd::ops::kind::params},
        {"1x1 (pointwise)", {2, 3, 3, 4}, {1, 1, 4, 3}, {1, 1}, false, {1, 1}, gd::ops::kind::edge},
        {"filter as large as the input", {1, 3, 3, 2}, {3, 3, 2, 2}, {1, 1}, false, {1, 1}, gd::ops::kind::edge},
    };
    uint64_t seed = 200;
    for (const Case& c : cases) {
      const gd::Conv2dArgs opt{.strides = c.s, .padding = c.same ? gd::Padding::same : gd::Padding::valid, .dilations = c.d};
      o.samples.push_back(sample(c.label, c.kinds, {uniform(c.x, seed), uniform(c.w, seed + 1)},
                                 [opt](const auto& v) { return as_var(v, gd::conv2d(v[0], v[1], opt)); },
                                 [c](const Refs& t) { return conv_ref(t[0], t[1], nullptr, c.s, c.same, c.d); }));
      seed += 2;
    }
    const gd::Conv2dArgs same2{.strides = {1, 2}, .padding = gd::Padding::same};
    o.samples.push_back(sample("with bias, same, strides {1,2}", gd::ops::kind::params,
                               {uniform({2, 4, 5, 2}, 220), uniform({3, 3, 2, 3}, 221), uniform({3}, 222)},
                               [same2](const auto& v) { return as_var(v, gd::conv2d(v[0], v[1], v[2], same2)); },
                               [](const Refs& t) { return conv_ref(t[0], t[1], &t[2], {1, 2}, true, {1, 1}); }));
    o.samples.push_back(sample("tanh(conv2d(x * 0.5, w, b)) * 2", gd::ops::kind::fused,
                               {uniform({1, 4, 4, 2}, 223), uniform({2, 2, 2, 3}, 224), uniform({3}, 225)},
                               [](const auto& v) { return as_var(v, gd::tanh(gd::conv2d(v[0] * 0.5, v[1], v[2])) * 2.0); },
                               [](const Refs& t) {
                                 const TensorD y = conv_ref(map1(t[0], [](double a) { return a * 0.5; }), t[1], &t[2], {1, 1}, false, {1, 1});
                                 return map1(y, [](double a) { return std::tanh(a) * 2; });
                               }));
    r.push_back(std::move(o));
  }
  for (bool max : {true, false}) {
    OpInfo o{.name = max ? "max_pool2d" : "avg_pool2d", .needs_fused = true};
    struct Case {
      const char* label;
      gd::Shape x;
      std::array<int64_t, 2> k, s;
      bool same;
      unsigned kinds;
    };
    const Case cases[] = {
        {"2x2 stride 2, valid", {2, 4, 4, 3}, {2, 2}, {2, 2}, false, gd::ops::kind::plain},
        {"3x3 stride 2, same", {1, 5, 5, 2}, {3, 3}, {2, 2}, true, gd::ops::kind::params},
        {"3x3 stride 1 (overlapping), valid", {1, 4, 5, 2}, {3, 3}, {1, 1}, false, gd::ops::kind::params},
        {"3x3 stride 1, same", {1, 4, 4, 2}, {3, 3}, {1, 1}, true, gd::ops::kind::params},
        {"2x3 strides {1,2}, same", {2, 3, 5, 1}, {2, 3}, {1, 2}, true, gd::ops::kind::params},
        {"window = whole input", {1, 2, 3, 2}, {2, 3}, {2, 2}, false, gd::ops::kind::edge},
    };
    uint64_t seed = max ? 230 : 250;
    for (const Case& c : cases) {
      const gd::Pool2dOptions opt{.ksize = c.k, .strides = c.s, .padding = c.same ? gd::Padding::same : gd::Padding::valid};
      o.samples.push_back(sample(c.label, c.kinds, {uniform(c.x, seed++)},
                                 [opt, max](const auto& v) { return max ? as_var(v, gd::max_pool2d(v[0], opt)) : as_var(v, gd::avg_pool2d(v[0], opt)); },
                                 [c, max](const Refs& t) { return pool_ref(t[0], c.k, c.s, c.same, max); }));
    }
    o.samples.push_back(sample("of exp(x) * 0.5, default options", gd::ops::kind::fused, {uniform({1, 4, 4, 2}, seed)},
                               [max](const auto& v) {
                                 return max ? as_var(v, gd::max_pool2d(gd::exp(v[0]) * 0.5)) : as_var(v, gd::avg_pool2d(gd::exp(v[0]) * 0.5));
                               },
                               [max](const Refs& t) {
                                 return pool_ref(map1(t[0], [](double a) { return std::exp(a) * 0.5; }), {2, 2}, {2, 2}, false, max);
                               }));
    r.push_back(std::move(o));
  }
  {
    OpInfo o{.name = "dropout", .needs_fused = true};
    o.samples.push_back(sample("rate 0.3, seed 5", gd::ops::kind::plain, {uniform({4, 5}, 270)},
                               [](const auto& v) {
                                 gd::Rng rng(5);
                                 return as_var(v, gd::dropout(v[0], 0.3, rng));
                               },
                               [](const Refs& t) { return dropout_ref(t[0], 0.3, 5); }));
    o.samples.push_back(sample("rate 0.5 of x * 2 + 1, seed 9", gd::ops::kind::fused | gd::ops::kind::params, {uniform({3, 7}, 271)},
                               [](const auto& v) {
                                 gd::Rng rng(9);
                                 return as_var(v, gd::dropout(v[0] * 2.0 + 1.0, 0.5, rng));
                               },
                               [](const Refs& t) { return dropout_ref(map1(t[0], [](double a) { return a * 2 + 1; }), 0.5, 9); }));
    o.samples.push_back(sample("rate 0 and training = false: the identity", gd::ops::kind::edge, {uniform({2, 3}, 272)},
                               [](const auto& v) {
                                 gd::Rng rng(1);
                                 return as_var(v, gd::dropout(v[0], 0.0, rng) + gd::dropout(v[0], 0.9, rng, false));
                               },
                               [](const Refs& t) { return map1(t[0], [](double a) { return 2 * a; }); }));
    r.push_back(std::move(o));
  }
  {
    OpInfo o{.name = "resampler", .needs_fused = true};
    o.samples.push_back(sample("points inside, 3 channels", gd::ops::kind::plain,
                               {uniform({2, 4, 4, 3}, 300), points({2, 5, 2}, 301, -0.9, 3.9)},
                               [](const auto& v) { return as_var(v, gd::resampler(v[0], v[1])); },
                               [](const Refs& t) { return resample_ref(t[0], t[1]); }));
    o.samples.push_back(sample("a grid of points [B, 3, 4, 2], 2 channels, 5x6 image", gd::ops::kind::params,
                               {uniform({1, 5, 6, 2}, 302), points({1, 3, 4, 2}, 303, -0.7, 4.8)},
                               [](const auto& v) { return as_var(v, gd::resampler(v[0], v[1])); },
                               [](const Refs& t) { return resample_ref(t[0], t[1]); }));
    o.samples.push_back(sample("points across and beyond the border (zero padding, zero outside)", gd::ops::kind::edge,
                               {uniform({2, 3, 3, 2}, 304), points({2, 8, 2}, 305, -2.5, 4.5)},
                               [](const auto& v) { return as_var(v, gd::resampler(v[0], v[1])); },
                               [](const Refs& t) { return resample_ref(t[0], t[1]); }));
    o.samples.push_back(sample("one pixel, one channel", gd::ops::kind::edge,
                               {uniform({1, 1, 1, 1}, 306), points({1, 4, 2}, 307, -0.9, 0.9)},
                               [](const auto& v) { return as_var(v, gd::resampler(v[0], v[1])); },
                               [](const Refs& t) { return resample_ref(t[0], t[1]); }));
    o.samples.push_back(sample("of exp(data) * 0.5 at warp * 0.5 + 1", gd::ops::kind::fused,
                               {uniform({1, 4, 4, 2}, 308), points({1, 6, 2}, 309, -3.6, 3.6)},
                               [](const auto& v) { return as_var(v, gd::resampler(gd::exp(v[0]) * 0.5, v[1] * 0.5 + 1.0)); },
                               [](const Refs& t) {
                                 return resample_ref(map1(t[0], [](double a) { return std::exp(a) * 0.5; }),
                                                     map1(t[1], [](double a) { return a * 0.5 + 1; }));
                               }));
    r.push_back(std::move(o));
  }
  {
    OpInfo o{.name = "lstm_sequence"};
    struct Case {
      const char* label;
      int64_t n, steps, u;
      unsigned kinds;
    };
    const Case cases[] = {
        {"N=2, T=3, u=2", 2, 3, 2, gd::ops::kind::plain},
        {"N=3, T=5, u=3", 3, 5, 3, gd::ops::kind::plain},
        {"one step, one sequence, one unit", 1, 1, 1, gd::ops::kind::edge},
    };
    uint64_t seed = 280;
    for (const Case& c : cases) {
      o.samples.push_back(sample(c.label, c.kinds,
                                 {uniform({c.n, c.steps, 4 * c.u}, seed), uniform({c.u, 4 * c.u}, seed + 1, -1, 1),
                                  uniform({c.n, c.u}, seed + 2, -1, 1), uniform({c.n, c.u}, seed + 3, -1, 1)},
                                 [c](const auto& v) {
                                   auto out = gd::lstm_sequence(v[0], v[1], v[2], v[3]);
                                   const auto fin = gd::to_var(gd::reshape(gd::to_var(out.h_final * 2.0 + out.c_final * 3.0), {c.n, 1, c.u}));
                                   return as_var(v, out.h + fin);
                                 },
                                 [c](const Refs& t) { return lstm_joined_ref(lstm_ref(t[0], t[1], t[2], t[3]), c.n, c.steps, c.u); }));
      seed += 4;
    }
    o.samples.push_back(sample("of xp * 0.5 with the final state alone", gd::ops::kind::edge,
                               {uniform({2, 3, 8}, 295), uniform({2, 8}, 296, -1, 1), uniform({2, 2}, 297, -1, 1),
                                uniform({2, 2}, 298, -1, 1)},
                               [](const auto& v) {
                                 auto out = gd::lstm_sequence(gd::to_var(v[0] * 0.5), v[1], v[2], v[3]);
                                 return as_var(v, out.h_final + out.c_final * 2.0);
                               },
                               [](const Refs& t) {
                                 const TensorD all = lstm_ref(map1(t[0], [](double a) { return a * 0.5; }), t[1], t[2], t[3]);
                                 return build({2, 2}, [&](const Idx& i) { return all.data()[12 + i[0] * 2 + i[1]] + 2 * all.data()[16 + i[0] * 2 + i[1]]; });
                               }));
    // nn::LSTM's form: xp = x · kernel, the bias [4u] added inside the op
    o.samples.push_back(sample("with the bias inside the op", gd::ops::kind::plain,
                               {uniform({3, 4, 8}, 299), uniform({2, 8}, 300, -1, 1), uniform({8}, 301, -1, 1),
                                uniform({3, 2}, 302, -1, 1), uniform({3, 2}, 303, -1, 1)},
                               [](const auto& v) {
                                 auto out = gd::lstm_sequence(v[0], v[1], v[2], v[3], v[4]);
                                 const auto fin = gd::to_var(gd::reshape(gd::to_var(out.h_final * 2.0 + out.c_final * 3.0), {3, 1, 2}));
                                 return as_var(v, out.h + fin);
                               },
                               [](const Refs& t) {
                                 const TensorD xb = build({3, 4, 8}, [&](const Idx& i) {
                                   return t[0].data()[(i[0] * 4 + i[1]) * 8 + i[2]] + t[2].data()[i[2]];
                                 });
                                 return lstm_joined_ref(lstm_ref(xb, t[1], t[3], t[4]), 3, 4, 2);
                               }));
    r.push_back(std::move(o));
  }
}

}  // namespace op_registry
