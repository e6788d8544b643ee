// Canned models over feature columns, trained with fit on a CSV file written here from a known
// rule (deterministic: gd::Rng): DNNClassifier against a hand-built model with the same layers
// (same draws, same training: the same losses and weights bit for bit), DNNClassifier and
// LinearClassifier learning the rule, string labels through label_vocabulary, DNNRegressor
// fitting a known function, and predictions that are probabilities.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include <gradus/data.hpp>
#include <gradus/estimator.hpp>
#include <gradus/gradus.hpp>

#include "../data/data_support.hpp"

namespace gd = gradus;
namespace fc = gradus::feature_column;
namespace est = gradus::estimator;
using Catch::Contains;

namespace {

const char* const kJobs[] = {"tech", "sales", "farming", "clerical", "service", "crafts", "transport", "military"};
const char* const kEdu[] = {"hs", "ba", "ms", "phd"};

/// A census-like CSV of n rows (age, hours, edu, job, income, label, score): the label is 1 when
/// a linear rule of the normalised numbers and the categories, plus a little noise, is positive;
/// score is a smooth function of the same inputs.
std::string write_census(const std::string& name, int n, uint64_t seed) {
  static const data_test::TempDir dir("estimator");  // this process's own, removed when the tests end
  const std::string path = dir / (name + ".csv");
  std::ofstream out(path);
  out << "age,hours,edu,job,income,label,score\n";
  gd::Rng rng(seed);
  const double edu_effect[] = {-1.0, 0.3, 0.8, 1.2};
  for (int i = 0; i < n; ++i) {
    const double age = std::floor(rng.uniform(18, 70)), hours = std::floor(rng.uniform(10, 60));
    const int edu = int(rng.uniform(0, 4)) % 4, job = int(rng.uniform(0, 8)) % 8;
    const double z = 1.2 * (age - 44) / 15 + 1.0 * (hours - 35) / 15 + edu_effect[edu] + (job < 3 ? 0.7 : -0.5) +
                     rng.normal(0, 0.2);
    const int label = z > 0;
    const double score = 0.5 * (age - 44) / 15 - 0.8 * (hours - 35) / 15 + edu_effect[edu];
    out << age << ',' << hours << ',' << kEdu[edu] << ',' << kJobs[job] << ',' << (label ? ">50K" : "<=50K") << ','
        << label << ',' << score << '\n';
  }
  return path;
}

gd::data::Dataset census(const std::string& path, int64_t batch) {
  using gd::data::Dtype;
  return gd::data::csv({path}, {.columns = {{.name = "age", .type = Dtype::float32},
                                           {.name = "hours", .type = Dtype::float32},
                                           {.name = "edu", .type = Dtype::string},
                                           {.name = "job", .type = Dtype::string},
                                           {.name = "income", .type = Dtype::string},
                                           {.name = "label", .type = Dtype::int64},
                                           {.name = "score", .type = Dtype::float32}},
                                .header = true})
      .batch(batch);
}

std::vector<fc::Column> dnn_columns() {
  const fc::Column age = fc::numeric_column("age", {1}, std::nullopt, [](double a) { return (a - 44) / 15; });
  const fc::Column hours = fc::numeric_column("hours", {1}, std::nullopt, [](double h) { return (h - 35) / 15; });
  return {age, hours,
          fc::indicator_column(fc::categorical_column_with_vocabulary_list("edu", std::vector<std::string>{"hs", "ba", "ms", "phd"})),
          fc::embedding_column(fc::categorical_column_with_hash_bucket("job", 16), 4)};
}

/// The layers of DNNClassifier({dnn_columns(), {16, 8}, 2}) written by hand.
struct HandBuilt : gd::nn::Module<float, HandBuilt> {
  fc::DenseFeatures<float> input;
  gd::nn::Dense<float> h0, h1, logits;
  HandBuilt(gd::Rng& rng)
      : input(fc::Features(dnn_columns()), rng),
        h0({.in = input.output_width(), .out = 16, .activation = gd::nn::relu}, rng),
        h1({.in = 16, .out = 8, .activation = gd::nn::relu}, rng),
        logits({.in = 8, .out = 2}, rng) {
    register_module("input", input);
    register_module("h0", h0);
    register_module("h1", h1);
    register_module("logits", logits);
  }
  gd::Var<float> forward(const gd::Tensor<float>& x) { return logits(h1(h0(input(x)))); }
};

}  // namespace

TEST_CASE("DNNClassifier is the hand-built model with the same layers: same draws, same training", "[estimator][canned]") {
  const std::string path = write_census("same", 256, 11);
  gd::Rng r1(5), r2(5);
  est::DNNClassifier<float> clf({.feature_columns = dnn_columns(), .hidden_units = {16, 8}, .n_classes = 2}, r1);
  HandBuilt hand(r2);
  const auto a = clf.named_parameters(), b = hand.named_parameters();
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO(a[i].first << " and " << b[i].first);
    CHECK(gd::eval(gd::max(gd::abs(a[i].second.value() - b[i].second.value()))).item() == 0.0f);
  }
  gd::optim::SGD<float> o1(clf.parameters(), {.lr = 0.1}), o2(hand.parameters(), {.lr = 0.1});
  const gd::data::Dataset raw = census(path, 32);
  const gd::train::History h1 = clf.train(raw, o1, {.epochs = 2});
  const gd::data::Dataset packed = clf.input(raw);
  const gd::train::History h2 = gd::train::fit(hand, o2, &est::DNNClassifier<float>::loss, packed, {.epochs = 2});
  CHECK(h1.values("loss") == h2.values("loss"));
  for (size_t i = 0; i < a.size(); ++i)
    CHECK(gd::eval(gd::max(gd::abs(a[i].second.value() - b[i].second.value()))).item() == 0.0f);
}

TEST_CASE("DNNClassifier and LinearClassifier learn a census-like rule from a CSV file", "[estimator][canned]") {
  const std::string train_path = write_census("train", 3000, 21), test_path = write_census("test", 1000, 22);
  const gd::data::Dataset train = census(train_path, 64), test = census(test_path, 250);
  gd::metrics::SparseCategoricalAccuracy acc;
  {
    gd::Rng rng(7);
    est::DNNClassifier<float> clf({.feature_columns = dnn_columns(), .hidden_units = {16, 8}, .n_classes = 2,
                                   .label_key = "income", .label_vocabulary = {"<=50K", ">50K"}, .dropout = 0.1},
                                  rng);
    gd::optim::Adagrad<float> opt(clf.parameters(), {.lr = 0.1});
    const auto h = clf.train(train, opt, {.epochs = 8});
    CHECK(h.epochs.back().loss < h.epochs.front().loss);
    const gd::train::Evaluation ev = clf.evaluate(test, {&acc});
    INFO("DNNClassifier: loss " << ev.loss << ", accuracy " << ev.metrics[0].second);
    CHECK(ev.metrics[0].second > 0.9);
    const gd::Tensor<float> p = clf.predict_probabilities(test);
    CHECK(p.shape() == gd::Shape{1000, 2});
    for (int64_t i = 0; i < 1000; ++i) CHECK(p.data()[2 * i] + p.data()[2 * i + 1] == Approx(1.0f).epsilon(1e-6));
    const gd::Tensor<int64_t> c = clf.predict_classes(test);
    for (int64_t i = 0; i < 1000; ++i) CHECK(c.data()[i] == (p.data()[2 * i + 1] > p.data()[2 * i] ? 1 : 0));
  }
  {
    const fc::Column age = fc::numeric_column("age");
    est::LinearClassifier<float> lin({.feature_columns = {fc::bucketized_column(age, {20, 25, 30, 35, 40, 45, 50, 55, 60, 65}),
                                                          fc::numeric_column("hours", {1}, std::nullopt, [](double h) { return (h - 35) / 15; }),
                                                          fc::categorical_column_with_vocabulary_list("edu", std::vector<std::string>{"hs", "ba", "ms", "phd"}),
                                                          fc::categorical_column_with_hash_bucket("job", 64)},
                                      .n_classes = 2});
    gd::optim::Adagrad<float> opt(lin.parameters(), {.lr = 0.2});
    lin.train(train, opt, {.epochs = 8});
    const gd::train::Evaluation ev = lin.evaluate(test, {&acc});
    INFO("LinearClassifier: loss " << ev.loss << ", accuracy " << ev.metrics[0].second);
    CHECK(ev.metrics[0].second > 0.9);
  }
}

TEST_CASE("DNNRegressor fits a smooth function of the columns", "[estimator][canned]") {
  const std::string train_path = write_census("rtrain", 2000, 31), test_path = write_census("rtest", 500, 32);
  gd::Rng rng(9);
  est::DNNRegressor<float> reg({.feature_columns = dnn_columns(), .hidden_units = {16}, .label_key = "score"}, rng);
  gd::optim::Adam<float> opt(reg.parameters(), {.lr = 0.01});
  reg.train(census(train_path, 50), opt, {.epochs = 10});
  const gd::train::Evaluation ev = reg.evaluate(census(test_path, 100));
  INFO("DNNRegressor: test MSE " << ev.loss);
  CHECK(ev.loss < 0.01);  // the scores' variance is about 0.8
  const gd::Tensor<float> y = reg.predict(census(test_path, 100));
  CHECK(y.shape() == gd::Shape{500, 1});
}

TEST_CASE("canned models: bad options and labels are errors", "[estimator][canned]") {
  gd::Rng rng(1);
  CHECK_THROWS_WITH(est::DNNClassifier<float>({.feature_columns = dnn_columns(), .hidden_units = {4}, .n_classes = 1}, rng),
                    Contains("n_classes must be >= 2"));
  CHECK_THROWS_WITH(est::DNNClassifier<float>({.feature_columns = dnn_columns(), .n_classes = 3, .label_vocabulary = {"a", "b"}}, rng),
                    Contains("label_vocabulary has 2 labels for 3 classes"));
  CHECK_THROWS_WITH(est::DNNClassifier<float>({.feature_columns = dnn_columns(), .hidden_units = {0}}, rng),
                    Contains("hidden_units[0] must be >= 1"));
  const std::string path = write_census("bad", 40, 41);
  est::DNNClassifier<float> clf({.feature_columns = dnn_columns(), .hidden_units = {4}, .label_key = "income"}, rng);
  gd::optim::SGD<float> opt(clf.parameters(), {.lr = 0.1});
  CHECK_THROWS_WITH(clf.train(census(path, 8), opt), Contains("give a label_vocabulary"));
  est::DNNClassifier<float> wrong({.feature_columns = dnn_columns(), .hidden_units = {4}, .label_key = "colour"}, rng);
  CHECK_THROWS_WITH(wrong.evaluate(census(path, 8)), Contains("no label field 'colour'"));
}
