// gradus/backend/plans.hpp — the shapes a kernel works on, as ops hand them to a backend.
//
// An op checks its arguments and reduces them to one of these plain descriptions; every
// backend's kernel of that op takes the same plan, so the shape logic is written once.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

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

/// resampler: data [b, h, w, c] sampled at `p` points per batch element (warp [b, p, 2], each
/// point (x, y) in pixel units: column x, row y); output [b, p, c].
struct ResamplePlan {
  int64_t b, h, w, c, p;
};

/// The geometry of an image or batch: N (1 for a single image), H, W, C and whether it was batched.
struct ImagePlan {
  int64_t n, h, w, c;
  bool batched;
  Shape shape_with(int64_t nh, int64_t nw, int64_t nc) const {
    return batched ? Shape{n, nh, nw, nc} : Shape{nh, nw, nc};
  }
  int64_t pixels() const { return h * w; }
};

/// The taps of one axis of a separable image map: `out` outputs reading `in` inputs, output o
/// being sum_k weight_k * in[index_k] over its taps [begin[o], begin[o + 1]) (compressed rows);
/// an output with no tap is zero (padding).
struct AxisTaps {
  int64_t in = 0, out = 0;
  std::vector<int64_t> begin{0};  // out + 1 offsets into index / weight
  std::vector<int64_t> index;
  std::vector<double> weight;
  void add(int64_t i, double w) {
    index.push_back(i);
    weight.push_back(w);
  }
  void next() { begin.push_back(int64_t(index.size())); }
  /// The transposed taps: for each input index, the outputs that read it and their weights.
  AxisTaps transposed() const {
    AxisTaps t;
    t.in = out, t.out = in;
    std::vector<int64_t> count(size_t(in) + 1, 0);
    for (int64_t i : index) ++count[size_t(i) + 1];
    for (int64_t i = 0; i < in; ++i) count[size_t(i) + 1] += count[size_t(i)];
    t.begin = count;
    t.index.resize(index.size());
    t.weight.resize(weight.size());
    std::vector<int64_t> pos(count.begin(), count.end() - 1);
    for (int64_t o = 0; o < out; ++o)
      for (int64_t k = begin[size_t(o)]; k < begin[size_t(o) + 1]; ++k) {
        const size_t p = size_t(pos[size_t(index[size_t(k)])]++);
        t.index[p] = o;
        t.weight[p] = weight[size_t(k)];
      }
    return t;
  }
  /// True when every output o reads exactly input o with weight 1 (a plain copy).
  bool identity() const {
    if (in != out) return false;
    for (int64_t o = 0; o < out; ++o)
      if (begin[size_t(o) + 1] - begin[size_t(o)] != 1 || index[size_t(begin[size_t(o)])] != o ||
          weight[size_t(begin[size_t(o)])] != 1.0)
        return false;
    return true;
  }
};

/// An N-d copy `dst[i] = src[i]` over an extent, with element strides for each side, reduced to
/// what a copy loop needs: unit axes dropped and axes contiguous on both sides merged, so a copy
/// that moves whole rows is one long axis. Every backend's strided copy starts from it.
struct CopyPlan {
  int rank = 0;
  std::array<int64_t, kMaxRank> n{}, src{}, dst{};

  CopyPlan(const Shape& extent, const int64_t* src_strides, const int64_t* dst_strides) {
    for (int d = 0; d < extent.rank(); ++d) {
      if (extent[d] == 1) continue;
      const size_t last = size_t(rank - 1);
      if (rank > 0 && src[last] == src_strides[d] * extent[d] && dst[last] == dst_strides[d] * extent[d]) {
        n[last] *= extent[d];
        src[last] = src_strides[d];
        dst[last] = dst_strides[d];
      } else {
        n[size_t(rank)] = extent[d], src[size_t(rank)] = src_strides[d], dst[size_t(rank)] = dst_strides[d];
        ++rank;
      }
    }
  }
  /// True when the copy maps a contiguous block onto a contiguous block (a view would do).
  bool is_contiguous() const { return rank == 0 || (rank == 1 && src[0] == 1 && dst[0] == 1); }
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
