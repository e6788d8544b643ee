// gradus/nn/module.hpp — Module<T>: the base of every layer and model with state.
//
// A module is a plain object. Its constructor registers what it owns by name:
//   parameters  trainable Vars (`kernel_ = register_parameter("kernel", init(...))`), found by
//               optimizers and checkpoints;
//   buffers     non-trainable tensors saved with the model (BatchNorm's moving statistics);
//   children    sub-modules that are data members (`register_module("dense1", dense1_)`);
//   generators  the Rngs it draws from (Dropout's), found and checkpointed by `fit`.
// `named_parameters()` walks the tree and names each parameter by its path: "block.dense1.kernel".
//
// `forward` is an ordinary member function, found at compile time by whoever runs the module
// (Sequential, check_module_gradient, a training loop): it may take any inputs and return a Var,
// a lazy elementwise expression (which then fuses into the next layer) or several outputs.
// Deriving from Module<T, Self> instead of Module<T> adds `operator()`, so `net(x)` calls
// `net.forward(x)` (every layer of gd::nn does so).
//
// Copying a module is not allowed (it would silently share or duplicate the weights); moving is.
// A child registered by reference must be a subobject of the module (a data member, or an element
// of a member std::tuple/std::array): the parent stores its offset from itself, so the link stays
// right when the parent is moved. Children that live elsewhere (a std::vector of blocks) are
// handed over as std::unique_ptr and owned by the parent.
//
// `std::cout << net` prints a summary as Keras' `model.summary()` does, one row per layer of the
// tree, depth first: its dotted path and class, the shape of its output in the last call (once
// the model has run: a module has no input shape before, since layers are lazy and forward may
// take anything), the names and shapes of its own parameters, and the parameter count of the
// layer with its sub-layers. A lazy layer not yet built shows 0 for its input size.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <type_traits>
#include <typeinfo>
#include <unordered_set>
#include <utility>
#include <vector>
#if __has_include(<cxxabi.h>)
#include <cxxabi.h>
#endif

#include "gradus/autodiff/materialize.hpp"
#include "gradus/core/compiled.hpp"
#include "gradus/core/rng.hpp"
#include "gradus/nn/regularizers.hpp"

namespace gradus::nn {

/// One row of a module summary (`os << module`).
struct SummaryRow {
  std::string path;        ///< "block.inner"; empty for the module printed
  std::string type;        ///< the class name without namespaces and template arguments: "Dense"
  std::string parameters;  ///< its own parameters: "kernel [128,10]  bias [10]"
  int64_t count = 0;       ///< trainable scalars of the layer and its sub-layers
  std::string output;      ///< the shape of its output in the last call ("[128,10]"); empty before
};

namespace detail {
/// "Dense" for gradus::nn::Dense<float>: the class name, without namespaces or template arguments.
inline std::string short_type_name(const std::type_info& type) {
  std::string name = type.name();
#if __has_include(<cxxabi.h>)
  int status = 0;
  if (char* readable = abi::__cxa_demangle(type.name(), nullptr, nullptr, &status)) {
    if (status == 0) name = readable;
    std::free(readable);
  }
#endif
  std::string outer;  // name with every <...> removed
  int depth = 0;
  for (char c : name) {
    if (c == '<') ++depth;
    if (depth == 0) outer += c;
    if (c == '>') --depth;
  }
  const size_t colons = outer.rfind("::");
  return colons == std::string::npos ? outer : outer.substr(colons + 2);
}

/// `path.name`, or `name` at the top.
inline std::string child_path(const std::string& path, const std::string& name) {
  return path.empty() ? name : path + "." + name;
}
}  // namespace detail

template <Real T = float, class Derived = void>
class Module;

/// Base of every stateful layer and model over element type T (float or double).
///   struct Net : gd::nn::Module<float, Net> {   // Module<float> too; the second argument adds net(x)
///     gd::nn::Dense<float> d1, d2;
///     Net(gd::Rng& rng) : d1({.in = 784, .out = 100, .activation = gd::nn::relu}, rng), d2({.in = 100, .out = 10}, rng) {
///       register_module("d1", d1);
///       register_module("d2", d2);
///     }
///     gd::Var<float> forward(const gd::Var<float>& x) { return d2(d1(x)); }
///   };
template <Real T>
class Module<T, void> {
 public:
  using value_type = T;

  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  /// Moves keep every registration valid (children are stored as offsets); the source is left empty.
  Module(Module&&) noexcept = default;
  Module& operator=(Module&&) noexcept = default;

  /// Every parameter of this module and its descendants, each once, in the order of
  /// `named_parameters()`: what an optimizer takes (`gd::optim::SGD opt(net.parameters(), {.lr = 0.1})`).
  /// Frozen ones included: the optimizer skips them while they are frozen.
  std::vector<Var<T>> parameters() const {
    std::vector<Var<T>> out;
    for (auto& [name, v] : named_parameters()) out.push_back(v);
    return out;
  }
  /// (path, parameter) pairs: this module's own parameters in registration order, then each
  /// child's under "<child>."; a parameter shared by two modules appears once (its first path).
  std::vector<std::pair<std::string, Var<T>>> named_parameters() const {
    std::vector<std::pair<std::string, Var<T>>> out;
    std::unordered_set<const void*> seen;
    collect_parameters("", out, seen);
    return out;
  }
  /// (path, buffer) pairs, named as parameters are. The tensors share the module's storage:
  /// `copy_` into one to restore it.
  std::vector<std::pair<std::string, Tensor<T>>> named_buffers() const {
    std::vector<std::pair<std::string, Tensor<T>>> out;
    collect_buffers("", out);
    return out;
  }
  /// (path, generator) pairs of every Rng registered in the tree (Dropout's "rng": "drop.rng"),
  /// named as parameters are; a generator shared by several layers appears once (its first
  /// path). A training loop saves and restores them with its checkpoints.
  std::vector<std::pair<std::string, Rng*>> named_generators() const {
    std::vector<std::pair<std::string, Rng*>> out;
    std::unordered_set<const void*> seen;
    collect_generators("", out, seen);
    return out;
  }
  /// (name, child) pairs of the direct children, in registration order.
  std::vector<std::pair<std::string, Module*>> named_children() {
    std::vector<std::pair<std::string, Module*>> out;
    for (const Child& c : children_) out.emplace_back(c.name, child(c));
    return out;
  }
  /// (path, module) for this module (path "") and every descendant, depth first, in registration
  /// order: the paths `named_parameters()` prefixes its names with ("block.inner").
  std::vector<std::pair<std::string, Module*>> named_modules() {
    std::vector<std::pair<std::string, Module*>> out;
    collect_modules("", out);
    return out;
  }
  /// The parameters that train now: parameters() without the frozen ones.
  std::vector<Var<T>> trainable_parameters() const {
    std::vector<Var<T>> out;
    for (auto& [name, v] : named_parameters())
      if (!v.frozen()) out.push_back(v);
    return out;
  }
  /// Number of parameter scalars, frozen ones included (each shared parameter counted once).
  int64_t parameter_count() const {
    int64_t n = 0;
    for (auto& [name, v] : named_parameters()) n += v.size();
    return n;
  }

  /// Appends the summary row of this module (called `path`) and then those of its layers, depth
  /// first: what `os << module` prints. Sequential overrides it to list its stateless layers too.
  virtual void summary_rows(const std::string& path, std::vector<SummaryRow>& rows) const {
    rows.push_back(own_summary_row(path));
    for (const Child& c : children_) child(c)->summary_rows(detail::child_path(path, c.name), rows);
  }

  /// Lazy layers (Dense, Conv2d, LSTM without `.in`) and loaders. A layer that has not yet seen an
  /// input returns the input size at which its own parameter `name` would have shape `saved` (a
  /// checkpoint's): Dense's kernel [0, out] takes [in, out]. 0 for a built layer, another
  /// parameter, a shape no input size gives, and every module that is not lazy.
  /// `io::restore_module` asks it where a checkpoint's shape differs from the module's.
  virtual int64_t lazy_input_size(std::string_view /*name*/, const Shape& /*saved*/) const { return 0; }
  /// Builds a lazy layer for input size `in` (one that lazy_input_size returned) as its first
  /// forward would, except that it draws nothing from its Rng: the new parameter is zeros, about to
  /// be overwritten by the restore that called it.
  virtual void build_unfilled(int64_t /*in*/) {}
  /// Undoes build_unfilled: the layer waits for its first input again (for a load that fails
  /// after the model was restored, and puts the model back as it was).
  virtual void unbuild() {}

  /// Notes the shape of this module's output, for the summary (`os << module`): `m(x)` notes it
  /// for every module called so, and Sequential for its layers.
  void record_output_shape(const Shape& s) {
    output_shape_ = s;
    has_output_shape_ = true;
  }

  /// Sets training mode (`on`) or inference mode on this module and all its descendants; it
  /// changes what Dropout and BatchNorm do. Modules start in training mode.
  void train(bool on = true) {
    training_ = on;
    for (const Child& c : children_) child(c)->train(on);
  }
  /// Inference mode: `train(false)`.
  void eval() { train(false); }
  bool is_training() const { return training_; }

  /// Freezes this module and its descendants, for transfer learning (a pretrained feature
  /// extractor under a new head), as Keras' `trainable = False`: backward passes compute no
  /// gradient for their parameters (Var::set_requires_grad(false)), optimizers skip them, and a
  /// frozen BatchNorm normalises with its moving statistics and leaves them as they are, in
  /// training mode too (Dropout still drops). Saving and loading are unchanged. unfreeze() undoes
  /// it; a parameter shared with a module that stays unfrozen is frozen all the same.
  void freeze() { set_frozen(true); }
  void unfreeze() { set_frozen(false); }
  bool frozen() const { return frozen_; }

  /// Sum of the penalties of every regularized parameter of the tree (a rank-0 Var, zero when
  /// there are none); add it to the data loss.
  Var<T> regularization_loss() const;
  /// `loss + regularization_loss()`, the penalties added one by one; `loss` itself when the tree
  /// has none (no zero is made and added). What the training loops use.
  Var<T> add_regularization(const Var<T>& loss) const;
  /// Resets the gradient of every parameter (see Var::zero_grad).
  void zero_grad() {
    for (auto& v : parameters()) v.zero_grad();
  }
  /// Moves every parameter and buffer of the tree to `device` (gd::cpu, gd::cuda(0)), as
  /// PyTorch's `module.to(device)`. Parameters keep their identity, so an optimizer made before
  /// still updates them (its state follows them at its next step); their gradients are reset.
  Module& to(Device device) {
    for (Param& p : params_)
      if (p.var.value().device() != device) {
        p.var.value() = p.var.value().to(device);
        p.var.zero_grad();
      }
    for (Buffer& b : buffers_) b.value = b.value.to(device);
    if (!buffers_.empty()) buffers_moved();
    for (const Child& c : children_) child(c)->to(device);
    return *this;
  }
  /// Where the module's first parameter lives (gd::cpu for a module without parameters).
  Device device() const {
    if (!params_.empty()) return params_.front().var.value().device();
    for (const Child& c : children_)
      if (child(c)->has_parameters()) return child(c)->device();
    return gradus::cpu;
  }

 protected:
  /// This module's row alone: path, class, own parameters, parameter count of its subtree.
  SummaryRow own_summary_row(const std::string& path) const {
    SummaryRow row{path, detail::short_type_name(typeid(*this)), "", parameter_count(),
                   has_output_shape_ ? output_shape_.str() : std::string()};
    for (const Param& p : params_)
      row.parameters += (row.parameters.empty() ? "" : "  ") + p.name + " " + p.var.shape().str();
    return row;
  }

  Module() = default;

  /// Registers `value` as a trainable parameter called `name` and returns it as a leaf Var;
  /// `reg` adds its penalty to `regularization_loss()`. Names are unique within a module and
  /// contain no '.'.
  Var<T> register_parameter(std::string name, Tensor<T> value, Regularizer reg = {}) {
    check_name(name, "register_parameter");
    GRADUS_CHECK(value_error, value.defined(), "register_parameter: '", name, "' is an undefined tensor");
    Var<T> v(std::move(value));
    params_.push_back({std::move(name), v, reg});
    return v;
  }
  /// Registers an existing trainable Var (for example one shared with another module).
  Var<T> register_parameter(std::string name, Var<T> var, Regularizer reg = {}) {
    check_name(name, "register_parameter");
    GRADUS_CHECK(value_error, var.defined() && var.is_leaf() && (var.requires_grad() || var.frozen()),
                 "register_parameter: '", name, "' must be a trainable leaf Var");
    params_.push_back({std::move(name), var, reg});
    return var;
  }
  /// Registers a non-trainable tensor saved with the model; returns a handle to the same storage
  /// (update it in place: `buf.assign(...)`, `buf.copy_(...)`).
  Tensor<T> register_buffer(std::string name, Tensor<T> value) {
    check_name(name, "register_buffer");
    GRADUS_CHECK(value_error, value.defined(), "register_buffer: '", name, "' is an undefined tensor");
    buffers_.push_back({std::move(name), value});
    return value;
  }
  /// The registered buffer `name` of this module (value_error when there is none).
  Tensor<T>& buffer(const std::string& name) {
    for (Buffer& b : buffers_)
      if (b.name == name) return b.value;
    ::gradus::detail::throw_error<value_error>({"buffer: no buffer '", name, "' is registered in this module"});
  }
  /// Called after `to(device)` replaced this module's buffers: a layer that keeps handles to its
  /// buffers takes the new ones from `buffer(name)`.
  virtual void buffers_moved() {}
  /// Registers `rng`, a generator this module draws from (it must outlive the module), as
  /// `name`, so that `fit` finds it and checkpoints it with the model; returns it.
  Rng& register_generator(std::string name, Rng& rng) {
    check_name(name, "register_generator");
    generators_.push_back({std::move(name), &rng});
    return rng;
  }
  /// Registers `child`, a data member of this module (see the file comment), as sub-module `name`.
  template <class M>
    requires std::derived_from<M, Module>
  M& register_module(std::string name, M& child) {
    check_name(name, "register_module");
    const auto self = reinterpret_cast<std::uintptr_t>(this);
    const auto at = reinterpret_cast<std::uintptr_t>(static_cast<Module*>(&child));
    // A member lies after this base subobject and within a sane object size; anything else is
    // most likely a module elsewhere in memory, whose link would break when this one moves.
    GRADUS_CHECK(value_error, at > self && at - self < kMaxOffset, "register_module: '", name,
                 "' is not a data member of the module registering it; pass a std::unique_ptr for a "
                 "module that lives elsewhere");
    children_.push_back({std::move(name), std::ptrdiff_t(at - self), nullptr});
    return child;
  }
  /// A layer that is not a Module<T> cannot be registered: a stateless layer (MaxPool2d, AvgPool2d,
  /// GlobalAvgPool, Flatten, an activation) has nothing to save or train, so it stays a plain
  /// member called in forward; a module of the other element type cannot join this tree.
  template <class M>
    requires(!std::derived_from<M, Module>)
  void register_module(std::string, M&) {
    static_assert(std::derived_from<M, Module<float>> || std::derived_from<M, Module<double>>,
                  "STATELESS_LAYERS_NEED_NO_REGISTRATION: MaxPool2d, AvgPool2d, GlobalAvgPool, Flatten and the "
                  "activation layers hold no parameters; keep them as members and call them in forward without "
                  "register_module");
    static_assert(!(std::derived_from<M, Module<float>> || std::derived_from<M, Module<double>>),
                  "A_CHILD_MODULE_MUST_HAVE_THE_ELEMENT_TYPE_OF_ITS_PARENT: register_module");
  }
  /// Registers a sub-module that this module owns (for children kept outside the object, such as
  /// a variable number of blocks); returns a reference to it.
  template <class M>
    requires std::derived_from<M, Module>
  M& register_module(std::string name, std::unique_ptr<M> child) {
    check_name(name, "register_module");
    GRADUS_CHECK(value_error, child != nullptr, "register_module: '", name, "' is a null pointer");
    M& ref = *child;
    children_.push_back({std::move(name), 0, std::unique_ptr<Module>(std::move(child))});
    return ref;
  }

 private:
  static constexpr std::uintptr_t kMaxOffset = std::uintptr_t(1) << 20;

  struct Param {
    std::string name;
    Var<T> var;
    Regularizer reg;
  };
  struct Buffer {
    std::string name;
    Tensor<T> value;
  };
  struct Child {
    std::string name;
    std::ptrdiff_t offset;          // from this base subobject, for a member
    std::unique_ptr<Module> owned;  // for an owned child
  };

  Module* child(const Child& c) const {
    if (c.owned) return c.owned.get();
    return reinterpret_cast<Module*>(reinterpret_cast<std::uintptr_t>(this) + std::uintptr_t(c.offset));
  }

  bool has_parameters() const {
    if (!params_.empty()) return true;
    for (const Child& c : children_)
      if (child(c)->has_parameters()) return true;
    return false;
  }
  void check_name(const std::string& name, const char* op) const {
    GRADUS_CHECK(value_error, !name.empty() && name.find('.') == std::string::npos, op, ": name '", name,
                 "' must be non-empty and contain no '.'");
    bool taken = false;
    for (const Param& p : params_) taken = taken || p.name == name;
    for (const Buffer& b : buffers_) taken = taken || b.name == name;
    for (const Child& c : children_) taken = taken || c.name == name;
    for (const auto& [g, r] : generators_) taken = taken || g == name;
    GRADUS_CHECK(value_error, !taken, op, ": name '", name, "' is already registered in this module");
  }

  void collect_parameters(const std::string& prefix, std::vector<std::pair<std::string, Var<T>>>& out,
                          std::unordered_set<const void*>& seen) const {
    for (const Param& p : params_)
      if (seen.insert(p.var.node()).second) out.emplace_back(prefix + p.name, p.var);
    for (const Child& c : children_) child(c)->collect_parameters(prefix + c.name + ".", out, seen);
  }
  void collect_modules(const std::string& path, std::vector<std::pair<std::string, Module*>>& out) {
    out.emplace_back(path, this);
    for (const Child& c : children_) child(c)->collect_modules(detail::child_path(path, c.name), out);
  }
  void collect_generators(const std::string& prefix, std::vector<std::pair<std::string, Rng*>>& out,
                          std::unordered_set<const void*>& seen) const {
    for (const auto& [name, r] : generators_)
      if (seen.insert(r).second) out.emplace_back(prefix + name, r);
    for (const Child& c : children_) child(c)->collect_generators(prefix + c.name + ".", out, seen);
  }
  void collect_buffers(const std::string& prefix, std::vector<std::pair<std::string, Tensor<T>>>& out) const {
    for (const Buffer& b : buffers_) out.emplace_back(prefix + b.name, b.value);
    for (const Child& c : children_) child(c)->collect_buffers(prefix + c.name + ".", out);
  }
  // A parameter registered in several modules (shared weights) is penalised once, by its first
  // registration in depth-first order. The search runs over the tree instead of a set of seen
  // nodes so that a training step allocates nothing here (quadratic in the parameters that carry
  // a penalty, which are few).
  void add_penalties(const Module& root, Var<T>& total) const;
  const Param* first_registration(const void* node) const {
    for (const Param& p : params_)
      if (p.var.node() == node) return &p;
    for (const Child& c : children_)
      if (const Param* q = child(c)->first_registration(node)) return q;
    return nullptr;
  }

  void set_frozen(bool on) {
    frozen_ = on;
    for (Param& p : params_) p.var.set_requires_grad(!on);
    for (const Child& c : children_) child(c)->set_frozen(on);
  }

  std::vector<Param> params_;
  std::vector<Buffer> buffers_;
  std::vector<Child> children_;
  std::vector<std::pair<std::string, Rng*>> generators_;
  bool training_ = true;
  bool frozen_ = false;
  bool has_output_shape_ = false;
  Shape output_shape_;
};

// Defined out of the class, so that a program linking libgradus compiles none of them. Each
// penalty is added by its Regularizer (Regularizer::add_to), so that the sum's expression, too, is
// compiled only where a regularizer is made.
template <Real T>
Var<T> Module<T, void>::regularization_loss() const {
  // zero where the penalties are, filled there (a copy from the host would wait for a GPU's queue)
  Var<T> total = Var<T>::constant(Tensor<T>::empty({}, device()).fill_(T(0)));
  add_penalties(*this, total);
  return total;
}

template <Real T>
Var<T> Module<T, void>::add_regularization(const Var<T>& loss) const {
  Var<T> total = loss;
  add_penalties(*this, total);
  return total;
}

template <Real T>
void Module<T, void>::add_penalties(const Module& root, Var<T>& total) const {
  for (const Param& p : params_)
    if (p.reg && root.first_registration(p.var.node()) == &p) p.reg.add_to(total, p.var);
  for (const Child& c : children_) child(c)->add_penalties(root, total);
}

/// Module<T> that is also callable: `m(args...)` is `m.forward(args...)`, with Derived the
/// class being defined (`struct Block : gd::nn::Module<float, Block>`). Every layer of gd::nn
/// derives from it. A call through `m(...)` marks `m` as running for gd::profile, which files the
/// ops it runs under its module path; calling `m.forward(...)` directly files them under the caller. Everything else — registration, parameters(), ModuleType — is Module<T>'s.
template <Real T, class Derived>
class Module : public Module<T, void> {
 public:
  template <class... Args>
  decltype(auto) operator()(Args&&... args) {
    const gradus::detail::ModuleScope scope(static_cast<const Module<T, void>*>(this), typeid(Derived));  // for the profiler
    using R = decltype(static_cast<Derived&>(*this).forward(std::forward<Args>(args)...));
    if constexpr (requires(const std::remove_reference_t<R>& r) { this->record_output_shape(r.shape()); }) {
      R out = static_cast<Derived&>(*this).forward(std::forward<Args>(args)...);
      this->record_output_shape(out.shape());  // for the summary
      return out;
    } else {
      return static_cast<Derived&>(*this).forward(std::forward<Args>(args)...);
    }
  }

 protected:
  Module() = default;
};

/// Prints the summary of `m` (Keras' `model.summary()`; see the file comment), e.g. for
/// `Sequential(Dense<float>({.in = 4, .out = 3}, rng), ReLU{}, Dense<float>({.in = 3, .out = 2}, rng))`:
///   Model: Sequential
///   Layer (type)  Parameters              Param #
///   =============================================
///   0 (Dense)     kernel [4,3]  bias [3]       15
///   1 (ReLU)                                    0
///   2 (Dense)     kernel [3,2]  bias [2]        8
///   =============================================
///   Total params: 23
///   Trainable params: 23
///   Frozen params: 0
///   Buffers (not trained): 0
/// The module's own parameters, when it has some, come first as the row "(self)". No newline at
/// the end.
template <Real T>
std::ostream& operator<<(std::ostream& os, const Module<T>& m) {
  std::vector<SummaryRow> rows;
  m.summary_rows("", rows);
  const SummaryRow top = rows.front();
  if (top.parameters.empty()) rows.erase(rows.begin());
  std::vector<std::string> names, counts;
  const std::string head_name = "Layer (type)", head_output = "Output shape", head_params = "Parameters",
                    head_count = "Param #";
  size_t w_name = head_name.size(), w_output = 0, w_params = head_params.size(), w_count = head_count.size();
  for (const SummaryRow& r : rows) {
    names.push_back((r.path.empty() ? std::string("(self)") : r.path) + " (" + r.type + ")");
    counts.push_back(std::to_string(r.count));
    w_name = std::max(w_name, names.back().size());
    if (!r.output.empty()) w_output = std::max(w_output, std::max(head_output.size(), r.output.size()));
    w_params = std::max(w_params, r.parameters.size());
    w_count = std::max(w_count, counts.back().size());
  }
  // The output column only once the model has run (see the file comment).
  const size_t w_out_col = w_output > 0 ? w_output + 2 : 0;
  const std::string ruler(w_name + 2 + w_out_col + w_params + 2 + w_count, '=');
  auto line = [&](const std::string& name, const std::string& output, const std::string& params,
                  const std::string& count) {
    os << name << std::string(w_name - name.size() + 2, ' ');
    if (w_output > 0) os << output << std::string(w_output - output.size() + 2, ' ');
    os << params << std::string(w_params - params.size() + 2 + w_count - count.size(), ' ') << count << '\n';
  };
  os << "Model: " << top.type << '\n';
  line(head_name, head_output, head_params, head_count);
  os << ruler << '\n';
  for (size_t i = 0; i < rows.size(); ++i) line(names[i], rows[i].output, rows[i].parameters, counts[i]);
  os << ruler << '\n';
  int64_t buffered = 0, trainable = 0;
  for (const auto& [name, b] : m.named_buffers()) buffered += b.size();
  for (const auto& [name, v] : m.named_parameters())
    if (v.requires_grad()) trainable += v.size();
  return os << "Total params: " << top.count << '\n' << "Trainable params: " << trainable << '\n'
            << "Frozen params: " << top.count - trainable << '\n' << "Buffers (not trained): " << buffered;
}

/// True for a type derived from Module<float> or Module<double>.
template <class M>
concept ModuleType = std::derived_from<std::remove_cvref_t<M>, Module<float>> ||
                     std::derived_from<std::remove_cvref_t<M>, Module<double>>;

namespace detail {

using gradus::to_var;

/// The last dimension of `s`, with a layer's error when `s` has rank 0 or it is not `expected`.
inline void check_last_dim(const Shape& s, int64_t expected, const char* layer, const char* what) {
  GRADUS_CHECK(shape_error, s.rank() >= 1 && s.back() == expected, layer, ": expected input [..., ", expected, "] (",
               what, " = ", expected, "), got ", s);
}

}  // namespace detail
}  // namespace gradus::nn

#if GRADUS_INSTANCES  // compiled once in libgradus with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::nn {
GRADUS_INSTANCE class Module<float, void>;
GRADUS_INSTANCE_DOUBLE class Module<double, void>;
}  // namespace gradus::nn
#endif
