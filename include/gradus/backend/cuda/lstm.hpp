// gradus/backend/cuda/lstm.hpp — a whole LSTM sequence on a GPU (the kernels of the lstm_sequence
// op, ops/recurrent.hpp), laid out as the CPU's (backend/cpu/lstm.hpp):
//   forward, per step: one cuBLAS product h_{t-1} · R into the step's gate block, then one fused
//     kernel that adds the projected input (and the bias, when the op has one), applies σ/tanh and
//     updates c and h;
//   backward, per step back in time: one fused kernel producing dz_t from the saved gates, then
//     one product dh_{t-1} = dz_t · Rᵀ; after the loop one product dR = Σ_t h_{t-1}ᵀ dz_t over the
//     whole sequence (h_{t-1} and dz are time-major: the sum over t is the product's inner
//     dimension), and the bias's gradient as the column sums of dz (sum_to).
// The input projection x · W over the whole sequence is one product before the op (the layer
// computes xp). Device code: library/lstm.cuh.
#pragma once
#include <cstdint>

#include "gradus/backend/cuda/blas.hpp"
#include "gradus/backend/cuda/library.hpp"
#include "gradus/backend/cuda/memory.hpp"
#include "gradus/backend/cuda/reduce.hpp"
#include "gradus/backend/plans.hpp"
#include "gradus/core/device.hpp"
#include "gradus/core/tensor.hpp"

namespace gradus::backend::cuda {

inline constexpr char kLstmGates[] = "lstm_gates", kLstmGatesBackward[] = "lstm_gates_backward";

/// d[0, n) = s[0, n), both in the memory of `device` (a device-to-device copy, in stream order).
template <class T>
void copy_elements(const T* s, T* d, int64_t n, Device device) {
  if (n > 0) copy_bytes(d, device, s, device, size_t(n) * sizeof(T));
}

/// Every step of an LSTM (T >= 1 steps): xp [N, T, 4u], r [u, 4u], bias [4u] (null: none), h0 and
/// c0 [N, u] -> h_seq [N, T, u], h_last and c_last [N, u], and the saved buffers `s` (time-major).
template <class T>
void lstm_forward(const LstmPlan& p, const T* xp, const T* r, const T* bias, const T* h0, const T* c0, T* h_seq,
                  T* h_last, T* c_last, const LstmSaved<T>& s, Device device) {
  const int64_t n = p.n, steps = p.steps, u = p.units, g4 = 4 * u, nu = n * u;
  if (nu == 0) return;
  copy_elements(h0, s.h_prev, nu, device);
  copy_elements(c0, s.c_prev, nu, device);
  void* fn = cached_library_function<T, kLstmGates>(device);
  long ln = long(n), ls = long(steps), lu = long(u);
  for (int64_t t = 0; t < steps; ++t) {
    T* z = s.act + t * n * g4;
    const T* hp = s.h_prev + t * nu;
    const T* cp = s.c_prev + t * nu;
    T* hn = t + 1 < steps ? s.h_prev + (t + 1) * nu : h_last;
    T* cn = t + 1 < steps ? s.c_prev + (t + 1) * nu : c_last;
    T* tc = s.tanh_c + t * nu;
    gemm(hp, false, r, false, z, n, u, g4, false, device);
    long lt = long(t);
    void* params[] = {&z, &xp, &bias, &cp, &cn, &tc, &hn, &h_seq, &ln, &ls, &lu, &lt};
    launch_library(fn, long(nu), params, device.index);
  }
}

/// The adjoints of lstm_forward from those of its outputs (each may be null for zero): dxp
/// [N, T, 4u], dr [u, 4u], db [4u], dh0 and dc0 [N, u]. A null destination is skipped; `add_*`
/// accumulates instead of writing.
template <class T>
void lstm_backward(const LstmPlan& p, const T* r, const LstmSaved<T>& s, const T* g_seq, const T* g_h_last,
                   const T* g_c_last, T* dxp, bool add_xp, T* dr, bool add_r, T* db, bool add_b, T* dh0, bool add_h0,
                   T* dc0, bool add_c0, Device device) {
  const int64_t n = p.n, steps = p.steps, u = p.units, g4 = 4 * u, nu = n * u;
  Tensor<T> dz_buf = Tensor<T>::empty({steps, n, g4}, device), dh_buf = Tensor<T>::empty({n, u}, device),
            dc_buf = Tensor<T>::empty({n, u}, device);
  T* dz = dz_buf.device_data();
  T* dh = dh_buf.device_data();
  T* dc = dc_buf.device_data();
  if (nu > 0) {
    if (g_h_last) copy_elements(g_h_last, dh, nu, device);
    else fill(dh, long(nu), T(0), device);
    if (g_c_last) copy_elements(g_c_last, dc, nu, device);
    else fill(dc, long(nu), T(0), device);
  }
  void* fn = cached_library_function<T, kLstmGatesBackward>(device);
  long ln = long(n), ls = long(steps), lu = long(u);
  int ax = add_xp ? 1 : 0;
  for (int64_t t = steps - 1; t >= 0 && nu > 0; --t) {
    const T* a = s.act + t * n * g4;
    const T* tc = s.tanh_c + t * nu;
    const T* cp = s.c_prev + t * nu;
    T* dzt = dz + t * n * g4;
    long lt = long(t);
    void* params[] = {&a, &tc, &cp, &g_seq, &dh, &dc, &dzt, &dxp, &ax, &ln, &ls, &lu, &lt};
    launch_library(fn, long(nu), params, device.index);
    if (t > 0)
      gemm(dzt, false, r, true, dh, n, g4, u, false, device);
    else if (dh0)
      gemm(dzt, false, r, true, dh0, n, g4, u, add_h0, device);
  }
  if (dc0 && nu > 0) add_c0 ? add_into(dc0, dc, long(nu), device) : copy_elements(dc, dc0, nu, device);
  if (dr) {
    if (steps * n > 0)
      gemm(s.h_prev, true, dz, false, dr, u, steps * n, g4, add_r, device);
    else if (!add_r)
      fill(dr, long(u * g4), T(0), device);
  }
  if (db) {  // the column sums of dz, in a fixed order: the same bits on every run
    if (steps * n > 0)
      sum_to(dz, Shape{steps * n, g4}, db, Shape{g4}, add_b, device);
    else if (!add_b)
      fill(db, long(g4), T(0), device);
  }
}

}  // namespace gradus::backend::cuda
