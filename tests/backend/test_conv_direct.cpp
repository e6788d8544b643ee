// The direct convolution (backend/cpu/conv.hpp): float convolutions of inputs with few channels,
// whose GEMM micro-kernels read the taps from the image instead of from im2col's patches. Its
// forward pass and filter gradient, with each kernel this CPU supports (AVX-512 and AVX2, forced
// one at a time), against double-precision loops over the patches, on shapes that cover its edges:
// 1 to 4 channels, strides, dilations, TensorFlow's SAME padding (the padded copy of the input),
// output rows that end in partial runs of 4 and 1 pixels, filters of 1 to 70 channels
// (partial 16- and 32-column panels, several panels), and guard bands after every output. Then
// the forward pass of inputs of many channels, which runs directly on AVX-512 where the output
// rows cut into runs of 12 and 4 pixels (direct_forward), and conv2d's forward and backward.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <omp.h>
#include <vector>

#include <gradus/gradus.hpp>

#if defined(GRADUS_SGEMM_X86)
namespace gd = gradus;
namespace cpu = gd::backend::cpu;
using gd::backend::ConvPlan;

namespace {

/// A convolution plan as conv2d makes it: VALID, or SAME with TensorFlow's split of the padding.
ConvPlan plan(int64_t n, int64_t h, int64_t w, int64_t c, int64_t k_h, int64_t k_w, int64_t f, int64_t s, int64_t d,
              bool same) {
  ConvPlan p{.n = n, .h = h, .w = w, .c = c, .kh = k_h, .kw = k_w, .f = f, .oh = 0, .ow = 0,
             .sh = s, .sw = s, .dh = d, .dw = d, .ph = 0, .pw = 0};
  const int64_t eh = (k_h - 1) * d + 1, ew = (k_w - 1) * d + 1;
  if (same) {
    p.oh = (h + s - 1) / s, p.ow = (w + s - 1) / s;
    p.ph = std::max<int64_t>((p.oh - 1) * s + eh - h, 0) / 2, p.pw = std::max<int64_t>((p.ow - 1) * s + ew - w, 0) / 2;
  } else {
    p.oh = (h - eh) / s + 1, p.ow = (w - ew) / s + 1;
  }
  return p;
}

std::vector<float> normals(int64_t n, gd::Rng& rng) {
  const auto t = gd::Tensor<float>::random_normal({std::max<int64_t>(n, 1)}, rng, 0.f, 1.f);
  return std::vector<float>(t.data(), t.data() + n);
}

/// Tap q of output row r's patch, zero in the padding.
double patch(const ConvPlan& p, const std::vector<float>& x, int64_t r, int64_t q) {
  const int64_t n = r / (p.oh * p.ow), oy = r / p.ow % p.oh, ox = r % p.ow;
  const int64_t i = q / (p.kw * p.c), j = q / p.c % p.kw, ch = q % p.c;
  const int64_t iy = oy * p.sh - p.ph + i * p.dh, ix = ox * p.sw - p.pw + j * p.dw;
  if (iy < 0 || iy >= p.h || ix < 0 || ix >= p.w) return 0;
  return x[size_t(((n * p.h + iy) * p.w + ix) * p.c + ch)];
}

/// y = patches · w + bias in double, [rows, F], and the sum of the terms' magnitudes of each.
void forward_reference(const ConvPlan& p, const std::vector<float>& x, const std::vector<float>& w,
                       const std::vector<float>& bias, std::vector<double>& y, std::vector<double>& magnitude) {
  const int64_t M = p.rows(), K = p.depth(), F = p.f;
  y.assign(size_t(M * F), 0.0), magnitude.assign(y.size(), 0.0);
  for (int64_t r = 0; r < M; ++r)
    for (int64_t f = 0; f < F; ++f) {
      double s = bias[size_t(f)], m = std::abs(bias[size_t(f)]);
      for (int64_t q = 0; q < K; ++q) {
        const double t = patch(p, x, r, q) * w[size_t(q * F + f)];
        s += t, m += std::abs(t);
      }
      y[size_t(r * F + f)] = s, magnitude[size_t(r * F + f)] = m;
    }
}

/// |got - want| <= gamma_d * magnitude for every element (d terms summed in float in any order,
/// fused or not; see test_gemm.cpp), and the `guard` floats after the first want.size() untouched.
constexpr int64_t guard = 40;
constexpr float sentinel = 12345.f;

bool within(const std::vector<float>& got, const std::vector<double>& want, const std::vector<double>& magnitude,
            int64_t terms) {
  for (int64_t i = 0; i < guard; ++i)
    if (got[want.size() + size_t(i)] != sentinel) return false;
  const double u = std::numeric_limits<float>::epsilon() / 2, d = double(terms + 2), gamma = d * u / (1 - d * u);
  for (size_t i = 0; i < want.size(); ++i)
    if (!(std::abs(got[i] - want[i]) <= gamma * magnitude[i])) return false;
  return true;
}

std::vector<float> guarded(size_t n, float fill = 0.f) {
  std::vector<float> v(n + guard, sentinel);
  std::fill_n(v.begin(), n, fill);
  return v;
}

const std::vector<ConvPlan> plans = {
    plan(2, 28, 28, 1, 5, 5, 32, 1, 1, false),  // LeNet's first layer: runs of 12 + 12
    plan(2, 13, 17, 1, 5, 5, 32, 1, 1, true),   // SAME: a padded copy; runs of 12 + 4 + 1 (AVX2: 6 + 6 + 4 + 1)
    plan(1, 9, 31, 3, 3, 3, 16, 1, 1, true),    // RGB, 16 filters (one AVX2 panel, half an AVX-512 one)
    plan(2, 11, 14, 3, 3, 3, 70, 2, 1, true),   // stride 2, three panels, the last partial
    plan(1, 15, 15, 2, 3, 2, 17, 1, 2, false),  // dilation 2, a non-square filter
    plan(3, 6, 7, 4, 2, 7, 5, 1, 1, true),      // 4 channels, a filter wider than tall, 5 filters
    plan(1, 4, 23, 1, 1, 3, 1, 1, 1, false),    // one filter, depth 3: a run of 12 and a partial one of 9
    plan(1, 5, 5, 1, 5, 5, 40, 3, 1, true),     // windows mostly in the padding
};

}  // namespace

TEST_CASE("direct convolution: forward and filter gradient match double loops with each kernel", "[ops][conv]") {
  gd::Rng rng(17);
  int kernels = 0;
  for (cpu::GemmKernel k : {cpu::GemmKernel::avx512, cpu::GemmKernel::avx2}) {
    if (!cpu::gemm_kernel_supported(k)) {
      WARN("this CPU has no " << cpu::gemm_kernel_name(k) << " kernel: its direct convolution is not tested");
      continue;
    }
    ++kernels;
    for (const ConvPlan& p : plans) {
      INFO("kernel " << cpu::gemm_kernel_name(k) << ", n " << p.n << " h " << p.h << " w " << p.w << " c " << p.c
                     << " filter " << p.kh << "x" << p.kw << " f " << p.f << " stride " << p.sh << " dilation "
                     << p.dh << " padding " << p.ph << "," << p.pw);
      REQUIRE(cpu::direct_conv(p, k));
      const int64_t M = p.rows(), K = p.depth(), F = p.f;
      const auto x = normals(p.n * p.h * p.w * p.c, rng), w = normals(K * F, rng), bias = normals(F, rng);
      const auto g = normals(M * F, rng);
      // forward: y = patches · w + bias, and max(., 0) of it
      std::vector<double> y, y_mag;
      forward_reference(p, x, w, bias, y, y_mag);
      auto out = guarded(y.size());
      cpu::direct_conv_forward(p, x.data(), w.data(), bias.data(), out.data(), false, k);
      CHECK(within(out, y, y_mag, K + 1));
      std::vector<double> y_relu(y.size());
      for (size_t i = 0; i < y.size(); ++i) y_relu[i] = std::max(y[i], 0.0);
      out = guarded(y.size());
      cpu::direct_conv_forward(p, x.data(), w.data(), bias.data(), out.data(), true, k);
      CHECK(within(out, y_relu, y_mag, K + 1));
      // filter gradient: dw = patches^T g, overwritten, then added to what is there
      std::vector<double> dw(size_t(K * F)), dw_mag(dw.size());
      for (int64_t q = 0; q < K; ++q)
        for (int64_t f = 0; f < F; ++f) {
          double s = 0, m = 0;
          for (int64_t r = 0; r < M; ++r) {
            const double t = patch(p, x, r, q) * g[size_t(r * F + f)];
            s += t, m += std::abs(t);
          }
          dw[size_t(q * F + f)] = s, dw_mag[size_t(q * F + f)] = m;
        }
      const cpu::DirectImage image(p, x.data());
      std::vector<int64_t> base(static_cast<size_t>(M));
      auto got = guarded(dw.size(), 7.f);
      cpu::direct_filter_grad(p, image, 0, M, g.data(), got.data(), false, base.data(), k);
      CHECK(within(got, dw, dw_mag, M));
      // accumulated in two halves of the rows onto 0.5
      got = guarded(dw.size(), 0.5f);
      cpu::direct_filter_grad(p, image, 0, M / 2, g.data(), got.data(), true, base.data(), k);
      cpu::direct_filter_grad(p, image, M / 2, M, g.data() + M / 2 * F, got.data(), true, base.data(), k);
      std::vector<double> dw_half(dw.size()), half_mag(dw.size());
      for (size_t i = 0; i < dw.size(); ++i) dw_half[i] = dw[i] + 0.5, half_mag[i] = dw_mag[i] + 0.5;
      CHECK(within(got, dw_half, half_mag, M + 1));
    }
  }
  if (kernels == 0) WARN("this CPU has neither AVX-512 nor AVX2: the direct convolution does not run on it");
}

TEST_CASE("direct forward pass of many channels on AVX-512: matches double loops, and when it applies",
          "[ops][conv]") {
  // direct_forward takes inputs of any number of channels to the direct kernel when the output
  // rows cut into runs of 12 and 4 pixels (ow a multiple of 4) and the filter has 24 or more
  // channels; conv2d_forward then runs it. Shapes: LeNet's second layer (runs of 4 + 4), SAME
  // padding with runs of 12 + 4 and a partial 32-column panel, stride 2, dilation 2, 256-row
  // tiles that end inside an output row, and one it does not take (ow 10); at 1 and 2 threads.
  const std::vector<ConvPlan> many = {
      plan(3, 12, 12, 32, 5, 5, 64, 1, 1, false),  // LeNet's second layer, 3 images
      plan(2, 16, 16, 9, 3, 3, 40, 1, 1, true),    // SAME, runs of 12 + 4, panels of 32 + 8
      plan(2, 15, 16, 16, 3, 3, 24, 2, 1, true),   // stride 2, SAME: 8 x 8 outputs, 24 of 32 columns
      plan(2, 20, 20, 6, 3, 3, 32, 2, 1, true),    // stride 2, ow 10: not taken, im2col
      plan(1, 13, 28, 5, 3, 3, 33, 1, 2, false),   // dilation 2: ow 24, oh 9, panels of 32 + 1
      plan(5, 9, 28, 8, 3, 3, 24, 1, 1, true),     // ow 28 (12 + 12 + 4), 1260 rows: 256-row tiles end mid-row
  };
  gd::Rng rng(23);
  const bool avx512 = cpu::gemm_kernel_supported(cpu::GemmKernel::avx512);
  if (!avx512) WARN("this CPU has no AVX-512 kernel: the direct forward pass of many channels is not tested");
  const int threads = omp_get_max_threads();
  for (const ConvPlan& p : many) {
    INFO("n " << p.n << " h " << p.h << " w " << p.w << " c " << p.c << " filter " << p.kh << "x" << p.kw << " f "
              << p.f << " stride " << p.sh << " dilation " << p.dh << " ow " << p.ow);
    const bool applies = p.ow % 4 == 0;
    CHECK(cpu::direct_forward(p, cpu::GemmKernel::avx512) == applies);
    CHECK_FALSE(cpu::direct_forward(p, cpu::GemmKernel::avx2));  // its runs of 6 leave pieces of 2 at ow 8
    const int64_t K = p.depth(), F = p.f;
    const auto x = normals(p.n * p.h * p.w * p.c, rng), w = normals(K * F, rng), bias = normals(F, rng);
    std::vector<double> y, y_mag;
    forward_reference(p, x, w, bias, y, y_mag);
    for (double& v : y) v = std::max(v, 0.0);  // the fused ReLU
    for (int t : {1, 2}) {
      omp_set_num_threads(t);
      INFO("threads " << t);
      auto out = guarded(y.size());
      cpu::conv2d_forward(p, x.data(), w.data(), bias.data(), out.data(), true);  // whichever path applies
      CHECK(within(out, y, y_mag, K + 1));
      if (avx512) {
        out = guarded(y.size());
        cpu::direct_conv_forward(p, x.data(), w.data(), bias.data(), out.data(), true, cpu::GemmKernel::avx512);
        CHECK(within(out, y, y_mag, K + 1));
      }
    }
  }
  omp_set_num_threads(threads);
  // fewer filters, or rows that leave pieces of 1-3 pixels, stay on im2col and the GEMM
  CHECK_FALSE(cpu::direct_forward(plan(2, 16, 16, 32, 3, 3, 16, 1, 1, true), cpu::GemmKernel::avx512));
  CHECK_FALSE(cpu::direct_forward(plan(2, 14, 14, 32, 3, 3, 64, 1, 1, true), cpu::GemmKernel::avx512));
  CHECK(cpu::direct_forward(plan(2, 14, 14, 3, 3, 3, 16, 1, 1, true), cpu::GemmKernel::avx512));  // few channels
}

TEST_CASE("conv2d of few channels: forward and backward, threaded, with the fused ReLU, match double loops",
          "[ops][conv]") {
  // conv2d_forward and conv2d_backward choose the direct convolution themselves (on a CPU with
  // AVX2 or AVX-512): the filter gradient then sums per-thread partials of direct products; the
  // input gradient still runs through col2im; without it, the AVX-512 kernel applies the ReLU's
  // mask and sums the bias gradient itself. All of it against loops in double, at 1 and 2 threads.
  const ConvPlan p = plan(4, 14, 13, 3, 5, 5, 20, 1, 1, true);
  const int64_t M = p.rows(), K = p.depth(), F = p.f;
  gd::Rng rng(5);
  const auto x = normals(p.n * p.h * p.w * p.c, rng), w = normals(K * F, rng), bias = normals(F, rng);
  const auto g = normals(M * F, rng);
  std::vector<float> y(size_t(M * F));
  cpu::conv2d_forward(p, x.data(), w.data(), bias.data(), y.data(), true);
  // references given the forward's y (its own accuracy is checked above): gm = g where y > 0
  std::vector<double> gm(size_t(M * F));
  for (size_t i = 0; i < gm.size(); ++i) gm[i] = y[i] > 0 ? g[i] : 0.0;
  std::vector<double> dw(size_t(K * F)), dw_mag(dw.size()), db(static_cast<size_t>(F)), db_mag(db.size());
  std::vector<double> dx(x.size()), dx_mag(x.size());
  for (int64_t r = 0; r < M; ++r)
    for (int64_t f = 0; f < F; ++f) {
      const double gv = gm[size_t(r * F + f)];
      db[size_t(f)] += gv, db_mag[size_t(f)] += std::abs(gv);
      for (int64_t q = 0; q < K; ++q) {
        const double t = patch(p, x, r, q) * gv;
        dw[size_t(q * F + f)] += t, dw_mag[size_t(q * F + f)] += std::abs(t);
        const int64_t n = r / (p.oh * p.ow), oy = r / p.ow % p.oh, ox = r % p.ow;
        const int64_t i = q / (p.kw * p.c), j = q / p.c % p.kw, ch = q % p.c;
        const int64_t iy = oy * p.sh - p.ph + i * p.dh, ix = ox * p.sw - p.pw + j * p.dw;
        if (iy < 0 || iy >= p.h || ix < 0 || ix >= p.w) continue;
        const size_t at = size_t(((n * p.h + iy) * p.w + ix) * p.c + ch);
        const double u = gv * w[size_t(q * F + f)];
        dx[at] += u, dx_mag[at] += std::abs(u);
      }
    }
  const int threads = omp_get_max_threads();
  for (int t : {1, 2}) {
    omp_set_num_threads(t);
    INFO("threads " << t);
    auto gdx = guarded(dx.size()), gdw = guarded(dw.size()), gdb = guarded(db.size());
    cpu::conv2d_backward(p, g.data(), x.data(), w.data(), gdx.data(), false, gdw.data(), false, gdb.data(), false,
                         y.data());
    CHECK(within(gdw, dw, dw_mag, M));
    CHECK(within(gdb, db, db_mag, M));
    CHECK(within(gdx, dx, dx_mag, K * F));
    // without dinput, as for a first layer: with AVX-512 the filter kernel masks g by y and sums
    // the bias gradient itself; accumulated onto 0.5 this time
    gdw = guarded(dw.size(), 0.5f), gdb = guarded(db.size(), 0.5f);
    cpu::conv2d_backward(p, g.data(), x.data(), w.data(), static_cast<float*>(nullptr), false, gdw.data(), true,
                         gdb.data(), true, y.data());
    std::vector<double> dw_half(dw), db_half(db), dw_half_mag(dw_mag), db_half_mag(db_mag);
    for (size_t i = 0; i < dw.size(); ++i) dw_half[i] += 0.5, dw_half_mag[i] += 0.5;
    for (size_t i = 0; i < db.size(); ++i) db_half[i] += 0.5, db_half_mag[i] += 0.5;
    CHECK(within(gdw, dw_half, dw_half_mag, M + 1));
    CHECK(within(gdb, db_half, db_half_mag, M + 1));
  }
  omp_set_num_threads(threads);
}
#endif
