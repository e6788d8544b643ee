// Sparse features against TensorFlow's own results (tests/fixtures/io/sparse_tf.json, written by
// make_sparse_tf.py with TensorFlow 2.21.0): tf.io.parse_example of TensorFlow-serialized
// Examples (FixedLen stacked, VarLen as SparseTensors of int64, float and bytes, a missing VarLen
// feature and a FixedLen default), tf.nn.embedding_lookup_sparse for every combiner with and
// without sp_weights, tf.math.unsorted_segment_sum and tf.sparse.to_dense; then the errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <gradus/gradus.hpp>
#include <gradus/io.hpp>

namespace gd = gradus;
namespace io = gradus::io;
using Catch::Contains;
using nlohmann::json;

namespace {

const json& sparse_fixture() {
  static const json j = [] {
    std::ifstream f(std::filesystem::path(GRADUS_TEST_DATA_DIR) / "io" / "sparse_tf.json");
    REQUIRE(f.good());
    return json::parse(f);
  }();
  return j;
}

std::vector<std::string> fixture_records() {
  std::vector<std::string> out;
  for (const auto& hex : sparse_fixture()["records"]) {
    const std::string h = hex.get<std::string>();
    std::string bytes;
    for (size_t i = 0; i + 1 < h.size(); i += 2) bytes.push_back(char(std::stoi(h.substr(i, 2), nullptr, 16)));
    out.push_back(bytes);
  }
  return out;
}

const io::ParseSpec kSpec = {
    {"age", io::FixedLen{.shape = {}, .dtype = io::FeatureDtype::float32}},
    {"pixel", io::FixedLen{.shape = {2, 2}, .dtype = io::FeatureDtype::int64}},
    {"label", io::FixedLen{.shape = {}, .dtype = io::FeatureDtype::int64, .default_value = io::Int64List{-1}}},
    {"tags", io::VarLen{.dtype = io::FeatureDtype::int64}},
    {"tag_weights", io::VarLen{.dtype = io::FeatureDtype::float32}},
    {"words", io::VarLen{.dtype = io::FeatureDtype::bytes}}};

/// The nested lists of `j` flattened, in row-major order.
std::vector<double> flat(const json& j) {
  std::vector<double> out;
  if (!j.is_array()) return {j.get<double>()};
  for (const auto& e : j)
    for (double v : flat(e)) out.push_back(v);
  return out;
}

template <class T>
void check_sparse(const gd::SparseTensor<T>& got, const json& want) {
  CHECK(std::vector<int64_t>(got.dense_shape.begin(), got.dense_shape.end()) == want["dense_shape"].get<std::vector<int64_t>>());
  const std::vector<double> idx = flat(want["indices"]);
  REQUIRE(got.indices.size() == int64_t(idx.size()));
  for (int64_t i = 0; i < got.indices.size(); ++i) CHECK(got.indices.data()[i] == int64_t(idx[size_t(i)]));
  const std::vector<double> vals = flat(want["values"]);
  REQUIRE(got.values.size() == int64_t(vals.size()));
  for (int64_t i = 0; i < got.values.size(); ++i) CHECK(double(got.values.data()[i]) == vals[size_t(i)]);
}

template <class T>
double max_diff(const gd::Tensor<T>& got, const json& want) {
  const std::vector<double> w = flat(want);
  REQUIRE(got.size() == int64_t(w.size()));
  double d = 0;
  for (int64_t i = 0; i < got.size(); ++i) d = std::max(d, std::abs(double(got.data()[i]) - w[size_t(i)]));
  return d;
}

}  // namespace

TEST_CASE("parse_example matches tf.io.parse_example: FixedLen stacked, VarLen as SparseTensors", "[io][sparse]") {
  const std::vector<std::string> records = fixture_records();
  REQUIRE(records.size() == 4);
  const io::ParsedBatch b = io::parse_example(records, kSpec);
  const json& want = sparse_fixture()["parsed"];
  CHECK(b.records == 4);
  CHECK(b.floats("age").shape() == gd::Shape{4});
  CHECK(max_diff(b.floats("age"), want["age"]) == 0);
  CHECK(b.int64s("pixel").shape() == gd::Shape{4, 2, 2});
  CHECK(max_diff(b.int64s("pixel"), want["pixel"]) == 0);
  CHECK(max_diff(b.int64s("label"), want["label"]) == 0);  // the default, -1, in every record
  check_sparse(b.sparse_int64s("tags"), want["tags"]);
  check_sparse(b.sparse_floats("tag_weights"), want["tag_weights"]);
  const io::SparseBytes& words = b.sparse_bytes("words");
  CHECK(words.values == want["words"]["values"].get<std::vector<std::string>>());
  CHECK(words.dense_shape == gd::Shape{4, 3});
  CHECK_THROWS_WITH(b.floats("tags"), Contains("feature 'tags' is VarLen int64, not FixedLen float32"));
  CHECK_THROWS_WITH(b.sparse_floats("colour"), Contains("no feature 'colour' was parsed"));
  // no records: every feature with zero rows
  const io::ParsedBatch none = io::parse_example(std::vector<std::string>{}, kSpec);
  CHECK(none.floats("age").shape() == gd::Shape{0});
  CHECK(none.sparse_int64s("tags").dense_shape == gd::Shape{0, 0});
}

TEST_CASE("embedding_lookup_sparse matches tf.nn.embedding_lookup_sparse for every combiner, with and without weights",
          "[io][sparse]") {
  const io::ParsedBatch b = io::parse_example(fixture_records(), kSpec);
  const json& fx = sparse_fixture();
  const std::vector<double> t = flat(fx["table"]);
  const gd::Tensor<double> table = gd::Tensor<double>::from(t, {5, 3});
  const gd::SparseTensor<int64_t>& ids = b.sparse_int64s("tags");
  const gd::SparseTensor<float>& wf = b.sparse_floats("tag_weights");
  const gd::SparseTensor<double> weights{wf.indices, gd::cast<double>(wf.values), wf.dense_shape};
  REQUIRE(fx["lookups"].size() == 6);
  for (const auto& c : fx["lookups"]) {
    const std::string name = c["combiner"];
    const gd::Combiner combiner = name == "sum" ? gd::Combiner::sum : name == "mean" ? gd::Combiner::mean : gd::Combiner::sqrtn;
    INFO(name << (c["weighted"].get<bool>() ? " with weights" : ""));
    const gd::Tensor<double> got = c["weighted"].get<bool>() ? gd::embedding_lookup_sparse(table, ids, weights, combiner)
                                                             : gd::embedding_lookup_sparse(table, ids, combiner);
    CHECK(got.shape() == gd::Shape{4, 3});
    CHECK(max_diff(got, c["out"]) < 1e-12);
    // float, and a differentiable table: its gradient is each row's coefficient, scattered
    const gd::Tensor<float> got_f = gd::embedding_lookup_sparse(gd::cast<float>(table), ids, combiner);
    if (!c["weighted"].get<bool>()) CHECK(max_diff(got_f, c["out"]) < 1e-5);
  }
  gd::Var<double> tv(table);
  gd::backward(gd::sum(gd::embedding_lookup_sparse(tv, ids, gd::Combiner::mean)));
  // ids 3, 1 (row 0: 1/2 each), 4 (row 2: 1), 0, 0, 2 (row 3: 1/3 each, id 0 twice)
  const std::vector<double> per_id = {2.0 / 3, 0.5, 1.0 / 3, 0.5, 1.0};
  for (int64_t v = 0; v < 5; ++v)
    for (int64_t d = 0; d < 3; ++d) CHECK(tv.grad().data()[v * 3 + d] == Approx(per_id[size_t(v)]).epsilon(1e-14));
}

TEST_CASE("unsorted_segment_sum and sparse_to_dense match TensorFlow", "[io][sparse]") {
  const json& fx = sparse_fixture();
  const json& s = fx["segment_sum"];
  const gd::Tensor<double> data = gd::Tensor<double>::from(flat(s["data"]), {4, 3});
  const std::vector<int64_t> ids = s["ids"].get<std::vector<int64_t>>();
  const gd::Tensor<double> got = gd::unsorted_segment_sum(data, gd::Tensor<int64_t>::from(ids, {4}), s["num_segments"].get<int64_t>());
  CHECK(max_diff(got, s["out"]) < 1e-12);
  const io::ParsedBatch b = io::parse_example(fixture_records(), kSpec);
  CHECK(max_diff(gd::sparse_to_dense(b.sparse_floats("tag_weights"), -1.0f), fx["to_dense"]["out"]) == 0);
  const gd::Tensor<int64_t> dense_ids = gd::sparse_to_dense(b.sparse_int64s("tags"), int64_t(-1));
  CHECK(dense_ids.shape() == gd::Shape{4, 3});
  CHECK(std::vector<int64_t>(dense_ids.data(), dense_ids.data() + 12) == std::vector<int64_t>{3, 1, -1, -1, -1, -1, 4, -1, -1, 0, 0, 2});
}

TEST_CASE("sparse features: bad records, indices and ids are errors naming what is wrong", "[io][sparse]") {
  std::vector<std::string> records = fixture_records();
  records[2] = "\x0a\x05\x0a\x03";  // an Example whose Features message is cut short
  CHECK_THROWS_WITH(io::parse_example(records, kSpec), Contains("parse_example: record 2"));
  records = fixture_records();
  io::ParseSpec strict = kSpec;
  strict["label"] = io::FixedLen{.shape = {}, .dtype = io::FeatureDtype::int64};
  CHECK_THROWS_WITH(io::parse_example(records, strict), Contains("parse_example: record 0: feature 'label' is missing"));
  const gd::Tensor<double> v = gd::Tensor<double>::ones({2});
  CHECK_THROWS_WITH(gd::sparse_to_dense(gd::Tensor<int64_t>::from({1, 1}, {2, 1}), {3}, v), Contains("is given twice"));
  CHECK_THROWS_WITH(gd::sparse_to_dense(gd::Tensor<int64_t>::from({0, 3}, {2, 1}), {3}, v), Contains("index 3 of element 1 is outside [0, 3)"));
  CHECK_THROWS_WITH(gd::unsorted_segment_sum(gd::Tensor<double>::ones({3, 2}), gd::Tensor<int64_t>::from({0, 5, 1}), 4),
                    Contains("unsorted_segment_sum"));
  CHECK_THROWS_WITH(gd::unsorted_segment_sum(gd::Tensor<double>::ones({3, 2}), gd::Tensor<int64_t>::from({0, 1}), 4),
                    Contains("must be a prefix of the data's shape"));
  const gd::SparseTensor<int64_t> ids{gd::Tensor<int64_t>::from({0, 0, 1, 0}, {2, 2}), gd::Tensor<int64_t>::from({1, 7}), {2, 1}};
  CHECK_THROWS_WITH(gd::embedding_lookup_sparse(gd::Tensor<double>::ones({5, 2}), ids), Contains("index"));
  const gd::SparseTensor<int64_t> three_d{gd::Tensor<int64_t>::from({0, 0, 0}, {1, 3}), gd::Tensor<int64_t>::from({1}), {1, 1, 1}};
  CHECK_THROWS_WITH(gd::embedding_lookup_sparse(gd::Tensor<double>::ones({5, 2}), three_d), Contains("must be 2-D"));
}
