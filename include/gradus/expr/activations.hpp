// gradus/expr/activations.hpp — the table of the activations a layer can take, written once.
//
// Each row: the activation's name (gd::ActivationKind's enumerator and what it prints as), its
// op struct in ops/elementwise_math.hpp, how the struct is built from the activation's alpha
// (`{}`: it takes none), and how the CPU runs it over a layer's rows: `block` (the op's Eigen
// form over blocks of a row) or `lane` (one element at a time in a loop the compiler
// vectorises, with vm::'s functions: the ops whose Eigen form is a select(), which has no
// packet path, and sigmoid and softsign, whose loops run at the AVX2 or AVX-512 copy's width
// where Eigen's packets keep the build's SSE width; docs/performance.md). The enum,
// the names, the visit switch of ops/bias_activation.hpp, the CPU kernels' instantiations and
// the GPU kernel's switch are all expanded from this list. softmax, which is not elementwise,
// comes after the rows.
//
// NVRTC compiles this header too (inside the GPU library source), so it includes nothing.
#pragma once

namespace gradus {
namespace ops {
struct Identity;
struct Relu;
struct LeakyRelu;
struct Elu;
struct Selu;
struct Gelu;
struct Tanh;
struct Sigmoid;
struct Softplus;
struct Softsign;
}  // namespace ops

// X(name, op struct, arguments built from `alpha`, CPU form)
#define GRADUS_ACTIVATIONS(X)              \
  X(linear, Identity, {}, block)           \
  X(relu, Relu, {}, block)                 \
  X(leaky_relu, LeakyRelu, (alpha), lane)  \
  X(elu, Elu, (alpha), lane)               \
  X(selu, Selu, {}, lane)                  \
  X(gelu, Gelu, {}, block)                 \
  X(tanh, Tanh, {}, block)                 \
  X(sigmoid, Sigmoid, {}, lane)            \
  X(softplus, Softplus, {}, block)         \
  X(softsign, Softsign, {}, lane)

/// Which function an `Activation` (ops/bias_activation.hpp) applies.
enum class ActivationKind {
#define GRADUS_X(name, Op, args, form) name,
  GRADUS_ACTIVATIONS(GRADUS_X)
#undef GRADUS_X
  softmax
};

/// How the CPU runs an activation over a layer's rows (the table's last column).
enum class ActivationForm { block, lane };

/// The row of activation K: its op struct `op`, and `make(alpha)`, the struct built for it.
template <ActivationKind K>
struct ActivationRow;
#define GRADUS_X(name_, Op, args, form_)                            \
  template <>                                                       \
  struct ActivationRow<ActivationKind::name_> {                     \
    using op = ops::Op;                                             \
    template <class O = ops::Op>                                    \
    static O make([[maybe_unused]] double alpha) {                  \
      return O args;                                                \
    }                                                               \
  };
GRADUS_ACTIVATIONS(GRADUS_X)
#undef GRADUS_X

/// The row of op struct Op: `kind` and `form`.
template <class Op>
struct ActivationOf;
#define GRADUS_X(name_, Op, args, form_)                                \
  template <>                                                           \
  struct ActivationOf<ops::Op> {                                        \
    static constexpr ActivationKind kind = ActivationKind::name_;       \
    static constexpr ActivationForm form = ActivationForm::form_;       \
  };
GRADUS_ACTIVATIONS(GRADUS_X)
#undef GRADUS_X

}  // namespace gradus
