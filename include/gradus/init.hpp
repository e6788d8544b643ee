// gradus/init.hpp — the initializers area: every weight initializer (namespace gd::init).
#pragma once
#include "gradus/init/initializers.hpp"
