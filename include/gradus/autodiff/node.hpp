// gradus/autodiff/node.hpp — a recorded value: what it is, its adjoint, how to push it back.
//
// The tape is define-by-run: every materialised differentiable expression becomes one node that
// holds (by handle) the inputs it needs for its backward pass. Nodes are reference counted by the
// Vars that name them and by the nodes that consume them, so a graph lives exactly as long as
// something can still be differentiated through it. Node memory comes from a thread-local pool
// of size classes, so after the first step a training loop reuses the same node memory and asks
// the system for nothing: this pool is the tape's arena.
#pragma once
#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>
#include <utility>
#include <vector>

#include "gradus/core/compiled.hpp"
#include "gradus/core/eigen.hpp"
#include "gradus/core/op_events.hpp"
#include "gradus/core/precision.hpp"

#include "gradus/backend/backend.hpp"
#include "gradus/core/tensor.hpp"

namespace gradus::detail {

/// Free lists of node memory by 64-byte size class; one per thread.
class NodePool {
 public:
  static constexpr size_t kGranule = 64, kClasses = 64;  // nodes up to 4 KiB (a fused loss over a long expression is ~2 KiB)
  static NodePool& local() {
    thread_local NodePool pool;
    return pool;
  }
  void* allocate(size_t bytes) {
    const size_t c = (bytes + kGranule - 1) / kGranule;
    if (c < kClasses && free_[c]) {
      FreeNode* f = free_[c];
      free_[c] = f->next;
      return f;
    }
    return ::operator new(c * kGranule, std::align_val_t(kGranule));
  }
  void deallocate(void* p, size_t bytes) {
    const size_t c = (bytes + kGranule - 1) / kGranule;
    if (c < kClasses) {
      auto* f = static_cast<FreeNode*>(p);
      f->next = free_[c];
      free_[c] = f;
      return;
    }
    ::operator delete(p, std::align_val_t(kGranule));
  }
  ~NodePool() {
    for (FreeNode* f : free_)
      while (f) {
        FreeNode* next = f->next;
        ::operator delete(static_cast<void*>(f), std::align_val_t(kGranule));
        f = next;
      }
  }

 private:
  struct FreeNode {
    FreeNode* next;
  };
  std::array<FreeNode*, kClasses> free_{};
};

/// Grad mode and the creation counter of this thread.
struct TapeState {
  bool grad_enabled = true;
  bool in_backward = false;
  uint64_t next_seq = 1;
  uint64_t visit_epoch = 1;
  uint64_t backward_node = 0;  ///< the node whose backward function is running (its seq)
  std::vector<struct NodeBase*> order, stack, inputs;  // reused by every backward pass
  static TapeState& local() {
    thread_local TapeState s;
    return s;
  }
};

/// The dtype-independent part of a node: identity, ordering, inputs, backward.
struct NodeBase {
  std::atomic<int32_t> refs{0};
  uint32_t alloc_bytes = 0;
  bool requires_grad = false;
  bool is_leaf = false;
  bool frozen = false;  ///< a trainable leaf whose gradient is switched off (Var::set_requires_grad)
  bool value_pending = false;  ///< the value is computed on first read (see compute_value)
  /// The product precision in effect when the node was made (gd::autocast): its backward pass
  /// runs its products in the same precision.
  Precision precision = autocast_precision();
  uint64_t seq = 0;
  uint64_t visited = 0;

  NodeBase() : seq(TapeState::local().next_seq++) {}
  NodeBase(const NodeBase&) = delete;
  NodeBase& operator=(const NodeBase&) = delete;
  virtual ~NodeBase() = default;

  /// Propagates this node's adjoint into its inputs' adjoints.
  virtual void backward() {}
  /// Computes a deferred value (a loss whose value may come for free from its backward pass).
  virtual void compute_value() {}
  /// Appends the nodes this one was computed from.
  virtual void inputs(std::vector<NodeBase*>&) const {}
  virtual bool has_adjoint() const = 0;
  virtual void clear_adjoint() = 0;
  /// Leaves, before a backward pass: lend the accumulated gradient to the adjoint, so the pass
  /// adds into it directly instead of writing a new buffer that is added afterwards.
  virtual void begin_accumulate() {}
  /// Leaves: adds the adjoint of this pass into `grad()`.
  virtual void accumulate_grad() {}
  /// Leaves: computes the gradient terms deferred during this pass into the adjoint (see
  /// LeafNode::defer_xt_g).
  virtual void flush_deferred() {}
  virtual const char* name() const { return "op"; }
  /// For the profiler: the value's shape, element type name and size.
  virtual const Shape& value_shape() const = 0;
  virtual const char* dtype_name() const = 0;
  virtual int element_bytes() const = 0;
};

inline void retain(NodeBase* n) {
  if (n) n->refs.fetch_add(1, std::memory_order_relaxed);
}
/// Drops one reference; the last one frees the node. A node's destructor releases its inputs,
/// so freeing a long chain would recurse once per node: instead, a release that happens while
/// this thread is already freeing nodes only queues the node, and the outermost call frees the
/// queue in a loop. Stack depth stays constant for any graph (a 10^6-node chain included).
void free_nodes(NodeBase* n);
inline void release(NodeBase* n) {
  if (n && n->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) free_nodes(n);
}
#if GRADUS_DEFINE_COMPILED  // libgradus holds it with GRADUS_COMPILED (core/compiled.hpp)
/// Frees `n`, whose last reference went, and the nodes that only it held (see release).
GRADUS_INLINE void free_nodes(NodeBase* n) {
  struct Pending {
    bool draining = false;
    std::vector<NodeBase*> nodes;  // capacity kept, so a warm loop allocates nothing here
  };
  thread_local Pending pending;
  if (pending.draining) {
    pending.nodes.push_back(n);
    return;
  }
  pending.draining = true;
  for (;;) {
    const size_t bytes = n->alloc_bytes;
    n->~NodeBase();
    NodePool::local().deallocate(n, bytes);
    if (pending.nodes.empty()) break;
    n = pending.nodes.back();
    pending.nodes.pop_back();
  }
  pending.draining = false;
}
#endif  // GRADUS_DEFINE_COMPILED

/// Allocates a node of type N from this thread's pool.
template <class N, class... Args>
N* make_node(Args&&... args) {
  void* p = NodePool::local().allocate(sizeof(N));
  N* n = new (p) N(std::forward<Args>(args)...);
  n->alloc_bytes = uint32_t(sizeof(N));
  return n;
}

/// A node holding a value of element type T, its adjoint during a backward pass and, for
/// leaves, the accumulated gradient.
template <Real T>
struct Node : NodeBase {
  Tensor<T> value;
  Tensor<T> adj;
  Tensor<T> grad;

  explicit Node(Tensor<T> v) : value(std::move(v)) {}
  const Shape& value_shape() const override { return value.shape(); }
  const char* dtype_name() const override { return dtype_name_of<T>(); }
  int element_bytes() const override { return int(sizeof(T)); }
  bool has_adjoint() const override { return adj.defined(); }
  void clear_adjoint() override { adj = Tensor<T>(); }
  void begin_accumulate() override {
    if (grad.defined() && !adj.defined() && grad.use_count() == 1) adj = std::move(grad);
  }
  void accumulate_grad() override;

  /// Adds `g` (same shape as value) into this node's adjoint; adopts g's storage when possible.
  void add_adjoint(const Tensor<T>& g);
  /// The adjoint buffer to write into: `*add` tells whether it already holds a value.
  T* adjoint_buffer(bool* add);
  void make_adjoint_writable() {
    if (adj.use_count() > 1) adj = adj.clone();
  }
};

// Out of the class, so that a program built with GRADUS_COMPILED compiles no copy of them.
template <Real T>
void Node<T>::accumulate_grad() {
  if (!adj.defined()) return;
  if (!grad.defined()) {
    grad = adj.use_count() == 1 ? std::move(adj) : adj.clone();
  } else {
    backend::add_into(grad.device_data(), adj.device_data(), grad.size(), grad.device());
  }
}
template <Real T>
void Node<T>::add_adjoint(const Tensor<T>& g) {
  GRADUS_CHECK(shape_error, g.shape() == value.shape() || g.size() == value.size(), name(), ": gradient shape ",
               g.shape(), " does not match value shape ", value.shape());
  if (!adj.defined()) {
    adj = g.shape() == value.shape() ? g : g.reshape(value.shape());
    return;
  }
  make_adjoint_writable();
  GRADUS_CHECK(device_error, g.device() == adj.device(), name(), ": a gradient on ", g.device(), " for a value on ",
               adj.device());
  backend::add_into(adj.device_data(), g.device_data(), adj.size(), adj.device());
}
template <Real T>
T* Node<T>::adjoint_buffer(bool* add) {
  if (!adj.defined()) {
    adj = Tensor<T>::empty(value.shape(), value.device());
    *add = false;
  } else {
    make_adjoint_writable();
    *add = true;
  }
  return adj.device_data();  // in the value's memory: a GPU's for a value on a GPU
}

/// A trainable (or constant) input: no inputs of its own.
///
/// A weight's gradient term xᵀ·g from a product x · w may wait in the leaf until the backward
/// pass is over (defer_xt_g). A decoder loop that applies one weight at every step then gets one
/// product over all its steps' rows, which reads and writes the [k, n] gradient once, instead of
/// one product per step of depth `rows`, each of which brings the whole gradient back into cache
/// (the translation model's cell kernel: 12 products of 240 x 64 x 768).
///
/// flush_deferred reaches those products through `flush_`, which defer_xt_g sets: a program
/// whose matmul never defers a term for T (one that never multiplies matrices of T, as a
/// gradient check in double) does not instantiate T's GEMM for its leaves (Eigen's double GEMM
/// and its GPU launcher were 74 KB of code and about 2.6 s of the header-only custom-op example).
template <Real T>
struct LeafNode final : Node<T> {
  LeafNode(Tensor<T> v, bool requires_grad) : Node<T>(std::move(v)) {
    this->requires_grad = requires_grad;
    this->is_leaf = true;
  }
  const char* name() const override { return "leaf"; }
  bool has_adjoint() const override { return this->adj.defined() || !deferred_.empty(); }
  void clear_adjoint() override {
    this->adj = Tensor<T>();
    deferred_.clear();
  }
  void accumulate_grad() override {
    flush_deferred();
    Node<T>::accumulate_grad();
  }
  /// Adds xᵀ·g to this [k, n] leaf's adjoint later, in flush_deferred: x [rows, k] and g [rows, n]
  /// contiguous, on the leaf's device.
  void defer_xt_g(Tensor<T> x, Tensor<T> g) {
    deferred_.push_back({std::move(x), std::move(g), TapeState::local().backward_node});
    flush_ = &LeafNode::flush_products;
  }
  void flush_deferred() override {
    if (!deferred_.empty()) flush_(*this);
  }

 private:
  static void flush_products(LeafNode& leaf);
  struct Term {
    Tensor<T> x, g;
    uint64_t node;  // the product's node, whose module the profiler files the flush under
  };
  std::vector<Term> deferred_;
  std::vector<const T*> parts_;  // flush_products' lists for join_rows, kept for their capacity
  std::vector<int64_t> sizes_;
  void (*flush_)(LeafNode&) = nullptr;  // flush_products, set with the first deferred term
};

/// Adds every deferred term of `leaf` to its adjoint, as one product (deferred_ is not empty).
template <Real T>
void LeafNode<T>::flush_products(LeafNode& leaf) {
  struct Clear {  // the list keeps its capacity: a warm step allocates nothing here
    std::vector<Term>& terms;
    ~Clear() { terms.clear(); }
  } clear{leaf.deferred_};
  const std::vector<Term>& terms = leaf.deferred_;
  const int64_t k = leaf.value.shape()[0], n = leaf.value.shape()[1];
  int64_t rows = 0;
  for (const Term& t : terms) rows += t.x.size() / k;
  const PrecisionScope fp32_products(Precision::fp32);  // as the nodes that deferred them
  OpScope prof(OpPhase::backward);  // the profiler's table counts it as matmul's backward time
  if (prof) [[unlikely]] {
    OpDescription d;
    d.op = "matmul";
    d.dtype = leaf.dtype_name();
    d.element_bytes = leaf.element_bytes();
    d.output = leaf.value.shape();
    d.node = terms.front().node;
    prof.observer()->describe(d);
    prof.flops(2.0 * double(k) * double(rows) * double(n));
  }
  bool add = false;
  T* d = leaf.adjoint_buffer(&add);
  const Device dev = leaf.value.device();
  if (terms.size() == 1) {
    backend::gemm(terms[0].x.device_data(), true, terms[0].g.device_data(), false, d, k, rows, n, add, dev);
    return;
  }
  // every x's rows one after the other, and every g's: one product of depth `rows`
  Tensor<T> xs = Tensor<T>::empty({rows, k}, dev), gs = Tensor<T>::empty({rows, n}, dev);
  const auto join = [&](Tensor<T> Term::*part, Tensor<T>& out) {
    leaf.parts_.clear();
    leaf.sizes_.clear();
    for (const Term& t : terms) {
      leaf.parts_.push_back((t.*part).device_data());
      leaf.sizes_.push_back((t.*part).size());
    }
    backend::join_rows(leaf.parts_, leaf.sizes_, out.device_data(), 1, dev);  // one row of all the parts
  };
  join(&Term::x, xs);
  join(&Term::g, gs);
  backend::gemm(xs.device_data(), true, gs.device_data(), false, d, k, rows, n, add, dev);
}

}  // namespace gradus::detail

#if GRADUS_INSTANCES  // compiled once in libgradus with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::detail {
GRADUS_INSTANCE struct Node<float>;
GRADUS_INSTANCE struct LeafNode<float>;
GRADUS_INSTANCE_DOUBLE struct Node<double>;
GRADUS_INSTANCE_DOUBLE struct LeafNode<double>;
}  // namespace gradus::detail
#endif
