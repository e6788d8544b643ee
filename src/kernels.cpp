// src/kernels.cpp — the gradus::kernels library: the CPU kernels of backend/cpu/compiled.hpp,
// compiled once for float and double from the header-only definitions, for programs built with
// GRADUS_COMPILED_KERNELS (CMake defines it for every target that links gradus::kernels).
// Compiled as part of libgradus: like every translation unit of a program that links it, this one
// sees the declarations of the code src/gradus.cpp holds (the allocator, the thread pool, Tensor's
// members, ...) and calls that one copy; an inline copy of its own would have a thread pool and a
// tensor cache of its own.
#define GRADUS_COMPILED
#include "gradus/backend/cpu/compiled.hpp"  // first: the declarations must match the definitions
#include "gradus/backend/cpu/conv.hpp"
#include "gradus/backend/cpu/gemm.hpp"
#include "gradus/backend/cpu/lstm.hpp"
#include "gradus/backend/cpu/pool.hpp"
#include "gradus/ops/elementwise_math.hpp"  // the activations' op structs (expr/activations.hpp's rows)

namespace gradus::backend::cpu {

#define GRADUS_INSTANTIATE_KERNELS(T)                                                                          \
  template void gemm<T>(const T*, bool, const T*, bool, T*, int64_t, int64_t, int64_t, bool);                  \
  template void conv2d_forward<T>(const ConvPlan&, const T*, const T*, const T*, T*, bool);                    \
  template void conv2d_backward<T>(const ConvPlan&, const T*, const T*, const T*, T*, bool, T*, bool, T*, bool, \
                                   const T*);                                                                 \
  template void pool2d_forward<T>(const PoolPlan&, const T*, T*, bool);                                        \
  template void pool2d_backward<T>(const PoolPlan&, const T*, const T*, const T*, T*, bool, bool);             \
  template void lstm_forward<T>(const LstmPlan&, const T*, const T*, const T*, const T*, const T*, T*, T*, T*, \
                                const LstmSaved<T>&);                                                         \
  template void lstm_backward<T>(const LstmPlan&, const T*, const LstmSaved<T>&, const T*, const T*, const T*, \
                                 T*, bool, T*, bool, T*, bool, T*, bool, T*, bool);

GRADUS_INSTANTIATE_KERNELS(float)
GRADUS_INSTANTIATE_KERNELS(double)

#undef GRADUS_INSTANTIATE_KERNELS

}  // namespace gradus::backend::cpu

namespace gradus::backend::cpu {

// The bias + activation kernels of every activation a layer can choose (cpu/compiled.hpp
// declares them extern).
#define GRADUS_X(name, Op, args, form)                       \
  GRADUS_BIAS_ACTIVATION_KERNELS(, float, ::gradus::ops::Op) \
  GRADUS_BIAS_ACTIVATION_KERNELS(, double, ::gradus::ops::Op)
GRADUS_ACTIVATIONS(GRADUS_X)
#undef GRADUS_X

}  // namespace gradus::backend::cpu
