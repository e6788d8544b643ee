// gradus/train/checkpoint_saver.hpp — the CheckpointSaver hook (tf.train.CheckpointSaverHook):
// periodic checkpoints of the whole training state through gd::io::Saver.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "gradus/train/hooks.hpp"

namespace gradus::train {

/// Options of CheckpointSaver. With both `every_steps` and `every_secs` 0 it saves only at the end.
struct CheckpointSaverOptions {
  int64_t every_steps = 0;     ///< save when global_step % every_steps == 0 (0: not by steps)
  double every_secs = 600;     ///< save when this many seconds passed since the last save (0: not by time)
  int max_to_keep = 5;         ///< older checkpoints are deleted (gd::io::SaverOptions)
  std::filesystem::path dir = {};  ///< empty: the session's run_dir
  std::string prefix = "model.ckpt";  ///< files "<dir>/<prefix>-<step>.safetensors"
};

/// Saves a checkpoint (Session::checkpoint: model, optimizer, rng, loop and hook state) after a
/// step when its timer fires, and at the end of the run unless the last step was just saved.
/// fit adds one with default options when run_dir is set and no CheckpointSaver is given; restore
/// at start always reads run_dir, so point `dir` elsewhere only for exports.
///   gd::train::CheckpointSaver saver({.every_steps = 1000, .every_secs = 0, .max_to_keep = 3});
class CheckpointSaver : public Hook {
 public:
  explicit CheckpointSaver(CheckpointSaverOptions o = {}) : o_(std::move(o)) {
    GRADUS_CHECK(value_error, o_.every_steps >= 0 && o_.every_secs >= 0,
                 "CheckpointSaver: every_steps and every_secs must be >= 0, got ", o_.every_steps, " and ",
                 o_.every_secs);
    GRADUS_CHECK(value_error, o_.max_to_keep >= 1, "CheckpointSaver: max_to_keep must be >= 1, got ", o_.max_to_keep);
  }

  void begin(Session& s) override {
    const std::filesystem::path dir = o_.dir.empty() ? s.run_dir() : o_.dir;
    GRADUS_CHECK(value_error, !dir.empty(), "CheckpointSaver: no directory: set FitOptions::run_dir or .dir");
    saver_ = std::make_unique<io::Saver>(dir, io::SaverOptions{.max_to_keep = o_.max_to_keep, .prefix = o_.prefix});
    timer_ = {o_.every_steps, o_.every_secs, detail::Clock::now()};
    last_saved_.reset();
  }
  void after_create_session(Session& s) override {
    timer_.reset();
    last_saved_ = s.global_step();  // what is on disk already (or the initial state: nothing to add)
    if (!s.restored_from()) last_saved_.reset();
  }
  void after_step(Session& s, const StepResult& r) override {
    if (timer_.should_fire(r.global_step)) save(s);
  }
  void end(Session& s) override {
    if (!last_saved_ || *last_saved_ != s.global_step()) save(s);
  }

  /// The path of the last checkpoint this hook wrote, if any.
  const std::optional<std::filesystem::path>& last_path() const { return last_path_; }
  /// The underlying saver (valid from begin on).
  io::Saver* saver() const { return saver_.get(); }

 private:
  void save(Session& s) {
    last_path_ = s.save_checkpoint(*saver_);
    last_saved_ = s.global_step();
    timer_.reset();
  }

  CheckpointSaverOptions o_;
  std::unique_ptr<io::Saver> saver_;
  detail::Timer timer_;
  std::optional<int64_t> last_saved_;
  std::optional<std::filesystem::path> last_path_;
};

}  // namespace gradus::train
