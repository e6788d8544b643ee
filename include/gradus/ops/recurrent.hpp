// gradus/ops/recurrent.hpp — lstm_sequence: every step of an LSTM as one op, differentiable in
// the projected inputs, the recurrent kernel, the bias (in the form that adds it) and the initial
// state, with the final state as differentiable outputs (kernels: backend::lstm_forward/_backward,
// backend/cpu/lstm.hpp).
//
// The op is one tape node for the whole sequence instead of a matmul, four gate slices and the
// gate expressions per step: its forward runs one small GEMM and one fused gate pass per step,
// its backward one fused pass and one GEMM per step plus one GEMM for the recurrent kernel's
// gradient over all steps, and the input projection's adjoint comes out as one tensor (so the
// input kernel's gradient is one GEMM too). The final h and c are nodes of their own that hand
// their adjoints to the sequence node, so h_final and c_final can feed anything (a decoder's
// initial state) and still be differentiated through.
#pragma once
#include <cstdint>

#include "gradus/core/compiled.hpp"
#include "gradus/autodiff/materialize.hpp"
#include "gradus/backend/backend.hpp"

namespace gradus {

/// What lstm_sequence returns: every hidden state and the final state.
template <Real T>
struct LstmSequenceOutputs {
  Var<T> h;        ///< h_t for every step, [N, T, u]
  Var<T> h_final;  ///< h_{T-1}, [N, u]
  Var<T> c_final;  ///< c_{T-1}, [N, u]
};

namespace detail {

backend::LstmPlan plan_lstm(const Shape& xp, const Shape& r, const Shape& h0, const Shape& c0);

}  // namespace detail

namespace detail {

/// lstm_sequence, with a bias (a node of five inputs) or without (four).
template <Real T>
LstmSequenceOutputs<T> lstm_sequence_impl(const Var<T>& xp, const Var<T>& recurrent_kernel, const Var<T>* bias,
                                          const Var<T>& h0, const Var<T>& c0) {
  gradus::detail::OpScope prof;
  const backend::LstmPlan p = detail::plan_lstm(xp.shape(), recurrent_kernel.shape(), h0.shape(), c0.shape());
  const int64_t n = p.n, steps = p.steps, u = p.units;
  if (bias)
    GRADUS_CHECK(shape_error, (bias->shape() == Shape{4 * u}), "lstm_sequence: bias must be [", 4 * u,
                 "] for projected inputs ", xp.shape(), ", got ", bias->shape());
  const Device dev = xp.value().device();
  for (const Var<T>* v : {&recurrent_kernel, bias, &h0, &c0})
    GRADUS_CHECK(device_error, !v || v->value().device() == dev, "lstm_sequence: operands on ", dev, " and ",
                 v->value().device(), "; move them to one device with .to(device)");
  Tensor<T> h = Tensor<T>::empty({n, steps, u}, dev), h_last = Tensor<T>::empty({n, u}, dev),
            c_last = Tensor<T>::empty({n, u}, dev);
  Tensor<T> act = Tensor<T>::empty({steps, n, 4 * u}, dev), h_prev = Tensor<T>::empty({steps, n, u}, dev),
            c_prev = Tensor<T>::empty({steps, n, u}, dev), tanh_c = Tensor<T>::empty({steps, n, u}, dev);
  const backend::LstmSaved<T> saved{act.device_data(), h_prev.device_data(), c_prev.device_data(),
                                    tanh_c.device_data()};
  backend::lstm_forward(p, xp.value().device_data(), recurrent_kernel.value().device_data(),
                        bias ? bias->value().device_data() : nullptr, h0.value().device_data(),
                        c0.value().device_data(), h.device_data(), h_last.device_data(), c_last.device_data(), saved,
                        dev);
  // The adjoints of h_final and c_final, [2, N, u]: added by their nodes (which run first in a
  // backward pass, being newer), read and cleared by the sequence node.
  Tensor<T> g_final = Tensor<T>::empty({2, n, u}, dev);
  backend::fill(g_final.device_data(), g_final.size(), T(0), dev);
  detail::set_op_attrs({0});  // 0: the sequence; 1, 2: the final h and c (gd::onnx)
  auto backward = [p, act, h_prev, c_prev, tanh_c, g_final](const Tensor<T>& g, const Var<T>& xp, const Var<T>& r,
                                                            const Var<T>* b, const Var<T>& h0,
                                                            const Var<T>& c0) mutable {
    bool ax = false, ar = false, ab = false, ah = false, ac = false;
    T* dxp = detail::needs_grad(xp) ? detail::adjoint_buffer(xp, &ax) : nullptr;
    T* dr = detail::needs_grad(r) ? detail::adjoint_buffer(r, &ar) : nullptr;
    T* db = b && detail::needs_grad(*b) ? detail::adjoint_buffer(*b, &ab) : nullptr;
    T* dh0 = detail::needs_grad(h0) ? detail::adjoint_buffer(h0, &ah) : nullptr;
    T* dc0 = detail::needs_grad(c0) ? detail::adjoint_buffer(c0, &ac) : nullptr;
    T* gf = g_final.device_data();
    const int64_t nu = p.n * p.units;
    const Device dev = g.device();
    backend::lstm_backward(p, r.value().device_data(),
                           backend::LstmSaved<T>{act.device_data(), h_prev.device_data(), c_prev.device_data(),
                                                 tanh_c.device_data()},
                           g.device_data(), gf, gf + nu, dxp, ax, dr, ar, db, ab, dh0, ah, dc0, ac, dev);
    backend::fill(gf, 2 * nu, T(0), dev);  // a second backward pass over this graph starts again from zero
  };
  Var<T> seq;
  if (bias) {
    seq = make_result(
        "lstm_sequence", std::move(h),
        [backward](const Tensor<T>& g, const Tensor<T>&, const Var<T>& xp, const Var<T>& r, const Var<T>& b,
                   const Var<T>& h0, const Var<T>& c0) mutable { backward(g, xp, r, &b, h0, c0); },
        xp, recurrent_kernel, *bias, h0, c0);
  } else {
    seq = make_result(
        "lstm_sequence", std::move(h),
        [backward](const Tensor<T>& g, const Tensor<T>&, const Var<T>& xp, const Var<T>& r, const Var<T>& h0,
                   const Var<T>& c0) mutable { backward(g, xp, r, nullptr, h0, c0); },
        xp, recurrent_kernel, h0, c0);
  }
  const auto final_node = [&](Tensor<T> value, int64_t slot) {
    detail::set_op_attrs({slot + 1});
    return make_result(
        "lstm_sequence", std::move(value),
        [g_final, slot](const Tensor<T>& g, const Tensor<T>&, const Var<T>& seq) mutable {
          const int64_t nu = g.size();
          backend::add_into(g_final.device_data() + slot * nu, g.device_data(), nu, g.device());
          // The sequence node runs only when it has an adjoint: give it zeros if nothing else did.
          if (!seq.node()->has_adjoint()) {
            bool add = false;
            T* a = detail::adjoint_buffer(seq, &add);
            backend::fill(a, seq.value().size(), T(0), g.device());
          }
        },
        seq);
  };
  Var<T> h_final = final_node(std::move(h_last), 0);
  Var<T> c_final = final_node(std::move(c_last), 1);
  return {std::move(seq), std::move(h_final), std::move(c_final)};
}

}  // namespace detail

/// An LSTM (tf.keras gate order i, f, g, o) over every step of projected inputs xp [N, T, 4u]
/// (x · kernel + bias, for all steps at once) from the state h0, c0 [N, u]:
///   z_t = xp_t + h_{t-1} · recurrent_kernel,  c_t = σ(f) c_{t-1} + σ(i) tanh(g),  h_t = σ(o) tanh(c_t).
/// Returns {h [N, T, u], h_final, c_final [N, u]}; differentiable in all four inputs through
/// all three outputs. On a backend without the LSTM kernels it throws gd::device_error; the
/// recurrent layers then run step by step.
///   auto [h, hT, cT] = gd::lstm_sequence(gd::matmul(x, kernel) + bias, recurrent_kernel, h0, c0);
template <Real T>
LstmSequenceOutputs<T> lstm_sequence(const Var<T>& xp, const Var<T>& recurrent_kernel, const Var<T>& h0,
                                     const Var<T>& c0) {
  return detail::lstm_sequence_impl<T>(xp, recurrent_kernel, nullptr, h0, c0);
}

/// The same with the bias [4u] added inside the op: xp = x · kernel alone, and
///   z_t = xp_t + bias + h_{t-1} · recurrent_kernel.
/// Equal to the form above given xp + bias, one pass over xp cheaper each way: the bias is added
/// in the gates' pass and its gradient summed there (what nn::LSTM runs).
///   auto [h, hT, cT] = gd::lstm_sequence(gd::matmul(x, kernel), recurrent_kernel, bias, h0, c0);
template <Real T>
LstmSequenceOutputs<T> lstm_sequence(const Var<T>& xp, const Var<T>& recurrent_kernel, const Var<T>& bias,
                                     const Var<T>& h0, const Var<T>& c0) {
  return detail::lstm_sequence_impl<T>(xp, recurrent_kernel, &bias, h0, c0);
}

}  // namespace gradus

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::detail {
GRADUS_INLINE backend::LstmPlan plan_lstm(const Shape& xp, const Shape& r, const Shape& h0, const Shape& c0) {
  GRADUS_CHECK(shape_error, xp.rank() == 3 && xp[1] >= 1 && xp[2] > 0 && xp[2] % 4 == 0,
               "lstm_sequence: projected inputs must be [N, T, 4 units] with T >= 1, got ", xp);
  const int64_t n = xp[0], u = xp[2] / 4;
  GRADUS_CHECK(shape_error, (r == Shape{u, 4 * u}), "lstm_sequence: recurrent_kernel must be [", u, ", ", 4 * u,
               "] for projected inputs ", xp, ", got ", r);
  GRADUS_CHECK(shape_error, (h0 == Shape{n, u}), "lstm_sequence: h0 must be [", n, ", ", u, "], got ", h0);
  GRADUS_CHECK(shape_error, (c0 == Shape{n, u}), "lstm_sequence: c0 must be [", n, ", ", u, "], got ", c0);
  return {n, xp[1], u};
}
}  // namespace gradus::detail
#endif  // GRADUS_DEFINE_COMPILED
