// Philox4x32-10 against the known-answer vectors published with the Random123 library
// (kat_vectors, "philox4x32 10" lines: counter[4] key[2] -> output[4]), and the uniform stream
// dropout draws from it.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>

#include "gradus/core/philox.hpp"
#include "gradus/gradus.hpp"

namespace gd = gradus;

TEST_CASE("Philox4x32-10 reproduces the published known-answer vectors", "[philox]") {
  struct Kat {
    unsigned ctr[4], key[2], out[4];
  };
  const Kat kats[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}, {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}, {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const Kat& k : kats) {
    const gd::PhiloxBlock b = gd::philox4x32_10(k.ctr[0], k.ctr[1], k.ctr[2], k.ctr[3], k.key[0], k.key[1]);
    for (int i = 0; i < 4; ++i) CHECK(b.v[i] == k.out[i]);
  }
}

TEST_CASE("the Philox uniform stream: element i is word i % 4 of block i / 4, uniform in [0, 1)", "[philox]") {
  const unsigned long long key = 0x0123456789abcdefull;
  const gd::PhiloxBlock b = gd::philox4x32_10(5, 0, 0, 0, 0x89abcdefu, 0x01234567u);
  CHECK(gd::philox_uniform(key, 22) == float(b.v[2] >> 8) / 16777216.0f);
  // a counter past 2^32 blocks uses the high word
  const gd::PhiloxBlock hi = gd::philox4x32_10(1, 1, 0, 0, 0x89abcdefu, 0x01234567u);
  CHECK(gd::philox_uniform(key, ((1ull << 32) + 1) * 4 + 3) == float(hi.v[3] >> 8) / 16777216.0f);
  // mean and variance of 2^18 draws: 1/2 and 1/12, within 5 standard errors
  const int n = 1 << 18;
  double s = 0, s2 = 0;
  for (int i = 0; i < n; ++i) {
    const double u = gd::philox_uniform(key, uint64_t(i));
    REQUIRE((u >= 0 && u < 1));
    s += u;
    s2 += u * u;
  }
  const double mean = s / n, var = s2 / n - mean * mean;
  CHECK(std::abs(mean - 0.5) < 5 * std::sqrt(1.0 / 12 / n));
  CHECK(std::abs(var - 1.0 / 12) < 5 * std::sqrt(1.0 / 180 / n));
}

TEST_CASE("dropout's mask is the Philox stream keyed by one draw of the Rng", "[philox][dropout]") {
  gd::Rng rng(42), same(42);
  const gd::Tensor<double> x = gd::Tensor<double>::ones({1001});
  const gd::Tensor<double> y = gd::dropout(x, 0.3, rng);
  const uint64_t key = same.next();
  CHECK(rng.next() == same.next());  // the mask took exactly one draw
  int kept = 0;
  for (int64_t i = 0; i < x.size(); ++i) {
    const bool keep = double(gd::philox_uniform(key, uint64_t(i))) < 0.7;
    CHECK(y(i) == (keep ? 1 / 0.7 : 0.0));
    kept += keep;
  }
  CHECK(std::abs(kept - 700.7) < 5 * std::sqrt(1001 * 0.21));
}
