// gradus/backend/cpu/gemm_inplace.hpp — float products of few rows of A with B read where it
// lies, unpacked.
//
// The blocked kernels of gemm.hpp pack B into panels, which pays when many rows of A use each
// panel. With a handful of rows — an LSTM's per-step product on its slice of the batch, a layer
// applied to one example or to a beam of four — packing copies each element of B to use it a few
// times, and the product is bound by reading B. These kernels read B in place: the row kernels
// walk it in panels that stay in L1 while every row of A passes over them (up to 5 rows in
// registers at a time with AVX-512, 6 with AVX2), so B comes from memory once per call; the dot
// kernels read it once for every 5 rows of A (AVX-512), or keep each block of its rows in L1
// while all of A's rows pass (AVX2):
//   gemm_avx512 / gemm_avx2        B row-major (k x n): R rows x Q vectors of C in accumulators,
//                                  each depth's vectors of B loaded once for the R rows
//   gemm_bt_avx512 / gemm_bt_avx2  B stored transposed (n x k): each element of C a dot product of
//                                  two contiguous rows, 16 (8) depths a step, up to 5 (2) rows of
//                                  A against 5 to 8 (6) rows of B in accumulators, summed across
//                                  lanes at the end
// Each is compiled for its instruction set with a function-level target attribute, as the
// blocked kernels are; gemm.hpp chooses between them (thin_gemm) and so does the LSTM's step
// (lstm.hpp).
#pragma once
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))  // as GRADUS_SGEMM_X86
#include <algorithm>
#include <cstdint>
#include <immintrin.h>
#include <type_traits>

#include "gradus/backend/cpu/vecmath.hpp"  // GRADUS_UNROLL

namespace gradus::backend::cpu::inplace {

/// The first `n` lanes set (sign bits), for the AVX2 masked loads and stores.
[[gnu::target("avx2,fma"), gnu::always_inline]] inline __m256i first_lanes8(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(int(std::clamp<int64_t>(n, 0, 8))),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/// Calls f(std::integral_constant<int, R>{}, i) for blocks of rows [i, i + R) covering [0, m):
/// blocks of Block rows, then the 1 to Last rows left as one block (a last Block + 1 rows with
/// Last = Block + 1), so that each block's kernel reads B once for all its rows.
template <int Block, int Last, class F>
inline void for_row_blocks(int64_t m, F&& f) {
  static_assert(Last <= 5 || Last == Block, "for_row_blocks: blocks of 1 to 5 rows, or Block");
  int64_t i = 0;
  for (; m - i > Last || m - i == Block; i += Block) f(std::integral_constant<int, Block>{}, i);
  switch (m - i) {
    case 5: if constexpr (Last >= 5) f(std::integral_constant<int, 5>{}, i); return;
    case 4: if constexpr (Last >= 4) f(std::integral_constant<int, 4>{}, i); return;
    case 3: f(std::integral_constant<int, 3>{}, i); return;
    case 2: f(std::integral_constant<int, 2>{}, i); return;
    case 1: f(std::integral_constant<int, 1>{}, i); return;
    default: return;
  }
}

/// C rows [R x 64] = or += A rows [R x k] · B [k x 64], over B's rows [p0, p1): B row-major with
/// row stride ldb, unpacked; C row stride ldc; R rows x 4 vectors of 16 columns of C in AVX-512
/// accumulators (the loops over them unrolled, so that the accumulators stay in registers). With
/// Masked (a partial panel at the right edge of C), vector q holds only the columns of `tail[q]`,
/// and B and C are read and written only there (a vector with none costs its FMAs, on zeros: one
/// kernel for every width, instead of one per number of vectors, keeps the code every program
/// compiles small); without, all 64 columns exist and are read with plain loads (masked ones cost
/// 1-2%). Not inlined: inside the loops of its callers GCC spilled the AVX2 form's registers.
template <int R, bool Masked>
[[gnu::target("avx512f"), gnu::noinline]] inline void rows_avx512(const float* a, int64_t lda, const float* b,
                                                                  int64_t ldb, float* c, int64_t ldc, int64_t p0,
                                                                  int64_t p1, bool load, const __mmask16 (&tail)[4]) {
  constexpr int Q = 4;
  __m512 acc[R][Q];
  GRADUS_UNROLL for (int r = 0; r < R; ++r)
    GRADUS_UNROLL for (int q = 0; q < Q; ++q)
      acc[r][q] = !load    ? _mm512_setzero_ps()
                  : Masked ? _mm512_maskz_loadu_ps(tail[q], c + r * ldc + 16 * q)
                           : _mm512_loadu_ps(c + r * ldc + 16 * q);
  for (int64_t p = p0; p < p1; ++p) {
    const float* bp = b + p * ldb;
    __m512 bv[Q];
    GRADUS_UNROLL for (int q = 0; q < Q; ++q) {
      bv[q] = Masked ? _mm512_maskz_loadu_ps(tail[q], bp + 16 * q) : _mm512_loadu_ps(bp + 16 * q);
      // keeps B's vectors in registers: otherwise -march builds fold each load into the R FMAs
      // that use it, reading B R times (load-bound, about half the speed)
      __asm__("" : "+v"(bv[q]));
    }
    GRADUS_UNROLL for (int r = 0; r < R; ++r) {
      const __m512 av = _mm512_set1_ps(a[r * lda + p]);
      GRADUS_UNROLL for (int q = 0; q < Q; ++q) acc[r][q] = _mm512_fmadd_ps(av, bv[q], acc[r][q]);
    }
  }
  GRADUS_UNROLL for (int r = 0; r < R; ++r)
    GRADUS_UNROLL for (int q = 0; q < Q; ++q) {
      if (Masked)
        _mm512_mask_storeu_ps(c + r * ldc + 16 * q, tail[q], acc[r][q]);
      else
        _mm512_storeu_ps(c + r * ldc + 16 * q, acc[r][q]);
    }
}

/// The rows [0, m) of a panel of C (see rows_avx512): blocks of 4 rows, then the 1, 2, 3 or 5 rows
/// left as one block (5 x 4 accumulators, 4 vectors of B and a broadcast fit the 32 registers), so
/// that each depth's vectors of B are loaded once for them.
template <bool Masked>
inline void panel_avx512(const float* a, int64_t k, const float* b, int64_t ldb, float* c, int64_t ldc, int64_t m,
                         int64_t p0, int64_t p1, bool load, const __mmask16 (&tail)[4]) {
  for_row_blocks<4, 5>(m, [&]<int R>(std::integral_constant<int, R>, int64_t i) {
    rows_avx512<R, Masked>(a + i * k, k, b, ldb, c + i * ldc, ldc, p0, p1, load, tail);
  });
}

/// c (m x n) = or += a (m x k) · b (k x n), all row-major, A's rows k apart and B's and C's `ld`
/// apart (ld = n for whole matrices; more for a stretch of their columns). B is walked in panels of
/// kc rows x 64 columns (32 KiB, held in L1) and every row of A runs over a panel before the next
/// panel is read, so B crosses from L2 once per call, not once per 4 rows. A last panel narrower
/// than 64 columns is masked to the columns that exist.
[[gnu::target("avx512f")]] inline void gemm_avx512(const float* a, const float* b, float* c, int64_t m, int64_t k,
                                                  int64_t n, int64_t ld, bool add) {
  constexpr int64_t kc = 128;
  for (int64_t p0 = 0; p0 < k; p0 += kc) {
    const int64_t p1 = std::min(k, p0 + kc);
    const bool load = add || p0 > 0;
    for (int64_t j = 0; j < n; j += 64) {
      __mmask16 tail[4];  // the columns of each vector that exist
      for (int q = 0; q < 4; ++q) {
        const int64_t cols = std::clamp<int64_t>(n - j - 16 * q, 0, 16);
        tail[q] = __mmask16((uint32_t(1) << cols) - 1);
      }
      if (n - j >= 64)
        panel_avx512<false>(a, k, b + j, ld, c + j, ld, m, p0, p1, load, tail);
      else
        panel_avx512<true>(a, k, b + j, ld, c + j, ld, m, p0, p1, load, tail);
    }
  }
}

/// The AVX2 form of rows_avx512: C rows [R x 16] in R x 2 accumulators (with 2 vectors of B and
/// a broadcast within the 16 registers), B read in place. With Masked, vector q holds only the
/// columns of tail[q] (a lane is in when its sign bit is set; a vector may have none); without, all
/// 16 columns exist and are read with plain loads.
template <int R, bool Masked>
[[gnu::target("avx2,fma"), gnu::noinline]] inline void rows_avx2(const float* a, int64_t lda, const float* b,
                                                                 int64_t ldb, float* c, int64_t ldc, int64_t p0,
                                                                 int64_t p1, bool load, const __m256i (&tail)[2]) {
  constexpr int Q = 2;
  __m256 acc[R][Q];
  GRADUS_UNROLL for (int r = 0; r < R; ++r)
    GRADUS_UNROLL for (int q = 0; q < Q; ++q)
      acc[r][q] = !load    ? _mm256_setzero_ps()
                  : Masked ? _mm256_maskload_ps(c + r * ldc + 8 * q, tail[q])
                           : _mm256_loadu_ps(c + r * ldc + 8 * q);
  for (int64_t p = p0; p < p1; ++p) {
    const float* bp = b + p * ldb;
    __m256 bv[Q];
    GRADUS_UNROLL for (int q = 0; q < Q; ++q) {
      bv[q] = Masked ? _mm256_maskload_ps(bp + 8 * q, tail[q]) : _mm256_loadu_ps(bp + 8 * q);
      __asm__("" : "+x"(bv[q]));  // B in registers, read once per depth (see rows_avx512)
    }
    GRADUS_UNROLL for (int r = 0; r < R; ++r) {
      const __m256 av = _mm256_broadcast_ss(a + r * lda + p);
      GRADUS_UNROLL for (int q = 0; q < Q; ++q) acc[r][q] = _mm256_fmadd_ps(av, bv[q], acc[r][q]);
    }
  }
  GRADUS_UNROLL for (int r = 0; r < R; ++r)
    GRADUS_UNROLL for (int q = 0; q < Q; ++q) {
      if (Masked)
        _mm256_maskstore_ps(c + r * ldc + 8 * q, tail[q], acc[r][q]);
      else
        _mm256_storeu_ps(c + r * ldc + 8 * q, acc[r][q]);
    }
}

/// The vectors of C per row of rows_avx2_wide<R>: 6 (48 columns) for one or two rows, 4 (32
/// columns) for three; R x Q accumulators, at most 12, with R broadcasts and one vector of B.
template <int R>
inline constexpr int kWideVectors = R == 3 ? 4 : 6;

/// rows_avx2 for one to three rows against a whole panel two or three times as wide: C rows
/// [R x 8Q] in R x Q accumulators (Q = kWideVectors<R>), each vector of B loaded as it is used (one
/// register) and R broadcasts. Each depth reads 128 or 192 contiguous bytes of B where rows_avx2
/// reads 64: with so few rows the pass over B is the whole cost, and against B's rows 4 KiB apart
/// (1024 columns) fetching a single line from each row bound it. On a Zen 4, B's rows on cache
/// lines: 2 x 1024 x 1024 129 us on rows_avx2, 74 here, 3 x 1024 x 1024 123 against 106; 16
/// bytes past a line (two lines a row for rows_avx2): 275 against 98, 246 against 134. The
/// columns past the last whole panel go to rows_avx2: a masked wide panel cost up to 2.6x on
/// narrow products.
template <int R>
[[gnu::target("avx2,fma"), gnu::noinline]] inline void rows_avx2_wide(const float* a, int64_t lda, const float* b,
                                                                      int64_t ldb, float* c, int64_t ldc, int64_t p0,
                                                                      int64_t p1, bool load) {
  constexpr int Q = kWideVectors<R>;
  static_assert(R >= 1 && R <= 3, "rows_avx2_wide: one to three rows");
  __m256 acc[R][Q];
  GRADUS_UNROLL for (int r = 0; r < R; ++r)
    GRADUS_UNROLL for (int q = 0; q < Q; ++q)
      acc[r][q] = load ? _mm256_loadu_ps(c + r * ldc + 8 * q) : _mm256_setzero_ps();
  for (int64_t p = p0; p < p1; ++p) {
    const float* bp = b + p * ldb;
    __m256 av[R];
    GRADUS_UNROLL for (int r = 0; r < R; ++r) av[r] = _mm256_broadcast_ss(a + r * lda + p);
    GRADUS_UNROLL for (int q = 0; q < Q; ++q) {
      __m256 bv = _mm256_loadu_ps(bp + 8 * q);
      __asm__("" : "+x"(bv));  // one load of B for all the rows (see rows_avx512)
      GRADUS_UNROLL for (int r = 0; r < R; ++r) acc[r][q] = _mm256_fmadd_ps(av[r], bv, acc[r][q]);
    }
  }
  GRADUS_UNROLL for (int r = 0; r < R; ++r)
    GRADUS_UNROLL for (int q = 0; q < Q; ++q) _mm256_storeu_ps(c + r * ldc + 8 * q, acc[r][q]);
}

/// The rows [0, m) of a panel of C (see rows_avx2): blocks of 6 rows, then the 1 to 5 rows left as
/// one block.
template <bool Masked>
inline void panel_avx2(const float* a, int64_t k, const float* b, int64_t ldb, float* c, int64_t ldc, int64_t m,
                       int64_t p0, int64_t p1, bool load, const __m256i (&tail)[2]) {
  for_row_blocks<6, 5>(m, [&]<int R>(std::integral_constant<int, R>, int64_t i) {
    rows_avx2<R, Masked>(a + i * k, k, b, ldb, c + i * ldc, ldc, p0, p1, load, tail);
  });
}

/// The AVX2 form of gemm_avx512: panels of kc rows x 16 columns of B (8 KiB), a last panel of
/// fewer columns masked to those that exist; one to three rows run on whole panels of 48 or 32
/// columns first (rows_avx2_wide).
[[gnu::target("avx2,fma")]] inline void gemm_avx2(const float* a, const float* b, float* c, int64_t m, int64_t k,
                                                int64_t n, int64_t ld, bool add) {
  constexpr int64_t kc = 128;
  for (int64_t p0 = 0; p0 < k; p0 += kc) {
    const int64_t p1 = std::min(k, p0 + kc);
    const bool load = add || p0 > 0;
    int64_t j = 0;
    const auto wide = [&]<int R>(std::integral_constant<int, R>) {
      constexpr int64_t w = 8 * kWideVectors<R>;
      for (; j + w <= n; j += w) rows_avx2_wide<R>(a, k, b + j, ld, c + j, ld, p0, p1, load);
    };
    if (m == 3) wide(std::integral_constant<int, 3>{});
    if (m == 2) wide(std::integral_constant<int, 2>{});
    if (m == 1) wide(std::integral_constant<int, 1>{});
    for (; j < n; j += 16) {
      const __m256i tail[2] = {first_lanes8(n - j), first_lanes8(n - j - 8)};
      if (n - j >= 16)
        panel_avx2<false>(a, k, b + j, ld, c + j, ld, m, p0, p1, load, tail);
      else
        panel_avx2<true>(a, k, b + j, ld, c + j, ld, m, p0, p1, load, tail);
    }
  }
}

/// lane j of the result: the sum of v[j]'s 8 lanes. Pairs summed within 128-bit lanes twice, then
/// the two halves.
[[gnu::target("avx2,fma"), gnu::always_inline]] inline __m256 lane_sums8(const __m256 (&v)[8]) {
  const __m256 t0 = _mm256_hadd_ps(v[0], v[1]), t1 = _mm256_hadd_ps(v[2], v[3]), t2 = _mm256_hadd_ps(v[4], v[5]),
               t3 = _mm256_hadd_ps(v[6], v[7]);
  const __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);
  return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

/// c[j] = or (`load`) += lane j of s for j < cols <= 8, element by element (AMD's masked vector
/// stores, vmaskmovps, are slow: storing every 4-column block of a 4-row product masked cost 8% of
/// its time on Zen 4).
[[gnu::target("avx2,fma"), gnu::always_inline]] inline void store_sums(__m256 s, float* c, int64_t cols, bool load) {
  alignas(32) float lane[8];
  _mm256_store_ps(lane, s);
  for (int64_t j = 0; j < cols; ++j) c[j] = load ? c[j] + lane[j] : lane[j];
}

/// Lane j < 8 of the result: the sum of v[j]'s 16 lanes (the other lanes: unspecified). 128-bit
/// lanes of pairs of vectors summed, then of quadruples, then pairs within each 128-bit lane, and
/// one permutation into order. (The zero-masked forms under a full mask are the same instructions:
/// GCC 12 defines the plain ones with an undefined pass-through vector, and -Wuninitialized warns
/// about it.)
[[gnu::target("avx512f,avx2,fma"), gnu::always_inline]] inline __m512 lane_sums8_512(const __m512 (&v)[8]) {
  constexpr __mmask16 all = 0xFFFF;
  __m512 u[4], w[2];
  GRADUS_UNROLL for (int q = 0; q < 4; ++q)  // 128-bit lanes: v[2q]'s (0+2, 1+3), then v[2q+1]'s
    u[q] = _mm512_add_ps(_mm512_maskz_shuffle_f32x4(all, v[2 * q], v[2 * q + 1], 0x44),
                         _mm512_maskz_shuffle_f32x4(all, v[2 * q], v[2 * q + 1], 0xEE));
  GRADUS_UNROLL for (int q = 0; q < 2; ++q)  // 128-bit lane L: a quarter of v[4q + L]'s sum
    w[q] = _mm512_add_ps(_mm512_maskz_shuffle_f32x4(all, u[2 * q], u[2 * q + 1], 0x88),
                         _mm512_maskz_shuffle_f32x4(all, u[2 * q], u[2 * q + 1], 0xDD));
  // within 128-bit lane L: [w0 a+c, w1 a+c, w0 b+d, w1 b+d], then the halves added: element 0 is
  // v[L]'s sum, element 1 v[4 + L]'s
  __m512 t = _mm512_add_ps(_mm512_maskz_unpacklo_ps(all, w[0], w[1]), _mm512_maskz_unpackhi_ps(all, w[0], w[1]));
  t = _mm512_add_ps(t, _mm512_maskz_permute_ps(all, t, 0x4E));
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 0, 0, 0, 0, 0, 0, 0, 0);
  return _mm512_maskz_permutexvar_ps(all, order, t);
}

/// One step of dot_block_avx512: the 16 depths from p (those in `mask`) of A's R rows against
/// the J rows of B.
template <int R, int J>
[[gnu::target("avx512f,avx2,fma"), gnu::always_inline]] inline void dot_step_avx512(
    __m512 (&acc)[R][J], const float* a, int64_t lda, const float* const (&bj)[J], int64_t p, __mmask16 mask) {
  __m512 x[R];
  GRADUS_UNROLL for (int r = 0; r < R; ++r) x[r] = _mm512_maskz_loadu_ps(mask, a + r * lda + p);
  GRADUS_UNROLL for (int j = 0; j < J; ++j) {
    __m512 y = _mm512_maskz_loadu_ps(mask, bj[j] + p);
    __asm__("" : "+v"(y));  // one load for the R rows: GCC would otherwise fold it into each FMA
    GRADUS_UNROLL for (int r = 0; r < R; ++r) acc[r][j] = _mm512_fmadd_ps(x[r], y, acc[r][j]);
  }
}

/// C(r, j) = or (`load`) += Σ_p A(r, p) · B(j, p) for r < R (A's rows lda apart) and j < cols <= J
/// <= 8 (B's rows ldb apart, C's ldc): a block of J rows of B, a partial one read with its last
/// row repeated and only its own columns written; the tail of the depth masked. R x J
/// accumulators, R vectors of A and one of B within the 32 registers (dot_rows_avx512 chooses J).
/// (Blocks of 4 rows of B ran 1.4-2.2x slower than blocks of 8 on Zen 4, whatever the rows of A:
/// B streams from L3 in these products, and more rows keep more of its lines in flight.)
template <int R, int J>
[[gnu::target("avx512f,avx2,fma")]] inline void dot_block_avx512(const float* a, int64_t lda, const float* b,
                                                                int64_t ldb, int64_t cols, float* c, int64_t ldc,
                                                                int64_t k, bool load) {
  const float* bj[J];
  GRADUS_UNROLL for (int j = 0; j < J; ++j) bj[j] = b + std::min<int64_t>(j, cols - 1) * ldb;
  __m512 acc[R][J];
  GRADUS_UNROLL for (int r = 0; r < R; ++r)
    GRADUS_UNROLL for (int j = 0; j < J; ++j) acc[r][j] = _mm512_setzero_ps();
  int64_t p = 0;
  for (; p + 16 <= k; p += 16) dot_step_avx512<R, J>(acc, a, lda, bj, p, __mmask16(0xFFFF));
  if (p < k) dot_step_avx512<R, J>(acc, a, lda, bj, p, __mmask16((1u << (k - p)) - 1));
  const __mmask16 keep = __mmask16((1u << cols) - 1);
  GRADUS_UNROLL for (int r = 0; r < R; ++r) {
    __m512 h[8];
    GRADUS_UNROLL for (int j = 0; j < 8; ++j) h[j] = j < J ? acc[r][j] : _mm512_setzero_ps();
    __m512 s = lane_sums8_512(h);
    float* cr = c + r * ldc;
    if (load) s = _mm512_add_ps(s, _mm512_maskz_loadu_ps(keep, cr));
    _mm512_mask_storeu_ps(cr, keep, s);
  }
}

/// R rows of C = or (`load`) += R rows of A · bᵀ over all n columns, in blocks of as many rows of
/// B as the registers hold beside R rows' accumulators: 8 for up to 3 rows of A, 6 for 4, 5 for 5.
template <int R>
[[gnu::target("avx512f,avx2,fma")]] inline void dot_rows_avx512(const float* a, const float* b, float* c, int64_t k,
                                                               int64_t n, int64_t ldc, bool load) {
  constexpr int J = R <= 3 ? 8 : R == 4 ? 6 : 5;
  for (int64_t j = 0; j < n; j += J)
    dot_block_avx512<R, J>(a, k, b + j * k, k, std::min<int64_t>(J, n - j), c + j, ldc, k, load);
}

/// c (m x n) = or += a (m x k) · bᵀ with b stored n x k (each of its rows, k apart, a column of the
/// product), read in place: A's rows k apart, C's `ldc`. Up to 5 rows of A at a time, B read once
/// for them.
inline void gemm_bt_avx512(const float* a, const float* b, float* c, int64_t m, int64_t k, int64_t n, int64_t ldc,
                           bool add) {
  for_row_blocks<5, 4>(m, [&]<int R>(std::integral_constant<int, R>, int64_t i) {
    dot_rows_avx512<R>(a + i * k, b, c + i * ldc, k, n, ldc, add);
  });
}

/// One step of dot_block_avx2: the 8 depths from p (those set in `mask` when Masked) of A's R rows
/// against the J rows of B.
template <int R, int J, bool Masked>
[[gnu::target("avx2,fma"), gnu::always_inline]] inline void dot_step_avx2(__m256 (&acc)[R][J], const float* a,
                                                                          int64_t lda, const float* const (&bj)[J],
                                                                          int64_t p, __m256i mask) {
  __m256 x[R];
  GRADUS_UNROLL for (int r = 0; r < R; ++r)
    x[r] = Masked ? _mm256_maskload_ps(a + r * lda + p, mask) : _mm256_loadu_ps(a + r * lda + p);
  GRADUS_UNROLL for (int j = 0; j < J; ++j) {
    __m256 y = Masked ? _mm256_maskload_ps(bj[j] + p, mask) : _mm256_loadu_ps(bj[j] + p);
    __asm__("" : "+x"(y));  // one load for the R rows (see dot_step_avx512)
    GRADUS_UNROLL for (int r = 0; r < R; ++r) acc[r][j] = _mm256_fmadd_ps(x[r], y, acc[r][j]);
  }
}

/// The AVX2 form of dot_block_avx512: J <= 8 rows of B, 8 depths a step.
template <int R, int J>
[[gnu::target("avx2,fma")]] inline void dot_block_avx2(const float* a, int64_t lda, const float* b, int64_t ldb,
                                                      int64_t cols, float* c, int64_t ldc, int64_t k, bool load) {
  const float* bj[J];
  GRADUS_UNROLL for (int j = 0; j < J; ++j) bj[j] = b + std::min<int64_t>(j, cols - 1) * ldb;
  __m256 acc[R][J];
  GRADUS_UNROLL for (int r = 0; r < R; ++r)
    GRADUS_UNROLL for (int j = 0; j < J; ++j) acc[r][j] = _mm256_setzero_ps();
  int64_t p = 0;
  for (; p + 8 <= k; p += 8) dot_step_avx2<R, J, false>(acc, a, lda, bj, p, __m256i{});
  if (p < k) dot_step_avx2<R, J, true>(acc, a, lda, bj, p, first_lanes8(k - p));
  GRADUS_UNROLL for (int r = 0; r < R; ++r) {
    __m256 h[8];
    GRADUS_UNROLL for (int j = 0; j < 8; ++j) h[j] = j < J ? acc[r][j] : _mm256_setzero_ps();
    store_sums(lane_sums8(h), c + r * ldc, cols, load);
  }
}

/// The AVX2 form of gemm_bt_avx512, within 16 registers: blocks of 6 rows of B, each read from
/// memory once and against A's rows two at a time (12 accumulators), staying in L1 between them.
/// (Blocks of fewer rows of B for more rows of A at once ran 1.3-1.6x slower on Zen 4: see
/// dot_block_avx512.)
[[gnu::target("avx2,fma")]] inline void gemm_bt_avx2(const float* a, const float* b, float* c, int64_t m, int64_t k,
                                                   int64_t n, int64_t ldc, bool add) {
  for (int64_t j = 0; j < n; j += 6) {
    const int64_t cols = std::min<int64_t>(6, n - j);
    const float* bj = b + j * k;
    int64_t i = 0;
    for (; i + 2 <= m; i += 2) dot_block_avx2<2, 6>(a + i * k, k, bj, k, cols, c + i * ldc + j, ldc, k, add);
    if (i < m) dot_block_avx2<1, 6>(a + i * k, k, bj, k, cols, c + i * ldc + j, ldc, k, add);
  }
}

}  // namespace gradus::backend::cpu::inplace
#endif  // x86 with GCC or Clang
