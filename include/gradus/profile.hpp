// gradus/profile.hpp — the profiling area: gd::profile::Profiler and Scope (profile/profiler.hpp),
// the recorded Event type (profile/event.hpp), the FLOP formulas (profile/flops.hpp), the op /
// scope / parameter tables (profile/report.hpp), the Chrome trace (profile/trace.hpp) and the
// TensorBoard graph and step stats (profile/graph.hpp). train::ProfilerHook runs it from fit.
#pragma once

#include "gradus/profile/event.hpp"
#include "gradus/profile/flops.hpp"
#include "gradus/profile/graph.hpp"
#include "gradus/profile/profiler.hpp"
#include "gradus/profile/report.hpp"
#include "gradus/profile/trace.hpp"
