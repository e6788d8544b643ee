// gradus/train/summary_saver.hpp — the SummarySaver hook (tf.train.SummarySaverHook): loss,
// learning rate and optional weight histograms to TensorBoard through gd::summary::FileWriter.
#pragma once
#include <cstdint>
#include <string>
#include <variant>

#include "gradus/core/compiled.hpp"
#include "gradus/summary.hpp"
#include "gradus/train/hooks.hpp"

namespace gradus::train {

/// Options of SummarySaver.
struct SummarySaverOptions {
  int64_t every_steps = 100;  ///< write when global_step % every_steps == 0 (> 0)
  bool scalars = true;        ///< the scalars "loss" and "learning_rate"
  bool histograms = false;    ///< also a histogram of every parameter, and of its gradient
  bool epochs = true;         ///< also the epoch's entries of the History at each epoch end
};

/// Every `every_steps` global steps writes (with `.scalars`) the scalars "loss" (this step's) and
/// "learning_rate", and with `.histograms` the histograms "<parameter name>" and "<parameter name>/gradient";
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
  GRADUS_INLINE_DECL void after_step(Session& s, const StepResult& r) override;
  GRADUS_INLINE_DECL void after_epoch(Session&, const EpochLogs& logs) override;
  void end(Session&) override { writer_->flush(); }

 private:
  summary::FileWriter* writer_;
  SummarySaverOptions o_;
};

}  // namespace gradus::train

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::train {
GRADUS_INLINE SummarySaver::SummarySaver(summary::FileWriter& writer, SummarySaverOptions o) : writer_(&writer), o_(o) {
  GRADUS_CHECK(value_error, o.every_steps > 0, "SummarySaver: every_steps must be > 0, got ", o.every_steps);
}

GRADUS_INLINE void SummarySaver::after_step(Session& s, const StepResult& r) {
  if (r.global_step % o_.every_steps != 0) return;
  if (o_.scalars) {
    writer_->scalar("loss", r.loss, r.global_step);
    writer_->scalar("learning_rate", s.lr(), r.global_step);
  }
  if (!o_.histograms) return;
  for (const auto& p : s.parameters()) {
    // a GPU's tensors are read back (to(cpu) is the tensor itself on the CPU)
    std::visit([&](const auto& t) { writer_->histogram(p.name, t.to(gradus::cpu), r.global_step); }, p.value);
    if (p.grad)
      std::visit([&](const auto& g) { writer_->histogram(p.name + "/gradient", g.to(gradus::cpu), r.global_step); },
                 *p.grad);
  }
}

GRADUS_INLINE void SummarySaver::after_epoch(Session&, const EpochLogs& logs) {
  if (!o_.epochs) return;
  writer_->scalar("epoch_loss", logs.loss, logs.global_step);
  if (logs.val_loss) writer_->scalar("val_loss", *logs.val_loss, logs.global_step);
  for (const auto& [k, v] : logs.val_metrics) writer_->scalar(k, v, logs.global_step);
}
}  // namespace gradus::train
#endif  // GRADUS_DEFINE_COMPILED
