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
#include "gradus/expr/expr.hpp"

namespace gradus {

/// The tensor an expression leaf reads: itself for a Tensor (a Var's value, autodiff/var.hpp).
/// Found by argument-dependent lookup, so a leaf type of a higher layer brings its own.
template <Element T>
const Tensor<T>& device_leaf(const Tensor<T>& t) {
  return t;
}

namespace backend::cuda {

/// The broadcast map of an operand of shape `src` in an output of shape `out`, as a kernel reads it.
inline Bcast make_bcast(const Shape& src, const Shape& out) {
  const cpu::Broadcast b(src, out);
  Bcast k;
  k.rank = b.rank;
  for (int d = 0; d < b.rank; ++d) {
    k.dims[d] = long(b.dims[size_t(d)]);
    k.strides[d] = long(b.strides[size_t(d)]);
  }
  return k;
}

template <class E>
struct is_number_leaf : std::false_type {};
template <class T>
struct is_number_leaf<ScalarExpr<T>> : std::true_type {};
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
inline void* load_function(const std::string& key, const std::string& ptx, const char* entry, int ordinal) {
  static std::mutex mu;
  static std::unordered_map<std::string, void*> functions;
  const std::string k = key + "#" + std::to_string(ordinal);
  std::lock_guard lock(mu);
  if (auto it = functions.find(k); it != functions.end()) return it->second;
  make_current(ordinal);
  const Driver& d = Driver::get();
  void* module = nullptr;
  void* fn = nullptr;
  d.check(d.module_load_data(&module, ptx.c_str()), "cuModuleLoadData");
  d.check(d.module_get_function(&fn, module, entry), "cuModuleGetFunction");
  functions.emplace(k, fn);
  return fn;
}

/// `compute_90` for a compute-capability-9.0 GPU: the architecture its kernels are compiled for.
inline std::string arch_of(int ordinal) {
  static std::mutex mu;
  static std::array<std::string, 64> archs;
  std::lock_guard lock(mu);
  std::string& a = archs[size_t(ordinal)];
  if (a.empty()) a = "compute_" + std::to_string(gradus::cuda(ordinal).compute_capability());
  return a;
}

/// Launches a grid-stride elementwise kernel over n elements on the default stream.
template <class Args>
void launch_elementwise(void* fn, Args& args, long n, int ordinal) {
  if (n == 0) return;
  constexpr long kThreads = 256;
  const long blocks = std::min<long>((n + kThreads - 1) / kThreads, long(1) << 20);
  void* params[] = {&args};
  make_current(ordinal);
  const Driver& d = Driver::get();
  d.check(d.launch_kernel(fn, unsigned(blocks), 1, 1, unsigned(kThreads), 1, 1, 0, nullptr, params, nullptr),
          "cuLaunchKernel (elementwise)");
}

/// out[i] = e[i] over `shape` on GPU `device`, every leaf of e being in that GPU's memory.
template <class E>
void evaluate_into(const E& e, value_type_t<E>* out, const Shape& shape, Device device) {
  static std::array<std::atomic<void*>, 64> loaded{};  // per expression type and GPU: no lookups when warm
  void* fn = loaded[size_t(device.index)].load(std::memory_order_acquire);
  if (!fn) {
    const std::string arch = arch_of(device.index);
    const std::string& ptx = kernel_ptx<E>(Pass::forward, arch);
    fn = load_function(kernel_key<E>(Pass::forward, arch), ptx, "gradus_elementwise_forward", device.index);
    loaded[size_t(device.index)].store(fn, std::memory_order_release);
  }
  args_of<E> a;
  a.n = long(shape.numel());
  a.out = out;
  int leaf = 0, number = 0, param = 0;
  fill_args(e, a, shape, leaf, number, param);
  launch_elementwise(fn, a, a.n, device.index);
}

}  // namespace backend::cuda
}  // namespace gradus
