// gradus/backend/cpu/image.hpp — the loops behind gd::image's geometric and colour ops, on the
// CPU thread pool.
//
// Every resize, crop and pad is *separable*: along each spatial axis, output index o reads the
// input indices of its taps, out[o] = sum_k weight_k * in[index_k] (an `AxisTaps`,
// backend/plans.hpp). An op is one pass along H and one along W; its gradient is the same passes
// with the transposed taps (each input index lists the outputs that read it), so the backward
// pass is again a gather, free of write conflicts and split over threads the same way.
// Flips (per image, for the random forms) and the H <-> W transpose are index permutations.
// All loops split the rows of the batch (N * H) into chunks on the thread pool when the work is
// large (parallel.hpp), so results do not depend on the thread count; map_pixels3 (the HSV
// conversions) splits its pixels the same way.
#pragma once
#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "gradus/backend/cpu/parallel.hpp"
#include "gradus/backend/plans.hpp"
#include "gradus/core/tensor.hpp"

namespace gradus::backend::cpu {

/// Taps with at most two per output (shifts, crops, pads, nearest and bilinear resizes) as flat
/// arrays: output o has k[o] taps (0, 1 or 2), reading i0[o] and i1[o] with weights w0[o], w1[o].
/// The sums are formed in the generic loop's order (0 + w0 * a + w1 * b), so results are the same
/// bits (a plain copy keeps the sign of a zero). `copy`: output o reads input o + shift with
/// weight 1, for every o. `ok` is false when some output has more than two taps (the generic loop
/// then runs).
template <Element T>
struct TwoTaps {
  std::vector<int64_t> i0, i1;
  std::vector<T> w0, w1;
  std::vector<uint8_t> k;
  bool copy = false;
  int64_t shift = 0;
  bool ok = true;
  explicit TwoTaps(const AxisTaps& t) {
    const auto n = size_t(t.out);
    i0.assign(n, 0), i1.assign(n, 0), w0.assign(n, T(0)), w1.assign(n, T(0)), k.assign(n, 0);
    copy = t.out > 0;
    for (size_t o = 0; o < n; ++o) {
      const int64_t b = t.begin[o], e = t.begin[o + 1];
      if (e - b > 2) {
        ok = copy = false;
        return;
      }
      k[o] = uint8_t(e - b);
      if (e - b >= 1) i0[o] = i1[o] = t.index[size_t(b)], w0[o] = T(t.weight[size_t(b)]);
      if (e - b == 2) i1[o] = t.index[size_t(b) + 1], w1[o] = T(t.weight[size_t(b) + 1]);
      if (o == 0) shift = i0[0];
      copy = copy && e - b == 1 && t.weight[size_t(b)] == 1.0 && i0[o] == int64_t(o) + shift;
    }
  }
};

/// Runs f(row_begin, row_end) over `rows` rows of `row_elems` elements each, in parallel when large.
template <class F>
void for_image_rows(int64_t rows, int64_t row_elems, F&& f) {
  const int64_t threshold = std::max<int64_t>(1, kParallelThreshold / std::max<int64_t>(row_elems, 1));
  parallel_chunks(rows, 1, [&](int, int64_t b, int64_t e) { f(b, e); }, threshold);
}

/// out [N, taps.out, W, C] from x [N, taps.in, W, C]: the pass along H.
template <Element T>
void apply_taps_h(const T* x, T* out, int64_t n, int64_t w, int64_t c, const AxisTaps& taps) {
  const int64_t row = w * c;
  if (const TwoTaps<T> two(taps); two.ok) {  // one pass, no zero fill: a copy or two rows blended
    for_image_rows(n * taps.out, row, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t b = r / taps.out;
        const auto o = size_t(r % taps.out);
        T* dst = out + r * row;
        const T* s0 = x + (b * taps.in + two.i0[o]) * row;
        const T* s1 = x + (b * taps.in + two.i1[o]) * row;
        const T w0 = two.w0[o], w1 = two.w1[o];
        if (two.k[o] == 0)
          std::fill_n(dst, row, T(0));
        else if (two.k[o] == 1 && w0 == T(1))
          std::copy_n(s0, row, dst);
        else if (two.k[o] == 1)
          for (int64_t i = 0; i < row; ++i) {
            T v = T(0);
            v += w0 * s0[i];
            dst[i] = v;
          }
        else
          for (int64_t i = 0; i < row; ++i) {
            T v = T(0);
            v += w0 * s0[i];
            v += w1 * s1[i];
            dst[i] = v;
          }
      }
    });
    return;
  }
  for_image_rows(n * taps.out, row, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t b = r / taps.out, o = r % taps.out;
      T* dst = out + r * row;
      std::fill_n(dst, row, T(0));
      for (int64_t k = taps.begin[size_t(o)]; k < taps.begin[size_t(o) + 1]; ++k) {
        const T wt = T(taps.weight[size_t(k)]);
        const T* src = x + (b * taps.in + taps.index[size_t(k)]) * row;
        for (int64_t i = 0; i < row; ++i) dst[i] += wt * src[i];
      }
    }
  });
}

/// out [M, taps.out, C] from x [M, taps.in, C] (M = N * H): the pass along W.
template <Element T>
void apply_taps_w(const T* x, T* out, int64_t m, int64_t c, const AxisTaps& taps) {
  if (const TwoTaps<T> two(taps); two.ok) {  // a copy of each row's window, or two pixels blended
    for_image_rows(m, taps.out * c, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const T* src = x + r * taps.in * c;
        T* dst = out + r * taps.out * c;
        if (two.copy) {
          std::copy_n(src + two.shift * c, taps.out * c, dst);
          continue;
        }
        auto blend = [&](auto channels) {  // channels: c, a compile-time 1 or 3 where it can be
          for (int64_t o = 0; o < taps.out; ++o) {
            const T* a = src + two.i0[size_t(o)] * channels;
            const T* b = src + two.i1[size_t(o)] * channels;
            const T w0 = two.w0[size_t(o)], w1 = two.w1[size_t(o)];
            T* d = dst + o * channels;
            const uint8_t k = two.k[size_t(o)];
            for (int64_t ch = 0; ch < channels; ++ch) {
              T v = T(0);
              if (k >= 1) v += w0 * a[ch];
              if (k == 2) v += w1 * b[ch];
              d[ch] = v;
            }
          }
        };
        if (c == 3)
          blend(std::integral_constant<int64_t, 3>{});
        else if (c == 1)
          blend(std::integral_constant<int64_t, 1>{});
        else
          blend(c);
      }
    });
    return;
  }
  for_image_rows(m, taps.out * c, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* src = x + r * taps.in * c;
      T* dst = out + r * taps.out * c;
      for (int64_t o = 0; o < taps.out; ++o) {
        T* d = dst + o * c;
        std::fill_n(d, c, T(0));
        for (int64_t k = taps.begin[size_t(o)]; k < taps.begin[size_t(o) + 1]; ++k) {
          const T wt = T(taps.weight[size_t(k)]);
          const T* s = src + taps.index[size_t(k)] * c;
          for (int64_t ch = 0; ch < c; ++ch) d[ch] += wt * s[ch];
        }
      }
    }
  });
}

/// A separable map [N, th.in, tw.in, C] -> [N, th.out, tw.out, C]: the pass along H, then along W
/// (either is skipped when its taps are the identity).
template <Element T>
Tensor<T> apply_separable(const Tensor<T>& x, const ImagePlan& g, const AxisTaps& th, const AxisTaps& tw) {
  const bool skip_h = th.identity(), skip_w = tw.identity();
  Tensor<T> out(g.shape_with(th.out, tw.out, g.c));
  if (skip_h && skip_w) {
    std::copy_n(x.data(), x.size(), out.data());
    return out;
  }
  if (skip_h) {
    apply_taps_w(x.data(), out.data(), g.n * g.h, g.c, tw);
    return out;
  }
  if (skip_w) {
    apply_taps_h(x.data(), out.data(), g.n, g.w, g.c, th);
    return out;
  }
  Tensor<T> mid({g.n, th.out, g.w, g.c});
  apply_taps_h(x.data(), mid.data(), g.n, g.w, g.c, th);
  apply_taps_w(mid.data(), out.data(), g.n * th.out, g.c, tw);
  return out;
}

/// out = x with the images whose flag is set reversed along H (`vertical`) or W; the others copied.
template <Element T>
void flip_images(const T* x, T* out, const ImagePlan& g, const std::vector<uint8_t>& flags, bool vertical) {
  const int64_t row = g.w * g.c;
  for_image_rows(g.n * g.h, row, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t b = r / g.h, y = r % g.h;
      const bool f = flags[size_t(b)];
      const T* src = x + (f && vertical ? b * g.h + (g.h - 1 - y) : r) * row;
      T* dst = out + r * row;
      if (f && !vertical)
        for (int64_t i = 0; i < g.w; ++i) std::copy_n(src + (g.w - 1 - i) * g.c, g.c, dst + i * g.c);
      else
        std::copy_n(src, row, dst);
    }
  });
}

/// out [N, W, H, C] = x [N, H, W, C] with H and W swapped.
template <Element T>
void transpose_images(const T* x, T* out, const ImagePlan& g) {
  for_image_rows(g.n * g.w, g.h * g.c, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t b = r / g.w, col = r % g.w;
      T* dst = out + r * g.h * g.c;
      for (int64_t y = 0; y < g.h; ++y) std::copy_n(x + ((b * g.h + y) * g.w + col) * g.c, g.c, dst + y * g.c);
    }
  });
}

/// Calls f(pixel_begin, pixel_end) over `pixels` pixels, in parallel when large.
template <class F>
void for_image_pixels(int64_t pixels, F&& f) {
  parallel_chunks(pixels, 64, [&](int, int64_t b, int64_t e) { f(b, e); }, kParallelThreshold / 8);
}

/// dst[3p .. 3p + 3) = f applied to src[3p .. 3p + 3) for each of `pixels` three-channel pixels
/// (f(const T* in, T* out); src and dst may alias), over the thread pool.
template <class T, class F>
void map_pixels3(const T* src, T* dst, int64_t pixels, F f) {
  for_image_pixels(pixels, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) f(src + 3 * p, dst + 3 * p);
  });
}

}  // namespace gradus::backend::cpu
