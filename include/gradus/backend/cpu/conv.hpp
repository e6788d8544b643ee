// gradus/backend/cpu/conv.hpp — 2-D convolution on the CPU: im2col + GEMM, tile by tile.
//
// Output rows r = (n, oh, ow) are split over the cores; each thread turns a tile of rows into
// their patches [R, KH*KW*C] in a cache-sized scratch buffer and multiplies it by the filter
// viewed as [KH*KW*C, F], straight into the output. The backward pass recomputes the patches
// tile by tile: dfilter = patchesᵀ·g (per-thread partial sums, added in a fixed order) and
// dinput = col2im(g·filterᵀ), with each thread owning whole images so the scatter never races.
// No patch matrix of the whole batch is ever stored.
#pragma once
#include "gradus/core/eigen.hpp"
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <type_traits>
#include <vector>

#include "gradus/backend/cpu/bias_activation.hpp"
#include "gradus/backend/cpu/gemm.hpp"
#include "gradus/backend/cpu/isa.hpp"
#include "gradus/backend/cpu/vecmath.hpp"
#include "gradus/backend/cpu/parallel.hpp"
#include "gradus/backend/plans.hpp"

GRADUS_SIMD_HINTS_BEGIN
namespace gradus::backend::cpu {

/// Rows of a tile: about 256 KiB of patches, so a tile and its GEMM panels stay in L2; a
/// multiple of 12 (the AVX-512 kernel's rows, twice the AVX2 kernel's), so that whole tiles run
/// on full register blocks (LeNet's second layer: 72 rows, not 81 = 6 x 12 + 9).
template <class T>
int64_t conv_tile_rows(const ConvPlan& p) {
  const int64_t rows =
      std::clamp<int64_t>((int64_t(256) << 10) / int64_t(sizeof(T) * std::max<int64_t>(p.depth(), 1)), 12, 4096);
  return rows - rows % 12;
}

/// Threshold for `parallel_chunks` over `n` items of `work` flops each: small jobs stay on
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
void add_short(const T* __restrict src, int64_t n, T* __restrict dst) {
  GRADUS_SIMD
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

/// im2col for filter rows of S = KW*C elements known at compile time, dilation 1 along W. The
/// rows are copied and zeroed as blocks of constant size, which the compiler turns into a few
/// vector moves; as loops over elements they stayed scalar (the compiler cannot rule out that
/// dst overlaps x), at three times the cost.
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
        std::memset(d, 0, S * sizeof(T));
      } else if (inside) {
        std::memcpy(d, img + iy * row + ix0 * p.c, S * sizeof(T));
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
  with_isa([&] {
    switch (p.dw == 1 ? p.kw * p.c : 0) {  // short filter rows (one input channel) unrolled
      case 3: return im2col_short<3>(p, x, r0, r1, dst);
      case 5: return im2col_short<5>(p, x, r0, r1, dst);
      case 7: return im2col_short<7>(p, x, r0, r1, dst);
      default: return im2col_rows(p, x, r0, r1, dst);
    }
  });
}

/// The adjoint of im2col: adds patch rows [r0, r1) of `src` into the input-shaped `dx`.
template <class T>
void col2im(const ConvPlan& p, const T* src, int64_t r0, int64_t r1, T* dx) {
  with_isa([&] {
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
  });
}

/// The output pass of a tile of `rows` rows of F channels, while it is in cache:
/// o = max(o + bias, 0) with `relu`, o + bias without (a null bias adds nothing).
template <class T>
void conv_epilogue(T* __restrict o, int64_t rows, int64_t F, const T* __restrict bias, bool relu) {
  if (!bias && !relu) return;
  with_isa([&] {
    for (int64_t r = 0; r < rows; ++r, o += F) {
      if (bias && relu) {
        GRADUS_SIMD
        for (int64_t f = 0; f < F; ++f) o[f] = vm::relu(o[f] + bias[f]);
      } else if (bias) {
        GRADUS_SIMD
        for (int64_t f = 0; f < F; ++f) o[f] += bias[f];
      } else {
        GRADUS_SIMD
        for (int64_t f = 0; f < F; ++f) o[f] = vm::relu(o[f]);
      }
    }
  });
}

#if defined(GRADUS_SGEMM_X86)
/// Direct convolution, for inputs of few channels (a first layer on grayscale or RGB images).
/// Their patches are short (LeNet's first layer: 25 taps), so im2col and packing them cost as
/// much as the products; here the GEMM micro-kernels read the taps straight from the image
/// instead: output pixels ox, ox + 1, ... of one output row are the kernel's rows, and tap p of
/// row i is x[base + off[p] + i * sw * C]. The forward pass multiplies them by the filter's packed
/// panels; the filter gradient multiplies R taps at a time by the rows of g. The forward pass
/// runs this way for inputs of many channels too (direct_forward); their filter gradient ran no
/// faster directly than through im2col and the GEMM (LeNet's second layer: 8.5 against 8.3 ms).
inline constexpr int64_t kDirectConvChannels = 4;

/// Whether the direct kernels can run a float convolution with kernel k at all: a convolution
/// that is neither pointwise nor empty, a blocked float kernel (AVX-512 or AVX2), no bfloat16
/// autocast (whose products round their operands first).
inline bool direct_kernels_run(const ConvPlan& p, GemmKernel k) {
  return !p.pointwise() && p.depth() > 0 && p.f > 0 && (k == GemmKernel::avx512 || k == GemmKernel::avx2) &&
         autocast_precision() != Precision::bf16;
}

/// Whether a float convolution runs directly with kernel k, forward and backward: few input
/// channels, where the direct kernels run.
inline bool direct_conv(const ConvPlan& p, GemmKernel k = gemm_kernel()) {
  return p.c <= kDirectConvChannels && direct_kernels_run(p, k);
}

/// Whether conv2d's forward pass runs directly with kernel k: always where direct_conv says so,
/// and for inputs of any number of channels on the AVX-512 kernel when the output rows cut into
/// runs of 12 and 4 pixels (ow a multiple of 4) against filters of at least 24 channels. There
/// im2col's copy of the patches and their packing cost 6-22% of the forward pass (one thread,
/// Zen 4: LeNet's second layer, 12x12x32 -> 8x8x64, 8.5 -> 7.4 ms; 3x3 layers of 16-256 channels
/// on 4- to 32-pixel rows alike), and the kernel reads the taps from the image, which stays in L1
/// and L2. Partial runs of 1-3 pixels (ow = 7, 14) run on the 1-row kernel, latency-bound over a
/// deep patch: 1.05-1.4x im2col's time; fewer filters run as transposed GEMMs faster.
inline bool direct_forward(const ConvPlan& p, GemmKernel k = gemm_kernel()) {
  return direct_kernels_run(p, k) &&
         (p.c <= kDirectConvChannels || (k == GemmKernel::avx512 && p.ow > 0 && p.ow % 4 == 0 && p.f >= 24));
}

/// The image a direct convolution reads — the input itself, or a zero-padded copy of it when
/// windows reach past its edges — and the offset of every tap from its window's top-left element.
struct DirectImage {
  const float* x;
  int64_t row, image;         // strides of x's rows and images
  std::vector<int64_t> off;   // tap (i * KW + j) * C + ch
  Tensor<float> padded;

  DirectImage(const ConvPlan& p, const float* input) : x(input) {
    const int64_t H = (p.oh - 1) * p.sh + (p.kh - 1) * p.dh + 1, W = (p.ow - 1) * p.sw + (p.kw - 1) * p.dw + 1;
    const bool inside = p.ph == 0 && p.pw == 0 && H <= p.h && W <= p.w;
    row = (inside ? p.w : W) * p.c, image = (inside ? p.h : H) * row;
    if (!inside) {
      padded = Tensor<float>::zeros(Shape{p.n * image});
      const int64_t x0 = std::min(p.pw, W), x1 = std::clamp<int64_t>(p.w + p.pw, x0, W);  // columns from the input
      for (int64_t n = 0; n < p.n; ++n)
        for (int64_t y = std::min(p.ph, H); y < std::min(p.h + p.ph, H); ++y)
          std::copy_n(input + ((n * p.h + y - p.ph) * p.w + x0 - p.pw) * p.c, (x1 - x0) * p.c,
                      padded.data() + n * image + y * row + x0 * p.c);
      x = padded.data();
    }
    off.resize(size_t(p.depth()));
    for (int64_t i = 0; i < p.kh; ++i)
      for (int64_t j = 0; j < p.kw; ++j)
        for (int64_t ch = 0; ch < p.c; ++ch)
          off[size_t((i * p.kw + j) * p.c + ch)] = i * p.dh * row + j * p.dw * p.c + ch;
  }
  /// Offset in x of the window of image n whose top-left tap is input (iy0, ix0), as
  /// for_each_window gives them (negative inside the padding, which x holds).
  int64_t at(const ConvPlan& p, int64_t n, int64_t iy0, int64_t ix0) const {
    return n * image + (iy0 + p.ph) * row + (ix0 + p.pw) * p.c;
  }
  /// Offset in x of output row r's window.
  int64_t base(const ConvPlan& p, int64_t r) const {
    const int64_t per_image = p.oh * p.ow, oy = r % per_image / p.ow, ox = r % p.ow;
    return at(p, r / per_image, oy * p.sh - p.ph, ox * p.sw - p.pw);
  }
};

/// f(kernel) with the micro-kernel struct k names (AVX-512, else AVX2).
template <class F>
void with_direct_kernel(GemmKernel k, F&& f) {
  if (!with_blocked_kernel(k, f)) f(sgemm::Avx2{});
}

/// f(R, i0) for the parts of a block of `rows` <= MR rows that the direct kernels are compiled
/// for: all of it, else blocks of 4 rows and single rows (three sizes, not the five of
/// sgemm::tile: a partial run is rare, and every size is compiled for both instruction sets).
template <int64_t MR, class F>
void split_rows(int64_t rows, F&& f) {
  if (rows == MR) return f(std::integral_constant<int, int(MR)>{}, int64_t(0));
  int64_t i0 = 0;
  for (; i0 + 4 <= rows; i0 += 4) f(std::integral_constant<int, 4>{}, i0);
  for (; i0 < rows; ++i0) f(std::integral_constant<int, 1>{}, i0);
}

/// conv2d_forward of a direct convolution: runs of up to MR output pixels of one output row
/// against each packed panel of the filter, then the bias and activation of 256 rows at a time.
/// The threads' chunks start at multiples of 4 pixels, so that where ow is one they cut no run
/// into pieces for the 1-row kernel.
inline void direct_conv_forward(const ConvPlan& p, const float* x, const float* w, const float* bias, float* out,
                                bool relu, GemmKernel k = gemm_kernel()) {
  with_direct_kernel(k, [&](auto kernel) {
    using K = decltype(kernel);
    constexpr int64_t MR = K::kMR, NR = K::kNR;
    const int64_t M = p.rows(), depth = p.depth(), F = p.f, panels = (F + NR - 1) / NR, rs = p.sw * p.c;
    const DirectImage d(p, x);
    Tensor<float> wp(Shape{panels * NR * depth});
    sgemm::pack_b<NR>(w, F, 1, depth, F, wp.data());
    parallel_chunks(M, 4, [&](int, int64_t r0, int64_t r1) {
      for (int64_t t0 = r0; t0 < r1; t0 += 256) {
        const int64_t t1 = std::min(r1, t0 + 256);
        for (int64_t r = t0; r < t1;) {
          const int64_t run = std::min({MR, p.ow - r % p.ow, t1 - r});
          const float* a = d.x + d.base(p, r);
          for (int64_t jp = 0; jp < panels; ++jp)
            split_rows<MR>(run, [&](auto R, int64_t i0) {
              K::template conv_kernel<R()>(depth, a + i0 * rs, d.off.data(), rs, wp.data() + jp * depth * NR,
                                           out + (r + i0) * F + jp * NR, F, std::min(NR, F - jp * NR));
            });
          r += run;
        }
        conv_epilogue(out + t0 * F, t1 - t0, F, bias, relu);
      }
    }, parallel_threshold(M, double(depth * F)));
  });
}

/// The filter gradient of a direct convolution over output rows [t0, t1): dw (depth x F) = or
/// (`add`) += patchesᵀ · g, g the tile's rows [t1 - t0, F]; `base` holds t1 - t0 offsets. With
/// the AVX-512 kernel only, `y` (the tile's rows of a fused ReLU convolution's output) masks g
/// where y <= 0 and `db` (F floats) gets the masked g's column sums added.
inline void direct_filter_grad(const ConvPlan& p, const DirectImage& d, int64_t t0, int64_t t1, const float* g,
                               float* dw, bool add, int64_t* base, GemmKernel k = gemm_kernel(),
                               const float* y = nullptr, float* db = nullptr) {
  const int64_t rows = t1 - t0, depth = p.depth(), F = p.f;
  for_each_window(p, t0, t1, [&](int64_t r, int64_t n, int64_t iy0, int64_t ix0) {  // no division per row
    base[r - t0] = d.at(p, n, iy0, ix0);
  });
  with_direct_kernel(k, [&](auto kernel) {
    using K = decltype(kernel);
    constexpr int64_t MR = K::kMR, NR = K::kNR;
    for (int64_t p0 = 0; p0 < depth; p0 += MR)
      for (int64_t j0 = 0; j0 < F; j0 += NR)
        split_rows<MR>(std::min(MR, depth - p0), [&](auto R, int64_t i0) {
          const int64_t* off = d.off.data() + p0 + i0;
          float* c = dw + (p0 + i0) * F + j0;
          const int64_t n = std::min(NR, F - j0);
          if constexpr (std::is_same_v<K, sgemm::Avx512>)
            K::template conv_filter_kernel<R()>(rows, d.x, base, off, g + j0, F, c, F, add, n, y ? y + j0 : nullptr,
                                                db && p0 + i0 == 0 ? db + j0 : nullptr);
          else
            K::template conv_filter_kernel<R()>(rows, d.x, base, off, g + j0, F, c, F, add, n);
        });
  });
}
#endif

/// out [rows, F] = patches(x) · w [K, F] (+ bias [F] when given), then max(·, 0) with `relu`,
/// through im2col: tiles of patches multiplied by the filter, packed once for all of them; bias
/// and activation are applied tile by tile right after the tile's GEMM, while it is in cache.
template <class T>
void im2col_forward(const ConvPlan& p, const T* x, const T* w, const T* bias, T* out, bool relu) {
  const int64_t M = p.rows(), K = p.depth(), F = p.f, R = conv_tile_rows<T>(p);
  const GemmB<T> wb(w, false, K, F);
  parallel_chunks(M, 1, [&](int, int64_t r0, int64_t r1) {
    Tensor<T> patches(Shape{std::min(R, r1 - r0) * K});
    for (int64_t t0 = r0; t0 < r1; t0 += R) {
      const int64_t t1 = std::min(r1, t0 + R);
      im2col(p, x, t0, t1, patches.data());
      wb.multiply(patches.data(), false, out + t0 * F, t1 - t0, false);
      conv_epilogue(out + t0 * F, t1 - t0, F, bias, relu);
    }
  }, parallel_threshold(M, double(K * F)));
}

/// out [rows, F] = patches(x) · w [K, F] (+ bias [F] when given), then max(·, 0) with `relu`: a
/// pointwise convolution as one GEMM, a direct one where direct_forward says so, else im2col.
template <class T>
void conv2d_forward(const ConvPlan& p, const T* x, const T* w, const T* bias, T* out, bool relu) {
  const int64_t M = p.rows(), K = p.depth(), F = p.f;
  if (M == 0 || F == 0) return;
  if (p.pointwise()) {  // one GEMM over the input as it is; Eigen threads it
    gemm(x, false, w, false, out, M, K, F, false);
    parallel_chunks(M, 1, [&](int, int64_t r0, int64_t r1) { conv_epilogue(out + r0 * F, r1 - r0, F, bias, relu); },
                    row_threshold(F));
    return;
  }
#if defined(GRADUS_SGEMM_X86)
  if constexpr (std::is_same_v<T, float>)
    if (direct_forward(p)) return direct_conv_forward(p, x, w, bias, out, relu);
#endif
  im2col_forward(p, x, w, bias, out, relu);
}

/// Gradients of conv2d given the output adjoint g [rows, F]; a null destination is skipped,
/// `add_*` accumulates into it instead of overwriting. With `relu_y` (the output of a
/// conv2d_forward with `relu`) g is first masked where relu_y <= 0, tile by tile in cache.
template <class T>
void conv2d_backward(const ConvPlan& p, const T* g, const T* x, const T* w, T* dx, bool add_dx, T* dw, bool add_dw,
                     T* db, bool add_db, const T* relu_y) {
  const int64_t M = p.rows(), K = p.depth(), F = p.f;
  if (relu_y && (p.pointwise() || M == 0 || K == 0 || F == 0)) {  // rare: mask all of g first
    Tensor<T> masked(Shape{M * F});
    for (int64_t i = 0; i < M * F; ++i) masked.data()[i] = vm::where_positive(relu_y[i], g[i]);
    return cpu::conv2d_backward<T>(p, masked.data(), x, w, dx, add_dx, dw, add_dw, db, add_db, nullptr);
  }
  if (db && !relu_y) {  // column sums of g
    Eigen::Map<Eigen::Array<T, 1, Eigen::Dynamic>> b(db, F);
    if (!add_db) b.setZero();
    if (M > 0) b += Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(g, M, F).colwise().sum();
  }
  const bool db_tiles = db && relu_y;  // column sums of the masked tiles
  if (!dx && !dw && !db_tiles) return;
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
  const int nt = chunks_for(M, align, threshold);
  Tensor<T> partial;  // per-thread dfilter and dbias sums, added in chunk order afterwards
  const int64_t stride = (dw ? K * F : 0) + (db_tiles ? F : 0);
  if (nt > 1 && stride > 0) partial = Tensor<T>(Shape{nt, stride});
  std::optional<GemmB<T>> wt;  // the filter transposed, packed once for every tile's dpatches
  if (dx) wt.emplace(w, true, F, K);
#if defined(GRADUS_SGEMM_X86)
  std::optional<DirectImage> direct;  // the filter gradient read straight from the image
  if constexpr (std::is_same_v<T, float>)
    if (dw && direct_conv(p)) direct.emplace(p, x);
  // with AVX-512 the direct kernel masks g by relu_y and sums the bias gradient as it goes: no
  // pass of its own over g and relu_y (a third of LeNet's first layer's backward), unless the
  // masked g is needed for dinput too
  const bool fused = direct && relu_y && !dx && gemm_kernel() == GemmKernel::avx512;
#else
  constexpr bool direct = false, fused = false;
#endif
  parallel_chunks(M, align, [&](int t, int64_t r0, int64_t r1) {
    const int64_t cap = std::min(R, r1 - r0);
    Tensor<T> patches(Shape{(dx || (dw && !direct)) ? cap * K : 0});
    std::vector<int64_t> bases(direct ? size_t(cap) : 0);
    Tensor<T> gmask(Shape{relu_y && !fused ? cap * F : 0});
    T* dwt = dw;
    T* dbt = db_tiles ? db : nullptr;
    bool dw_add = add_dw, db_add = add_db;
    if (nt > 1) {
      if (dw) dwt = partial.data() + t * stride, dw_add = false;
      if (db_tiles) dbt = partial.data() + t * stride + (dw ? K * F : 0), db_add = false;
    }
    if (dbt && !db_add) std::fill_n(dbt, F, T(0));
    if (dx && !add_dx) std::fill(dx + (r0 / per_image) * image, dx + (r1 / per_image) * image, T(0));
    for (int64_t t0 = r0; t0 < r1; t0 += R) {
      const int64_t t1 = std::min(r1, t0 + R), rows = t1 - t0;
      const T* gt = g + t0 * F;
      if (relu_y && !fused) {
        relu_mask_rows(gt, relu_y + t0 * F, rows, F, gmask.data(), dbt);
        gt = gmask.data();
      }
      if (dw) {
#if defined(GRADUS_SGEMM_X86)
        if constexpr (std::is_same_v<T, float>)
          if (direct)
            direct_filter_grad(p, *direct, t0, t1, gt, dwt, dw_add, bases.data(), gemm_kernel(),
                               fused ? relu_y + t0 * F : nullptr, fused ? dbt : nullptr);
#endif
        if (!direct) {
          im2col(p, x, t0, t1, patches.data());
          gemm(patches.data(), true, gt, false, dwt, K, rows, F, dw_add);
        }
        dw_add = true;
      }
      if (dx) {
        wt->multiply(gt, false, patches.data(), rows, false);
        col2im(p, patches.data(), t0, t1, dx);
      }
    }
    if (dw && r0 == r1 && !dw_add) std::fill_n(dwt, K * F, T(0));  // an empty chunk still owns a partial
  }, threshold);
  if (nt > 1 && stride > 0) {
    auto sum_partials = [&](T* dst, int64_t offset, int64_t len, bool add) {
      Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>> out(dst, len);
      if (!add) out.setZero();
      for (int t = 0; t < nt; ++t)
        out += Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>(partial.data() + t * stride + offset, len);
    };
    if (dw) sum_partials(dw, 0, K * F, add_dw);
    if (db_tiles) sum_partials(db, dw ? K * F : 0, F, add_db);
  }
}

}  // namespace gradus::backend::cpu
GRADUS_SIMD_HINTS_END
