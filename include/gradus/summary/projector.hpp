// gradus/summary/projector.hpp — export of embeddings for TensorBoard's projector plugin.
//
// write_projector(logdir, embeddings) writes, for each embedding named <name>:
//   <logdir>/<name>/tensors.tsv   one line per vector, its D values separated by tabs, each in
//                                 the shortest form that reads back to the same float (double);
//   <logdir>/<name>/metadata.tsv  when labels are given: one line per vector, columns separated
//                                 by tabs, preceded by a header line only when there is more than
//                                 one column (TensorBoard reads a one-column file as labels only);
//   <logdir>/<name>/sprite.png    when sprite images are given: the N images tiled row by row in a
//                                 square grid of ceil(sqrt(N)) x ceil(sqrt(N)) cells (unused cells
//                                 black), as the projector expects;
// and one <logdir>/projector_config.pbtxt (protobuf text format of TensorBoard's ProjectorConfig)
// listing them all with paths relative to logdir:
//   embeddings {
//     tensor_name: "words"
//     tensor_path: "words/tensors.tsv"
//     metadata_path: "words/metadata.tsv"
//     tensor_shape: 1000
//     tensor_shape: 64
//     sprite { image_path: "words/sprite.png" single_image_dim: 28 single_image_dim: 28 }  (width, height)
//   }
// Every file is written atomically (io::write_file_atomic). Open with `tensorboard --logdir <logdir>`,
// tab "Projector".
#pragma once
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <system_error>
#include <variant>
#include <vector>

#include "gradus/core/compiled.hpp"
#include "gradus/core/error.hpp"
#include "gradus/core/tensor.hpp"
#include "gradus/image/png.hpp"
#include "gradus/io/file.hpp"

namespace gradus::summary {

/// One embedding to export: `tensor` [N, D] (float or double, finite); optional labels
/// (`metadata_rows`: N rows of equally many columns; `metadata_header`: the column names, required
/// with more than one column, optional with one); optional `sprite_images` [N, H, W, C] with C in
/// {1, 3, 4} and values in [0, 1] (clamped). `tensor_name` names the folder, so it may hold only
/// letters, digits, '_', '-' and '.' (not "." or "..").
///   gd::summary::ProjectorEmbedding e{.tensor_name = "words", .tensor = table,
///                                    .metadata_rows = {{"the"}, {"of"}, {"and"}}};
struct ProjectorEmbedding {
  std::string tensor_name;
  std::variant<Tensor<float>, Tensor<double>> tensor;
  std::vector<std::string> metadata_header = {};
  std::vector<std::vector<std::string>> metadata_rows = {};
  std::optional<Tensor<float>> sprite_images = std::nullopt;
};

namespace detail {

/// The shortest decimal form that parses back to exactly `v`.
template <typename T>
void append_shortest(std::string& out, T v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

template <typename T>
std::string tensors_tsv(const Tensor<T>& t, const std::string& name) {
  const Shape& s = t.shape();
  GRADUS_CHECK(shape_error, s.rank() == 2 && s[0] >= 1 && s[1] >= 1, "write_projector: '", name,
               "': expected a tensor [N, D] with N, D >= 1, got shape ", s);
  std::string out;
  const T* p = t.data();
  for (int64_t i = 0; i < s[0]; ++i)
    for (int64_t j = 0; j < s[1]; ++j) {
      const T v = p[i * s[1] + j];
      GRADUS_CHECK(value_error, std::isfinite(v), "write_projector: '", name, "': element [", i, ", ", j,
                   "] is not finite: ", v);
      if (j) out += '\t';
      append_shortest(out, v);
      if (j + 1 == s[1]) out += '\n';
    }
  return out;
}

void check_label(const std::string& label, const std::string& name, const char* where, size_t row);

std::string metadata_tsv(const ProjectorEmbedding& e, int64_t n);

/// The sprite image [g*H, g*W, C] (g = ceil(sqrt(N))) of `images` [N, H, W, C].
Tensor<float> sprite(const Tensor<float>& images, int64_t n, const std::string& name);

void check_embedding_name(const std::string& name);

}  // namespace detail

/// Writes `embeddings` for TensorBoard's projector into `logdir` (created if needed): the TSVs,
/// sprites and projector_config.pbtxt described in the file comment. value_error / shape_error
/// before anything is written for bad input; io_error naming the file when a write fails.
///   gd::summary::write_projector("runs/lm", {{.tensor_name = "words", .tensor = emb.embeddings().value(),
///                                             .metadata_rows = labels}});
void write_projector(const std::filesystem::path& logdir, const std::vector<ProjectorEmbedding>& embeddings);

}  // namespace gradus::summary

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::summary::detail {
GRADUS_INLINE void check_label(const std::string& label, const std::string& name, const char* where, size_t row) {
  GRADUS_CHECK(value_error, label.find_first_of("\t\n\r") == std::string::npos, "write_projector: '", name,
               "': ", where, " ", row, " holds a tab or a line break (not allowed in a TSV field): \"", label, "\"");
}

GRADUS_INLINE std::string metadata_tsv(const ProjectorEmbedding& e, int64_t n) {
  const std::string& name = e.tensor_name;
  GRADUS_CHECK(value_error, int64_t(e.metadata_rows.size()) == n, "write_projector: '", name, "': expected ", n,
               " metadata rows (one per vector), got ", e.metadata_rows.size());
  const size_t cols = e.metadata_header.empty() ? e.metadata_rows[0].size() : e.metadata_header.size();
  GRADUS_CHECK(value_error, cols >= 1, "write_projector: '", name, "': metadata rows have no column");
  GRADUS_CHECK(value_error, cols == 1 || !e.metadata_header.empty(), "write_projector: '", name, "': ", cols,
               " metadata columns need a metadata_header naming them");
  std::string out;
  auto line = [&](const std::vector<std::string>& fields, const char* where, size_t row) {
    GRADUS_CHECK(value_error, fields.size() == cols, "write_projector: '", name, "': ", where, " ", row, " has ",
                 fields.size(), " columns, expected ", cols);
    for (size_t k = 0; k < fields.size(); ++k) {
      check_label(fields[k], name, where, row);
      if (k) out += '\t';
      out += fields[k];
    }
    out += '\n';
  };
  if (cols > 1) line(e.metadata_header, "metadata_header", 0);
  for (size_t i = 0; i < e.metadata_rows.size(); ++i) line(e.metadata_rows[i], "metadata row", i);
  return out;
}

GRADUS_INLINE Tensor<float> sprite(const Tensor<float>& images, int64_t n, const std::string& name) {
  const Shape& s = images.shape();
  GRADUS_CHECK(shape_error, s.rank() == 4 && s[0] == n && s[1] >= 1 && s[2] >= 1 &&
                                (s[3] == 1 || s[3] == 3 || s[3] == 4),
               "write_projector: '", name, "': expected sprite_images [", n, ", H, W, C] with C in {1, 3, 4}, got shape ",
               s);
  const int64_t h = s[1], w = s[2], c = s[3];
  int64_t g = 1;
  while (g * g < n) ++g;
  GRADUS_CHECK(value_error, g * h <= 8192 && g * w <= 8192, "write_projector: '", name, "': the sprite of ", n,
               " images of ", h, "x", w, " would be ", g * h, "x", g * w, " pixels; TensorBoard takes at most 8192x8192");
  Tensor<float> out = Tensor<float>::zeros({g * h, g * w, c});
  const float* src = images.data();
  float* dst = out.data();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t r0 = (i / g) * h, c0 = (i % g) * w;
    for (int64_t y = 0; y < h; ++y)
      std::copy_n(src + ((i * h + y) * w) * c, w * c, dst + ((r0 + y) * g * w + c0) * c);
  }
  return out;
}

GRADUS_INLINE void check_embedding_name(const std::string& name) {
  bool ok = !name.empty() && name != "." && name != ".." && name.size() <= 200;
  for (char ch : name)
    ok = ok && ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' ||
                ch == '-' || ch == '.');
  GRADUS_CHECK(value_error, ok, "write_projector: expected a tensor_name of 1 to 200 letters, digits, '_', '-' or '.' "
               "(it names a folder), got \"", name, "\"");
}
}  // namespace gradus::summary::detail

namespace gradus::summary {
GRADUS_INLINE void write_projector(const std::filesystem::path& logdir,
                                   const std::vector<ProjectorEmbedding>& embeddings) {
  GRADUS_CHECK(value_error, !embeddings.empty(), "write_projector: expected at least one embedding, got none");
  struct Files {
    std::string tensors, metadata, sprite_png;
    int64_t n = 0, d = 0, sprite_h = 0, sprite_w = 0;
  };
  std::vector<Files> files;
  std::set<std::string> names;
  for (const ProjectorEmbedding& e : embeddings) {
    detail::check_embedding_name(e.tensor_name);
    GRADUS_CHECK(value_error, names.insert(e.tensor_name).second, "write_projector: the tensor_name \"",
                 e.tensor_name, "\" is given twice");
    Files f;
    std::visit(
        [&](const auto& t) {
          f.tensors = detail::tensors_tsv(t, e.tensor_name);
          f.n = t.shape()[0];
          f.d = t.shape()[1];
        },
        e.tensor);
    if (!e.metadata_rows.empty() || !e.metadata_header.empty()) f.metadata = detail::metadata_tsv(e, f.n);
    if (e.sprite_images) {
      f.sprite_png = image::encode_png(detail::sprite(*e.sprite_images, f.n, e.tensor_name));
      f.sprite_h = e.sprite_images->shape()[1];
      f.sprite_w = e.sprite_images->shape()[2];
    }
    files.push_back(std::move(f));
  }
  std::string config;
  for (size_t k = 0; k < embeddings.size(); ++k) {
    const std::string& name = embeddings[k].tensor_name;
    const Files& f = files[k];
    const std::filesystem::path dir = logdir / name;
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    GRADUS_CHECK(io_error, !ec, "write_projector: cannot create '", dir.string(), "': ", ec.message());
    io::write_file_atomic(dir / "tensors.tsv", f.tensors);
    config += gradus::detail::str("embeddings {\n  tensor_name: \"", name, "\"\n  tensor_path: \"", name,
                                  "/tensors.tsv\"\n");
    if (!f.metadata.empty()) {
      io::write_file_atomic(dir / "metadata.tsv", f.metadata);
      config += gradus::detail::str("  metadata_path: \"", name, "/metadata.tsv\"\n");
    }
    config += gradus::detail::str("  tensor_shape: ", f.n, "\n  tensor_shape: ", f.d, "\n");
    if (!f.sprite_png.empty()) {
      io::write_file_atomic(dir / "sprite.png", f.sprite_png);
      config += gradus::detail::str("  sprite {\n    image_path: \"", name, "/sprite.png\"\n    single_image_dim: ",
                                    f.sprite_w, "\n    single_image_dim: ", f.sprite_h, "\n  }\n");
    }
    config += "}\n";
  }
  io::write_file_atomic(logdir / "projector_config.pbtxt", config);
}
}  // namespace gradus::summary
#endif  // GRADUS_DEFINE_COMPILED
