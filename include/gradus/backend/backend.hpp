// gradus/backend/backend.hpp — every kernel a backend provides, and the one dispatch point
// through which ops/ and autodiff/ reach each of them.
//
// An op checks shapes, records its tape node and states its gradient rule; the arithmetic
// happens here. Each entry forwards to the CPU implementation in backend/cpu/<area>.hpp; a
// second backend (CUDA) adds its implementation beside it and the dispatch chooses by the
// tensors' device. This list is the whole interface: a backend that implements every function
// below runs every op, layer, loss and optimizer of gradus.
//
//   area            kernels                                                     CPU home
//   elementwise     evaluate_into, sum_all, sum_into, fused_backward_blocks     cpu/elementwise.hpp
//                   (evaluate_into on a GPU: generated kernels)                 cuda/elementwise.hpp
//   GEMM            gemm                                                        cpu/gemm.hpp
//                   (on a GPU: cuBLAS)                                          cuda/blas.hpp
//   convolution     conv2d_forward, conv2d_backward, conv2d_relu_*              cpu/conv.hpp
//   pooling         pool2d_forward, pool2d_backward                             cpu/pool.hpp
//                   (both on a GPU: im2col + cuBLAS, library kernels)           cuda/conv.hpp
//   reductions      reduce_extremum(_backward), reduce_arg, reduce_prod(_backward),
//                   reduce_logsumexp(_backward)                                 cpu/reduce.hpp
//   softmax         softmax_forward, softmax_backward                           cpu/softmax.hpp
//                   (softmax and one_hot on a GPU: library kernels)             cuda/softmax.hpp
//   layers          bias_activation_forward/_backward, sum_rows                 cpu/bias_activation.hpp
//                   (on a GPU: library kernels)                                 cuda/layers.hpp
//   recurrent       lstm_forward, lstm_backward (CPU only)                      cpu/lstm.hpp
//   dropout         dropout_mask, masked_multiply                               cpu/dropout.hpp
//                   (on a GPU: library kernels)                                 cuda/layers.hpp
//   data movement   copy_window, window_grad, permute, join_rows, split_rows,
//                   gather_rows, scatter_add_rows, one_hot, cast                cpu/copy.hpp
//
// The shapes a kernel works on come as plans (backend/plans.hpp); threads are split by
// cpu/parallel.hpp. With GRADUS_COMPILED_KERNELS (a target that links gradus::kernels) GEMM,
// convolution, pooling and the LSTM sequence are only declared here (cpu/compiled.hpp) and compiled in that library.
#pragma once
#include <cstdint>
#include <vector>

#include "gradus/backend/cpu/bias_activation.hpp"
#include "gradus/backend/cpu/copy.hpp"
#include "gradus/backend/cpu/dropout.hpp"
#include "gradus/backend/cpu/elementwise.hpp"
#include "gradus/backend/cpu/reduce.hpp"
#include "gradus/backend/cpu/softmax.hpp"
#include "gradus/backend/cuda/blas.hpp"
#include "gradus/backend/cuda/conv.hpp"
#include "gradus/backend/cuda/elementwise.hpp"
#include "gradus/backend/cuda/layers.hpp"
#include "gradus/backend/cuda/library.hpp"
#include "gradus/backend/cuda/softmax.hpp"
#include "gradus/backend/plans.hpp"
#if defined(GRADUS_COMPILED_KERNELS)  // linked with gradus::kernels: GEMM, conv and pooling compiled there
#include "gradus/backend/cpu/compiled.hpp"
#else
#include "gradus/backend/cpu/conv.hpp"
#include "gradus/backend/cpu/gemm.hpp"
#include "gradus/backend/cpu/lstm.hpp"
#include "gradus/backend/cpu/pool.hpp"
#endif

namespace gradus::backend {

// ------------------------------------------------------------------------------- elementwise

/// The device every tensor leaf of `e` is on (gd::cpu for an expression of numbers only).
/// Leaves on two devices throw gd::device_error naming the op and both devices.
template <class E>
Device device_of(const E& e) {
  Device dev = gradus::cpu;
  bool seen = false;
  for_each_leaf(e, [&]<class L>(const L& leaf, bool) {
    if constexpr (!cuda::is_number_leaf<L>::value) {
      const Device d = device_leaf(leaf).device();
      if (!seen) {
        dev = d;
        seen = true;
      } else if (d != dev) [[unlikely]] {
        std::string op = "where";
        if constexpr (requires { E::op_type::name; }) op = std::string(E::op_type::name);
        throw device_error(::gradus::detail::str(op, ": operands on ", dev, " and ", d,
                                                 "; move them to one device with .to(device)"));
      }
    }
  });
  return dev;
}

/// out[i] = e[i] over `shape` (one fused pass; `out` may alias a same-shape operand), on
/// `device`, where every operand of e lives.
template <class E>
void evaluate_into(const E& e, value_type_t<E>* out, const Shape& shape, Device device = gradus::cpu) {
  if (device.is_cpu()) [[likely]] {
    cpu::evaluate_into(e, out, shape);
  } else if constexpr (Real<value_type_t<E>>) {
    cuda::evaluate_into(e, out, shape, device);
  } else {
    throw device_error(::gradus::detail::str("elementwise: expressions of integers do not run on ", device,
                                             " yet; compute them on the CPU (.to(gd::cpu))"));
  }
}
/// d[i] = v for i < n, in the memory of `device`.
template <class T>
void fill(T* d, int64_t n, T v, Device device) {
  if (device.is_cpu()) [[likely]] {
    std::fill_n(d, n, v);
  } else if constexpr (Real<T>) {
    cuda::fill(d, long(n), v, device);
  } else {
    throw device_error(::gradus::detail::str("fill: integer tensors are not filled on ", device, " yet"));
  }
}
/// d[i] += s[i] for i < n, in the memory of `device` (gradient accumulation).
template <class T>
void add_into(T* d, const T* s, int64_t n, Device device) {
  if (device.is_cpu()) [[likely]] {
    Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>(d, n) += Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>(s, n);
  } else if constexpr (Real<T>) {
    cuda::add_into(d, s, long(n), device);
  } else {
    throw device_error(::gradus::detail::str("add_into: integer tensors are not accumulated on ", device, " yet"));
  }
}
/// dst[0] = T(sum of e over `shape` * scale), on the GPU `device` where e's operands live: one
/// generated reduction kernel into a double accumulator, finished on the device (no host
/// synchronisation).
template <class E>
void sum_to_device(const E& e, const Shape& shape, value_type_t<E>* dst, double scale, Device device) {
  const Tensor<double> acc = Tensor<double>::empty(Shape{}, device);
  cuda::fill(acc.device_data(), 1, 0.0, device);
  cuda::sum_into_accumulator(e, shape, acc.device_data(), device);
  cuda::finish_sum(dst, acc.device_data(), scale, device);
}

/// dst[0] = T(acc[0] * scale) on GPU `device`: a reduction's double accumulator into its result.
template <class T>
void finish_sum(T* dst, const double* acc, double scale, Device device) {
  cuda::finish_sum(dst, acc, scale, device);
}

/// The sum of every element of `e` over `shape`, accumulated in double.
template <class E>
double sum_all(const E& e, const Shape& shape) {
  return cpu::sum_all(e, shape);
}
/// acc (shape `reduced`) += e summed over the axes where `reduced` broadcasts to `shape`.
template <class E>
void sum_into(const E& e, const Shape& shape, value_type_t<E>* acc, const Shape& reduced,
              Device device = gradus::cpu) {
  if (device.is_cpu()) [[likely]] {
    cpu::sum_into(e, shape, acc, reduced);
  } else if constexpr (Real<value_type_t<E>>) {
    cuda::sum_into(e, shape, acc, reduced, device);
  } else {
    throw device_error(::gradus::detail::str("sum: integer sums along axes do not run on ", device, " yet"));
  }
}
/// The block loop of a fused backward pass over `shape`; `make(targets)` builds the adjoint
/// evaluator of one thread (autodiff/adjoint.hpp).
template <class T, class MakeEv>
void fused_backward_blocks(const Shape& shape, const Tensor<T>& g, T scale, cpu::LeafTarget<T>* targets,
                           int ntargets, double* value_sum, MakeEv&& make) {
  cpu::backward_blocks(shape, g, scale, targets, ntargets, value_sum, make);
}

// -------------------------------------------------------------------------------------- GEMM

/// c (m x n) = or (`add`) += a (m x k) · b (k x n), each optionally stored transposed.
template <class T>
void gemm(const T* a, bool ta, const T* b, bool tb, T* c, int64_t m, int64_t k, int64_t n, bool add,
          Device device = gradus::cpu) {
  if (device.is_cpu()) [[likely]]
    cpu::gemm(a, ta, b, tb, c, m, k, n, add);
  else
    cuda::gemm(a, ta, b, tb, c, m, k, n, add, device);
}

// ---------------------------------------------------------------------------------- recurrent


/// Every step of an LSTM (cpu/lstm.hpp): xp [N, T, 4u], r [u, 4u], h0, c0 [N, u] -> h_seq
/// [N, T, u], h_last, c_last [N, u], and what the backward pass needs in `saved`. CPU only.
template <class T>
void lstm_forward(const LstmPlan& p, const T* xp, const T* r, const T* h0, const T* c0, T* h_seq, T* h_last,
                  T* c_last, const LstmSaved<T>& saved, Device device = gradus::cpu) {
  GRADUS_CHECK(device_error, device.is_cpu(), "lstm_sequence: runs on the CPU only, got operands on ", device);
  cpu::lstm_forward(p, xp, r, h0, c0, h_seq, h_last, c_last, saved);
}
/// dxp, dr, dh0, dc0 of lstm_forward from the adjoints of its outputs (null: zero); a null
/// destination is skipped, `add_*` accumulates instead of overwriting. CPU only.
template <class T>
void lstm_backward(const LstmPlan& p, const T* r, const LstmSaved<T>& saved, const T* g_seq, const T* g_h_last,
                   const T* g_c_last, T* dxp, bool add_xp, T* dr, bool add_r, T* dh0, bool add_h0, T* dc0,
                   bool add_c0, Device device = gradus::cpu) {
  GRADUS_CHECK(device_error, device.is_cpu(), "lstm_sequence: runs on the CPU only, got operands on ", device);
  cpu::lstm_backward(p, r, saved, g_seq, g_h_last, g_c_last, dxp, add_xp, dr, add_r, dh0, add_h0, dc0, add_c0);
}

// --------------------------------------------------------------------- convolution, pooling

/// out [rows, F] = patches(x) · w [K, F] (+ bias [F] when not null).
template <class T>
void conv2d_forward(const ConvPlan& p, const T* x, const T* w, const T* bias, T* out, Device device = gradus::cpu) {
  if (!device.is_cpu()) return cuda::conv2d_forward(p, x, w, bias, out, device);
  cpu::conv2d_forward(p, x, w, bias, out, false);
}
/// dx, dw, db of conv2d from the output adjoint g; a null destination is skipped, `add_*`
/// accumulates instead of overwriting.
template <class T>
void conv2d_backward(const ConvPlan& p, const T* g, const T* x, const T* w, T* dx, bool add_dx, T* dw, bool add_dw,
                     T* db, bool add_db, Device device = gradus::cpu) {
  if (!device.is_cpu()) return cuda::conv2d_backward(p, g, x, w, dx, add_dx, dw, add_dw, db, add_db, device);
  cpu::conv2d_backward(p, g, x, w, dx, add_dx, dw, add_dw, db, add_db, static_cast<const T*>(nullptr));
}
/// out = max(patches(x) · w + bias, 0), the bias and ReLU applied in the convolution's output
/// pass (CPU only; ops/conv.hpp composes conv2d and bias_activation elsewhere).
template <class T>
void conv2d_relu_forward(const ConvPlan& p, const T* x, const T* w, const T* bias, T* out) {
  cpu::conv2d_forward(p, x, w, bias, out, true);
}
/// dx, dw, db of conv2d_relu_forward from its output y and output adjoint g (CPU only): g is
/// masked where y <= 0 tile by tile, inside the convolution's backward pass.
template <class T>
void conv2d_relu_backward(const ConvPlan& p, const T* g, const T* y, const T* x, const T* w, T* dx, bool add_dx, T* dw,
                          bool add_dw, T* db, bool add_db) {
  cpu::conv2d_backward(p, g, x, w, dx, add_dx, dw, add_dw, db, add_db, y);
}
/// y = max or average over the windows of x.
template <class T>
void pool2d_forward(const PoolPlan& p, const T* x, T* y, bool max, Device device = gradus::cpu) {
  if (!device.is_cpu()) return cuda::pool2d_forward(p, x, y, max, device);
  cpu::pool2d_forward(p, x, y, max);
}
/// dx (+)= the pool's adjoint given x, y and the output adjoint g.
template <class T>
void pool2d_backward(const PoolPlan& p, const T* g, const T* x, const T* y, T* dx, bool add, bool max,
                     Device device = gradus::cpu) {
  if (!device.is_cpu()) return cuda::pool2d_backward(p, g, x, y, dx, add, max, device);
  cpu::pool2d_backward(p, g, x, y, dx, add, max);
}

// ------------------------------------------------------------------------ reductions, softmax

/// y = max (min) along the axis of `v`.
template <class T>
void reduce_extremum(const AxisView& v, const T* x, T* y, bool is_max) {
  cpu::reduce_extremum(v, x, y, is_max);
}
/// dx = g shared among the tied extrema y of each line, 0 elsewhere.
template <class T>
void reduce_extremum_backward(const AxisView& v, const T* x, const T* y, const T* g, T* dx) {
  cpu::reduce_extremum_backward(v, x, y, g, dx);
}
/// out = index of the first largest (smallest) element of each line.
template <class T>
void reduce_arg(const AxisView& v, const T* x, int64_t* out, bool is_max) {
  cpu::reduce_arg(v, x, out, is_max);
}
/// y = product of each line.
template <class T>
void reduce_prod(const AxisView& v, const T* x, T* y) {
  cpu::reduce_prod(v, x, y);
}
/// dx = g · product of the other elements of the line.
template <class T>
void reduce_prod_backward(const AxisView& v, const T* x, const T* g, T* dx) {
  cpu::reduce_prod_backward(v, x, g, dx);
}
/// y = log(sum(exp(x))) of each line, stably.
template <class T>
void reduce_logsumexp(const AxisView& v, const T* x, T* y) {
  cpu::reduce_logsumexp(v, x, y);
}
/// dx = g · exp(x - y).
template <class T>
void reduce_logsumexp_backward(const AxisView& v, const T* x, const T* y, const T* g, T* dx) {
  cpu::reduce_logsumexp_backward(v, x, y, g, dx);
}
/// y = softmax (log_softmax) of each line.
template <class T>
void softmax_forward(const AxisView& v, const T* x, T* y, bool log, Device device = gradus::cpu) {
  if (device.is_cpu())
    cpu::softmax_forward(v, x, y, log);
  else
    cuda::softmax_forward(x, y, v.outer, v.n, v.inner, log, device);
}
/// dx from the softmax (log_softmax) output y and its adjoint g.
template <class T>
void softmax_backward(const AxisView& v, const T* y, const T* g, T* dx, bool log, Device device = gradus::cpu) {
  if (device.is_cpu())
    cpu::softmax_backward(v, y, g, dx, log);
  else
    cuda::softmax_backward(y, g, dx, v.outer, v.n, v.inner, log, device);
}

/// Sparse softmax cross-entropy of contiguous [rows, classes] logits (CPU only: on a GPU the
/// loss is composed of log_softmax and one-hot rows instead).
template <class T>
void sparse_xent_forward(int64_t rows, int64_t classes, const T* z, const int64_t* labels, T* loss, T* lse) {
  cpu::sparse_xent_forward(rows, classes, z, labels, loss, lse);
}
/// dz = g · (softmax(z) - one_hot(labels)) per row.
template <class T>
void sparse_xent_backward(int64_t rows, int64_t classes, const T* z, const int64_t* labels, const T* lse,
                          const T* g, T* dz) {
  cpu::sparse_xent_backward(rows, classes, z, labels, lse, g, dz);
}

// ---------------------------------------------------------------------- layers and dropout

/// y = op.forward(h + b) row by row (h [rows, n], b [n]).
template <class T, class Op>
void bias_activation_forward(const Op& op, const T* h, const T* b, int64_t rows, int64_t n, T* y) {
  cpu::bias_activation_forward(op, h, b, rows, n, y);
}
/// dz = op.backward(h + b, y, g) row by row.
template <class T, class Op>
void bias_activation_backward(const Op& op, const T* h, const T* b, const T* y, const T* g, int64_t rows, int64_t n,
                              T* dz) {
  cpu::bias_activation_backward(op, h, b, y, g, rows, n, dz);
}
/// out [n] = the column sums of x [rows, n].
template <class T>
void sum_rows(const T* x, int64_t rows, int64_t n, T* out, Device device = gradus::cpu) {
  if (device.is_cpu())
    cpu::sum_rows(x, rows, n, out);
  else
    cuda::sum_rows(x, rows, n, out, device);
}
/// bias_activation on a GPU, the activation given by its kind's number (ops/bias_activation.hpp).
template <class T>
void bias_activation_forward(int kind, double alpha, const T* h, const T* b, int64_t rows, int64_t n, T* out,
                             Device device) {
  cuda::bias_activation_forward(kind, alpha, h, b, rows, n, out, device);
}
template <class T>
void bias_activation_backward(int kind, double alpha, const T* h, const T* b, const T* y, const T* g, int64_t rows,
                              int64_t n, T* dz, Device device) {
  cuda::bias_activation_backward(kind, alpha, h, b, y, g, rows, n, dz, device);
}
/// mask = `scale` with probability `keep`, else 0. One rng.next() keys a Philox stream
/// (core/philox.hpp) and mask[i] is kept when element i of that stream is below `keep`: the same
/// numbers on every backend, so a seed gives the same mask on the CPU and on a GPU.
template <class T>
void dropout_mask(Rng& rng, double keep, T scale, int64_t n, T* mask, Device device = gradus::cpu) {
  const uint64_t key = rng.next();
  if (device.is_cpu())
    cpu::dropout_mask(key, keep, scale, n, mask);
  else
    cuda::dropout_mask(key, keep, scale, n, mask, device);
}
/// out = (or += with `add`) x * mask.
template <class T>
void masked_multiply(const T* x, const T* mask, int64_t n, T* out, bool add, Device device = gradus::cpu) {
  if (device.is_cpu())
    cpu::masked_multiply(x, mask, n, out, add);
  else
    cuda::masked_multiply(x, mask, n, out, add, device);
}

// ----------------------------------------------------------------------------- data movement

/// The `extent` window of src at `src_at` copied to the window of dst at `dst_at`.
template <class T>
void copy_window(const Tensor<T>& src, const int64_t* src_at, Tensor<T>& dst, const int64_t* dst_at,
                 const Shape& extent) {
  cpu::copy_window(src, src_at, dst, dst_at, extent);
}
/// dx (shape xs; zeroed first unless `add`) gets g added into its window at `at`.
template <class T>
void window_grad(const Tensor<T>& g, T* dx, bool add, const Shape& xs, const int64_t* at) {
  cpu::window_grad(g, dx, add, xs, at);
}
/// x with its axes permuted (a view when no data moves).
template <class T>
Tensor<T> permute(const Tensor<T>& x, const IntList& perm) {
  return cpu::permute(x, perm);
}
/// Parts [outer, inner_i] joined side by side into out [outer, sum inner_i].
template <class T>
void join_rows(const std::vector<const T*>& parts, const std::vector<int64_t>& inner, T* out, int64_t outer) {
  cpu::join_rows(parts, inner, out, outer);
}
/// dst [outer, inner] = columns [col, col + inner) of src [outer, total].
template <class T>
void split_rows(const T* src, int64_t total, int64_t col, int64_t outer, int64_t inner, T* dst) {
  cpu::split_rows(src, total, col, outer, inner, dst);
}
/// out [outer, k, inner] = rows idx of x [outer, n, inner].
template <class T>
void gather_rows(const T* x, int64_t outer, int64_t n, int64_t inner, const int64_t* idx, int64_t k, T* out) {
  cpu::gather_rows(x, outer, n, inner, idx, k, out);
}
/// dx (zeroed first unless `add`) += g scattered to rows idx.
template <class T>
void scatter_add_rows(const T* g, int64_t outer, int64_t n, int64_t inner, const int64_t* idx, int64_t k, T* dx,
                      bool add) {
  cpu::scatter_add_rows(g, outer, n, inner, idx, k, dx, add);
}
/// out [count, depth]: `on` at each label, `off` elsewhere.
template <class T>
void one_hot(const int64_t* labels, int64_t count, int64_t depth, T on, T off, T* out, Device device = gradus::cpu) {
  if (device.is_cpu()) {
    cpu::one_hot(labels, count, depth, on, off, out);
  } else if constexpr (Real<T>) {
    cuda::one_hot(labels, count, depth, on, off, out, device);
  } else {
    throw device_error(::gradus::detail::str("one_hot: integer one-hot tensors are not made on ", device, " yet"));
  }
}
/// dst = (or += with `add`) static_cast<U>(src).
template <class T, class U>
void cast(const T* src, int64_t n, U* dst, bool add) {
  cpu::cast(src, n, dst, add);
}

}  // namespace gradus::backend
