// fit's in-memory sharding (FitOptions::num_shards / shard_index, for gd::dist): each shard's rows,
// step by step, against slices of the epoch's order written out by hand.
#include <catch2/catch.hpp>

#include <algorithm>
#include <gradus/gradus.hpp>
#include <gradus/train.hpp>
#include <set>
#include <vector>

namespace gd = gradus;

namespace {
// The labels (= example indices) that fit feeds to the loss, batch by batch, on shard k of S.
std::vector<std::vector<int64_t>> rows_seen(int64_t n, int64_t shards, int64_t k, int64_t batch, bool shuffle) {
  gd::Tensor<double> x = gd::Tensor<double>::empty({n, 1});
  for (int64_t i = 0; i < n; ++i) x.data()[i] = double(i);
  gd::train::Data<double, double> data{x, x.clone()};
  gd::Rng rng(1);
  gd::nn::Dense<double> net({.in = 1, .out = 1}, rng);
  gd::optim::SGD<double> opt(net.parameters(), {.lr = 1e-3});
  std::vector<std::vector<int64_t>> seen;
  auto loss = [&](const gd::Tensor<double>& y, const gd::Var<double>& p) {
    std::vector<int64_t> rows;
    for (int64_t i = 0; i < y.size(); ++i) rows.push_back(int64_t(y.data()[i]));
    seen.push_back(rows);
    return gd::losses::mean_squared_error(y, p);
  };
  gd::train::fit(net, opt, loss, data,
                 {.epochs = 2, .batch_size = batch, .shuffle = shuffle, .seed = 5, .num_shards = shards, .shard_index = k});
  return seen;
}
}  // namespace

TEST_CASE("fit: num_shards slices each epoch's order into disjoint per-shard batches", "[train][shard]") {
  // 11 examples, 2 shards, batch 3: 5 examples per shard per epoch (1 left out), steps of 3 and 2 rows
  const int64_t n = 11, S = 2, B = 3;
  for (bool shuffle : {true, false}) {
    INFO("shuffle " << shuffle);
    std::vector<std::vector<int64_t>> shard[2] = {rows_seen(n, S, 0, B, shuffle), rows_seen(n, S, 1, B, shuffle)};
    for (int64_t e = 0; e < 2; ++e) {
      std::vector<int64_t> order(static_cast<size_t>(n));
      if (shuffle)
        order = gd::train::epoch_permutation(n, 5, e);
      else
        for (int64_t i = 0; i < n; ++i) order[size_t(i)] = i;
      // step 0: positions [0, 6) of the order, shard k the k-th 3; step 1: [6, 10), the k-th 2
      for (int64_t k = 0; k < S; ++k) {
        REQUIRE(shard[k].size() == 4);  // 2 epochs x 2 steps
        const auto& s0 = shard[k][size_t(2 * e)];
        const auto& s1 = shard[k][size_t(2 * e + 1)];
        CHECK(s0 == std::vector<int64_t>(order.begin() + 3 * k, order.begin() + 3 * k + 3));
        CHECK(s1 == std::vector<int64_t>(order.begin() + 6 + 2 * k, order.begin() + 6 + 2 * k + 2));
      }
      // together: 10 distinct examples of the 11
      std::set<int64_t> all;
      for (int64_t k = 0; k < S; ++k)
        for (size_t st : {size_t(2 * e), size_t(2 * e + 1)}) all.insert(shard[k][st].begin(), shard[k][st].end());
      CHECK(all.size() == 10);
    }
  }
}

TEST_CASE("fit: bad num_shards / shard_index", "[train][shard]") {
  gd::Tensor<double> x = gd::Tensor<double>::zeros({3, 1});
  gd::train::Data<double, double> data{x, x.clone()};
  gd::Rng rng(1);
  gd::nn::Dense<double> net({.in = 1, .out = 1}, rng);
  gd::optim::SGD<double> opt(net.parameters(), {.lr = 1e-3});
  auto loss = [](const gd::Tensor<double>& y, const gd::Var<double>& p) { return gd::losses::mean_squared_error(y, p); };
  CHECK_THROWS_WITH(gd::train::fit(net, opt, loss, data, {.num_shards = 2, .shard_index = 2}),
                    Catch::Contains("fit: expected num_shards >= 1 and shard_index in [0, num_shards), got num_shards 2, shard_index 2"));
  CHECK_THROWS_WITH(gd::train::fit(net, opt, loss, data, {.num_shards = 4}),
                    Catch::Contains("fit: 3 examples cannot be split into 4 shards"));
}
