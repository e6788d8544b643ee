// gradus/backend/cpu/vecmath.hpp — exp, tanh and the logistic function for float as plain,
// branch-free arithmetic, so that a loop calling them vectorises at whatever width the loop is
// compiled for (isa.hpp's copies included); libm's expf and Eigen's packet functions do not
// widen in a build without -march. For double they are the standard library's.
//
// float accuracy (measured against double over every float in [-104, 89]): exp within 2 ulp,
// tanh and logistic within 3 ulp (relative 2e-7) where the result is a normal number.
//   exp:      Cody–Waite reduction x = n·ln2 + r, |r| ≤ ln2/2, a degree-6 polynomial (Cephes'
//             expf coefficients), 2^n applied as two power-of-two factors so that subnormal
//             results and results near FLT_MAX are exact; 0 below -103.97, inf above 88.72;
//             NaN gives NaN.
//   tanh:     |x| < 0.625: x + x³·P(x²) (Cephes' tanhf); else 1 − 2 / (exp(2|x|) + 1), sign
//             restored.
//   logistic: 1 / (1 + exp(−x)) (0 below −88.7, where the true value is below 4e-39).
#pragma once
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

/// `GRADUS_SIMD` before a loop asks for it to be vectorised even where the optimiser's cost
/// model would not (GCC's -O2); `GRADUS_SIMD_REDUCTION(+, s)` for a loop that accumulates s
/// (or several: `GRADUS_SIMD_REDUCTION(+, s0, s1)`).
/// Both need OpenMP (gradus::gradus links it) and are empty without it.
#define GRADUS_PRAGMA(x) _Pragma(#x)
#if defined(_OPENMP)
#define GRADUS_SIMD GRADUS_PRAGMA(omp simd)
#define GRADUS_SIMD_REDUCTION(op, ...) GRADUS_PRAGMA(omp simd reduction(op : __VA_ARGS__))
#else
#define GRADUS_SIMD
#define GRADUS_SIMD_REDUCTION(op, ...)
#endif
/// `GRADUS_SIMD_HINTS_BEGIN` and `GRADUS_SIMD_HINTS_END` enclose the code of each header whose
/// loops carry these hints (and isa.hpp, into whose per-ISA functions they are inlined). clang
/// warns (-Wpass-failed) wherever it cannot vectorise a loop so marked, in every program that
/// instantiates it: clang 14 leaves the LSTM gates' loop and the bias loops of the activations
/// that call a scalar libm function (expm1) as they are. The hints are gradus' own concern, so
/// the warning is off inside these headers alone; GCC has no such warning.
#if defined(__clang__)
#define GRADUS_SIMD_HINTS_BEGIN GRADUS_PRAGMA(clang diagnostic push) GRADUS_PRAGMA(clang diagnostic ignored "-Wpass-failed")
#define GRADUS_SIMD_HINTS_END GRADUS_PRAGMA(clang diagnostic pop)
#else
#define GRADUS_SIMD_HINTS_BEGIN
#define GRADUS_SIMD_HINTS_END
#endif
/// `GRADUS_UNROLL` before a loop of a few iterations over an array of vector registers (a
/// kernel's accumulators) unrolls it completely, so that the array lives in registers: GCC -O2
/// does not unroll such loops by itself and keeps the array on the stack.
#if defined(__clang__)
#define GRADUS_UNROLL GRADUS_PRAGMA(unroll)
#else
#define GRADUS_UNROLL GRADUS_PRAGMA(GCC unroll 16)
#endif

/// `GRADUS_ALIGN_LOOPS` in the attributes of a function whose inner loop is hot (a GEMM kernel's)
/// starts its loops on a 64-byte boundary, the width of the decoded-instruction cache's lines
/// on current x86 cores, instead of GCC's 16: otherwise where the loop starts depends on the
/// code around it, and the AVX2 kernel's 122-byte loop, started 16 bytes into a line, spanned
/// three lines instead of two and ran 1-9% slower (docs/performance.md). It also keeps the
/// function out of line. GCC only: clang has no per-function form.
#if defined(__GNUC__) && !defined(__clang__)
#define GRADUS_ALIGN_LOOPS gnu::optimize("align-loops=64")
#else
#define GRADUS_ALIGN_LOOPS
#endif

/// Forces inlining where the function is called: the loops above them vectorise only when the
/// whole body is in the loop, and a -march=native build (whose with_isa has no flatten copy)
/// otherwise calls exp once per element (GCC judges it too large to inline).
/// `GRADUS_LAMBDA_INLINE`, the same for a lambda, after its parameter list, where with_isa reaches
/// the lambda through a second call (with_isa's lambda calls it): clang 14's `flatten` inlines the
/// calls of the per-ISA function itself but not their calls in turn, so the lambda's loops stayed
/// in the baseline copy, compiled for SSE2, under clang (GCC's flatten inlines every level).
#if defined(__GNUC__) || defined(__clang__)
#define GRADUS_VM_INLINE [[gnu::always_inline]] inline
#define GRADUS_LAMBDA_INLINE __attribute__((always_inline))
#else
#define GRADUS_VM_INLINE inline
#define GRADUS_LAMBDA_INLINE
#endif

namespace gradus::backend::cpu::vm {

// These functions contain no branch and no conditional operation, so that the loops that call
// them vectorise with SSE and AVX2 too. GCC keeps the branches of a ternary whose arms lead to
// arithmetic that may raise a floating-point exception (it specialises the code after a clamp
// like x < lo ? lo : x for the constant), and then vectorises the loop only with AVX-512's
// masks: exp ran one element at a time in the AVX2 copy of the softmax and LSTM loops. So
// nothing is clamped, the out-of-range results are computed as garbage, and integer masks made
// from comparisons of x pick the answer at the end.

/// The signed integer as wide as T, for the masks below.
template <class T>
using MaskInt = std::conditional_t<sizeof(T) == 4, int32_t, int64_t>;

/// c ? a : b, both computed, chosen through an all-ones or all-zero integer mask: the select
/// these functions and the kernels' loops use instead of a ternary (GCC -O2 keeps
/// `c ? v[f] : 0` in a loop as a branch around the load of v[f], which vectorises only with
/// AVX-512's masked loads). NaN is an ordinary value here: c decides, and c is false for NaN
/// comparisons.
template <class T>
GRADUS_VM_INLINE T select(bool c, T a, T b) {
  const MaskInt<T> m = -MaskInt<T>(c);
  return std::bit_cast<T>((std::bit_cast<MaskInt<T>>(a) & m) | (std::bit_cast<MaskInt<T>>(b) & ~m));
}

/// y > 0 ? v : 0 (a ReLU's gradient mask).
template <class T>
GRADUS_VM_INLINE T where_positive(T y, T v) { return vm::select(y > T(0), v, T(0)); }

/// std::max(x, T(0)) (x < 0 ? 0 : x, so a NaN stays), without the reference std::max returns,
/// through which GCC -O2 loads conditionally (as above).
template <class T>
GRADUS_VM_INLINE T relu(T x) { return vm::select(x < T(0), T(0), x); }

GRADUS_VM_INLINE float exp(float x) {
  constexpr float lo = -103.972084045410f, hi = 88.7228393554688f;  // below: 0, above: +inf
  // n = round(x / ln 2) by the 1.5·2^23 trick (round to nearest in the default mode); for
  // |x / ln 2| < 2^22 the low bits of `shifted` hold n as an integer
  const float shifter = 12582912.0f;
  const float shifted = x * 1.44269504088896341f + shifter;
  const float n = shifted - shifter;
  const float r = (x - n * 0.693359375f) - n * -2.12194440e-4f;  // ln 2 = 0.693359375 − 2.12194440e-4
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * r * r + r + 1.0f;
  // 2^n = 2^k1 · 2^k2, each a normal float, for n in [-150, 128]; unsigned arithmetic, so that
  // the garbage n of an x out of range is defined behaviour too (its result is replaced below)
  const int32_t k = int32_t(std::bit_cast<uint32_t>(shifted) - std::bit_cast<uint32_t>(shifter));
  const int32_t k1 = k >> 1, k2 = k - k1;
  const float s1 = std::bit_cast<float>(int32_t(uint32_t(k1 + 127) << 23));
  const float s2 = std::bit_cast<float>(int32_t(uint32_t(k2 + 127) << 23));
  const float v = y * s1 * s2;
  const int32_t below = -int32_t(x < lo), above = -int32_t(x > hi);  // all ones or zero; NaN: neither
  return std::bit_cast<float>((std::bit_cast<int32_t>(v) & ~(below | above)) | (above & 0x7f800000));
}

GRADUS_VM_INLINE float tanh(float x) {
  const int32_t sign = std::bit_cast<int32_t>(x) & int32_t(0x80000000u);
  const float a = std::bit_cast<float>(std::bit_cast<int32_t>(x) ^ sign);  // |x|
  const float z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const float small = x + x * z * p;
  const float big = 1.0f - 2.0f / (vm::exp(2.0f * a) + 1.0f);  // tanh |x|
  // small has x's sign already, except for x = -0 (tanh(-0) = -0): both take it from x
  return std::bit_cast<float>(std::bit_cast<int32_t>(vm::select(a < 0.625f, small, big)) | sign);
}

GRADUS_VM_INLINE float logistic(float x) { return 1.0f / (1.0f + vm::exp(-x)); }

inline double exp(double x) { return std::exp(x); }
inline double tanh(double x) { return std::tanh(x); }
inline double logistic(double x) { return 1.0 / (1.0 + std::exp(-x)); }

/// The largest of in[0], ..., in[n - 1] that is not NaN (-inf when there is none), whatever the
/// compiler. A row of 16 or more goes through 16 running maxima, each updated from its own
/// elements, which the compilers vectorise as independent lanes. As a max reduction marked `omp
/// simd` it ran with one vector register under GCC (each step waiting for the one before: 3.4x
/// slower on rows of 1,000 floats in the SSE copy, 2x in the AVX-512 copy), one element at a time
/// under clang, and what it made of a NaN differed between the two.
template <class T>
inline T max_of(const T* in, int64_t n) {
  constexpr int64_t kLanes = 16;
  T m = -std::numeric_limits<T>::infinity();
  int64_t k = 0;
  if (n >= kLanes) {
    T lane[kLanes];
    for (int64_t j = 0; j < kLanes; ++j) lane[j] = m;
    for (; k + kLanes <= n; k += kLanes)
      for (int64_t j = 0; j < kLanes; ++j) lane[j] = in[k + j] > lane[j] ? in[k + j] : lane[j];
    for (int64_t j = 0; j < kLanes; ++j) m = lane[j] > m ? lane[j] : m;
  }
  for (; k < n; ++k) m = in[k] > m ? in[k] : m;
  return m;
}

}  // namespace gradus::backend::cpu::vm
