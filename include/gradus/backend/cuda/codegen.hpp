// gradus/backend/cuda/codegen.hpp — CUDA source generated from an elementwise expression's type.
//
// An expression type such as BinaryExpr<Mul, UnaryExpr<Exp, A>, B> (A, B: tensors or Vars)
// becomes one kernel: each thread reads its element of every leaf (through its broadcast map),
// evaluates the chain with the op structs of ops/elementwise_math.hpp on one
// gradus::backend::cuda::Element, and writes the result — `exp(a*b + c) * d` is one pass over
// memory, as on the CPU. The backward kernel evaluates the chain the same way, then pushes the
// output adjoint from the root to the leaves with the ops' own gradient rules and writes (or
// adds) every differentiable leaf's gradient at each output element — a broadcast leaf's into a
// buffer of the output's shape, summed afterwards in a fixed order (reduce.hpp's sum_to): the
// fused adjoint pass, one kernel for all inputs, and no atomics. The op math is never written twice: NVRTC
// compiles the same header the CPU uses, found under the include directory (include_root()).
//
//   auto k = elementwise_source<decltype(e)>(Pass::backward);   // k.source, k.leaves, ...
//   std::string ptx = compile_ptx(k.source, k.name, "compute_90", {"--include-path=" + include_root()});
#pragma once
#include <array>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "gradus/backend/cuda/runtime.hpp"
#include "gradus/core/compiled.hpp"
#include "gradus/expr/expr.hpp"

namespace gradus::backend::cuda {

/// The number of run-time parameters of an op struct (`num_params`; none for an empty one): the
/// generated code builds `ops::Clamp(a.p[3], a.p[4])` and the host fills p from `op.param(i)`.
template <class Op>
constexpr int op_param_count() {
  if constexpr (requires { Op::num_params; }) {
    return Op::num_params;
  } else {
    static_assert(std::is_empty_v<Op>, "AN_OP_WITH_PARAMETERS_MUST_DECLARE_NUM_PARAMS_AND_PARAM: op struct");
    return 0;
  }
}

/// `gradus::ops::LeakyRelu` from the op's name `leaky_relu` (every op struct is its name in
/// CamelCase).
inline std::string op_struct(std::string_view name) {
  std::string s = "gradus::ops::";
  bool up = true;
  for (char c : name) {
    if (c == '_') {
      up = true;
      continue;
    }
    s += up ? char(std::toupper(static_cast<unsigned char>(c))) : c;
    up = false;
  }
  return s;
}

template <class T>
constexpr const char* element_type_name() {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                "THE_ELEMENT_TYPE_MUST_BE_FLOAT_OR_DOUBLE: CUDA elementwise kernels");
  return std::is_same_v<T, float> ? "float" : "double";
}

/// One node of an expression, flattened in post-order (children before their parent).
struct CodegenNode {
  enum Kind { tensor, var, number, unary, binary, where } kind;
  std::string op;               ///< the op struct as C++ (with its parameters), for unary/binary
  std::vector<int> kids;        ///< child node indices
  std::vector<bool> flows;      ///< a gradient flows to kid i
  bool differentiable = false;  ///< a gradient can reach a var below (or at) this node
  int slot = -1;                ///< leaf: index into in/bc/grad; number: index into s
};

/// The expression's nodes, in post-order, and its leaf, number and parameter counts.
struct CodegenTree {
  std::vector<CodegenNode> nodes;
  int leaves = 0, numbers = 0, params = 0;

  /// `gradus::ops::Clamp(a.p[3], a.p[4])`: the op struct `name` built from its `count`
  /// parameters, numbered from `params` on (`gradus::ops::Exp{}` without parameters).
  std::string op_call(std::string_view name, int count);

  template <class E>
  int add() {
    using C = node_children<E>;
    constexpr bool differentiable = is_differentiable_v<E>;
    if constexpr (C::arity == 0) {
      return add_leaf(std::is_same_v<E, ScalarExpr<value_type_t<E>>>, differentiable);
    } else {
      using Kids = decltype(C::get(std::declval<const E&>()));
      std::array<int, size_t(C::arity)> kids{};
      [&]<size_t... I>(std::index_sequence<I...>) {
        ((kids[I] = add<std::remove_cvref_t<std::tuple_element_t<I, Kids>>>()), ...);
      }(std::make_index_sequence<size_t(C::arity)>{});
      if constexpr (requires { typename E::op_type; }) {
        using Op = typename E::op_type;
        return add_op(kids.data(), C::grad_flows.data(), C::arity, differentiable, Op::name, op_param_count<Op>());
      } else {
        return add_op(kids.data(), C::grad_flows.data(), C::arity, differentiable, {}, -1);
      }
    }
  }

  /// Appends a leaf: a number, or a tensor (a var when `differentiable`); returns its index.
  int add_leaf(bool number, bool differentiable);
  /// Appends the node of op `name` with `count` parameters over nodes `kids` (a gradient flows to
  /// kid i when `flows[i]`); `count` -1 is a `where` node. Returns its index.
  int add_op(const int* kids, const bool* flows, int arity, bool differentiable, std::string_view name, int count);
};

/// Which kernel to generate: the values (forward), their sum (sum: each block's sum of its
/// elements, as a double, into `a.vsum[block]`), or the fused adjoint pass (backward; it also
/// sums the values into `a.vsum` when that is set, so a loss gets its value from the pass that
/// computes its gradients). The dense passes are the same for an expression whose every operand
/// (and, backward, the output adjoint) has the output's shape: element i of each is read at i,
/// without the broadcast map's index arithmetic (fewer registers, no 64-bit divisions).
enum class Pass { forward, sum, backward, dense_forward, dense_sum, dense_backward };
inline constexpr int kPasses = 6;

inline const char* pass_name(Pass p) {
  constexpr const char* names[kPasses] = {"forward", "sum", "backward", "dense_forward", "dense_sum", "dense_backward"};
  return names[int(p)];
}
inline bool is_dense(Pass p) { return int(p) >= 3; }
/// The pass without its dense variant: forward, sum or backward.
inline Pass base_pass(Pass p) { return Pass(int(p) % 3); }
/// The dense variant of forward, sum or backward.
inline Pass dense_pass(Pass p) { return Pass(int(base_pass(p)) + 3); }

/// A generated kernel: its CUDA source, entry point and translation-unit name, and the counts
/// its ElementwiseArgs<T, leaves, numbers, params> is instantiated with.
struct KernelSource {
  std::string source, entry, name;
  int leaves = 0, numbers = 0, params = 0;
};

/// The CUDA source of the forward or backward kernel of a flattened expression (`tree`, its last
/// node the root) over elements of type `t` ("float" or "double"). Not a template: every
/// expression type shares this one function, and only the flattening (CodegenTree::add) is
/// instantiated per type.
KernelSource elementwise_source(const CodegenTree& tree, const std::string& t, Pass pass, std::string entry);

/// The CUDA source of the forward or backward kernel of expression type E; `entry` names the
/// kernel (default gradus_elementwise_forward / _backward).
template <class E>
KernelSource elementwise_source(Pass pass, std::string entry = {}) {
  CodegenTree tree;
  tree.add<E>();
  return elementwise_source(tree, element_type_name<value_type_t<E>>(), pass, std::move(entry));
}

/// The directory holding gradus/ (the headers NVRTC includes): $GRADUS_INCLUDE_DIR, else the
/// one this header was compiled from. Throws gd::device_error when the op headers or the GPU
/// library's device sources (backend/cuda/library/*.cuh) are not there.
std::string include_root();

/// Compiles a generated kernel to PTX for `arch` (compute_80, compute_90, ...).
std::string compile_kernel(const KernelSource& k, const std::string& arch);

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
GRADUS_INLINE int CodegenTree::add_leaf(bool number, bool differentiable) {
  CodegenNode n{};
  n.differentiable = differentiable;
  if (number) {
    n.kind = CodegenNode::number;
    n.slot = numbers++;
  } else {
    n.kind = differentiable ? CodegenNode::var : CodegenNode::tensor;
    n.slot = leaves++;
  }
  nodes.push_back(std::move(n));
  return int(nodes.size()) - 1;
}
GRADUS_INLINE int CodegenTree::add_op(const int* kids, const bool* flows, int arity, bool differentiable,
                                      std::string_view name, int count) {
  CodegenNode n{};
  n.differentiable = differentiable;
  n.kids.assign(kids, kids + arity);
  n.flows.assign(flows, flows + arity);
  if (count >= 0) {
    n.op = op_call(name, count);
    n.kind = arity == 1 ? CodegenNode::unary : CodegenNode::binary;
  } else {
    n.kind = CodegenNode::where;
  }
  nodes.push_back(std::move(n));
  return int(nodes.size()) - 1;
}
GRADUS_INLINE std::string CodegenTree::op_call(std::string_view name, int count) {
  std::string op = op_struct(name);
  if (count == 0) return op + "{}";
  op += "(";
  for (int k = 0; k < count; ++k) op += (k ? ", a.p[" : "a.p[") + std::to_string(params++) + "]";
  return op + ")";
}
/// Appends the pieces to `out`, one after another: the generated source is written with this
/// rather than with chains of std::string operator+, whose temporaries made elementwise_source
/// several times larger and slower to compile.
GRADUS_INLINE void emit(std::string& out, std::initializer_list<std::string_view> pieces) {
  for (std::string_view p : pieces) out.append(p);
}

GRADUS_INLINE KernelSource elementwise_source(const CodegenTree& tree, const std::string& t, Pass variant,
                                              std::string entry) {
  const bool dense = is_dense(variant);
  const Pass pass = base_pass(variant);
  // element i of leaf `slot` (of the output adjoint: slot "g")
  const auto at = [&](const std::string& slot) { return dense ? std::string("i") : "a.bc[" + slot + "].at(i)"; };
  const std::string_view g_at = dense ? "i" : "a.gbc.at(i)";
  const int root = int(tree.nodes.size()) - 1;
  // "v3", "g3": node k's value and adjoint
  const auto name = [](char prefix, int k) { return std::string(1, prefix).append(std::to_string(k)); };
  const auto v = [&](int k) { return name('v', k); };
  const auto g = [&](int k) { return name('g', k); };
  std::string body;
  for (int k = 0; k <= root; ++k) {  // forward, children first
    const CodegenNode& n = tree.nodes[size_t(k)];
    const std::string slot = std::to_string(n.slot);
    switch (n.kind) {
      case CodegenNode::tensor:
      case CodegenNode::var: emit(body, {"    const V ", v(k), "{a.in[", slot, "][", at(slot), "]};\n"}); break;
      case CodegenNode::number: emit(body, {"    const V ", v(k), "{a.s[", slot, "]};\n"}); break;
      case CodegenNode::unary: emit(body, {"    const V ", v(k), " = ", n.op, ".forward(", v(n.kids[0]), ");\n"}); break;
      case CodegenNode::binary:
        emit(body, {"    const V ", v(k), " = ", n.op, ".forward(", v(n.kids[0]), ", ", v(n.kids[1]), ");\n"});
        break;
      case CodegenNode::where:
        emit(body, {"    const V ", v(k), " = (", v(n.kids[0]), " != ", t, "(0)).select(", v(n.kids[1]), ", ",
                    v(n.kids[2]), ");\n"});
        break;
    }
  }
  if (pass == Pass::forward) {
    emit(body, {"    a.out[i] = ", v(root), ".v;\n"});
  } else if (pass == Pass::sum) {  // each block's sum into a.vsum[block]
    emit(body, {"    acc += double(", v(root), ".v);\n"});
  } else {
    emit(body, {"    if (a.vsum) acc += double(", v(root), ".v);\n"});
    emit(body, {"    const V ", g(root), "{a.g[", g_at, "] * a.scale};\n"});
    // A node has an adjoint when its parent passes one down: not below a comparison, `sign` or
    // a `where` condition, so a Var there gets nothing from this occurrence.
    std::vector<bool> has_g(size_t(root) + 1, false);
    has_g[size_t(root)] = true;
    for (int k = root; k >= 0; --k) {  // adjoints, parents first
      const CodegenNode& n = tree.nodes[size_t(k)];
      if (!n.differentiable || !has_g[size_t(k)]) continue;
      const auto wants = [&](size_t i) {
        const bool w = n.flows[i] && tree.nodes[size_t(n.kids[i])].differentiable;
        if (w) has_g[size_t(n.kids[i])] = true;
        return w;
      };
      switch (n.kind) {
        case CodegenNode::var: break;  // stored after the sweep, below
        case CodegenNode::unary:
          if (wants(0))
            emit(body, {"    const V ", g(n.kids[0]), " = ", n.op, ".backward(", v(n.kids[0]), ", ", v(k), ", ", g(k),
                        ");\n"});
          break;
        case CodegenNode::binary: {
          const std::string x = v(n.kids[0]), y = v(n.kids[1]), z = v(k), gz = g(k);
          if (wants(0)) emit(body, {"    const V ", g(n.kids[0]), " = ", n.op, ".dx(", x, ", ", y, ", ", z, ", ", gz, ");\n"});
          if (wants(1)) emit(body, {"    const V ", g(n.kids[1]), " = ", n.op, ".dy(", x, ", ", y, ", ", z, ", ", gz, ");\n"});
          break;
        }
        case CodegenNode::where: {
          const std::string c = v(n.kids[0]), gz = g(k);
          if (wants(1))
            emit(body, {"    const V ", g(n.kids[1]), " = (", c, " != ", t, "(0)).select(", gz, ", ", t, "(0));\n"});
          if (wants(2))
            emit(body, {"    const V ", g(n.kids[2]), " = (", c, " != ", t, "(0)).select(", t, "(0), ", gz, ");\n"});
          break;
        }
        default: break;
      }
    }
    // Every occurrence of a Var has a slot of its own, and the host marks the first occurrence
    // (lowest slot) "write" and later ones "add" to the same buffer, as the CPU's forward-order
    // evaluator visits them (a broadcast occurrence writes to a buffer of its own, at i). The sweep above meets occurrences last-first, so the stores wait
    // until here and go out in slot order: `=` first, then `+=`. An occurrence that the host
    // gave a buffer but that gets no adjoint here still stores its zero, so that a later `+=`
    // never reads an unwritten buffer. Nodes are numbered as CodegenTree::add numbers the leaf
    // slots, so ascending nodes are ascending slots.
    for (int k = 0; k <= root; ++k) {
      const CodegenNode& n = tree.nodes[size_t(k)];
      if (n.kind != CodegenNode::var) continue;
      const std::string s = std::to_string(n.slot);
      emit(body, {"    if (a.grad[", s, "]) {\n"});
      if (has_g[size_t(k)]) {  // the sweep passed it an adjoint
        const std::string gk = g(k);
        emit(body, {"      if (a.add[", s, "]) a.grad[", s, "][i] += ", gk, ".v;\n"});
        emit(body, {"      else a.grad[", s, "][i] = ", gk, ".v;\n"});
      } else {
        emit(body, {"      if (!a.add[", s, "]) a.grad[", s, "][i] = ", t, "(0);\n"});
      }
      body += "    }\n";
    }
  }
  KernelSource k;
  k.leaves = tree.leaves, k.numbers = tree.numbers, k.params = tree.params;
  k.entry = !entry.empty() ? std::move(entry) : std::string("gradus_elementwise_") + pass_name(variant);
  k.name = k.entry + ".cu";
  const std::string leaves = std::to_string(k.leaves), numbers = std::to_string(k.numbers),
                    params = std::to_string(k.params);
  emit(k.source, {"#include \"gradus/backend/cuda/nvrtc_prelude.hpp\"\n"
                  "#include \"gradus/backend/cuda/element.hpp\"\n"
                  "#include \"gradus/backend/cuda/kernel_args.hpp\"\n"
                  "#include \"gradus/ops/elementwise_math.hpp\"\n\n"
                  "extern \"C\" __global__ void ",
                  k.entry, "(const gradus::backend::cuda::ElementwiseArgs<", t, ", ", leaves, ", ", numbers, ", ", params,
                  "> a) {\n"
                  "  using V = gradus::backend::cuda::Element<",
                  t, ">;\n", pass == Pass::forward ? "" : "  double acc = 0;\n",
                  "  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < a.n; i += (long)gridDim.x * blockDim.x) {\n",
                  body, "  }\n",
                  pass == Pass::sum        ? "  gradus::backend::cuda::block_sum_store(acc, a.vsum + blockIdx.x);\n"
                  : pass == Pass::backward ? "  if (a.vsum) gradus::backend::cuda::block_sum_store(acc, a.vsum + blockIdx.x);\n"
                                           : "",
                  "}\n"});
  return k;
}

GRADUS_INLINE std::string include_root() {
  std::string root;
  if (const char* env = std::getenv("GRADUS_INCLUDE_DIR"); env && *env) {
    root = env;
  } else {
    const std::string_view self = __FILE__, tail = "gradus/backend/cuda/codegen.hpp";
    root = self.size() >= tail.size() && self.substr(self.size() - tail.size()) == tail
               ? std::string(self.substr(0, self.size() - tail.size()))
               : std::string();
    if (root.empty()) root = ".";
  }
  for (const char* file : {"/gradus/ops/elementwise_math.hpp", "/gradus/backend/cuda/library/common.cuh"}) {
    const std::string probe = root + file;
    std::FILE* f = std::fopen(probe.c_str(), "rb");
    GRADUS_CHECK(device_error, f != nullptr, "cuda: the gradus headers that GPU kernels include are not at ", root,
                 " (no ", probe, "); set GRADUS_INCLUDE_DIR to the directory that holds gradus/");
    std::fclose(f);
  }
  return root;
}

GRADUS_INLINE std::string compile_kernel(const KernelSource& k, const std::string& arch) {
  // unannotated functions (the op structs' constructors) are device functions in a generated kernel
  return compile_ptx(k.source, k.name, arch, {"--include-path=" + include_root(), "--device-as-default-execution-space"});
}
#endif  // GRADUS_DEFINE_COMPILED
}  // namespace gradus::backend::cuda
