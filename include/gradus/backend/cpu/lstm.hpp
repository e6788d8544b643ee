// gradus/backend/cpu/lstm.hpp — a whole LSTM sequence on the CPU (the kernels of the
// lstm_sequence op, ops/recurrent.hpp), the way oneDNN's RNN primitive runs one:
//   forward, per step: one GEMM h_{t-1} · R into the step's gate block, then one pass over the
//     block that adds the projected input (and the bias), applies σ/tanh and updates c and h;
//   backward, per step back in time: one pass producing dz_t (the pre-activation adjoint) from
//     the saved gates and adding it to the bias's gradient, then one GEMM dh_{t-1} = dz_t · Rᵀ;
//     after the loop ONE GEMM dR = Σ_t h_{t-1}ᵀ dz_t over the whole sequence (the saved h_{t-1}
//     and dz are time-major, so the sum over t is the inner dimension of a single product).
// The per-step products have a small m (the batch) and the same B (the recurrent kernel) every
// step: with AVX-512 or AVX2 they run on a kernel that reads B in place (step_gemm) instead of
// packing it on every call. The batch rows are split over the threads once for the whole
// sequence (rows never interact in the recurrence), so the threads do not meet between steps.
// Gate order i, f, g, o (tf.keras): c' = σ(f) c + σ(i) tanh(g), h' = σ(o) tanh(c'). The gate
// functions are vecmath.hpp's (within 3 ulp of exact in float, the standard library's in double),
// so the gate pass is one plain loop that vectorises for the CPU's widest ISA (isa.hpp).
#pragma once
#include "gradus/core/eigen.hpp"
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "gradus/backend/cpu/copy.hpp"
#include "gradus/backend/cpu/gemm.hpp"
#include "gradus/backend/cpu/isa.hpp"
#include "gradus/backend/cpu/parallel.hpp"
#include "gradus/backend/cpu/vecmath.hpp"
#include "gradus/backend/plans.hpp"
#include "gradus/core/tensor.hpp"

GRADUS_SIMD_HINTS_BEGIN
namespace gradus::backend::cpu {

namespace lstm_detail {

#if defined(GRADUS_SGEMM_X86)
/// C rows [R x 16Q] = or += A rows [R x k] · B [k x 16Q], over B's rows [p0, p1): B row-major with
/// row stride ldb, unpacked; C row stride ldc; R rows x Q vectors of 16 columns of C in AVX-512
/// accumulators (the loops over them unrolled, so that the accumulators stay in registers). The
/// last vector's columns are those of `tail` (a partial panel at the right edge of C: B and C are
/// read and written only there).
template <int R, int Q>
[[gnu::target("avx512f")]] inline void rows_avx512(const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                                                  int64_t ldc, int64_t p0, int64_t p1, bool load, __mmask16 tail) {
  __m512 acc[R][Q];
  GRADUS_UNROLL for (int r = 0; r < R; ++r)
    GRADUS_UNROLL for (int q = 0; q < Q; ++q)
      acc[r][q] = !load        ? _mm512_setzero_ps()
                  : q + 1 < Q ? _mm512_loadu_ps(c + r * ldc + 16 * q)
                              : _mm512_maskz_loadu_ps(tail, c + r * ldc + 16 * q);
  for (int64_t p = p0; p < p1; ++p) {
    const float* bp = b + p * ldb;
    __m512 bv[Q];
    GRADUS_UNROLL for (int q = 0; q < Q; ++q) {
      bv[q] = q + 1 < Q ? _mm512_loadu_ps(bp + 16 * q) : _mm512_maskz_loadu_ps(tail, bp + 16 * q);
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
      if (q + 1 < Q)
        _mm512_storeu_ps(c + r * ldc + 16 * q, acc[r][q]);
      else
        _mm512_mask_storeu_ps(c + r * ldc + 16 * q, tail, acc[r][q]);
    }
}

/// The rows [0, m) of a panel of C of Q vectors (see rows_avx512): blocks of 4 rows, then 2, then 1.
template <int Q>
[[gnu::target("avx512f")]] inline void panel_avx512(const float* a, int64_t k, const float* b, int64_t ldb, float* c,
                                                   int64_t ldc, int64_t m, int64_t p0, int64_t p1, bool load,
                                                   __mmask16 tail) {
  int64_t i = 0;
  for (; i + 4 <= m; i += 4) rows_avx512<4, Q>(a + i * k, k, b, ldb, c + i * ldc, ldc, p0, p1, load, tail);
  if (i + 2 <= m) rows_avx512<2, Q>(a + i * k, k, b, ldb, c + i * ldc, ldc, p0, p1, load, tail), i += 2;
  if (i < m) rows_avx512<1, Q>(a + i * k, k, b, ldb, c + i * ldc, ldc, p0, p1, load, tail);
}

/// c (m x n) = or += a (m x k) · b (k x n), row-major (see step_gemm). B is walked in panels of
/// kc rows x 64 columns (32 KiB, held in L1) and every row of A runs over a panel before the next
/// panel is read, so B crosses from L2 once per call, not once per 4 rows. A last panel narrower
/// than 64 columns runs as 1 to 4 vectors, the last one masked to the columns that exist.
[[gnu::target("avx512f")]] inline void step_gemm_avx512(const float* a, const float* b, float* c, int64_t m, int64_t k,
                                                       int64_t n, bool add) {
  constexpr int64_t kc = 128;
  for (int64_t p0 = 0; p0 < k; p0 += kc) {
    const int64_t p1 = std::min(k, p0 + kc);
    const bool load = add || p0 > 0;
    for (int64_t j = 0; j < n; j += 64) {
      const int64_t w = std::min<int64_t>(64, n - j);
      const auto tail = __mmask16(w % 16 == 0 ? 0xFFFF : (1u << (w % 16)) - 1);
      switch ((w + 15) / 16) {
        case 4: panel_avx512<4>(a, k, b + j, n, c + j, n, m, p0, p1, load, tail); break;
        case 3: panel_avx512<3>(a, k, b + j, n, c + j, n, m, p0, p1, load, tail); break;
        case 2: panel_avx512<2>(a, k, b + j, n, c + j, n, m, p0, p1, load, tail); break;
        default: panel_avx512<1>(a, k, b + j, n, c + j, n, m, p0, p1, load, tail); break;
      }
    }
  }
}

/// The AVX2 form of rows_avx512: C rows [R x 8Q] (Q <= 2 vectors of 8 floats; R x Q accumulators,
/// Q vectors of B and a broadcast within the 16 registers), B read in place. With Masked, the
/// last vector holds only the columns of `tail` (a lane is in when its sign bit is set).
template <int R, int Q, bool Masked>
[[gnu::target("avx2,fma")]] inline void rows_avx2(const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                                                 int64_t ldc, int64_t p0, int64_t p1, bool load, __m256i tail) {
  __m256 acc[R][Q];
  GRADUS_UNROLL for (int r = 0; r < R; ++r)
    GRADUS_UNROLL for (int q = 0; q < Q; ++q)
      acc[r][q] = !load                      ? _mm256_setzero_ps()
                  : Masked && q + 1 == Q ? _mm256_maskload_ps(c + r * ldc + 8 * q, tail)
                                         : _mm256_loadu_ps(c + r * ldc + 8 * q);
  for (int64_t p = p0; p < p1; ++p) {
    const float* bp = b + p * ldb;
    __m256 bv[Q];
    GRADUS_UNROLL for (int q = 0; q < Q; ++q) {
      bv[q] = Masked && q + 1 == Q ? _mm256_maskload_ps(bp + 8 * q, tail) : _mm256_loadu_ps(bp + 8 * q);
      __asm__("" : "+x"(bv[q]));  // B in registers, read once per depth (see rows_avx512)
    }
    GRADUS_UNROLL for (int r = 0; r < R; ++r) {
      const __m256 av = _mm256_broadcast_ss(a + r * lda + p);
      GRADUS_UNROLL for (int q = 0; q < Q; ++q) acc[r][q] = _mm256_fmadd_ps(av, bv[q], acc[r][q]);
    }
  }
  GRADUS_UNROLL for (int r = 0; r < R; ++r)
    GRADUS_UNROLL for (int q = 0; q < Q; ++q) {
      if (Masked && q + 1 == Q)
        _mm256_maskstore_ps(c + r * ldc + 8 * q, tail, acc[r][q]);
      else
        _mm256_storeu_ps(c + r * ldc + 8 * q, acc[r][q]);
    }
}

/// The rows [0, m) of a panel of C of Q vectors (see rows_avx2): blocks of 6 rows, then 4, 2, 1.
template <int Q, bool Masked>
[[gnu::target("avx2,fma")]] inline void panel_avx2(const float* a, int64_t k, const float* b, int64_t ldb, float* c,
                                                  int64_t ldc, int64_t m, int64_t p0, int64_t p1, bool load,
                                                  __m256i tail) {
  int64_t i = 0;
  for (; i + 6 <= m; i += 6) rows_avx2<6, Q, Masked>(a + i * k, k, b, ldb, c + i * ldc, ldc, p0, p1, load, tail);
  if (i + 4 <= m) rows_avx2<4, Q, Masked>(a + i * k, k, b, ldb, c + i * ldc, ldc, p0, p1, load, tail), i += 4;
  if (i + 2 <= m) rows_avx2<2, Q, Masked>(a + i * k, k, b, ldb, c + i * ldc, ldc, p0, p1, load, tail), i += 2;
  if (i < m) rows_avx2<1, Q, Masked>(a + i * k, k, b, ldb, c + i * ldc, ldc, p0, p1, load, tail);
}

/// The AVX2 form of step_gemm_avx512: panels of kc rows x 16 columns of B (8 KiB), a last panel
/// of fewer columns as one or two vectors, the last masked where it is partial.
[[gnu::target("avx2,fma")]] inline void step_gemm_avx2(const float* a, const float* b, float* c, int64_t m, int64_t k,
                                                     int64_t n, bool add) {
  constexpr int64_t kc = 128;
  for (int64_t p0 = 0; p0 < k; p0 += kc) {
    const int64_t p1 = std::min(k, p0 + kc);
    const bool load = add || p0 > 0;
    for (int64_t j = 0; j < n; j += 16) {
      const int64_t w = std::min<int64_t>(16, n - j), part = w % 8;
      const __m256i tail = _mm256_cmpgt_epi32(_mm256_set1_epi32(int(part)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
      if (w == 16)
        panel_avx2<2, false>(a, k, b + j, n, c + j, n, m, p0, p1, load, tail);
      else if (w == 8)
        panel_avx2<1, false>(a, k, b + j, n, c + j, n, m, p0, p1, load, tail);
      else if (w > 8)
        panel_avx2<2, true>(a, k, b + j, n, c + j, n, m, p0, p1, load, tail);
      else
        panel_avx2<1, true>(a, k, b + j, n, c + j, n, m, p0, p1, load, tail);
    }
  }
}
#endif

/// c (m x n) = or += a (m x k) · b (k x n), all row-major: the per-step products of an LSTM,
/// whose m (the batch) is small and whose b (the recurrent kernel) is the same every step. The
/// general gemm packs b on every call, which here costs about as much as the product, and more
/// than the product once the batch rows are split over threads (each thread packs all of b);
/// with AVX-512 or AVX2 (the GEMM's own kernel choice) these kernels read b in place instead (it
/// stays in cache).
template <class T>
void step_gemm(const T* a, const T* b, T* c, int64_t m, int64_t k, int64_t n, bool add) {
#if defined(GRADUS_SGEMM_X86)
  if constexpr (std::is_same_v<T, float>) {
    if (autocast_precision() != Precision::bf16) {
      if (gemm_kernel() == GemmKernel::avx512) return step_gemm_avx512(a, b, c, m, k, n, add);
      if (gemm_kernel() == GemmKernel::avx2) return step_gemm_avx2(a, b, c, m, k, n, add);
    }
  }
#endif
  gemm(a, false, b, false, c, m, k, n, add);
}
}  // namespace lstm_detail

/// Sequences (batch rows) are independent of one another through the whole recurrence, so the
/// rows are split over the threads once, for all steps: no synchronisation between steps.
/// `f(chunk, b0, b1)`; row_chunks(n) is the number of chunks.
inline constexpr int64_t kRowAlign = 4, kRowThreshold = 8;
inline int row_chunks(int64_t n) { return chunks_for(n, kRowAlign, kRowThreshold); }
template <class F>
void for_row_chunks(int64_t n, F&& f) {
  parallel_chunks(n, kRowAlign, [&](int chunk, int64_t b0, int64_t b1) { f(chunk, b0, b1); }, kRowThreshold);
}

/// Every step of an LSTM: xp [N, T, 4u] (x · kernel, or x · kernel + bias with a null `bias`),
/// r [u, 4u], bias [4u], h0 and c0 [N, u] -> h_seq [N, T, u], h_last and c_last [N, u], and the
/// saved buffers `s`. The bias is added in the gates' pass, where xp is read anyway: a layer
/// that hands it over saves a pass over all of xp (write, then read) in the forward pass and the
/// bias's column sums over dz in the backward one.
template <class T>
void lstm_forward(const LstmPlan& p, const T* xp, const T* r, const T* bias, const T* h0, const T* c0, T* h_seq,
                  T* h_last, T* c_last, const LstmSaved<T>& s) {
  const int64_t n = p.n, steps = p.steps, u = p.units, g4 = 4 * u, nu = n * u;
  std::copy_n(h0, nu, s.h_prev);
  std::copy_n(c0, nu, s.c_prev);
  Tensor<T> no_bias;  // zeros, for a null bias: the gates' loop then needs no second form
  if (!bias) no_bias = Tensor<T>::zeros({g4}), bias = no_bias.data();
  for_row_chunks(n, [&](int, int64_t b0, int64_t b1) {
    for (int64_t t = 0; t < steps; ++t) {
      T* z = s.act + t * n * g4;
      const T* hp = s.h_prev + t * nu;
      const T* cp = s.c_prev + t * nu;
      T* hn = t + 1 < steps ? s.h_prev + (t + 1) * nu : h_last;
      T* cn = t + 1 < steps ? s.c_prev + (t + 1) * nu : c_last;
      lstm_detail::step_gemm(hp + b0 * u, r, z + b0 * g4, b1 - b0, u, g4, false);
      with_isa([&] {
        for (int64_t b = b0; b < b1; ++b) {  // the gates, c and h of row b in one pass
          T* zb = z + b * g4;
          const T* xb = xp + (b * steps + t) * g4;
          const T* cpb = cp + b * u;
          T *cb = cn + b * u, *tcb = s.tanh_c + t * nu + b * u, *hb = hn + b * u, *hs = h_seq + (b * steps + t) * u;
          GRADUS_SIMD
          for (int64_t j = 0; j < u; ++j) {
            const T i = vm::logistic(zb[j] + xb[j] + bias[j]), f = vm::logistic(zb[u + j] + xb[u + j] + bias[u + j]);
            const T g = vm::tanh(zb[2 * u + j] + xb[2 * u + j] + bias[2 * u + j]);
            const T o = vm::logistic(zb[3 * u + j] + xb[3 * u + j] + bias[3 * u + j]);
            zb[j] = i, zb[u + j] = f, zb[2 * u + j] = g, zb[3 * u + j] = o;
            const T c = f * cpb[j] + i * g, tc = vm::tanh(c);
            cb[j] = c, tcb[j] = tc;
            hb[j] = hs[j] = o * tc;
          }
        }
      });
    }
  });
}

/// The adjoints of lstm_forward from those of its outputs (g_seq [N, T, u], g_h_last and
/// g_c_last [N, u]; each may be null for zero) and the saved buffers: dxp [N, T, 4u], dr [u, 4u],
/// db [4u], dh0 and dc0 [N, u]. A null destination is skipped; `add_*` accumulates instead of
/// writing. db is the sum of dz over every row and step: each chunk of rows sums its own while
/// its dz is in cache, and the chunks' sums are added in chunk order (the same bits whichever
/// thread ran which chunk).
template <class T>
void lstm_backward(const LstmPlan& p, const T* r, const LstmSaved<T>& s, const T* g_seq, const T* g_h_last,
                   const T* g_c_last, T* dxp, bool add_xp, T* dr, bool add_r, T* db, bool add_b, T* dh0, bool add_h0,
                   T* dc0, bool add_c0) {
  using Row = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
  using CRow = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;
  const int64_t n = p.n, steps = p.steps, u = p.units, g4 = 4 * u, nu = n * u;
  // one step (a cell stepped by its caller) has no dh_{t-1} inside the sequence: its dh0 is one
  // product with r read transposed after the loop, not worth a transposed copy of r
  Tensor<T> dz_buf = Tensor<T>::empty({steps, n, g4}), dh_buf = Tensor<T>::empty({n, u}),
            dc_buf = Tensor<T>::empty({n, u}), rt_buf = Tensor<T>::empty({steps > 1 ? g4 : 0, u});
  T* dz = dz_buf.data();
  T* dh = dh_buf.data();
  T* dc = dc_buf.data();
  T* rt = rt_buf.data();  // rᵀ [4u, u]: each step's dh = dz_t · rᵀ reads it row by row
  const int chunks = db ? row_chunks(n) : 0;
  Tensor<T> db_parts = db ? Tensor<T>::zeros({chunks, g4}) : Tensor<T>();  // each chunk's sum of dz
  if (steps > 1) transpose_tiles(r, g4, rt, u, g4, u);  // rt[j * u + k] = r[k * g4 + j]
  if (g_h_last)
    std::copy_n(g_h_last, nu, dh);
  else
    std::fill_n(dh, nu, T(0));
  if (g_c_last)
    std::copy_n(g_c_last, nu, dc);
  else
    std::fill_n(dc, nu, T(0));
  for_row_chunks(n, [&](int chunk, int64_t b0, int64_t b1) {
    T* dbc = db ? db_parts.data() + chunk * g4 : nullptr;
    for (int64_t t = steps - 1; t >= 0; --t) {
      T* dzt = dz + t * n * g4;
      with_isa([&] {
        for (int64_t b = b0; b < b1; ++b) {
          const T *a = s.act + (t * n + b) * g4, *tc = s.tanh_c + t * nu + b * u, *cp = s.c_prev + t * nu + b * u;
          const T* gs = g_seq ? g_seq + (b * steps + t) * u : nullptr;
          const T* dhb = dh + b * u;
          T* dcb = dc + b * u;
          T* d = dzt + b * g4;
          // one loop with the sequence's gradient and one without, so that neither loads
          // conditionally (GCC -O2 keeps such a loop scalar for SSE)
          auto pass = [&](auto with_gs) {
            GRADUS_SIMD
            for (int64_t j = 0; j < u; ++j) {
              const T i = a[j], f = a[u + j], g = a[2 * u + j], o = a[3 * u + j], tcj = tc[j];
              T dhj = dhb[j];
              if constexpr (decltype(with_gs)::value) dhj += gs[j];
              const T dcj = dcb[j] + dhj * o * (T(1) - tcj * tcj);
              d[j] = dcj * g * i * (T(1) - i);
              d[u + j] = dcj * cp[j] * f * (T(1) - f);
              d[2 * u + j] = dcj * i * (T(1) - g * g);
              d[3 * u + j] = dhj * tcj * o * (T(1) - o);
              dcb[j] = dcj * f;
            }
          };
          if (gs)
            pass(std::true_type{});
          else
            pass(std::false_type{});
          if (dbc) {
            GRADUS_SIMD
            for (int64_t j = 0; j < g4; ++j) dbc[j] += d[j];
          }
          if (dxp) {
            T* dx = dxp + (b * steps + t) * g4;
            if (add_xp) {
              GRADUS_SIMD
              for (int64_t j = 0; j < g4; ++j) dx[j] += d[j];
            } else {
              std::copy_n(d, g4, dx);
            }
          }
        }
      });
      const int64_t m = b1 - b0;
      if (t > 0)
        lstm_detail::step_gemm(dzt + b0 * g4, rt, dh + b0 * u, m, g4, u, false);
      else if (dh0 && steps > 1)
        lstm_detail::step_gemm(dzt + b0 * g4, rt, dh0 + b0 * u, m, g4, u, add_h0);
    }
  });
  if (dc0) {
    if (add_c0)
      Row(dc0, nu) += CRow(dc, nu);
    else
      std::copy_n(dc, nu, dc0);
  }
  if (dh0 && steps == 1) gemm(dz, false, r, true, dh0, n, g4, u, add_h0);
  if (dr) gemm(s.h_prev, true, dz, false, dr, u, steps * n, g4, add_r);
  if (db) {
    if (!add_b) std::fill_n(db, g4, T(0));
    for (int c = 0; c < chunks; ++c) Row(db, g4) += CRow(db_parts.data() + c * g4, g4);
  }
}

}  // namespace gradus::backend::cpu
GRADUS_SIMD_HINTS_END
