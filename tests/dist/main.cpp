// tests/dist/main.cpp — Catch2's runner inside one gd::dist::Context: run under mpiexec -np 2.
// Each rank runs every test case; a test that fails on one rank makes the job's status non-zero.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "gradus/dist.hpp"

int main(int argc, char** argv) {
  gradus::dist::Context ctx(argc, argv);
  const int failed = Catch::Session().run(argc, argv);
  int any_failed = 0, mine = failed != 0;
  MPI_Allreduce(&mine, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return any_failed ? 1 : 0;
}
