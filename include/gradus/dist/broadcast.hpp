// gradus/dist/broadcast.hpp — making every rank start from rank 0's state: a module's parameters
// and buffers, an optimizer's state. Call both at start and after a restore (which may have
// happened on rank 0 only), before the first step.
#pragma once
#include "gradus/dist/mpi.hpp"
#include "gradus/optim/optimizer.hpp"

namespace gradus::dist {

/// Overwrites, in place, every parameter (named_parameters()) and buffer (named_buffers(): BatchNorm's
/// moving statistics) of `module` with rank `root`'s. Every rank must hold the same architecture:
/// the counts and sizes are checked (shape_error). A lazy layer (Dense without `.in`) has no
/// parameters before its first forward: run one first.
///   gd::dist::broadcast_parameters(net);
template <class M>
  requires requires(M& m) {
    m.named_parameters();
    m.named_buffers();
  }
void broadcast_parameters(M& module, int root = 0) {
  auto params = module.named_parameters();
  auto buffers = module.named_buffers();
  long long counts[2] = {(long long)params.size(), (long long)buffers.size()};
  long long root_counts[2] = {counts[0], counts[1]};
  detail::check_context("dist::broadcast_parameters");
  detail::check_mpi(MPI_Bcast(root_counts, 2, MPI_LONG_LONG, root, MPI_COMM_WORLD), "MPI_Bcast");
  int bad = counts[0] != root_counts[0] || counts[1] != root_counts[1], any_bad = 0;
  detail::check_mpi(MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce");
  GRADUS_CHECK(shape_error, !any_bad, "dist::broadcast_parameters: the ranks' modules differ: rank ", root, " has ",
               root_counts[0], " parameters and ", root_counts[1], " buffers, this rank ", counts[0], " and ", counts[1]);
  for (auto& [name, v] : params) {
    GRADUS_CHECK(value_error, v.value().defined(), "dist::broadcast_parameters: parameter '", name,
                 "' has no value yet (a lazy layer: run one forward first)");
    broadcast(v.value(), root);
  }
  for (auto& [name, t] : buffers) broadcast(t, root);
}

/// Makes `opt`'s state (its state_dict: the iteration count and every slot, e.g. Adam's m and v)
/// on every rank equal to rank `root`'s, through load_state_dict. All ranks must hold the same
/// kind of optimizer over parameters of the same shapes. The learning rate is not state.
///   gd::dist::broadcast_optimizer_state(opt);
template <Real T>
void broadcast_optimizer_state(optim::Optimizer<T>& opt, int root = 0) {
  optim::StateDict<T> state = opt.state_dict();
  for (auto& [name, t] : state) broadcast(t, root);
  opt.load_state_dict(state);
}

}  // namespace gradus::dist
