// examples/census.cpp — canned models over feature columns on a CSV file: an income classifier
// in the style of the census tutorials of tf.estimator, on a census-like file this program writes
// from a known rule (so that it runs anywhere and the best accuracy is known: the rule's noise
// flips about 3% of the labels).
//
// Columns: age and hours as normalised numbers, age also bucketized, education through a
// vocabulary, occupation hashed into 32 buckets; the label is the string "<=50K" or ">50K". It
// trains a DNNClassifier (an 8-dimensional occupation embedding, hidden layers 32 and 16) and a
// LinearClassifier (the categorical columns taken directly) with fit on the CSV Dataset, then the
// same DNN written by hand from DenseFeatures and Dense layers, and checks that the two DNNs,
// drawn from the same seed and trained the same way, give the same losses bit for bit.
//
//   census [--rows 20000] [--epochs 6] [--dir /tmp]
// Exits non-zero when a classifier's test accuracy is below 0.9 or the two DNNs differ.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <gradus/data.hpp>
#include <gradus/estimator.hpp>
#include <gradus/gradus.hpp>

#include "flags.hpp"

namespace gd = gradus;
namespace fc = gradus::feature_column;
namespace est = gradus::estimator;

namespace {

/// Writes `rows` census-like records: the income is over 50K when 1.2·age' + hours' + an
/// education effect + an occupation effect + noise (σ 0.25) is positive, age' and hours' being
/// the normalised numbers.
void write_csv(const std::string& path, int64_t rows, uint64_t seed) {
  static const char* const jobs[] = {"tech-support", "sales", "exec-managerial", "craft-repair", "farming-fishing",
                                     "adm-clerical", "transport-moving", "protective-serv", "machine-op", "other-service"};
  static const char* const edu[] = {"hs-grad", "some-college", "bachelors", "masters", "doctorate"};
  const double edu_effect[] = {-1.1, -0.4, 0.3, 0.8, 1.2};
  const double job_effect[] = {0.4, 0.2, 1.0, -0.1, -0.9, -0.3, -0.5, 0.1, -0.6, -1.0};
  gd::Rng rng(seed);
  std::ofstream out(path);
  out << "age,hours_per_week,education,occupation,income\n";
  for (int64_t i = 0; i < rows; ++i) {
    const double age = std::floor(rng.uniform(17, 80)), hours = std::floor(rng.uniform(5, 75));
    const int e = int(rng.uniform(0, 5)) % 5, j = int(rng.uniform(0, 10)) % 10;
    const double z = 1.2 * (age - 45) / 18 + (hours - 40) / 20 + edu_effect[e] + job_effect[j] + rng.normal(0, 0.25);
    out << age << ',' << hours << ',' << edu[e] << ',' << jobs[j] << ',' << (z > 0 ? ">50K" : "<=50K") << '\n';
  }
}

gd::data::Dataset read_csv(const std::string& path, int64_t batch, bool shuffle) {
  using gd::data::Dtype;
  gd::data::Dataset d = gd::data::csv({path}, {.columns = {{.name = "age", .type = Dtype::float32},
                                                          {.name = "hours_per_week", .type = Dtype::float32},
                                                          {.name = "education", .type = Dtype::string},
                                                          {.name = "occupation", .type = Dtype::string},
                                                          {.name = "income", .type = Dtype::string}},
                                               .header = true});
  if (shuffle) d = d.shuffle(4096, 17);
  return d.batch(batch);
}

const fc::Column kAge = fc::numeric_column("age", {1}, std::nullopt, [](double a) { return (a - 45) / 18; });
const fc::Column kHours = fc::numeric_column("hours_per_week", {1}, std::nullopt, [](double h) { return (h - 40) / 20; });
const fc::Column kEducation = fc::categorical_column_with_vocabulary_list(
    "education", std::vector<std::string>{"hs-grad", "some-college", "bachelors", "masters", "doctorate"});
const fc::Column kOccupation = fc::categorical_column_with_hash_bucket("occupation", 32);

std::vector<fc::Column> dnn_columns() {
  return {kAge, kHours, fc::bucketized_column(fc::numeric_column("age"), {25, 35, 45, 55, 65}),
          fc::indicator_column(kEducation), fc::embedding_column(kOccupation, 8)};
}

/// The DNNClassifier's layers written by hand.
struct HandBuilt : gd::nn::Module<float, HandBuilt> {
  fc::DenseFeatures<float> input;
  gd::nn::Dense<float> h0, h1, logits;
  explicit HandBuilt(gd::Rng& rng)
      : input(fc::Features(dnn_columns()), rng),
        h0({.in = input.output_width(), .out = 32, .activation = gd::nn::relu}, rng),
        h1({.in = 32, .out = 16, .activation = gd::nn::relu}, rng),
        logits({.in = 16, .out = 2}, rng) {
    register_module("input", input);
    register_module("h0", h0);
    register_module("h1", h1);
    register_module("logits", logits);
  }
  gd::Var<float> forward(const gd::Tensor<float>& x) { return logits(h1(h0(input(x)))); }
};

}  // namespace

int main(int argc, char** argv) {
  const int64_t rows = flag(argc, argv, "--rows", 20000), epochs = flag(argc, argv, "--epochs", 6);
  const std::filesystem::path dir = flag(argc, argv, "--dir", std::filesystem::temp_directory_path().string());
  const std::string train_csv = (dir / "census_train.csv").string(), test_csv = (dir / "census_test.csv").string();
  write_csv(train_csv, rows, 1);
  write_csv(test_csv, rows / 4, 2);
  const gd::data::Dataset train = read_csv(train_csv, 128, true), test = read_csv(test_csv, 1000, false);
  const std::vector<std::string> labels = {"<=50K", ">50K"};
  gd::metrics::SparseCategoricalAccuracy accuracy;
  bool ok = true;

  gd::Rng rng(42);
  est::DNNClassifier<float> dnn({.feature_columns = dnn_columns(), .hidden_units = {32, 16}, .n_classes = 2,
                                 .label_key = "income", .label_vocabulary = labels},
                                rng);
  std::cout << dnn << '\n';
  gd::optim::Adagrad<float> dnn_opt(dnn.parameters(), {.lr = 0.05});
  const gd::train::History dnn_history = dnn.train(train, dnn_opt, {.epochs = epochs});
  const gd::train::Evaluation dnn_eval = dnn.evaluate(test, {&accuracy});
  std::printf("DNNClassifier     test loss %.4f  accuracy %.4f\n", dnn_eval.loss, dnn_eval.metrics[0].second);
  ok = ok && dnn_eval.metrics[0].second >= 0.9;

  est::LinearClassifier<float> linear({.feature_columns = {kAge, kHours, fc::bucketized_column(fc::numeric_column("age"), {25, 35, 45, 55, 65}),
                                                           kEducation, kOccupation},
                                       .n_classes = 2, .label_key = "income", .label_vocabulary = labels});
  gd::optim::Adagrad<float> lin_opt(linear.parameters(), {.lr = 0.2});
  linear.train(train, lin_opt, {.epochs = epochs});
  const gd::train::Evaluation lin_eval = linear.evaluate(test, {&accuracy});
  std::printf("LinearClassifier  test loss %.4f  accuracy %.4f\n", lin_eval.loss, lin_eval.metrics[0].second);
  ok = ok && lin_eval.metrics[0].second >= 0.9;

  // the same DNN by hand, from the same seed, trained on the packed batches with fit
  gd::Rng hand_rng(42);
  HandBuilt hand(hand_rng);
  gd::optim::Adagrad<float> hand_opt(hand.parameters(), {.lr = 0.05});
  const gd::train::History hand_history =
      gd::train::fit(hand, hand_opt, &est::DNNClassifier<float>::loss, dnn.input(train), {.epochs = epochs});
  const bool same = hand_history.values("loss") == dnn_history.values("loss");
  std::printf("hand-built DNN    final training loss %.6f (DNNClassifier %.6f): %s\n", hand_history.values("loss").back(),
              dnn_history.values("loss").back(), same ? "the same losses bit for bit" : "DIFFERENT");
  ok = ok && same;
  std::filesystem::remove(train_csv);
  std::filesystem::remove(test_csv);
  return ok ? 0 : 1;
}
