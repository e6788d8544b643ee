// gradus/backend/cuda/geometry.hpp — the shapes of a convolution, a pooling, a resampling, a strided
// copy and a sum over broadcast axes, and an optimizer step's constants, as a GPU kernel receives them:
// plain 64-bit fields, laid out the same for the host that fills them (from backend/plans.hpp's
// ConvPlan and PoolPlan) and for NVRTC, so this header includes only kernel_args.hpp (which
// includes nothing).
#pragma once
#include "gradus/backend/cuda/kernel_args.hpp"

namespace gradus::backend::cuda {

/// conv2d: input [n,h,w,c], filter [kh,kw,c,f], output [n,oh,ow,f]; strides, dilations, padding.
struct ConvGeometry {
  long n, h, w, c, kh, kw, f, oh, ow, sh, sw, dh, dw, ph, pw;
};

/// pool2d: input [n,h,w,c], window [kh,kw], strides, output [n,oh,ow,c], padding.
struct PoolGeometry {
  long n, h, w, c, kh, kw, sh, sw, oh, ow, ph, pw;
};

/// resampler: data [b,h,w,c] sampled at p points (x, y) per batch element; output [b,p,c].
struct ResampleGeometry {
  long b, h, w, c, p;
};

/// An N-d copy over `n` (row-major, at most 8 axes) with element strides for each side: element
/// (i_0 .. i_{rank-1}) goes from sum i_k * src[k] to sum i_k * dst[k].
struct CopyGeometry {
  long rank;
  long n[8], src[8], dst[8];
};

/// A sum of x (contiguous, `m * k` elements) over its broadcast axes into y (`m` elements): y[j] is
/// the sum over q < k of x[kept.at(j) + summed.at(q)], each offset decoded row-major from its axes'
/// sizes with x's strides along them (Bcast). `tx` threads of a block of 256 take neighbouring
/// outputs, the others split the terms; each output's terms are cut into `parts` ranges whose
/// sums are added in order by a second kernel.
struct SumToGeometry {
  long m, k;
  Bcast kept, summed;
  long tx, parts;
};

/// One Adam step's constants as its kernel receives them (backend::AdamStep on the host).
template <class T>
struct AdamConstants {
  T beta1, one_minus_beta1, beta2, one_minus_beta2, alpha, eps, decay;
};

/// Up to 32 parameters of one Adam step, as one kernel takes them (by value: 1.8 KB of the 4 KB a
/// launch may pass): parameter k's elements are the global indices [start[k], start[k + 1]).
template <class T>
struct AdamBatch {
  static constexpr int kMax = 32;
  long count;
  long start[kMax + 1];
  T* w[kMax];
  const T* g[kMax];
  T* m[kMax];
  T* v[kMax];
  T* vhat[kMax];
};

}  // namespace gradus::backend::cuda
