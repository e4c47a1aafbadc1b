// Differential tests of the CUDA backend: for every op, direction and contract that has a cuda
// implementation in the registry, cuda:C computes exactly the bits of ref:C (or both reject the
// case with the same error class); the kernels are deterministic and their ILP knob changes no
// bit; the GLM-4.5-Air shape (rows 16384, F 1408) agrees too; and cuda:C reproduces the outputs
// recorded from eager PyTorch (peers/torch). Without a CUDA device every test skips with the
// reason. The reference emulates libdevice's expf (spec rule 12), so fp32 outputs are held to
// exact bits like bf16 ones.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include "core/case_json.h"
#include "core/compare.h"
#include "core/error.h"
#include "gpu/register.h"
#include "gpu/runtime.h"
#include "gpu/tests/fast_math_check.h"
#include "ops/builtin.h"

namespace bitparity::gpu {
namespace {

const Registry& registry() { return builtin_registry(); }

// --- what is under test ----------------------------------------------------------------------

struct Subject {
  std::string op;
  Direction direction;
  std::string contract;
  std::string cuda() const { return "cuda:" + contract; }
  std::string ref() const { return "ref:" + contract; }
  std::string title() const { return op + " " + std::string(direction_name(direction)); }
};

std::vector<Subject> subjects() {
  std::vector<Subject> out;
  for (const OpInfo& op : registry().ops())
    for (const auto& [direction, inputs] : op.inputs)
      for (const ContractInfo& contract : op.contracts)
        if (registry().impl(op.name, "cuda:" + contract.name)) out.push_back({op.name, direction, contract.name});
  return out;
}

std::string label(const Subject& s) { return s.op + "_" + std::string(direction_name(s.direction)) + "_" + s.contract; }
std::string subject_name(const testing::TestParamInfo<Subject>& info) { return label(info.param); }
void PrintTo(const Subject& s, std::ostream* os) { *os << label(s); }

// --- running one side --------------------------------------------------------------------------

struct Outcome {
  std::optional<TensorMap> outputs;
  std::string error_class;  // set when the case was rejected
  std::string message;
};

Outcome run_side(const std::string& backend_contract, const Case& c) {
  try {
    return {run_impl(registry(), backend_contract, c), "", ""};
  } catch (const RejectError& e) {
    return {std::nullopt, e.error_class(), e.what()};
  }
}

bool any_nonzero(const TensorMap& outputs) {
  for (const auto& [name, t] : outputs)
    for (int64_t i = 0; i < t.numel(); ++i)
      if (t.bits(i) != 0) return true;
  return false;
}

// The last failing case of a property, which is RapidCheck's shrunk counterexample once the
// property returns. Only that one is written to a file (shrinking fails many times on the way).
class Counterexample {
 public:
  explicit Counterexample(std::string label) : label_(std::move(label)) {}
  // Records the failure; the caller then RC_FAILs with the returned message.
  std::string record(const Case& c, const std::string& message, const std::string& a, const std::string& b) {
    case_ = c;
    a_ = a;
    b_ = b;
    message_ = message;
    return message;
  }
  // After rc::check: the shrunk counterexample's message, the file it was written to, and the
  // command that replays it.
  std::string report() const {
    if (!case_) return "";
    const std::string text = case_to_json(*case_).dump();
    char hash[17];
    std::snprintf(hash, sizeof hash, "%016zx", std::hash<std::string>{}(text));
    const char* dir = std::getenv("BITPARITY_FAILURE_DIR");
    const std::string path = std::string(dir ? dir : ".") + "/" + label_ + "-" + hash + ".json";
    std::ofstream(path) << text << "\n";
    return "[ MISMATCH ] " + label_ + ": " + message_ + "\nTo reproduce: bitparity diff --case " + path + " " + a_ + " " +
           b_;
  }

 private:
  std::string label_;
  std::optional<Case> case_;
  std::string message_, a_, b_;
};

class CudaVsRef : public testing::TestWithParam<Subject> {
 protected:
  void SetUp() override {
    if (const auto why = unavailable_reason()) GTEST_SKIP() << *why;
    set_checked_launches(true);
  }
};

// --- cuda:C == ref:C on generated cases --------------------------------------------------------

TEST_P(CudaVsRef, BitIdenticalToReference) {
  const Subject& s = GetParam();
  const OpInfo& op = *registry().op(s.op);
  int64_t compared = 0, nonzero = 0, rejected = 0;
  std::map<std::string, int64_t> tag_counts;
  Counterexample counterexample(label(s));
  auto fail = [&](const Case& c, const std::string& message) {
    return counterexample.record(c, message, s.cuda(), s.ref());
  };
  const bool ok = rc::check(s.title() + " " + s.cuda() + " vs " + s.ref(), [&] {
    const Case c = *op.generate(s.direction);
    for (const std::string& tag : op.classes(c).tags) {
      RC_TAG(tag);
      ++tag_counts[tag];
    }
    const Outcome ref = run_side(s.ref(), c);
    const Outcome cuda = run_side(s.cuda(), c);
    if (!ref.outputs || !cuda.outputs) {
      if (cuda.outputs)
        RC_FAIL(fail(c, s.ref() + " rejects (" + ref.error_class + ": " + ref.message + "), " + s.cuda() + " computes"));
      if (ref.outputs)
        RC_FAIL(fail(c, s.cuda() + " rejects (" + cuda.error_class + ": " + cuda.message + "), " + s.ref() + " computes"));
      if (ref.error_class != cuda.error_class)
        RC_FAIL(fail(c, "error classes differ: " + s.ref() + " " + ref.error_class + " (" + ref.message + "), " +
                            s.cuda() + " " + cuda.error_class + " (" + cuda.message + ")"));
      RC_TAG("rejected:" + ref.error_class);
      ++rejected;
      return;
    }
    ++compared;
    if (any_nonzero(*ref.outputs)) ++nonzero;
    const Comparison cmp = compare_outputs(*cuda.outputs, *ref.outputs);
    if (cmp.verdict != Verdict::kIdentical) RC_FAIL(fail(c, format_comparison(cmp, s.title(), s.cuda(), s.ref())));
  });
  EXPECT_TRUE(ok) << counterexample.report();
  // A run that only compared zeros, or only rejections, proves nothing.
  EXPECT_GT(nonzero, 0) << compared << " cases compared, none with a non-zero output";
  std::ostringstream tags;
  for (const auto& [tag, n] : tag_counts) tags << " " << tag << "=" << n;
  RecordProperty("classes", tags.str());
  RecordProperty("rejected", static_cast<int>(rejected));
}

// --- determinism -------------------------------------------------------------------------------

TEST_P(CudaVsRef, Deterministic) {
  const Subject& s = GetParam();
  const OpInfo& op = *registry().op(s.op);
  Counterexample counterexample(label(s) + "-nondeterministic");
  const bool ok = rc::check(s.title() + " " + s.cuda() + " twice", [&] {
    const Case c = *op.generate(s.direction);
    const Outcome first = run_side(s.cuda(), c);
    if (!first.outputs) return;
    const Outcome second = run_side(s.cuda(), c);
    RC_ASSERT(second.outputs.has_value());
    const Comparison cmp = compare_outputs(*first.outputs, *second.outputs, {.strict_nan = true});
    if (cmp.verdict != Verdict::kIdentical)
      RC_FAIL(counterexample.record(c, "nondeterminism: " + format_comparison(cmp, s.title(), "first run", "second run"),
                                    s.cuda(), s.cuda()));
  });
  EXPECT_TRUE(ok) << counterexample.report();
}

// --- the ILP tuning knob changes no bit ------------------------------------------------------------

TEST_P(CudaVsRef, SameBitsAtEveryIlp) {
  const Subject& s = GetParam();
  const OpInfo& op = *registry().op(s.op);
  Counterexample counterexample(label(s) + "-ilp");
  const bool ok = rc::check(s.title() + " " + s.cuda() + " at ILP 1, 2 and 4 against its default", [&] {
    const Case c = *op.generate(s.direction);
    const Outcome base = run_side(s.cuda(), c);
    if (!base.outputs) return;
    for (int ilp : {1, 2, 4}) {
      const TensorMap other = cuda_impl_with_ilp(s.op, s.contract, ilp)(c);
      const Comparison cmp = compare_outputs(other, *base.outputs, {.strict_nan = true});
      if (cmp.verdict != Verdict::kIdentical)
        RC_FAIL(counterexample.record(
            c, format_comparison(cmp, s.title(), s.cuda() + "@ilp" + std::to_string(ilp), s.cuda() + "@default"),
            s.cuda(), s.cuda()));
    }
  });
  EXPECT_TRUE(ok) << counterexample.report();
}

INSTANTIATE_TEST_SUITE_P(Registry, CudaVsRef, testing::ValuesIn(subjects()), subject_name);

// --- the GLM-4.5-Air expert shape ----------------------------------------------------------------

constexpr int64_t kLargeRows = 16384;
constexpr int64_t kLargeF = 1408;
constexpr double kLargeClamp = 7.0;
constexpr uint64_t kSpecialEvery = 16411;  // one special value (NaN, ±Inf, ±0, subnormal) per this many

uint64_t mix(uint64_t x) {  // splitmix64
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Moderate values (|x| in [2^-6, 2^7), random sign and mantissa) with rare special values.
Tensor large_tensor(DType dtype, Shape shape, uint64_t seed) {
  Tensor t(dtype, std::move(shape));
  const float specials[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1e-40f, -3e-39f};
  for (int64_t i = 0; i < t.numel(); ++i) {
    const uint64_t r = mix(seed * 0x100000001b3ull + static_cast<uint64_t>(i));
    if (r % kSpecialEvery == 0) {
      t.set_f32(i, specials[(r >> 20) % std::size(specials)]);
      continue;
    }
    const int exponent = static_cast<int>((r >> 8) % 13) - 6;
    const float mantissa = 1.0f + static_cast<float>((r >> 24) & 0x7fffff) / static_cast<float>(1 << 23);
    t.set_f32(i, std::ldexp((r & 1) ? -mantissa : mantissa, exponent));
  }
  return t;
}

// One case per subject: bf16 activations, fp32 scale [rows] (the fp64-denominator probs); the
// clamp path for megatron_unfused and paddle_fused_shipped (whose d_scale then is [rows, 1]).
Case large_case(const Subject& s, int64_t rows = kLargeRows, int64_t F = kLargeF) {
  Case c;
  c.op = s.op;
  c.direction = s.direction;
  if (s.contract == "megatron_unfused" || s.contract == "paddle_fused_shipped") c.attrs["clamp"] = kLargeClamp;
  c.inputs["y"] = large_tensor(DType::kBF16, {rows, 2 * F}, 1);
  for (const TensorSpec& spec : registry().op(s.op)->inputs.at(s.direction))
    if (spec.name == "scale") c.inputs["scale"] = large_tensor(DType::kFP32, {rows}, 2);
  if (s.direction == Direction::kBackward) c.inputs["g"] = large_tensor(DType::kBF16, {rows, F}, 3);
  return c;
}

class CudaVsRefLarge : public CudaVsRef {};

TEST_P(CudaVsRefLarge, Rows16384F1408) {
  const Subject& s = GetParam();
  const Case c = large_case(s);
  const Outcome ref = run_side(s.ref(), c);
  const Outcome cuda = run_side(s.cuda(), c);
  ASSERT_TRUE(ref.outputs.has_value()) << ref.message;
  ASSERT_TRUE(cuda.outputs.has_value()) << cuda.message;
  ASSERT_TRUE(any_nonzero(*ref.outputs));
  const Comparison cmp = compare_outputs(*cuda.outputs, *ref.outputs);
  EXPECT_EQ(cmp.verdict, Verdict::kIdentical) << format_comparison(cmp, s.title(), s.cuda(), s.ref());
  const Outcome again = run_side(s.cuda(), c);
  EXPECT_EQ(compare_outputs(*cuda.outputs, *again.outputs, {.strict_nan = true}).verdict, Verdict::kIdentical)
      << "nondeterminism at the large shape";
}

INSTANTIATE_TEST_SUITE_P(Registry, CudaVsRefLarge, testing::ValuesIn(subjects()), subject_name);

// --- eager PyTorch's own bits -----------------------------------------------------------------
// peers/torch/swiglu_family.jsonl holds outputs that eager PyTorch 2.11 computed on an H200
// (peers/torch/record_swiglu.py). The reference replays them in reference/peer_replay_test.cpp;
// here cuda:<contract> must reproduce them too, bit for bit, or reject what the reference rejects.

std::string source_dir() {
  const char* env = std::getenv("BITPARITY_SOURCE_DIR");  // the GPU machine's checkout lies elsewhere
  return env ? env : BITPARITY_SOURCE_DIR;
}

TEST(CudaVsTorch, ReproducesRecordedEagerPyTorch) {
  if (const auto why = unavailable_reason()) GTEST_SKIP() << *why;
  set_checked_launches(true);
  const std::string path = source_dir() + "/peers/torch/swiglu_family.jsonl";
  std::ifstream in(path);
  ASSERT_TRUE(in) << "cannot read " << path << " (set BITPARITY_SOURCE_DIR to the checkout)";
  int compared = 0, rejected = 0;
  std::string text;
  for (int line = 1; std::getline(in, text); ++line) {
    if (text.empty()) continue;
    const nlohmann::json doc = parse_json_text(text, path + ":" + std::to_string(line));
    const Case c = case_from_json(doc, registry());
    const std::string backend = "cuda:" + doc.at("provenance").at("contract").get<std::string>();
    if (!registry().impl(c.op, backend)) continue;
    const Outcome cuda = run_side(backend, c);
    if (!cuda.outputs) {  // the reference rejects these as unmodelled (peer_replay_test)
      EXPECT_EQ(cuda.error_class, "unmodelled") << path << ":" << line << ": " << cuda.message;
      ++rejected;
      continue;
    }
    const Comparison cmp = compare_outputs(*cuda.outputs, tensors_from_json(doc.at("outputs"), "outputs"));
    EXPECT_EQ(cmp.verdict, Verdict::kIdentical)
        << path << ":" << line << "\n"
        << format_comparison(cmp, c.op + " " + std::string(direction_name(c.direction)), backend, "torch");
    ++compared;
  }
  EXPECT_GE(compared, 100) << "recorded cases missing from " << path;
  RecordProperty("compared", compared);
  RecordProperty("rejected", rejected);
}

// --- the runtime ---------------------------------------------------------------------------------

// --- the kernels' arithmetic shortcuts, on every fp32 input ----------------------------------------

std::string hex_examples(const testing_support::ExhaustiveResult& r) {
  std::ostringstream os;
  for (uint32_t x : r.examples) os << " 0x" << std::hex << x;
  return os.str();
}

// sigmoid_silu_fast is what the kernels run; it must give sigmoid_silu's bits wherever it claims
// to, and claim it everywhere but the classes its comment excludes (counted here independently).
// Outside silu_fast's and sigmoid_silu_fast's domain: x = +-0, and |x| >= 2^124 with the
// infinities and NaN (biased exponents 251 to 255), both signs.
constexpr uint64_t kOutsideSiluDomain = 2 + (2 * uint64_t{255 - 251 + 1} << 23);

TEST(FastMath, SigmoidSiluShortcutEqualsIeeeDivisionInItsDomain) {
  if (const auto why = unavailable_reason()) GTEST_SKIP() << *why;
  const testing_support::ExhaustiveResult r = testing_support::check_fast_sigmoid_silu();
  EXPECT_EQ(r.mismatches, 0u) << "inputs (fp32 bits) where the shortcut differs:" << hex_examples(r);
  EXPECT_EQ(r.inputs - r.in_domain, kOutsideSiluDomain);
}

TEST(FastMath, SiluShortcutEqualsIeeeDivisionInItsDomain) {
  if (const auto why = unavailable_reason()) GTEST_SKIP() << *why;
  const testing_support::ExhaustiveResult r = testing_support::check_fast_silu();
  EXPECT_EQ(r.mismatches, 0u) << "inputs (fp32 bits) where the shortcut differs:" << hex_examples(r);
  EXPECT_EQ(r.inputs - r.in_domain, kOutsideSiluDomain);
}

// No band is left out: where 1/den is subnormal (x in about [-88.7, -87.3]) sigmoid_fast is exact
// too, and those inputs are in its domain, so that the test above covers them.
TEST(FastMath, SigmoidShortcutEqualsIeeeDivisionInItsDomain) {
  if (const auto why = unavailable_reason()) GTEST_SKIP() << *why;
  const testing_support::ExhaustiveResult r = testing_support::check_fast_sigmoid();
  EXPECT_EQ(r.mismatches, 0u) << "inputs (fp32 bits) where the shortcut differs:" << hex_examples(r);
  const uint64_t nan = 2 * ((uint64_t{1} << 23) - 1);
  EXPECT_EQ(r.inputs - r.in_domain, nan);
}

TEST(FastMath, OneInstructionBf16RoundingEqualsFloat2Bfloat16Rn) {
  if (const auto why = unavailable_reason()) GTEST_SKIP() << *why;
  const testing_support::ExhaustiveResult r = testing_support::check_bf16_rounding();
  EXPECT_EQ(r.in_domain, r.inputs);  // every fp32 input was tried
  EXPECT_EQ(r.mismatches, 0u) << "inputs (fp32 bits) rounded differently:" << hex_examples(r);
}

TEST(CudaRuntime, SkipsWithAReasonOrDescribesTheDevice) {
  if (const auto why = unavailable_reason()) {
    EXPECT_NE(why->find("no CUDA device"), std::string::npos) << *why;
    GTEST_SKIP() << *why;
  }
  std::cout << "device: " << device_description() << "\n";
  EXPECT_EQ(device_description().find("no CUDA device"), std::string::npos);
}

TEST(CudaRuntime, ErrorsBecomeExceptionsWithMessages) {
  if (const auto why = unavailable_reason()) GTEST_SKIP() << *why;
  try {
    DeviceBuffer huge(size_t{1} << 62);
    FAIL() << "a 4 EiB allocation succeeded";
  } catch (const CudaError& e) {
    EXPECT_NE(std::string(e.what()).find("cudaMalloc"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cudaErrorMemoryAllocation"), std::string::npos) << e.what();
  }
  // The failed allocation is reported once: the next launch does not inherit it.
  for (const Subject& s : subjects()) {
    const Case c = large_case(s, 1, kLargeF);
    EXPECT_NO_THROW(run_impl(registry(), s.cuda(), c)) << s.title() << " " << s.contract;
  }
}

TEST(CudaRuntime, RowsZeroGivesEmptyOutputsOfTheRightShape) {
  if (const auto why = unavailable_reason()) GTEST_SKIP() << *why;
  for (const Subject& s : subjects()) {
    const Case c = large_case(s, 0, kLargeF);
    const TensorMap cuda = run_impl(registry(), s.cuda(), c);
    const TensorMap ref = run_impl(registry(), s.ref(), c);
    EXPECT_EQ(compare_outputs(cuda, ref).verdict, Verdict::kIdentical) << s.title() << " " << s.contract;
    for (const auto& [name, t] : cuda) EXPECT_EQ(t.numel(), 0) << name;
  }
}

}  // namespace
}  // namespace bitparity::gpu
