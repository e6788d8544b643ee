// gradus/backend/cuda/library/conv.cuh — the kernels of conv2d as im2col + GEMM (conv.hpp):
// gathering the patches, gathering their gradients back to the input, adding the bias to every row. Device
// code, read only by NVRTC (library_source()); uses common.cuh and geometry.hpp.
#pragma once

// The [n,h,w,c] offset of the input element that element i of the patch matrix
// cols [n*oh*ow, kh*kw*c] reads (row: the output pixel, column: ky, kx, channel), or -1 where the
// window reaches outside the image, into the padding. i is split into its six coordinates by
// five divisions (each quotient divided again), in U: unsigned int when every index fits in 32 bits
// (a GPU divides 32-bit integers several times faster than 64-bit ones), else unsigned long.
template <class U>
__device__ inline long gradus_patch_offset(const gradus::backend::cuda::ConvGeometry& p, U i) {
  const U c = U(p.c), kw = U(p.kw), kh = U(p.kh), ow = U(p.ow), oh = U(p.oh);
  const U ci = i % c;
  i /= c;
  const U kx = i % kw;
  i /= kw;
  const U ky = i % kh;
  i /= kh;
  const U ox = i % ow;
  i /= ow;
  const U oy = i % oh, b = i / oh;
  const long yy = long(oy) * p.sh - p.ph + long(ky) * p.dh, xx = long(ox) * p.sw - p.pw + long(kx) * p.dw;
  return yy >= 0 && yy < p.h && xx >= 0 && xx < p.w ? ((long(b) * p.h + yy) * p.w + xx) * p.c + long(ci) : -1;
}

#define GRADUS_LIBRARY_CONV(T, S)                                                                   \
  /* cols [n*oh*ow, kh*kw*c]: each output pixel's patch, zero where the window is outside */       \
  extern "C" __global__ void gradus_im2col_##S(const T* x, T* cols, gradus::backend::cuda::ConvGeometry p) { \
    const long total = p.n * p.oh * p.ow * p.kh * p.kw * p.c;                                     \
    const bool narrow = total <= 0xffffffffL;                                                      \
    GRADUS_FOR_EACH(i, total) {                                                                     \
      const long k = narrow ? gradus_patch_offset(p, (unsigned)i) : gradus_patch_offset(p, (unsigned long)i); \
      cols[i] = k >= 0 ? x[k] : T(0);                                                              \
    }                                                                                              \
  }                                                                                                \
  /* the adjoint of im2col, one thread per input element: the gradients of the patch elements   \
     that read it, added in a fixed order (ky, then kx) — no atomics, the same bits on every run; \
     dx = that sum, or dx += it with `add` */                                                       \
  extern "C" __global__ void gradus_col2im_##S(const T* cols, T* dx, gradus::backend::cuda::ConvGeometry p, \
                                               int add) {                                           \
    const long depth = p.kh * p.kw * p.c;                                                           \
    GRADUS_FOR_EACH(k, p.n * p.h * p.w * p.c) {                                                     \
      const long ci = k % p.c, xx = (k / p.c) % p.w, yy = (k / (p.c * p.w)) % p.h, b = k / (p.c * p.w * p.h); \
      T s = 0;                                                                                      \
      for (long ky = 0; ky < p.kh; ++ky) {                                                          \
        const long ty = yy + p.ph - ky * p.dh; /* = oy * sh for the output row that reads it */     \
        if (ty < 0 || ty % p.sh != 0 || ty / p.sh >= p.oh) continue;                               \
        for (long kx = 0; kx < p.kw; ++kx) {                                                        \
          const long tx = xx + p.pw - kx * p.dw;                                                    \
          if (tx < 0 || tx % p.sw != 0 || tx / p.sw >= p.ow) continue;                              \
          const long row = (b * p.oh + ty / p.sh) * p.ow + tx / p.sw;                               \
          s += cols[row * depth + (ky * p.kw + kx) * p.c + ci];                                     \
        }                                                                                           \
      }                                                                                             \
      dx[k] = add ? T(dx[k] + s) : s;                                                               \
    }                                                                                               \
  }                                                                                                 \
  extern "C" __global__ void gradus_add_rows_##S(T* out, const T* bias, long rows, long n) {       \
    GRADUS_FOR_EACH(i, rows * n) out[i] += bias[i % n];                                            \
  }
GRADUS_LIBRARY_CONV(float, f)
GRADUS_LIBRARY_CONV(double, d)
