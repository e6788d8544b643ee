// gradus/train/projector_hook.hpp — the ProjectorHook: exports an embedding table for
// TensorBoard's projector (summary/projector.hpp) at the end of a run.
#pragma once
#include <filesystem>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "gradus/core/compiled.hpp"
#include "gradus/summary/projector.hpp"
#include "gradus/train/session.hpp"

namespace gradus::train {

/// Options of ProjectorHook: the embedding's name and labels as in summary::ProjectorEmbedding,
/// and the log directory (empty: the session's run_dir).
struct ProjectorHookOptions {
  std::string name = "embedding";                           ///< folder and tensor_name (letters, digits, _ - .)
  std::vector<std::string> metadata_header = {};            ///< column names (needed with > 1 column)
  std::vector<std::vector<std::string>> metadata_rows = {};  ///< one row of labels per vector, or none
  std::optional<Tensor<float>> sprite_images = std::nullopt;  ///< [N, H, W, C] in [0, 1], or none
  std::filesystem::path logdir = {};                        ///< empty: the session's run_dir
};

/// At the end of a run (Hook::end) writes the value of `table` ([N, D], e.g. an nn::Embedding's
/// embeddings()) with the given labels into logdir with summary::write_projector, so that
/// `tensorboard --logdir <logdir>` shows it in the Projector tab. The table is read when the run
/// ends, so it holds the trained values. value_error at construction for labels that do not match
/// the table, and at begin when neither a logdir nor the session's run_dir is set.
///   gd::train::ProjectorHook proj(embedding.embeddings(), {.name = "words", .metadata_rows = words});
///   gd::train::Session session(model, opt, {.run_dir = "runs/lm", .hooks = {&proj}});
class ProjectorHook : public Hook {
 public:
  /// Writes files: with a Collective, the chief (rank 0) alone runs it.
  bool chief_only() const override { return true; }
  ProjectorHook(std::variant<Var<float>, Var<double>> table, ProjectorHookOptions o = {});

  GRADUS_INLINE_DECL void begin(Session& s) override;

  GRADUS_INLINE_DECL void end(Session& s) override;

  /// Writes the table's current value into `logdir` now (what end does).
  void write(const std::filesystem::path& logdir) const;

 private:
  std::variant<Var<float>, Var<double>> table_;
  ProjectorHookOptions o_;
};

}  // namespace gradus::train

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::train {
GRADUS_INLINE ProjectorHook::ProjectorHook(std::variant<Var<float>, Var<double>> table, ProjectorHookOptions o)
    : table_(std::move(table)), o_(std::move(o)) {
  const Shape s = std::visit([](const auto& v) { return v.value().shape(); }, table_);
  GRADUS_CHECK(shape_error, s.rank() == 2, "ProjectorHook: expected a table [N, D], got shape ", s);
  GRADUS_CHECK(value_error, o_.metadata_rows.empty() || int64_t(o_.metadata_rows.size()) == s[0],
               "ProjectorHook: expected ", s[0], " metadata rows (one per vector of the table), got ",
               o_.metadata_rows.size());
}

GRADUS_INLINE void ProjectorHook::begin(Session& s) {
  GRADUS_CHECK(value_error, !o_.logdir.empty() || !s.run_dir().empty(), "ProjectorHook '", o_.name,
               "': expected a logdir in its options or a session with a run_dir, got neither");
}

GRADUS_INLINE void ProjectorHook::end(Session& s) { write(o_.logdir.empty() ? s.run_dir() : o_.logdir); }

GRADUS_INLINE void ProjectorHook::write(const std::filesystem::path& logdir) const {
  summary::ProjectorEmbedding e{.tensor_name = o_.name,
                                .tensor = std::visit(
                                    [](const auto& v) -> decltype(summary::ProjectorEmbedding::tensor) {
                                      return v.value().to(gradus::cpu);
                                    },
                                    table_),
                                .metadata_header = o_.metadata_header,
                                .metadata_rows = o_.metadata_rows,
                                .sprite_images = o_.sprite_images};
  summary::write_projector(logdir, {e});
}
}  // namespace gradus::train
#endif  // GRADUS_DEFINE_COMPILED
