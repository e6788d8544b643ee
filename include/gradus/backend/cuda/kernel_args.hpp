// gradus/backend/cuda/kernel_args.hpp — what a generated elementwise kernel receives, laid out
// the same for the host that fills it and for NVRTC that compiles the kernel (so this header,
// like element.hpp, includes nothing).
#pragma once

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define GRADUS_KERNEL_FN __host__ __device__ inline
#else
#define GRADUS_KERNEL_FN inline
#endif

namespace gradus::backend::cuda {

/// Where an operand of shape `src` sits in an output of shape `out` (NumPy broadcasting), as
/// merged dims and element strides (0 along broadcast dims): output index i reads at(i).
struct Bcast {
  int rank = 1;
  long dims[8] = {1};
  long strides[8] = {1};
  GRADUS_KERNEL_FN long at(long i) const {
    if (rank == 1) return i * strides[0];
    long off = 0;
    for (int d = rank - 1; d >= 0; --d) {
      off += (i % dims[d]) * strides[d];
      i /= dims[d];
    }
    return off;
  }
};

/// The arguments of one generated elementwise kernel over `n` output elements: L tensor leaves
/// (`in`, read through `bc`), S number leaves (`s`), P op parameters (`p`: leaky_relu's alpha,
/// clamp's bounds, ...). A backward kernel also reads the output adjoint `g` (through `gbc`,
/// times `scale`) and writes each leaf's gradient at each output element into `grad[k]` (null:
/// not wanted), adding when `add[k]`.
template <class T, int L, int S, int P>
struct ElementwiseArgs {
  long n = 0;
  T* out = nullptr;
  const T* in[L > 0 ? L : 1] = {};
  Bcast bc[L > 0 ? L : 1];
  T s[S > 0 ? S : 1] = {};
  double p[P > 0 ? P : 1] = {};
  const T* g = nullptr;
  Bcast gbc;
  T scale = T(1);
  T* grad[L > 0 ? L : 1] = {};
  bool add[L > 0 ? L : 1] = {};
  double* vsum = nullptr;  ///< sum pass (and optionally backward): vsum[block] = the block's sum of the values
};

#if defined(__CUDACC__) || defined(__CUDACC_RTC__) || defined(GRADUS_CUDA_EMULATION)
/// Writes the sum of every thread's `x` in the block to *dst: a shuffle within each warp, the
/// warps' sums through shared memory, in a fixed order (a reduction's per-block partial sum,
/// added up by finish_sum). Every thread of the block must call it.
__device__ inline void block_sum_store(double x, double* dst) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_down_sync(0xffffffffu, x, o);
  __shared__ double warp_sums[32];
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
  if (lane == 0) warp_sums[warp] = x;
  __syncthreads();
  if (warp == 0) {
    x = lane < (blockDim.x + 31u) / 32u ? warp_sums[lane] : 0.0;
    for (int o = 16; o > 0; o >>= 1) x += __shfl_down_sync(0xffffffffu, x, o);
    if (lane == 0) *dst = x;
  }
}
#endif

}  // namespace gradus::backend::cuda
