// gradus/ops/conv.hpp — 2-D convolution (NHWC, TensorFlow semantics) on im2col + Eigen GEMM.
//
// Output rows r = (n, oh, ow) are split over the cores; each thread turns a tile of rows into
// their patches [R, KH*KW*C] in a cache-sized scratch buffer and multiplies it by the filter
// viewed as [KH*KW*C, F], straight into the output. The backward pass recomputes the patches
// tile by tile: dfilter = patchesᵀ·g (per-thread partial sums, added in a fixed order) and
// dinput = col2im(g·filterᵀ), with each thread owning whole images so the scatter never races.
// No patch matrix of the whole batch is ever stored.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>

#include "gradus/backend/cpu/parallel.hpp"
#include "gradus/ops/linalg.hpp"

namespace gradus {

/// How windows meet the border (TensorFlow): `valid` keeps only windows inside the input;
/// `same` pads so that out = ceil(in / stride) — zeros for conv2d, ignored by the pools.
enum class Padding { valid, same };

/// Options of `conv2d`: strides and dilations as {height, width}.
struct Conv2dOptions {
  std::array<int64_t, 2> strides{1, 1};
  Padding padding = Padding::valid;
  std::array<int64_t, 2> dilations{1, 1};
};

namespace detail {

/// One spatial axis of a window op: output size and padding before the input (TF rules).
struct WindowAxis {
  int64_t out = 0, pad = 0;
};

inline WindowAxis window_axis(int64_t in, int64_t k, int64_t stride, int64_t dilation, Padding p) {
  const int64_t span = (k - 1) * dilation + 1;
  if (p == Padding::same) {
    const int64_t out = (in + stride - 1) / stride;
    const int64_t total = std::max<int64_t>((out - 1) * stride + span - in, 0);
    return {out, total / 2};
  }
  return {in >= span ? (in - span) / stride + 1 : 0, 0};
}

inline const char* padding_name(Padding p) { return p == Padding::same ? "same" : "valid"; }

/// Everything a conv2d kernel needs to know about its shapes.
struct ConvPlan {
  int64_t n, h, w, c;     // input
  int64_t kh, kw, f;      // filter [kh, kw, c, f]
  int64_t oh, ow;         // output [n, oh, ow, f]
  int64_t sh, sw, dh, dw, ph, pw;
  int64_t rows() const { return n * oh * ow; }
  int64_t depth() const { return kh * kw * c; }
  /// 1x1, stride 1: the patch matrix is the input itself.
  bool pointwise() const { return kh == 1 && kw == 1 && sh == 1 && sw == 1; }
  Shape out_shape() const { return Shape{n, oh, ow, f}; }
};

inline ConvPlan plan_conv2d(const Shape& x, const Shape& w, const Conv2dOptions& o) {
  GRADUS_CHECK(shape_error, x.rank() == 4, "conv2d: input must have rank 4 [N,H,W,C], got ", x);
  GRADUS_CHECK(shape_error, w.rank() == 4, "conv2d: filter must have rank 4 [KH,KW,C,F], got ", w);
  GRADUS_CHECK(shape_error, x[3] == w[2], "conv2d: input channels ", x[3], " differ from filter in_channels ", w[2],
               ": ", x, " vs ", w);
  GRADUS_CHECK(shape_error, w[0] > 0 && w[1] > 0, "conv2d: filter window must be non-empty, got ", w);
  GRADUS_CHECK(value_error, o.strides[0] > 0 && o.strides[1] > 0, "conv2d: strides must be positive, got [",
               o.strides[0], ",", o.strides[1], "]");
  GRADUS_CHECK(value_error, o.dilations[0] > 0 && o.dilations[1] > 0, "conv2d: dilations must be positive, got [",
               o.dilations[0], ",", o.dilations[1], "]");
  ConvPlan p{x[0], x[1], x[2], x[3], w[0], w[1], w[3], 0, 0, o.strides[0], o.strides[1], o.dilations[0],
             o.dilations[1], 0, 0};
  if (o.padding == Padding::valid) {
    const int64_t eh = (p.kh - 1) * p.dh + 1, ew = (p.kw - 1) * p.dw + 1;
    GRADUS_CHECK(shape_error, eh <= p.h && ew <= p.w, "conv2d: filter window ", eh, "x", ew,
                 " (dilated) is larger than the input ", p.h, "x", p.w, " with valid padding: ", x, " vs ", w);
  }
  const WindowAxis ah = window_axis(p.h, p.kh, p.sh, p.dh, o.padding);
  const WindowAxis aw = window_axis(p.w, p.kw, p.sw, p.dw, o.padding);
  p.oh = ah.out, p.ph = ah.pad, p.ow = aw.out, p.pw = aw.pad;
  return p;
}

/// Rows of a tile: about 256 KiB of patches, so a tile and its GEMM panels stay in L2.
template <class T>
int64_t conv_tile_rows(const ConvPlan& p) {
  return std::clamp<int64_t>((int64_t(256) << 10) / int64_t(sizeof(T) * std::max<int64_t>(p.depth(), 1)), 8, 4096);
}

/// Threshold for `cpu::parallel_chunks` over `n` items of `work` flops each: small jobs stay on
/// the calling thread.
inline int64_t parallel_threshold(int64_t n, double work) {
  return double(n) * work >= 2e5 ? 0 : n + 1;
}

/// Short copies and sums (a filter row is often only KW*C = 5 elements long): vectorised loops
/// instead of library calls.
template <class T>
void copy_short(const T* src, int64_t n, T* dst) {
  if (n > 16) {
    std::memcpy(dst, src, size_t(n) * sizeof(T));
    return;
  }
  for (int64_t e = 0; e < n; ++e) dst[e] = src[e];
}
template <class T>
void zero_short(T* dst, int64_t n) {
  if (n > 16) {
    std::memset(dst, 0, size_t(n) * sizeof(T));
    return;
  }
  for (int64_t e = 0; e < n; ++e) dst[e] = T(0);
}
template <class T>
void add_short(const T* src, int64_t n, T* dst) {
  for (int64_t e = 0; e < n; ++e) dst[e] += src[e];
}

/// Walks output rows [r0, r1) in order, calling f(row, image, iy0, ix0): the output row's image
/// index and the input coordinates of its window's top-left tap (negative inside the padding).
template <class F>
void for_each_window(const ConvPlan& p, int64_t r0, int64_t r1, F&& f) {
  if (r0 >= r1) return;
  const int64_t per_image = p.oh * p.ow;
  int64_t n = r0 / per_image, oy = r0 % per_image / p.ow, ox = r0 % p.ow;
  for (int64_t r = r0; r < r1; ++r) {
    f(r, n, oy * p.sh - p.ph, ox * p.sw - p.pw);
    if (++ox == p.ow) {
      ox = 0;
      if (++oy == p.oh) oy = 0, ++n;
    }
  }
}

/// im2col for filter rows of S = KW*C elements known at compile time, dilation 1 along W.
template <int S, class T>
void im2col_short(const ConvPlan& p, const T* x, int64_t r0, int64_t r1, T* dst) {
  const int64_t K = p.depth(), row = p.w * p.c;
  for_each_window(p, r0, r1, [&](int64_t r, int64_t n, int64_t iy0, int64_t ix0) {
    const T* img = x + n * p.h * row;
    T* d = dst + (r - r0) * K;
    const bool inside = ix0 >= 0 && ix0 + p.kw <= p.w;
    for (int64_t i = 0; i < p.kh; ++i, d += S) {
      const int64_t iy = iy0 + i * p.dh;
      if (iy < 0 || iy >= p.h) {
        for (int e = 0; e < S; ++e) d[e] = T(0);
      } else if (inside) {
        const T* src = img + iy * row + ix0 * p.c;
        for (int e = 0; e < S; ++e) d[e] = src[e];
      } else {
        const T* src = img + iy * row;
        for (int e = 0; e < S; ++e) {
          const int64_t ix = ix0 + e / p.c;
          d[e] = ix >= 0 && ix < p.w ? src[ix * p.c + e % p.c] : T(0);
        }
      }
    }
  });
}

/// im2col for any filter: rows of KW*C elements copied as runs of contiguous taps.
template <class T>
void im2col_rows(const ConvPlan& p, const T* x, int64_t r0, int64_t r1, T* dst) {
  const int64_t K = p.depth(), C = p.c, row = p.w * C, span = p.kw * C;
  for_each_window(p, r0, r1, [&](int64_t r, int64_t n, int64_t iy0, int64_t ix0) {
    const T* img = x + n * p.h * row;
    T* d = dst + (r - r0) * K;
    // the KW taps of one filter row are contiguous in the input when dilation is 1
    const int64_t lo = std::clamp<int64_t>(-ix0, 0, p.kw), hi = std::clamp<int64_t>(p.w - ix0, lo, p.kw);
    for (int64_t i = 0; i < p.kh; ++i, d += span) {
      const int64_t iy = iy0 + i * p.dh;
      if (iy < 0 || iy >= p.h) {
        zero_short(d, span);
      } else if (p.dw == 1) {
        const T* src = img + iy * row + ix0 * C;
        zero_short(d, lo * C);
        copy_short(src + lo * C, (hi - lo) * C, d + lo * C);
        zero_short(d + hi * C, (p.kw - hi) * C);
      } else {
        for (int64_t j = 0; j < p.kw; ++j) {
          const int64_t ix = ix0 + j * p.dw;
          if (ix < 0 || ix >= p.w)
            zero_short(d + j * C, C);
          else
            copy_short(img + iy * row + ix * C, C, d + j * C);
        }
      }
    }
  });
}

/// Patches of output rows [r0, r1) into `dst` ([r1 - r0, KH*KW*C], zeros where padded).
template <class T>
void im2col(const ConvPlan& p, const T* x, int64_t r0, int64_t r1, T* dst) {
  switch (p.dw == 1 ? p.kw * p.c : 0) {  // short filter rows (one input channel) unrolled
    case 3: return im2col_short<3>(p, x, r0, r1, dst);
    case 5: return im2col_short<5>(p, x, r0, r1, dst);
    case 7: return im2col_short<7>(p, x, r0, r1, dst);
    default: return im2col_rows(p, x, r0, r1, dst);
  }
}

/// The adjoint of im2col: adds patch rows [r0, r1) of `src` into the input-shaped `dx`.
template <class T>
void col2im(const ConvPlan& p, const T* src, int64_t r0, int64_t r1, T* dx) {
  const int64_t K = p.depth(), C = p.c, row = p.w * C, span = p.kw * C;
  for_each_window(p, r0, r1, [&](int64_t r, int64_t n, int64_t iy0, int64_t ix0) {
    T* img = dx + n * p.h * row;
    const T* s = src + (r - r0) * K;
    const int64_t lo = std::clamp<int64_t>(-ix0, 0, p.kw), hi = std::clamp<int64_t>(p.w - ix0, lo, p.kw);
    for (int64_t i = 0; i < p.kh; ++i, s += span) {
      const int64_t iy = iy0 + i * p.dh;
      if (iy < 0 || iy >= p.h) continue;
      if (p.dw == 1) {
        add_short(s + lo * C, (hi - lo) * C, img + iy * row + (ix0 + lo) * C);
      } else {
        for (int64_t j = 0; j < p.kw; ++j) {
          const int64_t ix = ix0 + j * p.dw;
          if (ix >= 0 && ix < p.w) add_short(s + j * C, C, img + iy * row + ix * C);
        }
      }
    }
  });
}

/// out [rows, F] = patches(x) · w [K, F] (+ bias [F] when given).
template <class T>
void conv2d_forward(const ConvPlan& p, const T* x, const T* w, const T* bias, T* out) {
  const int64_t M = p.rows(), K = p.depth(), F = p.f;
  if (M == 0 || F == 0) return;
  auto init_bias = [&](T* o, int64_t rows) {
    for (int64_t r = 0; r < rows; ++r) std::copy_n(bias, F, o + r * F);
  };
  if (p.pointwise()) {  // one GEMM over the input as it is; Eigen threads it
    if (bias) init_bias(out, M);
    gemm(x, false, w, false, out, M, K, F, bias != nullptr);
    return;
  }
  const int64_t R = conv_tile_rows<T>(p);
  cpu::parallel_chunks(M, 1, [&](int, int64_t r0, int64_t r1) {
    Tensor<T> patches(Shape{std::min(R, r1 - r0) * K});
    for (int64_t t0 = r0; t0 < r1; t0 += R) {
      const int64_t t1 = std::min(r1, t0 + R);
      im2col(p, x, t0, t1, patches.data());
      if (bias) init_bias(out + t0 * F, t1 - t0);
      gemm(patches.data(), false, w, false, out + t0 * F, t1 - t0, K, F, bias != nullptr);
    }
  }, parallel_threshold(M, double(K * F)));
}

/// Gradients of conv2d given the output adjoint g [rows, F]; a null destination is skipped,
/// `add_*` accumulates into it instead of overwriting.
template <class T>
void conv2d_backward(const ConvPlan& p, const T* g, const T* x, const T* w, T* dx, bool add_dx, T* dw, bool add_dw,
                     T* db, bool add_db) {
  const int64_t M = p.rows(), K = p.depth(), F = p.f;
  if (db) {  // column sums of g
    Eigen::Map<Eigen::Array<T, 1, Eigen::Dynamic>> b(db, F);
    if (!add_db) b.setZero();
    if (M > 0) b += Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(g, M, F).colwise().sum();
  }
  if (!dx && !dw) return;
  if (M == 0 || K == 0 || F == 0) {
    if (dx && !add_dx) std::fill_n(dx, p.n * p.h * p.w * p.c, T(0));
    if (dw && !add_dw) std::fill_n(dw, K * F, T(0));
    return;
  }
  if (p.pointwise()) {
    if (dw) gemm(x, true, g, false, dw, K, M, F, add_dw);
    if (dx) gemm(g, false, w, true, dx, M, F, K, add_dx);
    return;
  }
  const int64_t R = conv_tile_rows<T>(p), per_image = p.oh * p.ow, image = p.h * p.w * p.c;
  // dinput is scattered, so each thread owns whole images; without it any split will do
  const int64_t align = dx ? per_image : 1;
  const int64_t threshold = parallel_threshold(M, double(K * F) * ((dx ? 1 : 0) + (dw ? 1 : 0)));
  const int nt = cpu::chunks_for(M, align, threshold);
  Tensor<T> partial;  // per-thread dfilter sums, added in chunk order afterwards
  if (dw && nt > 1) partial = Tensor<T>(Shape{nt, K * F});
  cpu::parallel_chunks(M, align, [&](int t, int64_t r0, int64_t r1) {
    const int64_t cap = std::min(R, r1 - r0);
    Tensor<T> patches(Shape{cap * K});
    T* dwt = nullptr;
    bool dw_add = add_dw;
    if (dw) {
      dwt = nt > 1 ? partial.data() + t * K * F : dw;
      if (nt > 1) dw_add = false;
    }
    if (dx && !add_dx) std::fill(dx + (r0 / per_image) * image, dx + (r1 / per_image) * image, T(0));
    for (int64_t t0 = r0; t0 < r1; t0 += R) {
      const int64_t t1 = std::min(r1, t0 + R), rows = t1 - t0;
      if (dw) {
        im2col(p, x, t0, t1, patches.data());
        gemm(patches.data(), true, g + t0 * F, false, dwt, K, rows, F, dw_add);
        dw_add = true;
      }
      if (dx) {
        gemm(g + t0 * F, false, w, true, patches.data(), rows, F, K, false);
        col2im(p, patches.data(), t0, t1, dx);
      }
    }
    if (dw && r0 == r1 && !dw_add) std::fill_n(dwt, K * F, T(0));  // an empty chunk still owns a partial
  }, threshold);
  if (dw && nt > 1) {
    Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>> out(dw, K * F);
    if (!add_dw) out.setZero();
    for (int t = 0; t < nt; ++t) out += Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>(partial.data() + t * K * F, K * F);
  }
}

template <class XE, class WE, class... BE>
auto conv2d_impl(const XE& x_expr, const WE& w_expr, const Conv2dOptions& opts, const BE&... b_expr) {
  using T = value_type_t<XE>;
  auto x = materialize(x_expr);
  auto w = materialize(w_expr);
  const Tensor<T>& xv = value_of(x);
  const Tensor<T>& wv = value_of(w);
  const ConvPlan p = plan_conv2d(xv.shape(), wv.shape(), opts);
  Tensor<T> out(p.out_shape());
  if constexpr (sizeof...(BE) == 0) {
    conv2d_forward<T>(p, xv.data(), wv.data(), nullptr, out.data());
    return make_result("conv2d", std::move(out), [p](const Tensor<T>& g, const Tensor<T>&, const auto& x, const auto& w) {
      bool ax = false, aw = false;
      T* dx = needs_grad(x) ? adjoint_buffer(x, &ax) : nullptr;
      T* dw = needs_grad(w) ? adjoint_buffer(w, &aw) : nullptr;
      conv2d_backward<T>(p, g.data(), value_of(x).data(), value_of(w).data(), dx, ax, dw, aw, nullptr, false);
    }, x, w);
  } else {
    auto b = materialize(b_expr...);
    const Tensor<T>& bv = value_of(b);
    GRADUS_CHECK(shape_error, bv.rank() == 1 && bv.size() == p.f, "conv2d: bias must have shape [", p.f,
                 "] (the filter's out_channels), got ", bv.shape(), " for filter ", wv.shape());
    conv2d_forward<T>(p, xv.data(), wv.data(), bv.data(), out.data());
    return make_result("conv2d", std::move(out),
                       [p](const Tensor<T>& g, const Tensor<T>&, const auto& x, const auto& w, const auto& b) {
      bool ax = false, aw = false, ab = false;
      T* dx = needs_grad(x) ? adjoint_buffer(x, &ax) : nullptr;
      T* dw = needs_grad(w) ? adjoint_buffer(w, &aw) : nullptr;
      T* db = needs_grad(b) ? adjoint_buffer(b, &ab) : nullptr;
      conv2d_backward<T>(p, g.data(), value_of(x).data(), value_of(w).data(), dx, ax, dw, aw, db, ab);
    }, x, w, b);
  }
}

}  // namespace detail

/// 2-D convolution (cross-correlation, as tf.nn.conv2d) of input [N,H,W,C] with filter
/// [KH,KW,C,F] -> [N,OH,OW,F]; differentiable in both. Multi-threaded im2col + Eigen GEMM.
///   auto y = gd::conv2d(x, w, {.strides = {2, 2}, .padding = gd::Padding::same});
template <Expression X, Expression W>
auto conv2d(const X& input, const W& filter, const Conv2dOptions& opts = {}) {
  static_assert(detail::same_element_v<X, W>, "YOU_MIXED_ELEMENT_TYPES_IN_ONE_EXPRESSION: conv2d operands differ");
  static_assert(Real<value_type_t<X>>, "conv2d: element type must be float or double");
  return detail::conv2d_impl(input, filter, opts);
}
/// conv2d plus a per-channel bias [F], added in the same output pass.
///   auto y = gd::relu(gd::conv2d(x, w, b, {.padding = gd::Padding::same}));
template <Expression X, Expression W, Expression B>
auto conv2d(const X& input, const W& filter, const B& bias, const Conv2dOptions& opts = {}) {
  static_assert(detail::same_element_v<X, W> && detail::same_element_v<X, B>,
                "YOU_MIXED_ELEMENT_TYPES_IN_ONE_EXPRESSION: conv2d operands differ");
  static_assert(Real<value_type_t<X>>, "conv2d: element type must be float or double");
  return detail::conv2d_impl(input, filter, opts, bias);
}

}  // namespace gradus
