// conv2d, max_pool2d, avg_pool2d: forward values against direct nested-loop references written
// here from TensorFlow's definitions (double), gradients against central differences and against
// reference backward loops on shapes large enough to take the tiled, multi-threaded paths.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include <gradus/gradus.hpp>
#include <gradus/testing/catch_matchers.hpp>
#include <gradus/nn.hpp>
#include "gradus/ops/conv.hpp"
#include "gradus/ops/pool.hpp"

namespace gd = gradus;

namespace {

using TensorD = gd::Tensor<double>;
using VarD = gd::Var<double>;
using Catch::Contains;

TensorD rand_t(const gd::Shape& s, uint64_t seed) {
  gd::Rng rng(seed);
  return TensorD::random_normal(s, rng);
}

/// TF's output size and padding before, for one axis.
struct Axis {
  int64_t out, pad;
};
Axis tf_axis(int64_t in, int64_t k, int64_t s, int64_t d, bool same) {
  const int64_t span = (k - 1) * d + 1;
  if (!same) return {(in - span + s) / s, 0};  // ceil((in - span + 1) / s)
  const int64_t out = (in + s - 1) / s;
  return {out, std::max<int64_t>((out - 1) * s + span - in, 0) / 2};
}

struct ConvCase {
  gd::Shape x, w;
  gd::Conv2dArgs o;
};

/// Direct convolution; with `g` given, also its reference gradients into dx and dw.
void naive_conv(const TensorD& x, const TensorD& w, const gd::Conv2dArgs& o, TensorD* y, const TensorD* g = nullptr, TensorD* dx = nullptr,
                TensorD* dw = nullptr) {
  const auto& xs = x.shape();
  const auto& ws = w.shape();
  const bool same = o.padding == gd::Padding::same;
  const Axis ah = tf_axis(xs[1], ws[0], o.strides[0], o.dilations[0], same);
  const Axis aw = tf_axis(xs[2], ws[1], o.strides[1], o.dilations[1], same);
  if (y) *y = TensorD::zeros({xs[0], ah.out, aw.out, ws[3]});
  if (dx) *dx = TensorD::zeros(xs);
  if (dw) *dw = TensorD::zeros(ws);
  // row-major NHWC / HWCF offsets by hand (the test area builds at -O0, where x(n, h, w, c) is slow)
  const int64_t H = xs[1], W = xs[2], C = xs[3], KW = ws[1], F = ws[3];
  auto at_x = [&](int64_t n, int64_t h, int64_t v, int64_t c) { return ((n * H + h) * W + v) * C + c; };
  auto at_w = [&](int64_t i, int64_t j, int64_t c, int64_t f) { return ((i * KW + j) * C + c) * F + f; };
  auto at_y = [&](int64_t n, int64_t h, int64_t v, int64_t f) { return ((n * ah.out + h) * aw.out + v) * F + f; };
  const double *xd = x.data(), *wd = w.data(), *gd_ = g ? g->data() : nullptr;
  double *yd = y ? y->data() : nullptr, *dxd = dx ? dx->data() : nullptr, *dwd = dw ? dw->data() : nullptr;
  for (int64_t n = 0; n < xs[0]; ++n)
    for (int64_t oy = 0; oy < ah.out; ++oy)
      for (int64_t ox = 0; ox < aw.out; ++ox)
        for (int64_t f = 0; f < F; ++f)
          for (int64_t i = 0; i < ws[0]; ++i)
            for (int64_t j = 0; j < KW; ++j) {
              const int64_t iy = oy * o.strides[0] - ah.pad + i * o.dilations[0];
              const int64_t ix = ox * o.strides[1] - aw.pad + j * o.dilations[1];
              if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
              const int64_t yo = at_y(n, oy, ox, f);
              for (int64_t c = 0; c < C; ++c) {
                const int64_t xo = at_x(n, iy, ix, c), wo = at_w(i, j, c, f);
                if (yd) yd[yo] += xd[xo] * wd[wo];
                if (dxd) dxd[xo] += gd_[yo] * wd[wo];
                if (dwd) dwd[wo] += gd_[yo] * xd[xo];
              }
            }
}

/// Direct pooling over the real (unpadded) elements of each window; with `g` given, the
/// reference gradient (max: to the first maximal element in row-major window order).
void naive_pool(const TensorD& x, const gd::Pool2dOptions& o, bool max, TensorD* y, const TensorD* g = nullptr, TensorD* dx = nullptr) {
  const auto& xs = x.shape();
  const bool same = o.padding == gd::Padding::same;
  const Axis ah = tf_axis(xs[1], o.ksize[0], o.strides[0], 1, same);
  const Axis aw = tf_axis(xs[2], o.ksize[1], o.strides[1], 1, same);
  *y = TensorD::zeros({xs[0], ah.out, aw.out, xs[3]});
  if (dx) *dx = TensorD::zeros(xs);
  for (int64_t n = 0; n < xs[0]; ++n)
    for (int64_t oy = 0; oy < ah.out; ++oy)
      for (int64_t ox = 0; ox < aw.out; ++ox)
        for (int64_t c = 0; c < xs[3]; ++c) {
          double best = -std::numeric_limits<double>::infinity(), sum = 0;
          int64_t by = -1, bx = -1, count = 0;
          for (int64_t i = 0; i < o.ksize[0]; ++i)
            for (int64_t j = 0; j < o.ksize[1]; ++j) {
              const int64_t iy = oy * o.strides[0] - ah.pad + i, ix = ox * o.strides[1] - aw.pad + j;
              if (iy < 0 || iy >= xs[1] || ix < 0 || ix >= xs[2]) continue;
              const double v = x(n, iy, ix, c);
              if (v > best) best = v, by = iy, bx = ix;
              sum += v, ++count;
            }
          (*y)(n, oy, ox, c) = max ? best : sum / double(count);
          if (!dx) continue;
          const double gv = (*g)(n, oy, ox, c);
          if (max) {
            (*dx)(n, by, bx, c) += gv;
            continue;
          }
          for (int64_t i = 0; i < o.ksize[0]; ++i)
            for (int64_t j = 0; j < o.ksize[1]; ++j) {
              const int64_t iy = oy * o.strides[0] - ah.pad + i, ix = ox * o.strides[1] - aw.pad + j;
              if (iy >= 0 && iy < xs[1] && ix >= 0 && ix < xs[2]) (*dx)(n, iy, ix, c) += gv / double(count);
            }
        }
}

double max_diff(const TensorD& a, const TensorD& b) {
  REQUIRE(a.shape() == b.shape());
  double d = 0;
  for (int64_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(a.data()[i] - b.data()[i]));
  return d;
}

std::string describe(const ConvCase& c) {
  return gd::detail::str("x ", c.x, " w ", c.w, " strides ", c.o.strides[0], ",", c.o.strides[1], " dilations ",
                         c.o.dilations[0], ",", c.o.dilations[1], " ", gd::detail::padding_name(c.o.padding));
}

constexpr auto same = gd::Padding::same;
constexpr auto valid = gd::Padding::valid;

/// Small cases for the gradient check: odd and even sizes, strides 1 and 2, dilation, 1x1.
const std::vector<ConvCase> small_cases = {
    {{2, 5, 6, 2}, {3, 3, 2, 3}, {}},
    {{1, 5, 6, 2}, {3, 2, 2, 2}, {.padding = same}},
    {{2, 6, 5, 1}, {3, 3, 1, 2}, {.strides = {2, 2}, .padding = same}},
    {{1, 7, 7, 2}, {2, 2, 2, 2}, {.strides = {2, 2}, .padding = same}},
    {{1, 7, 6, 2}, {3, 2, 2, 2}, {.strides = {2, 1}, .padding = valid}},
    {{1, 7, 8, 1}, {3, 3, 1, 2}, {.padding = same, .dilations = {2, 2}}},
    {{1, 7, 7, 2}, {2, 3, 2, 2}, {.padding = valid, .dilations = {2, 1}}},
    {{1, 8, 7, 2}, {3, 3, 2, 2}, {.strides = {2, 2}, .padding = same, .dilations = {1, 2}}},
    {{2, 7, 6, 1}, {5, 5, 1, 2}, {.padding = same}},  // one input channel: unrolled short filter rows
    {{2, 4, 3, 3}, {1, 1, 3, 2}, {}},                 // pointwise: one GEMM, no im2col
    {{1, 5, 5, 2}, {1, 1, 2, 2}, {.strides = {2, 2}, .padding = same}},  // 1x1 strided
};

}  // namespace

TEST_CASE("conv2d: output shapes and padding follow TensorFlow", "[nnops][conv]") {
  const TensorD w5 = TensorD::ones({5, 5, 1, 4});
  REQUIRE(gd::conv2d(TensorD::ones({2, 28, 28, 1}), w5, {.padding = same}).shape() == gd::Shape{2, 28, 28, 4});
  REQUIRE(gd::conv2d(TensorD::ones({2, 28, 28, 1}), w5).shape() == gd::Shape{2, 24, 24, 4});
  REQUIRE(gd::conv2d(TensorD::ones({1, 13, 13, 1}), TensorD::ones({6, 6, 1, 1}), {.strides = {5, 5}, .padding = same}).shape() ==
          gd::Shape{1, 3, 3, 1});
  REQUIRE(gd::conv2d(TensorD::ones({1, 13, 13, 1}), TensorD::ones({6, 6, 1, 1}), {.strides = {5, 5}}).shape() ==
          gd::Shape{1, 2, 2, 1});
  REQUIRE(gd::conv2d(TensorD::ones({1, 9, 9, 1}), TensorD::ones({3, 3, 1, 1}), {.dilations = {2, 2}}).shape() ==
          gd::Shape{1, 5, 5, 1});

  // 4x4 input 1..16, 3x3 ones, SAME: each output sums its clipped 3x3 neighbourhood
  const TensorD x = gd::eval(TensorD::arange(16).reshape({1, 4, 4, 1}) + 1.0);
  const TensorD y = gd::conv2d(x, TensorD::ones({3, 3, 1, 1}), {.padding = same});
  REQUIRE(y(0, 0, 0, 0) == 1 + 2 + 5 + 6);
  REQUIRE(y(0, 1, 1, 0) == 1 + 2 + 3 + 5 + 6 + 7 + 9 + 10 + 11);
  REQUIRE(y(0, 3, 3, 0) == 11 + 12 + 15 + 16);
  // even kernel, SAME, stride 1: pad_total 1 goes after (pad_before = 0)
  const TensorD y2 = gd::conv2d(x, TensorD::ones({2, 2, 1, 1}), {.padding = same});
  REQUIRE(y2(0, 0, 0, 0) == 1 + 2 + 5 + 6);
  REQUIRE(y2(0, 3, 3, 0) == 16);
  // stride 2, SAME on 4x4 with 3x3: out 2, pad_total 1, pad_before 0
  const TensorD y3 = gd::conv2d(x, TensorD::ones({3, 3, 1, 1}), {.strides = {2, 2}, .padding = same});
  REQUIRE(y3.shape() == gd::Shape{1, 2, 2, 1});
  REQUIRE(y3(0, 0, 0, 0) == 1 + 2 + 3 + 5 + 6 + 7 + 9 + 10 + 11);
  REQUIRE(y3(0, 1, 1, 0) == 11 + 12 + 15 + 16);
}

TEST_CASE("conv2d and pooling: extreme strides, dilations and windows give TensorFlow's shapes or a clear error",
          "[nnops][conv]") {
  constexpr int64_t big = std::numeric_limits<int64_t>::max();
  // SAME with the largest stride: one output (TF: ceil(5 / stride) = 1, no padding), not [1,0,0,4]
  const TensorD y = gd::conv2d(TensorD::ones({1, 5, 5, 2}), TensorD::ones({3, 3, 2, 4}),
                               {.strides = {big, big}, .padding = same});
  REQUIRE(y.shape() == gd::Shape{1, 1, 1, 4});
  CHECK(y(0, 0, 0, 3) == 3 * 3 * 2);  // the window at the origin: 3 x 3 x 2 ones
  const TensorD a = gd::avg_pool2d(TensorD::ones({1, 5, 5, 2}), {.ksize = {2, 2}, .strides = {big, big}, .padding = same});
  REQUIRE(a.shape() == gd::Shape{1, 1, 1, 2});
  CHECK(a(0, 0, 0, 1) == 1.0);
  const TensorD m = gd::max_pool2d(TensorD::ones({1, 5, 5, 2}), {.ksize = {2, 2}, .strides = {big, big}});
  REQUIRE(m.shape() == gd::Shape{1, 1, 1, 2});
  // Dilated windows past gd::kMaxWindowSpan (2^62 + 1 and more) are a value_error, with either padding.
  for (gd::Padding p : {gd::Padding::valid, same})
    CHECK_THROWS_WITH(gd::conv2d(TensorD::ones({1, 5, 5, 2}), TensorD::ones({3, 3, 2, 4}),
                                 {.padding = p, .dilations = {int64_t(1) << 62, 1}}),
                      Contains("conv2d: the dilated window (3 - 1) x dilation 4611686018427387904 + 1 exceeds"));
  // 2^60 fits (span 2^61 + 1): with valid padding it is larger than the input, a shape_error as for any such window
  CHECK_THROWS_AS(gd::conv2d(TensorD::ones({1, 5, 5, 2}), TensorD::ones({3, 3, 2, 4}), {.dilations = {int64_t(1) << 60, 1}}),
                  gd::shape_error);
  // ...and with same padding every tap but the centre falls in the padding
  const TensorD d = gd::conv2d(TensorD::ones({1, 5, 5, 2}), TensorD::ones({3, 3, 2, 4}),
                               {.padding = same, .dilations = {int64_t(1) << 60, int64_t(1) << 60}});
  REQUIRE(d.shape() == gd::Shape{1, 5, 5, 4});
  CHECK(d(0, 2, 2, 0) == 2.0);
  CHECK_THROWS_WITH(gd::avg_pool2d(TensorD::ones({1, 5, 5, 2}), {.ksize = {big, 2}, .padding = same}),
                    Contains("exceeds"));
}

TEST_CASE("conv2d: forward matches a direct convolution", "[nnops][conv]") {
  std::vector<ConvCase> cases = small_cases;
  cases.push_back({{3, 11, 10, 3}, {5, 5, 3, 4}, {.padding = same}});
  cases.push_back({{2, 12, 9, 2}, {4, 3, 2, 3}, {.strides = {3, 2}, .padding = same, .dilations = {1, 2}}});
  cases.push_back({{2, 9, 9, 1}, {7, 7, 1, 3}, {.strides = {2, 1}, .padding = same, .dilations = {2, 1}}});
  cases.push_back({{2, 8, 9, 1}, {3, 3, 1, 2}, {.padding = valid}});
  for (const ConvCase& c : cases) {
    INFO(describe(c));
    const TensorD x = rand_t(c.x, 1), w = rand_t(c.w, 2);
    TensorD ref;
    naive_conv(x, w, c.o, &ref);
    CHECK(max_diff(gd::conv2d(x, w, c.o), ref) < 1e-12);
    // bias: added to every output position of its channel
    const TensorD b = rand_t({c.w[3]}, 3);
    const TensorD yb = gd::conv2d(x, w, b, c.o);
    CHECK(max_diff(yb, gd::eval(ref + b)) < 1e-12);
  }
}

TEST_CASE("conv2d: gradients match central differences", "[nnops][conv]") {
  gd::Conv2dArgs o;
  auto f = [&o](const VarD& x, const VarD& w) { return gd::conv2d(x, w, o); };
  for (const ConvCase& c : small_cases) {
    INFO(describe(c));
    o = c.o;
    CHECK_THAT(f, gd::testing::GradientIsCorrect({rand_t(c.x, 4), rand_t(c.w, 5)}, 1e-7, {.delta = 1e-6}));
  }
  // with a bias, and with an elementwise input and a repeated use (accumulating adjoints)
  o = {.strides = {2, 1}, .padding = same};
  auto fb = [&o](const VarD& x, const VarD& w, const VarD& b) {
    return gd::conv2d(x * x, w, b, o) + gd::conv2d(x, w, b, o);
  };
  CHECK_THAT(fb, gd::testing::GradientIsCorrect({rand_t({2, 5, 4, 2}, 6), rand_t({3, 2, 2, 3}, 7), rand_t({3}, 8)},
                                                1e-7, {.delta = 1e-6}));
}

TEST_CASE("conv2d: gradients on large shapes (tiled, threaded) match direct loops", "[nnops][conv]") {
  const std::vector<ConvCase> cases = {
      {{6, 20, 19, 8}, {3, 3, 8, 5}, {.padding = same}},
      {{5, 17, 18, 6}, {5, 4, 6, 4}, {.strides = {2, 2}, .padding = same, .dilations = {1, 2}}},
      {{4, 16, 16, 16}, {1, 1, 16, 8}, {}},
      {{6, 28, 28, 1}, {5, 5, 1, 8}, {.padding = same}},
  };
  for (const ConvCase& c : cases) {
    INFO(describe(c));
    const VarD x(rand_t(c.x, 9)), w(rand_t(c.w, 10)), b(rand_t({c.w[3]}, 11));
    const VarD y = gd::conv2d(x, w, b, c.o);
    const TensorD g = rand_t(y.shape(), 12);
    const std::vector<TensorD> grads = gd::gradients(y, {x, w, b}, &g);
    TensorD ref, dx, dw;
    naive_conv(x.value(), w.value(), c.o, &ref, &g, &dx, &dw);
    CHECK(max_diff(y.value(), gd::eval(ref + b.value())) < 1e-11);
    CHECK(max_diff(grads[0], dx) < 1e-11);
    CHECK(max_diff(grads[1], dw) < 1e-10);
    CHECK(max_diff(grads[2], gd::sum(g, {0, 1, 2})) < 1e-10);
    // only the filter (an input that is a plain tensor): rows split without image alignment
    const VarD y2 = gd::conv2d(x.value(), w, c.o);
    CHECK(max_diff(gd::gradients(y2, {w}, &g)[0], dw) < 1e-10);
  }
}

/// Reference values and gradients of max(conv2d(x, w) + b, 0) for output adjoint g: direct loops,
/// the adjoint masked where the output is not positive.
void naive_conv_bias_relu(const TensorD& x, const TensorD& w, const TensorD& b, const gd::Conv2dArgs& o, const TensorD& g, TensorD* y, TensorD* dx,
                          TensorD* dw, TensorD* db) {
  TensorD z;
  naive_conv(x, w, o, &z);
  *y = TensorD::zeros(z.shape());
  TensorD gm = TensorD::zeros(z.shape());
  *db = TensorD::zeros(b.shape());
  const int64_t F = b.size();
  for (int64_t i = 0; i < z.size(); ++i) {
    const double v = z.data()[i] + b.data()[i % F];
    y->data()[i] = v > 0 ? v : 0;
    gm.data()[i] = v > 0 ? g.data()[i] : 0;
    db->data()[i % F] += gm.data()[i];
  }
  naive_conv(x, w, o, nullptr, &gm, dx, dw);
}

TEST_CASE("conv2d_bias_relu (the fused ReLU convolution) matches direct loops and central differences",
          "[nnops][conv]") {
  std::vector<ConvCase> cases = small_cases;
  cases.push_back({{6, 20, 19, 8}, {3, 3, 8, 5}, {.padding = same}});                      // tiled, threaded
  cases.push_back({{5, 17, 18, 6}, {5, 4, 6, 4}, {.strides = {2, 2}, .padding = same}});
  cases.push_back({{6, 28, 28, 1}, {5, 5, 1, 32}, {}});                                    // LeNet's first layer
  cases.push_back({{4, 12, 12, 32}, {5, 5, 32, 64}, {}});                                  // and its second
  cases.push_back({{4, 16, 16, 16}, {1, 1, 16, 8}, {}});                                   // pointwise
  for (const ConvCase& c : cases) {
    INFO(describe(c));
    const VarD x(rand_t(c.x, 31)), w(rand_t(c.w, 32)), b(rand_t({c.w[3]}, 33));
    const VarD y = gd::detail::conv2d_bias_relu(x, w, b, c.o);
    const TensorD g = rand_t(y.shape(), 34);
    TensorD ref, dx, dw, db;
    naive_conv_bias_relu(x.value(), w.value(), b.value(), c.o, g, &ref, &dx, &dw, &db);
    CHECK(max_diff(y.value(), ref) < 1e-11);
    const std::vector<TensorD> grads = gd::gradients(y, {x, w, b}, &g);
    CHECK(max_diff(grads[0], dx) < 1e-10);
    CHECK(max_diff(grads[1], dw) < 1e-9);
    CHECK(max_diff(grads[2], db) < 1e-10);
    // without dinput (a plain tensor input), and with only the bias wanted
    const VarD y2 = gd::detail::conv2d_bias_relu(x.value(), w, b, c.o);
    const std::vector<TensorD> g2 = gd::gradients(y2, {w, b}, &g);
    CHECK(max_diff(g2[0], dw) < 1e-9);
    CHECK(max_diff(g2[1], db) < 1e-10);
    const VarD y3 = gd::detail::conv2d_bias_relu(x.value(), w.value(), b, c.o);
    CHECK(max_diff(gd::gradients(y3, {b}, &g)[0], db) < 1e-10);
  }
  gd::Conv2dArgs o;
  auto f = [&o](const VarD& x, const VarD& w, const VarD& b) { return gd::detail::conv2d_bias_relu(x, w, b, o); };
  for (const ConvCase& c : small_cases) {
    INFO(describe(c));
    o = c.o;
    CHECK_THAT(f, gd::testing::GradientIsCorrect({rand_t(c.x, 35), rand_t(c.w, 36), rand_t({c.w[3]}, 37)}, 1e-7,
                                                 {.delta = 1e-6}));
  }
  // adjoints accumulate: the input used twice
  o = {.padding = same};
  auto f2 = [&o](const VarD& x, const VarD& w, const VarD& b) {
    return gd::detail::conv2d_bias_relu(x * x, w, b, o) + gd::detail::conv2d_bias_relu(x, w, b, o);
  };
  CHECK_THAT(f2, gd::testing::GradientIsCorrect({rand_t({2, 5, 4, 2}, 38), rand_t({3, 2, 2, 3}, 39), rand_t({3}, 40)},
                                                1e-7, {.delta = 1e-6}));
  // float on LeNet's shapes against the double reference
  for (const ConvCase& c : {ConvCase{{16, 28, 28, 1}, {5, 5, 1, 32}, {}}, ConvCase{{8, 12, 12, 32}, {5, 5, 32, 64}, {}}}) {
    INFO(describe(c));
    const TensorD xd = rand_t(c.x, 41), wd = gd::eval(rand_t(c.w, 42) * 0.2), bd = rand_t({c.w[3]}, 43);
    gd::Var<float> xf(gd::cast<float>(xd)), wf(gd::cast<float>(wd)), bf(gd::cast<float>(bd));
    const gd::Var<float> yf = gd::detail::conv2d_bias_relu(xf, wf, bf, c.o);
    const TensorD g = rand_t(yf.shape(), 44);
    const gd::Tensor<float> gfl = gd::cast<float>(g);
    const std::vector<gd::Tensor<float>> gf = gd::gradients(yf, {xf, wf, bf}, &gfl);
    TensorD ref, dx, dw, db;
    naive_conv_bias_relu(xd, wd, bd, c.o, g, &ref, &dx, &dw, &db);
    CHECK(max_diff(gd::cast<double>(yf.value()), ref) < 1e-3);
    CHECK(max_diff(gd::cast<double>(gf[0]), dx) < 1e-3);
    CHECK(max_diff(gd::cast<double>(gf[1]), dw) < 2e-2);
    CHECK(max_diff(gd::cast<double>(gf[2]), db) < 2e-2);
  }
}

TEST_CASE("nn::Conv2d with ReLU (the fused op) equals conv2d, bias and relu composed", "[nnops][conv]") {
  gd::Rng rng(5);
  gd::nn::Conv2d<double> fused({.in = 3, .filters = 6, .kernel_size = {3, 3}, .padding = same,
                                .activation = gd::nn::relu}, rng);
  fused.bias().value() = rand_t({6}, 45);
  const VarD x(rand_t({2, 7, 6, 3}, 46));
  const VarD y = fused.forward(x);
  const VarD ref = gd::relu(gd::conv2d(x, fused.kernel(), fused.bias(), {.padding = same}));
  CHECK(max_diff(y.value(), ref.value()) < 1e-12);
  const TensorD g = rand_t(y.shape(), 47);
  const auto a = gd::gradients(y, {x, fused.kernel(), fused.bias()}, &g);
  const auto r = gd::gradients(ref, {x, fused.kernel(), fused.bias()}, &g);
  for (int i = 0; i < 3; ++i) CHECK(max_diff(a[size_t(i)], r[size_t(i)]) < 1e-12);
}

TEST_CASE("conv2d: backward accumulates into .grad(); float agrees with double", "[nnops][conv]") {
  const gd::Conv2dArgs o{.strides = {2, 2}, .padding = same};
  VarD x(rand_t({2, 9, 9, 3}, 13)), w(rand_t({3, 3, 3, 4}, 14));
  gd::backward(gd::conv2d(x, w, o));
  const TensorD gx = x.grad().clone(), gw = w.grad().clone();
  gd::backward(gd::conv2d(x, w, o));
  CHECK(max_diff(x.grad(), gd::eval(gx * 2.0)) < 1e-12);
  CHECK(max_diff(w.grad(), gd::eval(gw * 2.0)) < 1e-12);

  const ConvCase c{{8, 28, 28, 4}, {5, 5, 4, 8}, {.padding = same}};
  const TensorD xd = rand_t(c.x, 15), wd = rand_t(c.w, 16);
  gd::Var<float> xf(gd::cast<float>(xd)), wf(gd::cast<float>(wd));
  const gd::Var<float> yf = gd::conv2d(xf, wf, c.o);
  gd::backward(yf);
  const TensorD ones = TensorD::ones(yf.shape());
  TensorD ref, dx, dw;
  naive_conv(xd, wd, c.o, &ref, &ones, &dx, &dw);
  CHECK(max_diff(gd::cast<double>(yf.value()), ref) < 1e-3);
  CHECK(max_diff(gd::cast<double>(xf.grad()), dx) < 1e-3);
  CHECK(max_diff(gd::cast<double>(wf.grad()), dw) < 1e-2);
}

TEST_CASE("conv2d: results and errors", "[nnops][conv]") {
  const TensorD x = TensorD::ones({2, 8, 8, 3});
  static_assert(std::is_same_v<decltype(gd::conv2d(x, x)), TensorD>);
  static_assert(std::is_same_v<decltype(gd::conv2d(VarD(x), x)), VarD>);
  REQUIRE_THROWS_AS(gd::conv2d(x, TensorD::ones({5, 5, 1, 32})), gd::shape_error);
  REQUIRE_THROWS_WITH(gd::conv2d(x, TensorD::ones({5, 5, 1, 32})),
                      "conv2d: input channels 3 differ from filter in_channels 1: [2,8,8,3] vs [5,5,1,32]");
  REQUIRE_THROWS_AS(gd::conv2d(TensorD::ones({8, 8, 3}), TensorD::ones({3, 3, 3, 1})), gd::shape_error);
  REQUIRE_THROWS_WITH(gd::conv2d(TensorD::ones({8, 8, 3}), TensorD::ones({3, 3, 3, 1})), Contains("input must have rank 4"));
  REQUIRE_THROWS_WITH(gd::conv2d(x, TensorD::ones({3, 3, 3})), Contains("filter must have rank 4 [KH,KW,C,F], got [3,3,3]"));
  REQUIRE_THROWS_AS(gd::conv2d(x, TensorD::ones({9, 3, 3, 1})), gd::shape_error);
  REQUIRE_THROWS_WITH(gd::conv2d(x, TensorD::ones({9, 3, 3, 1})), Contains("larger than the input 8x8 with valid padding"));
  REQUIRE_THROWS_AS(gd::conv2d(x, TensorD::ones({3, 3, 3, 1}), {.dilations = {4, 1}}), gd::shape_error);
  REQUIRE_NOTHROW(gd::conv2d(x, TensorD::ones({9, 3, 3, 1}), {.padding = same}));
  REQUIRE_THROWS_AS(gd::conv2d(x, TensorD::ones({3, 3, 3, 1}), {.strides = {0, 1}}), gd::value_error);
  REQUIRE_THROWS_WITH(gd::conv2d(x, TensorD::ones({3, 3, 3, 1}), {.strides = {0, 1}}),
                      Contains("conv2d: strides must be positive, got [0,1]"));
  REQUIRE_THROWS_AS(gd::conv2d(x, TensorD::ones({3, 3, 3, 1}), {.dilations = {1, -1}}), gd::value_error);
  REQUIRE_THROWS_AS(gd::conv2d(x, TensorD::ones({3, 3, 3, 2}), TensorD::ones({3})), gd::shape_error);
  REQUIRE_THROWS_WITH(gd::conv2d(x, TensorD::ones({3, 3, 3, 2}), TensorD::ones({3})),
                      Contains("conv2d: bias must have shape [2]"));
}

TEST_CASE("pooling: forward and gradients match direct loops", "[nnops][pool]") {
  struct PoolCase {
    gd::Shape x;
    gd::Pool2dOptions o;
  };
  const std::vector<PoolCase> cases = {
      {{2, 6, 6, 3}, {}},
      {{2, 7, 5, 2}, {}},  // 2x2 stride 2 with a row and a column no window reads
      {{2, 7, 5, 2}, {.padding = same}},
      {{1, 7, 8, 2}, {.ksize = {3, 3}, .strides = {2, 2}, .padding = same}},
      {{1, 6, 7, 2}, {.ksize = {3, 3}, .strides = {2, 2}, .padding = valid}},
      {{1, 5, 6, 2}, {.ksize = {3, 2}, .strides = {1, 2}, .padding = same}},
      {{1, 5, 5, 1}, {.ksize = {1, 1}, .strides = {2, 2}, .padding = same}},
      {{1, 4, 6, 2}, {.ksize = {2, 4}, .strides = {3, 1}, .padding = same}},
  };
  gd::Pool2dOptions o;
  bool max = true;
  auto f = [&](const VarD& x) { return max ? gd::max_pool2d(x, o) : gd::avg_pool2d(x, o); };
  for (const PoolCase& c : cases)
    for (bool m : {true, false}) {
      INFO("x " << c.x << " ksize " << c.o.ksize[0] << "x" << c.o.ksize[1] << " strides " << c.o.strides[0] << ","
                << c.o.strides[1] << " " << gd::detail::padding_name(c.o.padding) << (m ? " max" : " avg"));
      o = c.o, max = m;
      const TensorD x = rand_t(c.x, 20);
      TensorD ref;
      naive_pool(x, c.o, m, &ref);
      CHECK(max_diff(m ? gd::max_pool2d(x, o) : gd::avg_pool2d(x, o), ref) < 1e-14);
      CHECK_THAT(f, gd::testing::GradientIsCorrect(x, 1e-8, {.delta = 1e-6}));
    }

  // large shapes: the threaded paths (disjoint rows, and overlapping windows by image)
  const std::vector<PoolCase> large = {
      {{8, 28, 28, 32}, {}},
      {{8, 25, 23, 16}, {}},
      {{6, 17, 18, 16}, {.ksize = {3, 3}, .strides = {2, 2}, .padding = same}},
      {{4, 15, 16, 8}, {.ksize = {3, 3}, .strides = {1, 1}, .padding = same}},
  };
  for (const PoolCase& c : large)
    for (bool m : {true, false}) {
      INFO("x " << c.x << " ksize " << c.o.ksize[0] << (m ? " max" : " avg"));
      o = c.o, max = m;
      const VarD x(rand_t(c.x, 21));
      const VarD y = f(x);
      const TensorD g = rand_t(y.shape(), 22);
      TensorD ref, dx;
      naive_pool(x.value(), c.o, m, &ref, &g, &dx);
      CHECK(max_diff(y.value(), ref) < 1e-14);
      CHECK(max_diff(gd::gradients(y, {x}, &g)[0], dx) < 1e-14);
    }
}

TEST_CASE("pooling: adjoints accumulate when the input is used twice", "[nnops][pool]") {
  for (const gd::Shape& shape : {gd::Shape{2, 6, 6, 3}, gd::Shape{1, 7, 5, 2}}) {
    INFO("x " << shape);
    auto f = [](const VarD& x) { return gd::max_pool2d(x) * 2.0 + gd::max_pool2d(x * x); };
    CHECK_THAT(f, gd::testing::GradientIsCorrect(rand_t(shape, 23), 1e-8, {.delta = 1e-6}));
  }
}

TEST_CASE("pooling: ties, SAME averages over real elements, errors", "[nnops][pool]") {
  // equal values: the whole gradient goes to the first element of each window
  const VarD ones(TensorD::ones({1, 4, 4, 1}));
  const TensorD gm = gd::gradients(gd::max_pool2d(ones), {ones})[0];
  const std::vector<double> first = {1, 0, 1, 0, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0};
  REQUIRE(std::vector<double>(gm.begin(), gm.end()) == first);
  // overlapping windows (3x3 stride 1 SAME): each window's first element is its top-left real one
  const TensorD go = gd::gradients(gd::max_pool2d(ones, {.ksize = {3, 3}, .strides = {1, 1}, .padding = same}), {ones})[0];
  const std::vector<double> counts = {4, 2, 2, 0, 2, 1, 1, 0, 2, 1, 1, 0, 0, 0, 0, 0};
  REQUIRE(std::vector<double>(go.begin(), go.end()) == counts);

  const TensorD y = gd::avg_pool2d(TensorD::ones({1, 5, 5, 2}), {.ksize = {3, 3}, .strides = {2, 2}, .padding = same});
  REQUIRE(y.shape() == gd::Shape{1, 3, 3, 2});
  REQUIRE(std::all_of(y.begin(), y.end(), [](double v) { return v == 1; }));
  const TensorD x = gd::eval(TensorD::arange(16).reshape({1, 4, 4, 1}));
  const TensorD a = gd::avg_pool2d(x, {.ksize = {3, 3}, .strides = {2, 2}, .padding = same});
  REQUIRE(a(0, 1, 1, 0) == (10 + 11 + 14 + 15) / 4.0);
  const TensorD mx = gd::max_pool2d(x);
  REQUIRE(std::vector<double>(mx.begin(), mx.end()) == std::vector<double>{5, 7, 13, 15});
  static_assert(std::is_same_v<decltype(gd::max_pool2d(x)), TensorD>);

  REQUIRE_THROWS_AS(gd::max_pool2d(TensorD::ones({4, 4, 1})), gd::shape_error);
  REQUIRE_THROWS_WITH(gd::avg_pool2d(TensorD::ones({4, 4, 1})), Contains("avg_pool2d: input must have rank 4"));
  REQUIRE_THROWS_AS(gd::max_pool2d(x, {.ksize = {5, 2}}), gd::shape_error);
  REQUIRE_THROWS_WITH(gd::max_pool2d(x, {.ksize = {5, 2}}),
                      "max_pool2d: window 5x2 is larger than the input 4x4 with valid padding: [1,4,4,1]");
  REQUIRE_NOTHROW(gd::max_pool2d(x, {.ksize = {5, 2}, .padding = same}));
  REQUIRE_THROWS_AS(gd::max_pool2d(x, {.strides = {2, 0}}), gd::value_error);
  REQUIRE_THROWS_WITH(gd::max_pool2d(x, {.strides = {2, 0}}), Contains("strides must be positive, got [2,0]"));
  REQUIRE_THROWS_AS(gd::avg_pool2d(x, {.ksize = {0, 2}}), gd::value_error);
}
