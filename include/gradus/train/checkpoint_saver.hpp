// gradus/train/checkpoint_saver.hpp — the CheckpointSaver hook (tf.train.CheckpointSaverHook):
// periodic checkpoints of the whole training state through gd::io::Saver.
#pragma once
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "gradus/core/compiled.hpp"
#include "gradus/train/hooks.hpp"

namespace gradus::train {

// CheckpointSaverOptions (every_steps, every_secs, every_epochs, max_to_keep, dir, prefix) are
// declared in train/session.hpp, since the options of a Session hold them.

/// Saves a checkpoint (Session::checkpoint: model, optimizer, rng, loop and hook state) after a
/// step when its timer fires, after every `every_epochs` epochs (then the checkpoint holds the
/// finished epoch: a resumed run starts the next one), and at the end of the run unless nothing
/// changed since the last save. A checkpoint written after a step in the middle of an epoch's end
/// is not a problem either way: a run resumed from the epoch's last step finishes that epoch
/// (validation, History, after_epoch hooks) before going on.
/// fit and a user Session add one with default options when run_dir is set and no CheckpointSaver
/// is given; restore at start always reads run_dir, so point `dir` elsewhere only for exports.
///   gd::train::CheckpointSaver saver({.every_steps = 1000, .max_to_keep = 3});
class CheckpointSaver : public Hook {
 public:
  /// Writes files: with a Collective, the chief (rank 0) alone runs it.
  bool chief_only() const override { return true; }
  explicit CheckpointSaver(CheckpointSaverOptions o = {});
  GRADUS_INLINE_DECL ~CheckpointSaver() override;
  CheckpointSaver(CheckpointSaver&&) = default;
  CheckpointSaver& operator=(CheckpointSaver&&) = default;

  /// The time schedule in use, in seconds (0: none): `every_secs`, or its default when unset.
  double every_secs() const { return every_secs_; }

  GRADUS_INLINE_DECL void begin(Session& s) override;
  GRADUS_INLINE_DECL void after_create_session(Session& s) override;
  GRADUS_INLINE_DECL void after_step(Session& s, const StepResult& r) override;
  GRADUS_INLINE_DECL void after_epoch(Session& s, const EpochLogs& logs) override;
  GRADUS_INLINE_DECL void end(Session& s) override;

  /// The path of the last checkpoint this hook wrote, if any.
  const std::optional<std::filesystem::path>& last_path() const { return last_path_; }
  /// The underlying saver (valid from begin on).
  io::Saver* saver() const { return saver_.get(); }

 private:
  void save(Session& s);

  CheckpointSaverOptions o_;
  double every_secs_;
  std::unique_ptr<io::Saver> saver_;
  detail::Timer timer_;
  bool unsaved_ = true;  // the session changed since the last checkpoint (or there is none)
  std::optional<std::filesystem::path> last_path_;
  int64_t skipped_ = 0;  // checkpoints not written since the state became non-finite
};

}  // namespace gradus::train

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::train {
GRADUS_INLINE CheckpointSaver::CheckpointSaver(CheckpointSaverOptions o)
    : o_(std::move(o)),
      every_secs_(o_.every_secs.value_or(o_.every_steps == 0 && o_.every_epochs == 0 ? 600.0 : 0.0)) {
  GRADUS_CHECK(value_error, o_.every_steps >= 0 && every_secs_ >= 0 && o_.every_epochs >= 0,
               "CheckpointSaver: every_steps, every_secs and every_epochs must be >= 0, got ", o_.every_steps,
               ", ", every_secs_, " and ", o_.every_epochs);
  GRADUS_CHECK(value_error, o_.max_to_keep >= 1, "CheckpointSaver: max_to_keep must be >= 1, got ", o_.max_to_keep);
}

GRADUS_INLINE CheckpointSaver::~CheckpointSaver() = default;

GRADUS_INLINE void CheckpointSaver::begin(Session& s) {
  const std::filesystem::path dir = o_.dir.empty() ? s.run_dir() : o_.dir;
  GRADUS_CHECK(value_error, !dir.empty(), "CheckpointSaver: no directory: set the run_dir of fit or of the Session, or .dir");
  saver_ = std::make_unique<io::Saver>(dir, io::SaverOptions{.max_to_keep = o_.max_to_keep, .prefix = o_.prefix});
  timer_ = {o_.every_steps, every_secs_, detail::Clock::now()};
  unsaved_ = true;
}

GRADUS_INLINE void CheckpointSaver::after_create_session(Session& s) {
  timer_.reset();
  unsaved_ = !s.restored_from();  // a restored state is on disk already
}

GRADUS_INLINE void CheckpointSaver::after_step(Session& s, const StepResult& r) {
  unsaved_ = true;
  if (timer_.should_fire(r.global_step)) save(s);
}

GRADUS_INLINE void CheckpointSaver::after_epoch(Session& s, const EpochLogs& logs) {
  unsaved_ = true;
  if (o_.every_epochs > 0 && (logs.epoch + 1) % o_.every_epochs == 0) save(s);
}

GRADUS_INLINE void CheckpointSaver::end(Session& s) {
  if (unsaved_) save(s);
}

GRADUS_INLINE void CheckpointSaver::save(Session& s) {
  unsaved_ = false;
  timer_.reset();
  io::TensorList tensors;
  io::Metadata metadata;
  s.checkpoint(tensors, metadata);
  for (auto& [name, t] : tensors) {
    if (!o_.skip_non_finite || !(name.starts_with("model/") || name.starts_with("optimizer/"))) continue;
    // to the host once, here: the check and the encoder then read the same copy
    t = std::visit([](const auto& x) { return AnyTensor(x.to(gradus::cpu)); }, t);
    if (all_finite(t)) continue;
    if (skipped_++ == 0)
      std::cerr << "gd::train::CheckpointSaver: step " << s.global_step() << ": '" << name
                << "' holds a non-finite value; this and later such checkpoints are not written, so "
                << (last_path_ ? "the last finite one, " + last_path_->filename().string() + "," : "no checkpoint")
                << " is kept (CheckpointSaverOptions::skip_non_finite; gd::train::NanGuard stops such a run)"
                << std::endl;
    return;
  }
  last_path_ = saver_->save(s.global_step(), tensors, std::move(metadata));
  skipped_ = 0;
}
}  // namespace gradus::train
#endif  // GRADUS_DEFINE_COMPILED
