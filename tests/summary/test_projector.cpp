// Embedding projector export: the TSVs parsed back, the metadata header rule, the sprite PNG
// decoded and compared tile by tile, projector_config.pbtxt checked field by field and encoded by
// protoc with TensorBoard's ProjectorConfig schema, and the ProjectorHook at the end of a run.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <gradus/gradus.hpp>
#include <gradus/train.hpp>

#include "../support/files.hpp"
#include "../support/short_names.hpp"

namespace sm = gradus::summary;

namespace {

fs::path fresh_dir(const std::string& name) { return gradus_test::fresh_dir("summary_tmp", name); }

using gradus_test::slurp_existing;

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

// The lines of a file that ends with '\n' (checked), without that last empty piece.
std::vector<std::string> lines(const std::string& text) {
  REQUIRE(!text.empty());
  REQUIRE(text.back() == '\n');
  auto l = split(text.substr(0, text.size() - 1), '\n');
  return l;
}

// Parses tensors.tsv with strtod/strtof (independent of the writer's to_chars).
template <typename T>
std::vector<std::vector<T>> parse_tsv(const std::string& text) {
  std::vector<std::vector<T>> rows;
  for (const std::string& line : lines(text)) {
    std::vector<T> row;
    for (const std::string& f : split(line, '\t')) {
      char* end = nullptr;
      row.push_back(std::is_same_v<T, float> ? T(std::strtof(f.c_str(), &end)) : T(std::strtod(f.c_str(), &end)));
      CHECK(*end == '\0');
    }
    rows.push_back(row);
  }
  return rows;
}

// Exit status and output of `protoc --encode=tensorboard.ProjectorConfig` on a pbtxt file.
std::pair<int, std::string> protoc_encode(const fs::path& pbtxt) {
  const std::string cmd = "protoc --encode=tensorboard.ProjectorConfig -I " GRADUS_TEST_DATA_DIR " " GRADUS_TEST_DATA_DIR
                          "/projector_config.proto < '" + pbtxt.string() + "' > summary_tmp/projector.bin 2>&1";
  const int rc = std::system(cmd.c_str());
  std::string decoded;
  if (std::FILE* p = popen("protoc --decode_raw < summary_tmp/projector.bin 2>&1", "r")) {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) decoded.append(buf, n);
    pclose(p);
  }
  return {rc, decoded};
}

}  // namespace

TEST_CASE("write_projector: tensors, metadata, sprite and config read back", "[summary][projector]") {
  const fs::path dir = fresh_dir("projector");
  gd::Rng rng(3);
  // awkward floats: tiny, huge, negative, ones that need 9 significant digits
  auto words = gd::Tensor<float>::random_normal({5, 3}, rng);
  words.data()[0] = 1e-38f;
  words.data()[1] = -3.4e38f;
  words.data()[2] = 0.1f;
  words.data()[4] = 16777217.f;  // rounds to 16777216
  words.data()[5] = std::nextafter(1.f, 2.f);
  auto points = gd::Tensor<double>::random_normal({10, 2}, rng);
  points.data()[0] = 0.1;
  points.data()[1] = std::nextafter(1.0, 2.0);
  // sprite images: values k/255 so that 8-bit PNG holds them exactly
  auto sprites = gd::Tensor<float>::zeros({10, 2, 3, 3});
  for (int64_t i = 0; i < sprites.size(); ++i) sprites.data()[i] = float((i * 7) % 256) / 255.f;

  sm::write_projector(dir, {{.tensor_name = "words", .tensor = words,
                             .metadata_rows = {{"the"}, {"of"}, {"and"}, {"a"}, {"to"}}},
                            {.tensor_name = "points.v2", .tensor = points, .metadata_header = {"label", "split"},
                             .metadata_rows = {{"0", "train"}, {"1", "train"}, {"2", "test"}, {"3", "test"},
                                               {"4", "train"}, {"5", "train"}, {"6", "test"}, {"7", "test"},
                                               {"8", "x y"}, {"9", ""}},
                             .sprite_images = sprites}});

  SECTION("tensors.tsv: one row per vector, exact round trip") {
    const auto w = parse_tsv<float>(slurp_existing(dir / "words" / "tensors.tsv"));
    REQUIRE(w.size() == 5);
    for (int64_t i = 0; i < 5; ++i) {
      REQUIRE(w[size_t(i)].size() == 3);
      for (int64_t j = 0; j < 3; ++j) CHECK(w[size_t(i)][size_t(j)] == words(i, j));
    }
    const auto p = parse_tsv<double>(slurp_existing(dir / "points.v2" / "tensors.tsv"));
    REQUIRE(p.size() == 10);
    for (int64_t i = 0; i < 10; ++i) {
      REQUIRE(p[size_t(i)].size() == 2);
      for (int64_t j = 0; j < 2; ++j) CHECK(p[size_t(i)][size_t(j)] == points(i, j));
    }
  }
  SECTION("metadata.tsv: no header with one column, a header with two") {
    CHECK(slurp_existing(dir / "words" / "metadata.tsv") == "the\nof\nand\na\nto\n");
    const auto l = lines(slurp_existing(dir / "points.v2" / "metadata.tsv"));
    REQUIRE(l.size() == 11);
    CHECK(l[0] == "label\tsplit");
    CHECK(l[1] == "0\ttrain");
    CHECK(l[9] == "8\tx y");
    CHECK(l[10] == "9\t");
  }
  SECTION("sprite.png: a 4x4 grid of 2x3 images, each tile as given") {
    CHECK(!fs::exists(dir / "words" / "sprite.png"));
    const auto png = gd::image::decode_png<int64_t>(slurp_existing(dir / "points.v2" / "sprite.png"));
    REQUIRE(png.shape() == gd::Shape{8, 12, 3});  // ceil(sqrt(10)) = 4 cells of 2x3
    for (int64_t cell = 0; cell < 16; ++cell) {
      const int64_t r0 = (cell / 4) * 2, c0 = (cell % 4) * 3;
      for (int64_t y = 0; y < 2; ++y)
        for (int64_t x = 0; x < 3; ++x)
          for (int64_t c = 0; c < 3; ++c) {
            const int64_t want = cell < 10 ? ((((cell * 2 + y) * 3 + x) * 3 + c) * 7) % 256 : 0;
            CHECK(png(r0 + y, c0 + x, c) == want);
          }
    }
  }
  SECTION("projector_config.pbtxt: every field, and valid for TensorBoard's schema") {
    const std::string config = slurp_existing(dir / "projector_config.pbtxt");
    CHECK(config ==
          "embeddings {\n"
          "  tensor_name: \"words\"\n"
          "  tensor_path: \"words/tensors.tsv\"\n"
          "  metadata_path: \"words/metadata.tsv\"\n"
          "  tensor_shape: 5\n"
          "  tensor_shape: 3\n"
          "}\n"
          "embeddings {\n"
          "  tensor_name: \"points.v2\"\n"
          "  tensor_path: \"points.v2/tensors.tsv\"\n"
          "  metadata_path: \"points.v2/metadata.tsv\"\n"
          "  tensor_shape: 10\n"
          "  tensor_shape: 2\n"
          "  sprite {\n"
          "    image_path: \"points.v2/sprite.png\"\n"
          "    single_image_dim: 3\n"
          "    single_image_dim: 2\n"
          "  }\n"
          "}\n");
    const auto [rc, raw] = protoc_encode(dir / "projector_config.pbtxt");
    INFO(raw);
    REQUIRE(rc == 0);
    // the encoded message by field number: embeddings = 2, tensor_name = 1, metadata_path = 2,
    // tensor_shape = 4 (packed in proto3), sprite = 5 {image_path = 1, single_image_dim = 2}, tensor_path = 8
    CHECK(raw.find("1: \"words\"") != std::string::npos);
    CHECK(raw.find("8: \"points.v2/tensors.tsv\"") != std::string::npos);
    CHECK(raw.find("2: \"points.v2/metadata.tsv\"") != std::string::npos);
    CHECK(raw.find("1: \"points.v2/sprite.png\"") != std::string::npos);
    CHECK(raw.find("4: \"\\005\\003\"") != std::string::npos);  // packed tensor_shape 5, 3
    CHECK(raw.find("4: \"\\n\\002\"") != std::string::npos);    // packed tensor_shape 10, 2
    CHECK(raw.find("2: \"\\003\\002\"") != std::string::npos);  // packed single_image_dim 3, 2
  }
  SECTION("no temporary file is left") {
    for (const auto& entry : fs::recursive_directory_iterator(dir))
      CHECK(entry.path().filename().string().find(".tmp-") == std::string::npos);
  }
}

TEST_CASE("write_projector: bad input is rejected before anything is written", "[summary][projector]") {
  const fs::path dir = fresh_dir("projector_bad");
  using Catch::Matchers::Contains;
  const auto t = gd::Tensor<float>::ones({3, 2});
  auto write = [&](sm::ProjectorEmbedding e) { sm::write_projector(dir, {e}); };
  CHECK_THROWS_WITH(write({.tensor_name = "a", .tensor = gd::Tensor<float>::ones({3})}),
                    Contains("write_projector: 'a': expected a tensor [N, D]") && Contains("[3]"));
  CHECK_THROWS_AS(write({.tensor_name = "a", .tensor = gd::Tensor<float>::ones({2, 2, 2})}), gd::shape_error);
  auto nan = t.clone();
  nan.data()[3] = std::numeric_limits<float>::quiet_NaN();
  CHECK_THROWS_WITH(write({.tensor_name = "a", .tensor = nan}), Contains("element [1, 1] is not finite"));
  auto inf = gd::Tensor<double>::ones({2, 2});
  inf.data()[0] = -std::numeric_limits<double>::infinity();
  CHECK_THROWS_AS(write({.tensor_name = "a", .tensor = inf}), gd::value_error);
  for (const std::string bad : {"", ".", "..", "a/b", "../x", "a b", "tab\t"})
    CHECK_THROWS_WITH(write({.tensor_name = bad, .tensor = t}), Contains("write_projector: expected a tensor_name"));
  CHECK_THROWS_WITH(write({.tensor_name = "a", .tensor = t, .metadata_rows = {{"x"}, {"y"}}}),
                    Contains("expected 3 metadata rows (one per vector), got 2"));
  CHECK_THROWS_WITH(write({.tensor_name = "a", .tensor = t, .metadata_rows = {{"x", "1"}, {"y", "2"}, {"z", "3"}}}),
                    Contains("2 metadata columns need a metadata_header"));
  CHECK_THROWS_WITH(write({.tensor_name = "a", .tensor = t, .metadata_header = {"l", "m"},
                           .metadata_rows = {{"x", "1"}, {"y"}, {"z", "3"}}}),
                    Contains("metadata row 1 has 1 columns, expected 2"));
  CHECK_THROWS_WITH(write({.tensor_name = "a", .tensor = t, .metadata_rows = {{"x"}, {"y\tz"}, {"w"}}}),
                    Contains("metadata row 1 holds a tab or a line break"));
  CHECK_THROWS_AS(write({.tensor_name = "a", .tensor = t, .metadata_rows = {{"x"}, {"y"}, {"two\nlines"}}}),
                  gd::value_error);
  CHECK_THROWS_WITH(write({.tensor_name = "a", .tensor = t, .sprite_images = gd::Tensor<float>::zeros({2, 4, 4, 1})}),
                    Contains("expected sprite_images [3, H, W, C]"));
  CHECK_THROWS_AS(write({.tensor_name = "a", .tensor = t, .sprite_images = gd::Tensor<float>::zeros({3, 4, 4, 2})}),
                  gd::shape_error);
  CHECK_THROWS_WITH(sm::write_projector(dir, {{.tensor_name = "a", .tensor = t}, {.tensor_name = "a", .tensor = t}}),
                    Contains("is given twice"));
  CHECK_THROWS_AS(sm::write_projector(dir, {}), gd::value_error);
  CHECK(!fs::exists(dir));
}

TEST_CASE("ProjectorHook: exports the trained table at the end of a run", "[summary][projector]") {
  const fs::path dir = fresh_dir("projector_hook");
  gd::Rng rng(5);
  gd::nn::Embedding<double> emb({.vocab = 4, .dim = 3}, rng);
  const gd::Tensor<double> before = emb.embeddings().value().clone();
  gd::optim::SGD<double> opt(emb.parameters(), {.lr = 0.5});
  gd::train::ProjectorHook hook(emb.embeddings(), {.name = "tokens", .metadata_rows = {{"a"}, {"b"}, {"c"}, {"d"}}});
  {
    gd::train::Session session(emb, opt, {.run_dir = dir, .hooks = {&hook}});
    const auto ids = gd::Tensor<int64_t>::from({0, 2, 2}, {3});
    for (int i = 0; i < 2; ++i) session.run([&] { return gd::sum(gd::square(emb.forward(ids))); });
    CHECK(!fs::exists(dir / "projector_config.pbtxt"));  // nothing before the end
    session.close();
  }
  const gd::Tensor<double>& after = emb.embeddings().value();
  // the gradient of row r is 2 * count(r) * row: a step multiplies row 0 (used once) by
  // 1 - 0.5 * 2 = 0 and row 2 (used twice) by 1 - 0.5 * 4 = -1, exactly; so after two steps
  // row 0 is 0, rows 1 and 3 are untouched and row 2 is back where it started
  for (int64_t j = 0; j < 3; ++j) {
    CHECK(after(0, j) == 0.0);
    CHECK(after(1, j) == before(1, j));
    CHECK(after(2, j) == before(2, j));
    CHECK(after(3, j) == before(3, j));
  }
  const auto rows = parse_tsv<double>(slurp_existing(dir / "tokens" / "tensors.tsv"));
  REQUIRE(rows.size() == 4);
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 3; ++j) CHECK(rows[size_t(i)][size_t(j)] == after(i, j));
  CHECK(slurp_existing(dir / "tokens" / "metadata.tsv") == "a\nb\nc\nd\n");
  const std::string config = slurp_existing(dir / "projector_config.pbtxt");
  CHECK(config.find("tensor_name: \"tokens\"") != std::string::npos);
  CHECK(config.find("tensor_shape: 4\n  tensor_shape: 3\n") != std::string::npos);

  CHECK_THROWS_WITH(gd::train::ProjectorHook(emb.embeddings(), {.metadata_rows = {{"a"}}}),
                    Catch::Matchers::Contains("ProjectorHook: expected 4 metadata rows"));
  gd::train::ProjectorHook nowhere(emb.embeddings());
  CHECK_THROWS_WITH(gd::train::Session(emb, opt, {.hooks = {&nowhere}}),
                    Catch::Matchers::Contains("expected a logdir in its options or a session with a run_dir"));
}
