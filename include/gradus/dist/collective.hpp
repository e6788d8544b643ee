// gradus/dist/collective.hpp — gd::dist::collective(): the gd::train::Collective of the live MPI
// job, so that fit and a Session train data-parallel over the ranks (train/ itself does not use MPI).
//   gd::dist::Context ctx(argc, argv);
//   gd::train::fit(net, opt, loss, train, {.batch_size = 64, .run_dir = "runs/mlp",
//                                          .collective = gd::dist::collective()});
// The gradients go through one blocking all-reduce per element type after backward (no overlap
// with backward: for that, drive your own loop with gd::dist::DistributedOptimizer); a model on a
// GPU has its gradients averaged there, through NCCL.
#pragma once
#include <cstring>
#include <string>
#include <variant>
#include <vector>

#include "gradus/dist/mpi.hpp"
#include "gradus/train/session.hpp"

namespace gradus::dist {

namespace detail {

inline void all_reduce_doubles(std::vector<double>& v, MPI_Op op, const char* who) {
  check_context(who);
  const long long n = (long long)v.size();
  const auto [lo, hi] = count_range(n);
  GRADUS_CHECK(shape_error, lo == hi, who, ": the ranks reduce vectors of different sizes (from ", lo, " to ", hi,
               "); this rank has ", n);
  if (n > 0) check_mpi(MPI_Allreduce(MPI_IN_PLACE, v.data(), int(n), MPI_DOUBLE, op, MPI_COMM_WORLD), "MPI_Allreduce");
}

// Copies `bytes` between two buffers, each in host memory or in `device`'s.
inline void copy_between(void* dst, bool dst_host, const void* src, bool src_host, Device device, size_t bytes) {
  if (bytes == 0) return;
  if (dst_host && src_host)
    std::memcpy(dst, src, bytes);
  else
    ::gradus::detail::device_copy(dst, dst_host ? cpu : device, src, src_host ? cpu : device, bytes);
}

// The tensors of `ts` holding T and in host memory (on_device false) or on `device` (true),
// packed into one buffer there, averaged over the ranks, unpacked into fresh tensors. The ranks
// have agreed on the buffer's size.
template <class T>
void average_packed(std::vector<train::AnyTensor>& ts, bool on_device, Device device, int64_t total) {
  const auto mine = [&](const train::AnyTensor& a) -> const Tensor<T>* {
    const auto* t = std::get_if<Tensor<T>>(&a);
    return t && t->in_host_memory() != on_device ? t : nullptr;
  };
  Tensor<T> buf = Tensor<T>::empty({total}, on_device ? device : cpu);
  int64_t off = 0;
  for (const auto& a : ts)
    if (const Tensor<T>* t = mine(a)) {
      copy_between(buf.device_data() + off, !on_device, t->device_data(), !on_device, device,
                   size_t(t->size()) * sizeof(T));
      off += t->size();
    }
  reduce_in_place(buf, backend::Reduce::mean, "dist::collective: average");
  off = 0;
  for (auto& a : ts)
    if (const Tensor<T>* t = mine(a)) {
      Tensor<T> out = Tensor<T>::empty(t->shape(), on_device ? device : cpu);
      copy_between(out.device_data(), !on_device, buf.device_data() + off, !on_device, device,
                   size_t(out.size()) * sizeof(T));
      off += out.size();
      a = std::move(out);
    }
}

// Averages every tensor of `ts` over the ranks: those in host memory through MPI, those on this
// process's device through its collective library, float and double each in one buffer.
inline void average_tensors(std::vector<train::AnyTensor>& ts) {
  check_context("dist::collective: average");
  // host float, host double, device float, device double
  long long counts[4] = {0, 0, 0, 0};
  Device device = cpu;
  for (size_t i = 0; i < ts.size(); ++i)
    std::visit(
        [&](const auto& t) {
          using V = std::remove_cvref_t<decltype(t)>;
          GRADUS_CHECK(value_error, !(std::is_same_v<V, Tensor<int64_t>>),
                       "dist::collective: average: expected float or double tensors, got an int64 tensor at ", i);
          check_defined(t, "dist::collective: average");
          const bool on_device = !t.in_host_memory();
          if (on_device) {
            GRADUS_CHECK(device_error, device == cpu || device == t.device(),
                         "dist::collective: average: the tensors are on two devices, ", device, " and ", t.device(),
                         " (one device per process)");
            device = t.device();
          }
          counts[(on_device ? 2 : 0) + (std::is_same_v<V, Tensor<double>> ? 1 : 0)] += t.size();
        },
        ts[i]);
  long long v[8], r[8];
  for (int k = 0; k < 4; ++k) v[k] = counts[k], v[k + 4] = -counts[k];
  check_mpi(MPI_Allreduce(v, r, 8, MPI_LONG_LONG, MPI_MIN, MPI_COMM_WORLD), "MPI_Allreduce");
  static const char* const kinds[4] = {"float in host memory", "double in host memory", "float on a device",
                                       "double on a device"};
  for (int k = 0; k < 4; ++k)
    GRADUS_CHECK(shape_error, r[k] == -r[k + 4], "dist::collective: average: the ranks hold different numbers of ",
                 kinds[k], " elements (from ", r[k], " to ", -r[k + 4], "); this rank has ", counts[k]);
  if (counts[0] > 0) average_packed<float>(ts, false, cpu, counts[0]);
  if (counts[1] > 0) average_packed<double>(ts, false, cpu, counts[1]);
  if (counts[2] > 0) average_packed<float>(ts, true, device, counts[2]);
  if (counts[3] > 0) average_packed<double>(ts, true, device, counts[3]);
}

}  // namespace detail

/// The gd::train::Collective of this MPI job (rank, size, sum and max of doubles, broadcast from
/// rank 0, mean of gradients), for FitOptions::collective, DatasetFitOptions::collective and
/// SessionOptions::collective. dist_error without a live Context.
///   gd::dist::Context ctx(argc, argv);
///   gd::train::Session session(net, opt, {.run_dir = "runs/lm", .collective = gd::dist::collective()});
inline train::Collective collective() {
  detail::check_context("dist::collective");
  train::Collective c;
  c.rank = rank();
  c.size = size();
  c.sum = [](std::vector<double>& v) { detail::all_reduce_doubles(v, MPI_SUM, "dist::collective: sum"); };
  c.max = [](std::vector<double>& v) { detail::all_reduce_doubles(v, MPI_MAX, "dist::collective: max"); };
  c.broadcast = [](std::string& bytes) {
    detail::check_context("dist::collective: broadcast");
    detail::broadcast_bytes(bytes);
  };
  c.average = [](std::vector<train::AnyTensor>& ts) { detail::average_tensors(ts); };
  return c;
}

}  // namespace gradus::dist
