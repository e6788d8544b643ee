// gradus/nn/registration.hpp — finding sub-modules and parameters that were never registered.
//
// A layer held as a data member but not passed to `register_module` still runs in `forward`,
// but `parameters()` misses it: it never trains, its gradient piles up, checkpoints leave it out.
// Such a layer is visible on the tape: its weights are trainable leaves the loss depends on that
// are not parameters of the model. `check_registration(model, x)` looks for them with one forward
// pass; `fit` does the same on its first step (FitOptions::unregistered).
#pragma once
#include <algorithm>
#include <iostream>
#include <ostream>
#include <sstream>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "gradus/autodiff/backward.hpp"
#include "gradus/nn/module.hpp"

namespace gradus::nn {

/// What to do about trainable leaves that are not parameters of the model.
enum class Unregistered {
  error,  ///< throw gd::value_error (the default)
  warn,   ///< write the message to the warning stream and go on
  ignore  ///< say nothing
};

/// Options of `check_registration`.
struct RegistrationOptions {
  Unregistered action = Unregistered::error;
  std::ostream* warnings = &std::cerr;  ///< where `warn` writes
};

namespace detail {

/// The shape of a leaf node of either floating element type.
inline Shape leaf_shape(const gradus::detail::NodeBase* n) {
  if (auto* f = dynamic_cast<const gradus::detail::Node<float>*>(n)) return f->value.shape();
  if (auto* d = dynamic_cast<const gradus::detail::Node<double>*>(n)) return d->value.shape();
  return {};
}

}  // namespace detail

/// The shapes of the trainable leaves `loss` depends on that are neither parameters of `model`
/// nor in `also` (Vars trained on purpose outside the model, such as an optimizer's extra
/// parameters), in creation order.
template <Real T, Real U = T>
std::vector<Shape> unregistered_leaves(const Module<T>& model, const Var<U>& loss, const std::vector<Var<T>>& also = {}) {
  std::unordered_set<const void*> known;
  for (const auto& [name, p] : model.named_parameters()) known.insert(p.node());
  for (const Var<T>& v : also)
    if (v.defined()) known.insert(v.node());
  std::vector<const gradus::detail::NodeBase*> leaves = gradus::detail::trainable_leaves(loss);
  std::sort(leaves.begin(), leaves.end(), [](auto* a, auto* b) { return a->seq < b->seq; });
  std::vector<Shape> out;
  for (const gradus::detail::NodeBase* n : leaves)
    if (!known.count(n)) out.push_back(detail::leaf_shape(n));
  return out;
}

/// "a [32,3] leaf receives a gradient but is not a parameter of the model: forgot
/// register_module?" (several: "2 leaves ([32,3], [3]) receive ..."), prefixed with `who`;
/// empty when `shapes` is.
inline std::string unregistered_message(const char* who, const std::vector<Shape>& shapes) {
  if (shapes.empty()) return {};
  std::ostringstream os;
  os << who << ": ";
  if (shapes.size() == 1) {
    os << "a " << shapes[0] << " leaf receives a gradient but is not a parameter of the model";
  } else {
    os << shapes.size() << " leaves (";
    for (size_t i = 0; i < shapes.size(); ++i) os << (i ? ", " : "") << shapes[i];
    os << ") receive a gradient but are not parameters of the model";
  }
  os << ": forgot register_module?";
  return os.str();
}

/// Acts on unregistered leaves as `opt` says: throws value_error, warns once, or does nothing.
/// Returns the message (empty when every leaf is registered).
inline std::string report_unregistered(const char* who, const std::vector<Shape>& shapes, RegistrationOptions opt) {
  std::string msg = unregistered_message(who, shapes);
  if (msg.empty() || opt.action == Unregistered::ignore) return msg;
  if (opt.action == Unregistered::error) throw value_error(msg);
  if (opt.warnings) *opt.warnings << "warning: " << msg << '\n';
  return msg;
}

/// Runs `model.forward(x)` once and reports every trainable leaf the output depends on that is
/// not a registered parameter (a sub-module not passed to register_module, a Var member not
/// passed to register_parameter): gd::value_error by default, a warning with
/// `{.action = gd::nn::Unregistered::warn}`. Buffers the forward pass updates are restored;
/// the model runs in its current mode. Returns the message (empty when all is registered).
///   gd::nn::check_registration(net, x_batch);
template <ModuleType M, class X>
std::string check_registration(M& model, const X& x, RegistrationOptions opt = {}) {
  using T = typename M::value_type;
  std::vector<std::pair<std::string, Tensor<T>>> saved;
  for (auto& [name, b] : model.named_buffers()) saved.emplace_back(name, b.clone());
  const auto y = to_var(model.forward(x));
  const std::vector<Shape> shapes = unregistered_leaves(static_cast<const Module<T>&>(model), y);
  auto buffers = model.named_buffers();
  for (size_t i = 0; i < buffers.size() && i < saved.size(); ++i) buffers[i].second.copy_(saved[i].second);
  return report_unregistered("check_registration", shapes, opt);
}

}  // namespace gradus::nn
