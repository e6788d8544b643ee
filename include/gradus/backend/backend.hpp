// gradus/backend/backend.hpp — every kernel a backend provides, and the one dispatch point
// through which ops/ and autodiff/ reach each of them.
//
// An op checks shapes, records its tape node and states its gradient rule; the arithmetic
// happens here. Each entry below looks its kernel up by the device of its operands in the
// backends' tables (backend/backends.hpp, backend/registry.hpp) and calls it; a backend without
// that kernel gives a gd::device_error naming the op and the device. No code outside
// backend/<name>/ asks which device a tensor is on: an op allocates its result on its operands'
// device and passes that device here.
//
//   area            kernels (backend/kernels.hpp)                            CPU / CUDA home
//   elementwise     evaluate_into, sum_all, sum_into, fused_backward,          cpu/elementwise.hpp
//                   fill, add_into                                             cuda/elementwise.hpp (generated)
//   GEMM            gemm                                                       cpu/gemm.hpp, cuda/blas.hpp
//   convolution     conv2d_forward/_backward, conv2d_relu_forward/_backward    cpu/conv.hpp, cuda/conv.hpp
//   pooling         pool2d_forward/_backward                                   cpu/pool.hpp, cuda/conv.hpp
//   sampling        resample_forward/_backward                                 cpu/sampling.hpp, cuda/sampling.hpp
//   reductions      reduce_extremum(_backward), reduce_arg, reduce_prod(_backward),
//                   reduce_logsumexp(_backward)                                cpu/reduce.hpp
//   softmax         softmax_forward/_backward, sparse_xent_forward/_backward   cpu/softmax.hpp, cuda/softmax.hpp
//   layers          bias_activation_forward/_backward, sum_rows                cpu/bias_activation.hpp, cuda/layers.hpp
//   recurrent       lstm_forward, lstm_backward                                cpu/lstm.hpp
//   dropout         dropout_mask, masked_multiply                              cpu/dropout.hpp, cuda/layers.hpp
//   data movement   copy_window, window_grad, permute, join_rows, split_rows,
//                   gather_rows, scatter_add_rows, one_hot, cast               cpu/copy.hpp
//
// Which backend has which kernel: the tables in cpu/kernels.hpp and cuda/kernels.hpp. The shapes
// a kernel works on come as plans (backend/plans.hpp).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "gradus/backend/backends.hpp"
#include "gradus/backend/plans.hpp"

namespace gradus::backend {

// ------------------------------------------------------------------------------- elementwise

/// The device every tensor leaf of `e` is on (gd::cpu for an expression of numbers only).
/// Leaves on two devices throw gd::device_error naming the op and both devices.
template <class E>
Device device_of(const E& e) {
  Device dev = gradus::cpu;
  bool seen = false;
  for_each_leaf(e, [&]<class L>(const L& leaf, bool) {
    if constexpr (!is_number_leaf<L>::value) {
      const Device d = device_leaf(leaf).device();
      if (!seen) {
        dev = d;
        seen = true;
      } else if (d != dev) [[unlikely]] {
        std::string op = "where";
        if constexpr (requires { E::op_type::name; }) op = std::string(E::op_type::name);
        ::gradus::detail::throw_error<device_error>({op, ": operands on ", dev, " and ", d,
                                                     "; move them to one device with .to(device)"});
      }
    }
  });
  return dev;
}

/// out[i] = e[i] over `shape` (one fused pass; `out` may alias a same-shape operand), on
/// `device`, where every operand of e lives.
template <class E>
void evaluate_into(const E& e, value_type_t<E>* out, const Shape& shape, Device device) {
  run<kernel::Evaluate<E>, value_type_t<E>>(device, e, out, shape);
}
/// dst[0] = T(the sum of every element of `e` over `shape`) * scale, accumulated in double.
template <class E>
void sum_all(const E& e, const Shape& shape, value_type_t<E>* dst, value_type_t<E> scale, Device device) {
  run<kernel::SumAll<E>, value_type_t<E>>(device, e, shape, dst, scale);
}
/// acc (shape `reduced`) += e summed over the axes where `reduced` broadcasts to `shape`.
template <class E>
void sum_into(const E& e, const Shape& shape, value_type_t<E>* acc, const Shape& reduced, Device device) {
  run<kernel::SumInto<E>, value_type_t<E>>(device, e, shape, acc, reduced);
}
/// The fused backward pass of `e` over `out` (autodiff/adjoint.hpp): g (broadcast to `out`)
/// times `scale` into every target; with `value_dst`, value_dst[0] = T(sum of e) * value_scale.
template <class Adjoint, class E, class T = value_type_t<E>>
void fused_backward(const E& e, const Shape& out, const Tensor<T>& g, T scale, const GradTarget<T>* targets,
                    int ntargets, T* value_dst, T value_scale, Device device) {
  run<kernel::FusedBackward<E, Adjoint>, T>(device, e, out, g, scale, targets, ntargets, value_dst, value_scale);
}
/// d[i] = v for i < n, in the memory of `device`.
template <class T>
void fill(T* d, int64_t n, T v, Device device) {
  run<kernel::Fill, T>(device, d, n, v);
}
/// d[i] += s[i] for i < n, in the memory of `device` (gradient accumulation).
template <class T>
void add_into(T* d, const T* s, int64_t n, Device device) {
  run<kernel::AddInto, T>(device, d, s, n);
}

// -------------------------------------------------------------------------------------- GEMM

/// c (m x n) = or (`add`) += a (m x k) · b (k x n), each optionally stored transposed.
template <class T>
void gemm(const T* a, bool ta, const T* b, bool tb, T* c, int64_t m, int64_t k, int64_t n, bool add, Device device) {
  run<kernel::Gemm, T>(device, a, ta, b, tb, c, m, k, n, add);
}

// ---------------------------------------------------------------------------------- recurrent

/// Every step of an LSTM (cpu/lstm.hpp): xp [N, T, 4u], r [u, 4u], bias [4u] (null: none), h0,
/// c0 [N, u] -> h_seq [N, T, u], h_last, c_last [N, u], and what the backward pass needs in `saved`.
template <class T>
void lstm_forward(const LstmPlan& p, const T* xp, const T* r, const T* bias, const T* h0, const T* c0, T* h_seq,
                  T* h_last, T* c_last, const LstmSaved<T>& saved, Device device) {
  run<kernel::LstmForward, T>(device, p, xp, r, bias, h0, c0, h_seq, h_last, c_last, saved);
}
/// dxp, dr, db, dh0, dc0 of lstm_forward from the adjoints of its outputs (null: zero); a null
/// destination is skipped, `add_*` accumulates instead of overwriting.
template <class T>
void lstm_backward(const LstmPlan& p, const T* r, const LstmSaved<T>& saved, const T* g_seq, const T* g_h_last,
                   const T* g_c_last, T* dxp, bool add_xp, T* dr, bool add_r, T* db, bool add_b, T* dh0, bool add_h0,
                   T* dc0, bool add_c0, Device device) {
  run<kernel::LstmBackward, T>(device, p, r, saved, g_seq, g_h_last, g_c_last, dxp, add_xp, dr, add_r, db, add_b, dh0,
                               add_h0, dc0, add_c0);
}

// --------------------------------------------------------------------- convolution, pooling

/// out [rows, F] = patches(x) · w [K, F] (+ bias [F] when not null).
template <class T>
void conv2d_forward(const ConvPlan& p, const T* x, const T* w, const T* bias, T* out, Device device) {
  run<kernel::Conv2d, T>(device, p, x, w, bias, out);
}
/// dx, dw, db of conv2d from the output adjoint g; a null destination is skipped, `add_*`
/// accumulates instead of overwriting.
template <class T>
void conv2d_backward(const ConvPlan& p, const T* g, const T* x, const T* w, T* dx, bool add_dx, T* dw, bool add_dw,
                     T* db, bool add_db, Device device) {
  run<kernel::Conv2dBackward, T>(device, p, g, x, w, dx, add_dx, dw, add_dw, db, add_db);
}
/// out = max(patches(x) · w + bias, 0), the bias and ReLU applied in the convolution's output
/// pass. Not every backend has it: ask `implements<kernel::Conv2dRelu, T>(device)` first
/// (ops/conv.hpp composes conv2d and bias_activation elsewhere).
template <class T>
void conv2d_relu_forward(const ConvPlan& p, const T* x, const T* w, const T* bias, T* out, Device device) {
  run<kernel::Conv2dRelu, T>(device, p, x, w, bias, out);
}
/// dx, dw, db of conv2d_relu_forward from its output y and output adjoint g: g is masked where
/// y <= 0 tile by tile, inside the convolution's backward pass.
template <class T>
void conv2d_relu_backward(const ConvPlan& p, const T* g, const T* y, const T* x, const T* w, T* dx, bool add_dx, T* dw,
                          bool add_dw, T* db, bool add_db, Device device) {
  run<kernel::Conv2dReluBackward, T>(device, p, g, y, x, w, dx, add_dx, dw, add_dw, db, add_db);
}
/// y = max or average over the windows of x.
template <class T>
void pool2d_forward(const PoolPlan& p, const T* x, T* y, bool max, Device device) {
  run<kernel::Pool2d, T>(device, p, x, y, max);
}
/// dx (+)= the pool's adjoint given x, y and the output adjoint g.
template <class T>
void pool2d_backward(const PoolPlan& p, const T* g, const T* x, const T* y, T* dx, bool add, bool max, Device device) {
  run<kernel::Pool2dBackward, T>(device, p, g, x, y, dx, add, max);
}

// ---------------------------------------------------------------------------------- sampling

/// out [b, p, c] = data [b, h, w, c] bilinearly sampled at the (x, y) points of warp [b, p, 2]
/// (cpu/sampling.hpp: TensorFlow's resampler convention).
template <class T>
void resample_forward(const ResamplePlan& p, const T* data, const T* warp, T* out, Device device) {
  run<kernel::Resample, T>(device, p, data, warp, out);
}
/// resample_forward's gradients from g into ddata and dwarp (a null destination is skipped;
/// `add_*` accumulates instead of overwriting).
template <class T>
void resample_backward(const ResamplePlan& p, const T* g, const T* data, const T* warp, T* ddata, bool add_data,
                       T* dwarp, bool add_warp, Device device) {
  run<kernel::ResampleBackward, T>(device, p, g, data, warp, ddata, add_data, dwarp, add_warp);
}

// ------------------------------------------------------------------------ reductions, softmax

/// y = max (min) along the axis of `v`.
template <class T>
void reduce_extremum(const AxisView& v, const T* x, T* y, bool is_max, Device device) {
  run<kernel::ReduceExtremum, T>(device, v, x, y, is_max);
}
/// dx = g shared among the tied extrema y of each line, 0 elsewhere.
template <class T>
void reduce_extremum_backward(const AxisView& v, const T* x, const T* y, const T* g, T* dx, Device device) {
  run<kernel::ReduceExtremumBackward, T>(device, v, x, y, g, dx);
}
/// out = index of the first largest (smallest) element of each line.
template <class T>
void reduce_arg(const AxisView& v, const T* x, int64_t* out, bool is_max, Device device) {
  run<kernel::ReduceArg, T>(device, v, x, out, is_max);
}
/// y = product of each line.
template <class T>
void reduce_prod(const AxisView& v, const T* x, T* y, Device device) {
  run<kernel::ReduceProd, T>(device, v, x, y);
}
/// dx = g · product of the other elements of the line.
template <class T>
void reduce_prod_backward(const AxisView& v, const T* x, const T* g, T* dx, Device device) {
  run<kernel::ReduceProdBackward, T>(device, v, x, g, dx);
}
/// y = log(sum(exp(x))) of each line, stably.
template <class T>
void reduce_logsumexp(const AxisView& v, const T* x, T* y, Device device) {
  run<kernel::ReduceLogsumexp, T>(device, v, x, y);
}
/// dx = g · exp(x - y).
template <class T>
void reduce_logsumexp_backward(const AxisView& v, const T* x, const T* y, const T* g, T* dx, Device device) {
  run<kernel::ReduceLogsumexpBackward, T>(device, v, x, y, g, dx);
}
/// y = softmax (log_softmax) of each line.
template <class T>
void softmax_forward(const AxisView& v, const T* x, T* y, bool log, Device device) {
  run<kernel::Softmax, T>(device, v, x, y, log);
}
/// dx from the softmax (log_softmax) output y and its adjoint g.
template <class T>
void softmax_backward(const AxisView& v, const T* y, const T* g, T* dx, bool log, Device device) {
  run<kernel::SoftmaxBackward, T>(device, v, y, g, dx, log);
}
/// Sparse softmax cross-entropy of contiguous [rows, classes] logits. Not every backend has it:
/// ask `implements<kernel::SparseXent, T>(device)` first (losses/losses.hpp composes the loss of
/// log_softmax and one-hot rows elsewhere).
template <class T>
void sparse_xent_forward(int64_t rows, int64_t classes, const T* z, const int64_t* labels, T* loss, T* lse,
                         Device device) {
  run<kernel::SparseXent, T>(device, rows, classes, z, labels, loss, lse);
}
/// dz = g · (softmax(z) - one_hot(labels)) per row.
template <class T>
void sparse_xent_backward(int64_t rows, int64_t classes, const T* z, const int64_t* labels, const T* lse,
                          const T* g, T* dz, Device device) {
  run<kernel::SparseXentBackward, T>(device, rows, classes, z, labels, lse, g, dz);
}

/// value_error naming `op`, the first label outside [0, classes), its position and the logits'
/// shape: on the CPU now; on a GPU checked there and thrown at its next synchronisation point
/// (a copy to the host, synchronize()), so the labels are never read back for it.
inline void check_labels(const Tensor<int64_t>& labels, int64_t classes, const char* op, const Shape& logits_shape) {
  run<kernel::CheckRange, int64_t>(labels.device(), labels.device_data(), labels.size(), classes,
                                   RangeCheck{op, "label", "logits", logits_shape});
}
/// The same for indices into axis `axis` of `shape`: "<op>: index V at position P out of range
/// [0, shape[axis]) for axis A of shape S".
inline void check_indices(const Tensor<int64_t>& indices, const Shape& shape, int axis, const char* op) {
  run<kernel::CheckRange, int64_t>(indices.device(), indices.device_data(), indices.size(), shape[axis],
                                   RangeCheck{op, "index", "", shape, axis});
}

// ---------------------------------------------------------------------- layers and dropout

/// y = op.forward(h + b) row by row (h [rows, n], b [n]); `op` is an activation's op struct
/// (a row of expr/activations.hpp).
template <class T, class Op>
void bias_activation_forward(const Op& op, const T* h, const T* b, int64_t rows, int64_t n, T* y, Device device) {
  run<kernel::BiasActivation<Op>, T>(device, op, h, b, rows, n, y);
}
/// dz = op.backward(h + b, y, g) row by row.
template <class T, class Op>
void bias_activation_backward(const Op& op, const T* h, const T* b, const T* y, const T* g, int64_t rows, int64_t n,
                              T* dz, Device device) {
  run<kernel::BiasActivationBackward<Op>, T>(device, op, h, b, y, g, rows, n, dz);
}
/// out [n] = the column sums of x [rows, n].
template <class T>
void sum_rows(const T* x, int64_t rows, int64_t n, T* out, Device device) {
  run<kernel::SumRows, T>(device, x, rows, n, out);
}
/// mask = `scale` with probability `keep`, else 0. One rng.next() keys a Philox stream
/// (core/philox.hpp) and mask[i] is kept when element i of that stream is below `keep`: the same
/// numbers on every backend, so a seed gives the same mask on the CPU and on a GPU.
template <class T>
void dropout_mask(Rng& rng, double keep, T scale, int64_t n, T* mask, Device device) {
  const kernel_fn<kernel::DropoutMask, T> fn = find<kernel::DropoutMask, T>(device);
  fn(rng.next(), keep, scale, n, mask, device);
}
/// out = (or += with `add`) x * mask.
template <class T>
void masked_multiply(const T* x, const T* mask, int64_t n, T* out, bool add, Device device) {
  run<kernel::MaskedMultiply, T>(device, x, mask, n, out, add);
}

// ----------------------------------------------------------------------------- data movement

/// The `extent` window of src at `src_at` copied to the window of dst at `dst_at`.
template <class T>
void copy_window(const Tensor<T>& src, const int64_t* src_at, Tensor<T>& dst, const int64_t* dst_at,
                 const Shape& extent) {
  run<kernel::CopyWindow, T>(src.device(), src, src_at, dst, dst_at, extent);
}
/// dx (shape xs, in g's device memory; zeroed first unless `add`) gets g added into its window at `at`.
template <class T>
void window_grad(const Tensor<T>& g, T* dx, bool add, const Shape& xs, const int64_t* at) {
  run<kernel::WindowGrad, T>(g.device(), g, dx, add, xs, at);
}
/// x with its axes permuted (a view when no data moves).
template <class T>
Tensor<T> permute(const Tensor<T>& x, const IntList& perm) {
  Tensor<T> out;
  run<kernel::Permute, T>(x.device(), x, perm, out);
  return out;
}
/// Parts [outer, inner_i] joined side by side into out [outer, sum inner_i].
template <class T>
void join_rows(const std::vector<const T*>& parts, const std::vector<int64_t>& inner, T* out, int64_t outer,
               Device device) {
  run<kernel::JoinRows, T>(device, parts, inner, out, outer);
}
/// dst [outer, inner] = columns [col, col + inner) of src [outer, total].
template <class T>
void split_rows(const T* src, int64_t total, int64_t col, int64_t outer, int64_t inner, T* dst, Device device) {
  run<kernel::SplitRows, T>(device, src, total, col, outer, inner, dst);
}
/// out [outer, k, inner] = rows idx of x [outer, n, inner].
template <class T>
void gather_rows(const T* x, int64_t outer, int64_t n, int64_t inner, const int64_t* idx, int64_t k, T* out,
                 Device device) {
  run<kernel::GatherRows, T>(device, x, outer, n, inner, idx, k, out);
}
/// dx (zeroed first unless `add`) += g scattered to rows idx.
template <class T>
void scatter_add_rows(const T* g, int64_t outer, int64_t n, int64_t inner, const int64_t* idx, int64_t k, T* dx,
                      bool add, Device device) {
  run<kernel::ScatterAddRows, T>(device, g, outer, n, inner, idx, k, dx, add);
}
/// out [count, depth]: `on` at each label, `off` elsewhere.
template <class T>
void one_hot(const int64_t* labels, int64_t count, int64_t depth, T on, T off, T* out, Device device) {
  run<kernel::OneHot, T>(device, labels, count, depth, on, off, out);
}
/// dst = (or += with `add`) static_cast<U>(src).
template <class T, class U>
void cast(const T* src, int64_t n, U* dst, bool add, Device device) {
  run<kernel::Cast<U>, T>(device, src, n, dst, add);
}

}  // namespace gradus::backend
