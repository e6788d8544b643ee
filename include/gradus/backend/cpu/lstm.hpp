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

/// c (m x n) = or += a (m x k) · b (k x n), all row-major: the per-step products of an LSTM,
/// whose m (the batch) is small and whose b (the recurrent kernel) is the same every step. The
/// general gemm packs b on every call, which here costs about as much as the product, and more
/// than the product once the batch rows are split over threads (each thread packs all of b);
/// with AVX-512 or AVX2 (the GEMM's own kernel choice) the kernels of gemm_inplace.hpp read b in
/// place instead (it stays in cache).
template <class T>
void step_gemm(const T* a, const T* b, T* c, int64_t m, int64_t k, int64_t n, bool add) {
#if defined(GRADUS_SGEMM_X86)
  if constexpr (std::is_same_v<T, float>) {
    if (autocast_precision() != Precision::bf16) {
      if (gemm_kernel() == GemmKernel::avx512) return inplace::gemm_avx512(a, b, c, m, k, n, n, add);
      if (gemm_kernel() == GemmKernel::avx2) return inplace::gemm_avx2(a, b, c, m, k, n, n, add);
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
