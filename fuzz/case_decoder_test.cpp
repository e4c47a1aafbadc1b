// The byte decoder and the fuzz invariants, run on deterministic random bytes in every build (the
// libFuzzer executables exist only in the clang `fuzz` preset).
#include <random>

#include <gtest/gtest.h>

#include "core/case_json.h"
#include "core/error.h"
#include "fuzz/case_decoder.h"
#include "fuzz/invariants.h"
#include "testing/toy_op.h"

namespace bitparity::fuzz {
namespace {

constexpr int kRandomInputs = 3000;
constexpr size_t kMaxInputBytes = 256;

std::vector<uint8_t> random_bytes(std::mt19937_64& rng) {
  std::vector<uint8_t> bytes(rng() % kMaxInputBytes);
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
  return bytes;
}

TEST(ByteReader, NeverFailsOnShortInput) {
  ByteReader empty(nullptr, 0);
  EXPECT_EQ(empty.take_front(8), 0u);
  EXPECT_EQ(empty.take_back(4), 0u);
  EXPECT_EQ(empty.take_in_range(-3, 9), -3);
  EXPECT_EQ(empty.take_index(5), 0u);
  EXPECT_FALSE(empty.take_bool());
  EXPECT_TRUE(empty.take_rest().empty());
}

TEST(ByteReader, StructureFromTheFrontPayloadFromTheBack) {
  const uint8_t data[] = {0x01, 0x02, 0xaa, 0xbb};
  ByteReader bytes(data, sizeof data);
  EXPECT_EQ(bytes.take_back(2), 0xaabbu);  // the last byte is the lowest
  EXPECT_EQ(bytes.take_front(1), 0x01u);
  EXPECT_EQ(bytes.take_in_range(0, 1), 0);  // 0x02 % 2
  EXPECT_EQ(bytes.remaining(), 0u);
}

class DecoderTest : public ::testing::Test {
 protected:
  Registry registry = testing::make_fake_registry();
};

TEST_F(DecoderTest, EveryInputDecodesToAValidCaseThatKeepsTheInvariants) {
  std::mt19937_64 rng(1);
  int valid_shape = 0, with_nan = 0;
  for (int n = 0; n < kRandomInputs; ++n) {
    const std::vector<uint8_t> input = random_bytes(rng);
    ByteReader bytes(input.data(), input.size());
    const std::optional<Case> c = decode_case(registry, bytes);
    ASSERT_TRUE(c);
    ASSERT_EQ(c->op, "toy");
    ASSERT_TRUE(c->input("x"));
    ASSERT_EQ(check_json_round_trip(registry, *c), std::nullopt);
    ASSERT_EQ(check_reference_invariants(registry, *c), std::nullopt);
    const Tensor& x = *c->input("x");
    valid_shape += x.rank() == 2 && x.dtype() == DType::kBF16;
    for (int64_t i = 0; i < x.numel(); ++i)
      if (is_nan_bits(x.dtype(), x.bits(i))) {
        ++with_nan;
        break;
      }
  }
  // The decoder must reach both the accepted and the rejected paths, and raw payloads must
  // produce the special values that generators rarely do.
  EXPECT_GT(valid_shape, kRandomInputs / 10);
  EXPECT_LT(valid_shape, kRandomInputs);
  EXPECT_GT(with_nan, 0);
}

TEST_F(DecoderTest, InvariantsCatchMisbehavingReferences) {
  const Case c = testing::toy_case(1, 2, {1.0f, 2.0f});
  auto registry_with = [&](Impl impl) {
    Registry r;
    r.add_op(*registry.op("toy"));
    r.add_backend({"ref", "", nullptr});
    r.add_impl("toy", "ref", "exact", std::move(impl));
    return r;
  };
  const Registry throws = registry_with([](const Case&, const ContractInfo&) -> TensorMap { throw std::out_of_range("index"); });
  EXPECT_NE(check_reference_invariants(throws, c), std::nullopt);

  const Registry extra = registry_with([](const Case&, const ContractInfo&) {
    return TensorMap{{"y", Tensor(DType::kBF16, {1, 2})}, {"z", Tensor(DType::kBF16, {1})}};
  });
  EXPECT_NE(check_reference_invariants(extra, c), std::nullopt);

  auto counter = std::make_shared<int>(0);
  const Registry flaky = registry_with([counter](const Case&, const ContractInfo&) {
    Tensor y(DType::kBF16, {1, 2});
    y.set_bits(0, static_cast<uint64_t>(++*counter));
    return TensorMap{{"y", y}};
  });
  EXPECT_NE(check_reference_invariants(flaky, c), std::nullopt);
}

TEST_F(DecoderTest, ParserOnlyThrowsParseOrRejectErrors) {
  const std::string valid = case_to_json(testing::toy_case(1, 2, {1.0f, -0.0f}, 0.5)).dump();
  ASSERT_EQ(check_parser(registry, valid), std::nullopt);
  for (size_t cut = 0; cut < valid.size(); ++cut) ASSERT_EQ(check_parser(registry, valid.substr(0, cut)), std::nullopt);
  std::mt19937_64 rng(2);
  const std::string alphabet = "{}[]\":,0123456789.-+eE abcdefxyzntrul\\";
  for (int n = 0; n < kRandomInputs; ++n) {
    std::string text = valid;
    for (int flips = 1 + static_cast<int>(rng() % 4); flips > 0; --flips)
      text[rng() % text.size()] = alphabet[rng() % alphabet.size()];
    ASSERT_EQ(check_parser(registry, text), std::nullopt) << text;
  }
}

// Found by json_fuzzer: a number beyond double's range is json::out_of_range (406), not a
// parse_error, and must still come back as a ParseError.
TEST_F(DecoderTest, ParserTurnsNumberOverflowIntoParseError) {
  EXPECT_EQ(check_parser(registry, R"({"format": "bitparity-case/1", "op": "toy", "direction": "fwd",
                                      "attrs": {"scale": 1e400}, "inputs": {}})"),
            std::nullopt);
}

}  // namespace
}  // namespace bitparity::fuzz
