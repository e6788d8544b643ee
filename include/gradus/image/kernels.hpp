// gradus/image/kernels.hpp — the loops behind gd::image's geometric ops, on the CPU thread pool.
//
// Every resize, crop and pad is *separable*: along each spatial axis, output index o reads the
// input indices of its taps, out[o] = sum_k weight_k * in[index_k]. `Taps` holds those lists for
// one axis (compressed rows: taps of o are [begin[o], begin[o+1])); an output index with no tap
// is zero (padding). An op is one pass along H and one along W; its gradient is the same passes
// with the transposed taps (each input index lists the outputs that read it), so the backward
// pass is again a gather, free of write conflicts and split over threads the same way.
// Flips (per image, for the random forms) and the H <-> W transpose are index permutations.
// All loops split the rows of the batch (N * H) into chunks on backend::cpu's thread pool when
// the work is large (backend/cpu/parallel.hpp), so results do not depend on the thread count.
#pragma once
#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "gradus/backend/cpu/parallel.hpp"
#include "gradus/core/tensor.hpp"
#include "gradus/image/dtype.hpp"

namespace gradus::image::detail {

/// The taps of one axis: `out` outputs reading `in` inputs.
struct Taps {
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
  Taps transposed() const {
    Taps t;
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
  /// True when every output reads exactly input o + shift with weight 1 (a plain copy).
  bool identity() const {
    if (in != out) return false;
    for (int64_t o = 0; o < out; ++o)
      if (begin[size_t(o) + 1] - begin[size_t(o)] != 1 || index[size_t(begin[size_t(o)])] != o ||
          weight[size_t(begin[size_t(o)])] != 1.0)
        return false;
    return true;
  }
};

/// Runs f(row_begin, row_end) over `rows` rows of `row_elems` elements each, in parallel when large.
template <class F>
void for_rows(int64_t rows, int64_t row_elems, F&& f) {
  const int64_t threshold = std::max<int64_t>(1, backend::cpu::kParallelThreshold / std::max<int64_t>(row_elems, 1));
  backend::cpu::parallel_chunks(rows, 1, [&](int, int64_t b, int64_t e) { f(b, e); }, threshold);
}

/// out [N, taps.out, W, C] from x [N, taps.in, W, C]: the pass along H.
template <Element T>
void apply_taps_h(const T* x, T* out, int64_t n, int64_t w, int64_t c, const Taps& taps) {
  const int64_t row = w * c;
  for_rows(n * taps.out, row, [&](int64_t r0, int64_t r1) {
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
void apply_taps_w(const T* x, T* out, int64_t m, int64_t c, const Taps& taps) {
  for_rows(m, taps.out * c, [&](int64_t r0, int64_t r1) {
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
Tensor<T> apply_separable(const Tensor<T>& x, const ImageGeom& g, const Taps& th, const Taps& tw) {
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
void flip_images(const T* x, T* out, const ImageGeom& g, const std::vector<uint8_t>& flags, bool vertical) {
  const int64_t row = g.w * g.c;
  for_rows(g.n * g.h, row, [&](int64_t r0, int64_t r1) {
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
void transpose_images(const T* x, T* out, const ImageGeom& g) {
  for_rows(g.n * g.w, g.h * g.c, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t b = r / g.w, col = r % g.w;
      T* dst = out + r * g.h * g.c;
      for (int64_t y = 0; y < g.h; ++y) std::copy_n(x + ((b * g.h + y) * g.w + col) * g.c, g.c, dst + y * g.c);
    }
  });
}

/// Calls f(pixel_begin, pixel_end) over `pixels` pixels, in parallel when large.
template <class F>
void for_pixels(int64_t pixels, F&& f) {
  backend::cpu::parallel_chunks(pixels, 64, [&](int, int64_t b, int64_t e) { f(b, e); },
                                backend::cpu::kParallelThreshold / 8);
}

}  // namespace gradus::image::detail
