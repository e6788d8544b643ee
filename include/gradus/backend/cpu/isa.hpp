// gradus/backend/cpu/isa.hpp — running a loop compiled for the widest vector ISA the CPU has.
//
// A build without -march targets the x86-64 baseline (SSE2), and so do the loops it compiles.
// `with_isa(f)` runs `f` compiled twice more, for AVX2 + FMA and for AVX-512: the copies are
// function templates with a `target` attribute that inline all of `f` (`flatten`), so GCC and
// Clang vectorise its loops with the wider registers, and the CPU picks the copy on first use
// (`__builtin_cpu_supports`), as BLAS libraries do. Eigen's explicit SIMD code inside `f` keeps
// the packet size of the build's own ISA (Eigen selects it with the preprocessor), but loops
// Eigen leaves scalar — `select`, comparisons, the kernels' own plain loops — widen.
//
// Where the build already targets AVX-512 (`-march=native` on such a machine) there is nothing
// to gain, and `with_isa(f)` is `f()`. Wrap only leaf loops — a kernel's inner pass, not a call
// into the GEMM or the thread pool — since every wrapped call is compiled three times. For the
// same reason the per-expression loops of elementwise.hpp are not wrapped: they are instantiated
// once per expression type, and three copies of each doubled the compile time of a training
// program (examples/mlp.cpp: 54 s instead of 27 s), for a gain the fixed kernels already give.
//
// GRADUS_ISA=base|avx2|avx512 in the environment caps the choice (for benchmarks and tests of
// each path); the GEMM's micro-kernel has its own switch, GRADUS_GEMM_KERNEL.
//
// GRADUS_AVX512_KERNELS says whether the AVX-512 copies of these loops, and the GEMM's AVX512-BF16
// and AMX kernels (gd::autocast(gd::bf16)), are compiled at all. They are in libgradus, in every
// program that links it (GRADUS_COMPILED) and in every build that targets AVX-512; a header-only
// program built without such a -march compiles the baseline and AVX2 copies of the loops only,
// and converts bfloat16 products to float, unless it defines GRADUS_AVX512_KERNELS=1 (for the
// whole program: every translation unit the same). On an AVX-512 CPU it then runs the loops'
// AVX2 copies, which the training steps measured as fast (docs/performance.md, "AVX-512 where the
// program asks for it"). The float GEMM's AVX-512 micro-kernels are not behind the macro: a
// program on an AVX-512 CPU runs them in any mode, since with the AVX2 ones the training steps
// took 1.7 times as long on a 5th-generation Xeon (full-width AVX-512 units).
#pragma once
#include <cstdlib>
#include <string_view>

#include "gradus/backend/cpu/vecmath.hpp"  // GRADUS_SIMD_HINTS_BEGIN / _END
#include "gradus/core/compiled.hpp"         // GRADUS_COMPILED_KERNELS

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__)) && \
    !defined(__CUDACC__) && !defined(__AVX512F__)
#define GRADUS_ISA_DISPATCH 1
#endif

#if defined(GRADUS_COMPILED_KERNELS) || defined(__AVX512F__)  // GRADUS_COMPILED implies the former
#undef GRADUS_AVX512_KERNELS  // libgradus has them: every program that links it must see them
#define GRADUS_AVX512_KERNELS 1
#elif !defined(GRADUS_AVX512_KERNELS)
#define GRADUS_AVX512_KERNELS 0
#endif

GRADUS_SIMD_HINTS_BEGIN
namespace gradus::backend::cpu {

/// The instruction sets `with_isa` compiles a loop for.
enum class Isa { base, avx2, avx512 };

inline constexpr std::string_view isa_name(Isa i) {
  return i == Isa::avx512 ? "avx512" : i == Isa::avx2 ? "avx2" : "base";
}

/// Whether this CPU (and its operating system) runs code compiled for `i`.
inline bool isa_supported(Isa i) {
#if defined(__x86_64__) || defined(__i386__)
  if (i == Isa::avx2) return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (i == Isa::avx512)
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") && isa_supported(Isa::avx2);
#endif
  return i == Isa::base;
}

/// The copy `with_isa` runs, chosen on first use: the widest the CPU supports and the program
/// has (AVX2 where GRADUS_AVX512_KERNELS is 0), capped by GRADUS_ISA when it names one.
inline Isa cpu_isa() {
  static const Isa chosen = [] {
    Isa cap = GRADUS_AVX512_KERNELS ? Isa::avx512 : Isa::avx2;
    if (const char* env = std::getenv("GRADUS_ISA"))
      for (Isa i : {Isa::base, Isa::avx2, Isa::avx512})
        if (isa_name(i) == env && i < cap) cap = i;
    for (Isa i : {Isa::avx512, Isa::avx2})
      if (i <= cap && isa_supported(i)) return i;
    return Isa::base;
  }();
  return chosen;
}

#if defined(GRADUS_ISA_DISPATCH)
namespace isa_detail {
template <class F>
[[gnu::target("avx2,fma"), gnu::flatten]] void run_avx2(F& f) {
  f();
}
#if GRADUS_AVX512_KERNELS
template <class F>
[[gnu::target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma"), gnu::flatten]] void run_avx512(F& f) {
  f();
}
#endif
}  // namespace isa_detail
#endif

/// Runs f() compiled for cpu_isa() (see the top of this file).
template <class F>
inline void with_isa(F&& f) {
#if defined(GRADUS_ISA_DISPATCH)
  switch (cpu_isa()) {
#if GRADUS_AVX512_KERNELS
    case Isa::avx512: return isa_detail::run_avx512(f);
#endif
#if !defined(__AVX2__)
    case Isa::avx2: return isa_detail::run_avx2(f);
#endif
    default: break;
  }
#endif
  f();
}

}  // namespace gradus::backend::cpu
GRADUS_SIMD_HINTS_END
