// gradus/profile/profiler.hpp — gd::profile::Profiler: what every op did, for how long, with how
// many FLOPs and how much memory, and in which module.
//
//   gd::profile::Profiler prof;
//   prof.attach(net);                 // names module scopes ("block/dense1") and parameters
//   prof.start();
//   { gd::profile::Scope s("step"); auto loss = ...; gd::backward(loss); opt.step(); }
//   prof.stop();
//   std::cout << gd::profile::format_report(gd::profile::report(prof.events()), "ops");
//
// While a profiler runs, every op (core/op_events.hpp) records one Event: its name, the module
// path that ran it, its operand and result shapes, FLOPs (profile/flops.hpp), bytes, wall time,
// and the tensor allocator's net change and high-water mark over it. The backward pass records
// one event per tape node. A module is "running" between entry and exit of `m(...)`
// (Module::operator()) or of a Sequential's layer; calling `m.forward(...)` directly files its
// ops under the caller. One profiler runs at a time, process-wide; ops on every thread record,
// each thread on its own lane. Memory figures are the process-wide allocator's, so while other
// threads allocate they include those threads' tensors.
//
// Off (no profiler started), each op pays one relaxed atomic load and a branch
// (benchmarks/profile_overhead measures it); GRADUS_NO_PROFILER compiles even that out.
#pragma once
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gradus/backend/backend.hpp"
#include "gradus/core/allocator.hpp"
#include "gradus/core/compiled.hpp"
#include "gradus/core/op_events.hpp"
#include "gradus/nn/module.hpp"
#include "gradus/profile/event.hpp"
#include "gradus/profile/flops.hpp"
#include "gradus/profile/report.hpp"

namespace gradus::profile {

struct ProfilerOptions {
  bool memory = true;  ///< read the allocator's counters around every event (a lock each)
};

/// Records an Event for every op run while it is started (see the file comment).
class Profiler final : public ::gradus::detail::OpObserver {
 public:
  explicit Profiler(ProfilerOptions options = {}) : options_(options) {}
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;
  GRADUS_INLINE_DECL ~Profiler() override;

  /// Names the modules of `model`'s tree by path ("block/dense1"; `root` names the model itself,
  /// "" by default) and lists its parameters (parameters()). Without it, a module's ops are filed
  /// under its class name ("Dense") below the enclosing module's path.
  template <Real T>
  void attach(nn::Module<T>& model, std::string root = "") {
    std::lock_guard lock(mu_);
    add_module(model, root);
    for (const auto& [name, v] : model.named_parameters()) {
      ParameterInfo p;
      p.name = name;
      const size_t dot = name.rfind('.');
      p.scope = dot == std::string::npos ? root : join(root, slashes(name.substr(0, dot)));
      p.shape = v.shape();
      p.dtype = ::gradus::detail::dtype_name_of<T>();
      p.count = v.shape().numel();
      p.bytes = p.count * int64_t(sizeof(T));
      p.node = v.node() ? v.node()->seq : 0;
      parameters_.push_back(std::move(p));
    }
  }

  /// Starts recording (events of an earlier run are kept: clear() drops them). Throws
  /// value_error when another profiler is running.
  void start();
  /// Stops recording. Ops still running on other threads finish their events.
  void stop();
  bool active() const { return ::gradus::detail::g_op_observer.load() == this; }
  /// Drops every recorded event (not the attached names).
  void clear();

  /// The events recorded so far, ordered by start time (an enclosing event before those it
  /// encloses). Call it when no op is running.
  std::vector<Event> events() const;
  /// The parameters of the attached models.
  const std::vector<ParameterInfo>& parameters() const { return parameters_; }

  // ---------------------------------------------------------------- OpObserver
  GRADUS_INLINE_DECL void begin(::gradus::detail::OpPhase phase, std::string_view label) override;
  GRADUS_INLINE_DECL void describe(const ::gradus::detail::OpDescription& d) override;
  GRADUS_INLINE_DECL void set_flops(double flops) override;
  GRADUS_INLINE_DECL void end() override;
  GRADUS_INLINE_DECL void enter_module(const void* module, const std::type_info& type) override;
  GRADUS_INLINE_DECL void leave_module() override;
  GRADUS_INLINE_DECL void enter_name_scope(std::string_view name) override;
  GRADUS_INLINE_DECL void leave_name_scope() override;

 private:
  struct Frame {
    Event event;
    bool described = false;
    bool node_backward = false;  ///< a tape node's backward (not an op run inside one)
    int expr_ops = 0;
    double flops = -1;
    int64_t in_use = 0, peak_abs = 0;
  };
  struct ModuleEntry {
    const void* module;  // nullptr: a gd::name_scope
    std::string path;
    std::string prefix;  // the name scopes opened outside any module, above an attached module's path
  };
  struct ThreadState {
    int lane = 0;
    std::vector<Frame> frames;
    std::vector<ModuleEntry> modules;
    std::vector<Event> done;
  };

  /// This thread's state, found once per thread and start() and then from a thread-local cache.
  ThreadState& thread_state();
  int64_t now_ns() const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - origin_).count();
  }
  static uint64_t key(int lane, uint64_t node) { return (uint64_t(lane) << 48) ^ node; }
  static std::string join(const std::string& a, const std::string& b) { return a.empty() ? b : b.empty() ? a : a + "/" + b; }
  static std::string slashes(std::string s) {
    std::replace(s.begin(), s.end(), '.', '/');
    return s;
  }
  template <Real T>
  void add_module(nn::Module<T>& m, const std::string& path) {
    paths_[static_cast<const void*>(static_cast<const nn::Module<T>*>(&m))] = path;
    for (const auto& [name, child] : m.named_children()) add_module(*child, join(path, name));
  }

  ProfilerOptions options_;
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<ThreadState>> threads_;
  std::unordered_map<std::thread::id, ThreadState*> lanes_;
  std::unordered_map<const void*, std::string> paths_;
  struct NodeInfo {
    double flops;         ///< of its forward event
    double conv_product;  ///< a convolution's product (detail::conv_product_flops), else 0
    std::string scope;    ///< of its forward event
  };
  std::unordered_map<uint64_t, NodeInfo> nodes_;  ///< tape nodes made while recording, by key(lane, seq)
  std::vector<ParameterInfo> parameters_;
  std::chrono::steady_clock::time_point origin_{};
  bool started_ = false;
  uint64_t generation_ = 0;
};

/// A named interval in the profile (`tf.profiler`'s user annotations, PyTorch's
/// record_function): every op run while it lives is nested under it. Costs nothing when no
/// profiler is running.
///   { gd::profile::Scope s("data"); batch = next(); }
class Scope {
 public:
  explicit Scope(std::string_view label) : obs_(::gradus::detail::op_observer()) {
    if (obs_) obs_->begin(::gradus::detail::OpPhase::scope, label);
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;
  ~Scope() {
    if (obs_) obs_->end();
  }

 private:
  ::gradus::detail::OpObserver* obs_;
};

/// Measures `MachineRates` (profile/report.hpp) on this thread, for `advice`: a float
/// 512x512x512 matrix product and a 64 MiB copy, each the best of three runs (about 50 ms).
MachineRates measure_machine();

}  // namespace gradus::profile

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::profile {
GRADUS_INLINE MachineRates measure_machine() {
  MachineRates m;
  auto best_of_three = [](auto&& f) {
    double best = 1e300;
    for (int k = 0; k < 3; ++k) {
      const auto t0 = std::chrono::steady_clock::now();
      f();
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return best;
  };
  {
    const int64_t n = 512;
    const auto a = Tensor<float>::full({n, n}, 0.5f), b = Tensor<float>::full({n, n}, 0.25f);
    auto c = Tensor<float>::empty({n, n});
    const double secs = best_of_three([&] { backend::gemm(a.data(), false, b.data(), false, c.data(), n, n, n, false, cpu); });
    m.gemm_gflops = 2.0 * double(n) * double(n) * double(n) / secs / 1e9;
  }
  {
    const size_t bytes = size_t(64) << 20;
    std::vector<char> from(bytes, 1), to(bytes, 0);
    const double secs = best_of_three([&] { std::memcpy(to.data(), from.data(), bytes); });
    m.bandwidth_gbps = 2.0 * double(bytes) / secs / 1e9;
  }
  return m;
}

GRADUS_INLINE Profiler::~Profiler() {
  if (active()) stop();
}

GRADUS_INLINE void Profiler::start() {
  ::gradus::detail::OpObserver* none = nullptr;
  GRADUS_CHECK(value_error, ::gradus::detail::g_op_observer.compare_exchange_strong(none, this),
               "Profiler::start: ", none == this ? "this profiler is already running" : "another profiler is running");
  if (!started_) origin_ = std::chrono::steady_clock::now(), started_ = true;
  static std::atomic<uint64_t> generations{0};  // unique over all profilers: a thread's cache is never stale
  generation_ = ++generations;
}

GRADUS_INLINE void Profiler::stop() {
  ::gradus::detail::OpObserver* self = this;
  ::gradus::detail::g_op_observer.compare_exchange_strong(self, nullptr);
}

GRADUS_INLINE void Profiler::clear() {
  std::lock_guard lock(mu_);
  for (auto& t : threads_) t->done.clear();
  nodes_.clear();
}

GRADUS_INLINE std::vector<Event> Profiler::events() const {
  std::lock_guard lock(mu_);
  std::vector<Event> all;
  for (const auto& t : threads_) all.insert(all.end(), t->done.begin(), t->done.end());
  std::stable_sort(all.begin(), all.end(), [](const Event& a, const Event& b) {
    return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.thread != b.thread ? a.thread < b.thread : a.depth < b.depth;
  });
  return all;
}

GRADUS_INLINE void Profiler::begin(::gradus::detail::OpPhase phase, std::string_view label) {
  ThreadState& t = thread_state();
  Frame f;
  f.event.kind = phase == ::gradus::detail::OpPhase::forward    ? EventKind::forward
                 : phase == ::gradus::detail::OpPhase::backward ? EventKind::backward
                                                                : EventKind::scope;
  if (f.event.kind == EventKind::forward && !t.frames.empty() && t.frames.back().event.kind == EventKind::backward)
    f.event.kind = EventKind::backward;  // ops a backward function runs are part of it
  f.node_backward = phase == ::gradus::detail::OpPhase::backward;
  f.event.name = label;
  f.event.scope = t.modules.empty() ? std::string() : t.modules.back().path;
  if (!f.node_backward && !t.frames.empty() && t.frames.back().event.kind == EventKind::backward)
    f.event.scope = t.frames.back().event.scope;  // inside a backward function: its node's module
  f.event.thread = t.lane;
  f.event.depth = int(t.frames.size());
  if (options_.memory) {
    auto& alloc = ::gradus::detail::CachingAllocator::instance();
    const int64_t peak = alloc.reset_peak();
    if (!t.frames.empty()) t.frames.back().peak_abs = std::max(t.frames.back().peak_abs, peak);
    f.in_use = f.peak_abs = alloc.stats().bytes_in_use;
  }
  f.event.start_ns = now_ns();  // last, so the bookkeeping above is not timed
  t.frames.push_back(std::move(f));
}

GRADUS_INLINE void Profiler::describe(const ::gradus::detail::OpDescription& d) {
  ThreadState& t = thread_state();
  if (t.frames.empty()) return;
  Frame& f = t.frames.back();
  if (f.described) return;  // the first description is the op's own (an op may make several nodes)
  f.described = true;
  Event& e = f.event;
  e.name = d.op ? d.op : "op";
  e.dtype = d.dtype ? d.dtype : "";
  e.output_shape = d.output;
  e.node = d.node;
  e.input_shapes.assign(d.inputs.begin(), d.inputs.begin() + d.n_inputs);
  e.input_nodes.assign(d.input_nodes.begin(), d.input_nodes.begin() + d.n_inputs);
  double elems = double(d.output.numel());
  for (int i = 0; i < d.n_inputs; ++i) elems += double(d.inputs[size_t(i)].numel());
  e.bytes = elems * d.element_bytes;
  f.expr_ops = d.expr_ops;
  if (d.flops >= 0) f.flops = d.flops;
  if (f.node_backward) {  // a node's backward belongs to the module that made the node
    std::lock_guard lock(mu_);
    const auto it = nodes_.find(key(e.thread, e.node));
    if (it != nodes_.end()) e.scope = it->second.scope;
  }
}

GRADUS_INLINE void Profiler::set_flops(double flops) {
  ThreadState& t = thread_state();
  if (!t.frames.empty()) t.frames.back().flops = flops;
}

GRADUS_INLINE void Profiler::end() {
  const int64_t end = now_ns();
  ThreadState& t = thread_state();
  if (t.frames.empty()) return;
  Frame f = std::move(t.frames.back());
  t.frames.pop_back();
  Event& e = f.event;
  e.end_ns = std::max(end, e.start_ns);
  if (e.name.empty()) e.name = e.kind == EventKind::scope ? "scope" : "op";
  if (options_.memory) {
    auto& alloc = ::gradus::detail::CachingAllocator::instance();
    f.peak_abs = std::max(f.peak_abs, alloc.reset_peak());
    e.alloc_bytes = alloc.stats().bytes_in_use - f.in_use;
    e.peak_bytes = f.peak_abs - f.in_use;
  }
  std::lock_guard lock(mu_);  // nodes_ and done are read by events() from other threads
  if (e.kind == EventKind::forward) {
    e.flops = f.flops >= 0 ? f.flops : detail::forward_flops(e, f.expr_ops);
    if (e.node) nodes_[key(e.thread, e.node)] = {e.flops, detail::conv_product_flops(e), e.scope};
  } else if (f.node_backward) {
    const auto it = nodes_.find(key(e.thread, e.node));
    const bool known = it != nodes_.end();
    e.flops = f.flops >= 0 ? f.flops
                           : detail::backward_flops(e, known ? it->second.flops : 0.0, known ? it->second.conv_product : 0.0);
  } else if (e.kind == EventKind::backward) {  // an op run inside a node's backward function
    e.flops = f.flops >= 0 ? f.flops : detail::forward_flops(e, f.expr_ops);
  }
  if (!t.frames.empty()) {
    Frame& parent = t.frames.back();
    parent.event.child_ns += e.end_ns - e.start_ns;
    parent.peak_abs = std::max(parent.peak_abs, f.peak_abs);
  }
  t.done.push_back(std::move(e));
}

GRADUS_INLINE void Profiler::enter_module(const void* module, const std::type_info& type) {
  ThreadState& t = thread_state();
  std::string path;
  {
    std::lock_guard lock(mu_);
    const auto it = paths_.find(module);
    if (it != paths_.end()) path = it->second;
  }
  const std::string prefix = t.modules.empty() ? std::string() : t.modules.back().prefix;
  if (path.empty())
    path = join(t.modules.empty() ? std::string() : t.modules.back().path, nn::detail::short_type_name(type));
  else
    path = join(prefix, path);  // an attached module's path, under the name scopes around the call
  t.modules.push_back({module, std::move(path), prefix});
}

GRADUS_INLINE void Profiler::leave_module() {
  ThreadState& t = thread_state();
  if (!t.modules.empty()) t.modules.pop_back();
}

GRADUS_INLINE void Profiler::enter_name_scope(std::string_view name) {
  ThreadState& t = thread_state();
  const std::string path = join(t.modules.empty() ? std::string() : t.modules.back().path, std::string(name));
  const bool in_module = std::any_of(t.modules.begin(), t.modules.end(), [](const ModuleEntry& m) { return m.module; });
  t.modules.push_back({nullptr, path, in_module ? t.modules.back().prefix : path});
}

GRADUS_INLINE void Profiler::leave_name_scope() {
  ThreadState& t = thread_state();
  if (!t.modules.empty() && t.modules.back().module == nullptr) t.modules.pop_back();
}

GRADUS_INLINE Profiler::ThreadState& Profiler::thread_state() {
  struct Cache {
    const Profiler* owner = nullptr;
    uint64_t generation = 0;
    ThreadState* state = nullptr;
  };
  thread_local Cache cache;
  if (cache.owner == this && cache.generation == generation_) return *cache.state;
  std::lock_guard lock(mu_);
  const auto id = std::this_thread::get_id();
  auto it = lanes_.find(id);
  if (it == lanes_.end()) {
    threads_.push_back(std::make_unique<ThreadState>());
    threads_.back()->lane = int(threads_.size() - 1);
    it = lanes_.emplace(id, threads_.back().get()).first;
  }
  cache = {this, generation_, it->second};
  return *it->second;
}
}  // namespace gradus::profile
#endif  // GRADUS_DEFINE_COMPILED
