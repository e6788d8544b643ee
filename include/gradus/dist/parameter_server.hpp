// gradus/dist/parameter_server.hpp — asynchronous data-parallel training with parameter servers
// (TensorFlow's ps / worker jobs): ranks [0, num_servers) own the parameters, sharded round-robin
// (parameter i lives on server i % num_servers), and apply each worker's gradients with a gd::optim
// optimizer as they arrive; the other ranks are workers (gd::dist::AsyncOptimizer,
// dist/async_optimizer.hpp), which push the gradients of their own batches and get the fresh
// parameters back, without waiting for each other.
//
// The protocol, on a duplicate of MPI_COMM_WORLD (so that its messages never meet the program's):
// - start (every rank, collectively): the ranks agree on the options, on who serves, and on the
//   parameters' element type, count and shapes — a mismatch throws on every rank — and every rank
//   takes rank 0's initial values;
// - push (worker → each server): a header (its push count, the version of the shard it computed
//   from, which parameters have a gradient) and the gradients of that server's shard;
// - reply (server → worker): the shard's values and version (the number of updates applied) after
//   the push, sent at once, or held back while the worker is too far ahead (max_staleness);
// - done (worker → each server): the worker's last push has been answered;
// - end (every rank, collectively): once every worker is done, each server broadcasts its shard,
//   so that every rank, servers and workers, ends with the final model.
// Servers answer every push with non-blocking sends and workers post their receives before they
// push, so no rank waits on another's send (two servers and two workers cannot deadlock).
#pragma once
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "gradus/dist/mpi.hpp"
#include "gradus/optim/optimizer.hpp"

namespace gradus::dist {

/// Options of a parameter-server job; every rank passes the same (checked at the start).
struct AsyncOptions {
  /// Ranks [0, num_servers) serve the parameters, the others are workers: at least 1, at most
  /// size() - 1 (a job needs a worker).
  int num_servers = 1;
  /// The bound on staleness, in pushes (the stale-synchronous-parallel rule): a worker that has
  /// pushed c times gets the parameters for its next gradient only once every worker still at
  /// work has pushed at least c - max_staleness times; until then its reply is held (it waits).
  /// So a gradient is always computed from parameters that hold every update of every worker's
  /// first c - max_staleness pushes. 0: rounds — every gradient of round c is computed from the
  /// parameters after all of round c - 1, and the round's gradients are applied one after
  /// another (with plain SGD: one synchronous step on their sum). < 0: no bound.
  int max_staleness = -1;
};

/// What one server did during run_parameter_server.
struct ServerStats {
  int64_t pushes = 0;   ///< pushes received (one per worker step)
  int64_t updates = 0;  ///< optimizer steps taken: pushes with a gradient for a parameter of this server
  int64_t held = 0;     ///< replies held back by max_staleness (the worker waited)
  /// The staleness of the updates, in versions: how many updates this server applied between
  /// the reply a worker computed its gradient from and the gradient's own update (the most, and
  /// the mean over updates). With W workers and max_staleness s >= 0 the most is (W-1)(2s+1).
  int64_t max_lag = 0;
  double mean_lag = 0;
  std::vector<int64_t> pushes_by_worker;  ///< pushes from worker k (rank num_servers + k)
};

/// Whether this rank serves parameters in a job with these options (rank() < num_servers).
///   if (gd::dist::is_parameter_server(ps)) gd::dist::run_parameter_server(adam, ps); else ...
inline bool is_parameter_server(const AsyncOptions& options = {}) { return rank() < options.num_servers; }

/// The server that owns parameter `i` (in the optimizer's order) among `num_servers`.
inline int parameter_owner(size_t i, int num_servers) {
  GRADUS_CHECK(value_error, num_servers >= 1, "dist::parameter_owner: num_servers must be >= 1, got ", num_servers);
  return int(i % size_t(num_servers));
}

namespace detail {

// The job's messages, by tag on its own communicator.
inline constexpr int kPsPush = 1;        // worker → server: header (a push or done)
inline constexpr int kPsGradients = 2;   // worker → server: the gradients of the server's shard
inline constexpr int kPsVersion = 3;     // server → worker: the shard's version
inline constexpr int kPsParameters = 4;  // server → worker: the shard's values
inline constexpr int64_t kPsPushKind = 1, kPsDoneKind = 2;
// A push header: kind, the worker's push count, the shard version it computed from, then one
// flag per parameter of the shard (1: it has a gradient).
inline constexpr size_t kPsHeaderFixed = 3;
inline constexpr int64_t kPsChunk = int64_t(1) << 30;  // MPI counts are int

template <class T>
void ps_isend(const T* p, int64_t n, int dest, int tag, MPI_Comm comm, std::vector<MPI_Request>& reqs) {
  for (int64_t off = 0; off < n; off += kPsChunk) {
    reqs.push_back(MPI_REQUEST_NULL);
    check_mpi(MPI_Isend(p + off, int(std::min(n - off, kPsChunk)), mpi_type<T>(), dest, tag, comm, &reqs.back()),
              "MPI_Isend");
  }
}
template <class T>
void ps_irecv(T* p, int64_t n, int source, int tag, MPI_Comm comm, std::vector<MPI_Request>& reqs) {
  for (int64_t off = 0; off < n; off += kPsChunk) {
    reqs.push_back(MPI_REQUEST_NULL);
    check_mpi(MPI_Irecv(p + off, int(std::min(n - off, kPsChunk)), mpi_type<T>(), source, tag, comm, &reqs.back()),
              "MPI_Irecv");
  }
}
template <class T>
void ps_recv(T* p, int64_t n, int source, int tag, MPI_Comm comm) {
  for (int64_t off = 0; off < n; off += kPsChunk)
    check_mpi(MPI_Recv(p + off, int(std::min(n - off, kPsChunk)), mpi_type<T>(), source, tag, comm, MPI_STATUS_IGNORE),
              "MPI_Recv");
}
template <class T>
void ps_bcast(T* p, int64_t n, int root, MPI_Comm comm) {
  for (int64_t off = 0; off < n; off += kPsChunk)
    check_mpi(MPI_Bcast(p + off, int(std::min(n - off, kPsChunk)), mpi_type<T>(), root, comm), "MPI_Bcast");
}
inline void ps_wait_all(std::vector<MPI_Request>& reqs) {
  if (reqs.empty()) return;
  const int rc = MPI_Waitall(int(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE);
  reqs.clear();
  check_mpi(rc, "MPI_Waitall");
}

/// The job's own communicator, freed with its owner (also when the start throws).
struct PsComm {
  MPI_Comm comm = MPI_COMM_NULL;
  explicit PsComm(const char* who) {
    check_context(who);
    check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &comm), "MPI_Comm_dup");
    check_mpi(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  }
  PsComm(const PsComm&) = delete;
  PsComm& operator=(const PsComm&) = delete;
  ~PsComm() {
    if (comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
  }
};

inline const char* element_name(int64_t bytes) { return bytes == 4 ? "float" : bytes == 8 ? "double" : "other"; }

/// A parameter-server job as every rank sees it: its communicator, who serves, and which server
/// owns which parameters. Made by every rank of MPI_COMM_WORLD at the same point (the servers in
/// run_parameter_server, the workers in AsyncOptimizer's constructor): every check that could
/// fail on some ranks only is agreed on first, so that all ranks throw together.
template <Real T>
class PsJob {
 public:
  PsJob(const std::vector<Var<T>>& params, const AsyncOptions& o, bool as_server, const char* who) : comm_(who) {
    check_mpi(MPI_Comm_rank(comm_.comm, &rank_), "MPI_Comm_rank");
    check_mpi(MPI_Comm_size(comm_.comm, &size_), "MPI_Comm_size");
    agree_on_roles(params, o, as_server, who);
    agree_on_shapes(params, who);
    num_servers_ = o.num_servers;
    max_staleness_ = o.max_staleness;
    owned_.resize(size_t(num_servers_));
    shard_size_.assign(size_t(num_servers_), 0);
    for (size_t i = 0; i < params.size(); ++i) {
      const size_t s = size_t(parameter_owner(i, num_servers_));
      owned_[s].push_back(i);
      shard_size_[s] += params[i].size();
      shapes_.push_back(params[i].shape());
    }
    for (Var<T> p : params) ps_bcast(p.value().data(), p.size(), 0, comm_.comm);  // rank 0's initial values
  }

  MPI_Comm comm() const { return comm_.comm; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  int num_servers() const { return num_servers_; }
  int num_workers() const { return size_ - num_servers_; }
  int max_staleness() const { return max_staleness_; }
  /// The parameters server `s` owns (indices, ascending) and their element count.
  const std::vector<size_t>& owned(int s) const { return owned_[size_t(s)]; }
  int64_t shard_size(int s) const { return shard_size_[size_t(s)]; }
  const Shape& shape(size_t i) const { return shapes_[i]; }
  /// The length of a push header to server `s`.
  size_t header_size(int s) const { return kPsHeaderFixed + owned_[size_t(s)].size(); }

  /// The end, on every rank once every worker is done: each parameter is overwritten by its
  /// owner's value, so every rank holds the final model.
  void broadcast_final(const std::vector<Var<T>>& params) {
    for (size_t i = 0; i < params.size(); ++i) {
      Var<T> p = params[i];  // a handle: its value is written in place
      ps_bcast(p.value().data(), p.size(), parameter_owner(i, num_servers_), comm_.comm);
    }
  }

 private:
  // Options, roles and this rank's own parameters, agreed on in one all-reduce.
  void agree_on_roles(const std::vector<Var<T>>& params, const AsyncOptions& o, bool as_server, const char* who) {
    std::string problem;  // what is wrong with this rank's parameters
    bool on_device = false;
    for (size_t i = 0; i < params.size() && problem.empty(); ++i) {
      if (!params[i].value().defined())
        problem = ::gradus::detail::str(who, ": parameter ", i, " has no value yet (a lazy layer: run one forward first)");
      else if (!params[i].value().in_host_memory()) {
        on_device = true;
        problem = ::gradus::detail::str(who, ": parameter ", i, " is on ", params[i].value().device(),
                                        "; the parameter-server job trains in host memory (move the model with .to(gd::cpu))");
      }
    }
    const bool role_bad = as_server != (rank_ < o.num_servers);
    long long v[6] = {o.num_servers, -(long long)o.num_servers, o.max_staleness, -(long long)o.max_staleness,
                      role_bad ? rank_ : size_, problem.empty() ? size_ : rank_};
    long long r[6] = {};
    check_mpi(MPI_Allreduce(v, r, 6, MPI_LONG_LONG, MPI_MIN, comm_.comm), "MPI_Allreduce");
    GRADUS_CHECK(value_error, r[0] == -r[1] && r[2] == -r[3], who,
                 ": the ranks pass different AsyncOptions (num_servers from ", r[0], " to ", -r[1],
                 ", max_staleness from ", r[2], " to ", -r[3], "); every rank must pass the same");
    GRADUS_CHECK(value_error, size_ >= 2, who, ": a parameter-server job needs a server and a worker: launch at least ",
                 "2 ranks (this job has 1)");
    GRADUS_CHECK(value_error, o.num_servers >= 1 && o.num_servers < size_, who, ": num_servers must be in [1, ", size_ - 1,
                 "] (a job of ", size_, " ranks needs a server and a worker), got ", o.num_servers);
    if (r[4] < size_) {
      GRADUS_CHECK(value_error, !role_bad, who, ": rank ", rank_, " is a ", as_server ? "worker" : "server",
                   " of this job (ranks [0, ", o.num_servers, ") serve the parameters): ",
                   as_server ? "make a gd::dist::AsyncOptimizer there" : "call gd::dist::run_parameter_server there");
      ::gradus::detail::throw_error<value_error>(
          {who, ": rank ", r[4], " took the wrong role (ranks [0, ", o.num_servers,
           ") call run_parameter_server, the others make an AsyncOptimizer)"});
    }
    if (r[5] < size_) {
      if (!problem.empty()) {
        if (on_device) throw device_error(problem);
        throw value_error(problem);
      }
      ::gradus::detail::throw_error<value_error>(
          {who, ": rank ", r[5], " cannot take part: its parameters are not ready (see its error)"});
    }
  }

  // The element type, count and shapes of rank 0's parameters against this rank's.
  void agree_on_shapes(const std::vector<Var<T>>& params, const char* who) {
    std::vector<int64_t> sig = {int64_t(sizeof(T)), int64_t(params.size())};
    for (const auto& p : params) {
      sig.push_back(p.rank());
      for (int64_t d : p.shape()) sig.push_back(d);
    }
    int64_t n = int64_t(sig.size());
    check_mpi(MPI_Bcast(&n, 1, MPI_INT64_T, 0, comm_.comm), "MPI_Bcast");
    std::vector<int64_t> root(size_t(n), 0);
    if (rank_ == 0) root = sig;
    ps_bcast(root.data(), n, 0, comm_.comm);
    std::string diff;
    if (root[0] != sig[0]) {
      diff = ::gradus::detail::str("rank 0's parameters are ", element_name(root[0]), ", this rank's (", rank_, ") ",
                                   element_name(sig[0]));
    } else if (root[1] != sig[1]) {
      diff = ::gradus::detail::str("rank 0 has ", root[1], " parameters, this rank (", rank_, ") ", sig[1]);
    } else {
      size_t at = 2;
      for (size_t i = 0; i < params.size() && diff.empty(); ++i) {
        const Shape mine = params[i].shape();
        std::vector<int64_t> dims(root.begin() + ptrdiff_t(at) + 1, root.begin() + ptrdiff_t(at) + 1 + root[at]);
        at += size_t(1 + root[at]);
        const Shape theirs(dims);
        if (!(theirs == mine))
          diff = ::gradus::detail::str("parameter ", i, " has shape ", theirs, " on rank 0 and ", mine, " on this rank (",
                                       rank_, ")");
      }
    }
    long long bad = diff.empty() ? size_ : rank_, first = 0;
    check_mpi(MPI_Allreduce(&bad, &first, 1, MPI_LONG_LONG, MPI_MIN, comm_.comm), "MPI_Allreduce");
    GRADUS_CHECK(shape_error, diff.empty(), who, ": the ranks' models differ: ", diff,
                 " (every rank must pass the same parameters, in the same order)");
    GRADUS_CHECK(shape_error, first == size_, who, ": the ranks' models differ: rank ", first,
                 "'s parameters do not match rank 0's (its error says how)");
  }

  PsComm comm_;
  int rank_ = 0, size_ = 1, num_servers_ = 1, max_staleness_ = -1;
  std::vector<std::vector<size_t>> owned_;
  std::vector<int64_t> shard_size_;
  std::vector<Shape> shapes_;
};

/// One server's side of the job: receives pushes from any worker, applies them with `opt`,
/// answers each (or holds the answer back while its worker is too far ahead), until every
/// worker is done.
template <Real T>
class PsServer {
 public:
  PsServer(PsJob<T>& job, optim::Optimizer<T>& opt) : job_(job), opt_(opt) {
    const int s = job_.rank();
    const int workers = job_.num_workers();
    owned_ = job_.owned(s);
    shard_ = job_.shard_size(s);
    header_.assign(job_.header_size(s), 0);
    incoming_.assign(size_t(shard_), T(0));
    store_.resize(opt_.params().size());
    grads_.resize(opt_.params().size());
    for (size_t i : owned_) store_[i] = Tensor<T>::empty(job_.shape(i));
    clock_.assign(size_t(workers), 0);
    done_.assign(size_t(workers), 0);
    waiting_.assign(size_t(workers), 0);
    reply_.resize(size_t(workers));
    reply_version_.assign(size_t(workers), 0);
    reply_reqs_.resize(size_t(workers));
    stats_.pushes_by_worker.assign(size_t(workers), 0);
  }

  ServerStats serve() {
    int active = job_.num_workers();
    double lag_sum = 0;
    while (active > 0) {
      MPI_Status st;
      check_mpi(MPI_Recv(header_.data(), int(header_.size()), MPI_INT64_T, MPI_ANY_SOURCE, kPsPush, job_.comm(), &st),
                "MPI_Recv");
      const int src = st.MPI_SOURCE, w = src - job_.num_servers();
      GRADUS_CHECK(dist_error, w >= 0 && !done_[size_t(w)], "dist::run_parameter_server: an unexpected message from rank ",
                   src);
      if (header_[0] == kPsDoneKind) {
        done_[size_t(w)] = 1;
        --active;
      } else {
        GRADUS_CHECK(dist_error, header_[0] == kPsPushKind && header_[1] == clock_[size_t(w)],
                     "dist::run_parameter_server: worker ", w, " (rank ", src, ") pushed out of turn (push ", header_[1],
                     ", expected ", clock_[size_t(w)], ")");
        ps_recv(incoming_.data(), shard_, src, kPsGradients, job_.comm());
        if (apply()) {
          const int64_t lag = version_ - 1 - header_[2];
          stats_.max_lag = std::max(stats_.max_lag, lag);
          lag_sum += double(lag);
        }
        ++clock_[size_t(w)];
        ++stats_.pushes;
        ++stats_.pushes_by_worker[size_t(w)];
        waiting_[size_t(w)] = 1;
      }
      answer_waiting();
    }
    for (auto& reqs : reply_reqs_) ps_wait_all(reqs);
    stats_.updates = version_;
    stats_.mean_lag = version_ > 0 ? lag_sum / double(version_) : 0.0;
    return stats_;
  }

 private:
  // Applies the push in incoming_ to this server's parameters; false when it has no gradient
  // for any of them (the worker's step still counts as a push).
  bool apply() {
    bool any = false;
    int64_t off = 0;
    for (size_t k = 0; k < owned_.size(); ++k) {
      const size_t i = owned_[k];
      const int64_t n = store_[i].size();
      if (header_[kPsHeaderFixed + k]) {
        if (n > 0) std::memcpy(store_[i].data(), incoming_.data() + off, size_t(n) * sizeof(T));
        grads_[i] = store_[i];
        any = true;
      } else {
        grads_[i] = Tensor<T>();
      }
      off += n;
    }
    if (!any) return false;
    opt_.apply_gradients(grads_);
    ++version_;
    return true;
  }

  // Answers every waiting worker whose lead over the slowest worker still at work is at most
  // max_staleness pushes, with the shard as it is now.
  void answer_waiting() {
    int64_t slowest = INT64_MAX;
    for (size_t w = 0; w < clock_.size(); ++w)
      if (!done_[w]) slowest = std::min(slowest, clock_[w]);
    for (size_t w = 0; w < clock_.size(); ++w) {
      if (!waiting_[w]) continue;
      if (job_.max_staleness() >= 0 && clock_[w] - slowest > job_.max_staleness()) {
        if (waiting_[w] == 1) ++stats_.held, waiting_[w] = 2;
        continue;
      }
      send_reply(w);
      waiting_[w] = 0;
    }
  }

  void send_reply(size_t w) {
    ps_wait_all(reply_reqs_[w]);  // the previous reply has been received: its buffers are free
    auto& buf = reply_[w];
    buf.resize(size_t(shard_));
    int64_t off = 0;
    for (size_t i : owned_) {
      const Tensor<T>& v = opt_.params()[i].value();
      if (v.size() > 0) std::memcpy(buf.data() + off, v.data(), size_t(v.size()) * sizeof(T));
      off += v.size();
    }
    reply_version_[w] = version_;
    const int dest = job_.num_servers() + int(w);
    ps_isend(&reply_version_[w], 1, dest, kPsVersion, job_.comm(), reply_reqs_[w]);
    ps_isend(buf.data(), shard_, dest, kPsParameters, job_.comm(), reply_reqs_[w]);
  }

  PsJob<T>& job_;
  optim::Optimizer<T>& opt_;
  std::vector<size_t> owned_;
  int64_t shard_ = 0;
  int64_t version_ = 0;  // updates applied
  std::vector<int64_t> header_;
  std::vector<T> incoming_;
  std::vector<Tensor<T>> store_, grads_;  // per parameter: the received gradient; what apply_gradients gets
  std::vector<int64_t> clock_;            // per worker: pushes received
  std::vector<char> done_, waiting_;      // waiting: 1 pushed and not answered, 2 and counted as held
  std::vector<std::vector<T>> reply_;
  std::vector<int64_t> reply_version_;
  std::vector<std::vector<MPI_Request>> reply_reqs_;
  ServerStats stats_;
};

}  // namespace detail

/// Serves the parameters of `opt` (any gd::optim optimizer over the whole model, in the order
/// the workers pass theirs: model.parameters()) in a parameter-server job, on a server rank
/// (rank() < options.num_servers): updates its shard with `opt` (apply_gradients) as each
/// worker's push arrives, one optimizer step per push, until every worker has called
/// AsyncOptimizer::finish. Returns then, with every parameter of `opt` — those of the other
/// servers too — holding the final model, as on every rank.
/// Collective at the start: every rank of the job makes its part at the same point, and a
/// mismatch (options, roles, no worker, the parameters' count, shapes or element type) throws
/// value_error / shape_error on every rank. Every rank starts from rank 0's initial values.
/// With several servers each holds the optimizer state of its own shard only.
///   gd::optim::Adam<float> adam(net.parameters(), {.lr = 1e-3});
///   gd::dist::ServerStats st = gd::dist::run_parameter_server(adam, {.num_servers = 1});
template <Real T>
ServerStats run_parameter_server(optim::Optimizer<T>& opt, AsyncOptions options = {}) {
  detail::PsJob<T> job(opt.params(), options, true, "dist::run_parameter_server");
  detail::PsServer<T> server(job, opt);
  ServerStats stats = server.serve();
  job.broadcast_final(opt.params());
  return stats;
}

}  // namespace gradus::dist
