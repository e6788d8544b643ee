// Feature columns against TensorFlow's own (tests/fixtures/estimator/feature_columns_tf.json,
// written by make_feature_columns_tf.py with TensorFlow 2.21.0): the input layer of numeric
// (one and two values), bucketized, vocabulary-list (with out-of-vocabulary buckets),
// vocabulary-file, hashed (strings past 64 bytes and int64s), identity (two ids per example) and
// indicator columns, embeddings with every combiner from fixed tables, and a linear model with
// given weights; then the modules' gradients and the errors.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <gradus/data.hpp>
#include <gradus/estimator.hpp>
#include <gradus/gradus.hpp>
#include <gradus/testing/module_check.hpp>

namespace gd = gradus;
namespace fc = gradus::feature_column;
using Catch::Contains;
using nlohmann::json;

namespace {

const std::filesystem::path kDir = std::filesystem::path(GRADUS_TEST_DATA_DIR) / "estimator";

const json& fc_fixture() {
  static const json j = [] {
    std::ifstream f(kDir / "feature_columns_tf.json");
    REQUIRE(f.good());
    return json::parse(f);
  }();
  return j;
}

std::vector<double> flatten(const json& j) {
  std::vector<double> out;
  if (!j.is_array()) return {j.get<double>()};
  for (const auto& e : j)
    for (double v : flatten(e)) out.push_back(v);
  return out;
}

/// The fixture's batch as the fields a CSV pipeline or parse_example gives: float and int64
/// tensors [B, k], strings as a list.
gd::data::Example fixture_batch() {
  const json& f = fc_fixture()["features"];
  gd::data::Example b;
  for (const char* k : {"age", "size"}) {
    const std::vector<double> v = flatten(f[k]);
    const auto rows = int64_t(f[k].size());
    gd::Tensor<float> t(gd::Shape{rows, int64_t(v.size()) / rows});
    for (size_t i = 0; i < v.size(); ++i) t.data()[i] = float(v[i]);
    b.add(k, t);
  }
  for (const char* k : {"zip", "zip2", "ids"}) {
    const std::vector<double> v = flatten(f[k]);
    const auto rows = int64_t(f[k].size());
    gd::Tensor<int64_t> t(gd::Shape{rows, int64_t(v.size()) / rows});
    for (size_t i = 0; i < v.size(); ++i) t.data()[i] = int64_t(v[i]);
    b.add(k, t);
  }
  for (const char* k : {"edu", "occ", "colour"}) {
    gd::data::Strings s;
    for (const auto& row : f[k]) s.push_back(row[0].get<std::string>());
    b.add(k, s);
  }
  return b;
}

template <class T>
gd::Tensor<T> table_of(const char* name) {
  const json& t = fc_fixture()["tables"][name];
  const std::vector<double> v = flatten(t);
  gd::Tensor<T> out(gd::Shape{int64_t(t.size()), int64_t(v.size() / t.size())});
  for (size_t i = 0; i < v.size(); ++i) out.data()[i] = T(v[i]);
  return out;
}

template <class T>
double max_diff(const gd::Tensor<T>& got, const json& want) {
  const std::vector<double> w = flatten(want);
  REQUIRE(got.size() == int64_t(w.size()));
  double d = 0;
  for (int64_t i = 0; i < got.size(); ++i) d = std::max(d, std::abs(double(got.data()[i]) - w[size_t(i)]));
  return d;
}

const fc::Column kEdu = fc::categorical_column_with_vocabulary_list("edu", std::vector<std::string>{"hs", "ba", "ms"},
                                                                    {.num_oov_buckets = 2});
const fc::Column kOcc = fc::categorical_column_with_hash_bucket("occ", 7);
const fc::Column kIds = fc::categorical_column_with_identity("ids", 5, std::nullopt, 2);
const fc::Column kZipVocab = fc::categorical_column_with_vocabulary_list("zip2", std::vector<int64_t>{10001, 94110},
                                                                         {.num_oov_buckets = 3});
const fc::Column kAge = fc::numeric_column("age");

/// The embedding columns of the fixture's "embeddings" case, their tables fixed.
std::vector<fc::Column> embedding_columns() {
  auto fixed = [](const char* table) {
    return gd::init::Initializer([t = table_of<double>(table)](const gd::Shape& s, gd::Rng&) {
      REQUIRE(s == t.shape());
      return t.clone();
    });
  };
  return {fc::embedding_column(kEdu, 2, {gd::Combiner::mean, fixed("edu")}),
          fc::embedding_column(kOcc, 3, {gd::Combiner::sum, fixed("occ")}),
          fc::embedding_column(kIds, 2, {gd::Combiner::sqrtn, fixed("ids")}),
          fc::embedding_column(kZipVocab, 2, {gd::Combiner::mean, fixed("zip2")})};
}

}  // namespace

TEST_CASE("feature columns: numeric, bucketized and indicator columns give TensorFlow's input layer", "[estimator][columns]") {
  const fc::Column size = fc::numeric_column("size", {2});
  const fc::Features f({kAge, size, fc::bucketized_column(kAge, {18, 30, 50}), fc::bucketized_column(size, {0, 1.5}),
                        fc::indicator_column(kEdu), fc::indicator_column(kOcc)});
  CHECK(f.input_width() == 25);
  const gd::Tensor<float> x = f.transform(fixture_batch());
  CHECK(x.shape() == gd::Shape{4, 25});
  CHECK(max_diff(x, fc_fixture()["cases"]["numeric_bucketized_indicator"]) == 0);
  // DenseFeatures passes these values through unchanged
  gd::Rng rng(1);
  fc::DenseFeatures<float> input(f, rng);
  CHECK(max_diff(input(x).value(), fc_fixture()["cases"]["numeric_bucketized_indicator"]) == 0);
}

TEST_CASE("feature columns: vocabulary files, hashed and vocabulary int64 columns, identity ids", "[estimator][columns]") {
  const fc::Column colour = fc::categorical_column_with_vocabulary_file("colour", kDir / "vocabulary.txt",
                                                                        {.vocabulary_size = 3, .default_value = 0});
  const fc::Features f({fc::indicator_column(colour), fc::indicator_column(fc::categorical_column_with_hash_bucket("zip", 11)),
                        fc::indicator_column(kZipVocab), fc::indicator_column(kIds)});
  CHECK(max_diff(f.transform(fixture_batch()), fc_fixture()["cases"]["vocabulary_file_and_int_columns"]) == 0);
}

TEST_CASE("feature columns: embedding columns with every combiner match TensorFlow's", "[estimator][columns]") {
  const fc::Features f(embedding_columns());
  gd::Rng rng(2);
  fc::DenseFeatures<double> input(f, rng);
  CHECK(input.output_width() == 9);
  const gd::Tensor<double> y = input(f.transform(fixture_batch())).value();
  CHECK(max_diff(y, fc_fixture()["cases"]["embeddings"]) < 1e-6);  // TensorFlow's are float32
  CHECK(max_diff(input.embedding_weights("occ_embedding").value(), fc_fixture()["tables"]["occ"]) == 0);
}

TEST_CASE("feature columns: a linear model with TensorFlow's weights gives its outputs", "[estimator][columns]") {
  const json& lin = fc_fixture()["linear"];
  fc::LinearModel<double> model(fc::Features({kAge, fc::bucketized_column(kAge, {18, 30, 50}), kEdu, kOcc, kIds}, true), 2);
  for (const char* name : {"age", "age_bucketized", "edu", "ids", "occ"}) {
    const std::vector<double> w = flatten(lin["weights"][name]);
    gd::Var<double> weights = model.weights(name);
    REQUIRE(weights.value().size() == int64_t(w.size()));
    std::copy(w.begin(), w.end(), weights.value().data());
  }
  const std::vector<double> bias = flatten(lin["weights"]["bias_weights"]);
  std::copy(bias.begin(), bias.end(), model.bias().value().data());
  const gd::Tensor<float> x = model.features().transform(fixture_batch());
  CHECK(max_diff(model(x).value(), lin["out"]) < 1e-9);
}

namespace {
/// check_module_gradient's report for the parameters of `m` on one fixed packed batch `x`: a probe
/// module holds them, so the check perturbs the tables and not the ids (its own input, an int64
/// tensor, is not differentiated).
template <class M>
gd::nn::GradientReport table_gradients(M& m, gd::Tensor<float> x) {
  struct Probe : gd::nn::Module<double, Probe> {
    M& inner;
    gd::Tensor<float> x;
    Probe(M& m, gd::Tensor<float> packed) : inner(m), x(std::move(packed)) {
      for (auto& [name, v] : inner.named_parameters()) {
        std::string flat = name;
        std::replace(flat.begin(), flat.end(), '.', '_');
        this->register_parameter(flat, v);
      }
    }
    gd::Var<double> forward(const gd::Tensor<int64_t>&) { return inner(x); }
  } probe(m, std::move(x));
  return gd::nn::check_module_gradient(probe, gd::Tensor<int64_t>::zeros({1}));
}
}  // namespace

TEST_CASE("feature columns: DenseFeatures and LinearModel are differentiable in their tables", "[estimator][columns][grad]") {
  const gd::data::Example batch = fixture_batch();
  gd::Rng rng(3);
  fc::DenseFeatures<double> input(fc::Features(embedding_columns()), rng);
  const auto report = table_gradients(input, input.features().transform(batch));
  INFO(report);
  CHECK(report.entries.size() == 4);
  CHECK(report.ok());
  fc::LinearModel<double> lin(fc::Features({kAge, fc::bucketized_column(kAge, {18, 30, 50}), kEdu, kOcc, kIds}, true), 3);
  for (auto& p : lin.parameters()) p.value() = gd::Tensor<double>::random_uniform(p.value().shape(), rng);
  const auto lreport = table_gradients(lin, lin.features().transform(batch));
  INFO(lreport);
  CHECK(lreport.entries.size() == 6);
  CHECK(lreport.ok());
}

TEST_CASE("feature columns: bad columns and batches are errors naming the column and the field", "[estimator][columns]") {
  CHECK_THROWS_WITH(fc::bucketized_column(kEdu, {1, 2}), Contains("must be a numeric_column"));
  CHECK_THROWS_WITH(fc::bucketized_column(kAge, {3, 2}), Contains("sorted ascending"));
  CHECK_THROWS_WITH(fc::categorical_column_with_vocabulary_list("edu", std::vector<std::string>{"a", "a"}),
                    Contains("'a' is in the vocabulary twice"));
  CHECK_THROWS_WITH(fc::categorical_column_with_vocabulary_list("edu", std::vector<std::string>{"a"}, {.num_oov_buckets = 1, .default_value = 0}),
                    Contains("not both"));
  CHECK_THROWS_WITH(fc::indicator_column(kAge), Contains("column 'age' is not categorical"));
  CHECK_THROWS_WITH(fc::Features({kEdu}), Contains("a DNN takes it through indicator_column or embedding_column"));
  CHECK_THROWS_WITH(fc::Features({kAge, kAge}), Contains("two columns are named 'age'"));
  CHECK_THROWS_WITH(fc::categorical_column_with_vocabulary_file("c", kDir / "missing.txt"), Contains("missing.txt"));
  const fc::Features f({kAge, fc::indicator_column(kEdu), fc::indicator_column(kIds)});
  gd::data::Example no_age{{"edu", gd::data::Strings{"hs"}}, {"ids", gd::Tensor<int64_t>::from({1}, {1, 1})}};
  CHECK_THROWS_WITH(f.transform(no_age), Contains("feature column 'age': the batch has no field 'age'"));
  gd::data::Example wrong{{"age", gd::data::Strings{"x"}}, {"edu", gd::data::Strings{"hs"}}, {"ids", gd::Tensor<int64_t>::from({1}, {1, 1})}};
  CHECK_THROWS_WITH(f.transform(wrong), Contains("field 'age' holds strings"));
  gd::data::Example bad_id{{"age", gd::Tensor<float>::from({1.f})}, {"edu", gd::data::Strings{"hs"}}, {"ids", gd::Tensor<int64_t>::from({7}, {1, 1})}};
  CHECK_THROWS_WITH(f.transform(bad_id), Contains("id 7 of field 'ids' is outside [0, 5)"));
  gd::data::Example three{{"age", gd::Tensor<float>::from({1.f})}, {"edu", gd::data::Strings{"hs"}}, {"ids", gd::Tensor<int64_t>::from({1, 2, 3}, {1, 3})}};
  CHECK_THROWS_WITH(f.transform(three), Contains("3 values per example, the column takes at most 2"));
  gd::data::Example ragged{{"age", gd::Tensor<float>::from({1.f, 2.f})}, {"edu", gd::data::Strings{"hs"}}, {"ids", gd::Tensor<int64_t>::from({1}, {1, 1})}};
  CHECK_THROWS_WITH(f.transform(ragged), Contains("has 1 examples, the batch 2"));
}
