// gradus/backend/cuda/library/lstm.cuh — the per-step gate passes of an LSTM sequence (lstm.hpp),
// one thread per (sequence, unit). Gate order i, f, g, o: c' = σ(f) c + σ(i) tanh(g),
// h' = σ(o) tanh(c'), as on the CPU (backend/cpu/lstm.hpp). Device code, read only by NVRTC
// (library_source()); uses common.cuh.
#pragma once

__device__ inline float gradus_tanh(float x) { return tanhf(x); }
__device__ inline double gradus_tanh(double x) { return tanh(x); }
template <class T>
__device__ inline T gradus_logistic(T x) {
  return T(1) / (T(1) + gradus_exp(-x));
}

#define GRADUS_LIBRARY_LSTM(T, S)                                                                   \
  /* step t: z [N, 4u] holds h_{t-1} · R; adds xp[:, t] and the bias (null: none), activates the */ \
  /* gates in place and writes c_t (cn), tanh(c_t), h_t (hn) and h_seq[:, t] */                    \
  extern "C" __global__ void gradus_lstm_gates_##S(T* z, const T* xp, const T* bias, const T* cp, T* cn,  \
                                                   T* tanh_c, T* hn, T* h_seq, long n, long steps, long u, \
                                                   long t) {                                         \
    GRADUS_FOR_EACH(e, n * u) {                                                                      \
      const long b = e / u, j = e % u;                                                               \
      T* zb = z + b * 4 * u;                                                                         \
      const T* xb = xp + (b * steps + t) * 4 * u;                                                    \
      const T bi = bias ? bias[j] : T(0), bf = bias ? bias[u + j] : T(0);                            \
      const T bg = bias ? bias[2 * u + j] : T(0), bo = bias ? bias[3 * u + j] : T(0);                \
      const T i = gradus_logistic(zb[j] + xb[j] + bi), f = gradus_logistic(zb[u + j] + xb[u + j] + bf); \
      const T g = gradus_tanh(zb[2 * u + j] + xb[2 * u + j] + bg);                                   \
      const T o = gradus_logistic(zb[3 * u + j] + xb[3 * u + j] + bo);                               \
      zb[j] = i, zb[u + j] = f, zb[2 * u + j] = g, zb[3 * u + j] = o;                                \
      const T c = f * cp[e] + i * g, tc = gradus_tanh(c);                                            \
      cn[e] = c, tanh_c[e] = tc;                                                                     \
      hn[e] = h_seq[(b * steps + t) * u + j] = o * tc;                                               \
    }                                                                                                \
  }                                                                                                  \
  /* step t back in time: the pre-activation adjoint dz [N, 4u] of the step from the saved gates */ \
  /* a, tanh(c_t) and c_{t-1}, the adjoints dh (plus g_seq[:, t] when given) and dc; dc becomes */   \
  /* dc_{t-1}; dxp[:, t] gets dz (added with add_xp) */                                             \
  extern "C" __global__ void gradus_lstm_gates_backward_##S(const T* a, const T* tc, const T* cp, const T* g_seq, \
                                                            const T* dh, T* dc, T* dz, T* dxp, int add_xp, \
                                                            long n, long steps, long u, long t) {   \
    GRADUS_FOR_EACH(e, n * u) {                                                                      \
      const long b = e / u, j = e % u;                                                               \
      const T* ab = a + b * 4 * u;                                                                   \
      const T i = ab[j], f = ab[u + j], g = ab[2 * u + j], o = ab[3 * u + j], tcj = tc[e];          \
      const T dhj = dh[e] + (g_seq ? g_seq[(b * steps + t) * u + j] : T(0));                         \
      const T dcj = dc[e] + dhj * o * (T(1) - tcj * tcj);                                            \
      T* d = dz + b * 4 * u;                                                                         \
      const T d0 = dcj * g * i * (T(1) - i), d1 = dcj * cp[e] * f * (T(1) - f);                      \
      const T d2 = dcj * i * (T(1) - g * g), d3 = dhj * tcj * o * (T(1) - o);                        \
      d[j] = d0, d[u + j] = d1, d[2 * u + j] = d2, d[3 * u + j] = d3;                                \
      dc[e] = dcj * f;                                                                               \
      if (dxp) {                                                                                     \
        T* dx = dxp + (b * steps + t) * 4 * u;                                                       \
        if (add_xp) dx[j] += d0, dx[u + j] += d1, dx[2 * u + j] += d2, dx[3 * u + j] += d3;          \
        else dx[j] = d0, dx[u + j] = d1, dx[2 * u + j] = d2, dx[3 * u + j] = d3;                     \
      }                                                                                              \
    }                                                                                                \
  }
GRADUS_LIBRARY_LSTM(float, f)
GRADUS_LIBRARY_LSTM(double, d)
