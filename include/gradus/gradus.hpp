// gradus/gradus.hpp — the umbrella header: tensors, expressions, autodiff and every core op.
#pragma once
#include "gradus/core/error.hpp"
#include "gradus/core/shape.hpp"
#include "gradus/core/allocator.hpp"
#include "gradus/core/rng.hpp"
#include "gradus/core/tensor.hpp"
#include "gradus/expr/expr.hpp"
#include "gradus/expr/evaluator.hpp"
#include "gradus/ops/elementwise.hpp"
#include "gradus/autodiff/var.hpp"
#include "gradus/autodiff/materialize.hpp"
#include "gradus/autodiff/backward.hpp"
