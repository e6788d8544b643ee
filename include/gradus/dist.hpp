// gradus/dist.hpp — data-parallel training over MPI (gd::dist): link gradus::dist, launch with mpirun.
#pragma once
#include "gradus/dist/mpi.hpp"
#include "gradus/dist/broadcast.hpp"
#include "gradus/dist/optimizer.hpp"
