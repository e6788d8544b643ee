// gradus/train/profiler_hook.hpp — ProfilerHook: profiles one training step every N steps
// (tf.train.ProfilerHook) and writes what gd::profile shows: a Chrome trace, the op / scope /
// parameter tables, and the step's graph with its timings for TensorBoard.
#pragma once
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "gradus/core/compiled.hpp"
#include "gradus/io/file.hpp"
#include "gradus/profile/graph.hpp"
#include "gradus/profile/profiler.hpp"
#include "gradus/profile/report.hpp"
#include "gradus/profile/trace.hpp"
#include "gradus/summary/writer.hpp"
#include "gradus/train/session.hpp"

namespace gradus::train {

/// Options of ProfilerHook.
struct ProfilerHookOptions {
  int64_t every_steps = 100;  ///< profile each step that starts when global_step % every_steps == 0 (> 0)
  std::filesystem::path output_dir = {};  ///< empty: the session's run_dir
  bool trace = true;   ///< write trace-<step>.json (Chrome trace: chrome://tracing, ui.perfetto.dev)
  bool tables = true;  ///< write profile-<step>.txt: ops by self time, module scopes, parameters
  bool graph = true;   ///< write the first profiled step's graph and every profiled step's timings
                       ///< into an event file (suffix ".profile") that TensorBoard reads with the run
  int top = 25;        ///< rows of the op table (0: all)
  std::ostream* print = nullptr;  ///< also print the op table here after each profiled step
};

/// Profiles whole training steps of a `fit` or a Session: every op, forward and backward, and
/// the optimizer's update, filed under the model's module paths. Writes into the output dir
///   trace-<step>.json     the step as a Chrome trace (one lane per thread)
///   profile-<step>.txt    the op table, the module-scope table and the parameter table
///   events.out.tfevents.*.profile   the graph (Graphs tab) and the step's per-node timings
/// where <step> is the global step at which the profiled step started.
///   gd::train::ProfilerHook prof(net, {.every_steps = 500});
///   gd::train::fit(net, opt, loss, data, {.run_dir = "runs/cnn", .hooks = {&prof}});
/// The hook owns a gd::profile::Profiler; only one profiler runs at a time (value_error otherwise).
class ProfilerHook : public Hook {
 public:
  /// Writes files: with a Collective, the chief (rank 0) alone runs it.
  bool chief_only() const override { return true; }
  template <Real T>
  explicit ProfilerHook(nn::Module<T>& model, ProfilerHookOptions o = {}) : o_(std::move(o)) {
    GRADUS_CHECK(value_error, o_.every_steps > 0, "ProfilerHook: every_steps must be > 0, got ", o_.every_steps);
    profiler_.attach(model);
  }

  GRADUS_INLINE_DECL void begin(Session& s) override;
  GRADUS_INLINE_DECL void before_step(Session& s) override;
  GRADUS_INLINE_DECL void after_step(Session&, const StepResult&) override;
  GRADUS_INLINE_DECL void end(Session&) override;

  /// The events of the last profiled step.
  const std::vector<profile::Event>& last_events() const { return last_; }
  /// The global steps profiled so far in this run.
  const std::vector<int64_t>& profiled_steps() const { return steps_; }

 private:
  void write(std::vector<profile::Event> events);

  ProfilerHookOptions o_;
  profile::Profiler profiler_;
  std::filesystem::path dir_;
  std::unique_ptr<summary::FileWriter> writer_;
  std::vector<profile::Event> last_;
  std::vector<int64_t> steps_;
  int64_t step_ = 0;
  bool graph_written_ = false;
};

}  // namespace gradus::train

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::train {
GRADUS_INLINE void ProfilerHook::begin(Session& s) {
  dir_ = o_.output_dir.empty() ? s.run_dir() : o_.output_dir;
  GRADUS_CHECK(value_error, !dir_.empty(),
               "ProfilerHook: expected an output_dir in its options or a session with a run_dir, got neither");
  std::filesystem::create_directories(dir_);
  graph_written_ = false;
}

GRADUS_INLINE void ProfilerHook::before_step(Session& s) {
  if (s.global_step() % o_.every_steps != 0) return;
  profiler_.clear();
  profiler_.start();
  step_ = s.global_step();
}

GRADUS_INLINE void ProfilerHook::after_step(Session&, const StepResult&) {
  if (!profiler_.active()) return;
  profiler_.stop();
  write(profiler_.events());
}

GRADUS_INLINE void ProfilerHook::end(Session&) {
  if (profiler_.active()) profiler_.stop();
  writer_.reset();  // flushes the event file
}

GRADUS_INLINE void ProfilerHook::write(std::vector<profile::Event> events) {
  const std::string tag = std::to_string(step_);
  if (o_.trace) profile::write_chrome_trace(dir_ / ("trace-" + tag + ".json"), events);
  if (o_.tables || o_.print) {
    const std::string ops =
        profile::format_report(profile::report(events, {.group_by = profile::GroupBy::op, .top = o_.top}),
                               "ops of step " + tag + " (self time)");
    if (o_.print) *o_.print << ops << std::flush;
    if (o_.tables) {
      const std::string scopes = profile::format_report(
          profile::report(events, {.group_by = profile::GroupBy::scope, .nested_scopes = true}),
          "module scopes of step " + tag);
      io::write_file_atomic(dir_ / ("profile-" + tag + ".txt"),
                            ops + "\n" + scopes + "\n" + profile::format_parameters(profiler_.parameters()));
    }
  }
  if (o_.graph) {
    if (!writer_) writer_ = std::make_unique<summary::FileWriter>(dir_, summary::WriterOptions{.filename_suffix = ".profile"});
    if (!graph_written_) writer_->graph(profile::graph_def(events, profiler_.parameters())), graph_written_ = true;
    writer_->run_metadata("step_" + tag, step_, profile::step_stats(events));
    writer_->flush();
  }
  steps_.push_back(step_);
  last_ = std::move(events);
}
}  // namespace gradus::train
#endif  // GRADUS_DEFINE_COMPILED
