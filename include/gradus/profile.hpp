// gradus/profile.hpp — the profiling area: gd::profile::Profiler and Scope (profile/profiler.hpp),
// the FLOP formulas (profile/flops.hpp) and the recorded Event type (profile/event.hpp).
#pragma once

#include "gradus/profile/event.hpp"
#include "gradus/profile/flops.hpp"
#include "gradus/profile/profiler.hpp"
