// splitmix64 (Steele, Lea, Flood 2014): the one source of seeded, stateless randomness in
// bitparity. Campaign seeds, large reference inputs and benchmark fills all derive from it, so a
// (seed, index) pair names the same bits on every machine. Host and device code may include it.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define BITPARITY_HOST_DEVICE __host__ __device__
#else
#define BITPARITY_HOST_DEVICE
#endif

namespace bitparity {

inline constexpr uint64_t kSplitmixGamma = 0x9e3779b97f4a7c15ull;  // splitmix64's increment

// splitmix64's finalizer: a bijection that spreads nearby inputs (seed, seed + 1) far apart.
BITPARITY_HOST_DEVICE constexpr uint64_t splitmix64_finalize(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The element `x` of the splitmix64 sequence as a stateless hash: finalize(x + gamma).
BITPARITY_HOST_DEVICE constexpr uint64_t splitmix64_mix(uint64_t x) { return splitmix64_finalize(x + kSplitmixGamma); }

// The next value of a splitmix64 stream whose state is `state`.
BITPARITY_HOST_DEVICE constexpr uint64_t splitmix64_next(uint64_t& state) {
  state += kSplitmixGamma;
  return splitmix64_finalize(state);
}

}  // namespace bitparity
