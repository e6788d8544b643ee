// gradus/backend/cuda/blas.hpp — matrix products on a GPU through cuBLAS, loaded at run time.
//
// cuBLAS is column-major; gradus' tensors are row-major. A row-major r×c matrix is the
// column-major c×r matrix of its transpose, so C = op(A)·op(B) is computed as the column-major
// Cᵀ = op(B)ᵀ·op(A)ᵀ: the operands swap places and each keeps its own transpose flag, with no
// copy. TF32 tensor-core math is off unless `gd::cuda::allow_tf32(true)` (float products then
// round their inputs to 10-bit mantissas, as PyTorch's allow_tf32 does). Under gd::autocast
// (core/precision.hpp) a float product goes to cublasGemmEx with the compute type
// CUBLAS_COMPUTE_32F_FAST_16BF or _FAST_16F: float operands and result, inputs rounded to
// bfloat16 or half on tensor cores, accumulation in float.
//
//   backend::cuda::gemm(a, false, b, true, c, m, k, n, /*add=*/false, gd::cuda(0));
#pragma once
#include <algorithm>
#include <array>
#include <atomic>
#include <mutex>
#include <string>
#include <type_traits>

#include "gradus/backend/cuda/memory.hpp"
#include "gradus/backend/cuda/runtime.hpp"
#include "gradus/core/compiled.hpp"
#include "gradus/core/precision.hpp"

namespace gradus::backend::cuda {

/// The part of cuBLAS gradus uses (signatures of cublas_api.h; cublasHandle_t is an opaque
/// pointer, the enums are ints).
struct Cublas {
  using Create = int (*)(void**);
  using SetMathMode = int (*)(void*, int);
  using StatusString = const char* (*)(int);
  template <class T>
  using Gemm = int (*)(void*, int, int, int, int, int, const T*, const T*, int, const T*, int, const T*, T*, int);
  /// cublasGemmEx: (handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta,
  /// C, Ctype, ldc, computeType, algo).
  using GemmEx = int (*)(void*, int, int, int, int, int, const void*, const void*, int, int, const void*, int, int,
                         const void*, void*, int, int, int, int);

  Create create = nullptr;
  SetMathMode set_math_mode = nullptr;
  StatusString status_string = nullptr;
  Gemm<float> sgemm = nullptr;
  Gemm<double> dgemm = nullptr;
  GemmEx gemm_ex = nullptr;  ///< optional: only gd::autocast needs it
  std::string library;  ///< the file that was loaded
  std::string problem;  ///< why cuBLAS cannot be used; empty when it can

  static constexpr int kOpN = 0, kOpT = 1;                 // cublasOperation_t
  static constexpr int kDefaultMath = 0, kTf32Math = 3;    // cublasMath_t
  static constexpr int kR32F = 0;                          // cudaDataType_t CUDA_R_32F
  static constexpr int kCompute32FFast16F = 74, kCompute32FFast16BF = 75;  // cublasComputeType_t
  static constexpr int kGemmDefault = -1;                  // cublasGemmAlgo_t CUBLAS_GEMM_DEFAULT

  /// The process's cuBLAS, loaded on first use: $GRADUS_CUBLAS, then the CUDA 13 and 12
  /// sonames on the loader's path, under $CUDA_HOME/lib64 and /usr/local/cuda/lib64.
  static const Cublas& get() {
    static const Cublas c = load();
    return c;
  }
  std::string error_string(int code) const {
    const char* s = status_string ? status_string(code) : nullptr;
    return s ? s : "cuBLAS status " + std::to_string(code);
  }
  void check(int rc, const char* what) const {
    if (rc != 0) [[unlikely]]
      fail(rc, what);
  }

 private:
  static Cublas load();
  [[noreturn]] void fail(int rc, const char* what) const;
};

/// Whether float products may use TF32 tensor cores (off by default).
inline std::atomic<bool>& tf32_allowed() {
  static std::atomic<bool> allowed{false};
  return allowed;
}

/// The cuBLAS handle of GPU `ordinal` (made once, on the default stream), set to the math mode
/// that tf32_allowed() asks for, and the lock of that handle: a product sets the mode and enqueues
/// while holding it, so a thread that changes allow_tf32 never changes the mode under another
/// thread's product (cuBLAS allows one handle in several threads only while its settings stay).
struct BlasHandle {
  std::unique_lock<std::mutex> lock;
  void* handle = nullptr;
};
BlasHandle blas_handle(int ordinal);

/// C[m×n] (+)= op(A)[m×k] · op(B)[k×n], row-major, on GPU `device` (A stored k×m when ta, B
/// stored n×k when tb). Sizes must fit cuBLAS's 32-bit ints.
template <class T>
void gemm(const T* a, bool ta, const T* b, bool tb, T* c, int64_t m, int64_t k, int64_t n, bool add, Device device) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "THE_ELEMENT_TYPE_MUST_BE_FLOAT_OR_DOUBLE: gemm");
  if (m == 0 || n == 0) return;
  constexpr int64_t kMax = 0x7fffffff;
  GRADUS_CHECK(value_error, m <= kMax && k <= kMax && n <= kMax, "matmul on ", device, ": dimensions ", m, "x", k,
               "x", n, " exceed cuBLAS's 32-bit sizes");
  const BlasHandle locked = blas_handle(device.index);
  void* h = locked.handle;
  const Cublas& cb = Cublas::get();
  const T one = T(1), beta = add ? T(1) : T(0);
  // column-major: Cᵀ[n×m] = op(B)ᵀ · op(A)ᵀ
  const int op_b = tb ? Cublas::kOpT : Cublas::kOpN, op_a = ta ? Cublas::kOpT : Cublas::kOpN;
  const int ldb = int(std::max<int64_t>(1, tb ? k : n)), lda = int(std::max<int64_t>(1, ta ? m : k));
  int rc;
  if constexpr (std::is_same_v<T, float>) {
    if (const Precision p = autocast_precision(); p != Precision::fp32) {
      GRADUS_CHECK(device_error, cb.gemm_ex != nullptr, "matmul on ", device, " under gd::autocast(",
                   precision_name(p), "): cuBLAS library ", cb.library, " lacks cublasGemmEx");
      const int compute = p == Precision::bf16 ? Cublas::kCompute32FFast16BF : Cublas::kCompute32FFast16F;
      rc = cb.gemm_ex(h, op_b, op_a, int(n), int(m), int(k), &one, b, Cublas::kR32F, ldb, a, Cublas::kR32F, lda, &beta,
                      c, Cublas::kR32F, int(n), compute, Cublas::kGemmDefault);
      cb.check(rc, "cublasGemmEx");
      return;
    }
    rc = cb.sgemm(h, op_b, op_a, int(n), int(m), int(k), &one, b, ldb, a, lda, &beta, c, int(n));
  } else {
    rc = cb.dgemm(h, op_b, op_a, int(n), int(m), int(k), &one, b, ldb, a, lda, &beta, c, int(n));
  }
  cb.check(rc, std::is_same_v<T, float> ? "cublasSgemm" : "cublasDgemm");
}

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
GRADUS_INLINE Cublas Cublas::load() {
  static Library lib(toolkit_library_names("GRADUS_CUBLAS", "libcublas"));
  Cublas c;
  if (!lib.loaded()) {
    c.problem = "cuBLAS not found (tried " + lib.tried() + "; set GRADUS_CUBLAS to its path)";
    return c;
  }
  c.library = lib.name();
  c.create = lib.find<Create>("cublasCreate_v2");
  c.set_math_mode = lib.find<SetMathMode>("cublasSetMathMode");
  c.status_string = lib.find<StatusString>("cublasGetStatusString");
  c.sgemm = lib.find<Gemm<float>>("cublasSgemm_v2");
  c.dgemm = lib.find<Gemm<double>>("cublasDgemm_v2");
  c.gemm_ex = lib.find<GemmEx>("cublasGemmEx");
  if (!c.create || !c.set_math_mode || !c.sgemm || !c.dgemm)
    c.problem = "cuBLAS library " + c.library + " lacks the entry points gradus needs";
  return c;
}

GRADUS_INLINE BlasHandle blas_handle(int ordinal) {
  static std::array<std::mutex, 64> mu;
  static std::array<void*, 64> handles{};
  static std::array<int, 64> modes{};
  const Cublas& c = Cublas::get();
  GRADUS_CHECK(device_error, c.problem.empty(), "matmul on cuda(", ordinal, "): ", c.problem);
  make_current(ordinal);
  std::unique_lock lock(mu[size_t(ordinal)]);
  void*& h = handles[size_t(ordinal)];
  if (!h) {
    c.check(c.create(&h), "cublasCreate");
    modes[size_t(ordinal)] = -1;
  }
  const int mode = tf32_allowed().load(std::memory_order_relaxed) ? Cublas::kTf32Math : Cublas::kDefaultMath;
  if (modes[size_t(ordinal)] != mode) {
    c.check(c.set_math_mode(h, mode), "cublasSetMathMode");
    modes[size_t(ordinal)] = mode;
  }
  return {std::move(lock), h};
}
#endif  // GRADUS_DEFINE_COMPILED
}  // namespace gradus::backend::cuda

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::backend::cuda {
GRADUS_INLINE void Cublas::fail(int rc, const char* what) const {
  ::gradus::detail::throw_error<device_error>({"cuda: ", what, ": ", error_string(rc)});
}
}  // namespace gradus::backend::cuda
#endif  // GRADUS_DEFINE_COMPILED

#if GRADUS_INSTANCES  // compiled once in libgradus with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::backend::cuda {
GRADUS_INSTANCE void gemm(const float*, bool, const float*, bool, float*, int64_t, int64_t, int64_t, bool, Device);
GRADUS_INSTANCE_DOUBLE void gemm(const double*, bool, const double*, bool, double*, int64_t, int64_t, int64_t, bool,
                                 Device);
}  // namespace gradus::backend::cuda
#endif
