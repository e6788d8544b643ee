// gradus/data/order.hpp — which examples a pass visits, and in what order, wherever the examples
// live: the shuffle of a pass and the split of a sequence into shards. Dataset::shuffle and
// Dataset::shard use these rules on a stream of elements, and gradus::train's fit uses them on
// in-memory Data, so both shuffle and shard the same way:
//   Dataset::from_tensor_slices(x, y).shuffle(n, seed)   visits epoch e in
//   epoch_permutation(n, seed, e) order, the order in which fit visits Data{x, y} with that seed.
#pragma once
#include <cstdint>
#include <numeric>
#include <utility>
#include <vector>

#include "gradus/core/compiled.hpp"
#include "gradus/core/error.hpp"
#include "gradus/core/rng.hpp"

namespace gradus::data {

namespace detail {

/// splitmix64's finaliser: a bijective mix of one 64-bit word.
inline uint64_t mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace detail

/// The generator of a shuffle with `seed` on the pass `key` (the epoch, or the key a Source opens
/// a pass with): a pure function of (seed, key), so a pass never depends on what ran before it.
inline Rng shuffle_rng(uint64_t seed, uint64_t key) {
  return Rng(detail::mix64(seed) ^ detail::mix64(0xD1B54A32D192ED03ull * (key + 1)));
}

/// One step of a shuffle: takes an element drawn uniformly by `rng` out of the non-empty `pool`;
/// the last element of the pool moves into its slot.
template <class T>
T draw(std::vector<T>& pool, Rng& rng) {
  const size_t j = size_t(rng.below(pool.size()));
  T out = std::move(pool[j]);
  if (j + 1 < pool.size()) pool[j] = std::move(pool.back());
  pool.pop_back();
  return out;
}

/// The order in which pass `key` (an epoch) visits `n` examples, shuffled with `seed`: a
/// Fisher–Yates shuffle driven by shuffle_rng(seed, key): positions n-1, n-2, ..., 0 take the
/// examples drawn one after the other from all of them. A uniformly random permutation that
/// depends on (n, seed, key) alone.
std::vector<int64_t> epoch_permutation(int64_t n, uint64_t seed, uint64_t key);

/// Shard `index` of `num_shards`: a sequence is read in rounds of `num_shards` equal parts, and
/// the shard takes part `index` of every round. Dataset::shard's parts are single elements (it
/// takes elements index, index + num_shards, ...); fit's in-memory data parallelism makes each
/// step a round of num_shards · b examples of the epoch's order, each shard taking its b of them.
struct Shard {
  int64_t num_shards = 1;
  int64_t index = 0;

  /// The shard, or a value_error naming `who` unless num_shards >= 1 and index is in
  /// [0, num_shards).
  static Shard checked(int64_t num_shards, int64_t index, const char* who);
  /// The position of this shard's first item in a round that starts at `round_first` and whose
  /// parts hold `part` items each.
  int64_t first(int64_t round_first, int64_t part) const { return round_first + index * part; }
  /// The number of items of a round, of parts of `part` items, that come after this shard's part.
  int64_t after(int64_t part) const { return (num_shards - 1 - index) * part; }
};

}  // namespace gradus::data

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::data {
GRADUS_INLINE std::vector<int64_t> epoch_permutation(int64_t n, uint64_t seed, uint64_t key) {
  std::vector<int64_t> pool(size_t(n > 0 ? n : 0));
  std::iota(pool.begin(), pool.end(), int64_t(0));
  std::vector<int64_t> order(pool.size());
  Rng rng = shuffle_rng(seed, key);
  for (size_t i = order.size(); i > 0; --i) order[i - 1] = draw(pool, rng);
  return order;
}

GRADUS_INLINE Shard Shard::checked(int64_t num_shards, int64_t index, const char* who) {
  GRADUS_CHECK(value_error, num_shards >= 1 && index >= 0 && index < num_shards, who,
               ": expected num_shards >= 1 and shard_index in [0, num_shards), got num_shards ", num_shards,
               ", shard_index ", index);
  return {num_shards, index};
}
}  // namespace gradus::data
#endif  // GRADUS_DEFINE_COMPILED
