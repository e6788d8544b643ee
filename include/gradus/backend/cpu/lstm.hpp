// gradus/backend/cpu/lstm.hpp — a whole LSTM sequence on the CPU (the kernels of the
// lstm_sequence op, ops/recurrent.hpp), the way oneDNN's RNN primitive runs one:
//   forward, per step: one GEMM h_{t-1} · R into the step's gate block, then one pass over the
//     block that adds the projected input, applies σ/tanh and updates c and h;
//   backward, per step back in time: one pass producing dz_t (the pre-activation adjoint) from
//     the saved gates, then one GEMM dh_{t-1} = dz_t · Rᵀ; after the loop ONE GEMM
//     dR = Σ_t h_{t-1}ᵀ dz_t over the whole sequence (the saved h_{t-1} and dz are time-major,
//     so the sum over t is the inner dimension of a single product).
// Gate order i, f, g, o (tf.keras): c' = σ(f) c + σ(i) tanh(g), h' = σ(o) tanh(c'). The gate
// functions are Eigen's (logistic, tanh), the ones gradus::sigmoid and gradus::tanh use.
#pragma once
#include <Eigen/Core>
#include <algorithm>
#include <cstdint>

#include "gradus/backend/cpu/gemm.hpp"
#include "gradus/backend/plans.hpp"
#include "gradus/core/tensor.hpp"

namespace gradus::backend::cpu {

/// What the forward pass keeps for the backward one (all time-major, caller-owned):
/// act [T, N, 4u] the activated gates σ(i), σ(f), tanh(g), σ(o); h_prev [T, N, u] h_{t-1};
/// c_prev [T, N, u] c_{t-1}; tanh_c [T, N, u] tanh(c_t).
template <class T>
struct LstmSaved {
  T* act;
  T* h_prev;
  T* c_prev;
  T* tanh_c;
};

/// Every step of an LSTM: xp [N, T, 4u] (x · kernel + bias), r [u, 4u], h0 and c0 [N, u] ->
/// h_seq [N, T, u], h_last and c_last [N, u], and the saved buffers `s`.
template <class T>
void lstm_forward(const LstmPlan& p, const T* xp, const T* r, const T* h0, const T* c0, T* h_seq, T* h_last,
                  T* c_last, const LstmSaved<T>& s) {
  using Row = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
  using CRow = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;
  const int64_t n = p.n, steps = p.steps, u = p.units, g4 = 4 * u, nu = n * u;
  std::copy_n(h0, nu, s.h_prev);
  std::copy_n(c0, nu, s.c_prev);
  for (int64_t t = 0; t < steps; ++t) {
    T* z = s.act + t * n * g4;
    const T* hp = s.h_prev + t * nu;
    const T* cp = s.c_prev + t * nu;
    T* hn = t + 1 < steps ? s.h_prev + (t + 1) * nu : h_last;
    T* cn = t + 1 < steps ? s.c_prev + (t + 1) * nu : c_last;
    gemm(hp, false, r, false, z, n, u, g4, false);
    for (int64_t b = 0; b < n; ++b) {
      Row zb(z + b * g4, g4);
      zb += CRow(xp + (b * steps + t) * g4, g4);
      zb.head(2 * u) = zb.head(2 * u).logistic();
      zb.segment(2 * u, u) = zb.segment(2 * u, u).tanh();
      zb.tail(u) = zb.tail(u).logistic();
      Row c(cn + b * u, u), tc(s.tanh_c + t * nu + b * u, u);
      c = zb.segment(u, u) * CRow(cp + b * u, u) + zb.head(u) * zb.segment(2 * u, u);
      tc = c.tanh();
      Row h(hn + b * u, u);
      h = zb.tail(u) * tc;
      Row(h_seq + (b * steps + t) * u, u) = h;
    }
  }
}

/// The adjoints of lstm_forward from those of its outputs (g_seq [N, T, u], g_h_last and
/// g_c_last [N, u]; each may be null for zero) and the saved buffers: dxp [N, T, 4u], dr [u, 4u],
/// dh0 and dc0 [N, u]. A null destination is skipped; `add_*` accumulates instead of writing.
template <class T>
void lstm_backward(const LstmPlan& p, const T* r, const LstmSaved<T>& s, const T* g_seq, const T* g_h_last,
                   const T* g_c_last, T* dxp, bool add_xp, T* dr, bool add_r, T* dh0, bool add_h0, T* dc0,
                   bool add_c0) {
  using Row = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
  using CRow = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;
  const int64_t n = p.n, steps = p.steps, u = p.units, g4 = 4 * u, nu = n * u;
  Tensor<T> dz_buf = Tensor<T>::empty({steps, n, g4}), dh_buf = Tensor<T>::empty({n, u}),
            dc_buf = Tensor<T>::empty({n, u});
  T* dz = dz_buf.data();
  T* dh = dh_buf.data();
  T* dc = dc_buf.data();
  if (g_h_last)
    std::copy_n(g_h_last, nu, dh);
  else
    std::fill_n(dh, nu, T(0));
  if (g_c_last)
    std::copy_n(g_c_last, nu, dc);
  else
    std::fill_n(dc, nu, T(0));
  for (int64_t t = steps - 1; t >= 0; --t) {
    T* dzt = dz + t * n * g4;
    for (int64_t b = 0; b < n; ++b) {
      const T* a = s.act + (t * n + b) * g4;
      CRow i(a, u), f(a + u, u), g(a + 2 * u, u), o(a + 3 * u, u);
      CRow tc(s.tanh_c + t * nu + b * u, u), cp(s.c_prev + t * nu + b * u, u);
      Row dhb(dh + b * u, u), dcb(dc + b * u, u);
      if (g_seq) dhb += CRow(g_seq + (b * steps + t) * u, u);
      dcb += dhb * o * (T(1) - tc.square());
      T* d = dzt + b * g4;
      Row(d, u) = dcb * g * i * (T(1) - i);
      Row(d + u, u) = dcb * cp * f * (T(1) - f);
      Row(d + 2 * u, u) = dcb * i * (T(1) - g.square());
      Row(d + 3 * u, u) = dhb * tc * o * (T(1) - o);
      dcb *= f;
      if (dxp) {
        Row dx(dxp + (b * steps + t) * g4, g4);
        if (add_xp)
          dx += CRow(d, g4);
        else
          dx = CRow(d, g4);
      }
    }
    if (t > 0)
      gemm(dzt, false, r, true, dh, n, g4, u, false);
    else if (dh0)
      gemm(dzt, false, r, true, dh0, n, g4, u, add_h0);
  }
  if (dc0) {
    if (add_c0)
      Row(dc0, nu) += CRow(dc, nu);
    else
      std::copy_n(dc, nu, dc0);
  }
  if (dr) gemm(s.h_prev, true, dz, false, dr, u, steps * n, g4, add_r);
}

}  // namespace gradus::backend::cpu
