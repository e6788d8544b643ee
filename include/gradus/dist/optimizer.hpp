// gradus/dist/optimizer.hpp — DistributedOptimizer: synchronous data-parallel training. Each rank
// computes the gradient of its own part of the batch; the gradients are averaged over the ranks
// with a bucketed all-reduce, then the wrapped optimizer applies the same update on every rank.
//
// Buckets: the parameters in reverse order (the order in which backward finishes them), packed
// into contiguous buffers of about `bucket_mb` MB each. With `overlap` (the default), a leaf-ready
// hook on the tape (gd::add_leaf_ready_hook) copies each gradient into its bucket as soon as
// backward has finished it, and a bucket's MPI_Iallreduce starts as soon as all of its gradients
// are in, while backward goes on with the earlier layers; step() completes them (MPI_Waitall).
// Buckets start in bucket order on every rank (a bucket that fills early waits for the ones
// before it), so the ranks always issue their collectives in the same order. Without overlap, or
// when a gradient does not come from gd::backward on the Context's thread, step() packs and
// all-reduces whatever is left.
//
// A model on a GPU keeps its buckets in the GPU's memory: a gradient is packed with a device copy,
// and a full bucket's all-reduce (NCCL, through the device's collective library) is queued on the
// device behind the backward kernels that made it, so that the host goes on with backward at once
// and nothing crosses to the host.
#pragma once
#include <chrono>
#include <cstring>
#include <unordered_map>
#include <vector>

#include "gradus/autodiff/backward.hpp"
#include "gradus/dist/mpi.hpp"
#include "gradus/optim/optimizer.hpp"

namespace gradus::dist {

/// Options of DistributedOptimizer.
struct DistributedOptions {
  double bucket_mb = 25;  ///< target size of one all-reduce bucket, in MB (2^20 bytes); > 0
  bool overlap = true;    ///< start each bucket's all-reduce during backward (false: all in step())
};

/// Wraps any gd::optim optimizer for data-parallel training: the same interface (step, zero_grad,
/// minimize, lr, set_lr, iterations, params, state_dict, load_state_dict), with step() first
/// averaging every parameter's gradient over all ranks. `inner` must outlive this object. All
/// ranks must run the same model (the same parameters, in the same order). Start every rank from
/// the same weights and state: gd::dist::broadcast_parameters / broadcast_optimizer_state.
/// A parameter that received no gradient on any rank is skipped, as the wrapped optimizer does;
/// one that received a gradient on some ranks only counts zeros for the others.
/// One backward per step: a second gd::backward before step() (gradient accumulation) is
/// supported but loses the overlap for that step.
///   gd::optim::Adam adam(net.parameters(), {.lr = 1e-3});
///   gd::dist::DistributedOptimizer opt(adam);            // {.bucket_mb = 25, .overlap = true}
///   gd::dist::broadcast_parameters(net);
///   gd::dist::broadcast_optimizer_state(adam);
///   for (...) opt.minimize(loss_of_my_shard());          // zero_grad, backward, averaged step
template <Real T>
class DistributedOptimizer {
 public:
  using value_type = T;

  /// When and how a bucket's all-reduce was started during the last step (for measurement).
  struct BucketStart {
    size_t bucket;                                ///< bucket index (bucket 0 holds the last parameters)
    bool during_backward;                         ///< started from the leaf-ready hook, inside backward
    std::chrono::steady_clock::time_point time;   ///< when MPI_Iallreduce was called
    /// Whether the all-reduce was seen complete inside backward (by the MPI_Test the leaf-ready
    /// hook runs on the buckets under way, which is also what lets MPI progress them), and when it
    /// was seen complete (for the others: when step()'s MPI_Waitall returned).
    bool finished_during_backward = false;
    std::chrono::steady_clock::time_point finished{};
  };

  explicit DistributedOptimizer(optim::Optimizer<T>& inner, DistributedOptions options = {})
      : inner_(inner), options_(options) {
    detail::check_context("DistributedOptimizer");
    GRADUS_CHECK(value_error, options.bucket_mb > 0 && std::isfinite(options.bucket_mb),
                 "DistributedOptimizer: bucket_mb must be > 0, got ", options.bucket_mb);
    const auto& params = inner_.params();
    for (size_t i = 0; i < params.size(); ++i) index_[params[i].node()] = i;
    if (options_.overlap)
      hook_ = add_leaf_ready_hook([this](const gradus::detail::NodeBase* leaf) { on_leaf_ready(leaf); });
  }
  DistributedOptimizer(const DistributedOptimizer&) = delete;  // the hook holds `this`
  DistributedOptimizer& operator=(const DistributedOptimizer&) = delete;
  ~DistributedOptimizer() {
    if (hook_) remove_leaf_ready_hook(hook_);
    // (a device bucket's all-reduce is ordered on the device before any later use of its memory)
    for (auto& b : buckets_)  // never leave MPI writing into freed buffers
      if (b.request != MPI_REQUEST_NULL) MPI_Wait(&b.request, MPI_STATUS_IGNORE);
  }

  /// Averages every parameter's gradient over the ranks (completing the all-reduces started during
  /// backward and running the others), then applies the wrapped optimizer's step on every rank.
  void step() {
    build();
    const auto& params = inner_.params();
    if (repeated_) restart();  // more than one backward since the last step: gradients changed after packing
    for (size_t i = 0; i < params.size(); ++i)
      if (!ready_[i]) pack(i);
    for (size_t b = 0; b < buckets_.size(); ++b) buckets_[b].filled = buckets_[b].params.size();
    start_ready_buckets(false);
    // which parameters have a gradient on some rank (so that "no gradient" is skipped as without MPI)
    for (size_t i = 0; i < params.size(); ++i) has_grad_[i] = params[i].grad_if_any() != nullptr;
    detail::check_mpi(MPI_Allreduce(MPI_IN_PLACE, has_grad_.data(), int(has_grad_.size()), MPI_INT, MPI_MAX,
                                    MPI_COMM_WORLD),
                      "MPI_Allreduce");
    for (auto& b : buckets_) requests_.push_back(b.request);
    const int rc = MPI_Waitall(int(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE);
    for (auto& b : buckets_) b.request = MPI_REQUEST_NULL;
    requests_.clear();
    detail::check_mpi(rc, "MPI_Waitall");
    const auto waited = std::chrono::steady_clock::now();
    for (auto& s : starts_)
      if (!s.finished_during_backward) s.finished = waited;
    const T inv = T(1) / T(size());
    for (size_t i = 0; i < params.size(); ++i) {
      Tensor<T>* g = params[i].grad_if_any();
      if (!has_grad_[i]) continue;
      if (!g || g->use_count() > 1 || g->shape() != params[i].shape() || g->device() != device_) {
        params[i].grad() = Tensor<T>::empty(params[i].shape(), device_);
        g = params[i].grad_if_any();
      }
      if (on_device_) {  // the device's all-reduce took the mean
        const T* src = buckets_[where_[i].bucket].device_buffer.device_data() + where_[i].offset;
        if (g->size() > 0)
          gradus::detail::device_copy(g->device_data(), device_, src, device_, size_t(g->size()) * sizeof(T));
        continue;
      }
      const T* src = buckets_[where_[i].bucket].buffer.data() + where_[i].offset;
      T* dst = g->data();
      for (int64_t k = 0; k < g->size(); ++k) dst[k] = src[k] * inv;
    }
    last_starts_.swap(starts_);
    starts_.clear();
    reset();
    inner_.step();
  }
  /// Resets every parameter's gradient (the wrapped optimizer's zero_grad).
  void zero_grad() { inner_.zero_grad(); }
  /// zero_grad(), gd::backward(loss) (the all-reduces start during it), step().
  void minimize(const Var<T>& loss) {
    zero_grad();
    gradus::backward(loss);
    step();
  }
  double lr() const { return inner_.lr(); }
  void set_lr(double lr) { inner_.set_lr(lr); }
  int64_t iterations() const { return inner_.iterations(); }
  const std::vector<Var<T>>& params() const { return inner_.params(); }
  const char* name() const { return inner_.name(); }
  optim::StateDict<T> state_dict() const { return inner_.state_dict(); }
  void load_state_dict(const optim::StateDict<T>& state) { inner_.load_state_dict(state); }
  /// The wrapped optimizer.
  optim::Optimizer<T>& inner() { return inner_; }
  const DistributedOptions& options() const { return options_; }

  /// The buckets, once the first backward or step has laid them out: for each, the indices of its
  /// parameters in params() (bucket 0 holds the last parameters).
  std::vector<std::vector<size_t>> buckets() const {
    std::vector<std::vector<size_t>> out;
    for (const auto& b : buckets_) out.push_back(b.params);
    return out;
  }
  /// The all-reduces started during the last step(), in the order they were started.
  const std::vector<BucketStart>& last_starts() const { return last_starts_; }

 private:
  struct Bucket {
    std::vector<size_t> params;
    std::vector<T> buffer;    // in host memory
    Tensor<T> device_buffer;  // or on the parameters' device
    size_t filled = 0;
    MPI_Request request = MPI_REQUEST_NULL;
    bool started = false;
  };
  struct Where {
    size_t bucket = 0;
    int64_t offset = 0;
  };

  // Lays the buckets out once the parameters have their shapes: reverse order, ~bucket_mb each,
  // in host memory or on the parameters' device (the same on every rank).
  void build() {
    if (!buckets_.empty() || inner_.params().empty()) return;
    const auto& params = inner_.params();
    for (size_t k = 0; k < params.size(); ++k) {
      GRADUS_CHECK(value_error, params[k].value().defined(), "DistributedOptimizer: parameter ", k,
                   " has no value yet (a lazy layer: run one forward first)");
      GRADUS_CHECK(device_error, params[k].value().device() == params[0].value().device(),
                   "DistributedOptimizer: parameter ", k, " is on ", params[k].value().device(), ", parameter 0 on ",
                   params[0].value().device(), " (one device per process)");
    }
    device_ = params[0].value().device();
    on_device_ = !params[0].value().in_host_memory();
    int mine[2] = {on_device_, !on_device_}, any[2] = {0, 0};
    detail::check_mpi(MPI_Allreduce(mine, any, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce");
    GRADUS_CHECK(device_error, !(any[0] && any[1]),
                 "DistributedOptimizer: some ranks train in host memory and others on a device; this rank's "
                 "parameters are on ",
                 device_);
    if (on_device_) group_ = &detail::device_group_for(device_, "DistributedOptimizer");
    const double cap = options_.bucket_mb * 1048576.0;
    where_.resize(params.size());
    Bucket cur;
    int64_t elems = 0;
    for (size_t k = params.size(); k-- > 0;) {
      where_[k] = {buckets_.size(), elems};
      cur.params.push_back(k);
      elems += params[k].value().size();
      if (double(elems) * sizeof(T) >= cap || k == 0) {
        if (on_device_)
          cur.device_buffer = Tensor<T>::empty({elems}, device_);
        else
          cur.buffer.assign(size_t(elems), T(0));
        buckets_.push_back(std::move(cur));
        cur = Bucket{};
        elems = 0;
      }
    }
    ready_.assign(params.size(), 0);
    has_grad_.assign(params.size(), 0);
    requests_.reserve(buckets_.size());
  }

  void on_leaf_ready(const gradus::detail::NodeBase* leaf) {
    auto it = index_.find(leaf);
    if (it == index_.end()) return;  // a Var this optimizer does not train
    build();
    const size_t i = it->second;
    if (ready_[i]) {
      repeated_ = true;
      return;
    }
    pack(i);
    if (++buckets_[where_[i].bucket].filled == buckets_[where_[i].bucket].params.size()) start_ready_buckets(true);
    if (next_start_ > 0) {  // let MPI progress the all-reduces already under way
      for (size_t b = 0; b < next_start_; ++b) {
        if (buckets_[b].request == MPI_REQUEST_NULL) continue;
        int done = 0;
        detail::check_mpi(MPI_Test(&buckets_[b].request, &done, MPI_STATUS_IGNORE), "MPI_Test");
        if (done && b < starts_.size()) {  // (a completed request is now MPI_REQUEST_NULL)
          starts_[b].finished_during_backward = true;
          starts_[b].finished = std::chrono::steady_clock::now();
        }
      }
    }
  }

  // Copies parameter i's gradient (zeros when it has none) into its place in its bucket.
  void pack(size_t i) {
    const auto& p = inner_.params()[i];
    Bucket& b = buckets_[where_[i].bucket];
    const int64_t n = p.value().size();
    if (on_device_) {
      T* dst = b.device_buffer.device_data() + where_[i].offset;
      if (const Tensor<T>* g = p.grad_if_any()) {
        GRADUS_CHECK(device_error, g->device() == device_, "DistributedOptimizer: parameter ", i, "'s gradient is on ",
                     g->device(), ", its value on ", device_);
        if (n > 0) gradus::detail::device_copy(dst, device_, g->device_data(), device_, size_t(n) * sizeof(T));
      } else if (n > 0) {
        const T zero = T(0);
        gradus::detail::device_fill(dst, device_, &zero, sizeof(T), size_t(n));
      }
      ready_[i] = 1;
      return;
    }
    T* dst = b.buffer.data() + where_[i].offset;
    if (const Tensor<T>* g = p.grad_if_any()) {
      GRADUS_CHECK(device_error, g->in_host_memory(), "DistributedOptimizer: parameter ", i,
                   "'s gradient is on ", g->device(), ", its value in host memory");
      std::memcpy(dst, g->data(), size_t(n) * sizeof(T));
    } else {
      std::fill(dst, dst + n, T(0));
    }
    ready_[i] = 1;
  }

  // Starts, in bucket order, every full bucket whose predecessors have all started.
  void start_ready_buckets(bool during_backward) {
    while (next_start_ < buckets_.size() && buckets_[next_start_].filled == buckets_[next_start_].params.size()) {
      Bucket& b = buckets_[next_start_];
      if (on_device_)  // queued on the device behind the kernels that made the gradients
        group_->hooks.all_reduce(group_->handle, b.device_buffer.device_data(), b.device_buffer.size(),
                                 backend::scalar_of<T>(), backend::Reduce::mean, device_);
      else
        detail::check_mpi(MPI_Iallreduce(MPI_IN_PLACE, b.buffer.data(), int(b.buffer.size()),
                                         detail::mpi_type<T>(), MPI_SUM, MPI_COMM_WORLD, &b.request),
                          "MPI_Iallreduce");
      b.started = true;
      starts_.push_back({next_start_, during_backward, std::chrono::steady_clock::now(), false, {}});
      ++next_start_;
    }
  }

  // Drops what was started (completing it, as MPI requires) so that step() re-packs everything.
  void restart() {
    for (auto& b : buckets_)
      if (b.request != MPI_REQUEST_NULL) requests_.push_back(b.request);
    // the collectives must complete on every rank; their results are discarded
    const int rc = MPI_Waitall(int(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE);
    requests_.clear();
    for (auto& b : buckets_) b.request = MPI_REQUEST_NULL;
    detail::check_mpi(rc, "MPI_Waitall");
    std::vector<BucketStart> keep;
    keep.swap(starts_);
    reset();
    for (size_t b = 0; b < buckets_.size(); ++b) buckets_[b].filled = 0;
  }

  void reset() {
    std::fill(ready_.begin(), ready_.end(), 0);
    for (auto& b : buckets_) {
      b.filled = 0;
      b.started = false;
    }
    next_start_ = 0;
    repeated_ = false;
  }

  optim::Optimizer<T>& inner_;
  DistributedOptions options_;
  int hook_ = 0;
  std::unordered_map<const gradus::detail::NodeBase*, size_t> index_;
  std::vector<Bucket> buckets_;
  std::vector<Where> where_;
  std::vector<char> ready_;
  std::vector<int> has_grad_;
  std::vector<MPI_Request> requests_;
  std::vector<BucketStart> starts_, last_starts_;
  size_t next_start_ = 0;
  bool repeated_ = false;
  bool on_device_ = false;  // the buckets live on device_ and go through its collective library
  Device device_ = cpu;
  detail::DeviceGroup* group_ = nullptr;
};

}  // namespace gradus::dist
