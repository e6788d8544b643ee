// gradus/backend/cuda/library/conv.cuh — the kernels of conv2d as im2col + GEMM (conv.hpp):
// gathering the patches, scattering their gradients back, adding the bias to every row. Device
// code, read only by NVRTC (library_source()); uses common.cuh and geometry.hpp.
#pragma once

// The [n,h,w,c] offset of the input element that element i of the patch matrix
// cols [n*oh*ow, kh*kw*c] reads (row: the output pixel, column: ky, kx, channel), or -1 where the
// window reaches outside the image, into the padding.
__device__ inline long gradus_patch_offset(const gradus::backend::cuda::ConvGeometry& p, long i) {
  const long depth = p.kh * p.kw * p.c;
  const long row = i / depth, d = i % depth;
  const long ci = d % p.c, kx = (d / p.c) % p.kw, ky = d / (p.c * p.kw);
  const long ox = row % p.ow, oy = (row / p.ow) % p.oh, b = row / (p.ow * p.oh);
  const long yy = oy * p.sh - p.ph + ky * p.dh, xx = ox * p.sw - p.pw + kx * p.dw;
  return yy >= 0 && yy < p.h && xx >= 0 && xx < p.w ? ((b * p.h + yy) * p.w + xx) * p.c + ci : -1;
}

#define GRADUS_LIBRARY_CONV(T, S)                                                                   \
  /* cols [n*oh*ow, kh*kw*c]: each output pixel's patch, zero where the window is outside */       \
  extern "C" __global__ void gradus_im2col_##S(const T* x, T* cols, gradus::backend::cuda::ConvGeometry p) { \
    GRADUS_FOR_EACH(i, p.n * p.oh * p.ow * p.kh * p.kw * p.c) {                                    \
      const long k = gradus_patch_offset(p, i);                                                    \
      cols[i] = k >= 0 ? x[k] : T(0);                                                              \
    }                                                                                              \
  }                                                                                                \
  /* the adjoint of im2col: each patch element's gradient added to the input pixel it read */       \
  extern "C" __global__ void gradus_col2im_##S(const T* cols, T* dx, gradus::backend::cuda::ConvGeometry p) { \
    GRADUS_FOR_EACH(i, p.n * p.oh * p.ow * p.kh * p.kw * p.c) {                                    \
      const long k = gradus_patch_offset(p, i);                                                    \
      if (k >= 0) atomicAdd(dx + k, cols[i]);                                                      \
    }                                                                                              \
  }                                                                                                \
  extern "C" __global__ void gradus_add_rows_##S(T* out, const T* bias, long rows, long n) {       \
    GRADUS_FOR_EACH(i, rows * n) out[i] += bias[i % n];                                            \
  }
GRADUS_LIBRARY_CONV(float, f)
GRADUS_LIBRARY_CONV(double, d)
