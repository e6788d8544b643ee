// gradus/dist/mpi.hpp — the MPI process group of a data-parallel job: gd::dist::Context (init and
// finalize), rank / size / local_rank, barrier, and the collectives on tensors that data-parallel
// training needs (all-reduce sum and mean, broadcast), for float and double.
//
// Launch with a stock mpirun; as root on one machine with more ranks than cores:
//   mpirun --allow-run-as-root --oversubscribe -np 2 ./train
// Every MPI call is checked: a failure throws gd::dist_error naming the call and carrying
// MPI_Error_string's message.
#pragma once
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <utility>

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
  throw dist_error(::gradus::detail::str(call, ": ", msg));
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
void check_cpu_tensor(const Tensor<T>& t, const char* who) {
  GRADUS_CHECK(value_error, t.defined(), who, ": the tensor is undefined");
  GRADUS_CHECK(device_error, t.in_host_memory(), who, ": expected a tensor on the cpu, got one on ", t.device());
}

/// The smallest and the largest of `n` over the ranks, in one all-reduce (of n and -n, by
/// minimum): what a collective checks before it reduces n elements on every rank.
inline std::pair<long long, long long> count_range(long long n) {
  long long v[2] = {n, -n}, r[2] = {0, 0};
  check_mpi(MPI_Allreduce(v, r, 2, MPI_LONG_LONG, MPI_MIN, MPI_COMM_WORLD), "MPI_Allreduce");
  return {r[0], -r[1]};
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
      throw dist_error(::gradus::detail::str("MPI_Init_thread: expected thread support MPI_THREAD_FUNNELED (",
                                             int(MPI_THREAD_FUNNELED), ") or better, got ", provided));
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

/// Replaces `t` (on the cpu, any shape) in place by the elementwise sum of `t` over all ranks;
/// every rank must pass a tensor of the same size (MPI reports a mismatch as an error or hangs,
/// so the size is checked first). Every rank ends with the same bits.
///   gd::Tensor<float> g = ...; gd::dist::all_reduce_sum(g);
template <class T>
void all_reduce_sum(Tensor<T>& t) {
  detail::check_context("dist::all_reduce_sum");
  detail::check_cpu_tensor(t, "dist::all_reduce_sum");
  const long long n = t.size();
  const auto [lo, hi] = detail::count_range(n);
  GRADUS_CHECK(shape_error, lo == hi, "dist::all_reduce_sum: ranks hold tensors of different sizes (from ", lo, " to ",
               hi, " elements); this rank has ", t.shape());
  if (t.use_count() > 1) t = t.clone();  // the result belongs to this handle only
  for (int64_t off = 0; off < n;) {       // MPI counts are int
    const int c = int(std::min<int64_t>(n - off, int64_t(1) << 30));
    detail::check_mpi(MPI_Allreduce(MPI_IN_PLACE, t.data() + off, c, detail::mpi_type<T>(), MPI_SUM, MPI_COMM_WORLD),
                      "MPI_Allreduce");
    off += c;
  }
}
/// As all_reduce_sum, then divides by size(): the mean over ranks.
template <class T>
void all_reduce_mean(Tensor<T>& t) {
  all_reduce_sum(t);
  const T inv = T(1) / T(size());
  T* p = t.data();
  for (int64_t i = 0; i < t.size(); ++i) p[i] *= inv;
}
/// Replaces `t` on every rank by rank `root`'s `t`. Shapes must agree (checked: shape_error).
///   gd::dist::broadcast(w, 0);
template <class T>
void broadcast(Tensor<T>& t, int root = 0) {
  detail::check_context("dist::broadcast");
  detail::check_cpu_tensor(t, "dist::broadcast");
  GRADUS_CHECK(value_error, root >= 0 && root < size(), "dist::broadcast: root must be in [0, ", size(), "), got ", root);
  long long n = t.size(), root_n = n;
  detail::check_mpi(MPI_Bcast(&root_n, 1, MPI_LONG_LONG, root, MPI_COMM_WORLD), "MPI_Bcast");
  int bad = root_n != n, any_bad = 0;
  detail::check_mpi(MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce");
  GRADUS_CHECK(shape_error, !any_bad, "dist::broadcast: the ranks' tensors differ in size: rank ", root, " has ", root_n,
               " elements, this rank ", n, " (", t.shape(), ")");
  for (int64_t off = 0; off < n;) {
    const int c = int(std::min<int64_t>(n - off, int64_t(1) << 30));
    detail::check_mpi(MPI_Bcast(t.data() + off, c, detail::mpi_type<T>(), root, MPI_COMM_WORLD), "MPI_Bcast");
    off += c;
  }
}

}  // namespace dist
}  // namespace gradus
