// gradus/autodiff/backward.hpp — running the tape backwards: gd::backward and gd::gradients.
#pragma once
#include <algorithm>
#include <functional>
#include <initializer_list>
#include <unordered_set>
#include <utility>
#include <vector>

#include "gradus/autodiff/materialize.hpp"
#include "gradus/core/compiled.hpp"

namespace gradus {
namespace detail {

/// Nodes reachable from `root` that need a gradient, in reverse creation order (a valid
/// reverse topological order, since a node is always created after its inputs).
std::vector<NodeBase*>& reverse_order(NodeBase* root);

}  // namespace detail

/// Callbacks run by gd::backward (not gd::gradients) on this thread, in registration order, once
/// for each trainable leaf as soon as its gradient for this pass is complete: right after the
/// last node that feeds the leaf's adjoint has run its backward, with the adjoint already added
/// into the leaf's `.grad()`. A leaf that is itself the output gets no call. What gd::dist's
/// DistributedOptimizer uses to start communicating a gradient while backward goes on. Costs
/// nothing while the list is empty. A callback must not run a backward pass.
///   int id = gd::add_leaf_ready_hook([&](const gd::detail::NodeBase* leaf) { ... });
///   gd::remove_leaf_ready_hook(id);
using LeafReadyHook = std::function<void(const detail::NodeBase* leaf)>;
namespace detail {
std::vector<std::pair<int, LeafReadyHook>>& leaf_ready_hooks();
/// For each trainable leaf fed by a node of `order`, the (last consumer, leaf) pair: the consumer
/// with the smallest seq runs last. Sorted as `order` runs (descending consumer seq).
std::vector<std::pair<NodeBase*, NodeBase*>> plan_leaf_ready(const std::vector<NodeBase*>& order);
/// Runs the hooks for the leaves whose last consumer is `n` (plan[*next..] in order).
void fire_leaf_ready(NodeBase* n, const std::vector<std::pair<NodeBase*, NodeBase*>>& plan, size_t* next);
}  // namespace detail
/// Registers a leaf-ready callback on this thread; returns its id for remove_leaf_ready_hook.
int add_leaf_ready_hook(LeafReadyHook hook);
/// Removes the callback `id` registered on this thread (no-op when it is not there).
void remove_leaf_ready_hook(int id);

namespace detail {

/// Runs one node's backward inside a profiler event that describes the node.
void profiled_backward(NodeBase* n);

template <class T>
std::vector<NodeBase*>& run_backward(const Var<T>& y, const Tensor<T>* seed, const char* op, bool accumulate) {
  GRADUS_CHECK(value_error, y.defined(), op, ": the output is an undefined Var");
  GRADUS_CHECK(value_error, y.requires_grad(), op,
               ": the output does not depend on any Var that requires a gradient (was it computed under no_grad?)");
  auto& st = TapeState::local();
  GRADUS_CHECK(value_error, !st.in_backward, op, ": called from inside a backward pass");
  auto& order = reverse_order(y.node());
  if (accumulate)
    for (NodeBase* n : order)
      if (n->is_leaf) n->begin_accumulate();
  Node<T>* root = y.node();
  if (seed) {
    GRADUS_CHECK(shape_error, seed->shape() == y.shape(), op, ": seed gradient shape ", seed->shape(),
                 " differs from output shape ", y.shape());
    root->add_adjoint(*seed);
  } else {
    bool add = false;
    T* g = root->adjoint_buffer(&add);
    backend::fill(g, root->value.size(), T(1), root->value.device());
  }
  std::vector<std::pair<NodeBase*, NodeBase*>> ready_plan;  // leaf-ready hooks: empty unless registered
  if (accumulate && !leaf_ready_hooks().empty()) [[unlikely]] ready_plan = plan_leaf_ready(order);
  size_t ready_next = 0;
  st.in_backward = true;
  const bool prev_mode = std::exchange(st.grad_enabled, false);
  try {
    for (NodeBase* n : order) {
      if (n->has_adjoint()) {
        const PrecisionScope precision(n->precision);
        st.backward_node = n->seq;
        if (op_observer() && !n->is_leaf) [[unlikely]]  // a leaf's backward does nothing
          profiled_backward(n);
        else
          n->backward();
      }
      if (!ready_plan.empty()) [[unlikely]] fire_leaf_ready(n, ready_plan, &ready_next);
    }
    for (NodeBase* n : order)  // the weights' terms that waited for the pass (LeafNode)
      if (n->is_leaf) n->flush_deferred();
  } catch (...) {
    st.in_backward = false;
    st.grad_enabled = prev_mode;
    for (NodeBase* n : order) {  // leaves keep what they had plus what reached them before the error
      if (n->is_leaf && accumulate) n->accumulate_grad();
      n->clear_adjoint();
    }
    throw;
  }
  st.in_backward = false;
  st.grad_enabled = prev_mode;
  return order;
}

/// The leaves y depends on that require a gradient: the trainable Vars a backward pass from y
/// reaches, in no particular order (the nodes stay alive as long as y does). Records nothing.
template <Real T>
std::vector<const NodeBase*> trainable_leaves(const Var<T>& y) {
  std::vector<const NodeBase*> out;
  if (!y.defined() || !y.requires_grad()) return out;
  for (const NodeBase* n : reverse_order(y.node()))
    if (n->is_leaf) out.push_back(n);
  return out;
}

}  // namespace detail

/// Accumulates d(sum of y)/d(leaf) into `leaf.grad()` for every trainable Var y depends on
/// (y need not be a scalar: its gradient is seeded with ones, as `tf.gradients` does).
/// If a backward function throws, the exception propagates and the gradients hold whatever
/// had reached them; call `zero_grad()` before trying again.
///   gd::backward(loss);  w.grad();
template <Real T>
void backward(const Var<T>& y) {
  auto& order = detail::run_backward(y, static_cast<const Tensor<T>*>(nullptr), "backward", true);
  for (detail::NodeBase* n : order) {
    if (n->is_leaf) n->accumulate_grad();
    n->clear_adjoint();
  }
}
/// As above with an explicit seed: accumulates the vector-Jacobian product seed^T dy/dleaf.
template <Real T>
void backward(const Var<T>& y, const Tensor<T>& seed) {
  auto& order = detail::run_backward(y, &seed, "backward", true);
  for (detail::NodeBase* n : order) {
    if (n->is_leaf) n->accumulate_grad();
    n->clear_adjoint();
  }
}
/// Materialises a differentiable expression and backpropagates from it.
template <Expression E>
  requires(!is_var_v<E> && is_differentiable_v<E>)
void backward(const E& y) {
  backward(Var<value_type_t<E>>(y));
}

/// d(sum of y)/dx for each x (the C++ form of `tf.gradients`); leaves' `.grad()` is untouched.
/// An x that y does not depend on gets zeros of its shape.
///   auto g = gd::gradients(loss, {w, b});   // g[0] has w's shape
template <Real T>
std::vector<Tensor<T>> gradients(const Var<T>& y, const std::vector<Var<T>>& xs,
                                 const Tensor<T>* seed = nullptr) {
  std::vector<Tensor<T>> out(xs.size());
  auto& order = detail::run_backward(y, seed, "gradients", false);
  for (size_t i = 0; i < xs.size(); ++i) {
    GRADUS_CHECK(value_error, xs[i].defined(), "gradients: input ", i, " is an undefined Var");
    const Tensor<T>& a = xs[i].node()->adj;
    out[i] = a.defined() ? (a.use_count() == 1 ? a : a.clone()) : Tensor<T>::zeros(xs[i].shape());
  }
  for (detail::NodeBase* n : order) n->clear_adjoint();
  return out;
}
template <Real T>
std::vector<Tensor<T>> gradients(const Var<T>& y, std::initializer_list<Var<T>> xs) {
  return gradients(y, std::vector<Var<T>>(xs));
}
template <Expression E>
  requires(!is_var_v<E> && is_differentiable_v<E>)
auto gradients(const E& y, std::initializer_list<Var<value_type_t<E>>> xs) {
  return gradients(Var<value_type_t<E>>(y), std::vector<Var<value_type_t<E>>>(xs));
}

}  // namespace gradus

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus {
namespace detail {
GRADUS_INLINE std::vector<NodeBase*>& reverse_order(NodeBase* root) {
  auto& st = TapeState::local();
  const uint64_t epoch = ++st.visit_epoch;
  auto& order = st.order;
  auto& stack = st.stack;
  order.clear();
  stack.clear();
  stack.push_back(root);
  root->visited = epoch;
  while (!stack.empty()) {
    NodeBase* n = stack.back();
    stack.pop_back();
    order.push_back(n);
    st.inputs.clear();
    n->inputs(st.inputs);
    for (NodeBase* in : st.inputs)
      if (in->requires_grad && in->visited != epoch) {
        in->visited = epoch;
        stack.push_back(in);
      }
  }
  std::sort(order.begin(), order.end(), [](const NodeBase* a, const NodeBase* b) { return a->seq > b->seq; });
  return order;
}
GRADUS_INLINE std::vector<std::pair<int, LeafReadyHook>>& leaf_ready_hooks() {
  thread_local std::vector<std::pair<int, LeafReadyHook>> hooks;
  return hooks;
}
GRADUS_INLINE std::vector<std::pair<NodeBase*, NodeBase*>> plan_leaf_ready(const std::vector<NodeBase*>& order) {
  std::vector<std::pair<NodeBase*, NodeBase*>> plan;
  std::unordered_set<const NodeBase*> seen;
  std::vector<NodeBase*> in;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {  // ascending seq: first seen = last to run
    if ((*it)->is_leaf) continue;
    in.clear();
    (*it)->inputs(in);
    for (NodeBase* x : in)
      if (x->is_leaf && x->requires_grad && seen.insert(x).second) plan.emplace_back(*it, x);
  }
  std::stable_sort(plan.begin(), plan.end(), [](const auto& a, const auto& b) { return a.first->seq > b.first->seq; });
  return plan;
}
GRADUS_INLINE void fire_leaf_ready(NodeBase* n, const std::vector<std::pair<NodeBase*, NodeBase*>>& plan, size_t* next) {
  for (; *next < plan.size() && plan[*next].first == n; ++*next) {
    NodeBase* leaf = plan[*next].second;
    leaf->accumulate_grad();  // the same as the end of gd::backward does, done early
    leaf->clear_adjoint();
    for (auto& [id, hook] : leaf_ready_hooks()) hook(leaf);
  }
}
GRADUS_INLINE void profiled_backward(NodeBase* n) {
  OpScope prof(OpPhase::backward);
  if (prof) {
    OpDescription d;
    d.op = n->name();
    d.dtype = n->dtype_name();
    d.element_bytes = n->element_bytes();
    d.output = n->value_shape();
    d.node = n->seq;
    std::vector<NodeBase*> in;
    n->inputs(in);
    for (const NodeBase* x : in)  // the operands that receive a gradient
      if (x->requires_grad) d.add_input(x->value_shape(), x->seq);
    prof.observer()->describe(d);
  }
  n->backward();
}
}  // namespace detail
GRADUS_INLINE int add_leaf_ready_hook(LeafReadyHook hook) {
  static thread_local int next_id = 0;
  detail::leaf_ready_hooks().emplace_back(++next_id, std::move(hook));
  return next_id;
}
GRADUS_INLINE void remove_leaf_ready_hook(int id) {
  auto& h = detail::leaf_ready_hooks();
  std::erase_if(h, [id](const auto& e) { return e.first == id; });
}
}  // namespace gradus
#endif  // GRADUS_DEFINE_COMPILED

#if GRADUS_INSTANCES  // compiled once in libgradus with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus {
GRADUS_INSTANCE std::vector<detail::NodeBase*>& detail::run_backward(const Var<float>&, const Tensor<float>*,
                                                                              const char*, bool);
GRADUS_INSTANCE_DOUBLE std::vector<detail::NodeBase*>& detail::run_backward(const Var<double>&,
                                                                                     const Tensor<double>*, const char*,
                                                                                     bool);
GRADUS_INSTANCE void backward(const Var<float>&);
GRADUS_INSTANCE_DOUBLE void backward(const Var<double>&);
GRADUS_INSTANCE void backward(const Var<float>&, const Tensor<float>&);
GRADUS_INSTANCE_DOUBLE void backward(const Var<double>&, const Tensor<double>&);
GRADUS_INSTANCE std::vector<Tensor<float>> gradients(const Var<float>&, const std::vector<Var<float>>&,
                                                              const Tensor<float>*);
GRADUS_INSTANCE_DOUBLE std::vector<Tensor<double>> gradients(const Var<double>&,
                                                                      const std::vector<Var<double>>&,
                                                                      const Tensor<double>*);
}  // namespace gradus
#endif
