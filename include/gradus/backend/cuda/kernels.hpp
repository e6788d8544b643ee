// gradus/backend/cuda/kernels.hpp — the CUDA backend's table: which function of backend/cuda/
// runs each kernel of backend/kernels.hpp on a GPU, for float and double. Elementwise
// expressions run as generated kernels (cuda/elementwise.hpp), matrix products on cuBLAS
// (cuda/blas.hpp), the rest as the library kernels (cuda/library.hpp loads them; cuda/conv.hpp,
// cuda/sampling.hpp, cuda/layers.hpp, cuda/softmax.hpp, cuda/reduce.hpp, cuda/copy.hpp and
// cuda/lstm.hpp launch them).
// A kernel with no entry here (integer tensors, except for data movement and casts) is null:
// calling it with GPU operands is a gd::device_error naming the op and the device.
#pragma once
#include "gradus/backend/cuda/blas.hpp"
#include "gradus/backend/cuda/conv.hpp"
#include "gradus/backend/cuda/copy.hpp"
#include "gradus/backend/cuda/elementwise.hpp"
#include "gradus/backend/cuda/layers.hpp"
#include "gradus/backend/cuda/library.hpp"
#include "gradus/backend/cuda/lstm.hpp"
#include "gradus/backend/cuda/reduce.hpp"
#include "gradus/backend/cuda/sampling.hpp"
#include "gradus/backend/cuda/softmax.hpp"
#include "gradus/backend/registry.hpp"
#include "gradus/expr/activations.hpp"

namespace gradus::backend::cuda {

/// The CUDA backend's function for kernel K and element type T (null: none).
template <class K, class T>
inline constexpr kernel_fn<K, T> kernel_of = nullptr;

// ------------------------------------------------------------------------------ elementwise
template <class E, Real T>
inline constexpr kernel_fn<kernel::Evaluate<E>, T> kernel_of<kernel::Evaluate<E>, T> =
    [](const E& e, T* out, const Shape& shape, Device device) { cuda::evaluate_into(e, out, shape, device); };
/// A full sum: one generated reduction kernel writes each block's partial sum (in double), and
/// finish_sum adds them in a fixed order on the device — bit-reproducible, no atomics, no host
/// synchronisation, two launches.
template <class E, Real T>
inline constexpr kernel_fn<kernel::SumAll<E>, T> kernel_of<kernel::SumAll<E>, T> =
    [](const E& e, const Shape& shape, T* dst, T scale, Device device) {
      const Tensor<double> partials = Tensor<double>::empty(Shape{cuda::max_grid_blocks(device.index)}, device);
      const long blocks = cuda::sum_partials(e, shape, partials.device_data(), device);
      cuda::finish_sum(dst, partials.device_data(), blocks, double(scale), device);
    };
/// An axis sum: the values (unless e is a tensor) into a buffer, then summed along the axes in an
/// order fixed by the shapes (cuda::sum_to) — the same bits on every run.
template <class E, Real T>
inline constexpr kernel_fn<kernel::SumInto<E>, T> kernel_of<kernel::SumInto<E>, T> =
    [](const E& e, const Shape& shape, T* acc, const Shape& reduced, Device device) {
      if constexpr (std::is_same_v<std::remove_cvref_t<E>, Tensor<T>>) {
        cuda::sum_to(e.device_data(), shape, acc, reduced, /*add=*/true, device);
      } else {
        const Tensor<T> values = Tensor<T>::empty(shape, device);
        cuda::evaluate_into(e, values.device_data(), shape, device);
        cuda::sum_to(values.device_data(), shape, acc, reduced, /*add=*/true, device);
      }
    };
/// One generated kernel writes every target's gradient (and, with value_dst, the value's sum
/// into a double accumulator finished on the device). A broadcast operand's gradient (a bias
/// added to every row, a scalar Var times a tensor) is written per output element into a buffer
/// of the output's shape, then summed into its target by cuda::sum_to: in a fixed order, with
/// no atomics, so a step's gradients are the same bits on every run.
template <class E, class Adjoint, Real T>
inline constexpr kernel_fn<kernel::FusedBackward<E, Adjoint>, T> kernel_of<kernel::FusedBackward<E, Adjoint>, T> =
    [](const E& e, const Shape& out, const Tensor<T>& g, T scale, const GradTarget<T>* targets, int ntargets,
       T* value_dst, T value_scale, Device device) {
      BackwardTargets<T> bt;
      Tensor<T> spread[32];  // a broadcast target's gradient per output element
      for (int i = 0; i < ntargets; ++i) {
        const GradTarget<T>& t = targets[i];
        if (!t.dst) continue;
        if (t.broadcast) {
          spread[t.leaf] = Tensor<T>::empty(out, device);
          bt.grad[t.leaf] = spread[t.leaf].device_data();
        } else {
          bt.grad[t.leaf] = t.dst;
          bt.add[t.leaf] = t.add;
        }
      }
      Tensor<double> partials;  // with value_dst: the values' per-block sums, added by finish_sum
      if (value_dst) partials = Tensor<double>::empty(Shape{cuda::max_grid_blocks(device.index)}, device);
      const long blocks = cuda::fused_backward(e, out, g, scale, bt, value_dst ? partials.device_data() : nullptr, device);
      if (value_dst) cuda::finish_sum(value_dst, partials.device_data(), blocks, double(value_scale), device);
      for (int i = 0; i < ntargets; ++i) {  // in leaf order: a Var's occurrences add up in a fixed order
        const GradTarget<T>& t = targets[i];
        if (t.dst && t.broadcast) cuda::sum_to(spread[t.leaf].device_data(), out, t.dst, t.shape, t.add, device);
      }
    };
template <Real T>
inline constexpr kernel_fn<kernel::Fill, T> kernel_of<kernel::Fill, T> = [](T* d, int64_t n, T v, Device device) {
  cuda::fill(d, long(n), v, device);
};
template <Real T>
inline constexpr kernel_fn<kernel::AddInto, T> kernel_of<kernel::AddInto, T> =
    [](T* d, const T* s, int64_t n, Device device) { cuda::add_into(d, s, long(n), device); };

// ------------------------------------------------------------------------------ GEMM, layers
template <Real T>
inline constexpr kernel_fn<kernel::Gemm, T> kernel_of<kernel::Gemm, T> =
    [](const T* a, bool ta, const T* b, bool tb, T* c, int64_t m, int64_t k, int64_t n, bool add, Device device) {
      cuda::gemm(a, ta, b, tb, c, m, k, n, add, device);
    };

/// An activation's alpha (leaky_relu's slope, elu's scale; 0 for the others).
template <class Op>
double activation_alpha(const Op& op) {
  if constexpr (requires { op.param(0); })
    return op.param(0);
  else
    return 0.0;
}
template <class Op, Real T>
inline constexpr kernel_fn<kernel::BiasActivation<Op>, T> kernel_of<kernel::BiasActivation<Op>, T> =
    [](const Op& op, const T* h, const T* b, int64_t rows, int64_t n, T* y, Device device) {
      cuda::bias_activation_forward(int(ActivationOf<Op>::kind), activation_alpha(op), h, b, rows, n, y, device);
    };
template <class Op, Real T>
inline constexpr kernel_fn<kernel::BiasActivationBackward<Op>, T> kernel_of<kernel::BiasActivationBackward<Op>, T> =
    [](const Op& op, const T* h, const T* b, const T* y, const T* g, int64_t rows, int64_t n, T* dz, Device device) {
      cuda::bias_activation_backward(int(ActivationOf<Op>::kind), activation_alpha(op), h, b, y, g, rows, n, dz, device);
    };
template <Real T>
inline constexpr kernel_fn<kernel::SumRows, T> kernel_of<kernel::SumRows, T> =
    [](const T* x, int64_t rows, int64_t n, T* out, Device device) { cuda::sum_rows(x, rows, n, out, device); };
template <Real T>
inline constexpr kernel_fn<kernel::DropoutMask, T> kernel_of<kernel::DropoutMask, T> =
    [](uint64_t key, double keep, T scale, int64_t n, T* mask, Device device) {
      cuda::dropout_mask(key, keep, scale, n, mask, device);
    };
template <Real T>
inline constexpr kernel_fn<kernel::MaskedMultiply, T> kernel_of<kernel::MaskedMultiply, T> =
    [](const T* x, const T* mask, int64_t n, T* out, bool add, Device device) {
      cuda::masked_multiply(x, mask, n, out, add, device);
    };

template <Real T>
inline constexpr kernel_fn<kernel::LstmForward, T> kernel_of<kernel::LstmForward, T> =
    [](const LstmPlan& p, const T* xp, const T* r, const T* bias, const T* h0, const T* c0, T* h_seq, T* h_last,
       T* c_last, const LstmSaved<T>& saved, Device device) {
      cuda::lstm_forward(p, xp, r, bias, h0, c0, h_seq, h_last, c_last, saved, device);
    };
template <Real T>
inline constexpr kernel_fn<kernel::LstmBackward, T> kernel_of<kernel::LstmBackward, T> =
    [](const LstmPlan& p, const T* r, const LstmSaved<T>& saved, const T* g_seq, const T* g_h_last, const T* g_c_last,
       T* dxp, bool add_xp, T* dr, bool add_r, T* db, bool add_b, T* dh0, bool add_h0, T* dc0, bool add_c0,
       Device device) {
      cuda::lstm_backward(p, r, saved, g_seq, g_h_last, g_c_last, dxp, add_xp, dr, add_r, db, add_b, dh0, add_h0, dc0,
                          add_c0, device);
    };

// ----------------------------------------------------------------- convolution and pooling
template <Real T>
inline constexpr kernel_fn<kernel::Conv2d, T> kernel_of<kernel::Conv2d, T> =
    [](const ConvPlan& p, const T* x, const T* w, const T* bias, T* out, Device device) {
      cuda::conv2d_forward(p, x, w, bias, out, device);
    };
template <Real T>
inline constexpr kernel_fn<kernel::Conv2dBackward, T> kernel_of<kernel::Conv2dBackward, T> =
    [](const ConvPlan& p, const T* g, const T* x, const T* w, T* dx, bool add_dx, T* dw, bool add_dw, T* db,
       bool add_db, Device device) { cuda::conv2d_backward(p, g, x, w, dx, add_dx, dw, add_dw, db, add_db, device); };
template <Real T>
inline constexpr kernel_fn<kernel::Pool2d, T> kernel_of<kernel::Pool2d, T> =
    [](const PoolPlan& p, const T* x, T* y, bool max, Device device) { cuda::pool2d_forward(p, x, y, max, device); };
template <Real T>
inline constexpr kernel_fn<kernel::Pool2dBackward, T> kernel_of<kernel::Pool2dBackward, T> =
    [](const PoolPlan& p, const T* g, const T* x, const T* y, T* dx, bool add, bool max, Device device) {
      cuda::pool2d_backward(p, g, x, y, dx, add, max, device);
    };

// ---------------------------------------------------------------------------------- sampling
template <Real T>
inline constexpr kernel_fn<kernel::Resample, T> kernel_of<kernel::Resample, T> =
    [](const ResamplePlan& p, const T* data, const T* warp, T* out, Device device) {
      cuda::resample_forward(p, data, warp, out, device);
    };
template <Real T>
inline constexpr kernel_fn<kernel::ResampleBackward, T> kernel_of<kernel::ResampleBackward, T> =
    [](const ResamplePlan& p, const T* g, const T* data, const T* warp, T* ddata, bool add_data, T* dwarp,
       bool add_warp, Device device) {
      cuda::resample_backward(p, g, data, warp, ddata, add_data, dwarp, add_warp, device);
    };

// -------------------------------------------------------------------------- softmax, one-hot
template <Real T>
inline constexpr kernel_fn<kernel::Softmax, T> kernel_of<kernel::Softmax, T> =
    [](const AxisView& v, const T* x, T* y, bool log, Device device) {
      cuda::softmax_forward(x, y, v.outer, v.n, v.inner, log, device);
    };
template <Real T>
inline constexpr kernel_fn<kernel::SoftmaxBackward, T> kernel_of<kernel::SoftmaxBackward, T> =
    [](const AxisView& v, const T* y, const T* g, T* dx, bool log, Device device) {
      cuda::softmax_backward(y, g, dx, v.outer, v.n, v.inner, log, device);
    };
template <Real T>
inline constexpr kernel_fn<kernel::OneHot, T> kernel_of<kernel::OneHot, T> =
    [](const int64_t* labels, int64_t count, int64_t depth, T on, T off, T* out, Device device) {
      cuda::one_hot(labels, count, depth, on, off, out, device);
    };

// ------------------------------------------------------------------------------- reductions
template <Real T>
inline constexpr kernel_fn<kernel::ReduceExtremum, T> kernel_of<kernel::ReduceExtremum, T> =
    [](const AxisView& v, const T* x, T* y, bool is_max, Device device) {
      cuda::reduce_extremum(v, x, y, is_max, device);
    };
template <Real T>
inline constexpr kernel_fn<kernel::ReduceExtremumBackward, T> kernel_of<kernel::ReduceExtremumBackward, T> =
    [](const AxisView& v, const T* x, const T* y, const T* g, T* dx, Device device) {
      cuda::reduce_extremum_backward(v, x, y, g, dx, device);
    };
template <Real T>
inline constexpr kernel_fn<kernel::ReduceArg, T> kernel_of<kernel::ReduceArg, T> =
    [](const AxisView& v, const T* x, int64_t* out, bool is_max, Device device) {
      cuda::reduce_arg(v, x, out, is_max, device);
    };
template <Real T>
inline constexpr kernel_fn<kernel::ReduceProd, T> kernel_of<kernel::ReduceProd, T> =
    [](const AxisView& v, const T* x, T* y, Device device) { cuda::reduce_prod(v, x, y, device); };
template <Real T>
inline constexpr kernel_fn<kernel::ReduceProdBackward, T> kernel_of<kernel::ReduceProdBackward, T> =
    [](const AxisView& v, const T* x, const T* g, T* dx, Device device) {
      cuda::reduce_prod_backward(v, x, g, dx, device);
    };
template <Real T>
inline constexpr kernel_fn<kernel::ReduceLogsumexp, T> kernel_of<kernel::ReduceLogsumexp, T> =
    [](const AxisView& v, const T* x, T* y, Device device) { cuda::reduce_logsumexp(v, x, y, device); };
template <Real T>
inline constexpr kernel_fn<kernel::ReduceLogsumexpBackward, T> kernel_of<kernel::ReduceLogsumexpBackward, T> =
    [](const AxisView& v, const T* x, const T* y, const T* g, T* dx, Device device) {
      cuda::reduce_logsumexp_backward(v, x, y, g, dx, device);
    };

/// Adam's three expressions as one kernel, for up to 32 parameters at once (library/optim.cuh).
template <Real T>
inline constexpr kernel_fn<kernel::AdamUpdate, T> kernel_of<kernel::AdamUpdate, T> =
    [](const AdamStep<T>& s, const AdamTensors<T>* params, int count, Device device) {
      cuda::adam_update(AdamConstants<T>{s.beta1, s.one_minus_beta1, s.beta2, s.one_minus_beta2, s.alpha, s.eps, s.decay},
                        params, count, device);
    };

/// Labels checked on the GPU, the error thrown at the next synchronisation point.
template <std::same_as<int64_t> T>
inline constexpr kernel_fn<kernel::CheckRange, T> kernel_of<kernel::CheckRange, T> =
    [](const int64_t* values, int64_t n, int64_t end, const RangeCheck& check, Device device) {
      cuda::check_range(values, n, end, check, device);
    };

// ---------------------------------------------------------------------------- data movement
/// The element types the data-movement kernels move on a GPU.
template <class T>
concept Movable = Real<T> || std::is_same_v<T, int64_t>;

template <Movable T>
inline constexpr kernel_fn<kernel::CopyWindow, T> kernel_of<kernel::CopyWindow, T> =
    [](const Tensor<T>& src, const int64_t* src_at, Tensor<T>& dst, const int64_t* dst_at, const Shape& extent,
       Device) { cuda::copy_window(src, src_at, dst, dst_at, extent); };
template <Real T>
inline constexpr kernel_fn<kernel::WindowGrad, T> kernel_of<kernel::WindowGrad, T> =
    [](const Tensor<T>& g, T* dx, bool add, const Shape& xs, const int64_t* at, Device) {
      cuda::window_grad(g, dx, add, xs, at);
    };
template <Movable T>
inline constexpr kernel_fn<kernel::Permute, T> kernel_of<kernel::Permute, T> =
    [](const Tensor<T>& x, const IntList& perm, Tensor<T>& out, Device) { out = cuda::permute(x, perm); };
template <Movable T>
inline constexpr kernel_fn<kernel::JoinRows, T> kernel_of<kernel::JoinRows, T> =
    [](const std::vector<const T*>& parts, const std::vector<int64_t>& inner, T* out, int64_t outer, Device device) {
      cuda::join_rows(parts, inner, out, outer, device);
    };
template <Movable T>
inline constexpr kernel_fn<kernel::SplitRows, T> kernel_of<kernel::SplitRows, T> =
    [](const T* src, int64_t total, int64_t col, int64_t outer, int64_t inner, T* dst, Device device) {
      cuda::split_rows(src, total, col, outer, inner, dst, device);
    };
template <Movable T>
inline constexpr kernel_fn<kernel::GatherRows, T> kernel_of<kernel::GatherRows, T> =
    [](const T* x, int64_t outer, int64_t n, int64_t inner, const int64_t* idx, int64_t k, T* out, Device device) {
      cuda::gather_rows(x, outer, n, inner, idx, k, out, device);
    };
template <Real T>
inline constexpr kernel_fn<kernel::ScatterAddRows, T> kernel_of<kernel::ScatterAddRows, T> =
    [](const T* g, int64_t outer, int64_t n, int64_t inner, const int64_t* idx, int64_t k, T* dx, bool add,
       Device device) { cuda::scatter_add_rows(g, outer, n, inner, idx, k, dx, add, device); };
template <Movable U, Movable T>
inline constexpr kernel_fn<kernel::Cast<U>, T> kernel_of<kernel::Cast<U>, T> =
    [](const T* src, int64_t n, U* dst, bool add, Device device) { cuda::cast(src, n, dst, add, device); };

/// The CUDA backend, as backend/backends.hpp lists it.
struct Backend {
  static constexpr DeviceType device_type = DeviceType::cuda;
  template <class K, class T>
  static constexpr kernel_fn<K, T> kernel = kernel_of<K, T>;
};

}  // namespace gradus::backend::cuda
