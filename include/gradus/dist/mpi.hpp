// gradus/dist/mpi.hpp — the MPI process group of a data-parallel job: gd::dist::Context (init and
// finalize), rank / size / local_rank, barrier, and the collectives on tensors that data-parallel
// training needs (all-reduce sum and mean, broadcast), for float and double.
//
// A tensor in a GPU's memory is reduced and broadcast there, through the device's collective
// library (NCCL for CUDA, backend/collective.hpp): MPI then only hands the group's id from rank 0
// to the others, when the first such tensor is reduced. One device per process: every rank's
// tensors are on one device of its own (gd::cuda(ctx.local_rank())).
//
// Launch with a stock mpirun; as root on one machine with more ranks than cores:
//   mpirun --allow-run-as-root --oversubscribe -np 2 ./train
// Every MPI call is checked: a failure throws gd::dist_error naming the call and carrying
// MPI_Error_string's message.
#pragma once
// MPI's C API only: without these, Open MPI's and MPICH's <mpi.h> bring the C++ bindings (MPI::,
// deprecated since MPI 2.2 and removed in MPI 3.0), 15 KB of code in every file that includes this
// header. A program that uses those bindings includes <mpi.h> before gradus.
#if !defined(OMPI_SKIP_MPICXX)
#define OMPI_SKIP_MPICXX 1
#endif
#if !defined(MPICH_SKIP_MPICXX)
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <utility>

#include "gradus/backend/collective.hpp"
#include "gradus/core/error.hpp"
#include "gradus/core/tensor.hpp"

namespace gradus {

/// A failed MPI call, or collectives used without a live gd::dist::Context:
/// `MPI_Allreduce: MPI_ERR_TRUNCATE: message truncated`.
struct dist_error : error {
  using error::error;
};

namespace dist {
namespace detail {

/// Throws dist_error "<call>: <MPI's message>" unless `rc` is MPI_SUCCESS.
inline void check_mpi(int rc, const char* call) {
  if (rc == MPI_SUCCESS) [[likely]]
    return;
  char msg[MPI_MAX_ERROR_STRING + 1] = {};
  int len = 0;
  if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) std::snprintf(msg, sizeof msg, "MPI error code %d", rc);
  ::gradus::detail::throw_error<dist_error>({call, ": ", msg});
}

/// The MPI datatype of T.
template <class T>
MPI_Datatype mpi_type() {
  if constexpr (std::is_same_v<T, float>)
    return MPI_FLOAT;
  else if constexpr (std::is_same_v<T, double>)
    return MPI_DOUBLE;
  else if constexpr (std::is_same_v<T, int64_t>)
    return MPI_INT64_T;
  else
    static_assert(sizeof(T) == 0, "GRADUS_DIST_SUPPORTS_FLOAT_DOUBLE_AND_INT64_TENSORS_ONLY");
}

inline bool& context_alive() {
  static bool alive = false;
  return alive;
}

/// The rank of this process in MPI_COMM_WORLD, or -1 when MPI is not initialised.
inline int world_rank_or_minus_one() {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  if (!init || fin) return -1;
  int r = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

/// Ends the whole job: prints "gradus::dist: rank R: <what>" to stderr, then MPI_Abort.
[[noreturn]] inline void abort_job(const std::string& what, int code = 1) {
  std::fprintf(stderr, "gradus::dist: rank %d: %s\n", world_rank_or_minus_one(), what.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, code);
  std::abort();
}

/// The terminate handler a Context installs: an exception that escapes main (which, with no
/// handler, ends the program without unwinding the stack) aborts the job with its message.
inline void terminate_with_abort() {
  std::string what = "std::terminate called";
  if (std::exception_ptr e = std::current_exception()) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      what = std::string("uncaught exception: ") + x.what();
    } catch (...) {
      what = "uncaught exception of unknown type";
    }
  }
  abort_job(what);
}

inline void check_context(const char* who) {
  GRADUS_CHECK(dist_error, context_alive(), who, ": no gd::dist::Context is alive (create one at the start of main)");
}

template <class T>
void check_defined(const Tensor<T>& t, const char* who) {
  GRADUS_CHECK(value_error, t.defined(), who, ": the tensor is undefined");
}

/// The smallest and the largest of `n` over the ranks, in one all-reduce (of n and -n, by
/// minimum): what a collective checks before it reduces n elements on every rank.
inline std::pair<long long, long long> count_range(long long n) {
  long long v[2] = {n, -n}, r[2] = {0, 0};
  check_mpi(MPI_Allreduce(v, r, 2, MPI_LONG_LONG, MPI_MIN, MPI_COMM_WORLD), "MPI_Allreduce");
  return {r[0], -r[1]};
}

/// What every rank checks before a collective on a tensor: that all ranks hold as many elements,
/// and all of them in host memory or all in a device's (one all-reduce). Throws on every rank.
inline void agree(long long n, bool on_device, const char* who, const Shape& shape, Device device) {
  const long long d = on_device ? 1 : 0;
  long long v[4] = {n, -n, d, -d}, r[4] = {0, 0, 0, 0};
  check_mpi(MPI_Allreduce(v, r, 4, MPI_LONG_LONG, MPI_MIN, MPI_COMM_WORLD), "MPI_Allreduce");
  GRADUS_CHECK(shape_error, r[0] == -r[1], who, ": the ranks hold tensors of different sizes (from ", r[0], " to ",
               -r[1], " elements); this rank has ", shape);
  GRADUS_CHECK(device_error, r[2] == -r[3], who,
               ": some ranks hold the tensor in host memory and others on a device; this rank has it on ", device);
}

/// Replaces `bytes` on every rank by rank 0's (its size first, then the bytes in int-sized pieces).
inline void broadcast_bytes(std::string& bytes) {
  long long n = (long long)bytes.size();
  check_mpi(MPI_Bcast(&n, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD), "MPI_Bcast");
  bytes.resize(size_t(n));
  for (long long off = 0; off < n;) {  // MPI counts are int
    const int c = int(std::min<long long>(n - off, 1LL << 30));
    check_mpi(MPI_Bcast(bytes.data() + off, c, MPI_BYTE, 0, MPI_COMM_WORLD), "MPI_Bcast");
    off += c;
  }
}

/// This process's group on its device (the device's collective library), made when the first
/// tensor on a device is reduced: every rank makes it at the same point, rank 0's id reaching the
/// others through MPI.
struct DeviceGroup {
  Device device = cpu;
  void* handle = nullptr;
  backend::CollectiveHooks hooks;
};
inline DeviceGroup& device_group() {
  static DeviceGroup g;
  return g;
}

/// The group for tensors on `device`, joined on first use (a collective call: every rank makes it).
inline DeviceGroup& device_group_for(Device device, const char* who) {
  DeviceGroup& g = device_group();
  if (g.handle) {
    GRADUS_CHECK(device_error, g.device == device, who, ": this process's collectives run on ", g.device,
                 "; the tensor is on ", device, " (one device per process: move it there with .to(", g.device, "))");
    return g;
  }
  const backend::CollectiveHooks h = backend::collective_hooks(device.type);
  std::string problem = h.join ? h.problem() : ::gradus::detail::str("the ", device_type_name(device.type),
                                                                     " backend has no collective library");
  std::string id;
  if (problem.empty() && world_rank_or_minus_one() == 0) {
    try {
      id = h.new_id(device);
    } catch (const std::exception& e) {
      problem = e.what();
    }
  }
  int bad = !problem.empty(), any_bad = 0;
  check_mpi(MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce");
  GRADUS_CHECK(device_error, !bad, who, ": tensors on ", device, ": ", problem);
  GRADUS_CHECK(device_error, !any_bad, who, ": another rank cannot use the collectives of its device");
  broadcast_bytes(id);
  int ranks = 1, me = 0;
  check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &ranks), "MPI_Comm_size");
  check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &me), "MPI_Comm_rank");
  g.handle = h.join(device, id, ranks, me);
  g.device = device;
  g.hooks = h;
  return g;
}

/// Leaves the device group, if any (the Context's destructor, before MPI_Finalize).
inline void leave_device_group() noexcept {
  DeviceGroup& g = device_group();
  if (!g.handle) return;
  try {
    g.hooks.leave(g.handle);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gradus::dist: rank %d: leaving the device group: %s\n", world_rank_or_minus_one(), e.what());
  }
  g = DeviceGroup{};
}

/// Reduces `t` in place over the ranks, once they have agreed on its size and place: MPI for host
/// memory (a mean is the sum times 1/size()), the device's library for device memory.
template <class T>
void reduce_in_place(Tensor<T>& t, backend::Reduce op, const char* who) {
  const int64_t n = t.size();
  if (n == 0) return;
  if (!t.in_host_memory()) {
    DeviceGroup& g = device_group_for(t.device(), who);
    g.hooks.all_reduce(g.handle, t.device_data(), n, backend::scalar_of<T>(), op, t.device());
    return;
  }
  for (int64_t off = 0; off < n;) {  // MPI counts are int
    const int c = int(std::min<int64_t>(n - off, int64_t(1) << 30));
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, t.data() + off, c, mpi_type<T>(), MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
    off += c;
  }
  if (op == backend::Reduce::mean) {
    int ranks = 1;
    check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &ranks), "MPI_Comm_size");
    const T inv = T(1) / T(ranks);
    T* p = t.data();
    for (int64_t i = 0; i < n; ++i) p[i] *= inv;
  }
}

}  // namespace detail

/// The MPI environment of this process, RAII: the constructor initialises MPI (MPI_Init_thread,
/// MPI_THREAD_FUNNELED: only the thread that made the Context calls gd::dist), sets MPI_ERRORS_RETURN
/// on MPI_COMM_WORLD so every failure becomes a gd::dist_error, and finds this process's rank
/// among all processes and among those on its machine; the destructor finalises MPI.
/// One Context per process, alive while gd::dist is used.
///
/// A rank that fails must not leave the others waiting forever in a collective, so:
/// - an exception that escapes main ends the job: the Context installs a terminate handler that
///   prints "gradus::dist: rank R: uncaught exception: <what()>" to stderr and calls MPI_Abort,
///   and mpirun then stops every rank;
/// - a Context destroyed while an exception propagates (std::uncaught_exceptions() > 0, e.g. an
///   exception caught outside the Context's scope) prints "gradus::dist: rank R: an exception is
///   propagating; aborting the job" and calls MPI_Abort too. To have the exception's message
///   printed in that case, catch it inside and call `ctx.abort(e.what())`, or use dist::guard_main.
///   int main(int argc, char** argv) {
///     gd::dist::Context ctx(argc, argv);
///     if (ctx.rank() == 0) std::printf("%d ranks\n", ctx.size());
///   }
class Context {
 public:
  Context(int& argc, char**& argv) { init(&argc, &argv); }
  Context() { init(nullptr, nullptr); }
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  ~Context() {
    if (std::uncaught_exceptions() > uncaught_at_start_) detail::abort_job("an exception is propagating; aborting the job");
    std::set_terminate(previous_terminate_);
    detail::context_alive() = false;
    detail::leave_device_group();
    if (local_ != MPI_COMM_NULL) MPI_Comm_free(&local_);
    MPI_Finalize();
  }

  /// This process's rank in [0, size()); rank 0 is the chief.
  int rank() const { return rank_; }
  /// The number of processes in the job.
  int size() const { return size_; }
  /// This process's rank among the processes on its machine (MPI_Comm_split_type shared).
  int local_rank() const { return local_rank_; }
  /// The number of processes on this process's machine.
  int local_size() const { return local_size_; }
  /// Whether this is rank 0, the process that writes checkpoints and summaries.
  bool is_chief() const { return rank_ == 0; }
  /// Waits until every rank has reached the barrier.
  void barrier() const { detail::check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }
  /// Ends the whole job now: prints "gradus::dist: rank R: <what>" to stderr, then MPI_Abort(code).
  [[noreturn]] void abort(const std::string& what, int code = 1) const { detail::abort_job(what, code); }

 private:
  void init(int* argc, char*** argv) {
    GRADUS_CHECK(dist_error, !detail::context_alive(), "dist::Context: a Context is already alive in this process");
    int init = 0;
    detail::check_mpi(MPI_Initialized(&init), "MPI_Initialized");
    GRADUS_CHECK(dist_error, !init, "dist::Context: MPI is already initialised (by someone else)");
    int provided = 0;
    detail::check_mpi(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
    if (provided < MPI_THREAD_FUNNELED) {
      MPI_Finalize();
      ::gradus::detail::throw_error<dist_error>({"MPI_Init_thread: expected thread support MPI_THREAD_FUNNELED (",
                                                 int(MPI_THREAD_FUNNELED), ") or better, got ", provided});
    }
    try {
      detail::check_mpi(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
      detail::check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &rank_), "MPI_Comm_rank");
      detail::check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &size_), "MPI_Comm_size");
      detail::check_mpi(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local_),
                        "MPI_Comm_split_type");
      detail::check_mpi(MPI_Comm_set_errhandler(local_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
      detail::check_mpi(MPI_Comm_rank(local_, &local_rank_), "MPI_Comm_rank");
      detail::check_mpi(MPI_Comm_size(local_, &local_size_), "MPI_Comm_size");
    } catch (...) {
      if (local_ != MPI_COMM_NULL) MPI_Comm_free(&local_);
      MPI_Finalize();
      throw;
    }
    uncaught_at_start_ = std::uncaught_exceptions();
    previous_terminate_ = std::set_terminate(detail::terminate_with_abort);
    detail::context_alive() = true;
  }

  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  int uncaught_at_start_ = 0;
  MPI_Comm local_ = MPI_COMM_NULL;
  std::terminate_handler previous_terminate_ = nullptr;
};

/// Starts MPI for this process (`gd::dist::init`, docs/distributed.md): the Context it returns finalises it
/// when it goes out of scope. The same as constructing the Context.
///   int main(int argc, char** argv) { auto ctx = gd::dist::init(argc, argv); ... }
[[nodiscard]] inline Context init(int& argc, char**& argv) { return Context(argc, argv); }

/// Runs `body` and ends the whole job when it throws: prints "gradus::dist: rank R: error: <what()>"
/// and calls MPI_Abort(1), so the other ranks do not wait for this one. Returns body's status.
///   gd::dist::Context ctx(argc, argv);
///   return gd::dist::guard_main(ctx, [&] { train(); return 0; });
template <class F>
int guard_main(const Context& ctx, F&& body) {
  try {
    if constexpr (std::is_void_v<std::invoke_result_t<F&>>) {
      body();
      return 0;
    } else {
      return int(body());
    }
  } catch (const std::exception& e) {
    ctx.abort(std::string("error: ") + e.what());
  }
}

/// The rank of this process (0 without a live Context).
inline int rank() {
  if (!detail::context_alive()) return 0;
  int r = 0;
  detail::check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &r), "MPI_Comm_rank");
  return r;
}
/// The number of processes (1 without a live Context).
inline int size() {
  if (!detail::context_alive()) return 1;
  int s = 1;
  detail::check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &s), "MPI_Comm_size");
  return s;
}
/// Waits for every rank. dist_error without a live Context.
inline void barrier() {
  detail::check_context("dist::barrier");
  detail::check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
}

/// Replaces `t` (any shape) in place by the elementwise sum of `t` over all ranks; every rank must
/// pass a tensor of the same size, all in host memory or all on a device (MPI would report a
/// mismatch as an error or hang, so both are checked first). Every rank ends with the same bits.
/// A tensor on a GPU is reduced there (NCCL).
///   gd::Tensor<float> g = ...; gd::dist::all_reduce_sum(g);
template <class T>
void all_reduce_sum(Tensor<T>& t) {
  detail::check_context("dist::all_reduce_sum");
  detail::check_defined(t, "dist::all_reduce_sum");
  detail::agree(t.size(), !t.in_host_memory(), "dist::all_reduce_sum", t.shape(), t.device());
  if (t.use_count() > 1) t = t.clone();  // the result belongs to this handle only
  detail::reduce_in_place(t, backend::Reduce::sum, "dist::all_reduce_sum");
}
/// As all_reduce_sum, divided by size(): the mean over ranks.
template <class T>
void all_reduce_mean(Tensor<T>& t) {
  detail::check_context("dist::all_reduce_mean");
  detail::check_defined(t, "dist::all_reduce_mean");
  detail::agree(t.size(), !t.in_host_memory(), "dist::all_reduce_mean", t.shape(), t.device());
  if (t.use_count() > 1) t = t.clone();
  detail::reduce_in_place(t, backend::Reduce::mean, "dist::all_reduce_mean");
}
/// Replaces `t` on every rank by rank `root`'s `t`. Sizes must agree (checked: shape_error), and
/// all ranks' tensors be in host memory or all on a device (device_error).
///   gd::dist::broadcast(w, 0);
template <class T>
void broadcast(Tensor<T>& t, int root = 0) {
  detail::check_context("dist::broadcast");
  detail::check_defined(t, "dist::broadcast");
  GRADUS_CHECK(value_error, root >= 0 && root < size(), "dist::broadcast: root must be in [0, ", size(), "), got ", root);
  long long n = t.size(), root_n = n;
  detail::check_mpi(MPI_Bcast(&root_n, 1, MPI_LONG_LONG, root, MPI_COMM_WORLD), "MPI_Bcast");
  const bool on_device = !t.in_host_memory();
  int mine[3] = {root_n != n, on_device, !on_device}, any[3] = {0, 0, 0};
  detail::check_mpi(MPI_Allreduce(mine, any, 3, MPI_INT, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce");
  GRADUS_CHECK(shape_error, !any[0], "dist::broadcast: the ranks' tensors differ in size: rank ", root, " has ", root_n,
               " elements, this rank ", n, " (", t.shape(), ")");
  GRADUS_CHECK(device_error, !(any[1] && any[2]),
               "dist::broadcast: some ranks hold the tensor in host memory and others on a device; this rank has it on ",
               t.device());
  if (n == 0) return;
  if (on_device) {
    detail::DeviceGroup& g = detail::device_group_for(t.device(), "dist::broadcast");
    g.hooks.broadcast(g.handle, t.device_data(), n, backend::scalar_of<T>(), root, t.device());
    return;
  }
  for (int64_t off = 0; off < n;) {
    const int c = int(std::min<int64_t>(n - off, int64_t(1) << 30));
    detail::check_mpi(MPI_Bcast(t.data() + off, c, detail::mpi_type<T>(), root, MPI_COMM_WORLD), "MPI_Bcast");
    off += c;
  }
}

}  // namespace dist
}  // namespace gradus
