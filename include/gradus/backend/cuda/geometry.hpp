// gradus/backend/cuda/geometry.hpp — the shapes of a convolution, a pooling and a strided copy, and
// an optimizer step's constants, as a GPU kernel receives them: plain 64-bit fields, laid out the same for the host that fills them (from
// backend/plans.hpp's ConvPlan and PoolPlan) and for NVRTC, so this header includes nothing.
#pragma once

namespace gradus::backend::cuda {

/// conv2d: input [n,h,w,c], filter [kh,kw,c,f], output [n,oh,ow,f]; strides, dilations, padding.
struct ConvGeometry {
  long n, h, w, c, kh, kw, f, oh, ow, sh, sw, dh, dw, ph, pw;
};

/// pool2d: input [n,h,w,c], window [kh,kw], strides, output [n,oh,ow,c], padding.
struct PoolGeometry {
  long n, h, w, c, kh, kw, sh, sw, oh, ow, ph, pw;
};

/// An N-d copy over `n` (row-major, at most 8 axes) with element strides for each side: element
/// (i_0 .. i_{rank-1}) goes from sum i_k * src[k] to sum i_k * dst[k].
struct CopyGeometry {
  long rank;
  long n[8], src[8], dst[8];
};

/// One Adam step's constants as its kernel receives them (backend::AdamStep on the host).
template <class T>
struct AdamConstants {
  T beta1, one_minus_beta1, beta2, one_minus_beta2, alpha, eps, decay;
};

}  // namespace gradus::backend::cuda
