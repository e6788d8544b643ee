// gradus/backend/cuda/copy.hpp — data movement on a GPU: N-d strided copies (slice, pad,
// transpose, concat/stack and their gradients), row gathers and their scatter-add adjoints, and
// casts between float, double and int64, one thread per element. Device code: library/copy.cuh.
//
//   backend::cuda::copy_window(src, src_at, dst, dst_at, extent);   // src, dst on one GPU
#pragma once
#include <cstdint>
#include <numeric>
#include <vector>

#include "gradus/backend/cuda/geometry.hpp"
#include "gradus/backend/cuda/library.hpp"
#include "gradus/backend/plans.hpp"
#include "gradus/core/compiled.hpp"
#include "gradus/core/device.hpp"
#include "gradus/core/small_list.hpp"
#include "gradus/core/tensor.hpp"

namespace gradus::backend::cuda {

inline constexpr char kCopyStrided[] = "copy_strided", kGatherRows[] = "gather_rows",
                      kScatterAddSorted[] = "scatter_add_sorted", kRankCount[] = "rank_count",
                      kRankOffsets[] = "rank_offsets", kRankMove[] = "rank_move", kCastToF[] = "cast_to_f",
                      kCastToD[] = "cast_to_d", kCastToL[] = "cast_to_l";

/// d[i] = (or, with `add`, +=) s[i] over `extent`, each side with its own element strides (both in
/// the memory of `device`), as its CopyPlan (backend/plans.hpp) merges the axes.
template <class T>
void strided_copy(const T* s, const int64_t* src_strides, T* d, const int64_t* dst_strides, const Shape& extent,
                  bool add, Device device) {
  const CopyPlan plan(extent, src_strides, dst_strides);
  CopyGeometry g{long(plan.rank), {}, {}, {}};
  for (int k = 0; k < plan.rank; ++k)
    g.n[k] = long(plan.n[size_t(k)]), g.src[k] = long(plan.src[size_t(k)]), g.dst[k] = long(plan.dst[size_t(k)]);
  long total = long(extent.numel());
  int a = add ? 1 : 0;
  void* params[] = {&s, &d, &g, &total, &a};
  launch_library(cached_library_function<T, kCopyStrided>(device), total, params, device.index);
}

/// The `extent` window of src at `src_at` copied into the window of dst at `dst_at`.
template <class T>
void copy_window(const Tensor<T>& src, const int64_t* src_at, Tensor<T>& dst, const int64_t* dst_at,
                 const Shape& extent) {
  if (extent.numel() == 0) return;
  const auto ss = row_major_strides(src.shape()), ds = row_major_strides(dst.shape());
  int64_t so = 0, doff = 0;
  for (int i = 0; i < extent.rank(); ++i) so += src_at[i] * ss[size_t(i)], doff += dst_at[i] * ds[size_t(i)];
  strided_copy(src.device_data() + so, ss.data(), dst.device_data() + doff, ds.data(), extent, false, src.device());
}

/// dx (shape xs; zeroed first unless `add`) gets g added into (or written to) its window at `at`.
template <class T>
void window_grad(const Tensor<T>& g, T* dx, bool add, const Shape& xs, const int64_t* at) {
  if (!add) fill(dx, long(xs.numel()), T(0), g.device());
  if (g.size() == 0) return;
  const auto ss = row_major_strides(g.shape()), ds = row_major_strides(xs);
  int64_t off = 0;
  for (int i = 0; i < xs.rank(); ++i) off += at[i] * ds[size_t(i)];
  strided_copy(g.device_data(), ss.data(), dx + off, ds.data(), g.shape(), add, g.device());
}

/// x with its axes permuted: a view (reshape) when no data moves.
template <class T>
Tensor<T> permute(const Tensor<T>& x, const IntList& perm) {
  Shape os;
  std::array<int64_t, kMaxRank> ss{};
  const auto xs = row_major_strides(x.shape());
  for (size_t i = 0; i < perm.size(); ++i) os.push_back(x.shape()[perm[i]]), ss[i] = xs[size_t(perm[i])];
  const auto ds = row_major_strides(os);
  if (CopyPlan(os, ss.data(), ds.data()).is_contiguous()) return x.reshape(os);
  Tensor<T> out = Tensor<T>::empty(os, x.device());
  if (out.size()) strided_copy(x.device_data(), ss.data(), out.device_data(), ds.data(), os, false, x.device());
  return out;
}

/// Parts [outer, inner_i] joined side by side into out [outer, sum inner_i].
template <class T>
void join_rows(const std::vector<const T*>& parts, const std::vector<int64_t>& inner, T* out, int64_t outer,
               Device device) {
  const int64_t total = std::accumulate(inner.begin(), inner.end(), int64_t(0));
  int64_t col = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const int64_t ss[] = {inner[i], 1}, ds[] = {total, 1};
    if (outer > 0 && inner[i] > 0) strided_copy(parts[i], ss, out + col, ds, Shape{outer, inner[i]}, false, device);
    col += inner[i];
  }
}

/// dst [outer, inner] = columns [col, col + inner) of src [outer, total].
template <class T>
void split_rows(const T* src, int64_t total, int64_t col, int64_t outer, int64_t inner, T* dst, Device device) {
  const int64_t ss[] = {total, 1}, ds[] = {inner, 1};
  if (outer > 0 && inner > 0) strided_copy(src + col, ss, dst, ds, Shape{outer, inner}, false, device);
}

/// out [outer, k, inner] = rows idx[j] (indices in device memory, in range) of x [outer, n, inner].
template <class T>
void gather_rows(const T* x, int64_t outer, int64_t n, int64_t inner, const int64_t* idx, int64_t k, T* out,
                 Device device) {
  long o = long(outer), nn = long(n), in = long(inner), kk = long(k);
  void* params[] = {&x, &o, &nn, &in, &idx, &kk, &out};
  launch_library(cached_library_function<T, kGatherRows>(device), o * kk * in, params, device.index);
}

/// The positions 0..k-1 sorted by their row idx[j] (an index outside [0, n) as n), stably: a
/// radix sort of 8 bits a pass on the GPU (library/copy.cuh), as many passes as n needs.
Tensor<int64_t> sort_by_row(const int64_t* idx, int64_t n, int64_t k, Device device);

/// dx (zeroed first unless `add`) += g [outer, k, inner] scattered to rows idx[j]. Repeated
/// indices add up in the order of their positions, as on the CPU, without atomics: the positions
/// are sorted by row (sort_by_row), and each row's run is added by one thread — the same bits on
/// every run.
template <class T>
void scatter_add_rows(const T* g, int64_t outer, int64_t n, int64_t inner, const int64_t* idx, int64_t k, T* dx,
                      bool add, Device device) {
  if (!add) fill(dx, long(outer * n * inner), T(0), device);
  if (k == 0 || outer * inner == 0) return;
  const Tensor<int64_t> sorted = sort_by_row(idx, n, k, device);
  const long long* s = reinterpret_cast<const long long*>(sorted.device_data());
  const long long* rows = reinterpret_cast<const long long*>(idx);
  long o = long(outer), nn = long(n), in = long(inner), kk = long(k);
  void* params[] = {&g, &o, &nn, &in, &rows, &s, &kk, &dx};
  launch_library(cached_library_function<T, kScatterAddSorted>(device), o * kk * in, params, device.index);
}

/// dst = (or, with `add`, +=) static_cast<U>(src), for float, double and int64 on either side.
template <class T, class U>
void cast(const T* src, int64_t n, U* dst, bool add, Device device) {
  constexpr const char* name = std::is_same_v<U, float> ? kCastToF : std::is_same_v<U, double> ? kCastToD : kCastToL;
  (void)library_suffix<U>();  // U is one of the three
  long count = long(n);
  int a = add ? 1 : 0;
  void* params[] = {&src, &count, &dst, &a};
  launch_library(cached_library_function<T, name>(device), count, params, device.index);
}

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
GRADUS_INLINE Tensor<int64_t> sort_by_row(const int64_t* idx, int64_t n, int64_t k, Device device) {
  long tiles = (long(k) + 1023) / 1024, kk = long(k), nn = long(n);
  int passes = 1;
  while (passes < 8 && (uint64_t(n) >> (8 * passes)) != 0) ++passes;  // rows 0..n: n+1 keys
  Tensor<int64_t> a = Tensor<int64_t>::empty(Shape{k}, device), b = Tensor<int64_t>::empty(Shape{k}, device);
  const Tensor<int64_t> hist = Tensor<int64_t>::empty(Shape{256 * tiles}, device);
  const long long* rows = reinterpret_cast<const long long*>(idx);
  const long long* pos = nullptr;  // the first pass reads 0..k-1
  long long* h = reinterpret_cast<long long*>(hist.device_data());
  Tensor<int64_t>* out = &a;
  for (int pass = 0; pass < passes; ++pass) {
    int shift = 8 * pass;
    long long* o = reinterpret_cast<long long*>(out->device_data());
    void* count[] = {&rows, &pos, &kk, &nn, &shift, &tiles, &h};
    launch_library(cached_library_function<int64_t, kRankCount>(device), tiles, count, device.index);
    void* offsets[] = {&h, &tiles};
    launch_library(cached_library_function<int64_t, kRankOffsets>(device), 256, offsets, device.index);
    void* move[] = {&rows, &pos, &kk, &nn, &shift, &tiles, &h, &o};
    launch_library(cached_library_function<int64_t, kRankMove>(device), tiles, move, device.index);
    pos = o;
    out = out == &a ? &b : &a;
  }
  return out == &a ? b : a;  // the last pass's output
}
#endif  // GRADUS_DEFINE_COMPILED

}  // namespace gradus::backend::cuda
