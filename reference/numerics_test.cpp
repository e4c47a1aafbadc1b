// canonicalize_nans: every NaN of an fp32, bf16 or fp16 tensor becomes the dtype's canonical NaN
// (fp32 0x7FFFFFFF, 16-bit 0x7FFF) and every other pattern stays; the ranged form touches its range
// only.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "reference/numerics.h"

namespace bitparity::ref {
namespace {

struct Patterns {
  DType dtype;
  uint64_t canonical;
  std::vector<uint64_t> nans, others;
};

TEST(CanonicalNans, EveryNanBecomesCanonicalAndNothingElseChanges) {
  const std::vector<Patterns> all = {
      {DType::kFP32,
       0x7FFFFFFFu,
       {0x7FC00000u, 0x7F800001u, 0xFFC00000u, 0xFFFFFFFFu, 0x7FA00000u},
       {0x7F800000u, 0xFF800000u, 0x7F7FFFFFu, 0x00000000u, 0x80000000u, 0x00000001u, 0x3F800000u}},
      {DType::kBF16, 0x7FFFu, {0x7FC0u, 0x7F81u, 0xFFC0u, 0xFFFFu}, {0x7F80u, 0xFF80u, 0x7F7Fu, 0x0000u, 0x8000u, 0x0001u}},
      {DType::kFP16, 0x7FFFu, {0x7E00u, 0x7C01u, 0xFE00u, 0xFFFFu}, {0x7C00u, 0xFC00u, 0x7BFFu, 0x0000u, 0x8000u, 0x0001u}},
  };
  for (const Patterns& p : all) {
    std::vector<uint64_t> bits = p.nans;
    bits.insert(bits.end(), p.others.begin(), p.others.end());
    Tensor t(p.dtype, {static_cast<int64_t>(bits.size())});
    for (size_t i = 0; i < bits.size(); ++i) t.set_bits(static_cast<int64_t>(i), bits[i]);
    Tensor ranged = t;
    canonicalize_nans(t);
    for (size_t i = 0; i < bits.size(); ++i)
      EXPECT_EQ(t.bits(static_cast<int64_t>(i)), i < p.nans.size() ? p.canonical : bits[i])
          << dtype_name(p.dtype) << " element " << i;
    canonicalize_nans(ranged, 1, 2);  // elements 1 and 2: both NaNs
    for (size_t i = 0; i < bits.size(); ++i)
      EXPECT_EQ(ranged.bits(static_cast<int64_t>(i)), i == 1 || i == 2 ? p.canonical : bits[i])
          << dtype_name(p.dtype) << " element " << i << " (ranged)";
  }
}

}  // namespace
}  // namespace bitparity::ref
