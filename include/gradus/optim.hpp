// gradus/optim.hpp — the optimizers area (gd::optim): update rules, learning-rate schedules,
// gradient clipping and moving averages of variables.
//   gd::optim::Adam opt(params, {.lr = 1e-3});
//   auto sched = gd::optim::cosine_decay(1e-3, 10000);
//   for (int64_t s = 0; s < 10000; ++s) { opt.set_lr(sched(s)); opt.minimize(loss_fn()); }
#pragma once
#include "gradus/optim/optimizer.hpp"
#include "gradus/optim/optimizers.hpp"
#include "gradus/optim/schedules.hpp"
#include "gradus/optim/clip.hpp"
#include "gradus/optim/ema.hpp"
#include "gradus/optim/loss_scale.hpp"
