// gradus/backend/cpu/gemm.hpp — the CPU GEMM: c (m x n) = or += a (m x k) * b (k x n).
//
// For float on AVX2 + FMA a blocked kernel of its own, otherwise Eigen's GEMM. The float kernel
// follows the GotoBLAS/BLIS layout: B is packed in k-blocks of 256 into panels of 16 columns
// (in registers when B is stored transposed), A is read in place (its rows, or its columns when
// stored transposed, are the broadcast operand), and a 6x16 block of C lives in twelve AVX
// registers over a whole k-block. On the layer shapes of the benchmarks it runs 1.2-1.6x
// Eigen 3.4's GEMM, about as fast as OpenBLAS. Large products split their rows (or columns)
// over the OpenMP threads; thin ones (m < 6 or n < 12) and doubles go to Eigen.
#pragma once
#include <Eigen/Core>
#include <algorithm>
#include <type_traits>
#if defined(_OPENMP)
#include <omp.h>
#endif
#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define GRADUS_SGEMM_AVX2 1
#endif

#include "gradus/backend/cpu/parallel.hpp"
#include "gradus/core/tensor.hpp"

namespace gradus::backend::cpu {

template <class T>
using RowMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using MatMap = Eigen::Map<RowMat<T>, Eigen::Aligned16>;
template <class T>
using CMatMap = Eigen::Map<const RowMat<T>>;

/// Below this many multiply-adds a GEMM runs on the calling thread: forking a team costs more
/// than it saves, and far more when the other core is busy.
inline constexpr int64_t kGemmParallelWork = int64_t(1) << 22;

#if defined(GRADUS_SGEMM_AVX2)
namespace sgemm {

#if defined(__clang__)
#define GRADUS_UNROLL _Pragma("unroll")
#else
#define GRADUS_UNROLL _Pragma("GCC unroll 8")
#endif

/// Register block (rows x columns of C), k-block, rows of A per L2 block, columns per B block.
inline constexpr int64_t kMR = 6, kNR = 16, kKC = 256, kMC = 96, kNC = 1024;

/// c[R x n] (row-major, ldc) = or (`load`) += A · bp over kc steps, n <= 16 columns, where
/// A(i, p) = a[i * ra + p * ca] (ca == 1 or ra == 1) and bp is one packed panel [kc][16].
template <int R>
inline void kernel(int64_t kc, const float* a, int64_t ra, int64_t ca, const float* bp, float* c, int64_t ldc,
                   bool load, int64_t n) {
  __m256 acc[R][2];
  GRADUS_UNROLL for (int i = 0; i < R; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
  if (ca == 1) {  // rows of A: R streams along k
    const float* ai[R];
    GRADUS_UNROLL for (int i = 0; i < R; ++i) ai[i] = a + i * ra;
    for (int64_t p = 0; p < kc; ++p, bp += kNR) {
      const __m256 b0 = _mm256_load_ps(bp), b1 = _mm256_load_ps(bp + 8);
      GRADUS_UNROLL for (int i = 0; i < R; ++i) {
        const __m256 x = _mm256_broadcast_ss(ai[i] + p);
        acc[i][0] = _mm256_fmadd_ps(x, b0, acc[i][0]);
        acc[i][1] = _mm256_fmadd_ps(x, b1, acc[i][1]);
      }
    }
  } else {  // A stored transposed: the R values of one step are contiguous
    for (int64_t p = 0; p < kc; ++p, bp += kNR, a += ca) {
      const __m256 b0 = _mm256_load_ps(bp), b1 = _mm256_load_ps(bp + 8);
      GRADUS_UNROLL for (int i = 0; i < R; ++i) {
        const __m256 x = _mm256_broadcast_ss(a + i);
        acc[i][0] = _mm256_fmadd_ps(x, b0, acc[i][0]);
        acc[i][1] = _mm256_fmadd_ps(x, b1, acc[i][1]);
      }
    }
  }
  if (n == kNR) {
    GRADUS_UNROLL for (int i = 0; i < R; ++i) {
      float* ci = c + i * ldc;
      if (load) {
        acc[i][0] = _mm256_add_ps(acc[i][0], _mm256_loadu_ps(ci));
        acc[i][1] = _mm256_add_ps(acc[i][1], _mm256_loadu_ps(ci + 8));
      }
      _mm256_storeu_ps(ci, acc[i][0]);
      _mm256_storeu_ps(ci + 8, acc[i][1]);
    }
    return;
  }
  alignas(32) float tmp[kNR];
  GRADUS_UNROLL for (int i = 0; i < R; ++i) {
    float* ci = c + i * ldc;
    _mm256_store_ps(tmp, acc[i][0]);
    _mm256_store_ps(tmp + 8, acc[i][1]);
    for (int64_t j = 0; j < n; ++j) ci[j] = load ? ci[j] + tmp[j] : tmp[j];
  }
}

/// o[p] = {r[0][p], ..., r[7][p]}.
inline void transpose8(const __m256 (&r)[8], __m256 (&o)[8]) {
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  o[0] = _mm256_permute2f128_ps(u0, u4, 0x20), o[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
  o[2] = _mm256_permute2f128_ps(u2, u6, 0x20), o[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
  o[4] = _mm256_permute2f128_ps(u0, u4, 0x31), o[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
  o[6] = _mm256_permute2f128_ps(u2, u6, 0x31), o[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

/// Packs B(p, j) = b[p * rb + j * cb] (cb == 1 or rb == 1), p < kc, j < nc, into panels of 16
/// columns, zero-padded: bp[(j / 16) * kc * 16 + p * 16 + j % 16].
inline void pack_b(const float* b, int64_t rb, int64_t cb, int64_t kc, int64_t nc, float* bp) {
  for (int64_t j0 = 0; j0 < nc; j0 += kNR, bp += kc * kNR) {
    const int64_t w = std::min(kNR, nc - j0);
    if (cb == 1) {
      for (int64_t p = 0; p < kc; ++p) {
        const float* src = b + p * rb + j0;
        if (w == kNR) {
          _mm256_store_ps(bp + p * kNR, _mm256_loadu_ps(src));
          _mm256_store_ps(bp + p * kNR + 8, _mm256_loadu_ps(src + 8));
        } else {
          for (int64_t j = 0; j < kNR; ++j) bp[p * kNR + j] = j < w ? src[j] : 0.f;
        }
      }
      continue;
    }
    int64_t p0 = 0;  // columns of B contiguous along k: 8x8 blocks transposed in registers
    if (w == kNR)
      for (; p0 + 8 <= kc; p0 += 8)
        for (int64_t jj = 0; jj < kNR; jj += 8) {
          __m256 r[8], o[8];
          for (int q = 0; q < 8; ++q) r[q] = _mm256_loadu_ps(b + (j0 + jj + q) * cb + p0);
          transpose8(r, o);
          for (int q = 0; q < 8; ++q) _mm256_store_ps(bp + (p0 + q) * kNR + jj, o[q]);
        }
    for (int64_t j = 0; j < kNR; ++j) {
      const float* src = b + (j0 + j) * cb;
      for (int64_t p = p0; p < kc; ++p) bp[p * kNR + j] = j < w ? src[p] : 0.f;
    }
  }
}

/// c (m x n, row stride ldc) = or += A (m x k) · B (k x n) on the calling thread, with
/// A(i, p) = a[i * ra + p * ca] and B(p, j) = b[p * rb + j * cb].
inline void serial(const float* a, int64_t ra, int64_t ca, const float* b, int64_t rb, int64_t cb, float* c,
                   int64_t ldc, int64_t m, int64_t k, int64_t n, bool add) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    if (!add)
      for (int64_t i = 0; i < m; ++i) std::fill_n(c + i * ldc, n, 0.f);
    return;
  }
  const int64_t panels = (std::min(n, kNC) + kNR - 1) / kNR;
  Tensor<float> packed(Shape{panels * kNR * std::min(k, kKC)});
  float* bp = packed.data();
  for (int64_t j0 = 0; j0 < n; j0 += kNC) {
    const int64_t nc = std::min(kNC, n - j0);
    for (int64_t p0 = 0; p0 < k; p0 += kKC) {
      const int64_t kc = std::min(kKC, k - p0);
      const bool load = add || p0 > 0;
      pack_b(b + p0 * rb + j0 * cb, rb, cb, kc, nc, bp);
      for (int64_t i0 = 0; i0 < m; i0 += kMC) {
        const int64_t i1 = std::min(m, i0 + kMC);
        for (int64_t jr = 0; jr < nc; jr += kNR) {
          const float* panel = bp + (jr / kNR) * kc * kNR;
          const int64_t w = std::min(kNR, nc - jr);
          for (int64_t i = i0; i < i1; i += kMR) {
            const float* ap = a + i * ra + p0 * ca;
            float* cp = c + i * ldc + j0 + jr;
            switch (std::min(kMR, i1 - i)) {
              case 6: kernel<6>(kc, ap, ra, ca, panel, cp, ldc, load, w); break;
              case 5: kernel<5>(kc, ap, ra, ca, panel, cp, ldc, load, w); break;
              case 4: kernel<4>(kc, ap, ra, ca, panel, cp, ldc, load, w); break;
              case 3: kernel<3>(kc, ap, ra, ca, panel, cp, ldc, load, w); break;
              case 2: kernel<2>(kc, ap, ra, ca, panel, cp, ldc, load, w); break;
              default: kernel<1>(kc, ap, ra, ca, panel, cp, ldc, load, w); break;
            }
          }
        }
      }
    }
  }
}

#undef GRADUS_UNROLL

/// c (m x n) = or += a (m x k) * b (k x n), each optionally transposed in storage. Large
/// products split their rows (or their columns, when those make more panels) over the threads;
/// inside a parallel region, or below kGemmParallelWork multiply-adds, one thread runs it all.
inline void gemm(const float* a, bool ta, const float* b, bool tb, float* c, int64_t m, int64_t k, int64_t n,
                 bool add) {
  const int64_t ra = ta ? 1 : k, ca = ta ? m : 1, rb = tb ? 1 : n, cb = tb ? k : 1;
  int nt = 1;
#if defined(_OPENMP)
  if (m * n * k >= kGemmParallelWork && !omp_in_parallel()) nt = num_threads();
#endif
  const bool rows = (m + kMR - 1) / kMR >= (n + kNR - 1) / kNR;
  const int64_t extent = rows ? m : n, unit = rows ? kMR : kNR, units = (extent + unit - 1) / unit;
  nt = int(std::min<int64_t>(nt, units));
  if (nt <= 1) return serial(a, ra, ca, b, rb, cb, c, n, m, k, n, add);
#if defined(_OPENMP)
#pragma omp parallel num_threads(nt)
  {
    const int t = omp_get_thread_num();
    const int64_t lo = std::min(extent, units * t / nt * unit), hi = std::min(extent, units * (t + 1) / nt * unit);
    if (rows)
      serial(a + lo * ra, ra, ca, b, rb, cb, c + lo * n, n, hi - lo, k, n, add);
    else
      serial(a, ra, ca, b + lo * cb, rb, cb, c + lo, n, m, k, hi - lo, add);
  }
#endif
}

}  // namespace sgemm
#endif  // GRADUS_SGEMM_AVX2

/// c (m x n) = or += a (m x k) * b (k x n), each optionally transposed in storage.
template <class T>
void gemm(const T* a, bool ta, const T* b, bool tb, T* c, int64_t m, int64_t k, int64_t n, bool add) {
#if defined(GRADUS_SGEMM_AVX2)
  // Thin float products stay with Eigen, which runs them as GEMV: a 16-column panel would
  // mostly hold padding (n small), and packing B would cost as much as the product (m small).
  if constexpr (std::is_same_v<T, float>) {
    if (m >= sgemm::kMR && n >= 12) return sgemm::gemm(a, ta, b, tb, c, m, k, n, add);
  }
#endif
#if defined(_OPENMP)
  struct SerialScope {  // omp_set_num_threads changes only this thread's setting, which Eigen reads
    int prev = omp_get_max_threads();
    bool active;
    explicit SerialScope(bool on) : active(on) {
      if (active) omp_set_num_threads(1);
    }
    ~SerialScope() {
      if (active) omp_set_num_threads(prev);
    }
  } serial(m * n * k < kGemmParallelWork);
#endif
  Eigen::Map<RowMat<T>> C(c, m, n);
  auto run = [&](const auto& A, const auto& B) {
    if (add)
      C.noalias() += A * B;
    else
      C.noalias() = A * B;
  };
  const CMatMap<T> A(a, ta ? k : m, ta ? m : k), B(b, tb ? n : k, tb ? k : n);
  if (!ta && !tb) run(A, B);
  else if (ta && !tb) run(A.transpose(), B);
  else if (!ta && tb) run(A, B.transpose());
  else run(A.transpose(), B.transpose());
}

}  // namespace gradus::backend::cpu
