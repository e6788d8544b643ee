// gradus/dist/async_optimizer.hpp — AsyncOptimizer: a worker's side of a parameter-server job
// (dist/parameter_server.hpp). It is a gd::optim optimizer whose step sends the gradients to the
// servers and takes back the parameters they hold after the update, so a worker trains with it as
// with any optimizer — minimize, step, apply_gradients, or gd::train::fit — and never waits for
// the other workers (unless max_staleness makes it).
#pragma once
#include <cstring>
#include <exception>
#include <vector>

#include "gradus/dist/parameter_server.hpp"

namespace gradus::dist {

/// The optimizer of a worker in a parameter-server job (ranks >= options.num_servers): each step
/// pushes this rank's gradients (those the parameters hold, as any optimizer's step() reads them)
/// to the servers, which apply them with their own optimizer, and pulls back the parameters as
/// they are after that update, written in place into `params` — the next forward sees them.
/// Construction is collective (as run_parameter_server on the servers): the ranks check the
/// options and the parameters' shapes together, and every rank starts from rank 0's values.
/// finish() ends this worker's part; once every worker has finished, every rank holds the final
/// model. The learning rate, schedule and state are the servers' optimizer's: this one's lr() is
/// 0 and unused, and iterations() counts the pushes.
///   gd::dist::AsyncOptimizer<float> opt(net.parameters(), {.num_servers = 1, .max_staleness = 4});
///   for (...) opt.minimize(loss_on(my_batch));          // push, then pull
///   opt.finish();                                       // net now holds the final model
/// or with fit, on the worker's own part of the data:
///   gd::train::fit(net, opt, loss, shard, {.epochs = 3, .batch_size = 64});
///   opt.finish();
template <Real T>
class AsyncOptimizer : public optim::Optimizer<T> {
 public:
  explicit AsyncOptimizer(std::vector<Var<T>> params, AsyncOptions options = {})
      : optim::Optimizer<T>("AsyncOptimizer", std::move(params), 0.0),
        options_(options),
        job_(this->params(), options, false, "dist::AsyncOptimizer"),
        uncaught_at_start_(std::uncaught_exceptions()) {
    const int servers = job_.num_servers();
    headers_.resize(size_t(servers));
    outgoing_.resize(size_t(servers));
    incoming_.resize(size_t(servers));
    for (int s = 0; s < servers; ++s) {
      headers_[size_t(s)].assign(job_.header_size(s), 0);
      outgoing_[size_t(s)].assign(size_t(job_.shard_size(s)), T(0));
      incoming_[size_t(s)].assign(size_t(job_.shard_size(s)), T(0));
    }
    versions_.assign(size_t(servers), 0);
    received_.assign(size_t(servers), 0);
    grad_of_.assign(this->params().size(), nullptr);
  }
  AsyncOptimizer(const AsyncOptimizer&) = delete;
  AsyncOptimizer& operator=(const AsyncOptimizer&) = delete;
  AsyncOptimizer(AsyncOptimizer&&) = delete;  // the job's buffers are in flight with MPI
  AsyncOptimizer& operator=(AsyncOptimizer&&) = delete;
  /// Finishes (collectively) when finish() was not called, unless an exception is propagating
  /// (then the Context ends the job). A failure there ends the job: a destructor cannot throw.
  ~AsyncOptimizer() override {
    if (finished_ || std::uncaught_exceptions() > uncaught_at_start_) return;
    try {
      finish();
    } catch (const std::exception& e) {
      detail::abort_job(std::string("dist::AsyncOptimizer: finishing: ") + e.what());
    }
  }

  /// Tells the servers that this worker is done, then waits until every worker is: the servers
  /// then send their shards to every rank, and the parameters hold the final model. Collective
  /// over the job (every worker calls it; the servers are returning from run_parameter_server).
  /// A second call does nothing.
  void finish() {
    if (finished_) return;
    finished_ = true;
    for (int s = 0; s < job_.num_servers(); ++s) {
      auto& h = headers_[size_t(s)];
      std::fill(h.begin(), h.end(), int64_t(0));
      h[0] = detail::kPsDoneKind;
      h[1] = pushes_;
      detail::check_mpi(MPI_Send(h.data(), int(h.size()), MPI_INT64_T, s, detail::kPsPush, job_.comm()), "MPI_Send");
    }
    job_.broadcast_final(this->params());
  }
  /// Whether finish() has run.
  bool finished() const { return finished_; }
  /// This worker's index among the workers (rank() - num_servers) and their number.
  int worker_index() const { return job_.rank() - job_.num_servers(); }
  int num_workers() const { return job_.num_workers(); }
  const AsyncOptions& options() const { return options_; }
  /// Pushes made so far.
  int64_t pushes() const { return pushes_; }
  /// For each server, the version (updates it had applied) of the parameters pulled last.
  const std::vector<int64_t>& versions() const { return versions_; }

 protected:
  /// The step: push the gradients `grads` of the parameters `which` to their servers (the others
  /// are flagged as having none), then pull every shard back.
  void update_all(const std::vector<size_t>& which, const std::vector<const Tensor<T>*>& grads) override {
    GRADUS_CHECK(value_error, !finished_, "dist::AsyncOptimizer: a step after finish()");
    const auto& params = this->params();
    std::fill(grad_of_.begin(), grad_of_.end(), nullptr);
    for (size_t k = 0; k < which.size(); ++k) grad_of_[which[k]] = grads[k];
    for (size_t i = 0; i < params.size(); ++i) {  // before anything is sent: a failed step sends nothing
      GRADUS_CHECK(shape_error, params[i].shape() == job_.shape(i), "dist::AsyncOptimizer: parameter ", i,
                   " has shape ", params[i].shape(), " but had ", job_.shape(i), " when the job started");
      if (const Tensor<T>* g = grad_of_[i])
        GRADUS_CHECK(device_error, g->in_host_memory(), "dist::AsyncOptimizer: the gradient of parameter ", i, " is on ",
                     g->device(), "; the parameter-server job trains in host memory");
    }
    // receives first, so that a server's reply always finds its place
    for (int s = 0; s < job_.num_servers(); ++s) {
      detail::ps_irecv(&received_[size_t(s)], 1, s, detail::kPsVersion, job_.comm(), reqs_);
      detail::ps_irecv(incoming_[size_t(s)].data(), job_.shard_size(s), s, detail::kPsParameters, job_.comm(), reqs_);
    }
    for (int s = 0; s < job_.num_servers(); ++s) {
      auto& h = headers_[size_t(s)];
      h[0] = detail::kPsPushKind;
      h[1] = pushes_;
      h[2] = versions_[size_t(s)];
      T* out = outgoing_[size_t(s)].data();
      const auto& owned = job_.owned(s);
      for (size_t k = 0; k < owned.size(); ++k) {
        const Tensor<T>* g = grad_of_[owned[k]];
        const int64_t n = params[owned[k]].size();
        h[detail::kPsHeaderFixed + k] = g != nullptr;
        if (g && n > 0) std::memcpy(out, g->data(), size_t(n) * sizeof(T));
        out += n;
      }
      detail::ps_isend(h.data(), int64_t(h.size()), s, detail::kPsPush, job_.comm(), reqs_);
      detail::ps_isend(outgoing_[size_t(s)].data(), job_.shard_size(s), s, detail::kPsGradients, job_.comm(), reqs_);
    }
    detail::ps_wait_all(reqs_);
    for (int s = 0; s < job_.num_servers(); ++s) {
      const T* in = incoming_[size_t(s)].data();
      for (size_t i : job_.owned(s)) {
        Tensor<T>& w = this->weights(i);
        if (w.size() > 0) std::memcpy(w.data(), in, size_t(w.size()) * sizeof(T));
        in += w.size();
      }
      versions_[size_t(s)] = received_[size_t(s)];
    }
    ++pushes_;
  }
  void update(size_t, Tensor<T>&, const Tensor<T>&) override {}  // update_all does the step

 private:
  AsyncOptions options_;
  detail::PsJob<T> job_;
  int uncaught_at_start_ = 0;
  bool finished_ = false;
  int64_t pushes_ = 0;
  std::vector<std::vector<int64_t>> headers_;
  std::vector<std::vector<T>> outgoing_, incoming_;  // per server: gradients out, parameters in
  std::vector<int64_t> versions_, received_;
  std::vector<const Tensor<T>*> grad_of_;
  std::vector<MPI_Request> reqs_;
};

}  // namespace gradus::dist
