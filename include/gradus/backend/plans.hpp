// gradus/backend/plans.hpp — the shapes a kernel works on, as ops hand them to a backend.
//
// An op checks its arguments and reduces them to one of these plain descriptions; every
// backend's kernel of that op takes the same plan, so the shape logic is written once.
#pragma once
#include <algorithm>
#include <cstdint>

#include "gradus/core/shape.hpp"

namespace gradus::backend {

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

/// Everything a pooling kernel needs: input [n,h,w,c], window, strides, output and padding.
struct PoolPlan {
  int64_t n, h, w, c, kh, kw, sh, sw, oh, ow, ph, pw;
  Shape out_shape() const { return Shape{n, oh, ow, c}; }
  /// The clipped window of output (oy, ox): input rows [y0, y1), columns [x0, x1).
  void window(int64_t oy, int64_t ox, int64_t& y0, int64_t& y1, int64_t& x0, int64_t& x1) const {
    const int64_t ys = oy * sh - ph, xs = ox * sw - pw;
    y0 = std::max<int64_t>(ys, 0), y1 = std::min(ys + kh, h);
    x0 = std::max<int64_t>(xs, 0), x1 = std::min(xs + kw, w);
  }
};

/// Strides of the [outer, n, inner] view of one axis (or of all elements when axis < 0).
struct AxisView {
  int64_t outer = 1, n = 1, inner = 1;
  AxisView(const Shape& s, int axis) {
    if (axis < 0) {
      n = s.numel();
      return;
    }
    for (int i = 0; i < s.rank(); ++i) (i < axis ? outer : i == axis ? n : inner) *= s[i];
  }
  /// Index in the reduced output of the line that starts at input offset `base`.
  int64_t out_index(int64_t base) const { return (base / (n * inner)) * inner + base % inner; }
};

/// The shapes of an LSTM sequence: n sequences of `steps` steps, `units` hidden units (4 gates).
struct LstmPlan {
  int64_t n, steps, units;
};

/// What the forward pass keeps for the backward one (all time-major, caller-owned):
/// act [T, N, 4u] the activated gates σ(i), σ(f), tanh(g), σ(o); h_prev [T, N, u] h_{t-1};
/// c_prev [T, N, u] c_{t-1}; tanh_c [T, N, u] tanh(c_t).
template <class T>
struct LstmSaved {
  T* act;
  T* h_prev;
  T* c_prev;
  T* tanh_c;
};

}  // namespace gradus::backend
