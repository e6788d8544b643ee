// gradus/io/saver.hpp — a directory of numbered checkpoints, as tf.train.Saver keeps them.
//
// Saver(dir).save(step, tensors) writes "<dir>/<prefix>-<step>.safetensors" (metadata
// "global_step" = step) and then the state file "<dir>/checkpoint", both atomically. The state
// file is text in the form TensorFlow uses, with file names relative to the directory:
//   model_checkpoint_path: "model.ckpt-300.safetensors"
//   all_model_checkpoint_paths: "model.ckpt-200.safetensors"
//   all_model_checkpoint_paths: "model.ckpt-300.safetensors"
// `model_checkpoint_path` is the newest checkpoint; `all_model_checkpoint_paths` lists every kept
// one, oldest first. Beyond max_to_keep the oldest are deleted (max_to_keep <= 0 keeps all). A
// Saver on a directory that already has a state file continues its list.
//
// latest_checkpoint(dir) reads the state file. When the file it names has gone missing, it falls
// back to the newest kept file that still exists, and to std::nullopt when none does (or when
// there is no state file). Stray temporary files of an interrupted write are never listed, so they
// are never picked up; after each successful save the Saver collects what interrupted runs left
// behind (see Saver::save). The state file may only name files inside the directory; one that names a
// path elsewhere, or is malformed, raises io_error. Unknown keys (TensorFlow's timestamps) are ignored.
#pragma once
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "gradus/core/compiled.hpp"
#include "gradus/io/file.hpp"
#include "gradus/io/safetensors.hpp"

namespace gradus::io {

/// Saver settings: how many checkpoints to keep (<= 0: all) and the file name prefix
/// (a plain file name: no '/', no control characters).
struct SaverOptions {
  int max_to_keep = 5;
  std::string prefix = "model.ckpt";
};

/// The content of a checkpoint directory's state file "checkpoint".
struct CheckpointState {
  std::string latest;              ///< file name of the newest checkpoint
  std::vector<std::string> kept;   ///< every kept checkpoint's file name, oldest first, `latest` last
};

namespace detail {

bool has_control_char(std::string_view s);
/// True for a plain file name inside a directory: not empty, ".", "..", no '/' or control characters.
bool plain_file_name(std::string_view s);

/// `dir/name` for the newest name in `kept` (searched from the back) that exists as a file.
std::optional<std::filesystem::path> newest_existing(const std::filesystem::path& dir,
                                                     const std::vector<std::string>& kept);

void append_quoted(std::string& out, std::string_view s);

}  // namespace detail

/// The text of a state file for `state` (see the file comment); value_error for a name that is
/// not a plain file name.
std::string encode_checkpoint_state(const CheckpointState& state);

/// Parses a state file's text; `source` names it in errors. The newest checkpoint is appended to
/// `kept` when the list omits it. io_error for a malformed line, a missing model_checkpoint_path
/// or a name that is not a plain file name in the directory.
CheckpointState decode_checkpoint_state(std::string_view text, std::string_view source = "<memory>");

/// The state file of checkpoint directory `dir`, or std::nullopt when it has none.
std::optional<CheckpointState> read_checkpoint_state(const std::filesystem::path& dir);

/// The newest checkpoint of `dir` per its state file (falling back to the newest kept file that
/// exists), or std::nullopt when there is no state file or no listed file exists.
std::optional<std::filesystem::path> latest_checkpoint(const std::filesystem::path& dir);

/// Writes numbered checkpoints into a directory and keeps its state file (see the file comment).
///   gd::io::Saver saver("run1", {.max_to_keep = 3});
///   gd::io::TensorList c;  gd::io::add_module(c, net);  saver.save(step, c);
class Saver {
 public:
  /// Creates `dir` (and its parents) when missing and reads its state file when there is one.
  explicit Saver(std::filesystem::path dir, SaverOptions options = {});

  /// Writes the checkpoint of `step` (metadata gets "global_step" = step), updates the state file,
  /// deletes the oldest beyond max_to_keep; returns the written path. Saving a step again replaces
  /// its file and makes it the newest. On an error the state file and the kept checkpoints are as
  /// before (a checkpoint written before the state file failed stays, unlisted). After a successful
  /// save, the debris of interrupted runs is deleted: checkpoints "<prefix>-<step>.safetensors" that
  /// the state file does not list, and temporary files of this directory's state file or of such
  /// checkpoints whose writing process no longer exists. Other files are never touched.
  std::filesystem::path save(int64_t step, const TensorList& tensors, Metadata metadata = {});

  /// The newest checkpoint this saver knows of that exists (see latest_checkpoint), or std::nullopt.
  std::optional<std::filesystem::path> latest() const { return detail::newest_existing(dir_, kept_); }
  /// The checkpoint directory.
  const std::filesystem::path& directory() const { return dir_; }
  /// File names of the kept checkpoints, oldest first (as in the state file).
  const std::vector<std::string>& checkpoints() const { return kept_; }

 private:
  /// True for "<prefix>-<digits>.safetensors".
  bool checkpoint_name(std::string_view f) const;
  /// True for the (possibly cut) target name of a temporary file this saver writes.
  bool own_target(std::string_view target) const;
  /// Deletes unlisted checkpoints and stale temporaries (see save); errors are ignored.
  void collect_debris() const;

  std::filesystem::path dir_;
  SaverOptions options_;
  std::vector<std::string> kept_;
};

}  // namespace gradus::io

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::io::detail {
GRADUS_INLINE bool has_control_char(std::string_view s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F) return true;
  return false;
}

GRADUS_INLINE bool plain_file_name(std::string_view s) {
  return !s.empty() && s != "." && s != ".." && s.find('/') == std::string_view::npos && !has_control_char(s);
}

GRADUS_INLINE void append_quoted(std::string& out, std::string_view s) {
  out += '"';
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  out += '"';
}

GRADUS_INLINE std::optional<std::filesystem::path> newest_existing(const std::filesystem::path& dir,
                                                                   const std::vector<std::string>& kept) {
  for (auto it = kept.rbegin(); it != kept.rend(); ++it) {
    std::error_code ec;
    std::filesystem::path p = dir / *it;
    if (std::filesystem::is_regular_file(p, ec)) return p;
  }
  return std::nullopt;
}
}  // namespace gradus::io::detail
namespace gradus::io {
GRADUS_INLINE std::string encode_checkpoint_state(const CheckpointState& state) {
  std::string out = "model_checkpoint_path: ";
  GRADUS_CHECK(value_error, detail::plain_file_name(state.latest), "encode_checkpoint_state: '", state.latest,
               "' is not a plain file name");
  detail::append_quoted(out, state.latest);
  out += '\n';
  for (const std::string& name : state.kept) {
    GRADUS_CHECK(value_error, detail::plain_file_name(name), "encode_checkpoint_state: '", name,
                 "' is not a plain file name");
    out += "all_model_checkpoint_paths: ";
    detail::append_quoted(out, name);
    out += '\n';
  }
  return out;
}

GRADUS_INLINE CheckpointState decode_checkpoint_state(std::string_view text, std::string_view source) {
  CheckpointState state;
  bool have_latest = false;
  size_t line_no = 0;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    ++line_no;
    auto fail = [&](const auto&... parts) {
      ::gradus::detail::throw_error<io_error>({"checkpoint state file '", source, "', line ", line_no, ": ", parts...});
    };
    const auto ws = [](char c) { return c == ' ' || c == '\t' || c == '\r'; };
    while (!line.empty() && ws(line.front())) line.remove_prefix(1);
    while (!line.empty() && ws(line.back())) line.remove_suffix(1);
    if (line.empty() || line.front() == '#') continue;
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) fail("expected 'key: \"value\"'");
    std::string_view key = line.substr(0, colon), value = line.substr(colon + 1);
    while (!key.empty() && ws(key.back())) key.remove_suffix(1);
    while (!value.empty() && ws(value.front())) value.remove_prefix(1);
    const bool is_latest = key == "model_checkpoint_path", is_kept = key == "all_model_checkpoint_paths";
    if (!is_latest && !is_kept) continue;  // e.g. TensorFlow's all_model_checkpoint_timestamps
    if (value.size() < 2 || value.front() != '"') fail(key, " must be a quoted string");
    std::string name;
    size_t i = 1;
    for (; i < value.size() && value[i] != '"'; ++i) {
      char c = value[i];
      if (c == '\\') {
        if (++i == value.size()) fail("the string ends inside an escape");
        switch (value[i]) {
          case '"': case '\\': case '\'': c = value[i]; break;
          case 'n': c = '\n'; break;
          case 't': c = '\t'; break;
          case 'r': c = '\r'; break;
          default: fail("unknown escape '\\", value[i], "'");
        }
      }
      name += c;
    }
    if (i >= value.size()) fail("the string of ", key, " is not closed");
    if (i + 1 != value.size()) fail("unexpected text after the string of ", key);
    if (!detail::plain_file_name(name))
      fail(key, " '", name, "' is not a plain file name in the checkpoint directory");
    if (is_latest) {
      if (have_latest) fail("model_checkpoint_path appears twice");
      have_latest = true;
      state.latest = std::move(name);
    } else {
      state.kept.push_back(std::move(name));
    }
  }
  GRADUS_CHECK(io_error, have_latest, "checkpoint state file '", source, "' has no model_checkpoint_path");
  if (state.kept.empty() || state.kept.back() != state.latest) {
    std::erase(state.kept, state.latest);
    state.kept.push_back(state.latest);
  }
  return state;
}

GRADUS_INLINE std::optional<CheckpointState> read_checkpoint_state(const std::filesystem::path& dir) {
  const std::filesystem::path file = dir / "checkpoint";
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) return std::nullopt;
  return decode_checkpoint_state(detail::read_file_limited(file, uint64_t(1) << 24, "latest_checkpoint"),
                                 file.string());
}

GRADUS_INLINE std::optional<std::filesystem::path> latest_checkpoint(const std::filesystem::path& dir) {
  const std::optional<CheckpointState> state = read_checkpoint_state(dir);
  if (!state) return std::nullopt;
  return detail::newest_existing(dir, state->kept);
}
}  // namespace gradus::io
#endif  // GRADUS_DEFINE_COMPILED

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::io {
GRADUS_INLINE Saver::Saver(std::filesystem::path dir, SaverOptions options)
    : dir_(std::move(dir)), options_(std::move(options)) {
  GRADUS_CHECK(value_error, detail::plain_file_name(options_.prefix), "Saver: prefix '", options_.prefix,
               "' must be a plain file name (non-empty, no '/', no control characters)");
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  GRADUS_CHECK(io_error, !ec, "Saver: cannot create directory '", dir_.string(), "': ", ec.message());
  GRADUS_CHECK(io_error, std::filesystem::is_directory(dir_, ec), "Saver: '", dir_.string(), "' is not a directory");
  if (auto state = read_checkpoint_state(dir_)) kept_ = std::move(state->kept);
}

GRADUS_INLINE bool Saver::checkpoint_name(std::string_view f) const {
  const std::string head = options_.prefix + "-";
  constexpr std::string_view tail = ".safetensors";
  if (f.size() <= head.size() + tail.size() || !f.starts_with(head) || !f.ends_with(tail)) return false;
  const std::string_view digits = f.substr(head.size(), f.size() - head.size() - tail.size());
  return std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
}

GRADUS_INLINE bool Saver::own_target(std::string_view target) const {
  if (target == "checkpoint" || checkpoint_name(target)) return true;
  return target.size() == 200 && target.starts_with(std::string_view(options_.prefix + "-").substr(0, 200));
}

GRADUS_INLINE std::filesystem::path Saver::save(int64_t step, const TensorList& tensors, Metadata metadata) {
  GRADUS_CHECK(value_error, step >= 0, "Saver::save: step must be >= 0, got ", step);
  const std::string name = options_.prefix + "-" + std::to_string(step) + ".safetensors";
  const std::filesystem::path path = dir_ / name;
  metadata["global_step"] = std::to_string(step);
  write_file_atomic(path, encode_safetensors(tensors, metadata));

  std::vector<std::string> kept = kept_;
  std::erase(kept, name);
  kept.push_back(name);
  std::vector<std::string> doomed;
  if (options_.max_to_keep > 0 && kept.size() > size_t(options_.max_to_keep)) {
    const auto drop = kept.size() - size_t(options_.max_to_keep);
    doomed.assign(kept.begin(), kept.begin() + std::ptrdiff_t(drop));
    kept.erase(kept.begin(), kept.begin() + std::ptrdiff_t(drop));
  }
  write_file_atomic(dir_ / "checkpoint", encode_checkpoint_state({name, kept}));
  kept_ = std::move(kept);
  // Unlisted now; a file that cannot be removed is left behind, harmlessly.
  for (const std::string& old : doomed) {
    std::error_code ec;
    std::filesystem::remove(dir_ / old, ec);
  }
  collect_debris();
  return path;
}

GRADUS_INLINE void Saver::collect_debris() const {
  std::vector<std::filesystem::path> debris;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string f = it->path().filename().string();
    if (checkpoint_name(f)) {
      if (std::find(kept_.begin(), kept_.end(), f) == kept_.end()) debris.push_back(it->path());
    } else if (auto t = detail::parse_temp_file_name(f); t && own_target(t->target) && detail::temp_writer_gone(t->pid)) {
      debris.push_back(it->path());
    }
  }
  for (const auto& p : debris) std::filesystem::remove(p, ec);
}
}  // namespace gradus::io
#endif  // GRADUS_DEFINE_COMPILED
