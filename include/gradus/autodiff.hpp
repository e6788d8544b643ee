// gradus/autodiff.hpp — the lighter entry point: tensors, expressions, the CPU and GPU backends,
// reverse-mode autodiff, custom ops and the gradient checker, with the elementwise, reduction,
// softmax, linear-algebra and shape ops. No layers, losses, metrics, initializers, optimizers or
// convolution/pooling/dropout/recurrent ops: <gradus/gradus.hpp> adds those.
//   gd::Var<double> x(gd::Tensor<double>::from({1.0, 2.0}, {2}));
//   gd::Var<double> y = gd::sum(gd::exp(x) * x);
//   gd::backward(y);  // x.grad() == exp(x) * (1 + x)
#pragma once
#include "gradus/core/device.hpp"
#include "gradus/core/error.hpp"
#include "gradus/core/shape.hpp"
#include "gradus/core/allocator.hpp"
#include "gradus/core/rng.hpp"
#include "gradus/core/tensor.hpp"
#include "gradus/expr/expr.hpp"
#include "gradus/backend/backend.hpp"
#include "gradus/backend/cuda/device.hpp"
#include "gradus/ops/elementwise.hpp"
#include "gradus/autodiff/var.hpp"
#include "gradus/autodiff/materialize.hpp"
#include "gradus/autodiff/backward.hpp"
#include "gradus/autodiff/custom_op.hpp"
#include "gradus/autodiff/gradient_check.hpp"
#include "gradus/ops/reduce.hpp"
#include "gradus/ops/softmax.hpp"
#include "gradus/ops/linalg.hpp"
#include "gradus/ops/shape.hpp"
