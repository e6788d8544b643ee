// gradus/backend/kernels.hpp — every kernel a backend can provide, written once: its name and
// its signature. A backend is a table of these (one function per kernel and element type,
// null where it has none); backend/backend.hpp's entry points look the kernel up by the
// tensors' device and call it.
//
// A kernel is a tag type: `name` (what an error names) and `fn<T>`, the type of its
// implementation for element type T. Every implementation takes the device it runs on last.
// Kernels that depend on more than T carry it as a template parameter of the tag: the
// elementwise kernels take the expression type E, bias + activation the op struct, cast the
// destination type.
//
//   kernel::Gemm::fn<float>   // void (*)(const float* a, bool ta, ..., bool add, Device)
#pragma once
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "gradus/backend/plans.hpp"
#include "gradus/core/device.hpp"
#include "gradus/core/small_list.hpp"
#include "gradus/core/tensor.hpp"

namespace gradus::backend {

/// What a range check (kernel::CheckRange) reports for value V at position P outside [0, end):
/// "<op>: <what> V at position P out of range [0, end) for <of> of shape S", or with `axis` >= 0
/// "... for axis A of shape S". Nothing is allocated unless a check fails.
struct RangeCheck {
  const char* op;    ///< "sparse_softmax_cross_entropy_with_logits", "gather"
  const char* what;  ///< "label", "index"
  const char* of;    ///< "logits", "predictions" (when axis < 0)
  const Shape& shape;
  int axis = -1;
  /// " for logits of shape [5,10]", " for axis 0 of shape [5,3]".
  std::string context() const {
    std::ostringstream os;
    os << " for ";
    if (axis >= 0)
      os << "axis " << axis;
    else
      os << of;
    os << " of shape " << shape;
    return os.str();
  }
};

/// The constants of one Adam step (kernel::AdamUpdate), in the element type.
template <class T>
struct AdamStep {
  T beta1, one_minus_beta1, beta2, one_minus_beta2, alpha, eps, decay;
};
/// One parameter of an Adam step: its n weights, gradient and state (vhat null without AMSGrad).
template <class T>
struct AdamTensors {
  T* w;
  const T* g;
  T* m;
  T* v;
  T* vhat;
  int64_t n;
};

/// Where a fused backward pass sends the gradient of one Var operand of an expression: `dst`
/// (in the device's memory; null: not wanted), added when `add`. `broadcast`: the operand is
/// smaller than the output (of shape `shape`) and its gradient is summed over the broadcast
/// axes; `dst` is then already initialised and `add` is true. `leaf` is the operand's position
/// among the expression's tensor operands, left to right (what a generated kernel numbers).
template <class T>
struct GradTarget {
  T* dst = nullptr;
  bool add = false;
  bool broadcast = false;
  int leaf = 0;
  Shape shape{};
};

#define GRADUS_KERNEL(Tag, label, ...)              \
  struct Tag {                                      \
    static constexpr const char* name = label;      \
    template <class T>                              \
    using fn = void (*)(__VA_ARGS__, Device);       \
  };

namespace kernel {

// ------------------------------------------------------------------------------ elementwise
/// out[i] = e[i] over `shape`; `out` may alias a same-shape operand.
template <class E>
GRADUS_KERNEL(Evaluate, "elementwise", const E& e, T* out, const Shape& shape)
/// dst[0] = T(sum of e over `shape`) * scale.
template <class E>
GRADUS_KERNEL(SumAll, "sum", const E& e, const Shape& shape, T* dst, T scale)
/// acc (shape `reduced`) += e summed over the axes where `reduced` broadcasts to `shape`.
template <class E>
GRADUS_KERNEL(SumInto, "sum", const E& e, const Shape& shape, T* acc, const Shape& reduced)
/// The fused backward pass of e over `out`: the adjoint g (broadcast to `out`) times `scale`
/// pushed into each target; with `value_dst`, value_dst[0] = T(sum of e) * value_scale too.
/// `Adjoint::make(e, out, targets)` builds the adjoint evaluator a backend that compiles the
/// expression in place runs (autodiff/adjoint.hpp); a backend that generates kernels ignores it.
template <class E, class Adjoint>
GRADUS_KERNEL(FusedBackward, "backward", const E& e, const Shape& out, const Tensor<T>& g, T scale,
              const GradTarget<T>* targets, int ntargets, T* value_dst, T value_scale)
GRADUS_KERNEL(Fill, "fill", T* d, int64_t n, T v)
GRADUS_KERNEL(AddInto, "add_into", T* d, const T* s, int64_t n)

// ------------------------------------------------------------------------------ GEMM, layers
GRADUS_KERNEL(Gemm, "matmul", const T* a, bool ta, const T* b, bool tb, T* c, int64_t m, int64_t k, int64_t n,
              bool add)
template <class Op>
GRADUS_KERNEL(BiasActivation, "bias_activation", const Op& op, const T* h, const T* b, int64_t rows, int64_t n, T* y)
template <class Op>
GRADUS_KERNEL(BiasActivationBackward, "bias_activation", const Op& op, const T* h, const T* b, const T* y,
              const T* g, int64_t rows, int64_t n, T* dz)
GRADUS_KERNEL(SumRows, "sum_rows", const T* x, int64_t rows, int64_t n, T* out)
GRADUS_KERNEL(LstmForward, "lstm_sequence", const LstmPlan& p, const T* xp, const T* r, const T* bias, const T* h0,
              const T* c0, T* h_seq, T* h_last, T* c_last, const LstmSaved<T>& saved)
GRADUS_KERNEL(LstmBackward, "lstm_sequence", const LstmPlan& p, const T* r, const LstmSaved<T>& saved,
              const T* g_seq, const T* g_h_last, const T* g_c_last, T* dxp, bool add_xp, T* dr, bool add_r, T* db,
              bool add_b, T* dh0, bool add_h0, T* dc0, bool add_c0)
GRADUS_KERNEL(DropoutMask, "dropout", uint64_t key, double keep, T scale, int64_t n, T* mask)
/// One Adam (AMSGrad, AdamW) step of `count` parameters in one pass over each — what optim::Adam
/// otherwise composes from three expressions per parameter: m ← β1·m + (1-β1)·g;
/// v ← β2·v + (1-β2)·g²; with `vhat`, vhat ← max(vhat, v), read in place of v;
/// w ← w - decay·w - alpha·m / (√v + eps) (the decay term only when decay is not 0). The CPU runs
/// each parameter in pieces that stay in L1 (cpu/optim.hpp), a GPU up to 32 parameters per launch.
/// Not every backend has it: ask implements<kernel::AdamUpdate, T>.
GRADUS_KERNEL(AdamUpdate, "adam", const AdamStep<T>& step, const AdamTensors<T>* params, int count)
GRADUS_KERNEL(MaskedMultiply, "dropout", const T* x, const T* mask, int64_t n, T* out, bool add)

// ----------------------------------------------------------------- convolution and pooling
GRADUS_KERNEL(Conv2d, "conv2d", const ConvPlan& p, const T* x, const T* w, const T* bias, T* out)
GRADUS_KERNEL(Conv2dBackward, "conv2d", const ConvPlan& p, const T* g, const T* x, const T* w, T* dx, bool add_dx,
              T* dw, bool add_dw, T* db, bool add_db)
GRADUS_KERNEL(Conv2dRelu, "conv2d_bias_relu", const ConvPlan& p, const T* x, const T* w, const T* bias, T* out)
GRADUS_KERNEL(Conv2dReluBackward, "conv2d_bias_relu", const ConvPlan& p, const T* g, const T* y, const T* x,
              const T* w, T* dx, bool add_dx, T* dw, bool add_dw, T* db, bool add_db)
GRADUS_KERNEL(Pool2d, "pool2d", const PoolPlan& p, const T* x, T* y, bool max)
GRADUS_KERNEL(Pool2dBackward, "pool2d", const PoolPlan& p, const T* g, const T* x, const T* y, T* dx, bool add,
              bool max)

// ------------------------------------------------------------------------------- sampling
/// out [b, p, c] = data [b, h, w, c] bilinearly sampled at warp [b, p, 2] (TensorFlow's resampler:
/// neighbours outside the image read 0, a point outside (-1, w) x (-1, h) gives 0).
GRADUS_KERNEL(Resample, "resampler", const ResamplePlan& p, const T* data, const T* warp, T* out)
/// The gradients of Resample from g [b, p, c]: into ddata and dwarp (null: not wanted), each
/// written, or added with its `add` flag.
GRADUS_KERNEL(ResampleBackward, "resampler", const ResamplePlan& p, const T* g, const T* data, const T* warp,
              T* ddata, bool add_data, T* dwarp, bool add_warp)

// -------------------------------------------------------------------- reductions, softmax
GRADUS_KERNEL(ReduceExtremum, "max/min", const AxisView& v, const T* x, T* y, bool is_max)
GRADUS_KERNEL(ReduceExtremumBackward, "max/min", const AxisView& v, const T* x, const T* y, const T* g, T* dx)
GRADUS_KERNEL(ReduceArg, "argmax/argmin", const AxisView& v, const T* x, int64_t* out, bool is_max)
GRADUS_KERNEL(ReduceProd, "prod", const AxisView& v, const T* x, T* y)
GRADUS_KERNEL(ReduceProdBackward, "prod", const AxisView& v, const T* x, const T* g, T* dx)
GRADUS_KERNEL(ReduceLogsumexp, "logsumexp", const AxisView& v, const T* x, T* y)
GRADUS_KERNEL(ReduceLogsumexpBackward, "logsumexp", const AxisView& v, const T* x, const T* y, const T* g, T* dx)
GRADUS_KERNEL(Softmax, "softmax", const AxisView& v, const T* x, T* y, bool log)
GRADUS_KERNEL(SoftmaxBackward, "softmax", const AxisView& v, const T* y, const T* g, T* dx, bool log)
// `lse`: 2 × rows values, what the backward pass needs of the forward one (the CPU keeps each
// row's log of the sum of exp(z - max) in the first half and its maximum in the second, so that
// neither pass rounds at the magnitude of the logits and the backward pass reads z once).
GRADUS_KERNEL(SparseXent, "sparse_softmax_cross_entropy_with_logits", int64_t rows, int64_t classes, const T* z,
              const int64_t* labels, T* loss, T* lse)
GRADUS_KERNEL(SparseXentBackward, "sparse_softmax_cross_entropy_with_logits", int64_t rows, int64_t classes,
              const T* z, const int64_t* labels, const T* lse, const T* g, T* dz)
/// For T = int64_t: value_error `<op>: <what> V at position P out of range [0, end)<context>` for
/// the first value outside [0, end) (a sparse loss's label, gather's index), now or (a GPU) at its
/// next synchronisation point.
GRADUS_KERNEL(CheckRange, "range check", const int64_t* values, int64_t n, int64_t end, const RangeCheck& check)

// ---------------------------------------------------------------------------- data movement
GRADUS_KERNEL(CopyWindow, "slice", const Tensor<T>& src, const int64_t* src_at, Tensor<T>& dst,
              const int64_t* dst_at, const Shape& extent)
GRADUS_KERNEL(WindowGrad, "slice", const Tensor<T>& g, T* dx, bool add, const Shape& xs, const int64_t* at)
/// out = x with its axes permuted (a view of x when no data moves).
GRADUS_KERNEL(Permute, "transpose", const Tensor<T>& x, const IntList& perm, Tensor<T>& out)
GRADUS_KERNEL(JoinRows, "concat", const std::vector<const T*>& parts, const std::vector<int64_t>& inner, T* out,
              int64_t outer)
GRADUS_KERNEL(SplitRows, "split", const T* src, int64_t total, int64_t col, int64_t outer, int64_t inner, T* dst)
GRADUS_KERNEL(GatherRows, "gather", const T* x, int64_t outer, int64_t n, int64_t inner, const int64_t* idx,
              int64_t k, T* out)
GRADUS_KERNEL(ScatterAddRows, "gather", const T* g, int64_t outer, int64_t n, int64_t inner, const int64_t* idx,
              int64_t k, T* dx, bool add)
GRADUS_KERNEL(OneHot, "one_hot", const int64_t* labels, int64_t count, int64_t depth, T on, T off, T* out)
/// dst = (or += with `add`) static_cast<U>(src).
template <class U>
GRADUS_KERNEL(Cast, "cast", const T* src, int64_t n, U* dst, bool add)

}  // namespace kernel

#undef GRADUS_KERNEL

}  // namespace gradus::backend
