// gradus/backend/cpu/kernels.hpp — the CPU backend's table: which function of backend/cpu/ runs
// each kernel of backend/kernels.hpp on the host. Elementwise expressions are compiled in
// place, in the translation unit that evaluates them (cpu/elementwise.hpp); every other kernel
// is the function of its area's header (or, with GRADUS_COMPILED_KERNELS, its declaration in
// cpu/compiled.hpp). A kernel with no entry here is null: the CPU runs every kernel today.
#pragma once
#include <algorithm>
#include <array>

#include "gradus/backend/cpu/bias_activation.hpp"
#include "gradus/backend/cpu/copy.hpp"
#include "gradus/backend/cpu/dropout.hpp"
#include "gradus/backend/cpu/elementwise.hpp"
#include "gradus/backend/cpu/optim.hpp"
#include "gradus/backend/cpu/reduce.hpp"
#include "gradus/backend/cpu/sampling.hpp"
#include "gradus/backend/cpu/softmax.hpp"
#include "gradus/backend/registry.hpp"
#include "gradus/core/compiled.hpp"
#if defined(GRADUS_COMPILED_KERNELS)  // linked with gradus::kernels: GEMM, conv, pooling, LSTM compiled there
#include "gradus/backend/cpu/compiled.hpp"
#else
#include "gradus/backend/cpu/conv.hpp"
#include "gradus/backend/cpu/gemm.hpp"
#include "gradus/backend/cpu/lstm.hpp"
#include "gradus/backend/cpu/pool.hpp"
#endif

namespace gradus::backend::cpu {

/// The CPU's function for kernel K and element type T (null: none).
template <class K, class T>
inline constexpr kernel_fn<K, T> kernel_of = nullptr;

// ------------------------------------------------------------------------------ elementwise
template <class E, class T>
inline constexpr kernel_fn<kernel::Evaluate<E>, T> kernel_of<kernel::Evaluate<E>, T> =
    [](const E& e, T* out, const Shape& shape, Device) { cpu::evaluate_into(e, out, shape); };
template <class E, class T>
inline constexpr kernel_fn<kernel::SumAll<E>, T> kernel_of<kernel::SumAll<E>, T> =
    [](const E& e, const Shape& shape, T* dst, T scale, Device) { dst[0] = T(cpu::sum_all(e, shape)) * scale; };
template <class E, class T>
inline constexpr kernel_fn<kernel::SumInto<E>, T> kernel_of<kernel::SumInto<E>, T> =
    [](const E& e, const Shape& shape, T* acc, const Shape& reduced, Device) { cpu::sum_into(e, shape, acc, reduced); };
template <class E, class Adjoint, class T>
inline constexpr kernel_fn<kernel::FusedBackward<E, Adjoint>, T> kernel_of<kernel::FusedBackward<E, Adjoint>, T> =
    [](const E& e, const Shape& out, const Tensor<T>& g, T scale, const GradTarget<T>* targets, int ntargets,
       T* value_dst, T value_scale, Device) {
      std::array<LeafTarget<T>, kMaxLeaves> leaves{};
      for (int i = 0; i < ntargets; ++i) {
        const GradTarget<T>& t = targets[i];
        LeafTarget<T>& l = leaves[size_t(i)];
        if (!t.dst) continue;
        l.dst = t.dst;
        l.add = t.add;
        l.numel = t.shape.numel();
        l.contiguous = !t.broadcast;
        if (t.broadcast) l.bc = Broadcast(t.shape, out);
      }
      double total = 0;
      cpu::backward_blocks(out, g, scale, leaves.data(), ntargets, value_dst ? &total : nullptr,
                      [&](LeafTarget<T>* local) { return Adjoint::make(e, out, local); });
      if (value_dst) value_dst[0] = T(total) * value_scale;
    };
template <class T>
inline constexpr kernel_fn<kernel::Fill, T> kernel_of<kernel::Fill, T> = [](T* d, int64_t n, T v, Device) {
  std::fill_n(d, n, v);
};
template <class T>
inline constexpr kernel_fn<kernel::AddInto, T> kernel_of<kernel::AddInto, T> = [](T* d, const T* s, int64_t n, Device) {
  Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>(d, n) += Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>(s, n);
};

// ------------------------------------------------------------------------------ GEMM, layers
template <class T>
inline constexpr kernel_fn<kernel::Gemm, T> kernel_of<kernel::Gemm, T> =
    [](const T* a, bool ta, const T* b, bool tb, T* c, int64_t m, int64_t k, int64_t n, bool add, Device) {
      cpu::gemm(a, ta, b, tb, c, m, k, n, add);
    };
template <class Op, class T>
inline constexpr kernel_fn<kernel::BiasActivation<Op>, T> kernel_of<kernel::BiasActivation<Op>, T> =
    [](const Op& op, const T* h, const T* b, int64_t rows, int64_t n, T* y, Device) {
      cpu::bias_activation_forward(op, h, b, rows, n, y);
    };
template <class Op, class T>
inline constexpr kernel_fn<kernel::BiasActivationBackward<Op>, T> kernel_of<kernel::BiasActivationBackward<Op>, T> =
    [](const Op& op, const T* h, const T* b, const T* y, const T* g, int64_t rows, int64_t n, T* dz, Device) {
      cpu::bias_activation_backward(op, h, b, y, g, rows, n, dz);
    };
template <class T>
inline constexpr kernel_fn<kernel::SumRows, T> kernel_of<kernel::SumRows, T> =
    [](const T* x, int64_t rows, int64_t n, T* out, Device) { cpu::sum_rows(x, rows, n, out); };
template <class T>
inline constexpr kernel_fn<kernel::LstmForward, T> kernel_of<kernel::LstmForward, T> =
    [](const LstmPlan& p, const T* xp, const T* r, const T* bias, const T* h0, const T* c0, T* h_seq, T* h_last,
       T* c_last, const LstmSaved<T>& saved,
       Device) { cpu::lstm_forward(p, xp, r, bias, h0, c0, h_seq, h_last, c_last, saved); };
template <class T>
inline constexpr kernel_fn<kernel::LstmBackward, T> kernel_of<kernel::LstmBackward, T> =
    [](const LstmPlan& p, const T* r, const LstmSaved<T>& saved, const T* g_seq, const T* g_h_last,
       const T* g_c_last, T* dxp, bool add_xp, T* dr, bool add_r, T* db, bool add_b, T* dh0, bool add_h0, T* dc0,
       bool add_c0, Device) {
      cpu::lstm_backward(p, r, saved, g_seq, g_h_last, g_c_last, dxp, add_xp, dr, add_r, db, add_b, dh0, add_h0, dc0,
                         add_c0);
    };
template <class T>
inline constexpr kernel_fn<kernel::DropoutMask, T> kernel_of<kernel::DropoutMask, T> =
    [](uint64_t key, double keep, T scale, int64_t n, T* mask, Device) { cpu::dropout_mask(key, keep, scale, n, mask); };
template <class T>
inline constexpr kernel_fn<kernel::AdamUpdate, T> kernel_of<kernel::AdamUpdate, T> =
    [](const AdamStep<T>& s, const AdamTensors<T>* params, int count, Device) { cpu::adam_update(s, params, count); };
template <class T>
inline constexpr kernel_fn<kernel::MaskedMultiply, T> kernel_of<kernel::MaskedMultiply, T> =
    [](const T* x, const T* mask, int64_t n, T* out, bool add, Device) { cpu::masked_multiply(x, mask, n, out, add); };

// ----------------------------------------------------------------- convolution and pooling
template <class T>
inline constexpr kernel_fn<kernel::Conv2d, T> kernel_of<kernel::Conv2d, T> =
    [](const ConvPlan& p, const T* x, const T* w, const T* bias, T* out, Device) {
      cpu::conv2d_forward(p, x, w, bias, out, false);
    };
template <class T>
inline constexpr kernel_fn<kernel::Conv2dBackward, T> kernel_of<kernel::Conv2dBackward, T> =
    [](const ConvPlan& p, const T* g, const T* x, const T* w, T* dx, bool add_dx, T* dw, bool add_dw, T* db,
       bool add_db, Device) {
      cpu::conv2d_backward(p, g, x, w, dx, add_dx, dw, add_dw, db, add_db, static_cast<const T*>(nullptr));
    };
template <class T>
inline constexpr kernel_fn<kernel::Conv2dRelu, T> kernel_of<kernel::Conv2dRelu, T> =
    [](const ConvPlan& p, const T* x, const T* w, const T* bias, T* out, Device) {
      cpu::conv2d_forward(p, x, w, bias, out, true);
    };
template <class T>
inline constexpr kernel_fn<kernel::Conv2dReluBackward, T> kernel_of<kernel::Conv2dReluBackward, T> =
    [](const ConvPlan& p, const T* g, const T* y, const T* x, const T* w, T* dx, bool add_dx, T* dw, bool add_dw,
       T* db, bool add_db, Device) { cpu::conv2d_backward(p, g, x, w, dx, add_dx, dw, add_dw, db, add_db, y); };
template <class T>
inline constexpr kernel_fn<kernel::Pool2d, T> kernel_of<kernel::Pool2d, T> =
    [](const PoolPlan& p, const T* x, T* y, bool max, Device) { cpu::pool2d_forward(p, x, y, max); };
template <class T>
inline constexpr kernel_fn<kernel::Pool2dBackward, T> kernel_of<kernel::Pool2dBackward, T> =
    [](const PoolPlan& p, const T* g, const T* x, const T* y, T* dx, bool add, bool max, Device) {
      cpu::pool2d_backward(p, g, x, y, dx, add, max);
    };

// ---------------------------------------------------------------------------------- sampling
template <class T>
inline constexpr kernel_fn<kernel::Resample, T> kernel_of<kernel::Resample, T> =
    [](const ResamplePlan& p, const T* data, const T* warp, T* out, Device) {
      cpu::resample_forward(p, data, warp, out);
    };
template <class T>
inline constexpr kernel_fn<kernel::ResampleBackward, T> kernel_of<kernel::ResampleBackward, T> =
    [](const ResamplePlan& p, const T* g, const T* data, const T* warp, T* ddata, bool add_data, T* dwarp,
       bool add_warp, Device) { cpu::resample_backward(p, g, data, warp, ddata, add_data, dwarp, add_warp); };

// -------------------------------------------------------------------- reductions, softmax
template <class T>
inline constexpr kernel_fn<kernel::ReduceExtremum, T> kernel_of<kernel::ReduceExtremum, T> =
    [](const AxisView& v, const T* x, T* y, bool is_max, Device) { cpu::reduce_extremum(v, x, y, is_max); };
template <class T>
inline constexpr kernel_fn<kernel::ReduceExtremumBackward, T> kernel_of<kernel::ReduceExtremumBackward, T> =
    [](const AxisView& v, const T* x, const T* y, const T* g, T* dx, Device) {
      cpu::reduce_extremum_backward(v, x, y, g, dx);
    };
template <class T>
inline constexpr kernel_fn<kernel::ReduceArg, T> kernel_of<kernel::ReduceArg, T> =
    [](const AxisView& v, const T* x, int64_t* out, bool is_max, Device) { cpu::reduce_arg(v, x, out, is_max); };
template <class T>
inline constexpr kernel_fn<kernel::ReduceProd, T> kernel_of<kernel::ReduceProd, T> =
    [](const AxisView& v, const T* x, T* y, Device) { cpu::reduce_prod(v, x, y); };
template <class T>
inline constexpr kernel_fn<kernel::ReduceProdBackward, T> kernel_of<kernel::ReduceProdBackward, T> =
    [](const AxisView& v, const T* x, const T* g, T* dx, Device) { cpu::reduce_prod_backward(v, x, g, dx); };
template <class T>
inline constexpr kernel_fn<kernel::ReduceLogsumexp, T> kernel_of<kernel::ReduceLogsumexp, T> =
    [](const AxisView& v, const T* x, T* y, Device) { cpu::reduce_logsumexp(v, x, y); };
template <class T>
inline constexpr kernel_fn<kernel::ReduceLogsumexpBackward, T> kernel_of<kernel::ReduceLogsumexpBackward, T> =
    [](const AxisView& v, const T* x, const T* y, const T* g, T* dx, Device) {
      cpu::reduce_logsumexp_backward(v, x, y, g, dx);
    };
template <class T>
inline constexpr kernel_fn<kernel::Softmax, T> kernel_of<kernel::Softmax, T> =
    [](const AxisView& v, const T* x, T* y, bool log, Device) { cpu::softmax_forward(v, x, y, log); };
template <class T>
inline constexpr kernel_fn<kernel::SoftmaxBackward, T> kernel_of<kernel::SoftmaxBackward, T> =
    [](const AxisView& v, const T* y, const T* g, T* dx, bool log, Device) { cpu::softmax_backward(v, y, g, dx, log); };
template <class T>
inline constexpr kernel_fn<kernel::SparseXent, T> kernel_of<kernel::SparseXent, T> =
    [](int64_t rows, int64_t classes, const T* z, const int64_t* labels, T* loss, T* lse, Device) {
      cpu::sparse_xent_forward(rows, classes, z, labels, loss, lse);
    };
template <class T>
inline constexpr kernel_fn<kernel::SparseXentBackward, T> kernel_of<kernel::SparseXentBackward, T> =
    [](int64_t rows, int64_t classes, const T* z, const int64_t* labels, const T* lse, const T* g, T* dz, Device) {
      cpu::sparse_xent_backward(rows, classes, z, labels, lse, g, dz);
    };

template <class T>
inline constexpr kernel_fn<kernel::CheckRange, T> kernel_of<kernel::CheckRange, T> =
    [](const int64_t* v, int64_t n, int64_t end, const RangeCheck& c, Device) {
      for (int64_t i = 0; i < n; ++i)
        GRADUS_CHECK(value_error, v[i] >= 0 && v[i] < end, c.op, ": ", c.what, " ", v[i], " at position ", i,
                     " out of range [0, ", end, ")", c.context());
    };

// ---------------------------------------------------------------------------- data movement
template <class T>
inline constexpr kernel_fn<kernel::CopyWindow, T> kernel_of<kernel::CopyWindow, T> =
    [](const Tensor<T>& src, const int64_t* src_at, Tensor<T>& dst, const int64_t* dst_at, const Shape& extent,
       Device) { cpu::copy_window(src, src_at, dst, dst_at, extent); };
template <class T>
inline constexpr kernel_fn<kernel::WindowGrad, T> kernel_of<kernel::WindowGrad, T> =
    [](const Tensor<T>& g, T* dx, bool add, const Shape& xs, const int64_t* at, Device) {
      cpu::window_grad(g, dx, add, xs, at);
    };
template <class T>
inline constexpr kernel_fn<kernel::Permute, T> kernel_of<kernel::Permute, T> =
    [](const Tensor<T>& x, const IntList& perm, Tensor<T>& out, Device) { out = cpu::permute(x, perm); };
template <class T>
inline constexpr kernel_fn<kernel::JoinRows, T> kernel_of<kernel::JoinRows, T> =
    [](const std::vector<const T*>& parts, const std::vector<int64_t>& inner, T* out, int64_t outer, Device) {
      cpu::join_rows(parts, inner, out, outer);
    };
template <class T>
inline constexpr kernel_fn<kernel::SplitRows, T> kernel_of<kernel::SplitRows, T> =
    [](const T* src, int64_t total, int64_t col, int64_t outer, int64_t inner, T* dst, Device) {
      cpu::split_rows(src, total, col, outer, inner, dst);
    };
template <class T>
inline constexpr kernel_fn<kernel::GatherRows, T> kernel_of<kernel::GatherRows, T> =
    [](const T* x, int64_t outer, int64_t n, int64_t inner, const int64_t* idx, int64_t k, T* out, Device) {
      cpu::gather_rows(x, outer, n, inner, idx, k, out);
    };
template <class T>
inline constexpr kernel_fn<kernel::ScatterAddRows, T> kernel_of<kernel::ScatterAddRows, T> =
    [](const T* g, int64_t outer, int64_t n, int64_t inner, const int64_t* idx, int64_t k, T* dx, bool add, Device) {
      cpu::scatter_add_rows(g, outer, n, inner, idx, k, dx, add);
    };
template <class T>
inline constexpr kernel_fn<kernel::OneHot, T> kernel_of<kernel::OneHot, T> =
    [](const int64_t* labels, int64_t count, int64_t depth, T on, T off, T* out, Device) {
      cpu::one_hot(labels, count, depth, on, off, out);
    };
template <class U, class T>
inline constexpr kernel_fn<kernel::Cast<U>, T> kernel_of<kernel::Cast<U>, T> =
    [](const T* src, int64_t n, U* dst, bool add, Device) { cpu::cast(src, n, dst, add); };

/// The CPU backend, as backend/backends.hpp lists it.
struct Backend {
  static constexpr DeviceType device_type = DeviceType::cpu;
  template <class K, class T>
  static constexpr kernel_fn<K, T> kernel = kernel_of<K, T>;
};

}  // namespace gradus::backend::cpu
