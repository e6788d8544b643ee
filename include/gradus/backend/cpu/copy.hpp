// gradus/backend/cpu/copy.hpp — data movement on the CPU: N-d strided copies (transpose, slice,
// pad, concat/stack), row gathers and their scatter-add adjoints, one_hot and casts.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <numeric>
#include <vector>

#include "gradus/backend/plans.hpp"
#include "gradus/core/small_list.hpp"
#include "gradus/core/tensor.hpp"

namespace gradus::backend::cpu {

/// d[a * ld_d + b] = s[a + b * ld_s] for a < na, b < nb, in 32x32 tiles (on large matrices
/// several times faster than Eigen's `map = map.transpose()`).
template <class T>
void transpose_tiles(const T* s, int64_t ld_s, T* d, int64_t ld_d, int64_t na, int64_t nb) {
  constexpr int64_t kTile = 32;
  for (int64_t a0 = 0; a0 < na; a0 += kTile)
    for (int64_t b0 = 0; b0 < nb; b0 += kTile) {
      const int64_t a1 = std::min(na, a0 + kTile), b1 = std::min(nb, b0 + kTile);
      for (int64_t a = a0; a < a1; ++a)
        for (int64_t b = b0; b < b1; ++b) d[a * ld_d + b] = s[a + b * ld_s];
    }
}

/// An N-d copy `dst[i] = src[i]` over a CopyPlan (backend/plans.hpp: unit axes dropped, axes
/// contiguous on both sides merged), so a copy that moves whole rows runs as one memcpy per row; a
/// transposing copy runs in cache-sized tiles.
struct StridedCopy : CopyPlan {
  using CopyPlan::CopyPlan;

  template <class T>
  void run(const T* s, T* d) const {
    apply<false>(s, d);
  }
  /// As run, but `dst[i] += src[i]` (a gradient added into a window of a larger adjoint).
  template <class T>
  void run_add(const T* s, T* d) const {
    apply<true>(s, d);
  }

 private:
  template <bool Add, class T>
  void apply(const T* s, T* d) const {
    if (rank == 0) {
      if constexpr (Add)
        *d += *s;
      else
        *d = *s;
      return;
    }
    const int in = rank - 1;
    // A transposing copy: the destination's fastest axis is not the source's; copy in tiles
    // over (tile axis: source-contiguous) x (inner axis: destination-contiguous).
    int tile = -1;
    if (!Add && dst[size_t(in)] == 1 && src[size_t(in)] != 1)
      for (int k = 0; k < in; ++k)
        if (src[size_t(k)] == 1) tile = k;
    const int64_t m = n[size_t(in)], ss = src[size_t(in)], ds = dst[size_t(in)];
    for_outer(in, tile, s, d, [&](const T* sp, T* dp) {
      if constexpr (Add) {
        if (ss == 1 && ds == 1)
          for (int64_t i = 0; i < m; ++i) dp[i] += sp[i];
        else
          for (int64_t i = 0; i < m; ++i) dp[i * ds] += sp[i * ss];
      } else if (tile >= 0) {
        cpu::transpose_tiles(sp, ss, dp, dst[size_t(tile)], n[size_t(tile)], m);
      } else if (ss == 1 && ds == 1) {
        std::copy_n(sp, m, dp);
      } else {
        for (int64_t i = 0; i < m; ++i) dp[i * ds] = sp[i * ss];
      }
    });
  }

  /// Calls f(src, dst) at every combination of the axes other than `a` and `b`.
  template <class T, class F>
  void for_outer(int a, int b, const T* s, T* d, F&& f) const {
    std::array<int, kMaxRank> axes{};
    std::array<int64_t, kMaxRank> idx{};
    int m = 0;
    for (int k = 0; k < rank; ++k)
      if (k != a && k != b) axes[size_t(m++)] = k;
    int64_t so = 0, doff = 0;
    for (;;) {
      f(s + so, d + doff);
      int j = m - 1;
      for (; j >= 0; --j) {
        const size_t ax = size_t(axes[size_t(j)]);
        so += src[ax], doff += dst[ax];
        if (++idx[size_t(j)] < n[ax]) break;
        so -= src[ax] * n[ax], doff -= dst[ax] * n[ax], idx[size_t(j)] = 0;
      }
      if (j < 0) return;
    }
  }
};

/// Copies the `extent`-shaped window of `src` starting at `src_at` into the window of `dst`
/// starting at `dst_at` (row-major tensors; windows given per axis).
template <class T>
void copy_window(const Tensor<T>& src, const int64_t* src_at, Tensor<T>& dst, const int64_t* dst_at,
                 const Shape& extent) {
  if (extent.numel() == 0) return;
  const auto ss = row_major_strides(src.shape()), ds = row_major_strides(dst.shape());
  int64_t so = 0, doff = 0;
  for (int i = 0; i < extent.rank(); ++i) so += src_at[i] * ss[size_t(i)], doff += dst_at[i] * ds[size_t(i)];
  StridedCopy(extent, ss.data(), ds.data()).run(src.data() + so, dst.data() + doff);
}

/// The gradient of a window read: adds (or, when `!add`, writes) `g`, shaped as the window,
/// into the window of the adjoint buffer `dx` (shape `xs`) starting at `at`; the rest of a
/// written buffer is zeroed. Only the window is touched when adding, so the slices of one
/// tensor (an RNN's time steps, a gate block's gates) cost their own size, not the tensor's.
template <class T>
void window_grad(const Tensor<T>& g, T* dx, bool add, const Shape& xs, const int64_t* at) {
  if (!add) std::fill_n(dx, xs.numel(), T(0));
  if (g.size() == 0) return;
  const auto ss = row_major_strides(g.shape()), ds = row_major_strides(xs);
  int64_t off = 0;
  for (int i = 0; i < xs.rank(); ++i) off += at[i] * ds[size_t(i)];
  StridedCopy copy(g.shape(), ss.data(), ds.data());
  if (add)
    copy.run_add(g.data(), dx + off);
  else
    copy.run(g.data(), dx + off);
}

/// `x` with its axes permuted (`out.shape[i] = x.shape[perm[i]]`); a view of x when no data moves.
template <class T>
Tensor<T> permute(const Tensor<T>& x, const IntList& perm) {
  Shape os;
  std::array<int64_t, kMaxRank> ss{};
  const auto xs = row_major_strides(x.shape());
  for (size_t i = 0; i < perm.size(); ++i) os.push_back(x.shape()[perm[i]]), ss[i] = xs[size_t(perm[i])];
  const auto ds = row_major_strides(os);
  const StridedCopy copy(os, ss.data(), ds.data());
  if (copy.is_contiguous()) return x.reshape(os);
  Tensor<T> out(os);
  if (out.size()) copy.run(x.data(), out.data());
  return out;
}

/// Inputs joined side by side: each viewed as [outer, inner_i], the output as [outer, sum inner_i].
/// Used by concat and stack; the gradient splits the output's adjoint back.
template <class T>
void join_rows(const std::vector<const T*>& parts, const std::vector<int64_t>& inner, T* out, int64_t outer) {
  const int64_t total = std::accumulate(inner.begin(), inner.end(), int64_t(0));
  int64_t col = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const int64_t ss[] = {inner[i], 1}, ds[] = {total, 1};
    if (outer > 0 && inner[i] > 0) StridedCopy(Shape{outer, inner[i]}, ss, ds).run(parts[i], out + col);
    col += inner[i];
  }
}


/// The adjoint of join_rows for one input: dst [outer, inner] = columns [col, col + inner) of
/// src viewed as [outer, total].
template <class T>
void split_rows(const T* src, int64_t total, int64_t col, int64_t outer, int64_t inner, T* dst) {
  const int64_t ss[] = {total, 1}, ds[] = {inner, 1};
  StridedCopy(Shape{outer, inner}, ss, ds).run(src + col, dst);
}

/// out [outer, k, inner] = rows idx[j] of x viewed as [outer, n, inner].
template <class T>
void gather_rows(const T* x, int64_t outer, int64_t n, int64_t inner, const int64_t* idx, int64_t k, T* out) {
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < k; ++j) std::copy_n(x + (o * n + idx[j]) * inner, inner, out + (o * k + j) * inner);
}

/// The adjoint of gather_rows: dx (zeroed first unless `add`) += g scattered to rows idx[j];
/// repeated indices accumulate.
template <class T>
void scatter_add_rows(const T* g, int64_t outer, int64_t n, int64_t inner, const int64_t* idx, int64_t k, T* dx,
                      bool add) {
  if (!add) std::fill_n(dx, outer * n * inner, T(0));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < k; ++j) {
      const T* src = g + (o * k + j) * inner;
      T* dst = dx + (o * n + idx[j]) * inner;
      for (int64_t i = 0; i < inner; ++i) dst[i] += src[i];
    }
}

/// out [count, depth] = `on` at each label, `off` elsewhere (a row of `off` for a label outside
/// [0, depth)).
template <class T>
void one_hot(const int64_t* labels, int64_t count, int64_t depth, T on, T off, T* out) {
  std::fill_n(out, count * depth, off);
  for (int64_t i = 0; i < count; ++i)
    if (labels[i] >= 0 && labels[i] < depth) out[i * depth + labels[i]] = on;
}

/// dst[i] = (or, with `add`, +=) static_cast<U>(src[i]); to uint8_t through int64_t.
template <class T, class U>
void cast(const T* src, int64_t n, U* dst, bool add) {
  // to bytes: through int64 (toward zero), then modulo 256, so that no value is undefined
  auto to = [](T v) { return std::is_same_v<U, uint8_t> ? static_cast<U>(static_cast<int64_t>(v)) : static_cast<U>(v); };
  if (add)
    for (int64_t i = 0; i < n; ++i) dst[i] += to(src[i]);
  else
    for (int64_t i = 0; i < n; ++i) dst[i] = to(src[i]);
}

}  // namespace gradus::backend::cpu
