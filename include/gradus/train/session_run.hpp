// gradus/train/session_run.hpp — how a Session runs, for fit and for a user's own loop alike:
// open (hooks.begin, restore-or-init, hooks.after_create_session), one step, an epoch's end,
// close (hooks.end), and the checkpoint layout it writes and restores.
//
// Checkpoint layout (one safetensors file per checkpoint, written by gd::io::Saver; metadata
// "global_step" = the global step):
//   model/<parameter or buffer path>   the model (gd::io::add_module)
//   optimizer/<state name>             the optimizer state keyed by parameter name, "optimizer/step" and
//                                      "optimizer/<path>/<slot>" (gd::io::add_optimizer with the model)
//   rng                                I64 [4], the options' rng (FitOptions::rng, SessionOptions::rng) (only when rng is set)
//   rng/<path>                         I64 [4], each generator the model's layers registered ("rng/drop.rng")
//   train/counters                     I64 [4]: epoch, step in epoch, steps in the epoch's loss mean, global step
//   train/values                       F64 [3]: the epoch's loss sum, the last loss, the learning rate
//   train/config                       I64 [5]: examples, batch_size, shuffle, drop_remainder, seed (bit cast);
//                                      (-1, 0, 0, 0, 0) for a run on a gd::data::Dataset or a user's Session
//   train/data_iterator                I64 [2]: the Dataset's iterator state (epoch, batches consumed),
//                                      only for a run on a Dataset (train/fit_dataset.hpp). It equals
//                                      (epoch, step in epoch): a resumed run re-opens the pipeline with
//                                      Dataset::iterator(state), so it sees exactly the batches the
//                                      uninterrupted run would have seen (for a deterministic pipeline)
//   train/history/global_step          I64 [E]: per completed epoch (absent while E = 0)
//   train/history/values               F64 [E, 1 + K]: "loss", then the K optional keys
//   train/history/present              I64 [E, K]: 1 where epoch e has optional key k (absent when K = 0)
//   loss_scale/scale, .../good_steps,  the LossScaler's state, with SessionOptions::autocast = gd::fp16
//   loss_scale/skipped_steps
//   hooks/<key>/...                    each stateful hook's entries (EarlyStopping: hooks/early_stopping/state, .../best/<name>)
// metadata: "train/format" = "1"; "train/history/keys" = the K optional keys ("val_loss",
// "val_<metric>") joined by '\n'.
#pragma once
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <exception>
#include <filesystem>
#include <functional>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gradus/core/compiled.hpp"
#include "gradus/train/checkpoint_saver.hpp"
#include "gradus/train/hooks.hpp"
#include "gradus/train/session.hpp"

namespace gradus::train {

// ----------------------------------------------------------------------------- construction

template <nn::ModuleType M>
Session::Session(detail::ForFit, M& model, optim::Optimizer<typename M::value_type>& optimizer)
    : who_("fit"),
      trainee_(std::make_unique<detail::TypedTrainee<typename M::value_type>>(model, optimizer)) {}

template <nn::ModuleType M>
Session::Session(M& model, optim::Optimizer<typename M::value_type>& optimizer, const SessionOptions& options)
    : trainee_(std::make_unique<detail::TypedTrainee<typename M::value_type>>(model, optimizer)) {
  user_driven_ = true;
  GRADUS_CHECK(value_error, options.epochs >= 0, "Session: epochs must be >= 0, got ", options.epochs);
  epochs_ = options.epochs;
  configure(options);
  try {
    open();
  } catch (...) {
    restore_mode();
    throw;
  }
}

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
GRADUS_INLINE Session::~Session() {
  if (!user_driven_ || !opened_ || closed_) return;
  if (failed_ || std::uncaught_exceptions() > uncaught_at_open_) {
    restore_mode();  // no end hooks after an exception
    return;
  }
  try {
    close();
  } catch (const std::exception& e) {
    std::cerr << "gd::train::Session: closing in the destructor failed: " << e.what() << std::endl;
  }
}

GRADUS_INLINE void Session::configure(const SessionOptions& o) {
  for (const Hook* h : o.hooks) GRADUS_CHECK(value_error, h != nullptr, who_, ": a hook pointer is null");
  verbose_ = o.verbose;
  run_dir_ = o.run_dir.path();
  unregistered_ = o.unregistered;
  GRADUS_CHECK(value_error, o.clip_global_norm >= 0, "Session: clip_global_norm must be >= 0 (0: off), got ",
               o.clip_global_norm);
  clip_global_norm_ = o.clip_global_norm;
  autocast_ = o.autocast;
  if (o.autocast == Precision::fp16) trainee_->scale_loss(o.loss_scale);
  if (o.device) trainee_->to(*o.device);
  rng_ = o.rng;
  for (const auto& [path, r] : trainee_->generators())
    if (r != rng_) generators_.emplace_back("rng/" + path, r);
  collective_ = o.collective;
  if (collective_) {
    GRADUS_CHECK(value_error, collective_.max && collective_.broadcast && collective_.average, who_,
                 ": a Collective needs sum, max, broadcast and average");
    GRADUS_CHECK(value_error, collective_.size >= 1 && collective_.rank >= 0 && collective_.rank < collective_.size,
                 who_, ": Collective rank must be in [0, size), got rank ", collective_.rank, " of ", collective_.size);
  }
  user_hooks_ = o.hooks;
  bool has_saver = false;
  for (Hook* h : o.hooks) has_saver = has_saver || dynamic_cast<CheckpointSaver*>(h) != nullptr;
  if (o.verbose) owned_hooks_.push_back(std::make_unique<ProgressBar>());
  if (!o.run_dir.empty() && !has_saver && collective_.is_chief())
    owned_hooks_.push_back(checkpoint_code().default_saver(o.checkpoint));
}

GRADUS_INLINE const detail::CheckpointCode& Session::checkpoint_code() const {
  const detail::CheckpointCode* code = detail::checkpoint_code_slot().load(std::memory_order_relaxed);
  if (!code) [[unlikely]]  // a RunDir or a CollectiveBroadcast made with a value sets it
    ::gradus::detail::throw_error<value_error>({who_, ": a run_dir or a collective was set that was not made through ",
                                                "RunDir or CollectiveBroadcast"});
  return *code;
}

GRADUS_INLINE std::unique_ptr<Hook> Session::default_saver(const CheckpointSaverOptions& options) {
  return std::make_unique<CheckpointSaver>(options);
}

// ----------------------------------------------------------------------- checkpoints, restore

namespace detail {
/// Writes `logs` under `prefix`: "<prefix>global_step", "<prefix>values" (the loss, then each
/// optional key), "<prefix>present" and the metadata "<prefix>keys"; with `epochs` also
/// "<prefix>epoch" (History::evaluations: several per epoch). Nothing when `logs` is empty.
GRADUS_INLINE void add_logs(io::TensorList& out, io::Metadata& metadata, const std::string& prefix,
                            const std::vector<EpochLogs>& logs, bool epochs) {
  const auto e = int64_t(logs.size());
  if (e == 0) return;
  std::vector<std::string> keys;  // optional keys, in order of first appearance
  auto add_key = [&](const std::string& k) {
    if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
  };
  for (const EpochLogs& l : logs) {
    if (l.val_loss) add_key("val_loss");
    for (const auto& [k, v] : l.val_metrics) add_key(k);
  }
  const auto k = int64_t(keys.size());
  Tensor<int64_t> steps({e}), epoch({e});
  Tensor<double> values = Tensor<double>::zeros({e, 1 + k});
  Tensor<int64_t> present = Tensor<int64_t>::zeros({e, k});
  for (int64_t i = 0; i < e; ++i) {
    const EpochLogs& l = logs[size_t(i)];
    steps.data()[i] = l.global_step;
    epoch.data()[i] = l.epoch;
    values.data()[i * (1 + k)] = l.loss;
    for (int64_t j = 0; j < k; ++j)
      if (l.has(keys[size_t(j)])) {
        values.data()[i * (1 + k) + 1 + j] = l.get(keys[size_t(j)]);
        present.data()[i * k + j] = 1;
      }
  }
  out.emplace_back(prefix + "global_step", steps);
  if (epochs) out.emplace_back(prefix + "epoch", epoch);
  out.emplace_back(prefix + "values", values);
  if (k > 0) out.emplace_back(prefix + "present", present);
  std::string joined;
  for (const std::string& key : keys) joined += (joined.empty() ? "" : "\n") + key;
  metadata[prefix + "keys"] = joined;
}
}  // namespace detail

GRADUS_INLINE void Session::add_loop_state(io::TensorList& out, io::Metadata& metadata) const {
  settle();
  out.emplace_back("train/counters", Tensor<int64_t>::from({epoch_, step_in_epoch_, loss_count_, global_step_}));
  out.emplace_back("train/values", Tensor<double>::from({loss_sum_, last_loss_, lr()}));
  int64_t seed_bits;
  std::memcpy(&seed_bits, &seed_, sizeof seed_bits);
  out.emplace_back("train/config", Tensor<int64_t>::from({examples_, batch_size_, int64_t(shuffle_),
                                                          int64_t(drop_remainder_), seed_bits}));
  if (streaming_) out.emplace_back("train/data_iterator", Tensor<int64_t>::from({epoch_, step_in_epoch_}));
  metadata["train/format"] = "1";
  detail::add_logs(out, metadata, "train/history/", history_.epochs, false);
  detail::add_logs(out, metadata, "train/evaluations/", history_.evaluations, true);
}

GRADUS_INLINE std::filesystem::path Session::save_checkpoint() {
  for (Hook* h : hooks_)
    if (const auto* c = dynamic_cast<const CheckpointSaver*>(h); c && c->saver()) return save_checkpoint(*c->saver());
  if (!collective_.is_chief())
    ::gradus::detail::throw_error<value_error>({"Session::save_checkpoint: rank ", collective_.rank, " has no ",
                                                "CheckpointSaver: with a Collective only the chief (rank 0) saves"});
  throw value_error("Session::save_checkpoint: this run has no CheckpointSaver (set run_dir or add one)");
}
#endif  // GRADUS_DEFINE_COMPILED

namespace detail {

/// The loop counters and values of a checkpoint ("train/counters", "train/values", "train/config").
struct LoopState {
  int64_t step = 0, epoch = 0, in_epoch = 0, count = 0;
  double loss_sum = 0, last_loss = 0, lr = 0;
  std::array<int64_t, 5> config{};  ///< examples, batch_size, shuffle, drop_remainder, seed bits
  std::optional<std::array<int64_t, 2>> data_iterator;  ///< a Dataset run's (epoch, consumed)
};

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
/// Reads and checks the loop state of `ckpt` (its global step must match the metadata's).
GRADUS_INLINE LoopState read_loop_state(const io::Safetensors& ckpt, const std::filesystem::path& path, const char* who) {
  auto get_i64 = [&](const char* name, int64_t n) {
    Tensor<int64_t> t = ckpt.get<int64_t>(name);
    GRADUS_CHECK(io_error, t.size() == n, who, ": checkpoint ", path, ": '", name, "' must hold ", n,
                 " values, got shape ", t.shape());
    return t;
  };
  LoopState st;
  st.step = io::checkpoint_step(ckpt);
  const Tensor<int64_t> counters = get_i64("train/counters", 4);
  const Tensor<int64_t> config = get_i64("train/config", 5);
  const Tensor<double> values = ckpt.get<double>("train/values");
  GRADUS_CHECK(io_error, values.size() == 3, who, ": checkpoint ", path, ": 'train/values' must hold 3 values, got shape ",
               values.shape());
  st.epoch = counters.data()[0], st.in_epoch = counters.data()[1], st.count = counters.data()[2];
  GRADUS_CHECK(io_error, counters.data()[3] == st.step && st.epoch >= 0 && st.in_epoch >= 0 && st.count >= 0,
               who, ": checkpoint ", path, ": inconsistent counters (epoch ", st.epoch, ", step in epoch ", st.in_epoch,
               ", global step ", counters.data()[3], " vs metadata ", st.step, ")");
  std::copy(config.data(), config.data() + 5, st.config.begin());
  st.loss_sum = values.data()[0], st.last_loss = values.data()[1], st.lr = values.data()[2];
  if (ckpt.find("train/data_iterator")) {
    const Tensor<int64_t> it = get_i64("train/data_iterator", 2);
    st.data_iterator = std::array<int64_t, 2>{it.data()[0], it.data()[1]};
    GRADUS_CHECK(io_error, it.data()[0] == st.epoch && it.data()[1] == st.in_epoch, who, ": checkpoint ", path,
                 ": the dataset iterator state (epoch ", it.data()[0], ", consumed ", it.data()[1],
                 ") does not match the counters (epoch ", st.epoch, ", step in epoch ", st.in_epoch, ")");
  }
  return st;
}

/// The logs add_logs wrote under `prefix` (none when absent); without "<prefix>epoch" the i-th
/// entry is epoch i.
GRADUS_INLINE std::vector<EpochLogs> read_logs(const io::Safetensors& ckpt, const std::string& prefix,
                                               const std::filesystem::path& path, const char* who) {
  std::vector<EpochLogs> logs;
  if (!ckpt.find(prefix + "global_step")) return logs;
  const Tensor<int64_t> steps = ckpt.get<int64_t>(prefix + "global_step");
  const Tensor<double> hv = ckpt.get<double>(prefix + "values");
  std::vector<std::string> keys;
  if (auto it = ckpt.metadata.find(prefix + "keys"); it != ckpt.metadata.end() && !it->second.empty()) {
    size_t at = 0;
    for (;;) {
      const size_t nl = it->second.find('\n', at);
      keys.push_back(it->second.substr(at, nl == std::string::npos ? std::string::npos : nl - at));
      if (nl == std::string::npos) break;
      at = nl + 1;
    }
  }
  const int64_t e = steps.size(), k = int64_t(keys.size());
  Tensor<int64_t> present, epoch;
  if (k > 0) present = ckpt.get<int64_t>(prefix + "present");
  if (ckpt.find(prefix + "epoch")) epoch = ckpt.get<int64_t>(prefix + "epoch");
  GRADUS_CHECK(io_error, hv.shape() == Shape({e, 1 + k}) && (k == 0 || present.shape() == Shape({e, k})) &&
                             (!epoch.defined() || epoch.shape() == Shape({e})),
               who, ": checkpoint ", path, ": '", prefix, "' tensors do not match ", e, " entries and ", k, " keys");
  for (int64_t i = 0; i < e; ++i) {
    EpochLogs l;
    l.epoch = epoch.defined() ? epoch.data()[i] : i;
    l.global_step = steps.data()[i];
    l.loss = hv.data()[i * (1 + k)];
    for (int64_t j = 0; j < k; ++j) {
      if (present.data()[i * k + j] == 0) continue;
      const double v = hv.data()[i * (1 + k) + 1 + j];
      if (keys[size_t(j)] == "val_loss")
        l.val_loss = v;
      else
        l.val_metrics.emplace_back(keys[size_t(j)], v);
    }
    logs.push_back(std::move(l));
  }
  return logs;
}

/// The History of `ckpt` ("train/history/...", "train/evaluations/..."); empty when absent.
GRADUS_INLINE History read_history(const io::Safetensors& ckpt, const std::filesystem::path& path, const char* who) {
  History history;
  history.epochs = read_logs(ckpt, "train/history/", path, who);
  history.evaluations = read_logs(ckpt, "train/evaluations/", path, who);
  return history;
}
#endif  // GRADUS_DEFINE_COMPILED

}  // namespace detail

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
GRADUS_INLINE void Session::check_resumable(const detail::LoopState& st, const std::filesystem::path& path) const {
  int64_t seed_bits;
  std::memcpy(&seed_bits, &seed_, sizeof seed_bits);
  const int64_t now[5] = {examples_, batch_size_, int64_t(shuffle_), int64_t(drop_remainder_), seed_bits};
  const bool same_batches = std::equal(now, now + 5, st.config.begin());
  // Mid-epoch, the rest of the epoch is only the same batches under the same batching.
  GRADUS_CHECK(value_error, st.in_epoch == 0 || same_batches, who_, ": checkpoint ", path,
               " stopped mid-epoch under other batching (examples, batch_size, shuffle, drop_remainder, seed) = (",
               st.config[0], ", ", st.config[1], ", ", st.config[2], ", ", st.config[3], ", ", uint64_t(st.config[4]),
               "); the options give (", examples_, ", ", batch_size_, ", ", shuffle_, ", ", drop_remainder_, ", ", seed_,
               ")");
  GRADUS_CHECK(value_error, streaming_ || st.in_epoch <= steps_per_epoch_, who_, ": checkpoint ", path, " is at step ",
               st.in_epoch, " of an epoch of ", steps_per_epoch_, " steps");
}

GRADUS_INLINE void Session::restore_hook_states(const io::Safetensors& ckpt) {
  for (Hook* h : hooks_) {
    const std::string key = h->state_key();
    if (key.empty()) continue;
    const std::string prefix = "hooks/" + key + "/";
    bool any = false;
    for (const auto& [name, t] : ckpt.tensors) any = any || name.compare(0, prefix.size(), prefix) == 0;
    for (const auto& [name, v] : ckpt.metadata) any = any || name.compare(0, prefix.size(), prefix) == 0;
    if (any) h->restore_state(ckpt, prefix);
  }
}

// Reads and checks everything before it changes anything that is not checked again later:
// loop state, batching, History; then model and optimizer (validated before they are modified),
// Rng, hook states; the loop counters last.
GRADUS_INLINE void Session::restore(const std::filesystem::path& path) { restore_from(io::load_safetensors(path), path); }

GRADUS_INLINE void Session::restore_latest(Session& s) {
  if (const auto latest = io::latest_checkpoint(s.run_dir_)) s.restore(*latest);
}

GRADUS_INLINE void Session::restore_from(const io::Safetensors& ckpt, const std::filesystem::path& path) {
  const detail::LoopState st = detail::read_loop_state(ckpt, path, who_);
  if (!user_driven_) check_resumable(st, path);  // a user's own steps have no batching to check
  History history = detail::read_history(ckpt, path, who_);
  GRADUS_CHECK(io_error, !rng_ || ckpt.find("rng"), who_, ": checkpoint ", path,
               " has no 'rng' entry, but the options' rng is set");
  trainee_->restore_state(ckpt);  // the io helpers validate before they modify
  if (rng_) io::restore_rng(ckpt, *rng_, "rng");
  for (const auto& [name, r] : generators_)  // absent from checkpoints written before layers registered them
    if (ckpt.find(name)) io::restore_rng(ckpt, *r, name);
  restore_hook_states(ckpt);
  set_lr(st.lr);
  pending_->settle();  // the losses of this session's earlier steps go with them
  unaccounted_.clear();
  global_step_ = st.step;
  epoch_ = st.epoch;
  step_in_epoch_ = st.in_epoch;
  loss_count_ = st.count;
  loss_sum_ = st.loss_sum;
  last_loss_ = st.last_loss;
  history_ = std::move(history);
  restored_from_ = path;
}

// ---------------------------------------------------------------------------------- lifecycle

// The chief's state goes to the others as one in-memory checkpoint (the layout above, metadata
// "global_step" and, when the chief restored one, "dist/restored_from").
GRADUS_INLINE void Session::sync_state() {
  if (!collective_) return;
  std::string bytes;
  if (collective_.is_chief()) {
    io::TensorList tensors;
    io::Metadata metadata;
    checkpoint(tensors, metadata);
    metadata["global_step"] = std::to_string(global_step_);
    if (restored_from_) metadata["dist/restored_from"] = restored_from_->string();
    bytes = io::encode_safetensors(tensors, metadata);
  }
  collective_.broadcast(bytes);
  if (collective_.is_chief()) return;
  const io::Safetensors ckpt = io::decode_safetensors(bytes, "<rank 0's state>");
  restore_from(ckpt, "<rank 0's state>");
  restored_from_.reset();
  if (auto it = ckpt.metadata.find("dist/restored_from"); it != ckpt.metadata.end()) restored_from_ = it->second;
}

GRADUS_INLINE void Session::sync_stop() {
  if (!collective_) return;
  std::vector<double> flag{stop_ ? 1.0 : 0.0};
  collective_.max(flag);
  if (flag[0] != 0 && !stop_) request_stop("a hook on another rank requested a stop");
}

GRADUS_INLINE void Session::open() {
  hooks_.clear();
  std::vector<Hook*> savers;
  auto place = [&](Hook* h) {
    if (h->chief_only() && !collective_.is_chief()) return;  // files are the chief's
    (dynamic_cast<CheckpointSaver*>(h) ? savers : hooks_).push_back(h);
  };
  for (Hook* h : user_hooks_) place(h);
  for (const auto& h : owned_hooks_) place(h.get());
  hooks_.insert(hooks_.end(), savers.begin(), savers.end());

  pending_->settle();
  unaccounted_.clear();
  global_step_ = epoch_ = step_in_epoch_ = loss_count_ = 0;
  loss_sum_ = 0;
  last_loss_ = std::numeric_limits<double>::quiet_NaN();
  history_ = {};
  stop_ = false;
  stop_reason_.clear();
  restored_from_.reset();
  nonfinite_step_.reset();
  order_epoch_ = -1;

  mode_before_ = trainee_->is_training();
  trainee_->set_training(true);
  opened_ = true;
  uncaught_at_open_ = std::uncaught_exceptions();

  for (Hook* h : hooks_) h->begin(*this);
  if (!run_dir_.empty() && collective_.is_chief())  // with a Collective, the chief restores for all
    checkpoint_code().restore_latest(*this);
  if (collective_) checkpoint_code().sync_state(*this);
  for (Hook* h : hooks_) h->after_create_session(*this);
  sync_stop();
}

GRADUS_INLINE void Session::restore_mode() {
  if (opened_) trainee_->set_training(mode_before_);
}
#endif  // GRADUS_DEFINE_COMPILED

template <class F>
bool Session::step(F&& forward) {
  if (stop_) return false;
  for (Hook* h : hooks_) h->before_step(*this);
  sync_stop();
  if (stop_) return false;
  trainee_->zero_grad();
  const auto [loss_var, n] = [&] {
    const ::gradus::detail::PrecisionScope mixed(autocast_);
    return forward();
  }();
  using T = typename std::remove_cvref_t<decltype(loss_var)>::value_type;
  auto* typed = dynamic_cast<detail::TypedTrainee<T>*>(trainee_.get());
  GRADUS_CHECK(value_error, typed != nullptr, who_, ": the loss is a Var<", std::is_same_v<T, float> ? "float" : "double",
               "> but the model's element type is ", trainee_->element_type());
  const Tensor<T> loss = typed->apply(loss_var, who_, unregistered_, clip_global_norm_, &collective_);
  ++global_step_;
  ++step_in_epoch_;
  const StepResult r{global_step_, epoch_, step_in_epoch_, n, record_loss(AnyTensor(loss), n)};
  if (validate_every_ > 0 && global_step_ % validate_every_ == 0) evaluate_mid_epoch();
  for (Hook* h : hooks_) h->after_step(*this, r);
  sync_stop();
  return true;
}

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
GRADUS_INLINE StepLoss Session::record_loss(const AnyTensor& value, int64_t n) {
  const double w = n > 0 ? double(n) : 1.0;  // a rank's weight in the mean over ranks
  const bool on_device = std::visit([](const auto& t) { return !t.in_host_memory(); }, value);
  if (!on_device) {
    settle();  // the losses of earlier steps first, should they be on a device
    double loss = std::visit([](const auto& t) { return double(t.item()); }, value);
    if (collective_) {  // the mean over ranks, weighted by batch size (1 each when not given)
      std::vector<double> v{loss * w, w};
      collective_.sum(v);
      loss = v[0] / v[1];
    }
    account(global_step_, loss);
    return StepLoss(loss);
  }
  AnyTensor queued = value;
  double scale = 1;
  if (collective_) {  // Σ loss·w / Σ w = mean(loss·w) · size / Σ w, the mean on the devices
    std::vector<double> weights{w};
    collective_.sum(weights);
    std::vector<AnyTensor> weighted{std::visit(
        [&](const auto& t) -> AnyTensor {
          using T = typename std::remove_cvref_t<decltype(t)>::value_type;
          if constexpr (std::is_floating_point_v<T>)
            return Tensor<T>(gradus::eval(t * T(w)));
          else
            throw value_error("Session: the loss is an int64 tensor");
        },
        value)};
    collective_.average(weighted);
    queued = weighted[0];
    scale = double(collective_.size) / weights[0];
  }
  unaccounted_.emplace_back(global_step_, pending_->push(queued, scale));
  return StepLoss(unaccounted_.back().second, pending_);
}

GRADUS_INLINE void Session::settle() const {
  if (unaccounted_.empty()) return;
  pending_->settle();
  for (const auto& [step, cell] : unaccounted_) account(step, cell->value);
  unaccounted_.clear();
}

GRADUS_INLINE void Session::account(int64_t step, double loss) const {
  last_loss_ = loss;
  if (!std::isfinite(loss) && !nonfinite_step_) nonfinite_step_ = step;
  loss_sum_ += loss;
  ++loss_count_;
}

GRADUS_INLINE void Session::sync_validation(EpochLogs& logs) {
  if (!collective_) return;  // the chief's validation values, so every rank logs and decides the same
  std::vector<double> v;
  if (logs.val_loss) v.push_back(*logs.val_loss);
  for (const auto& [k, x] : logs.val_metrics) v.push_back(x);
  std::string bytes(v.size() * sizeof(double), '\0');
  if (!v.empty()) std::memcpy(bytes.data(), v.data(), bytes.size());
  collective_.broadcast(bytes);
  GRADUS_CHECK(value_error, bytes.size() == v.size() * sizeof(double), who_,
               ": the ranks' validation logs differ: rank 0 has ", bytes.size() / sizeof(double), " values, this rank ",
               v.size());
  if (!v.empty()) std::memcpy(v.data(), bytes.data(), bytes.size());
  size_t i = 0;
  if (logs.val_loss) logs.val_loss = v[i++];
  for (auto& [k, x] : logs.val_metrics) x = v[i++];
}

GRADUS_INLINE void Session::stamp_logs(EpochLogs& logs) {
  settle();
  sync_validation(logs);
  logs.epoch = epoch_;
  logs.global_step = global_step_;
  logs.loss = loss_count_ > 0 ? loss_sum_ / double(loss_count_) : std::numeric_limits<double>::quiet_NaN();
}

GRADUS_INLINE void Session::evaluate_mid_epoch() {
  EpochLogs logs;
  validate(logs);
  stamp_logs(logs);
  history_.evaluations.push_back(std::move(logs));
  for (Hook* h : hooks_) h->after_evaluation(*this, history_.evaluations.back());
}

GRADUS_INLINE const EpochLogs& Session::finish_epoch(EpochLogs logs) {
  stamp_logs(logs);
  history_.epochs.push_back(std::move(logs));
  ++epoch_;
  step_in_epoch_ = loss_count_ = 0;
  loss_sum_ = 0;
  for (Hook* h : hooks_) h->after_epoch(*this, history_.epochs.back());
  sync_stop();
  return history_.epochs.back();
}

GRADUS_INLINE void Session::finish() {
  settle();
  history_.global_step = global_step_;
  history_.stop_reason = stop_reason_;
  history_.nonfinite_step = nonfinite_step_;
  for (Hook* h : hooks_) h->end(*this);
  if (nonfinite_step_) {
    bool shown = false;  // a NanGuard or a ProgressBar already said so
    for (const Hook* h : hooks_) shown = shown || dynamic_cast<const NanGuard*>(h) || dynamic_cast<const ProgressBar*>(h);
    if (!shown) std::cerr << detail::nonfinite_warning(*nonfinite_step_, global_step_) << std::endl;
  }
}
#endif  // GRADUS_DEFINE_COMPILED

// -------------------------------------------------------------------- the user-driven session

template <class F>
bool Session::run(F&& fn) {
  GRADUS_CHECK(value_error, !closed_, "Session::run: the session is closed");
  GRADUS_CHECK(value_error, !failed_, "Session::run: an earlier step or hook of this session threw; ",
               "open a new Session (it restores the last checkpoint)");
  GRADUS_CHECK(value_error, user_driven_, "Session::run: fit drives this session");
  try {
    return step([&] { return detail::loss_and_batch(std::invoke(fn)); });
  } catch (...) {
    failed_ = true;
    throw;
  }
}

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
GRADUS_INLINE const EpochLogs& Session::end_epoch(std::optional<double> val_loss,
                                                  std::vector<std::pair<std::string, double>> val_metrics) {
  GRADUS_CHECK(value_error, user_driven_ && !closed_ && !failed_,
               "Session::end_epoch: the session is ", closed_ ? "closed" : failed_ ? "failed" : "driven by fit");
  GRADUS_CHECK(value_error, step_in_epoch_ > 0, "Session::end_epoch: no step ran since the start of epoch ", epoch_);
  for (const auto& [k, v] : val_metrics)
    GRADUS_CHECK(value_error, !k.empty() && k != "loss" && k != "val_loss", "Session::end_epoch: a validation ",
                 "metric needs a name other than 'loss' and 'val_loss', got '", k, "'");
  try {
    steps_per_epoch_ = step_in_epoch_;
    EpochLogs logs;
    logs.val_loss = val_loss;
    logs.val_metrics = std::move(val_metrics);
    return finish_epoch(std::move(logs));
  } catch (...) {
    failed_ = true;
    throw;
  }
}

GRADUS_INLINE const History& Session::close() {
  if (closed_ || !user_driven_) return history_;
  closed_ = true;
  struct Mode {
    Session& s;
    ~Mode() { s.restore_mode(); }
  } mode{*this};
  if (!failed_) {
    finish();
  } else {
    history_.global_step = global_step_;
    history_.stop_reason = stop_reason_;
    history_.nonfinite_step = nonfinite_step_;
  }
  return history_;
}
#endif  // GRADUS_DEFINE_COMPILED

// Instantiated where a RunDir or a CollectiveBroadcast with a value is made (train/session.hpp):
// the one place that names the checkpoint code a Session reaches through checkpoint_code_slot().
template <class Tag>
const detail::CheckpointCode* detail::checkpoint_code() {
  static constexpr CheckpointCode code{&Session::restore_latest, &Session::sync_state_of, &Session::default_saver};
  return &code;
}

}  // namespace gradus::train
