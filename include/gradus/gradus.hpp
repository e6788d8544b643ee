// gradus/gradus.hpp — the umbrella header: tensors, expressions, autodiff and every core op.
#pragma once
#include "gradus/autodiff.hpp"  // tensors, expressions, autodiff and the core ops
#include "gradus/init.hpp"
#include "gradus/losses.hpp"
#include "gradus/metrics.hpp"
#include "gradus/optim.hpp"
#include "gradus/ops/conv.hpp"
#include "gradus/ops/pool.hpp"
#include "gradus/ops/sampling.hpp"
#include "gradus/ops/sparse.hpp"
#include "gradus/ops/dropout.hpp"
#include "gradus/ops/recurrent.hpp"
#include "gradus/nn.hpp"
