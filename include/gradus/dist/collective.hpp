// gradus/dist/collective.hpp — gd::dist::collective(): the gd::train::Collective of the live MPI
// job, so that fit and a Session train data-parallel over the ranks (train/ itself does not use MPI).
//   gd::dist::Context ctx(argc, argv);
//   gd::train::fit(net, opt, loss, train, {.batch_size = 64, .run_dir = "runs/mlp",
//                                          .collective = gd::dist::collective()});
// The gradients go through one blocking all-reduce per element type after backward (no overlap
// with backward: for that, drive your own loop with gd::dist::DistributedOptimizer).
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

inline void broadcast_bytes(std::string& bytes) {
  check_context("dist::collective: broadcast");
  long long n = (long long)bytes.size();
  check_mpi(MPI_Bcast(&n, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD), "MPI_Bcast");
  bytes.resize(size_t(n));
  for (long long off = 0; off < n;) {  // MPI counts are int
    const int c = int(std::min<long long>(n - off, 1LL << 30));
    check_mpi(MPI_Bcast(bytes.data() + off, c, MPI_BYTE, 0, MPI_COMM_WORLD), "MPI_Bcast");
    off += c;
  }
}

// The tensors of `ts` holding T, packed into one buffer, averaged over the ranks, unpacked into
// fresh tensors.
template <class T>
void average_packed(std::vector<train::AnyTensor>& ts) {
  int64_t total = 0;
  for (const auto& a : ts)
    if (const auto* t = std::get_if<Tensor<T>>(&a)) total += t->size();
  Tensor<T> buf = Tensor<T>::empty({total});
  int64_t off = 0;
  for (const auto& a : ts)
    if (const auto* t = std::get_if<Tensor<T>>(&a)) {
      std::memcpy(buf.data() + off, t->data(), size_t(t->size()) * sizeof(T));
      off += t->size();
    }
  all_reduce_mean(buf);  // checks that every rank packs as many elements
  off = 0;
  for (auto& a : ts)
    if (auto* t = std::get_if<Tensor<T>>(&a)) {
      Tensor<T> out = Tensor<T>::empty(t->shape());
      std::memcpy(out.data(), buf.data() + off, size_t(out.size()) * sizeof(T));
      off += out.size();
      *t = std::move(out);
    }
}

inline void average_tensors(std::vector<train::AnyTensor>& ts) {
  check_context("dist::collective: average");
  for (size_t i = 0; i < ts.size(); ++i)
    std::visit(
        [&](const auto& t) {
          using V = std::remove_cvref_t<decltype(t)>;
          GRADUS_CHECK(value_error, !(std::is_same_v<V, Tensor<int64_t>>),
                       "dist::collective: average: expected float or double tensors, got an int64 tensor at ", i);
          check_cpu_tensor(t, "dist::collective: average");
        },
        ts[i]);
  average_packed<float>(ts);
  average_packed<double>(ts);
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
  c.broadcast = [](std::string& bytes) { detail::broadcast_bytes(bytes); };
  c.average = [](std::vector<train::AnyTensor>& ts) { detail::average_tensors(ts); };
  return c;
}

}  // namespace gradus::dist
