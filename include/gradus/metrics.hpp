// gradus/metrics.hpp — the metrics area: streaming metric objects in namespace gd::metrics.
#pragma once
#include "gradus/metrics/metrics.hpp"
