// gradus/core/philox.hpp — Philox4x32-10, the counter-based random generator of Salmon, Moraes,
// Dror and Shaw ("Parallel random numbers: as easy as 1, 2, 3", SC 2011): four 32-bit words
// from a 128-bit counter and a 64-bit key, each output a pure function of its inputs. Element i
// of a stream is computed without the i-1 before it, so a GPU thread and a CPU loop produce the
// same numbers: dropout draws its mask from here on both devices, and a seed gives the same mask.
//
// This header includes nothing and is compiled on the host and by NVRTC alike.
//
//   const float u = gradus::philox_uniform(key, i);   // element i of stream `key`, in [0, 1)
#pragma once

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define GRADUS_PHILOX_FN __host__ __device__ inline
#else
#define GRADUS_PHILOX_FN inline
#endif

namespace gradus {

/// The four output words of one Philox block.
struct PhiloxBlock {
  unsigned v[4];
};

/// Philox4x32 with 10 rounds of counter (c0..c3) under key (k0, k1); `unsigned` is 32 bits on
/// every target gradus builds for.
GRADUS_PHILOX_FN PhiloxBlock philox4x32_10(unsigned c0, unsigned c1, unsigned c2, unsigned c3, unsigned k0,
                                           unsigned k1) {
  constexpr unsigned long long kM0 = 0xD2511F53ull, kM1 = 0xCD9E8D57ull;  // round multipliers
  constexpr unsigned kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;                // key increments (Weyl)
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += kW0;
      k1 += kW1;
    }
    const unsigned long long p0 = kM0 * c0, p1 = kM1 * c2;
    const unsigned hi0 = unsigned(p0 >> 32), lo0 = unsigned(p0), hi1 = unsigned(p1 >> 32), lo1 = unsigned(p1);
    const unsigned n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
  }
  return {{c0, c1, c2, c3}};
}

/// Element i of the uniform stream of `key`, in [0, 1): the top 24 bits of word i % 4 of the
/// block with counter i / 4 (24 bits: exact in float and double alike).
GRADUS_PHILOX_FN float philox_uniform(unsigned long long key, unsigned long long i) {
  const unsigned long long block = i >> 2;
  const PhiloxBlock b = philox4x32_10(unsigned(block), unsigned(block >> 32), 0u, 0u, unsigned(key), unsigned(key >> 32));
  return float(b.v[i & 3] >> 8) * (1.0f / 16777216.0f);
}

}  // namespace gradus
