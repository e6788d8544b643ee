// gradus/backend/cpu/compiled.hpp — the CPU kernels the optional gradus::kernels library compiles
// once (src/kernels.cpp), declared for translation units built with GRADUS_COMPILED_KERNELS.
//
// Header-only is the default: backend.hpp includes these kernels' definitions (cpu/gemm.hpp,
// cpu/conv.hpp, cpu/pool.hpp), so every translation unit that multiplies matrices parses
// <immintrin.h> and compiles the GEMM again. A target that links gradus::kernels gets
// GRADUS_COMPILED_KERNELS defined by CMake and sees only the declarations below; the library
// holds their float and double instantiations, built from the same headers (the same code and
// results). It saves about a second per translation unit that includes gradus.hpp and several
// per one that trains a model (docs/performance.md).
#pragma once
#include <cstdint>

#include "gradus/backend/cpu/bias_activation.hpp"
#include "gradus/backend/plans.hpp"
#include "gradus/expr/activations.hpp"

namespace gradus::backend::cpu {

// Exactly the templates of cpu/gemm.hpp, cpu/conv.hpp, cpu/pool.hpp and cpu/lstm.hpp (their contracts are
// there); instantiated for float and double in src/kernels.cpp.
template <class T>
void gemm(const T* a, bool ta, const T* b, bool tb, T* c, int64_t m, int64_t k, int64_t n, bool add);
template <class T>
void conv2d_forward(const ConvPlan& p, const T* x, const T* w, const T* bias, T* out, bool relu);
template <class T>
void conv2d_backward(const ConvPlan& p, const T* g, const T* x, const T* w, T* dx, bool add_dx, T* dw, bool add_dw,
                     T* db, bool add_db, const T* relu_y);
template <class T>
void pool2d_forward(const PoolPlan& p, const T* x, T* y, bool max);
template <class T>
void pool2d_backward(const PoolPlan& p, const T* g, const T* x, const T* y, T* dx, bool add, bool max);
template <class T>
void lstm_forward(const LstmPlan& p, const T* xp, const T* r, const T* bias, const T* h0, const T* c0, T* h_seq,
                  T* h_last, T* c_last, const LstmSaved<T>& s);
template <class T>
void lstm_backward(const LstmPlan& p, const T* r, const LstmSaved<T>& s, const T* g_seq, const T* g_h_last,
                   const T* g_c_last, T* dxp, bool add_xp, T* dr, bool add_r, T* db, bool add_b, T* dh0, bool add_h0,
                   T* dc0, bool add_c0);

/// The explicit instantiation declarations (EXTERN = extern) or definitions (EXTERN empty,
/// src/kernels.cpp) of the bias + activation kernels for element type T and op struct Op.
#define GRADUS_BIAS_ACTIVATION_KERNELS(EXTERN, T, Op)                                                  \
  EXTERN template void bias_activation_forward<T, Op>(const Op&, const T*, const T*, int64_t, int64_t, T*); \
  EXTERN template void bias_activation_backward<T, Op>(const Op&, const T*, const T*, const T*, const T*,   \
                                                      int64_t, int64_t, T*);

// The bias + activation kernels of every activation (a row of expr/activations.hpp) are compiled
// in the library, not in each translation unit that builds a layer.
#define GRADUS_X(name, Op, args, form)                             \
  GRADUS_BIAS_ACTIVATION_KERNELS(extern, float, ::gradus::ops::Op) \
  GRADUS_BIAS_ACTIVATION_KERNELS(extern, double, ::gradus::ops::Op)
GRADUS_ACTIVATIONS(GRADUS_X)
#undef GRADUS_X

}  // namespace gradus::backend::cpu
