// gradus/optim/clip.hpp — gradient clipping (tf.clip_by_value, tf.clip_by_norm, tf.clip_by_global_norm).
//
// Each function clips in place, either the `.grad()` of a list of Vars (between backward and
// step) or a list of gradient tensors such as `gd::gradients` returns:
//   gd::backward(loss);
//   double norm = gd::optim::clip_by_global_norm(opt.params(), 5.0);
//   opt.step();
// A Var that has received no gradient since its last zero_grad, and an undefined tensor, count
// as zeros and are left alone. Each gradient's squared norm is summed on its device, in double
// (then rounded to its element type), and the total in double: gradients on a GPU stay there, and
// the norms come back to the host once per call (the only host synchronisation).
#pragma once
#include <cmath>
#include <limits>
#include <vector>

#include "gradus/backend/backend.hpp"
#include "gradus/optim/optimizer.hpp"

namespace gradus::optim {
namespace detail {

template <class T, class F>
void for_each_grad(const std::vector<Var<T>>& params, const char* who, F&& f) {
  for (size_t i = 0; i < params.size(); ++i) {
    GRADUS_CHECK(value_error, params[i].defined(), who, ": Var ", i, " is undefined");
    if (Tensor<T>* g = params[i].grad_if_any()) f(*g);
  }
}
template <class T, class F>
void for_each_grad(std::vector<Tensor<T>>& grads, const char*, F&& f) {
  for (Tensor<T>& g : grads)
    if (g.defined()) f(g);
}
template <class T, class F>
void for_each_grad(const std::vector<Tensor<T>>& grads, const char* who, F&& f) {
  for_each_grad(const_cast<std::vector<Tensor<T>>&>(grads), who, f);
}

template <class List>
void clip_by_value(List& list, double lo, double hi) {
  GRADUS_CHECK(value_error, lo <= hi, "clip_by_value: lo ", lo, " exceeds hi ", hi);
  for_each_grad(list, "clip_by_value", [&](auto& g) { g.assign(clamp(g, lo, hi)); });
}
/// Σ f(g) over each gradient g of `list`, in order (f: an elementwise expression of g): each summed
/// on its device (in double, rounded to T) into one buffer per device, read back once per device.
template <class List, class F>
std::vector<double> gradient_sums(List& list, const char* who, F&& f) {
  using T = typename std::remove_cvref_t<decltype(list[0])>::value_type;
  std::vector<const Tensor<T>*> grads;
  for_each_grad(list, who, [&](const Tensor<T>& g) { grads.push_back(&g); });
  std::vector<double> out(grads.size(), 0.0);
  std::vector<size_t> pending(grads.size());
  for (size_t i = 0; i < grads.size(); ++i) pending[i] = i;
  while (!pending.empty()) {
    const Device dev = grads[pending[0]]->device();
    std::vector<size_t> here, rest;
    for (size_t i : pending) (grads[i]->device() == dev ? here : rest).push_back(i);
    Tensor<T> sums = Tensor<T>::empty({int64_t(here.size())}, dev);
    for (size_t k = 0; k < here.size(); ++k) {
      const Tensor<T>& g = *grads[here[k]];
      backend::sum_all(f(g), g.shape(), sums.device_data() + k, T(1), dev);
    }
    const Tensor<T> host = sums.to(gradus::cpu);
    for (size_t k = 0; k < here.size(); ++k) out[here[k]] = double(host.data()[k]);
    pending = std::move(rest);
  }
  return out;
}
/// The squared L2 norm of every gradient of `list`, in order.
template <class List>
std::vector<double> squared_norms(List& list, const char* who) {
  return gradient_sums(list, who, [](const auto& g) { return g * g; });
}

template <class List>
void clip_by_norm(List& list, double clip_norm) {
  check_option(clip_norm > 0 && std::isfinite(clip_norm), "clip_by_norm", "clip_norm", clip_norm, "> 0");
  const std::vector<double> sq = squared_norms(list, "clip_by_norm");
  size_t i = 0;
  for_each_grad(list, "clip_by_norm", [&](auto& g) {
    using T = typename std::remove_cvref_t<decltype(g)>::value_type;
    const double n = std::sqrt(sq[i++]);
    if (n > clip_norm) g.assign(g * T(clip_norm / n));
  });
}
template <class List>
double global_norm(List& list) {
  double s = 0;
  for (double v : squared_norms(list, "global_norm")) s += v;
  return std::sqrt(s);
}
template <class List>
double clip_by_global_norm(List& list, double clip_norm) {
  check_option(clip_norm > 0 && std::isfinite(clip_norm), "clip_by_global_norm", "clip_norm", clip_norm, "> 0");
  const double n = global_norm(list);
  if (!std::isfinite(n)) {  // as TF: every entry becomes NaN
    for_each_grad(list, "clip_by_global_norm", [](auto& g) { g.fill_(std::numeric_limits<double>::quiet_NaN()); });
  } else if (n > clip_norm) {
    for_each_grad(list, "clip_by_global_norm", [&](auto& g) {
      using T = typename std::remove_cvref_t<decltype(g)>::value_type;
      g.assign(g * T(clip_norm / n));
    });
  }
  return n;
}

}  // namespace detail

/// Clamps every element of every gradient into [lo, hi] (tf.clip_by_value).
template <Real T>
void clip_by_value(const std::vector<Var<T>>& params, double lo, double hi) {
  detail::clip_by_value(params, lo, hi);
}
template <Real T>
void clip_by_value(std::vector<Tensor<T>>& grads, double lo, double hi) {
  detail::clip_by_value(grads, lo, hi);
}

/// Rescales each gradient separately to L2 norm at most clip_norm (> 0) (tf.clip_by_norm):
/// t <- t·clip_norm / max(‖t‖₂, clip_norm).
template <Real T>
void clip_by_norm(const std::vector<Var<T>>& params, double clip_norm) {
  detail::clip_by_norm(params, clip_norm);
}
template <Real T>
void clip_by_norm(std::vector<Tensor<T>>& grads, double clip_norm) {
  detail::clip_by_norm(grads, clip_norm);
}

/// √(Σ ‖t‖₂²) over every gradient (tf.global_norm).
template <Real T>
double global_norm(const std::vector<Var<T>>& params) {
  return detail::global_norm(params);
}
template <Real T>
double global_norm(const std::vector<Tensor<T>>& grads) {
  return detail::global_norm(grads);
}

/// Rescales all gradients together (tf.clip_by_global_norm): t <- t·clip_norm / max(g, clip_norm)
/// with g the global norm, which it returns (before clipping). A non-finite g turns every
/// gradient into NaN, as TF does.
template <Real T>
double clip_by_global_norm(const std::vector<Var<T>>& params, double clip_norm) {
  return detail::clip_by_global_norm(params, clip_norm);
}
template <Real T>
double clip_by_global_norm(std::vector<Tensor<T>>& grads, double clip_norm) {
  return detail::clip_by_global_norm(grads, clip_norm);
}

}  // namespace gradus::optim
