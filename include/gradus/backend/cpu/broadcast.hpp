// gradus/backend/cpu/broadcast.hpp — how the CPU's elementwise loops read an operand through
// NumPy broadcasting: the block size, Eigen views of a block, the index map from the output to
// a broadcast source (gather) and its adjoint (scatter_add).
#pragma once
#include "gradus/core/eigen.hpp"
#include <algorithm>
#include <array>
#include <cstring>

#include "gradus/core/compiled.hpp"
#include "gradus/core/shape.hpp"

namespace gradus::backend::cpu {

inline constexpr int64_t kBlock = 512;

template <class T>
using ArrayX = Eigen::Array<T, Eigen::Dynamic, 1>;
template <class T>
using MapX = Eigen::Map<ArrayX<T>>;
template <class T>
using CMapX = Eigen::Map<const ArrayX<T>>;

/// Where a source of shape `src` sits inside an output of shape `out` (NumPy broadcasting):
/// dims of size 1 are dropped and adjacent dims merged, so a bias [C] against [N,C] becomes
/// two dims with strides {0, 1} and a same-shape operand a single contiguous run.
struct Broadcast {
  int rank = 1;
  std::array<int64_t, kMaxRank> dims{};
  std::array<int64_t, kMaxRank> strides{};

  Broadcast() = default;
  Broadcast(const Shape& src, const Shape& out);

  /// Calls `f(k, offset, len, stride)` for the runs covering output elements [start, start+n):
  /// output element start+k+i reads source element offset + i*stride, for i < len.
  template <class F>
  void runs(int64_t start, int64_t n, F&& f) const {
    std::array<int64_t, kMaxRank> idx{};
    int64_t rem = start, off = 0;
    for (int d = rank - 1; d >= 0; --d) {
      idx[size_t(d)] = rem % dims[size_t(d)];
      rem /= dims[size_t(d)];
      off += idx[size_t(d)] * strides[size_t(d)];
    }
    const int last = rank - 1;
    const int64_t dl = dims[size_t(last)], sl = strides[size_t(last)];
    for (int64_t k = 0; k < n;) {
      const int64_t len = std::min(n - k, dl - idx[size_t(last)]);
      f(k, off, len, sl);
      k += len;
      idx[size_t(last)] += len;
      off += len * sl;
      if (idx[size_t(last)] == dl) {
        off -= dl * sl;
        idx[size_t(last)] = 0;
        for (int d = last - 1; d >= 0; --d) {
          off += strides[size_t(d)];
          if (++idx[size_t(d)] < dims[size_t(d)]) break;
          off -= dims[size_t(d)] * strides[size_t(d)];
          idx[size_t(d)] = 0;
        }
      }
    }
  }

  /// dst[k] = src[...] for the block.
  template <class T>
  void gather(const T* src, int64_t start, int64_t n, T* dst) const {
    runs(start, n, [&](int64_t k, int64_t off, int64_t len, int64_t st) {
      if (st == 1)
        std::memcpy(dst + k, src + off, size_t(len) * sizeof(T));
      else if (st == 0)
        std::fill_n(dst + k, len, src[off]);
      else
        for (int64_t i = 0; i < len; ++i) dst[k + i] = src[off + i * st];
    });
  }
  /// acc[...] += v[k] for the block (the adjoint of gather).
  template <class T>
  void scatter_add(const T* v, int64_t start, int64_t n, T* acc) const {
    runs(start, n, [&](int64_t k, int64_t off, int64_t len, int64_t st) {
      if (st == 1)
        MapX<T>(acc + off, len) += CMapX<T>(v + k, len);
      else if (st == 0)
        acc[off] += CMapX<T>(v + k, len).sum();
      else
        for (int64_t i = 0; i < len; ++i) acc[off + i * st] += v[k + i];
    });
  }
};

/// A tensor's values seen through the output's index space.
template <class T>
struct Source {
  const T* data;
  bool contiguous;
  Broadcast bc;
  alignas(64) T buf[kBlock];

  bool constant;  ///< one value broadcast everywhere: the buffer is filled once
  bool filled = false;

  Source(const T* d, const Shape& src, const Shape& out)
      : data(d), contiguous(src.numel() == out.numel()), constant(!contiguous && src.numel() == 1) {
    if (!contiguous) bc = Broadcast(src, out);
  }
  const T* block(int64_t start, int64_t n) {
    if (contiguous) return data + start;
    if (constant) {
      if (!filled) std::fill_n(buf, kBlock, data[0]), filled = true;
      return buf;
    }
    bc.gather(data, start, n, buf);
    return buf;
  }
};

}  // namespace gradus::backend::cpu

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::backend::cpu {
GRADUS_INLINE Broadcast::Broadcast(const Shape& src, const Shape& out) {
  const auto src_strides = row_major_strides(src);
  std::array<int64_t, kMaxRank> d{}, s{};
  int r = 0;
  for (int i = 0; i < out.rank(); ++i) {
    if (out[i] == 1) continue;
    const int j = i - (out.rank() - src.rank());
    const bool bcast = j < 0 || src[j] == 1;
    const int64_t st = bcast ? 0 : src_strides[size_t(j)];
    if (r > 0 && s[size_t(r - 1)] == st * out[i]) {  // merge with the previous dim
      d[size_t(r - 1)] *= out[i];
      s[size_t(r - 1)] = st;
    } else {
      d[size_t(r)] = out[i];
      s[size_t(r)] = st;
      ++r;
    }
  }
  if (r == 0) {
    d[0] = 1;
    s[0] = 0;
    r = 1;
  }
  rank = r;
  dims = d;
  strides = s;
}
}  // namespace gradus::backend::cpu
#endif  // GRADUS_DEFINE_COMPILED
