// gradus/ops/registry.hpp — the list of every op, walked by the registry test
// (tests/ops/test_registry.cpp) that gradient-checks each one in double precision with
// broadcast operands. A new op is added to a list here, or it is not checked.
#pragma once
#include <tuple>

#include "gradus/ops/elementwise.hpp"

namespace gradus::ops {

using unary_registry = std::tuple<Neg, Abs, Exp, Log, Log1p, Sqrt, Rsqrt, Square, Sin, Cos, Tanh, Sigmoid, Relu,
                                  LeakyRelu, Elu, Selu, Gelu, Softplus, Softsign, Clamp, PowScalar>;
using binary_registry = std::tuple<Add, Sub, Mul, Div, Pow, Minimum, Maximum>;
/// Ops without a gradient (they must report a zero one).
using nondifferentiable_registry = std::tuple<Sign, Greater, Less, GreaterEqual, LessEqual, Equal, NotEqual>;

}  // namespace gradus::ops
