// gradus/backend/cuda/elementwise.hpp — running a generated elementwise kernel on a GPU.
//
// The kernel of an expression type is generated (codegen.hpp), compiled to PTX for the GPU's
// architecture once per process or read from the disk cache (kernel_cache.hpp), loaded once per
// GPU, and launched with its arguments filled from the expression object: each leaf's device
// pointer and broadcast map, each number, each op parameter, in the order the generator numbered
// them (leaves left to right, parameters children first).
//
//   backend::cuda::evaluate_into(a * b + 1.f, out.device_data(), out.shape(), gd::cuda(0));
#pragma once
#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

#include "gradus/backend/cpu/broadcast.hpp"
#include "gradus/backend/cuda/device.hpp"
#include "gradus/backend/cuda/kernel_args.hpp"
#include "gradus/backend/cuda/kernel_cache.hpp"
#include "gradus/backend/cuda/memory.hpp"
#include "gradus/core/compiled.hpp"
#include "gradus/expr/expr.hpp"

namespace gradus {

namespace backend::cuda {

/// The broadcast map of an operand of shape `src` in an output of shape `out`, as a kernel reads it.
Bcast make_bcast(const Shape& src, const Shape& out);

using ::gradus::is_number_leaf;
template <class E>
struct is_tensor_leaf : std::bool_constant<!is_number_leaf<E>::value> {};

/// The number of op parameters of expression type E (what codegen numbers `a.p[k]`).
template <class E>
constexpr int param_count() {
  using C = node_children<E>;
  if constexpr (C::arity == 0) {
    return 0;
  } else {
    using Kids = decltype(C::get(std::declval<const E&>()));
    int n = []<size_t... I>(std::index_sequence<I...>) {
      return (param_count<std::remove_cvref_t<std::tuple_element_t<I, Kids>>>() + ... + 0);
    }(std::make_index_sequence<size_t(C::arity)>{});
    if constexpr (requires { typename E::op_type; }) n += op_param_count<typename E::op_type>();
    return n;
  }
}

/// The ElementwiseArgs type of expression type E.
template <class E>
using args_of = ElementwiseArgs<value_type_t<E>, count_leaves<E, is_tensor_leaf>(), count_leaves<E, is_number_leaf>(),
                                param_count<E>()>;

/// Fills a kernel's leaves, numbers and parameters from expression `e`, in codegen's order.
template <class E, class Args>
void fill_args(const E& e, Args& a, const Shape& out, int& leaf, int& number, int& param) {
  using C = node_children<E>;
  if constexpr (C::arity == 0) {
    if constexpr (is_number_leaf<E>::value) {
      a.s[number++] = e.value;
    } else {
      const auto& t = device_leaf(e);
      a.in[leaf] = t.device_data();
      a.bc[leaf] = make_bcast(t.shape(), out);
      ++leaf;
    }
  } else {
    const auto kids = C::get(e);
    [&]<size_t... I>(std::index_sequence<I...>) {
      (fill_args(std::get<I>(kids), a, out, leaf, number, param), ...);
    }(std::make_index_sequence<size_t(C::arity)>{});
    if constexpr (requires { typename E::op_type; }) {
      if constexpr (op_param_count<typename E::op_type>() > 0)
        for (int k = 0; k < op_param_count<typename E::op_type>(); ++k) a.p[param++] = e.op.param(k);
    }
  }
}

/// The kernel `entry` of `ptx` loaded on GPU `ordinal`, once per (key, GPU).
void* load_function(const std::string& key, const std::string& ptx, const char* entry, int ordinal);
/// The entry name of a kernel load_function returned (for error messages).
std::string function_name(void* fn);

inline constexpr int kMultiprocessorCount = 16;  // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT

/// `compute_90` for a compute-capability-9.0 GPU: the architecture its kernels are compiled for.
std::string arch_of(int ordinal);

/// A kernel's first launch on a GPU: its source generated (codegen.hpp), compiled by NVRTC or
/// read from the kernel cache (kernel_cache.hpp), and loaded. launch() and library_function()
/// reach it through these pointers, which gd::cuda(i) sets with the memory hooks
/// (install_first_launch, library.hpp): a tensor on a GPU needs those hooks, so every launch comes
/// after one; and a program that never makes a GPU does not compile the code generator, NVRTC's
/// loader or the kernel cache (about 58 KB of code in a header-only program that trains).
struct FirstLaunch {
  /// The generated kernel of `pass` of expression `type`, loaded on GPU `ordinal`.
  void* (*elementwise)(const ExprType& type, Pass pass, int ordinal) = nullptr;
  /// That kernel's name and architecture (kernel_id), for an error message.
  std::string (*elementwise_id)(const ExprType& type, Pass pass, int ordinal) = nullptr;
  /// The library kernel `entry` (`gradus_fill_f`), loaded on GPU `ordinal`.
  void* (*library)(const std::string& entry, int ordinal) = nullptr;
};
/// The process's FirstLaunch (null pointers until the first gd::cuda(i)).
FirstLaunch& first_launch_slot();
/// The process's FirstLaunch; device_error when no GPU has been made with gd::cuda(i).
const FirstLaunch& first_launch();
/// FirstLaunch::elementwise and ::elementwise_id.
void* load_elementwise(const ExprType& type, Pass pass, int ordinal);
std::string elementwise_id(const ExprType& type, Pass pass, int ordinal);

/// How many blocks of 256 threads of kernel `fn` one multiprocessor holds at once (the driver's
/// occupancy calculator: registers and shared memory per block), asked once per kernel and thread.
inline int resident_blocks(void* fn) {
  thread_local std::unordered_map<void*, int> known;
  if (auto it = known.find(fn); it != known.end()) return it->second;
  const Driver& d = Driver::get();
  int blocks = 8;
  if (d.occupancy_max_active_blocks) {
    d.check(d.occupancy_max_active_blocks(&blocks, fn, 256, 0), "cuOccupancyMaxActiveBlocksPerMultiprocessor");
    blocks = std::max(blocks, 1);
  }
  known.emplace(fn, blocks);
  return blocks;
}

/// The most blocks of 256 threads a GPU holds at once per multiprocessor (2,048 threads).
inline constexpr int kMaxBlocksPerSm = 8;

/// Blocks for a grid-stride kernel over n elements: enough to fill the GPU, no more (one wave:
/// `per_sm` resident blocks of 256 threads on each multiprocessor), so a reduction has few
/// partial sums; never more than max_grid_blocks.
inline long grid_blocks(long n, int ordinal, int per_sm = kMaxBlocksPerSm) {
  static std::array<std::atomic<int>, 64> sms{};
  int count = sms[size_t(ordinal)].load(std::memory_order_relaxed);
  if (count == 0) {
    const Driver& d = Driver::get();
    int dev = 0;
    d.check(d.device_get(&dev, ordinal), "cuDeviceGet");
    d.check(d.device_get_attribute(&count, kMultiprocessorCount, dev), "cuDeviceGetAttribute");
    count = std::max(count, 1);
    sms[size_t(ordinal)].store(count, std::memory_order_relaxed);
  }
  return std::min<long>((n + 255) / 256, long(count) * std::clamp(per_sm, 1, kMaxBlocksPerSm));
}

/// An expression type's loaded kernels, by pass and GPU (null until first launched).
using KernelSlots = std::array<std::array<std::atomic<void*>, 64>, kPasses>;
template <class E>
inline KernelSlots kernel_slots{};

/// The most blocks grid_blocks gives on GPU `ordinal`: the size of a reduction's partial sums.
inline long max_grid_blocks(int ordinal) { return grid_blocks(long(1) << 40, ordinal); }

/// Launches the generated kernel of `pass` of expression `type` over n elements on the default
/// stream of GPU `device` (compiled and loaded on first use, then kept in `slots`; no lookups
/// when warm). `args` is the kernel's ElementwiseArgs. Returns the number of blocks launched.
inline long launch(const ExprType& type, KernelSlots& slots, Pass pass, void* args, long n, Device device) {
  if (n == 0) return 0;
  std::atomic<void*>& slot = slots[size_t(pass)][size_t(device.index)];
  void* fn = slot.load(std::memory_order_acquire);
  if (!fn) {
    fn = first_launch().elementwise(type, pass, device.index);
    slot.store(fn, std::memory_order_release);
  }
  void* params[] = {args};
  make_current(device.index);
  const Driver& d = Driver::get();
  const long blocks = grid_blocks(n, device.index, resident_blocks(fn));
  d.launch(fn, unsigned(blocks), 256, params, "cuLaunchKernel (elementwise)",
           [&] { return first_launch().elementwise_id(type, pass, device.index); });
  return blocks;
}

/// Whether every operand of the kernel `args` (and, backward, the output adjoint) has the
/// output's shape, so `pass` can run as its dense variant.
template <class Args>
bool is_dense_launch(Pass pass, const Args& a) {
  const auto identity = [&](const Bcast& b) { return b.rank == 1 && b.strides[0] == 1 && b.dims[0] == a.n; };
  for (const Bcast& b : a.bc)
    if (!identity(b)) return false;
  return pass != Pass::backward || identity(a.gbc);
}

/// Launches expression type E's generated kernel of `pass` (forward, sum or backward) over
/// args.n elements on GPU `device`: its dense variant when no operand broadcasts.
template <class E>
long launch(Pass pass, args_of<E>& args, Device device) {
  return launch(expr_type_of<E>, kernel_slots<E>, is_dense_launch(pass, args) ? dense_pass(pass) : pass, &args, args.n,
                device);
}

/// The arguments of E's kernel over `shape` with every leaf, number and parameter filled.
template <class E>
args_of<E> make_args(const E& e, const Shape& shape) {
  args_of<E> a;
  a.n = long(shape.numel());
  int leaf = 0, number = 0, param = 0;
  fill_args(e, a, shape, leaf, number, param);
  return a;
}

/// out[i] = e[i] over `shape` on GPU `device`, every leaf of e being in that GPU's memory.
template <class E>
void evaluate_into(const E& e, value_type_t<E>* out, const Shape& shape, Device device) {
  args_of<E> a = make_args(e, shape);
  a.out = out;
  launch<E>(Pass::forward, a, device);
}

/// The sum of e over `shape` as partial sums: partials[b] = block b's (max_grid_blocks doubles in
/// the GPU's memory). Returns the number of blocks, for finish_sum.
template <class E>
long sum_partials(const E& e, const Shape& shape, double* partials, Device device) {
  args_of<E> a = make_args(e, shape);
  a.vsum = partials;
  return launch<E>(Pass::sum, a, device);
}

/// Where the fused backward kernel sends leaf k's gradient at each output element: `grad[k]`
/// (null: not wanted; the output's shape), added when `add[k]`.
template <class T>
struct BackwardTargets {
  T* grad[32] = {};
  bool add[32] = {};
};

/// The fused backward pass of e over `shape` on GPU `device`: the output adjoint g (read through
/// broadcasting, times `scale`) pushed to every leaf's target in one kernel; with `vsum`, the
/// values' partial sums are written there too (as sum_partials). Returns the number of blocks.
template <class E, class T = value_type_t<E>>
long fused_backward(const E& e, const Shape& shape, const Tensor<T>& g, T scale, const BackwardTargets<T>& targets,
                    double* vsum, Device device) {
  args_of<E> a = make_args(e, shape);
  constexpr int L = count_leaves<E, is_tensor_leaf>();
  static_assert(L <= 32, "YOUR_EXPRESSION_HAS_TOO_MANY_OPERANDS: backward on a GPU — materialise part of it first");
  for (int k = 0; k < L; ++k) {
    a.grad[k] = targets.grad[k];
    a.add[k] = targets.add[k];
  }
  a.g = g.device_data();
  a.gbc = make_bcast(g.shape(), shape);
  a.scale = scale;
  a.vsum = vsum;
  return launch<E>(Pass::backward, a, device);
}

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
GRADUS_INLINE FirstLaunch& first_launch_slot() {
  static FirstLaunch f;
  return f;
}
GRADUS_INLINE const FirstLaunch& first_launch() {
  const FirstLaunch& f = first_launch_slot();
  GRADUS_CHECK(device_error, f.elementwise && f.elementwise_id && f.library,
               "cuda: a GPU kernel was launched before any GPU was made with gd::cuda(i)");
  return f;
}
GRADUS_INLINE void* load_elementwise(const ExprType& type, Pass pass, int ordinal) {
  const std::string arch = arch_of(ordinal);
  const std::string& ptx = kernel_ptx(type, pass, arch);
  return load_function(kernel_id(type, pass, arch), ptx, (std::string("gradus_elementwise_") + pass_name(pass)).c_str(),
                       ordinal);
}
GRADUS_INLINE std::string elementwise_id(const ExprType& type, Pass pass, int ordinal) {
  return kernel_id(type, pass, arch_of(ordinal));
}
GRADUS_INLINE std::string arch_of(int ordinal) {
  static std::mutex mu;
  static std::array<std::string, 64> archs;
  std::lock_guard lock(mu);
  std::string& a = archs[size_t(ordinal)];
  if (a.empty()) a = "compute_" + std::to_string(gradus::cuda(ordinal).compute_capability());
  return a;
}
GRADUS_INLINE Bcast make_bcast(const Shape& src, const Shape& out) {
  Bcast k;
  if (src.numel() == out.numel()) {  // the output's shape, up to 1s: element i is element i
    k.rank = 1;
    k.dims[0] = long(out.numel());
    k.strides[0] = 1;
    return k;
  }
  const cpu::Broadcast b(src, out);
  k.rank = b.rank;
  for (int d = 0; d < b.rank; ++d) {
    k.dims[d] = long(b.dims[size_t(d)]);
    k.strides[d] = long(b.strides[size_t(d)]);
  }
  return k;
}

// The kernels load_function loaded: by key (and GPU), and their entry names.
struct LoadedFunctions {
  std::mutex mu;
  std::unordered_map<std::string, void*> by_key;
  std::unordered_map<void*, std::string> names;
};
inline LoadedFunctions& loaded_functions() {
  static LoadedFunctions f;
  return f;
}

GRADUS_INLINE std::string function_name(void* fn) {
  LoadedFunctions& f = loaded_functions();
  std::lock_guard lock(f.mu);
  const auto it = f.names.find(fn);
  return it != f.names.end() ? it->second : std::string("(unknown)");
}

GRADUS_INLINE void* load_function(const std::string& key, const std::string& ptx, const char* entry, int ordinal) {
  LoadedFunctions& f = loaded_functions();
  const std::string k = key + "#" + std::to_string(ordinal);
  std::lock_guard lock(f.mu);
  if (auto it = f.by_key.find(k); it != f.by_key.end()) return it->second;
  make_current(ordinal);
  const Driver& d = Driver::get();
  void* module = nullptr;
  void* fn = nullptr;
  d.check(d.module_load_data(&module, ptx.c_str()), "cuModuleLoadData");
  d.check(d.module_get_function(&fn, module, entry), "cuModuleGetFunction");
  f.by_key.emplace(k, fn);
  f.names.emplace(fn, entry);
  return fn;
}
#endif  // GRADUS_DEFINE_COMPILED

}  // namespace backend::cuda

}  // namespace gradus
