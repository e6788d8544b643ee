// gradus/train/summary_saver.hpp — the SummarySaver hook (tf.train.SummarySaverHook): loss,
// learning rate and optional weight histograms to TensorBoard through gd::summary::FileWriter.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>
#include <variant>

#include "gradus/core/compiled.hpp"
#include "gradus/summary/writer.hpp"
#include "gradus/train/hooks.hpp"

namespace gradus::train {

/// Options of SummarySaver.
struct SummarySaverOptions {
  int64_t every_steps = 100;  ///< write when global_step % every_steps == 0 (0: not by steps)
  double every_secs = 0;      ///< also write when this many seconds passed since the last write (0: not by time)
  bool scalars = true;        ///< the scalars "loss" and "learning_rate"
  bool steps_per_sec = true;  ///< the scalar "global_step/sec" since the previous write (TF's StepCounterHook)
  bool histograms = false;    ///< also a histogram of every parameter, and of its gradient
  bool epochs = true;         ///< also the epoch's entries of the History at each epoch end
};

/// Every `every_steps` global steps, or `every_secs` seconds, writes (with `.scalars`) the scalars
/// "loss" (this step's) and "learning_rate", with `.steps_per_sec` "global_step/sec" (the steps
/// per second since the previous write or the session's start), and with
/// `.histograms` the histograms "<parameter name>" and "<parameter name>/gradient";
/// after each epoch (with `.epochs`) the scalars "epoch_loss", "val_loss" and "val_<metric>" at
/// the epoch's last global step. Flushes the writer at the end of the run. The writer must
/// outlive the hook.
///   gd::summary::FileWriter writer("runs/mlp");
///   gd::train::SummarySaver summaries(writer, {.every_steps = 50, .histograms = true});
class SummarySaver : public Hook {
 public:
  /// Writes files: with a Collective, the chief (rank 0) alone runs it.
  bool chief_only() const override { return true; }
  explicit SummarySaver(summary::FileWriter& writer, SummarySaverOptions o = {});
  GRADUS_INLINE_DECL void after_create_session(Session& s) override;
  GRADUS_INLINE_DECL void after_step(Session& s, const StepResult& r) override;
  GRADUS_INLINE_DECL void after_epoch(Session&, const EpochLogs& logs) override;
  GRADUS_INLINE_DECL void after_evaluation(Session&, const EpochLogs& logs) override;
  void end(Session&) override { writer_->flush(); }

 private:
  summary::FileWriter* writer_;
  SummarySaverOptions o_;
  std::chrono::steady_clock::time_point last_time_{};
  int64_t last_step_ = -1;  // -1: nothing written yet in this run
};

}  // namespace gradus::train

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::train {
GRADUS_INLINE SummarySaver::SummarySaver(summary::FileWriter& writer, SummarySaverOptions o) : writer_(&writer), o_(o) {
  GRADUS_CHECK(value_error, o.every_steps >= 0 && o.every_secs >= 0 && (o.every_steps > 0 || o.every_secs > 0),
               "SummarySaver: every_steps and every_secs must be >= 0 and one of them > 0, got ", o.every_steps, " and ",
               o.every_secs);
}

GRADUS_INLINE void SummarySaver::after_create_session(Session& s) {
  last_time_ = std::chrono::steady_clock::now();
  last_step_ = s.global_step();
}

GRADUS_INLINE void SummarySaver::after_step(Session& s, const StepResult& r) {
  const auto now = std::chrono::steady_clock::now();
  const double secs = std::chrono::duration<double>(now - last_time_).count();
  const bool by_steps = o_.every_steps > 0 && r.global_step % o_.every_steps == 0;
  if (!by_steps && !(o_.every_secs > 0 && secs >= o_.every_secs)) return;
  if (o_.scalars) {
    writer_->scalar("loss", r.loss, r.global_step);
    writer_->scalar("learning_rate", s.lr(), r.global_step);
  }
  if (o_.steps_per_sec && secs > 0 && r.global_step > last_step_)
    writer_->scalar("global_step/sec", double(r.global_step - last_step_) / secs, r.global_step);
  last_time_ = now;
  last_step_ = r.global_step;
  if (!o_.histograms) return;
  for (const auto& p : s.parameters()) {
    // a GPU's tensors are read back (to(cpu) is the tensor itself on the CPU)
    std::visit([&](const auto& t) { writer_->histogram(p.name, t.to(gradus::cpu), r.global_step); }, p.value);
    if (p.grad)
      std::visit([&](const auto& g) { writer_->histogram(p.name + "/gradient", g.to(gradus::cpu), r.global_step); },
                 *p.grad);
  }
}

GRADUS_INLINE void SummarySaver::after_evaluation(Session&, const EpochLogs& logs) {
  if (!o_.epochs) return;  // the validation entries at the step they ran at
  if (logs.val_loss) writer_->scalar("val_loss", *logs.val_loss, logs.global_step);
  for (const auto& [k, v] : logs.val_metrics) writer_->scalar(k, v, logs.global_step);
}

GRADUS_INLINE void SummarySaver::after_epoch(Session&, const EpochLogs& logs) {
  if (!o_.epochs) return;
  writer_->scalar("epoch_loss", logs.loss, logs.global_step);
  if (logs.val_loss) writer_->scalar("val_loss", *logs.val_loss, logs.global_step);
  for (const auto& [k, v] : logs.val_metrics) writer_->scalar(k, v, logs.global_step);
}
}  // namespace gradus::train
#endif  // GRADUS_DEFINE_COMPILED
