// gradus/backend/cpu/gemm.hpp — the CPU GEMM: c (m x n) = or += a (m x k) * b (k x n).
//
// Float products run on a blocked kernel of gradus' own, following the GotoBLAS/BLIS layout:
// B is packed in k-blocks into panels of NR columns (transposed in registers when B is stored
// transposed), A into panels of MR rows, and an MR x NR block of C lives in vector registers
// over a whole k-block. Two micro-kernels exist, each compiled for its instruction set with a
// function-level target attribute, so a build without -march still has both:
//   avx512  12 x 32, 24 zmm accumulators (AVX-512F); a last panel of at most 24 columns on
//           12 ymm, 12 zmm, or 12 of each (narrow_kernel)
//   avx2     6 x 16, 12 ymm accumulators (AVX2 + FMA); a last panel of at most 8 columns on 12
//           ymm sums over alternate depths (narrow_kernel)
// A product with few columns (a layer's 10 logits) runs as its transpose, its rows in the lanes,
// into a transposed copy of C written with whole vectors; on AVX-512 one of at most 10 columns
// whose A has contiguous rows runs as dot products instead (no operand packed but Bᵀ's 10 rows).
// A single panel of A (m <= MR) reads B's panels where they are, when B's rows are contiguous:
// packing them would copy each element to use it once.
// gemm() uses the widest one the CPU supports, chosen once per process (GRADUS_GEMM_KERNEL=
// avx512|avx2|loops overrides the choice when the CPU supports it). Products of a few rows of a
// row-major A read B in place on the kernels of gemm_inplace.hpp (thin_gemm) where that was
// measured faster (gemm_native). The other thin float products (m < 6, or n < 12 with m < 16),
// and every float product on an x86 CPU without AVX2, run as plain loops compiled for the widest
// ISA (loop_gemm) in a build without -march (whose Eigen has only SSE packets), and on Eigen's
// GEMM in a build for AVX2 or wider; doubles, and floats on other CPUs and compilers, go to
// Eigen. Eigen's float GEMM is thus not compiled into an x86 program built without -march that
// does not ask for it by name (gemm(..., GemmKernel::eigen)): it cost 2 s of compile time.
// Under gd::autocast(gd::bf16) float products round their inputs to bfloat16 and sum in float:
// on AMX tiles where the CPU has them (serial_amx), else on an AVX512-BF16 variant of the 12 x 32
// kernel (Bf16Dot) where that is the faster (AMD's cores), else on the float kernels over rounded
// copies (bf16_kernel()).
// Large products split their rows (or columns) into tasks for gradus' thread pool
// (thread_pool.hpp), not OpenMP: the operand every task reads is packed once, by all the threads
// together, each task packs its own rows of A (columns of B), and a thread that loses its core
// only runs fewer tasks.
// Measured on a 2-vCPU AMD EPYC (Zen 5), one thread, on 1024^3 and the MLP's and LeNet CNN's
// products (docs/performance.md; benchmarks/gemm-vs-openblas): 1.15-1.98x Debian's OpenBLAS
// 0.3.21 (its Haswell kernels on this CPU), 0.66-1.31x OpenBLAS' AVX-512 kernels, the same with
// and without -march=native. On an AVX2-only Zen 3 (benchmarks/gemm_interleaved.cpp, docs/performance.md "On
// an AVX2 machine"): 0.84-1.48x OpenBLAS 0.3.21's Zen kernels, level on the large products within
// that machine's noise.
#pragma once
#include "gradus/core/eigen.hpp"
#include <algorithm>
#include <bit>
#include <cstdlib>
#include <string_view>
#include <type_traits>
#include <utility>
#if defined(_OPENMP)
#include <omp.h>
#endif
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif
#define GRADUS_SGEMM_X86 1
#endif

#include "gradus/backend/cpu/gemm_inplace.hpp"
#include "gradus/backend/cpu/isa.hpp"
#include "gradus/backend/cpu/parallel.hpp"
#include "gradus/backend/cpu/thread_pool.hpp"
#include "gradus/backend/cpu/vecmath.hpp"
#include "gradus/core/bfloat16.hpp"
#include "gradus/core/error.hpp"
#include "gradus/core/precision.hpp"
#include "gradus/core/tensor.hpp"

GRADUS_SIMD_HINTS_BEGIN
namespace gradus::backend::cpu {

template <class T>
using RowMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using MatMap = Eigen::Map<RowMat<T>, Eigen::Aligned16>;
template <class T>
using CMatMap = Eigen::Map<const RowMat<T>>;

/// Below this many multiply-adds a GEMM runs on the calling thread: waking a second thread
/// costs more than it saves. At 2^19 the seed model's 100x784x10 products split: its step at two
/// threads drops from 53 to 40 us on an idle 2-vCPU Zen 5 and rises from 52 to 58 us when the
/// other core is busy (the caller then runs the tasks the sleeping thread does not take); the
/// LSTM and CNN steps do not move.
inline constexpr int64_t kGemmParallelWork = int64_t(1) << 19;
/// Tasks per thread of a parallel float GEMM, each a block of rows (or columns) of C that packs
/// its own panels: more balance a thread that loses its core, fewer repack less.
inline constexpr int64_t kGemmTasksPerThread = 4;

/// The code that runs a float GEMM: Eigen's, loop_gemm below (x86), or a blocked kernel (x86).
enum class GemmKernel { eigen, loops, avx2, avx512 };

inline constexpr std::string_view gemm_kernel_name(GemmKernel k) {
  return k == GemmKernel::avx512 ? "avx512" : k == GemmKernel::avx2 ? "avx2" : k == GemmKernel::loops ? "loops" : "eigen";
}

/// Whether this build and this CPU can run kernel `k` (eigen: always; loops: on x86).
inline bool gemm_kernel_supported(GemmKernel k) {
#if defined(GRADUS_SGEMM_X86)
  if (k == GemmKernel::avx2) return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (k == GemmKernel::avx512) return __builtin_cpu_supports("avx512f");
  if (k == GemmKernel::loops) return true;
#endif
  return k == GemmKernel::eigen;
}

/// The kernel float GEMMs use, chosen on first use: GRADUS_GEMM_KERNEL (avx512, avx2 or loops)
/// when it names one the CPU supports, else the widest the CPU supports; on x86 without AVX2
/// loops, elsewhere eigen.
inline GemmKernel gemm_kernel() {
  static const GemmKernel chosen = [] {
    if (const char* env = std::getenv("GRADUS_GEMM_KERNEL"))
      for (GemmKernel k : {GemmKernel::avx512, GemmKernel::avx2, GemmKernel::loops})
        if (gemm_kernel_name(k) == env && gemm_kernel_supported(k)) return k;
    for (GemmKernel k : {GemmKernel::avx512, GemmKernel::avx2, GemmKernel::loops})
      if (gemm_kernel_supported(k)) return k;
    return GemmKernel::eigen;
  }();
  return chosen;
}

#if defined(GRADUS_SGEMM_X86)
namespace sgemm {

/// Depth of a k-block, rows of A per packed block (it stays in L2), columns of B per packed
/// block (it stays in L3), and columns of B whose panels one panel of A meets in turn (a
/// kKC x kNL2 stretch of packed B, 256 KiB, stays in L2; see sweep_block).
inline constexpr int64_t kKC = 256, kMC = 96, kNC = 2048, kNL2 = 256;

/// Keeps vectors v and w in registers from here on. The micro-kernels load each depth's vectors of B
/// once and multiply them by R rows; g++ 12 tuning for Zen 4 (-march=native there) instead folded
/// those loads into every multiply-add of kernels of up to 4 rows, 8 loads of 64 bytes a step
/// instead of 2: more than the core's load ports feed, and LeNet's second layer (direct, on 4-row
/// kernels) took 10.3 ms instead of 7.4. An empty asm that may change them rules the folding out.
#define GRADUS_IN_REGISTERS(v, w) asm("" : "+v"(v), "+v"(w))

/// The mask of a 16-lane vector's first `count` lanes (none for count <= 0, all for count >= 16):
/// a row's tail in masked loads and stores.
inline constexpr __mmask16 first_lanes(int64_t count) {
  return count >= 16 ? __mmask16(0xFFFF) : count <= 0 ? __mmask16(0) : __mmask16((1u << count) - 1);
}

/// The depth of the k-blocks of a product of depth k: at most kKC, the blocks as even as
/// multiples of 8 allow (k = 800 runs as 4 x 200, not 3 x 256 + 32, whose last block would pay
/// a whole block's packing and C traffic for an eighth of its work).
inline int64_t k_block(int64_t k) {
  const int64_t blocks = std::max<int64_t>(1, (k + kKC - 1) / kKC);
  return std::min(kKC, ((k + blocks - 1) / blocks + 7) / 8 * 8);
}

/// o[p] = {r[0][p], ..., r[7][p]}.
[[gnu::target("avx2,fma")]] inline void transpose8(const __m256 (&r)[8], __m256 (&o)[8]) {
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  o[0] = _mm256_permute2f128_ps(u0, u4, 0x20), o[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
  o[2] = _mm256_permute2f128_ps(u2, u6, 0x20), o[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
  o[4] = _mm256_permute2f128_ps(u0, u4, 0x31), o[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
  o[6] = _mm256_permute2f128_ps(u2, u6, 0x31), o[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

/// Stores the first n < 8 floats of v at dst, 4, 2 and 1 at a time. (AMD's cores run
/// _mm256_maskstore_ps as microcode, at a tenth of a plain store's rate: with it, packing A for
/// the AVX2 kernel's 6-row panels took a third of an 81x800x64 product on a Zen 3.)
[[gnu::target("avx2,fma")]] inline void store_first(float* dst, __m256 v, int64_t n) {
  __m128 part = _mm256_castps256_ps128(v);
  if (n >= 4) _mm_storeu_ps(dst, part), part = _mm256_extractf128_ps(v, 1), dst += 4, n -= 4;
  if (n >= 2) _mm_storel_pi(reinterpret_cast<__m64*>(dst), part), part = _mm_movehl_ps(part, part), dst += 2, n -= 2;
  if (n >= 1) _mm_store_ss(dst, part);
}

/// Packs B(p, j) = b[p * rb + j * cb] (cb == 1 or rb == 1), p < kc, j < nc, into panels of NR
/// columns, zero-padded: bp[(j / NR) * kc * NR + p * NR + j % NR]. Both kernels share it, so it
/// needs only AVX2.
template <int64_t NR>
[[gnu::target("avx2,fma")]] inline void pack_b(const float* b, int64_t rb, int64_t cb, int64_t kc, int64_t nc,
                                                float* bp) {
  if (cb == 1) {
    // 8 rows of B at a time, each read from start to end, panel after panel (panel by panel, B's
    // rows were read 64 bytes at a time, kc rows apart: pack_b took 7% of 128x784x500 with the
    // AVX2 kernel; row by row, the panels' rows written at once, 16 KiB apart, fought over L1 sets)
    constexpr int64_t kRows = 8;
    const int64_t whole = nc / NR, w = nc % NR;
    for (int64_t p0 = 0; p0 < kc; p0 += kRows) {
      const int64_t rows = std::min(kRows, kc - p0);
      for (int64_t q = 0; q < whole; ++q) {
        const float* src = b + p0 * rb + q * NR;
        float* dst = bp + q * kc * NR + p0 * NR;
        for (int64_t p = 0; p < rows; ++p, src += rb, dst += NR)
          GRADUS_UNROLL for (int64_t j = 0; j < NR; j += 8) _mm256_store_ps(dst + j, _mm256_loadu_ps(src + j));
      }
    }
    if (w > 0) {  // the last panel: its w columns, then zeros (a product of 100 columns pads 28 of 128)
      __m256i mask[NR / 8];  // the lanes of each vector of the panel's row that are B's columns
      GRADUS_UNROLL for (int64_t v = 0; v < NR / 8; ++v) mask[v] = inplace::first_lanes8(w - 8 * v);
      const float* src = b + whole * NR;
      float* dst = bp + whole * kc * NR;
      for (int64_t p = 0; p < kc; ++p, src += rb, dst += NR)
        GRADUS_UNROLL for (int64_t v = 0; v < NR / 8; ++v)  // masked lanes are neither read nor faulted on
          _mm256_store_ps(dst + 8 * v, _mm256_maskload_ps(src + 8 * v, mask[v]));
    }
    return;
  }
  for (int64_t j0 = 0; j0 < nc; j0 += NR, bp += kc * NR) {
    const int64_t w = std::min(NR, nc - j0);
    // columns of B contiguous along k: 8 x 8 blocks transposed in registers, the columns past w
    // of the last panel as zero rows
    int64_t p0 = 0;
    for (; p0 + 8 <= kc; p0 += 8)
      for (int64_t jj = 0; jj < NR; jj += 8) {
        const int64_t cols = std::min<int64_t>(8, w - jj);
        __m256 r[8], o[8];
        if (cols <= 0) {
          GRADUS_UNROLL for (int q = 0; q < 8; ++q) _mm256_store_ps(bp + (p0 + q) * NR + jj, _mm256_setzero_ps());
          continue;
        }
        GRADUS_UNROLL for (int q = 0; q < 8; ++q)
          r[q] = q < cols ? _mm256_loadu_ps(b + (j0 + jj + q) * cb + p0) : _mm256_setzero_ps();
        transpose8(r, o);
        GRADUS_UNROLL for (int q = 0; q < 8; ++q) _mm256_store_ps(bp + (p0 + q) * NR + jj, o[q]);
      }
    for (int64_t j = 0; j < NR; ++j) {
      const float* src = b + (j0 + j) * cb;
      for (int64_t p = p0; p < kc; ++p) bp[p * NR + j] = j < w ? src[p] : 0.f;
    }
  }
}

/// dst[p * ld + i] = src[p * step + i], i < rows, p < kc: `rows` contiguous floats a step, in
/// vectors (`rows` a std::integral_constant where it is known, to unroll them).
template <class Rows>
[[gnu::target("avx2,fma"), gnu::always_inline]] inline void copy_steps(const float* src, int64_t step, int64_t kc,
                                                                        Rows rows, float* dst, int64_t ld) {
  for (int64_t p = 0; p < kc; ++p, src += step, dst += ld) {
    int64_t i = 0;
    for (; i + 8 <= rows; i += 8) _mm256_storeu_ps(dst + i, _mm256_loadu_ps(src + i));
    if (i + 4 <= rows) _mm_storeu_ps(dst + i, _mm_loadu_ps(src + i)), i += 4;
    for (; i < rows; ++i) dst[i] = src[i];
  }
}

/// The rows of the kernel that tile() runs a packed panel of `rows` (<= MR) rows on: the fewest
/// of 1, 2, 4, 8, 10 and MR that cover them (8 and 10 where MR is 12).
template <int64_t MR>
constexpr int64_t kernel_rows(int64_t rows) {
  if (rows <= 2) return rows <= 1 ? 1 : 2;
  if (rows <= 4) return 4;
  if (MR > 8 && rows <= 8) return 8;
  return MR > 8 && rows == 10 ? 10 : MR;
}

/// Packs A(i, p) = a[i * ra + p * ca] (ca == 1 or ra == 1), i < mc, p < kc, into panels of MR
/// rows: ap[(i / MR) * kc * MR + p * MR + i % MR]. In a last, partial panel the rows past mc that
/// its kernel reads (kernel_rows) are zero: tile() runs it in one pass over B.
/// Row-major A (ca == 1) is transposed 8 rows by 8 depths at a time in registers, as pack_b
/// does for a transposed B; the leftover depths element by element.
template <int64_t MR>
[[gnu::target("avx2,fma")]] inline void pack_a(const float* a, int64_t ra, int64_t ca, int64_t mc, int64_t kc,
                                                float* ap) {
  for (int64_t i0 = 0; i0 < mc; i0 += MR, ap += kc * MR) {
    const int64_t h = std::min(MR, mc - i0);
    if (const int64_t read = kernel_rows<MR>(h); read > h)
      for (int64_t p = 0; p < kc; ++p)
        for (int64_t i = h; i < read; ++i) ap[p * MR + i] = 0.f;
    if (ca == 1) {
      int64_t p0 = 0;
      for (; p0 + 8 <= kc; p0 += 8)
        for (int64_t g0 = 0; g0 < h; g0 += 8) {
          const int64_t rows = std::min<int64_t>(8, h - g0);
          if (rows == 4) {  // the last 4 rows of a 12-row panel: two 4 x 4 transposes, one per lane
            __m256 r[4];
            GRADUS_UNROLL for (int q = 0; q < 4; ++q) r[q] = _mm256_loadu_ps(a + (i0 + g0 + q) * ra + p0);
            const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
            const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
            const __m256 u[4] = {_mm256_shuffle_ps(t0, t2, 0x44), _mm256_shuffle_ps(t0, t2, 0xEE),
                                 _mm256_shuffle_ps(t1, t3, 0x44), _mm256_shuffle_ps(t1, t3, 0xEE)};
            GRADUS_UNROLL for (int q = 0; q < 4; ++q) {  // depth p0 + q in the low lane, p0 + 4 + q high
              _mm_storeu_ps(ap + (p0 + q) * MR + g0, _mm256_castps256_ps128(u[q]));
              _mm_storeu_ps(ap + (p0 + 4 + q) * MR + g0, _mm256_extractf128_ps(u[q], 1));
            }
            continue;
          }
          __m256 r[8], o[8];
          GRADUS_UNROLL for (int q = 0; q < 8; ++q)
            r[q] = q < rows ? _mm256_loadu_ps(a + (i0 + g0 + q) * ra + p0) : _mm256_setzero_ps();
          transpose8(r, o);
          if (rows == 8) {
            GRADUS_UNROLL for (int q = 0; q < 8; ++q) _mm256_storeu_ps(ap + (p0 + q) * MR + g0, o[q]);
          } else {
            GRADUS_UNROLL for (int q = 0; q < 8; ++q) store_first(ap + (p0 + q) * MR + g0, o[q], rows);
          }
        }
      for (int64_t i = 0; i < h; ++i) {
        const float* src = a + (i0 + i) * ra;
        for (int64_t p = p0; p < kc; ++p) ap[p * MR + i] = src[p];
      }
      continue;
    }
    // A stored transposed (h contiguous floats a step), copied in vectors: written element by
    // element, the loop stayed scalar (the compiler cannot rule out that ap overlaps a) and took
    // 70% of the time of packing a convolution's patchesᵀ for its filter gradient
    if (h == MR)
      copy_steps(a + i0 * ra, ca, kc, std::integral_constant<int64_t, MR>{}, ap, MR);  // unrolled
    else
      copy_steps(a + i0 * ra, ca, kc, h, ap, MR);
  }
}

/// The AVX2 + FMA micro-kernel: C[R x n] = or (`load`) += A · B over kc steps, n <= 16, with
/// C(i, j) = c[i * ldc + j], A(i, p) = a[p * as + i] and B one packed panel [kc][16].
struct Avx2 {
  static constexpr int64_t kMR = 6, kNR = 16;

  /// C[rows x n] = or (`load`) += A · B over kc depths, B's depths bs apart. A(i, p) = a[p * as + i]
  /// (a packed panel, or a transposed A read in place), or with RowsA, a[i * as + p] (A's rows
  /// contiguous, read in place).
  template <int R, bool RowsA = false>
  [[gnu::target("avx2,fma"), GRADUS_ALIGN_LOOPS]] static void kernel(int64_t kc, const float* a, int64_t as,
                                                                      const float* b, int64_t bs, float* c,
                                                                      int64_t ldc, bool load, int64_t n,
                                                                      int64_t rows = R) {
    const int64_t ps = RowsA ? 1 : as, rs = RowsA ? as : 1;  // A's steps along depth and rows
    // The 1- and 2-row kernels of a partial panel keep S sums per accumulator, over alternate
    // depths, so that at least 8 independent FMA chains hide the FMA's latency: with one, the
    // 2 chains of a 1-row kernel run at a quarter of the FMA units' rate.
    constexpr int S = R == 1 ? 4 : R == 2 ? 2 : 1;
    __m256 acc[S][R][2];
    GRADUS_UNROLL for (int s = 0; s < S; ++s)
      GRADUS_UNROLL for (int i = 0; i < R; ++i) acc[s][i][0] = acc[s][i][1] = _mm256_setzero_ps();
    int64_t p = 0;
    for (; p + S <= kc; p += S, a += S * ps, b += S * bs)
      GRADUS_UNROLL for (int s = 0; s < S; ++s) {
        __m256 b0 = _mm256_loadu_ps(b + s * bs), b1 = _mm256_loadu_ps(b + s * bs + 8);
        GRADUS_IN_REGISTERS(b0, b1);
        GRADUS_UNROLL for (int i = 0; i < R; ++i) {
          const __m256 x = _mm256_broadcast_ss(a + s * ps + i * rs);
          acc[s][i][0] = _mm256_fmadd_ps(x, b0, acc[s][i][0]);
          acc[s][i][1] = _mm256_fmadd_ps(x, b1, acc[s][i][1]);
        }
      }
    if constexpr (S > 1) {
      for (; p < kc; ++p, a += ps, b += bs) {
        __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
        GRADUS_IN_REGISTERS(b0, b1);
        GRADUS_UNROLL for (int i = 0; i < R; ++i) {
          const __m256 x = _mm256_broadcast_ss(a + i * rs);
          acc[0][i][0] = _mm256_fmadd_ps(x, b0, acc[0][i][0]);
          acc[0][i][1] = _mm256_fmadd_ps(x, b1, acc[0][i][1]);
        }
      }
      GRADUS_UNROLL for (int s = 1; s < S; ++s)
        GRADUS_UNROLL for (int i = 0; i < R; ++i) {
          acc[0][i][0] = _mm256_add_ps(acc[0][i][0], acc[s][i][0]);
          acc[0][i][1] = _mm256_add_ps(acc[0][i][1], acc[s][i][1]);
        }
    }
    store<R>(acc[0], c, ldc, load, n, rows);
  }

  /// Columns up to which a panel runs on narrow_kernel.
  static constexpr int64_t kNarrowCols = 8;

  /// kernel<R, RowsA> for a last panel of n <= W = 8 columns: a row's sums take one register
  /// instead of two, over even and odd depths apart (2R chains hide the FMA's latency, as the 1-
  /// and 2-row kernels' sums do), so the panel costs half a whole one: the 8 columns left of a
  /// product of 200 (a word-LM's input gradients), the 4 of 500 (an MLP's layer).
  template <int R, int W, bool RowsA = false>
  [[gnu::target("avx2,fma"), GRADUS_ALIGN_LOOPS]] static void narrow_kernel(int64_t kc, const float* a, int64_t as,
                                                                             const float* b, int64_t bs, float* c,
                                                                             int64_t ldc, bool load, int64_t n,
                                                                             int64_t rows = R) {
    static_assert(W == 8, "Avx2::narrow_kernel: 8 columns");
    const int64_t ps = RowsA ? 1 : as, rs = RowsA ? as : 1;  // A's steps along depth and rows
    __m256 acc[2][R];
    GRADUS_UNROLL for (int i = 0; i < R; ++i) acc[0][i] = acc[1][i] = _mm256_setzero_ps();
    int64_t p = 0;
    for (; p + 2 <= kc; p += 2, a += 2 * ps, b += 2 * bs) {
      __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + bs);
      GRADUS_IN_REGISTERS(b0, b1);
      GRADUS_UNROLL for (int i = 0; i < R; ++i) {
        acc[0][i] = _mm256_fmadd_ps(_mm256_broadcast_ss(a + i * rs), b0, acc[0][i]);
        acc[1][i] = _mm256_fmadd_ps(_mm256_broadcast_ss(a + ps + i * rs), b1, acc[1][i]);
      }
    }
    if (p < kc) {
      const __m256 b0 = _mm256_loadu_ps(b);
      GRADUS_UNROLL for (int i = 0; i < R; ++i)
        acc[0][i] = _mm256_fmadd_ps(_mm256_broadcast_ss(a + i * rs), b0, acc[0][i]);
    }
    __m256 out[R][2];
    GRADUS_UNROLL for (int i = 0; i < R; ++i) {
      out[i][0] = _mm256_add_ps(acc[0][i], acc[1][i]);
      out[i][1] = _mm256_setzero_ps();
    }
    store<R>(out, c, ldc, load, n, rows);
  }

  /// C[rows x n] = or (`load`) += the accumulators acc[i] = row i's 16 columns, rows <= R.
  template <int R>
  [[gnu::target("avx2,fma")]] static void store(__m256 (&acc)[R][2], float* c, int64_t ldc, bool load, int64_t n,
                                                 int64_t rows = R) {
    if (n == kNR) {
      GRADUS_UNROLL for (int i = 0; i < R; ++i) {
        if (i >= rows) break;
        float* ci = c + i * ldc;
        if (load) {
          acc[i][0] = _mm256_add_ps(acc[i][0], _mm256_loadu_ps(ci));
          acc[i][1] = _mm256_add_ps(acc[i][1], _mm256_loadu_ps(ci + 8));
        }
        _mm256_storeu_ps(ci, acc[i][0]);
        _mm256_storeu_ps(ci + 8, acc[i][1]);
      }
      return;
    }
    alignas(32) float tmp[kNR];
    GRADUS_UNROLL for (int i = 0; i < R; ++i) {
      if (i >= rows) break;
      float* ci = c + i * ldc;
      _mm256_store_ps(tmp, acc[i][0]);
      _mm256_store_ps(tmp + 8, acc[i][1]);
      for (int64_t j = 0; j < n; ++j) ci[j] = load ? ci[j] + tmp[j] : tmp[j];
    }
  }

  /// A direct convolution's tile (conv.hpp): C[R x n] = A · B over kc taps, with A(i, p) =
  /// a[off[p] + i * rs] read from the input image itself and B one packed panel [kc][16].
  template <int R>
  [[gnu::target("avx2,fma")]] static void conv_kernel(int64_t kc, const float* a, const int64_t* off, int64_t rs,
                                                       const float* b, float* c, int64_t ldc, int64_t n) {
    __m256 acc[R][2];
    GRADUS_UNROLL for (int i = 0; i < R; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
    for (int64_t p = 0; p < kc; ++p, b += kNR) {
      const float* ap = a + off[p];
      __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8);
      GRADUS_IN_REGISTERS(b0, b1);
      GRADUS_UNROLL for (int i = 0; i < R; ++i) {
        const __m256 x = _mm256_broadcast_ss(ap + i * rs);
        acc[i][0] = _mm256_fmadd_ps(x, b0, acc[i][0]);
        acc[i][1] = _mm256_fmadd_ps(x, b1, acc[i][1]);
      }
    }
    store<R>(acc, c, ldc, false, n);
  }

  /// A direct convolution's filter gradient for R taps: C[R x n] = or (`load`) += Σ_r A(i, r) ·
  /// G(r, ·) over `rows` output rows, with A(i, r) = a[base[r] + off[i]] read from the input
  /// image and G(r, j) = g[r * ldg + j], j < n <= 16.
  template <int R>
  [[gnu::target("avx2,fma")]] static void conv_filter_kernel(int64_t rows, const float* a, const int64_t* base,
                                                              const int64_t* off, const float* g, int64_t ldg,
                                                              float* c, int64_t ldc, bool load, int64_t n) {
    __m256 acc[R][2];
    GRADUS_UNROLL for (int i = 0; i < R; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
    int64_t o[R];
    GRADUS_UNROLL for (int i = 0; i < R; ++i) o[i] = off[i];
    alignas(32) float pad[kNR] = {};
    for (int64_t r = 0; r < rows; ++r, g += ldg) {
      const float* gr = g;
      if (n < kNR) std::copy_n(g, n, pad), gr = pad;
      const __m256 g0 = _mm256_loadu_ps(gr), g1 = _mm256_loadu_ps(gr + 8);
      const float* ar = a + base[r];
      GRADUS_UNROLL for (int i = 0; i < R; ++i) {
        const __m256 x = _mm256_broadcast_ss(ar + o[i]);
        acc[i][0] = _mm256_fmadd_ps(x, g0, acc[i][0]);
        acc[i][1] = _mm256_fmadd_ps(x, g1, acc[i][1]);
      }
    }
    store<R>(acc, c, ldc, load, n);
  }
};

/// The AVX-512F micro-kernel: as Avx2's, with R <= 12 rows of two zmm registers and n <= 32
/// (partial panels of a row-major C written through masks).
struct Avx512 {
  static constexpr int64_t kMR = 12, kNR = 32;

  /// C[rows x n] = or (`load`) += A · B over kc depths, B's depths bs apart. A(i, p) = a[p * as + i]
  /// (a packed panel, or a transposed A read in place), or with RowsA, a[i * as + p] (A's rows
  /// contiguous, read in place).
  template <int R, bool RowsA = false>
  [[gnu::target("avx512f,avx2,fma"), GRADUS_ALIGN_LOOPS]] static void kernel(int64_t kc, const float* a, int64_t as,
                                                                              const float* b, int64_t bs, float* c,
                                                                              int64_t ldc, bool load, int64_t n,
                                                                              int64_t rows = R) {
    __m512 acc[R][2];
    GRADUS_UNROLL for (int i = 0; i < R; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
    for (int64_t p = 0; p < kc; ++p, a += RowsA ? 1 : as, b += bs) {
      __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16);
      GRADUS_IN_REGISTERS(b0, b1);
      GRADUS_UNROLL for (int i = 0; i < R; ++i) {
        const __m512 x = _mm512_set1_ps(RowsA ? a[i * as] : a[i]);
        acc[i][0] = _mm512_fmadd_ps(x, b0, acc[i][0]);
        acc[i][1] = _mm512_fmadd_ps(x, b1, acc[i][1]);
      }
    }
    store<R>(acc, c, ldc, load, n, rows);
  }

  /// Columns up to which a panel runs on narrow_kernel.
  static constexpr int64_t kNarrowCols = 24;

  /// kernel<R, RowsA> for a last panel of n <= W columns, W = 8, 16 or 24: a row's sums take one
  /// ymm register (W = 8), one zmm (16), or one of each (24), instead of two zmm. Zen 4 runs a
  /// 512-bit multiply-add as two 256-bit halves, so such a panel costs W / 32 of a whole one: the
  /// 8 columns left of a product of 200 (a word-LM's input gradients), the 16 of 10,000 or the 20
  /// of 500 (an MLP's layer). On cores with 512-bit units a ymm multiply-add costs what a zmm one
  /// does: W = 8 and 16 cost half a panel there, 24 a whole one, as before. Without AVX512VL only
  /// the first 16 registers hold ymm values: R ymm sums, B's ymm vector and the broadcast fit in
  /// them.
  template <int R, int W, bool RowsA = false>
  [[gnu::target("avx512f,avx2,fma"), GRADUS_ALIGN_LOOPS]] static void narrow_kernel(int64_t kc, const float* a,
                                                                                     int64_t as, const float* b,
                                                                                     int64_t bs, float* c, int64_t ldc,
                                                                                     bool load, int64_t n,
                                                                                     int64_t rows = R) {
    static_assert(W == 8 || W == 16 || W == 24, "narrow_kernel: 8, 16 or 24 columns");
    constexpr bool kZmm = W >= 16, kYmm = W != 16;  // the registers a row's sums take
    __m512 acc[R][2];
    __m256 half[R];
    GRADUS_UNROLL for (int i = 0; i < R; ++i) {
      acc[i][0] = acc[i][1] = _mm512_setzero_ps();
      half[i] = _mm256_setzero_ps();
    }
    for (int64_t p = 0; p < kc; ++p, a += RowsA ? 1 : as, b += bs) {
      // GRADUS_IN_REGISTERS, the ymm vector in a register VEX code reaches
      __m512 b0;
      __m256 b1;
      if constexpr (kZmm) {
        b0 = _mm512_loadu_ps(b);
        asm("" : "+v"(b0));
      }
      if constexpr (kYmm) {
        b1 = _mm256_loadu_ps(b + (kZmm ? 16 : 0));
        asm("" : "+x"(b1));
      }
      GRADUS_UNROLL for (int i = 0; i < R; ++i) {
        // one value, broadcast to each width (GCC 12's _mm512_castps512_ps256 reads an undefined
        // vector, and -Wuninitialized warns about it)
        const float x = RowsA ? a[i * as] : a[i];
        if constexpr (kZmm) acc[i][0] = _mm512_fmadd_ps(_mm512_set1_ps(x), b0, acc[i][0]);
        if constexpr (kYmm) half[i] = _mm256_fmadd_ps(_mm256_set1_ps(x), b1, half[i]);
      }
    }
    // the ymm sums as the low lanes of zmm ones; the others, whatever they hold, are masked off
    // (n <= W), and a VEX-encoded ymm instruction zeroes them in any case
    if constexpr (kYmm)
      GRADUS_UNROLL for (int i = 0; i < R; ++i) acc[i][kZmm ? 1 : 0] = _mm512_castps256_ps512(half[i]);
    store<R>(acc, c, ldc, load, n, rows);
  }

  /// A direct convolution's tile (conv.hpp): C[R x n] = A · B over kc taps, with A(i, p) =
  /// a[off[p] + i * rs] read from the input image itself and B one packed panel [kc][32].
  template <int R>
  [[gnu::target("avx512f,avx2,fma")]] static void conv_kernel(int64_t kc, const float* a, const int64_t* off,
                                                               int64_t rs, const float* b, float* c, int64_t ldc,
                                                               int64_t n) {
    __m512 acc[R][2];
    GRADUS_UNROLL for (int i = 0; i < R; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
    for (int64_t p = 0; p < kc; ++p, b += kNR) {
      const float* ap = a + off[p];
      __m512 b0 = _mm512_load_ps(b), b1 = _mm512_load_ps(b + 16);
      GRADUS_IN_REGISTERS(b0, b1);
      // The row pointer is stepped by rs: written as ap[i * rs], clang++ 14 spilled accumulators
      // and offsets to the stack in every step (5.1% of the CNN step instead of g++'s 2.8%)
      GRADUS_UNROLL for (int i = 0; i < R; ++i, ap += rs) {
        const __m512 x = _mm512_set1_ps(*ap);
        acc[i][0] = _mm512_fmadd_ps(x, b0, acc[i][0]);
        acc[i][1] = _mm512_fmadd_ps(x, b1, acc[i][1]);
      }
    }
    store<R>(acc, c, ldc, false, n);
  }

  /// A direct convolution's filter gradient for R taps: C[R x n] = or (`load`) += Σ_r A(i, r) ·
  /// G(r, ·) over `rows` output rows, with A(i, r) = a[base[r] + off[i]] read from the input
  /// image and G(r, j) = g[r * ldg + j], j < n <= 32. With `y` (the output of a convolution with a
  /// fused ReLU, rows like g's) G(r, j) is 0 where y <= 0; with `db`, the column sums of G are
  /// added to db[j] as well (the bias gradient). So a ReLU convolution's backward needs no pass of
  /// its own over g: reading g and y here overlaps with the multiply-adds.
  template <int R>
  [[gnu::target("avx512f,avx2,fma")]] static void conv_filter_kernel(int64_t rows, const float* a,
                                                                      const int64_t* base, const int64_t* off,
                                                                      const float* g, int64_t ldg, float* c,
                                                                      int64_t ldc, bool load, int64_t n,
                                                                      const float* y = nullptr,
                                                                      float* db = nullptr) {
    const __mmask16 m0 = first_lanes(n), m1 = first_lanes(n - 16);
    __m512 acc[R][2];
    GRADUS_UNROLL for (int i = 0; i < R; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
    __m512 sum0 = _mm512_setzero_ps(), sum1 = _mm512_setzero_ps();
    int64_t o[R];
    GRADUS_UNROLL for (int i = 0; i < R; ++i) o[i] = off[i];
    for (int64_t r = 0; r < rows; ++r, g += ldg) {
      __mmask16 k0 = m0, k1 = m1;
      if (y) {
        const __m512 zero = _mm512_setzero_ps();
        k0 = _mm512_mask_cmp_ps_mask(m0, _mm512_maskz_loadu_ps(m0, y), zero, _CMP_GT_OQ);
        k1 = _mm512_mask_cmp_ps_mask(m1, _mm512_maskz_loadu_ps(m1, y + 16), zero, _CMP_GT_OQ);
        y += ldg;
      }
      const __m512 g0 = _mm512_maskz_loadu_ps(k0, g), g1 = _mm512_maskz_loadu_ps(k1, g + 16);
      sum0 = _mm512_add_ps(sum0, g0), sum1 = _mm512_add_ps(sum1, g1);
      const float* ar = a + base[r];
      GRADUS_UNROLL for (int i = 0; i < R; ++i) {
        const __m512 x = _mm512_set1_ps(ar[o[i]]);
        acc[i][0] = _mm512_fmadd_ps(x, g0, acc[i][0]);
        acc[i][1] = _mm512_fmadd_ps(x, g1, acc[i][1]);
      }
    }
    store<R>(acc, c, ldc, load, n);
    if (db) {
      _mm512_mask_storeu_ps(db, m0, _mm512_add_ps(sum0, _mm512_maskz_loadu_ps(m0, db)));
      _mm512_mask_storeu_ps(db + 16, m1, _mm512_add_ps(sum1, _mm512_maskz_loadu_ps(m1, db + 16)));
    }
  }

  /// Rows of a product with few columns (dot_gemm): C(i, j) = or (`load`) += Σ_p A(i, p) · T(j, p)
  /// for rows i < R (1 or 2) and columns j < n <= kDotCols, A(i, p) = a[i * ra + p] (rows
  /// contiguous), and T = Bᵀ as kDotCols rows of t, ldt apart, zero past k and past n (ldt a
  /// multiple of 16). Each element is a dot product of two contiguous rows: 16 depths a step,
  /// both of A's rows against T's 10 in 20 accumulators (ten: a classifier's ten classes fill
  /// them), each summed across its lanes at the end.
  static constexpr int64_t kDotCols = 10;
  template <int R>
  [[gnu::target("avx512f,avx2,fma")]] static void dot_kernel(int64_t k, const float* a, int64_t ra, const float* t,
                                                              int64_t ldt, float* c, int64_t ldc, bool load,
                                                              int64_t n) {
    __m512 acc[R][kDotCols];
    GRADUS_UNROLL for (int i = 0; i < R; ++i)
      GRADUS_UNROLL for (int j = 0; j < kDotCols; ++j) acc[i][j] = _mm512_setzero_ps();
    int64_t p = 0;
    for (; p + 16 <= k; p += 16) dot_step<R>(acc, a + p, ra, t + p, ldt, __mmask16(0xFFFF));
    if (p < k) dot_step<R>(acc, a + p, ra, t + p, ldt, first_lanes(k - p));
    const __mmask16 cols = first_lanes(n);
    GRADUS_UNROLL for (int i = 0; i < R; ++i) {
      __m512 s = lane_sums(acc[i]);
      if (load) s = _mm512_add_ps(s, _mm512_maskz_loadu_ps(cols, c + i * ldc));
      _mm512_mask_storeu_ps(c + i * ldc, cols, s);
    }
  }

  /// One step of dot_kernel: 16 depths (those in `mask`) of A's R rows against T's.
  template <int R>
  [[gnu::target("avx512f,avx2,fma"), gnu::always_inline]] static inline void dot_step(__m512 (&acc)[R][kDotCols],
                                                                                     const float* a, int64_t ra,
                                                                                     const float* t, int64_t ldt,
                                                                                     __mmask16 mask) {
    __m512 x[R];
    GRADUS_UNROLL for (int i = 0; i < R; ++i) x[i] = _mm512_maskz_loadu_ps(mask, a + i * ra);
    GRADUS_UNROLL for (int j = 0; j < kDotCols; ++j) {
      __m512 y = _mm512_load_ps(t + j * ldt);
      __asm__("" : "+v"(y));  // one load for both rows: GCC would otherwise fold it into each FMA
      GRADUS_UNROLL for (int i = 0; i < R; ++i) acc[i][j] = _mm512_fmadd_ps(x[i], y, acc[i][j]);
    }
  }

  /// Lane j < kDotCols of the result: the sum of v[j]'s 16 lanes (the other lanes: 0). A tree of
  /// shuffles: pairs of vectors summed within 128-bit lanes, then quadruples, then across lanes.
  [[gnu::target("avx512f,avx2,fma")]] static __m512 lane_sums(const __m512 (&v)[kDotCols]) {
    // the zero-masked forms under a full mask, the same instructions: GCC 12 defines the plain
    // ones with an undefined pass-through vector, and -Wuninitialized warns about it
    constexpr __mmask16 all = 0xFFFF;
    const __m512 zero = _mm512_setzero_ps();
    __m512 t[8], u[4];
    // 128-bit lane L of t[q]: v[2q]'s and v[2q + 1]'s (a + c, b + d) over lane L's (a, b, c, d)
    GRADUS_UNROLL for (int q = 0; q < 8; ++q) {
      const __m512 x = 2 * q < kDotCols ? v[2 * q] : zero, y = 2 * q + 1 < kDotCols ? v[2 * q + 1] : zero;
      t[q] = _mm512_add_ps(_mm512_maskz_unpacklo_ps(all, x, y), _mm512_maskz_unpackhi_ps(all, x, y));
    }
    GRADUS_UNROLL for (int q = 0; q < 4; ++q) {  // lane L of u[q]: v[4q .. 4q + 3]'s sums over lane L
      const __m512d x = _mm512_castps_pd(t[2 * q]), y = _mm512_castps_pd(t[2 * q + 1]);
      u[q] = _mm512_add_ps(_mm512_castpd_ps(_mm512_maskz_unpacklo_pd(__mmask8(0xFF), x, y)),
                           _mm512_castpd_ps(_mm512_maskz_unpackhi_pd(__mmask8(0xFF), x, y)));
    }
    return lane_pairs(lane_pairs(u[0], u[1]), lane_pairs(u[2], u[3]));
  }

  /// [a0 + a1, a2 + a3, b0 + b1, b2 + b3], in 128-bit lanes.
  [[gnu::target("avx512f,avx2,fma"), gnu::always_inline]] static inline __m512 lane_pairs(__m512 a, __m512 b) {
    constexpr __mmask16 all = 0xFFFF;
    return _mm512_add_ps(_mm512_maskz_shuffle_f32x4(all, a, b, 0x88), _mm512_maskz_shuffle_f32x4(all, a, b, 0xDD));
  }

  /// C[rows x n] = or (`load`) += the accumulators acc[i] = row i's 32 columns, rows <= R.
  template <int R>
  [[gnu::target("avx512f,avx2,fma"), gnu::always_inline]] static inline void store(__m512 (&acc)[R][2], float* c,
                                                                                 int64_t ldc, bool load, int64_t n,
                                                                                 int64_t rows = R) {
    const __mmask16 m0 = first_lanes(n), m1 = first_lanes(n - 16);
    GRADUS_UNROLL for (int i = 0; i < R; ++i) {
      if (i >= rows) break;
      float* ci = c + i * ldc;
      if (load) {
        acc[i][0] = _mm512_add_ps(acc[i][0], _mm512_maskz_loadu_ps(m0, ci));
        acc[i][1] = _mm512_add_ps(acc[i][1], _mm512_maskz_loadu_ps(m1, ci + 16));
      }
      if (n == kNR) {  // plain stores: a masked one cannot forward its data to a later load
        _mm512_storeu_ps(ci, acc[i][0]);
        _mm512_storeu_ps(ci + 16, acc[i][1]);
      } else {
        _mm512_mask_storeu_ps(ci, m0, acc[i][0]);
        _mm512_mask_storeu_ps(ci + 16, m1, acc[i][1]);
      }
    }
  }
};

/// One A panel of `rows` <= K::kMR rows against one B panel, its rows `bs` apart (K::kNR when
/// packed). A's depths are `as` apart: K::kMR when packed (pack_a), or a transposed A's row
/// stride when read in place; with RowsA, A's rows are read in place, `as` apart, each
/// contiguous along depth.
///
/// A partial panel (rows < K::kMR) that is packed (`Padded`) runs on one kernel of
/// kernel_rows(rows) rows, in a single pass over B, storing only its `rows`: pack_a zeroes the
/// rows it reads past them, so that the sums computed for them never meet a subnormal or a NaN. One
/// read in place runs on the 10-row kernel, or as the kernels of 8, 4, 2 and 1 rows that add up
/// to it, each of which reads B again, but only a few panels of B: A is read in place against at
/// most 8 (ABlock).
/// Against many panels of B, the extra passes were what cost: with B read in place 4 KiB apart
/// (n = 1024, one thread on a Zen 4) 27 and 31 rows took 2.2x and 2.4x the time of 24 as 24 +
/// 2 + 1 and 24 + 4 + 2 + 1 rows, 1.3x and 1.4x as 24 + 3 (on the 4-row kernel) and 24 + 7 (on
/// the 8-row one).
template <class K, bool RowsA = false, bool Padded = !RowsA, class P>
void tile(int64_t rows, int64_t kc, const P* ap, const P* bp, int64_t bs, float* c, int64_t ldc, bool load, int64_t n,
          int64_t as = K::kMR) {
  constexpr int MR = int(K::kMR);
  static_assert(!(RowsA && Padded), "tile: A's rows read in place are not padded");
  // a last panel of few columns on a full panel of rows: the narrow kernel, where K has one
  if constexpr (requires { K::kNarrowCols; })
    if (rows == MR && n <= K::kNarrowCols) {
      if (n <= 8) return K::template narrow_kernel<MR, 8, RowsA>(kc, ap, as, bp, bs, c, ldc, load, n);
      if constexpr (K::kNarrowCols > 8) {
        if (n <= 16) return K::template narrow_kernel<MR, 16, RowsA>(kc, ap, as, bp, bs, c, ldc, load, n);
        return K::template narrow_kernel<MR, 24, RowsA>(kc, ap, as, bp, bs, c, ldc, load, n);
      }
    }
  if constexpr (Padded) {
    auto run = [&]<int R>(std::integral_constant<int, R>) {
      if (rows == R)  // a call of its own, whose store the compiler specialises for R rows
        K::template kernel<R>(kc, ap, as, bp, bs, c, ldc, load, n);
      else
        K::template kernel<R>(kc, ap, as, bp, bs, c, ldc, load, n, rows);
    };
    const int64_t r = kernel_rows<MR>(rows);
    if (r == 1) return run(std::integral_constant<int, 1>{});
    if (r == 2) return run(std::integral_constant<int, 2>{});
    if (r == 4) return run(std::integral_constant<int, 4>{});
    if constexpr (MR > 8) {
      if (r == 8) return run(std::integral_constant<int, 8>{});
      if (r == 10) return run(std::integral_constant<int, 10>{});  // a layer's 10 logits, transposed
    }
    return run(std::integral_constant<int, MR>{});
  } else {
    auto run = [&]<int R>(std::integral_constant<int, R>, int64_t r0) {
      const int64_t rs = RowsA ? as : 1;  // from one row of A to the next
      K::template kernel<R, RowsA>(kc, ap + r0 * rs, as, bp, bs, c + r0 * ldc, ldc, load, n);
    };
    if (rows == MR) return run(std::integral_constant<int, MR>{}, 0);
    if constexpr (MR > 8)
      if (rows == 10) return run(std::integral_constant<int, 10>{}, 0);  // as above
    static_assert(MR < 16, "tile: a partial panel is split into 8 + 4 + 2 + 1 rows");
    int64_t r0 = 0;
    if constexpr (MR > 8)
      if (rows & 8) run(std::integral_constant<int, 8>{}, r0), r0 += 8;
    if (rows & 4) run(std::integral_constant<int, 4>{}, r0), r0 += 4;
    if (rows & 2) run(std::integral_constant<int, 2>{}, r0), r0 += 2;
    if (rows & 1) run(std::integral_constant<int, 1>{}, r0);
  }
}

/// Handles a product with no rows, no columns or no depth (C = 0 or unchanged) and says so; false
/// for every other product, which the caller then runs.
inline bool empty_product(float* c, int64_t ldc, int64_t m, int64_t k, int64_t n, bool add) {
  if (m > 0 && n > 0 && k > 0) return false;
  if (!add && k <= 0)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = 0.f;
  return true;
}

/// Floats rounded up to whole 64-byte lines: the parts of a scratch buffer stay aligned for
/// pack_b's aligned stores.
inline int64_t whole_lines(int64_t floats) { return (floats + 15) / 16 * 16; }

/// A product c (m x n) = or += a (m x k) · b (k x n) as the blocked kernels arrange it, for
/// register blocks of MR x NR: a(i, p) = a[i * ra + p * ca], b(p, j) = b[p * rb + j * cb]. One with
/// fewer columns than 3/4 of a block and more rows than columns runs as its transpose
/// (`transposed`), c^T = b^T a^T, written into a temporary (run_into), so that its m rows fill the
/// vector lanes (on 128x500x10 about 1.7x faster than padding its 10 columns to a panel with the
/// AVX-512 kernel, 1.3x with the AVX2 one). Above kGemmParallelWork multiply-adds, outside a task
/// of the thread pool, its rows (or its columns, when those make more panels) split into at most
/// `per_thread` tasks per thread.
struct ProductPlan {
  const float *a, *b;
  int64_t m, k, n, ra, ca, rb, cb;
  bool transposed = false;  // m, n, a and b are those of c^T
  int nt;        // threads
  bool rows;     // the tasks split the rows of C, else its columns
  int64_t unit;  // MR or NR
  int64_t units, tasks;

  ProductPlan(const float* a_, bool ta, const float* b_, bool tb, int64_t m_, int64_t k_, int64_t n_, int64_t mr,
              int64_t nr, int64_t per_thread)
      : a(a_), b(b_), m(m_), k(k_), n(n_), ra(ta ? 1 : k_), ca(ta ? m_ : 1), rb(tb ? 1 : n_), cb(tb ? k_ : 1) {
    if (4 * n < 3 * nr && m > n) {
      std::swap(a, b), std::swap(m, n);
      std::swap(ra, cb), std::swap(ca, rb);
      transposed = true;
    }
    nt = m * n * k >= kGemmParallelWork && !ThreadPool::in_task() ? num_threads() : 1;
    // More panels of rows than of columns: split the rows, sharing B. At equal counts split the
    // columns, sharing A: with the float kernels' panels (12 x 32, 6 x 16) A is then the smaller
    // operand (n about 2.7 m), and the shared one is what the threads pass between them. Two
    // threads on a Zen 4: 96x512x256 149 -> 133 us, 40x500x100 45 -> 36; 240x640x640,
    // 192x784x500 and 384x512x1000 within 2%.
    rows = (m + mr - 1) / mr > (n + nr - 1) / nr;
    unit = rows ? mr : nr;
    units = (extent() + unit - 1) / unit;
    tasks = std::min<int64_t>(units, int64_t(nt) * per_thread);
  }
  /// Whether one thread runs it all.
  bool serial() const { return nt <= 1 || tasks <= 1 || k <= 0; }
  /// The rows (or columns) the tasks split.
  int64_t extent() const { return rows ? m : n; }
  /// Task t's rows (columns) [lo(t), hi(t)): whole blocks of `unit`.
  int64_t lo(int64_t t) const { return std::min(extent(), units * t / tasks * unit); }
  int64_t hi(int64_t t) const { return lo(t + 1); }
};

/// Floats of B (k x n) packed whole by pack_b_all for kernel K.
template <class K>
int64_t packed_b_size(int64_t k, int64_t n) {
  int64_t size = 0;
  for (int64_t j0 = 0; j0 < n; j0 += kNC)
    size += (std::min(kNC, n - j0) + K::kNR - 1) / K::kNR * K::kNR * k;
  return size;
}

/// Packs all of B(p, j) = b[p * rb + j * cb] (k x n) as serial() packs it block by block, the
/// blocks one after another in the order serial() visits them (columns, then depth).
template <class K>
void pack_b_all(const float* b, int64_t rb, int64_t cb, int64_t k, int64_t n, float* bp) {
  const int64_t kb = k_block(k);
  for (int64_t j0 = 0; j0 < n; j0 += kNC) {
    const int64_t nc = std::min(kNC, n - j0), panels = (nc + K::kNR - 1) / K::kNR;
    for (int64_t p0 = 0; p0 < k; p0 += kb) {
      const int64_t kc = std::min(kb, k - p0);
      pack_b<K::kNR>(b + p0 * rb + j0 * cb, rb, cb, kc, nc, bp);
      bp += panels * K::kNR * kc;
    }
  }
}

/// How many rows of A (m) may meet a k-block of B that BBlock reads in place. Two panels of A
/// everywhere: a packed copy would be read as often (the second panel of A meets each panel of B
/// right after the first, from L1). Zen 4 (AMD family 19h, the one with AVX-512) runs the
/// AVX-512 kernel as fast on B's rows where they are, strided, as on packed panels, so there
/// packing is pure cost up to 16 panels (192 rows). One thread on a Zen 4, in place against
/// packed: 36x1024x1024 0.79x, 32x192x512 0.81x, 64x192x768 (a decoder LSTM cell's recurrent
/// product) 0.90x, 128x784x500 and 128x500x1024 0.94x, 192x784x500 0.97x, 256x1024x500 1.00x,
/// 512x784x500 and 1024^3 1.04x. The AVX2 kernel, with half the multiply-adds to each row of B
/// it reads, lost up to 12% in place beyond two panels on the same core and keeps two; so do the
/// other cores: Intel's, where the limit of two was measured and a wider one was not, and Zen 5,
/// whose full-width AVX-512 units use B's rows twice as fast, not measured either.
template <class K>
int64_t in_place_b_rows() {
  if constexpr (std::is_same_v<K, Avx512>) {
    static const bool zen4 = __builtin_cpu_is("amdfam19h");
    if (zen4) return 16 * K::kMR;
  }
  return 2 * K::kMR;
}

/// A k-block of B (kc x nc, B(p, j) = b[p * rb + j * cb]) as the kernels read it: packed into `bp`
/// in panels of K::kNR columns, or, when B's rows are contiguous (cb == 1) and few rows of A meet
/// it (in_place_b_rows), read where it is. Then only a last, partial panel is packed (the kernels
/// read whole panels). On 500x128x10 with A transposed (run as 10x128x500) packing B took 28% of
/// the time with the AVX-512 kernel (one panel of A) and 27% with the AVX2 one (6 + 4 rows).
template <class K>
struct BBlock {
  const float* b;
  int64_t rb, kc, nc;
  float* bp;
  bool in_place;

  /// With `packed`, bp already holds the block's panels (a B packed whole ahead).
  BBlock(const float* b_, int64_t rb_, int64_t cb, int64_t kc_, int64_t nc_, int64_t m, float* bp_, bool packed = false)
      : b(b_), rb(rb_), kc(kc_), nc(nc_), bp(bp_), in_place(!packed && cb == 1 && m <= in_place_b_rows<K>()) {
    constexpr int64_t NR = K::kNR;
    if (in_place) {
      if (nc % NR) pack_b<NR>(b + nc / NR * NR, rb, 1, kc, nc % NR, bp);
    } else if (!packed) {
      pack_b<NR>(b, rb, cb, kc, nc, bp);
    }
  }
  /// Whether panel jr (a multiple of K::kNR) is read in place.
  bool whole(int64_t jr) const { return in_place && jr + K::kNR <= nc; }
  /// Where panel jr's first row is, and the distance between its rows (sweep_block's `panel`).
  std::pair<const float*, int64_t> panel(int64_t jr) const {
    if (whole(jr)) return {b + jr, rb};
    return {in_place ? bp : bp + jr / K::kNR * kc * K::kNR, K::kNR};
  }
};

/// A block of rows of A (mc x kc) as the kernels read it, against `nc` columns of B: packed
/// into `buf` (pack_a's panels, their depths K::kMR apart), or read in place against few panels
/// of B, where packing costs more than the reads it saves (each A panel is read once per panel
/// of B):
/// - a transposed A (ra == 1: the rows of one depth contiguous, as a filter gradient's
///   patchesᵀ) against at most kDepthsInPlace = 128 columns (4 panels of the AVX-512 kernel, 8
///   of the AVX2 one), each panel's depths ca apart. One thread on an AVX-512 Xeon, in place
///   against packed: 800x72x64 and 25x2616x32 1.10x and 1.12x; 800x72x96, 800x72x128 and
///   128x128x128 1.01-1.04x, 1.07-1.10x with the AVX2 kernel; 784x128x256 0.91x and 784x128x500
///   0.90x, hence the limit;
/// - a row-major A (ca == 1) against at most kRowsInPlace = 8 panels, the kernel broadcasting
///   from its MR rows at once (kernel<R, true>: each line of a row serves 16 depths). Packing it
///   takes 8 x 8 register transposes. In place against packed, the same machine: 72x800x64 (a
///   convolution's forward tile of patches against 64 filters) 1.30x, 72x800x128 1.10x,
///   128x784x128 1.15x, 1000x64x128 1.09x, 72x800x256 and 128x784x256 1.03x with the AVX-512
///   kernel; 1.00-1.07x with the AVX2 one (72x800x64: 1.15x); against 16 panels nothing gained,
///   against 32 (1024^3) 3% lost.
template <class K>
struct ABlock {
  static constexpr int64_t kRowsInPlace = 8, kDepthsInPlace = 128;

  ABlock(const float* a, int64_t ra, int64_t ca, int64_t mc, int64_t kc, int64_t nc, float* buf)
      : rows_(ca == 1 && nc <= kRowsInPlace * K::kNR),
        in_place_(rows_ || (ra == 1 && nc <= kDepthsInPlace)),
        a_(in_place_ ? a : buf),
        ra_(ra),
        ca_(ca),
        kc_(kc) {
    if (!in_place_) pack_a<K::kMR>(a, ra, ca, mc, kc, buf);
  }
  /// tile<K> of panel ir (a multiple of K::kMR) against `b`, as the block is read.
  void tile(int64_t ir, int64_t rows, int64_t kc, const float* b, int64_t bs, float* c, int64_t ldc, bool load,
            int64_t n) const {
    if (rows_) return sgemm::tile<K, true>(rows, kc, panel(ir), b, bs, c, ldc, load, n, step());
    if (in_place_) return sgemm::tile<K, false, false>(rows, kc, panel(ir), b, bs, c, ldc, load, n, step());
    sgemm::tile<K>(rows, kc, panel(ir), b, bs, c, ldc, load, n, step());
  }

 private:
  /// Panel ir and the distance between its depths (its rows, when A's rows are read in place).
  const float* panel(int64_t ir) const {
    return rows_ ? a_ + ir * ra_ : in_place_ ? a_ + ir : a_ + (ir / K::kMR) * kc_ * K::kMR;
  }
  int64_t step() const { return rows_ ? ra_ : in_place_ ? ca_ : K::kMR; }

  bool rows_, in_place_;
  const float* a_;
  int64_t ra_, ca_, kc_;
};

/// One block of A (mc rows) against one block of B (kc depths, nc columns), tile by tile:
/// `panel(jr)` gives where B's panel of columns jr.. is and how far apart its depths are, and
/// `tile(ir, rows, b, bs, jr, w)` multiplies A's panel of rows ir.. by it into C. Where a panel
/// of B and a panel of A together exceed 32 KiB (kc > 186 with the AVX-512 kernel's 32 columns
/// and 12 rows: Zen 4's L1, and most of an Intel core's 48 KiB) and B is packed, B is swept
/// kNL2 columns at a time, each panel of A against every panel of that stretch in turn: the
/// panel of A stays in L1 while B's panels stream from L2 one after the other. Otherwise each
/// panel of B meets every panel of A in turn, from L1: the AVX2 kernel's panels (16 columns and
/// 6 rows, at most 22 KiB) always fit, and so do shallow blocks (128 x 10 x 500 at two threads
/// ran 1.3x slower swept). A B read in place keeps that order too: the next panel of A meets
/// each panel of B right after the first. Each element of C sums its terms in the same order
/// either way.
template <class K, class Panel, class Tile>
void sweep_block(int64_t mc, int64_t kc, int64_t nc, bool in_place, Panel&& panel, Tile&& tile) {
  constexpr int64_t MR = K::kMR, NR = K::kNR, kPanels = kNL2 / NR;
  const bool sweep = kc * (NR + MR) * int64_t(sizeof(float)) > 32 * 1024 && !in_place && nc > NR;
  if (!sweep) {
    for (int64_t jr = 0; jr < nc; jr += NR) {
      const auto [b, bs] = panel(jr);
      const int64_t w = std::min(NR, nc - jr);
      for (int64_t ir = 0; ir < mc; ir += MR) tile(ir, std::min(MR, mc - ir), b, bs, jr, w);
    }
    return;
  }
  std::pair<const float*, int64_t> b[kPanels];
  for (int64_t j0 = 0; j0 < nc; j0 += kNL2) {
    const int64_t panels = std::min(kPanels, (nc - j0 + NR - 1) / NR);
    for (int64_t q = 0; q < panels; ++q) b[q] = panel(j0 + q * NR);
    for (int64_t ir = 0; ir < mc; ir += MR)
      for (int64_t q = 0; q < panels; ++q) {
        const int64_t jr = j0 + q * NR;
        tile(ir, std::min(MR, mc - ir), b[q].first, b[q].second, jr, std::min(NR, nc - jr));
      }
  }
}

/// Floats of C above which each tile of C is fetched into L2 before its kernel runs (fetch_tile):
/// 1 MiB, Zen 4's L2. The kernel reads and writes its tile of C only after its k-block's
/// multiply-adds, all at once; where C is larger than L2, the tile, last touched a k-block before,
/// then comes from L3 or memory while the kernel waits. Fetched ahead, 1024^3 went from 0.910-0.923
/// to 0.922-0.930 of the core's peak (bench_gemm, one thread, Zen 4, three alternating rounds);
/// fetching the tiles of products whose C fits L2 (128 x 784 x 500) moved them by +-1%.
inline constexpr int64_t kFetchC = int64_t(1) << 18;

/// Asks for C's tile (rows x n) in L2, ahead of the kernel that adds to it.
inline void fetch_tile(const float* c, int64_t ldc, int64_t rows, int64_t n) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < n; j += 16) __builtin_prefetch(c + i * ldc + j, 0, 2);
}

/// C (m x n) = or += A (m x k) · B (k x n) on the calling thread with kernel K, where
/// A(i, p) = a[i * ra + p * ca] (ca == 1 or ra == 1), B(p, j) = b[p * rb + j * cb] (cb == 1 or
/// rb == 1) and C(i, j) = c[i * ldc + j]. With `packed` (pack_b_all's output for this B)
/// B is read from there instead of being packed again.
template <class K>
void serial(const float* a, int64_t ra, int64_t ca, const float* b, int64_t rb, int64_t cb, float* c, int64_t ldc,
            int64_t m, int64_t k, int64_t n, bool add, const float* packed = nullptr) {
  constexpr int64_t MR = K::kMR, NR = K::kNR;
  if (empty_product(c, ldc, m, k, n, add)) return;
  const int64_t kb = k_block(k), kmax = std::min(k, kb);
  const bool fetch = m * n > kFetchC;
  Tensor<float> bbuf(Shape{packed ? 0 : (std::min(n, kNC) + NR - 1) / NR * NR * kmax});
  Tensor<float> abuf(Shape{(std::min(m, kMC) + MR - 1) / MR * MR * kmax});
  float* bp = bbuf.data();
  float* ap = abuf.data();
  for (int64_t j0 = 0; j0 < n; j0 += kNC) {
    const int64_t nc = std::min(kNC, n - j0);
    for (int64_t p0 = 0; p0 < k; p0 += kb) {
      const int64_t kc = std::min(kb, k - p0);
      const bool load = add || p0 > 0;
      if (packed) bp = const_cast<float*>(packed), packed += (nc + NR - 1) / NR * NR * kc;
      const BBlock<K> block(b + p0 * rb + j0 * cb, rb, cb, kc, nc, m, bp, packed);
      for (int64_t i0 = 0; i0 < m; i0 += kMC) {
        const int64_t mc = std::min(kMC, m - i0);
        const ABlock<K> ablock(a + i0 * ra + p0 * ca, ra, ca, mc, kc, nc, ap);
        sweep_block<K>(
            mc, kc, nc, block.in_place, [&](int64_t jr) { return block.panel(jr); },
            [&](int64_t ir, int64_t rows, const float* bj, int64_t bs, int64_t jr, int64_t w) {
              float* ct = c + (i0 + ir) * ldc + j0 + jr;
              if (fetch) fetch_tile(ct, ldc, rows, w);
              ablock.tile(ir, rows, kc, bj, bs, ct, ldc, load, w);
            });
      }
    }
  }
}

/// The operand a parallel GEMM packs once, for all its tasks: B whole when the tasks split the
/// rows of C, A whole when they split its columns. Each k-block of k_block(k) rows of B (columns of A)
/// is packed as serial() packs it, one after the other: block p0 starts at p0 * `padded` floats.
/// It is packed in slices of whole panels (pack(s, slices)), the tasks of a job of the thread
/// pool (run()).
template <class K>
struct SharedPack {
  Tensor<float> buf;
  int64_t padded = 0;  // n (or m) rounded up to whole panels

  /// B (k x n), B(p, j) = b[p * rb + j * cb], in panels of K::kNR columns.
  static SharedPack of_b(const float* b, int64_t rb, int64_t cb, int64_t k, int64_t n) {
    return SharedPack(true, b, rb, cb, n, k, K::kNR);
  }
  /// A (m x k), A(i, p) = a[i * ra + p * ca], in panels of K::kMR rows.
  static SharedPack of_a(const float* a, int64_t ra, int64_t ca, int64_t m, int64_t k) {
    return SharedPack(false, a, ra, ca, m, k, K::kMR);
  }
  /// Panels of the operand.
  int64_t panels() const { return padded / unit_; }
  /// Packs slice s of `slices`: panels [panels() * s / slices, panels() * (s + 1) / slices) of
  /// every k-block. The slices of one operand write disjoint floats.
  void pack(int64_t s, int64_t slices) {
    const int64_t q0 = panels() * s / slices, q1 = panels() * (s + 1) / slices;
    const int64_t lo = q0 * unit_, hi = std::min(extent_, q1 * unit_), kb = k_block(k_);
    if (lo >= hi) return;
    for (int64_t p0 = 0; p0 < k_; p0 += kb) {
      const int64_t kc = std::min(kb, k_ - p0);
      float* dst = buf.data() + p0 * padded + lo * kc;
      if (is_b_)
        pack_b<K::kNR>(src_ + p0 * rs_ + lo * cs_, rs_, cs_, kc, hi - lo, dst);
      else
        pack_a<K::kMR>(src_ + lo * rs_ + p0 * cs_, rs_, cs_, hi - lo, kc, dst);
    }
  }

 private:
  SharedPack(bool is_b, const float* src, int64_t rs, int64_t cs, int64_t extent, int64_t k, int64_t unit)
      : padded((extent + unit - 1) / unit * unit),
        is_b_(is_b), src_(src), rs_(rs), cs_(cs), extent_(extent), k_(k), unit_(unit) {
    buf = Tensor<float>(Shape{padded * k});
  }

  bool is_b_;
  const float* src_;
  int64_t rs_, cs_;  // B(p, j) = src[p * rs + j * cs]; A(i, p) = src[i * rs + p * cs]
  int64_t extent_, k_, unit_;
};

/// The floats a task of a parallel GEMM packs its own panels into, for tasks of up to `span` rows
/// (columns) of C in units of `unit` (K::kMR or K::kNR), `limit` (kMC or kNC) at a time.
inline int64_t task_pack_floats(int64_t span, int64_t unit, int64_t limit, int64_t k) {
  return (std::min(span, limit) + unit - 1) / unit * unit * std::min(k, k_block(k));
}

/// Rows [lo, hi) of C = or += A · B (as serial()) against B packed whole in `bp`: this task packs
/// only its own rows of A, into `ap` (task_pack_floats of them). Each element of C sums its k
/// terms in the order serial() does.
template <class K>
void rows_task(const float* a, int64_t ra, int64_t ca, const SharedPack<K>& bp, float* c, int64_t ldc, int64_t lo,
               int64_t hi, int64_t k, int64_t n, bool add, float* ap) {
  constexpr int64_t NR = K::kNR;
  const int64_t kb = k_block(k);
  const bool fetch = (hi - lo) * n > kFetchC;
  for (int64_t p0 = 0; p0 < k; p0 += kb) {
    const int64_t kc = std::min(kb, k - p0);
    const bool load = add || p0 > 0;
    const float* bblock = bp.buf.data() + p0 * bp.padded;
    for (int64_t i0 = lo; i0 < hi; i0 += kMC) {
      const int64_t mc = std::min(kMC, hi - i0);
      const ABlock<K> ablock(a + i0 * ra + p0 * ca, ra, ca, mc, kc, n, ap);
      sweep_block<K>(
          mc, kc, n, false, [&](int64_t jr) { return std::pair(bblock + (jr / NR) * kc * NR, NR); },
          [&](int64_t ir, int64_t rows, const float* bj, int64_t bs, int64_t jr, int64_t w) {
            float* ct = c + (i0 + ir) * ldc + jr;
            if (fetch) fetch_tile(ct, ldc, rows, w);
            ablock.tile(ir, rows, kc, bj, bs, ct, ldc, load, w);
          });
    }
  }
}

/// Columns [lo, hi) of C = or += A · B (as serial()) against A packed whole in `ap`: this task
/// packs only its own columns of B, into `bp` (task_pack_floats of them). Each element of C sums
/// its k terms in the order serial() does.
template <class K>
void cols_task(const SharedPack<K>& ap, const float* b, int64_t rb, int64_t cb, float* c, int64_t ldc, int64_t lo,
               int64_t hi, int64_t m, int64_t k, bool add, float* bp) {
  constexpr int64_t MR = K::kMR;
  const int64_t kb = k_block(k);
  const bool fetch = m * (hi - lo) > kFetchC;
  for (int64_t j0 = lo; j0 < hi; j0 += kNC) {
    const int64_t nc = std::min(kNC, hi - j0);
    for (int64_t p0 = 0; p0 < k; p0 += kb) {
      const int64_t kc = std::min(kb, k - p0);
      const bool load = add || p0 > 0;
      const float* ablock = ap.buf.data() + p0 * ap.padded;
      const BBlock<K> block(b + p0 * rb + j0 * cb, rb, cb, kc, nc, m, bp);
      sweep_block<K>(
          m, kc, nc, block.in_place, [&](int64_t jr) { return block.panel(jr); },
          [&](int64_t ir, int64_t rows, const float* bj, int64_t bs, int64_t jr, int64_t w) {
            float* ct = c + ir * ldc + j0 + jr;
            if (fetch) fetch_tile(ct, ldc, rows, w);
            tile<K>(rows, kc, ablock + (ir / MR) * kc * MR, bj, bs, ct, ldc, load, w);
          });
    }
  }
}


/// t[j * ldt + p] = or (`add`) += b[p * n + j], p < k, j < n: b (k x n, rows contiguous)
/// transposed, 8 x 8 blocks at a time in registers.
[[gnu::target("avx2,fma")]] inline void transpose_rows(const float* b, int64_t k, int64_t n, float* t, int64_t ldt,
                                                        bool add = false) {
  int64_t p0 = 0;
  for (; p0 + 8 <= k; p0 += 8) {
    int64_t j0 = 0;
    for (; j0 + 8 <= n; j0 += 8) {
      __m256 r[8], o[8];
      GRADUS_UNROLL for (int q = 0; q < 8; ++q) r[q] = _mm256_loadu_ps(b + (p0 + q) * n + j0);
      transpose8(r, o);
      GRADUS_UNROLL for (int q = 0; q < 8; ++q) {
        float* dst = t + (j0 + q) * ldt + p0;
        _mm256_storeu_ps(dst, add ? _mm256_add_ps(o[q], _mm256_loadu_ps(dst)) : o[q]);
      }
    }
    for (; j0 < n; ++j0)
      GRADUS_UNROLL for (int q = 0; q < 8; ++q) {
        float& dst = t[j0 * ldt + p0 + q];
        dst = (add ? dst : 0.f) + b[(p0 + q) * n + j0];
      }
  }
  for (; p0 < k; ++p0)
    for (int64_t j = 0; j < n; ++j) t[j * ldt + p0] = (add ? t[j * ldt + p0] : 0.f) + b[p0 * n + j];
}

/// c (m x n) = or (`add`) += a (m x k) · b (k x n) for n <= Avx512::kDotCols, a's rows contiguous
/// (not transposed), as dot products (Avx512::dot_kernel): bᵀ is copied into kDotCols zero-padded
/// rows, and a is read where it is. The blocked kernel would run such a product as its
/// transpose, whose B — all of a — it would have to pack: on 128x500x10 packing took a third of
/// the time. Rows split into chunks for the thread pool above kGemmParallelWork multiply-adds;
/// each element sums its terms in the same order whatever the chunks.
inline void dot_gemm(const float* a, const float* b, bool tb, float* c, int64_t m, int64_t k, int64_t n, bool add) {
  constexpr int64_t J = Avx512::kDotCols;
  const int64_t ldt = (k + 15) / 32 * 32 + 16;  // an odd number of lines: T's rows in different L1 sets
  Tensor<float> bt(Shape{J * ldt});
  float* t = bt.data();
  std::fill(t + n * ldt, t + J * ldt, 0.f);
  for (int64_t j = 0; j < n; ++j) std::fill(t + j * ldt + k, t + (j + 1) * ldt, 0.f);
  if (tb)
    for (int64_t j = 0; j < n; ++j) std::copy_n(b + j * k, k, t + j * ldt);
  else
    transpose_rows(b, k, n, t, ldt);
  const bool parallel = m * n * k >= kGemmParallelWork && !ThreadPool::in_task();
  parallel_chunks(m, 2, [&](int, int64_t i0, int64_t i1) {
    int64_t i = i0;
    for (; i + 2 <= i1; i += 2) Avx512::dot_kernel<2>(k, a + i * k, k, t, ldt, c + i * n, n, add, n);
    if (i < i1) Avx512::dot_kernel<1>(k, a + i * k, k, t, ldt, c + i * n, n, add, n);
  }, parallel ? 1 : m + 1);
}

/// Runs a product as `p` arranges it into C (m x n, rows contiguous): `product(dst, ldc, add)`
/// writes the product p describes into dst. One run as its transpose writes Cᵀ into a temporary
/// with whole-vector stores, and C = or (`add`) += its transpose after, 8 x 8 blocks at a time
/// (written into C directly, each element took a store of its own: a third of a 784x100x10
/// product's time).
template <class Product>
void run_into(const ProductPlan& p, float* c, bool add, Product&& product) {
  if (!p.transposed) return product(c, p.n, add);
  Tensor<float> t(Shape{p.m * p.n});
  product(t.data(), p.n, false);
  transpose_rows(t.data(), p.m, p.n, c, p.m, add);
}

/// C = or (`add`) += A · B as `p` arranges it, C(i, j) = c[i * ldc + j]: on the calling
/// thread, or in p.tasks tasks after packing the operand they share.
template <class K>
void run(const ProductPlan& p, int64_t k, float* c, int64_t ldc, bool add) {
  if (p.serial()) return serial<K>(p.a, p.ra, p.ca, p.b, p.rb, p.cb, c, ldc, p.m, k, p.n, add);
  SharedPack<K> shared =
      p.rows ? SharedPack<K>::of_b(p.b, p.rb, p.cb, k, p.n) : SharedPack<K>::of_a(p.a, p.ra, p.ca, p.m, k);
  // The threads pack the shared operand together before the product's tasks start, each task of
  // this job a slice of whole panels. Packed by the calling thread alone, it was the serial part
  // of every parallel product, and the other threads then read all of it from that thread's
  // cache, a transfer between cores for every line; now each reads only the others' slices. Two
  // threads on a Zen 4 guest: 128x1024x500 706 -> 656 us, 256x1024x500 1,473 -> 1,356, 1024^3
  // 10.19 -> 9.99 ms; products of 2^19 to 2^21 multiply-adds 4-22% faster, and 15-35% when the
  // host places the two vCPUs far apart (a cache line's round trip 300-700 ns instead of 50-110).
  const int64_t slices = std::min<int64_t>(shared.panels(), int64_t(p.nt) * kGemmTasksPerThread);
  ThreadPool::instance().run(slices, p.nt, [&](int64_t s) { shared.pack(s, slices); });
  // every task's panels, allocated here: how many buffers exist at once must not depend on which
  // threads happen to run the tasks together (a warm step asks the allocator for nothing new)
  const int64_t span = (p.units + p.tasks - 1) / p.tasks * p.unit;
  const int64_t per_task = task_pack_floats(span, p.unit, p.rows ? kMC : kNC, k);
  Tensor<float> panels(Shape{p.tasks * per_task});
  ThreadPool::instance().run(p.tasks, p.nt, [&](int64_t t) {
    float* own = panels.data() + t * per_task;
    if (p.rows)
      rows_task<K>(p.a, p.ra, p.ca, shared, c, ldc, p.lo(t), p.hi(t), k, p.n, add, own);
    else
      cols_task<K>(shared, p.b, p.rb, p.cb, c, ldc, p.lo(t), p.hi(t), p.m, k, add, own);
  });
}

/// c (m x n) = or += a (m x k) * b (k x n) with kernel K, each optionally transposed in storage,
/// arranged by ProductPlan (a product of few columns as its transpose; a large one in
/// kGemmTasksPerThread tasks per thread, after packing the other operand once). Every element of
/// C sums its terms in the same order at any thread count, so the result is the same bits.
template <class K>
void gemm(const float* a, bool ta, const float* b, bool tb, float* c, int64_t m, int64_t k, int64_t n, bool add) {
  if constexpr (std::is_same_v<K, Avx512>)
    if (n <= Avx512::kDotCols && !ta && k >= 64) return dot_gemm(a, b, tb, c, m, k, n, add);
  const ProductPlan p(a, ta, b, tb, m, k, n, K::kMR, K::kNR, kGemmTasksPerThread);
  run_into(p, c, add, [&](float* dst, int64_t ldc, bool load) { run<K>(p, k, dst, ldc, load); });
}

// ------------------------------------------------------------ bfloat16 products (autocast)

/// Each 32-bit lane of v shifted right (left) by 16 bits: the zero-masked forms of
/// _mm512_srli_epi32 and _mm512_slli_epi32 under a full mask, the same instruction, whose GCC 12
/// definitions pass no undefined vector through (the plain ones warn -Wmaybe-uninitialized).
[[gnu::target("avx512f,avx2,fma")]] inline __m512i shift_right16(__m512i v) {
  return _mm512_maskz_srli_epi32(__mmask16(0xFFFF), v, 16);
}
[[gnu::target("avx512f,avx2,fma")]] inline __m512i shift_left16(__m512i v) {
  return _mm512_maskz_slli_epi32(__mmask16(0xFFFF), v, 16);
}

/// The 16 lanes of v rounded to bfloat16 (to nearest, ties to even; a NaN stays a quiet NaN),
/// each in the low half of its 32-bit lane: bfloat16_bits() for 16 floats, in AVX-512F.
[[gnu::target("avx512f,avx2,fma")]] inline __m512i bf16_round16(__m512 v) {
  const __m512i u = _mm512_castps_si512(v), hi = shift_right16(u);
  const __m512i bias = _mm512_add_epi32(_mm512_and_si512(hi, _mm512_set1_epi32(1)), _mm512_set1_epi32(0x7FFF));
  const __m512i r = shift_right16(_mm512_add_epi32(u, bias));
  return _mm512_mask_or_epi32(r, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), hi, _mm512_set1_epi32(0x40));
}

/// A float panel [kc][W] (pack_a's or pack_b's layout) as bfloat16 pairs [(kc + 1) / 2][W]: word
/// j of pair q holds depth 2q of column (row) j in its low half and depth 2q + 1 in its high half,
/// zero past kc; the operand layout of the AVX512-BF16 dot product.
template <int64_t W>
[[gnu::target("avx512f,avx2,fma")]] inline void pair_panel(const float* src, int64_t kc, uint32_t* dst) {
  for (int64_t p = 0; p < kc; p += 2, src += 2 * W, dst += W)
    GRADUS_UNROLL for (int64_t j = 0; j < W; j += 16) {
      const __mmask16 mask = first_lanes(W - j);
      const __m512i lo = bf16_round16(_mm512_maskz_loadu_ps(mask, src + j));
      const __m512i hi = p + 1 < kc ? bf16_round16(_mm512_maskz_loadu_ps(mask, src + W + j)) : _mm512_setzero_si512();
      _mm512_mask_storeu_epi32(dst + j, mask, _mm512_or_si512(lo, shift_left16(hi)));
    }
}

/// The AVX512-BF16 micro-kernel: Avx512's 12 x 32 block, fed two depths at a time. Each step
/// multiplies a broadcast pair of A's bfloat16s by 32 pairs of B's and adds both products to the
/// float accumulators (vdpbf16ps): twice Avx512's multiply-adds per instruction. `kq` counts the
/// pairs, A(i, pair q) = a[q * as + i] and B one pair panel [kq][32]. The instruction treats
/// bfloat16 subnormals (below 1.2e-38) as zero.
struct Bf16Dot {
  static constexpr int64_t kMR = 12, kNR = 32;

  template <int R>
  [[gnu::target("avx512bf16,avx512bw,avx512f,avx2,fma")]] static void kernel(int64_t kq, const uint32_t* a, int64_t as,
                                                                            const uint32_t* b, int64_t bs, float* c,
                                                                            int64_t ldc, bool load, int64_t n,
                                                                            int64_t rows = R) {
    __m512 acc[R][2];
    GRADUS_UNROLL for (int i = 0; i < R; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
    for (int64_t q = 0; q < kq; ++q, a += as, b += bs) {
      __m512bh b0 = (__m512bh)_mm512_loadu_si512(b), b1 = (__m512bh)_mm512_loadu_si512(b + 16);
      GRADUS_IN_REGISTERS(b0, b1);
      GRADUS_UNROLL for (int i = 0; i < R; ++i) {
        const __m512bh x = (__m512bh)_mm512_set1_epi32(int(a[i]));
        acc[i][0] = _mm512_dpbf16_ps(acc[i][0], x, b0);
        acc[i][1] = _mm512_dpbf16_ps(acc[i][1], x, b1);
      }
    }
    Avx512::store<R>(acc, c, ldc, load, n, rows);
  }
};

/// Words of B (k x n) packed whole as bfloat16 pairs by pack_b_pairs_all.
inline int64_t packed_b_pairs_size(int64_t k, int64_t n) {
  constexpr int64_t NR = Bf16Dot::kNR;
  const int64_t kb = k_block(k);
  int64_t size = 0;
  for (int64_t j0 = 0; j0 < n; j0 += kNC)
    for (int64_t p0 = 0; p0 < k; p0 += kb) size += (std::min(kNC, n - j0) + NR - 1) / NR * NR * ((std::min(kb, k - p0) + 1) / 2);
  return size;
}

/// Packs a block of B (kc x nc, as pack_b takes it) as bfloat16 pair panels into `out`, through
/// the float panels in `scratch` (kc x nc rounded up to whole panels).
inline void pack_b_pairs(const float* b, int64_t rb, int64_t cb, int64_t kc, int64_t nc, float* scratch,
                         uint32_t* out) {
  constexpr int64_t NR = Bf16Dot::kNR;
  const int64_t kq = (kc + 1) / 2;
  pack_b<NR>(b, rb, cb, kc, nc, scratch);
  for (int64_t jp = 0; jp * NR < nc; ++jp) pair_panel<NR>(scratch + jp * kc * NR, kc, out + jp * kq * NR);
}

/// Packs all of B(p, j) = b[p * rb + j * cb] (k x n) as bfloat16 pairs, block after block in the
/// order serial_bf16() visits them; `scratch` holds one float block (kc x nc).
inline void pack_b_pairs_all(const float* b, int64_t rb, int64_t cb, int64_t k, int64_t n, uint32_t* out, float* scratch) {
  constexpr int64_t NR = Bf16Dot::kNR;
  const int64_t kb = k_block(k);
  for (int64_t j0 = 0; j0 < n; j0 += kNC) {
    const int64_t nc = std::min(kNC, n - j0), panels = (nc + NR - 1) / NR;
    for (int64_t p0 = 0; p0 < k; p0 += kb) {
      const int64_t kc = std::min(kb, k - p0);
      pack_b_pairs(b + p0 * rb + j0 * cb, rb, cb, kc, nc, scratch, out);
      out += panels * NR * ((kc + 1) / 2);
    }
  }
}

/// The floats of scratch serial_bf16() needs for an m x k x n product (B packed or not).
inline int64_t bf16_scratch_floats(int64_t m, int64_t k, int64_t n, bool packed) {
  constexpr int64_t MR = Bf16Dot::kMR, NR = Bf16Dot::kNR;
  const int64_t kmax = std::min(k, k_block(k)), kq = (kmax + 1) / 2;
  const int64_t mp = (std::min(m, kMC) + MR - 1) / MR * MR, np = packed ? 0 : (std::min(n, kNC) + NR - 1) / NR * NR;
  return whole_lines(mp * kmax) + whole_lines(np * kmax) + whole_lines(mp * kq) + np * kq;
}

/// serial() for bfloat16 products on Bf16Dot: C (m x n) = or += bf16(A) · bf16(B), float sums.
/// Each block of A and B is packed as serial() packs it, then as bfloat16 pairs; with `packed`
/// (pack_b_pairs_all's output for this B) B is read from there.
inline void serial_bf16(const float* a, int64_t ra, int64_t ca, const float* b, int64_t rb, int64_t cb, float* c,
                        int64_t ldc, int64_t m, int64_t k, int64_t n, bool add,
                        const uint32_t* packed = nullptr) {
  constexpr int64_t MR = Bf16Dot::kMR, NR = Bf16Dot::kNR;
  if (empty_product(c, ldc, m, k, n, add)) return;
  const int64_t kb = k_block(k), kmax = std::min(k, kb), kqmax = (kmax + 1) / 2;
  const int64_t mp = (std::min(m, kMC) + MR - 1) / MR * MR, np = packed ? 0 : (std::min(n, kNC) + NR - 1) / NR * NR;
  Tensor<float> scratch(Shape{bf16_scratch_floats(m, k, n, packed != nullptr)});
  float* af = scratch.data();                                             // A's block as floats [mp * kmax]
  float* bf = af + whole_lines(mp * kmax);                                // B's block as floats [np * kmax]
  auto* aw = reinterpret_cast<uint32_t*>(bf + whole_lines(np * kmax));    // A's block as pairs [mp * kqmax]
  uint32_t* bw = aw + whole_lines(mp * kqmax);                            // B's block as pairs [np * kqmax]
  for (int64_t j0 = 0; j0 < n; j0 += kNC) {
    const int64_t nc = std::min(kNC, n - j0), panels = (nc + NR - 1) / NR;
    for (int64_t p0 = 0; p0 < k; p0 += kb) {
      const int64_t kc = std::min(kb, k - p0), kq = (kc + 1) / 2;
      const bool load = add || p0 > 0;
      const uint32_t* bblock = bw;
      if (packed) {
        bblock = packed, packed += panels * NR * kq;
      } else {
        pack_b_pairs(b + p0 * rb + j0 * cb, rb, cb, kc, nc, bf, bw);
      }
      for (int64_t i0 = 0; i0 < m; i0 += kMC) {
        const int64_t mc = std::min(kMC, m - i0);
        pack_a<MR>(a + i0 * ra + p0 * ca, ra, ca, mc, kc, af);
        for (int64_t ip = 0; ip * MR < mc; ++ip) pair_panel<MR>(af + ip * kc * MR, kc, aw + ip * kq * MR);
        for (int64_t jr = 0; jr < nc; jr += NR)
          for (int64_t ir = 0; ir < mc; ir += MR)
            tile<Bf16Dot>(std::min(MR, mc - ir), kq, aw + (ir / MR) * kq * MR, bblock + (jr / NR) * kq * NR, NR,
                          c + (i0 + ir) * ldc + j0 + jr, ldc, load, std::min(NR, nc - jr));
      }
    }
  }
}

/// c (m x n) = or += bf16(a) · bf16(b) (each optionally transposed in storage) on Bf16Dot,
/// arranged by ProductPlan as gemm<K>() arranges a float product, with one task per thread, each
/// packing its own blocks of both operands.
inline void gemm_bf16_dot(const float* a, bool ta, const float* b, bool tb, float* c, int64_t m, int64_t k, int64_t n,
                          bool add) {
  const ProductPlan p(a, ta, b, tb, m, k, n, Bf16Dot::kMR, Bf16Dot::kNR, 1);
  run_into(p, c, add, [&](float* dst, int64_t ldc, bool load) {
    if (p.serial()) return serial_bf16(p.a, p.ra, p.ca, p.b, p.rb, p.cb, dst, ldc, p.m, k, p.n, load);
    ThreadPool::instance().run(p.tasks, p.nt, [&](int64_t t) {
      const int64_t lo = p.lo(t), hi = p.hi(t);
      if (p.rows)
        serial_bf16(p.a + lo * p.ra, p.ra, p.ca, p.b, p.rb, p.cb, dst + lo * ldc, ldc, hi - lo, k, p.n, load);
      else
        serial_bf16(p.a, p.ra, p.ca, p.b + lo * p.cb, p.rb, p.cb, dst + lo, ldc, p.m, k, hi - lo, load);
    });
  });
}

// ------------------------------------------------------------ bfloat16 products on AMX tiles

/// AMX (Advanced Matrix Extensions: Sapphire Rapids Xeons and later) multiplies whole tiles of
/// bfloat16s: tdpbf16ps adds A (16 rows x 32 depths) · B (32 depths x 16 columns) to a 16 x 16
/// tile of float sums, 8,192 multiply-adds per instruction. A tile's 16 rows of 64 bytes are
/// loaded from memory at a stride: A's rows as 32 consecutive bfloat16s (16 depth pairs), B's as
/// 16 columns of one depth pair each (word j of pair row q: depth 2q of column j in its low half,
/// 2q + 1 in its high half, pair_panel()'s layout). So A is packed as bfloat16 rows [m16][kqp]
/// words and B as panels of 16 columns [kqp][16], kqp the depth pairs rounded up to 16; rows,
/// columns and depths past the product's are zeros. The kernel keeps a 32 x 32 block of C in four
/// tiles over the whole depth (tmm0-3; A's two tiles in tmm4-5, B's in tmm6-7) and adds it to C
/// through a float buffer. Like vdpbf16ps, tdpbf16ps treats bfloat16 subnormals as zero.
inline constexpr int64_t kAmxPairs = 16;     // depth pairs of one tile
inline constexpr int64_t kAmxBlockCols = 256;  // columns of B the row blocks sweep before the next

/// kq depth pairs rounded up to whole tiles.
inline int64_t amx_pairs(int64_t k) { return ((k + 1) / 2 + kAmxPairs - 1) / kAmxPairs * kAmxPairs; }

/// Words of B (k x n) packed by pack_b_amx, and of A's rows (m x k) packed by pack_a_amx.
inline int64_t amx_b_words(int64_t k, int64_t n) { return (n + 15) / 16 * 16 * amx_pairs(k); }
inline int64_t amx_a_words(int64_t m, int64_t k) { return (m + 15) / 16 * 16 * amx_pairs(k); }

/// Requests the tile data state from Linux (a tile instruction without it faults) and reports
/// whether it was granted; the grant holds for the whole process, and bf16_kernel_supported()
/// asks once.
inline bool amx_permitted() {
#if defined(__linux__) && defined(__x86_64__)
  constexpr long kReqXcompPerm = 0x1023, kXfeatureTileData = 18;  // asm/prctl.h, the XSAVE feature number
  return syscall(SYS_arch_prctl, kReqXcompPerm, kXfeatureTileData) == 0;
#else
  return false;
#endif
}

#define GRADUS_AMX_TARGET gnu::target("amx-tile,amx-bf16,avx512bf16,avx512bw,avx512f,avx2,fma")

/// 16 words, word t = (bf16(x0[t]), bf16(x1[t])): depth pairs from two rows of 16 floats, the
/// lanes in `mask` read (the rest, and all of x1 when !has1, are zeros).
[[GRADUS_AMX_TARGET]] inline __m512i amx_pairs_of_rows(const float* x0, const float* x1, bool has1, __mmask16 mask) {
  const __m512 lo = _mm512_maskz_loadu_ps(mask, x0);
  const __m512 hi = has1 ? _mm512_maskz_loadu_ps(mask, x1) : _mm512_setzero_ps();
  // cvtne2ps gives x0's 16 bfloat16s then x1's; the permutation interleaves them
  const __m512i both = (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
  const __m512i interleave = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22,
                                              6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  return _mm512_permutexvar_epi16(interleave, both);
}

/// 16 words of depth pairs from 32 consecutive depths of one row, the first `count` read.
[[GRADUS_AMX_TARGET]] inline __m512i amx_pairs_of_run(const float* x, int64_t count) {
  return (__m512i)_mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(first_lanes(count - 16), x + 16),
                                      _mm512_maskz_loadu_ps(first_lanes(count), x));
}

/// Transposes the 16 x 16 words in v: four rounds, each exchanging one bit of the row index
/// with the same bit of the column index.
[[GRADUS_AMX_TARGET]] inline void transpose16(__m512i (&v)[16]) {
  GRADUS_UNROLL for (int s = 8; s >= 1; s /= 2) {
    alignas(64) int32_t keep[16], take[16];
    for (int j = 0; j < 16; ++j) {
      keep[j] = j & s ? 16 + j - s : j;  // row i: its own word j, or row i + s's word j - s
      take[j] = j & s ? 16 + j : j + s;  // row i + s: row i's word j + s, or its own word j
    }
    const __m512i ik = _mm512_load_si512(keep), it = _mm512_load_si512(take);
    GRADUS_UNROLL for (int i = 0; i < 16; ++i)
      if (!(i & s)) {
        const __m512i r = v[i], t = v[i + s];
        v[i] = _mm512_permutex2var_epi32(r, ik, t);
        v[i + s] = _mm512_permutex2var_epi32(r, it, t);
      }
  }
}

/// Packs A(i, p) = a[i * ra + p * ca] (m x k; ra == 1 or ca == 1) as bfloat16 rows [m16][kqp].
[[GRADUS_AMX_TARGET]] inline void pack_a_amx(const float* a, int64_t ra, int64_t ca, int64_t m, int64_t k,
                                             uint32_t* out) {
  const int64_t kqp = amx_pairs(k), m16 = (m + 15) / 16 * 16;
  if (ca == 1) {
    for (int64_t i = 0; i < m; ++i) {
      const float* row = a + i * ra;
      uint32_t* o = out + i * kqp;
      int64_t q = 0;
      for (; 2 * q + 32 <= k; q += 16)  // whole runs of 32 depths: no masks
        _mm512_storeu_si512(o + q, (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(row + 2 * q + 16), _mm512_loadu_ps(row + 2 * q)));
      for (; q < kqp; q += 16) _mm512_storeu_si512(o + q, amx_pairs_of_run(row + 2 * q, k - 2 * q));
    }
    std::fill(out + m * kqp, out + m16 * kqp, 0u);
    return;
  }
  // rows contiguous in memory down A's columns: 16 rows of a depth pair at a time, transposed
  for (int64_t i0 = 0; i0 < m16; i0 += 16) {
    const __mmask16 rows = first_lanes(m - i0);
    for (int64_t q0 = 0; q0 < kqp; q0 += 16) {
      __m512i v[16];
      GRADUS_UNROLL for (int t = 0; t < 16; ++t) {
        const int64_t p = 2 * (q0 + t);
        v[t] = p < k ? amx_pairs_of_rows(a + i0 + p * ca, a + i0 + (p + 1) * ca, p + 1 < k, rows)
                     : _mm512_setzero_si512();
      }
      transpose16(v);
      GRADUS_UNROLL for (int t = 0; t < 16; ++t) _mm512_storeu_si512(out + (i0 + t) * kqp + q0, v[t]);
    }
  }
}

/// Packs B(p, j) = b[p * rb + j * cb] (k x n; rb == 1 or cb == 1) as pair panels [n16 / 16][kqp][16].
[[GRADUS_AMX_TARGET]] inline void pack_b_amx(const float* b, int64_t rb, int64_t cb, int64_t k, int64_t n,
                                             uint32_t* out) {
  const int64_t kqp = amx_pairs(k);
  for (int64_t j0 = 0; j0 < n; j0 += 16, out += kqp * 16) {
    const __mmask16 cols = first_lanes(n - j0);
    if (cb == 1) {
      for (int64_t q = 0; q < kqp; ++q)
        _mm512_storeu_si512(out + q * 16, 2 * q < k ? amx_pairs_of_rows(b + 2 * q * rb + j0, b + (2 * q + 1) * rb + j0,
                                                                         2 * q + 1 < k, cols)
                                                    : _mm512_setzero_si512());
      continue;
    }
    // each column contiguous in depth: 16 pairs of 16 columns at a time, transposed
    for (int64_t q0 = 0; q0 < kqp; q0 += 16) {
      __m512i v[16];
      GRADUS_UNROLL for (int j = 0; j < 16; ++j) v[j] = j0 + j < n ? amx_pairs_of_run(b + (j0 + j) * cb + 2 * q0, k - 2 * q0)
                                                                   : _mm512_setzero_si512();
      transpose16(v);
      GRADUS_UNROLL for (int t = 0; t < 16; ++t) _mm512_storeu_si512(out + (q0 + t) * 16, v[t]);
    }
  }
}

/// The tile configuration every AMX product loads: palette 1, eight tiles of 16 rows x 64 bytes.
struct alignas(64) AmxConfig {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t bytes[16] = {64, 64, 64, 64, 64, 64, 64, 64};
  uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 16, 16};
};

/// C block (MT x NT tiles of 16 x 16) = A's MT tiles of rows (a, `kqp` pairs each) · B's NT
/// panels (b, one after another), written to `out` [32][32].
template <int MT, int NT>
[[GRADUS_AMX_TARGET]] inline void amx_block(const uint32_t* a, const uint32_t* b, int64_t kqp, float* out) {
#if defined(__x86_64__)  // the tile instructions exist in 64-bit mode only (amx_permitted() is false elsewhere)
  _tile_zero(0);
  if constexpr (NT > 1) _tile_zero(1);
  if constexpr (MT > 1) _tile_zero(2);
  if constexpr (MT > 1 && NT > 1) _tile_zero(3);
  const int64_t as = kqp * 4;  // bytes from one row of A to the next
  for (int64_t q = 0; q < kqp; q += kAmxPairs) {
    _tile_loadd(4, a + q, as);
    _tile_loadd(6, b + q * 16, 64);
    _tile_dpbf16ps(0, 4, 6);
    if constexpr (NT > 1) {
      _tile_loadd(7, b + kqp * 16 + q * 16, 64);
      _tile_dpbf16ps(1, 4, 7);
    }
    if constexpr (MT > 1) {
      _tile_loadd(5, a + 16 * kqp + q, as);
      _tile_dpbf16ps(2, 5, 6);
      if constexpr (NT > 1) _tile_dpbf16ps(3, 5, 7);
    }
  }
  _tile_stored(0, out, 128);
  if constexpr (NT > 1) _tile_stored(1, out + 16, 128);
  if constexpr (MT > 1) _tile_stored(2, out + 16 * 32, 128);
  if constexpr (MT > 1 && NT > 1) _tile_stored(3, out + 16 * 32 + 16, 128);
#endif
}

/// C (m x n) = or (`add`) += the 32 x 32 buffer `out`'s first m rows and n columns.
[[GRADUS_AMX_TARGET]] inline void amx_store(const float* out, float* c, int64_t ldc, int64_t m, int64_t n, bool add) {
  const __mmask16 lo = first_lanes(n), hi = first_lanes(n - 16);
  for (int64_t i = 0; i < m; ++i, c += ldc, out += 32) {
    __m512 x = _mm512_maskz_loadu_ps(lo, out), y = _mm512_maskz_loadu_ps(hi, out + 16);  // only what the tiles wrote
    if (add) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(lo, c)), y = _mm512_add_ps(y, _mm512_maskz_loadu_ps(hi, c + 16));
    _mm512_mask_storeu_ps(c, lo, x);
    _mm512_mask_storeu_ps(c + 16, hi, y);
  }
}

/// C (m x n) = or (`add`) += bf16(A) · bf16(B) on AMX tiles, A(i, p) = a[i * ra + p * ca] and
/// B(p, j) = b[p * rb + j * cb], on the calling thread. Each operand is packed whole here unless
/// `packed_a` (pack_a_amx's output for A) or `packed_b` (pack_b_amx's for B) holds it; the row
/// blocks then sweep kAmxBlockCols columns of B at a time, which stay in L2.
[[GRADUS_AMX_TARGET]] inline void serial_amx(const float* a, int64_t ra, int64_t ca, const float* b, int64_t rb,
                                             int64_t cb, float* c, int64_t ldc, int64_t m, int64_t k, int64_t n,
                                             bool add, const uint32_t* packed_a = nullptr,
                                             const uint32_t* packed_b = nullptr) {
  if (empty_product(c, ldc, m, k, n, add)) return;
  const int64_t kqp = amx_pairs(k);
  const int64_t a_words = packed_a ? 0 : whole_lines(amx_a_words(m, k));
  Tensor<float> scratch(Shape{a_words + (packed_b ? 0 : amx_b_words(k, n))});
  if (!packed_a) {
    auto* ap = reinterpret_cast<uint32_t*>(scratch.data());
    pack_a_amx(a, ra, ca, m, k, ap);
    packed_a = ap;
  }
  if (!packed_b) {
    auto* bp = reinterpret_cast<uint32_t*>(scratch.data()) + a_words;
    pack_b_amx(b, rb, cb, k, n, bp);
    packed_b = bp;
  }
  asm volatile("" ::: "memory");  // the tile loads below read the packed words (asm the compiler cannot see into)
#if defined(__x86_64__)
  static const AmxConfig config;
  _tile_loadconfig(&config);
#endif
  alignas(64) float out[32 * 32];
  for (int64_t j0 = 0; j0 < n; j0 += kAmxBlockCols)
    for (int64_t i = 0; i < m; i += 32)
      for (int64_t j = j0; j < std::min(n, j0 + kAmxBlockCols); j += 32) {
        const uint32_t* ai = packed_a + i * kqp;
        const uint32_t* bj = packed_b + j * kqp;  // panel j / 16
        const bool two_rows = m - i > 16, two_cols = n - j > 16;
        if (two_rows && two_cols) amx_block<2, 2>(ai, bj, kqp, out);
        else if (two_rows) amx_block<2, 1>(ai, bj, kqp, out);
        else if (two_cols) amx_block<1, 2>(ai, bj, kqp, out);
        else amx_block<1, 1>(ai, bj, kqp, out);
        amx_store(out, c + i * ldc + j, ldc, std::min<int64_t>(32, m - i), std::min<int64_t>(32, n - j), add);
      }
#if defined(__x86_64__)
  _tile_release();
#endif
}

/// c (m x n) = or += bf16(a) · bf16(b) (each optionally transposed in storage) on AMX tiles,
/// arranged by ProductPlan: the operand every task reads is packed once, by the tasks together
/// (16-row or 16-column panels are independent), then each task packs and multiplies its own
/// rows of A (columns of B).
inline void gemm_bf16_amx(const float* a, bool ta, const float* b, bool tb, float* c, int64_t m, int64_t k, int64_t n,
                          bool add) {
  const ProductPlan p(a, ta, b, tb, m, k, n, 32, 32, 1);
  run_into(p, c, add, [&](float* dst, int64_t ldc, bool load) {
    if (p.serial()) return serial_amx(p.a, p.ra, p.ca, p.b, p.rb, p.cb, dst, ldc, p.m, k, p.n, load);
    const int64_t kqp = amx_pairs(k), other = p.rows ? p.n : p.m, panels = (other + 15) / 16;
    Tensor<float> shared(Shape{p.rows ? amx_b_words(k, p.n) : amx_a_words(p.m, k)});
    auto* sp = reinterpret_cast<uint32_t*>(shared.data());
    ThreadPool::instance().run(p.nt, p.nt, [&](int64_t t) {  // panels [lo, hi) of the shared operand
      const int64_t lo = panels * t / p.nt * 16, hi = std::min(other, panels * (t + 1) / p.nt * 16);
      if (lo >= hi) return;
      if (p.rows)
        pack_b_amx(p.b + lo * p.cb, p.rb, p.cb, k, hi - lo, sp + lo * kqp);
      else
        pack_a_amx(p.a + lo * p.ra, p.ra, p.ca, hi - lo, k, sp + lo * kqp);
    });
    ThreadPool::instance().run(p.tasks, p.nt, [&](int64_t t) {
      const int64_t lo = p.lo(t), hi = p.hi(t);
      if (p.rows)
        serial_amx(p.a + lo * p.ra, p.ra, p.ca, p.b, p.rb, p.cb, dst + lo * ldc, ldc, hi - lo, k, p.n, load, nullptr,
                   sp);
      else
        serial_amx(p.a, p.ra, p.ca, p.b + lo * p.cb, p.rb, p.cb, dst + lo, ldc, p.m, k, hi - lo, load, sp,
                   nullptr);
    });
  });
}
#undef GRADUS_AMX_TARGET

}  // namespace sgemm

/// Runs f(K{}) with the blocked micro-kernel struct `kernel` names — sgemm::Avx512 for avx512,
/// sgemm::Avx2 for avx2 — and returns true; returns false, calling nothing, for the other kernels.
template <class F>
bool with_blocked_kernel(GemmKernel kernel, F&& f) {
  if (kernel == GemmKernel::avx512) return f(sgemm::Avx512{}), true;
  if (kernel == GemmKernel::avx2) return f(sgemm::Avx2{}), true;
  return false;
}

/// Whether `kernel` runs a float product of m rows of a row-major A (k deep, n columns, B stored
/// transposed when `tb`) faster on the in-place kernels (thin_gemm) than on the blocked kernels,
/// the loops or Eigen: where they measured faster on Zen 4 at one thread (docs/performance.md,
/// "Products of a few rows"). They read B once for every 4 to 6 rows; the blocked kernels pack B,
/// transposing it when it is stored transposed, and run a partial 12-row panel as blocks of 8, 4,
/// 2 and 1 rows, each reading all of B (7 x 1024 x 1024: 843 us against 178 in place), and the
/// loops and Eigen read B once per row (4 x 784 x 500: 75 and 121 us on Eigen's GEMM with B
/// row-major and transposed, 30 in place). Against a row-major B of 16 columns or more: 2 to 5
/// rows, and with AVX-512 6, 7 and 13 to 19 (the blocked kernels were level or ahead with 8 to
/// 12, and from 20). Against a transposed B: up to 5 rows at least 32 deep, up to 15 at least 128
/// deep, and with AVX-512 up to 23 at least 256 deep (shallower ones leave the dot products'
/// lanes unused). Never one row: the loops and Eigen read B once as well (the AVX2 kernel's two
/// accumulators per row took 34 against 28 us on 784 x 500, the dot kernel 0.34 against 0.23 us
/// on a transposed 500 x 10); never AVX2 from 6 rows against a row-major B (its 1-row remainder
/// is bound by its two accumulators: 13 x 1024 x 1024 took 875 against 591 us).
inline bool inplace_is_faster(GemmKernel kernel, int64_t m, int64_t k, int64_t n, bool tb) {
  const bool wide = kernel == GemmKernel::avx512;
  if ((!wide && kernel != GemmKernel::avx2) || m < 2) return false;
  if (tb) return (m < 6 && k >= 32) || (m < 16 && k >= 128) || (wide && m < 24 && k >= 256);
  return n >= 16 && (m < 6 || (wide && (m < 8 || (m > 12 && m < 20))));
}

/// c (m x n) = or (`add`) += a (m x k) · b for few rows of A, A's rows contiguous, on the
/// in-place kernels of gemm_inplace.hpp for `kernel` (avx512 or avx2): b (k x n, or n x k when
/// `tb`) is read where it lies, once for every 4 to 6 rows. Above kGemmParallelWork multiply-adds,
/// outside a task of the thread pool, its columns split over the threads, each reading only its
/// own columns of B.
inline void thin_gemm(GemmKernel kernel, const float* a, const float* b, bool tb, float* c, int64_t m, int64_t k,
                      int64_t n, bool add) {
  if (k <= 0) {
    if (!add) std::fill_n(c, m * n, 0.f);
    return;
  }
  const bool wide = kernel == GemmKernel::avx512;
  const bool parallel = m * n * k >= kGemmParallelWork;
  // chunks of whole blocks of columns: a row-major panel of 64 (16) columns, 8 (6 with AVX2) of
  // a transposed B's rows (AVX-512 takes 5 or 6 of them for 4 or 5 rows of A)
  const int64_t align = tb ? (wide ? 8 : 6) : (wide ? 64 : 16);
  parallel_chunks(n, align, [&](int, int64_t j0, int64_t j1) {
    if (wide) {
      if (tb) return inplace::gemm_bt_avx512(a, b + j0 * k, c + j0, m, k, j1 - j0, n, add);
      return inplace::gemm_avx512(a, b + j0, c + j0, m, k, j1 - j0, n, add);
    }
    if (tb) return inplace::gemm_bt_avx2(a, b + j0 * k, c + j0, m, k, j1 - j0, n, add);
    inplace::gemm_avx2(a, b + j0, c + j0, m, k, j1 - j0, n, add);
  }, parallel ? 1 : n + 1);
}
#endif  // GRADUS_SGEMM_X86

/// c (m x n) = or (`add`) += a (m x k) * b (k x n), each optionally transposed in storage, as
/// plain loops compiled for the widest ISA (with_isa): the float products the blocked kernels do
/// not take (few rows, or few rows and columns: packing would cost as much as the product) and
/// every float product on an x86 CPU without AVX2. Rows of C are independent, split into chunks
/// for the thread pool when the product is large. With B's rows contiguous each row of C gathers
/// B's rows scaled by a's, four at a time over 512-column strips of C (kept in L1); with B stored
/// transposed each element is a dot product of contiguous rows (a's copied contiguous first when
/// a is transposed).
template <class T>
void loop_gemm(const T* a, bool ta, const T* b, bool tb, T* c, int64_t m, int64_t k, int64_t n, bool add) {
  constexpr int64_t kStrip = 512;
  const int64_t ra = ta ? 1 : k, ca = ta ? m : 1;  // a(i, p) = a[i ra + p ca]
  const bool parallel = m * n * k >= kGemmParallelWork;
  parallel_chunks(m, 1, [&](int, int64_t i0, int64_t i1) {
    alignas(64) T arow[kStrip];  // a's row i, contiguous (B transposed, A transposed)
    with_isa([&] {
      for (int64_t i = i0; i < i1; ++i) {
        T* __restrict ci = c + i * n;
        const T* ai = a + i * ra;
        if (!add) std::fill(ci, ci + n, T(0));
        if (!tb) {
          for (int64_t j0 = 0; j0 < n; j0 += kStrip) {
            const int64_t w = std::min(kStrip, n - j0);
            T* __restrict cs = ci + j0;
            int64_t p = 0;
            for (; p + 4 <= k; p += 4) {
              const T s0 = ai[p * ca], s1 = ai[(p + 1) * ca], s2 = ai[(p + 2) * ca], s3 = ai[(p + 3) * ca];
              const T *__restrict b0 = b + p * n + j0, *__restrict b1 = b0 + n, *__restrict b2 = b1 + n,
                                   *__restrict b3 = b2 + n;
              GRADUS_SIMD
              for (int64_t j = 0; j < w; ++j) cs[j] += (s0 * b0[j] + s1 * b1[j]) + (s2 * b2[j] + s3 * b3[j]);
            }
            for (; p < k; ++p) {
              const T s = ai[p * ca];
              const T* __restrict bp = b + p * n + j0;
              GRADUS_SIMD
              for (int64_t j = 0; j < w; ++j) cs[j] += s * bp[j];
            }
          }
        } else {
          for (int64_t p0 = 0; p0 < k; p0 += kStrip) {
            const int64_t d = std::min(kStrip, k - p0);
            const T* __restrict x = ai + p0;
            if (ta) {
              for (int64_t p = 0; p < d; ++p) arow[p] = ai[(p0 + p) * ca];
              x = arow;
            }
            int64_t j = 0;
            for (; j + 4 <= n; j += 4) {  // four dot products share the loads of x
              const T *__restrict y0 = b + j * k + p0, *__restrict y1 = y0 + k, *__restrict y2 = y1 + k,
                                  *__restrict y3 = y2 + k;
              T d0 = 0, d1 = 0, d2 = 0, d3 = 0;
              GRADUS_SIMD_REDUCTION(+, d0, d1, d2, d3)
              for (int64_t p = 0; p < d; ++p) d0 += x[p] * y0[p], d1 += x[p] * y1[p], d2 += x[p] * y2[p], d3 += x[p] * y3[p];
              ci[j] += d0, ci[j + 1] += d1, ci[j + 2] += d2, ci[j + 3] += d3;
            }
            for (; j < n; ++j) {
              const T* __restrict y = b + j * k + p0;
              T dot = 0;
              GRADUS_SIMD_REDUCTION(+, dot)
              for (int64_t p = 0; p < d; ++p) dot += x[p] * y[p];
              ci[j] += dot;
            }
          }
        }
      }
    });
  }, parallel ? 1 : m + 1);
}

/// c (m x n) = or += a (m x k) * b (k x n) with Eigen's GEMM, each optionally transposed in
/// storage; one thread below kGemmParallelWork multiply-adds and inside a task of the thread
/// pool (Eigen would otherwise start an OpenMP team there: it only sees OpenMP's own regions).
template <class T>
void eigen_gemm(const T* a, bool ta, const T* b, bool tb, T* c, int64_t m, int64_t k, int64_t n, bool add) {
#if defined(_OPENMP)
  struct SerialScope {  // omp_set_num_threads changes only this thread's setting, which Eigen reads
    int prev = omp_get_max_threads();
    bool active;
    explicit SerialScope(bool on) : active(on) {
      if (active) omp_set_num_threads(1);
    }
    ~SerialScope() {
      if (active) omp_set_num_threads(prev);
    }
  } serial(m * n * k < kGemmParallelWork || ThreadPool::in_task());
#endif
  Eigen::Map<RowMat<T>> C(c, m, n);
  auto run = [&](const auto& A, const auto& B) {
    if (add)
      C.noalias() += A * B;
    else
      C.noalias() = A * B;
  };
  const CMatMap<T> A(a, ta ? k : m, ta ? m : k), B(b, tb ? n : k, tb ? k : n);
  if (!ta && !tb) run(A, B);
  else if (ta && !tb) run(A.transpose(), B);
  else if (!ta && tb) run(A, B.transpose());
  else run(A.transpose(), B.transpose());
}

/// How float products run under gd::autocast(gd::bf16): `amx` on AMX tiles (sgemm::serial_amx),
/// `dot` on the AVX512-BF16 dot-product kernel (sgemm::Bf16Dot), both over inputs packed as
/// bfloat16, or `convert`, where the CPU has neither: the inputs rounded to bfloat16 (kept as
/// floats) and multiplied by the float kernels. Either way every product of two bfloat16s is
/// exact in float and the sums are float's.
enum class Bf16Kernel { convert, dot, amx };

inline constexpr std::string_view bf16_kernel_name(Bf16Kernel k) {
  return k == Bf16Kernel::amx ? "amx" : k == Bf16Kernel::dot ? "dot" : "convert";
}

/// Whether this build and this CPU can run `k` (convert: always; dot: x86 with AVX512-BF16; amx:
/// x86-64 Linux with AMX-BF16 and AVX512-BF16, the kernel having granted the tile state). The
/// CPU is asked once: in a virtual machine each cpuid traps to the hypervisor (about 30 us a
/// product on a 2-vCPU Xeon guest when every product asked).
inline bool bf16_kernel_supported(Bf16Kernel k) {
  if (k == Bf16Kernel::convert) return true;
#if defined(GRADUS_SGEMM_X86) && GRADUS_AVX512_KERNELS
  static const unsigned has = [] {  // bit 0: dot, bit 1: amx
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;  // CPUID.(EAX=7, ECX=1):EAX bit 5 is AVX512_BF16
    if (!__builtin_cpu_supports("avx512bw") || __get_cpuid_max(0, nullptr) < 7) return 0u;
    __cpuid_count(7, 1, eax, ebx, ecx, edx);
    if (!((eax >> 5) & 1u)) return 0u;
    __cpuid_count(7, 0, eax, ebx, ecx, edx);  // EDX bit 22 is AMX-BF16, bit 24 AMX-TILE
    return ((edx >> 22) & 1u) && ((edx >> 24) & 1u) && sgemm::amx_permitted() ? 3u : 1u;
  }();
  return has & (k == Bf16Kernel::dot ? 1u : 2u);
#else
  return false;
#endif
}

/// Whether the dot kernel multiplies faster than the float kernel on this CPU, so that
/// bf16_kernel() picks it unasked: on AMD's cores, not on Intel's. `vdpbf16ps` does two depths
/// per lane, and Zen 4 issues it as often as a 512-bit FMA (both on its 256-bit units): the
/// large products of the MLP and CNN steps ran 1.7-1.9x as fast. Intel's cores with AVX512-BF16
/// (Cooper Lake, and Sapphire Rapids and later where a virtual machine hides AMX) issue it on one
/// port and FMAs on two, so it does no more multiply-adds a cycle, and the pair packing is extra:
/// on a 5th-generation Xeon guest it ran at 0.6x the float kernel (1024^3: 73 against 116
/// GFLOP/s), and the CNN step under autocast(bf16) took 56-65 ms against 32-37 on the conversion
/// (docs/performance.md, "bfloat16 on the CPU").
inline bool bf16_dot_is_faster() {
#if defined(GRADUS_SGEMM_X86)
  return __builtin_cpu_is("amd");
#else
  return false;
#endif
}

/// The bfloat16 product kernel, chosen on first use: GRADUS_BF16_KERNEL (amx, dot or convert)
/// when it names one the CPU supports, else where float products use the AVX-512 kernel amx
/// where the CPU has it, dot where it has it and it is the faster (bf16_dot_is_faster()), else
/// convert.
inline Bf16Kernel bf16_kernel() {
  static const Bf16Kernel chosen = [] {
    const char* env = std::getenv("GRADUS_BF16_KERNEL");
    for (Bf16Kernel k : {Bf16Kernel::convert, Bf16Kernel::dot, Bf16Kernel::amx})
      if (env && bf16_kernel_name(k) == env && bf16_kernel_supported(k)) return k;
    if (gemm_kernel() != GemmKernel::avx512) return Bf16Kernel::convert;
    if (bf16_kernel_supported(Bf16Kernel::amx)) return Bf16Kernel::amx;
    if (bf16_kernel_supported(Bf16Kernel::dot) && bf16_dot_is_faster()) return Bf16Kernel::dot;
    return Bf16Kernel::convert;
  }();
  return chosen;
}

/// dst[i] = src[i] rounded to the nearest bfloat16 (gradus::round_to_bfloat16), i < n.
inline void round_to_bfloat16_n(const float* src, int64_t n, float* dst) {
  with_isa([&] {
    GRADUS_SIMD
    for (int64_t i = 0; i < n; ++i) dst[i] = round_to_bfloat16(src[i]);
  });
}

template <class T>
void gemm_native(const T* a, bool ta, const T* b, bool tb, T* c, int64_t m, int64_t k, int64_t n, bool add);

/// c (m x n) = or (`add`) += bf16(a) · bf16(b), each optionally transposed in storage, with
/// `kernel`: the float products of gd::autocast(gd::bf16). A thin product (one gemm() runs as
/// loops) is converted even where `dot` is asked for. Throws value_error when the CPU lacks
/// `kernel`'s instructions.
inline void gemm_bf16(const float* a, bool ta, const float* b, bool tb, float* c, int64_t m, int64_t k, int64_t n,
                      bool add, Bf16Kernel kernel) {
  GRADUS_CHECK(value_error, bf16_kernel_supported(kernel), "gemm: this CPU or build has no bfloat16 ",
               bf16_kernel_name(kernel), " kernel");
#if defined(GRADUS_SGEMM_X86) && GRADUS_AVX512_KERNELS
  // AMX runs thin products too: padded to whole tiles, 128x500x10 takes 8 us against the dot
  // kernel's 26 (and the float kernel's 10), 4x784x500 73 us against the conversion's 193
  if (kernel == Bf16Kernel::amx) return sgemm::gemm_bf16_amx(a, ta, b, tb, c, m, k, n, add);
  if (kernel == Bf16Kernel::dot && m >= 6 && (n >= 12 || m >= 16))
    return sgemm::gemm_bf16_dot(a, ta, b, tb, c, m, k, n, add);
#endif
  Tensor<float> ar(Shape{m * k}), br(Shape{k * n});
  round_to_bfloat16_n(a, m * k, ar.data());
  round_to_bfloat16_n(b, k * n, br.data());
  gemm_native(ar.data(), ta, br.data(), tb, c, m, k, n, add);
}

/// c (m x n) = or (`add`) += a (m x k) * b (k x n), each optionally transposed in storage, on
/// exactly `kernel` when T is float (doubles run on Eigen, or on loops when `kernel` is loops).
/// Throws value_error when the CPU lacks the kernel's instructions. Tests and benchmarks use it to compare the kernels.
template <class T>
void gemm(const T* a, bool ta, const T* b, bool tb, T* c, int64_t m, int64_t k, int64_t n, bool add,
          GemmKernel kernel) {
  GRADUS_CHECK(value_error, gemm_kernel_supported(kernel), "gemm: this CPU or build has no ",
               gemm_kernel_name(kernel), " kernel");
#if defined(GRADUS_SGEMM_X86)
  if constexpr (std::is_same_v<T, float>)
    if (with_blocked_kernel(kernel, [&](auto kern) { sgemm::gemm<decltype(kern)>(a, ta, b, tb, c, m, k, n, add); }))
      return;
  if (kernel == GemmKernel::loops) return loop_gemm(a, ta, b, tb, c, m, k, n, add);
#endif
  eigen_gemm(a, ta, b, tb, c, m, k, n, add);
}

/// c (m x n) = or (`add`) += a (m x k) * b (k x n), each optionally transposed in storage, on
/// gemm_kernel() for float; under gd::autocast(gd::bf16) a float product's inputs are rounded to
/// bfloat16 and multiplied on bf16_kernel() (float sums). Double products, and float ones under
/// fp16 (a GPU's precision), are unchanged.
template <class T>
void gemm(const T* a, bool ta, const T* b, bool tb, T* c, int64_t m, int64_t k, int64_t n, bool add) {
  if constexpr (std::is_same_v<T, float>)
    if (autocast_precision() == Precision::bf16) return gemm_bf16(a, ta, b, tb, c, m, k, n, add, bf16_kernel());
  gemm_native(a, ta, b, tb, c, m, k, n, add);
}

/// gemm() in the element type's own precision, whatever the autocast scope.
template <class T>
void gemm_native(const T* a, bool ta, const T* b, bool tb, T* c, int64_t m, int64_t k, int64_t n, bool add) {
#if defined(GRADUS_SGEMM_X86)
  if constexpr (std::is_same_v<T, float>) {
    // Products of few rows that the in-place kernels do not take (below), and those of few rows
    // and few columns, which no register block fills, run as loops: packing B would cost as much
    // as the product. So does everything on a CPU without AVX2. Eigen's float GEMM is not
    // instantiated then: it alone took 2 s of every header-only program's compile time, and in a
    // build without -march its SSE packets ran products of 1-5 rows 1.5-2.3x slower than the
    // loops (one row against a transposed B: 0.87x, on an AVX-512 EPYC).
    const GemmKernel kernel = gemm_kernel();
    if (!ta && inplace_is_faster(kernel, m, k, n, tb)) return thin_gemm(kernel, a, b, tb, c, m, k, n, add);
    if (m >= 6 && (n >= 12 || m >= 16) &&
        with_blocked_kernel(kernel, [&](auto kern) { sgemm::gemm<decltype(kern)>(a, ta, b, tb, c, m, k, n, add); }))
      return;
#if defined(__AVX2__)
    // A build for AVX2 or wider (-march=native): Eigen's packets are as wide as the CPU's, and
    // its GEMM, which reads B once for all the rows, beats the loops from two rows on (4 x 784 x
    // 500: 45 against 64 us with AVX-512).
    if (kernel != GemmKernel::loops) return eigen_gemm(a, ta, b, tb, c, m, k, n, add);
#endif
    return loop_gemm(a, ta, b, tb, c, m, k, n, add);
  } else {  // an else, so that the float instantiation does not instantiate Eigen's float GEMM
    eigen_gemm(a, ta, b, tb, c, m, k, n, add);
  }
#else
  eigen_gemm(a, ta, b, tb, c, m, k, n, add);
#endif
}

/// B (k x n, stored transposed when `tb`) packed once for many products a · B on the calling
/// thread — a convolution's filter against tile after tile of patches — so that each product
/// packs only its A. Where the float kernels would not run on a packed B (doubles, Eigen, a B of
/// few columns that gemm() runs transposed), multiply() is gemm(). Made under
/// gd::autocast(gd::bf16), it multiplies in bfloat16 as gemm() would there: B is packed as
/// bfloat16 panels for the AMX kernel, as bfloat16 pairs for the dot kernel, or rounded once for
/// the convert kernel.
///   GemmB<float> wb(w, false, K, F);
///   for (...) wb.multiply(patches, false, out + t0 * F, rows, false);
template <class T>
class GemmB {
 public:
  GemmB(const T* b, bool tb, int64_t k, int64_t n) : b_(b), tb_(tb), k_(k), n_(n) {
#if defined(GRADUS_SGEMM_X86)
    if constexpr (std::is_same_v<T, float>) {
      kernel_ = gemm_kernel();
      if (autocast_precision() == Precision::bf16) {
        bf16_ = true, bf16_kernel_ = bf16_kernel();
#if GRADUS_AVX512_KERNELS
        if (bf16_kernel_ == Bf16Kernel::amx) {
          if (k <= 0) return;  // gemm_bf16() runs these
          packed_ = Tensor<float>(Shape{sgemm::amx_b_words(k, n)}), is_packed_ = true;
          sgemm::pack_b_amx(b, tb ? 1 : n, tb ? k : 1, k, n, reinterpret_cast<uint32_t*>(packed_.data()));
          return;
        }
        if (bf16_kernel_ == Bf16Kernel::dot) {
          if (k <= 0 || n < 12 || 4 * n < 3 * sgemm::Bf16Dot::kNR) return;  // gemm_bf16() runs these
          constexpr int64_t NR = sgemm::Bf16Dot::kNR;
          Tensor<float> scratch(Shape{(std::min(n, sgemm::kNC) + NR - 1) / NR * NR * std::min(k, sgemm::k_block(k))});
          packed_ = Tensor<float>(Shape{sgemm::packed_b_pairs_size(k, n)}), is_packed_ = true;
          sgemm::pack_b_pairs_all(b, tb ? 1 : n, tb ? k : 1, k, n, reinterpret_cast<uint32_t*>(packed_.data()),
                                  scratch.data());
          return;
        }
#endif
        rounded_ = Tensor<float>(Shape{k * n});
        round_to_bfloat16_n(b, k * n, rounded_.data());
        b = b_ = rounded_.data();
      }
      auto pack = [&](auto kernel) {
        using K = decltype(kernel);
        if (k <= 0 || n < 12 || 4 * n < 3 * K::kNR) return;  // gemm() would run these otherwise
        packed_ = Tensor<float>(Shape{sgemm::packed_b_size<K>(k, n)}), is_packed_ = true;
        sgemm::pack_b_all<K>(b, tb ? 1 : n, tb ? k : 1, k, n, packed_.data());
      };
      with_blocked_kernel(kernel_, pack);
    }
#endif
  }

  /// Whether B is packed (else multiply() is gemm(): doubles, Eigen, or a B of few columns).
  bool packed() const { return is_packed_; }

  /// c (m x n) = or (`add`) += a (m x k) · B, a stored transposed when `ta`, on the calling thread
  /// when B is packed.
  void multiply(const T* a, bool ta, T* c, int64_t m, bool add) const {
#if defined(GRADUS_SGEMM_X86)
    if constexpr (std::is_same_v<T, float>) {
      const int64_t ra = ta ? 1 : k_, ca = ta ? m : 1, rb = tb_ ? 1 : n_, cb = tb_ ? k_ : 1;
#if GRADUS_AVX512_KERNELS
      if (packed() && bf16_ && bf16_kernel_ == Bf16Kernel::amx)  // any m: the tiles pad it
        return sgemm::serial_amx(a, ra, ca, b_, rb, cb, c, n_, m, k_, n_, add, nullptr,
                                 reinterpret_cast<const uint32_t*>(packed_.data()));
#endif
      if (packed() && m >= 6) {
#if GRADUS_AVX512_KERNELS
        if (bf16_ && bf16_kernel_ == Bf16Kernel::dot)
          return sgemm::serial_bf16(a, ra, ca, b_, rb, cb, c, n_, m, k_, n_, add,
                                    reinterpret_cast<const uint32_t*>(packed_.data()));
#endif
        Tensor<float> rounded(Shape{bf16_ ? m * k_ : 0});  // the convert kernel: A rounded too
        if (bf16_) round_to_bfloat16_n(a, m * k_, rounded.data()), a = rounded.data();
        with_blocked_kernel(kernel_, [&](auto kern) {  // packed: kernel_ is one of the two
          sgemm::serial<decltype(kern)>(a, ra, ca, b_, rb, cb, c, n_, m, k_, n_, add, packed_.data());
        });
        return;
      }
      if (bf16_) return gemm_bf16(a, ta, b_, tb_, c, m, k_, n_, add, bf16_kernel_);
    }
#endif
    gemm_native(a, ta, b_, tb_, c, m, k_, n_, add);
  }

 private:
  const T* b_;
  bool tb_;
  int64_t k_, n_;
  GemmKernel kernel_ = GemmKernel::eigen;
  bool bf16_ = false;  // made under gd::autocast(gd::bf16)
  Bf16Kernel bf16_kernel_ = Bf16Kernel::convert;
  Tensor<float> packed_;   // B's panels: floats, or bfloat16 pairs for the AMX and dot kernels
  bool is_packed_ = false;  // whether packed_ holds them
  Tensor<float> rounded_;  // B rounded to bfloat16 (the convert kernel)
};

}  // namespace gradus::backend::cpu
GRADUS_SIMD_HINTS_END
