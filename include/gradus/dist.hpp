// gradus/dist.hpp — data-parallel training over MPI (gd::dist), synchronous (DistributedOptimizer) or
// asynchronous with parameter servers (run_parameter_server, AsyncOptimizer): link gradus::dist,
// launch with mpirun.
#pragma once
#include "gradus/dist/mpi.hpp"
#include "gradus/dist/broadcast.hpp"
#include "gradus/dist/optimizer.hpp"
#include "gradus/dist/parameter_server.hpp"
#include "gradus/dist/async_optimizer.hpp"
// fit and Session on many ranks: #include <gradus/dist/collective.hpp> (gd::dist::collective();
// not included here: it needs gradus/train and gradus/io, link gradus::io).
