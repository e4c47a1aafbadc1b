#include "core/case_json.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "ops/builtin.h"

namespace bitparity {
namespace {

const char* kValid = R"({
  "format": "bitparity-case/1", "op": "swiglu", "direction": "bwd",
  "attrs": {"clamp": 7.0},
  "inputs": {
    "y": {"dtype": "bf16", "shape": [1, 4], "hex": "3f80c0000000ff80"},
    "g": {"dtype": "bf16", "shape": [1, 2], "hex": "3f803f80"}
  }
})";

TEST(CaseJsonTest, ParsesTheDesignExampleAndRoundTrips) {
  const Case c = case_from_text(kValid, builtin_registry());
  EXPECT_EQ(c.op, "swiglu");
  EXPECT_EQ(c.direction, Direction::kBackward);
  EXPECT_EQ(c.float_attr("clamp"), 7.0);
  const Tensor& y = c.inputs.at("y");
  EXPECT_EQ(y.shape(), (Shape{1, 4}));
  EXPECT_EQ(y.bits(0), 0x3f80u);
  EXPECT_EQ(y.bits(3), 0xff80u);  // -Inf
  const Case again = case_from_json(case_to_json(c), builtin_registry());
  EXPECT_EQ(case_to_json(again), case_to_json(c));
}

TEST(CaseJsonTest, NonFiniteAndNegativeZeroAttributesRoundTrip) {
  for (double v : {std::nan(""), double(INFINITY), double(-INFINITY), -0.0, 1e-300}) {
    Case c = case_from_text(kValid, builtin_registry());
    c.attrs["clamp"] = v;
    const Case back = case_from_text(case_to_json(c).dump(), builtin_registry());
    const double got = *back.float_attr("clamp");
    EXPECT_EQ(f64_bits(got), f64_bits(v)) << v;
  }
}

struct Malformed {
  const char* name;
  std::string patch_from, patch_to;  // textual edit of kValid
  std::string field;                 // the field the error must name
};

void PrintTo(const Malformed& m, std::ostream* os) { *os << m.name; }

class MalformedCaseTest : public testing::TestWithParam<Malformed> {};

TEST_P(MalformedCaseTest, IsRejectedNamingTheField) {
  const Malformed& m = GetParam();
  std::string text = kValid;
  const size_t at = text.find(m.patch_from);
  ASSERT_NE(at, std::string::npos) << "test patch does not apply: " << m.patch_from;
  text.replace(at, m.patch_from.size(), m.patch_to);
  try {
    case_from_text(text, builtin_registry());
    FAIL() << "accepted: " << text;
  } catch (const ParseError& e) {
    EXPECT_EQ(e.field(), m.field) << e.what();
    EXPECT_NE(std::string(e.what()).find(m.field), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Documents, MalformedCaseTest,
    testing::Values(
        Malformed{"HexTooShort", "3f80c0000000ff80", "3f80c0000000ff", "inputs.y.hex"},
        Malformed{"HexNotHex", "3f80c0000000ff80", "3f80c0000000ffzz", "inputs.y.hex"},
        Malformed{"UnknownDtype", "\"bf16\", \"shape\": [1, 4]", "\"bf17\", \"shape\": [1, 4]", "inputs.y.dtype"},
        Malformed{"NegativeDim", "[1, 4]", "[-1, 4]", "inputs.y.shape[0]"},
        Malformed{"FloatDim", "[1, 4]", "[1.5, 4]", "inputs.y.shape[0]"},
        Malformed{"HugeDim", "[1, 4]", "[1, 99999999999999999999]", "inputs.y.shape[1]"},
        Malformed{"OverflowingNumel", "[1, 4]", "[4294967296, 4294967296, 4]", "inputs.y.shape"},
        Malformed{"MissingInput", "\"g\": {\"dtype\": \"bf16\", \"shape\": [1, 2], \"hex\": \"3f803f80\"}",
                  "\"h\": {\"dtype\": \"bf16\", \"shape\": [1, 2], \"hex\": \"3f803f80\"}", "inputs.h"},
        Malformed{"UnexpectedTensorField", "\"hex\": \"3f803f80\"", "\"hex\": \"3f803f80\", \"strides\": [2, 1]",
                  "inputs.g.strides"},
        Malformed{"AttrWrongType", "\"clamp\": 7.0", "\"clamp\": true", "attrs.clamp"},
        Malformed{"AttrBadString", "\"clamp\": 7.0", "\"clamp\": \"seven\"", "attrs.clamp"},
        Malformed{"UnknownAttr", "\"clamp\": 7.0", "\"k\": 2", "attrs.k"},
        Malformed{"UnknownOp", "\"swiglu\"", "\"swiglu2\"", "op"},
        Malformed{"BadDirection", "\"bwd\"", "\"backward\"", "direction"},
        Malformed{"BadFormat", "bitparity-case/1", "bitparity-case/2", "format"},
        Malformed{"UnexpectedTopLevel", "\"attrs\"", "\"extra\": 1, \"attrs\"", "extra"},
        Malformed{"InputsNotObject", "\"inputs\": {", "\"inputs\": 3, \"note\": {", "inputs"},
        Malformed{"Truncated", "\"g\": {", "\"g\": {\"dtype\"", ""},
        // Issue 10, defect 1: zero elements, a leading dim of 2^62; the reference looped over its rows.
        Malformed{"ZeroElementsHugeDim", "\"shape\": [1, 2], \"hex\": \"3f803f80\"",
                  "\"shape\": [4611686018427387904, 0], \"hex\": \"\"", "inputs.g.shape"},
        Malformed{"ZeroElementsDimsPastTheLimit", "\"shape\": [1, 2], \"hex\": \"3f803f80\"",
                  "\"shape\": [65536, 65536, 0], \"hex\": \"\"", "inputs.g.shape"},
        // Defect 10: a duplicate key hid a malformed tensor (the last one won).
        Malformed{"DuplicateInput", "\"g\": {", "\"g\": {\"dtype\": \"bf16\", \"shape\": [1], \"hex\": \"zz\"}, \"g\": {",
                  "inputs.g"},
        Malformed{"DuplicateAttr", "\"clamp\": 7.0", "\"clamp\": 7.0, \"clamp\": 1.0", "attrs.clamp"},
        Malformed{"SeedPastUint64", "\"attrs\"", "\"provenance\": {\"seed\": 18446744073709551616}, \"attrs\"",
                  "provenance.seed"},
        Malformed{"RankPastTheLimit", "[1, 4]", "[1, 1, 1, 1, 1, 1, 1, 1, 4]", "inputs.y.shape"}),
    [](const testing::TestParamInfo<Malformed>& info) { return info.param.name; });

TEST(CaseJsonTest, MissingRequiredInputIsNamed) {
  std::string text = kValid;
  const std::string g = ",\n    \"g\": {\"dtype\": \"bf16\", \"shape\": [1, 2], \"hex\": \"3f803f80\"}";
  text.erase(text.find(g), g.size());
  try {
    case_from_text(text, builtin_registry());
    FAIL();
  } catch (const ParseError& e) {
    EXPECT_EQ(e.field(), "inputs.g");
  }
}

// Issue 10, defect 2: an attribute nested 65536 levels deep crashed the error path that printed it.
TEST(CaseJsonTest, ADeeplyNestedAttributeIsAParseErrorNotAStackOverflow) {
  std::string text = kValid;
  const std::string deep = std::string(65536, '[') + std::string(65536, ']');
  text.replace(text.find("7.0"), 3, deep);
  try {
    case_from_text(text, builtin_registry());
    FAIL();
  } catch (const ParseError& e) {
    EXPECT_NE(std::string(e.what()).find("nests deeper"), std::string::npos) << e.what();
  }
  // Shallow but of the wrong type: named by type, never printed.
  text = kValid;
  text.replace(text.find("7.0"), 3, "[[[1]]]");
  try {
    case_from_text(text, builtin_registry());
    FAIL();
  } catch (const ParseError& e) {
    EXPECT_EQ(e.field(), "attrs.clamp");
    EXPECT_EQ(std::string(e.what()).find("[["), std::string::npos) << e.what();
  }
}

TEST(CaseJsonTest, EveryTruncationOfAValidDocumentIsAParseError) {
  const std::string text = kValid;
  for (size_t n = 0; n + 1 < text.size(); ++n) {
    EXPECT_THROW(case_from_text(text.substr(0, n), builtin_registry()), ParseError) << n;
  }
}

}  // namespace
}  // namespace bitparity
