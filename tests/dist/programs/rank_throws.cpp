// tests/dist/programs/rank_throws.cpp — rank 1 throws while rank 0 waits in a collective: the job
// must end with rank 1's message (ctest's PASS_REGULAR_EXPRESSION), not hang (its TIMEOUT).
#include <stdexcept>

#include "gradus/dist.hpp"

int main(int argc, char** argv) {
  auto ctx = gradus::dist::init(argc, argv);  // the Context: MPI init now, finalize at scope exit
  if (ctx.rank() == 1) throw std::runtime_error("rank 1 fails on purpose");
  auto t = gradus::Tensor<float>::ones({4});
  gradus::dist::all_reduce_sum(t);  // rank 0 would wait here forever
  return 0;
}
