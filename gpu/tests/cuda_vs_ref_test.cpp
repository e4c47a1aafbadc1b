// Differential tests of every second backend against the reference, generic over the registry
// that harness_registry() returns: for every op, direction and contract that a backend kind other
// than "ref" implements, KIND:C computes exactly the bits of ref:C on the op's generated cases and
// on each of its reference inputs (large realistic shapes), rejects each error input with the
// class the op names, and is deterministic; a CUDA kernel's ILP knob changes no bit; and the
// outputs recorded from eager PyTorch (peers/torch/*.jsonl.gz) come out again. A contract whose
// result depends on the order in which atomic additions arrive (ContractInfo::order_of_arrival: the
// unaligned baselines) is held to the reference's bits, and to its own bits run twice, on the cases
// whose outputs have one addend each (ContractInfo::arrival_order_free: every order gives their
// bits); elsewhere a difference from the reference is counted and shown, held only to the bits of
// its elements of one addend (arrival_order_fixed) and to the bound every order keeps on the rest
// (arrival_order_bound), as corpus::classify judges it, and the determinism tests
// report where two runs differ as the expected nondeterminism ("[ ARRIVAL  ]" lines), shrunk,
// instead of failing; shapes, rejections and error classes are held exactly. A backend kind that
// cannot run here (no CUDA device) skips with its reason. The reference emulates libdevice's expf
// (spec rule 12), so fp32 outputs are held to exact bits like bf16 ones.
//
// Built twice: cuda_vs_ref_test against the builtin registry (with the CUDA records' ILP knob), and
// toy_vs_ref_test against the toy op's registry (testing/), whose fake backend carries a planted
// one-ulp bug that this very source must find.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include "core/case_json.h"
#include "core/compare.h"
#include "core/json_strict.h"
#include "core/outcome.h"
#include "core/recording.h"
#include "core/registry.h"
#include "corpus/differential.h"
#include "corpus/reproducer.h"
#include "gpu/tests/first_rows.h"
#include "properties/harness.h"
#if defined(BITPARITY_CUDA_RECORDS)
#include "gpu/common/ilp.h"
#include "gpu/register.h"
#include "gpu/runtime.h"
#endif

namespace bitparity {
namespace {

namespace fs = std::filesystem;

const Registry& registry() { return harness_registry(); }

constexpr const char* kReferenceKind = "ref";

// --- what is under test ----------------------------------------------------------------------

struct Target {
  std::string op;
  Direction direction;
  std::string kind, contract;
  std::string backend() const { return kind + ":" + contract; }
  std::string ref() const { return std::string(kReferenceKind) + ":" + contract; }
  std::string title() const { return op + " " + std::string(direction_name(direction)); }
  const OpInfo& info() const { return *registry().op(op); }
  const ContractInfo& contract_info() const { return *info().contract(contract); }
  bool order_of_arrival() const { return contract_info().order_of_arrival; }
  // An unknown order (cuBLAS): judged against the truth within the contract's error bound.
  bool bounded() const { return static_cast<bool>(contract_info().error_bound); }
};

// Every (op, direction, contract, kind) with an implementation of a kind other than "ref" and a
// reference to hold it against.
std::vector<Target> targets() {
  std::vector<Target> out;
  for (const OpInfo& op : registry().ops())
    for (const auto& [direction, inputs] : op.inputs)
      for (const ContractInfo& contract : op.contracts)
        for (const BackendKind& kind : registry().backends()) {
          const std::string backend = kind.name + ":" + contract.name;
          if (kind.name == kReferenceKind || !registry().impl(op.name, backend)) continue;
          if (!registry().impl(op.name, std::string(kReferenceKind) + ":" + contract.name)) continue;
          out.push_back({op.name, direction, kind.name, contract.name});
        }
  return out;
}

std::string label(const Target& t) {
  return t.op + "_" + std::string(direction_name(t.direction)) + "_" + t.kind + "_" + t.contract;
}
void PrintTo(const Target& t, std::ostream* os) { *os << label(t); }

// Why `kind` cannot run here, if it cannot.
std::optional<std::string> unavailable(const std::string& kind) {
  const BackendKind* backend = registry().backend(kind);
  if (!backend) return "no backend kind " + kind;
  if (!backend->unavailable_reason) return std::nullopt;
  return backend->unavailable_reason();
}

bool applies_to(const std::vector<std::string>& contracts, const std::string& contract) {
  return contracts.empty() || std::find(contracts.begin(), contracts.end(), contract) != contracts.end();
}

bool any_nonzero(const TensorMap& outputs) {
  for (const auto& [name, t] : outputs)
    for (int64_t i = 0; i < t.numel(); ++i)
      if (t.bits(i) != 0) return true;
  return false;
}

// "KIND:C rejects (shape: ...), ref:C computes", or empty when both sides did the same thing with
// the same class; `compared` tells whether both computed.
std::string rejection_difference(const Target& t, const Outcome& got, const Outcome& ref) {
  if (got.rejected() && !ref.rejected())
    return t.backend() + " rejects (" + got.reject_class + ": " + got.message + "), " + t.ref() + " computes";
  if (!got.rejected() && ref.rejected())
    return t.ref() + " rejects (" + ref.reject_class + ": " + ref.message + "), " + t.backend() + " computes";
  if (got.rejected() && got.reject_class != ref.reject_class)
    return "error classes differ: " + t.ref() + " " + ref.reject_class + " (" + ref.message + "), " + t.backend() + " " +
           got.reject_class + " (" + got.message + ")";
  return "";
}

// The last failing case of a property, which is RapidCheck's shrunk counterexample once the
// property returns. Only that one is written (shrinking fails many times on the way), as a
// bitparity-case/1 file named by its content hash (corpus/reproducer.h).
class Counterexample {
 public:
  // Records the failure; the caller then RC_FAILs with the returned message.
  std::string record(const Case& c, const std::string& kind, std::optional<corpus::BackendPair> pair,
                     const std::string& message) {
    case_ = c;
    kind_ = kind;
    pair_ = std::move(pair);
    message_ = message;
    return message;
  }
  // After rc::check: the shrunk counterexample's message and the command that replays it.
  // `tag` starts the line: "[ MISMATCH ]" counts as a finding in scripts/gpu_check.sh's summary.
  std::string report(const std::string& tag = "[ MISMATCH ]") const {
    if (!case_) return "";
    return tag + " " + message_ + "\n" + corpus::write_reproducer(*case_, kind_, pair_, message_);
  }

 private:
  std::optional<Case> case_;
  std::string kind_, message_;
  std::optional<corpus::BackendPair> pair_;
};

// A failure's report, and the line saying that shrinking stopped at its bound where it did.
std::string with_cut_note(const std::string& report, const props::ShrinkBound& shrink) {
  return shrink.cut() ? report + "\n" + shrink.cut_note() : report;
}

// For an order-of-arrival target: kOneAddendCases generated cases (fixed seeds, every size) that
// its contract accepts with one addend an output (ContractInfo::arrival_order_free), so that its
// kernels are held to bits on such cases however few a property run happens to draw.
constexpr int kOneAddendCases = 12;

std::vector<Case> one_addend_cases(const Target& t) {
  std::vector<Case> cases;
  const OpInfo& op = t.info();
  for (int j = 0; static_cast<int>(cases.size()) < kOneAddendCases && j < 4000; ++j) {
    try {
      Case c = op.generate(t.direction)(rc::Random(uint64_t{0x1add} + static_cast<uint64_t>(j)), (j * 7) % 31).value();
      op.validate(c, t.contract_info());
      if (!arrival_order_matters(t.contract_info(), c)) cases.push_back(std::move(c));
    } catch (const std::exception&) {
      // a draw the generator gives up on, or a case the contract rejects
    }
  }
  return cases;
}

// The command that reruns one GoogleTest test of this program (a reference input is rebuilt from
// the op's spec, too large for a case file).
std::string rerun_command() {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return std::string("To reproduce: ") + ::testing::internal::GetArgvs().front() + " --gtest_filter='" +
         info->test_suite_name() + "." + info->name() + "'";
}

class BackendVsRef : public ::testing::TestWithParam<Target> {
 protected:
  void SetUp() override {
    if (const auto why = unavailable(GetParam().kind)) GTEST_SKIP() << GetParam().kind << ": " << *why;
#if defined(BITPARITY_CUDA_RECORDS)
    gpu::set_checked_launches(true);
#endif
  }
};

// --- KIND:C == ref:C on generated cases ------------------------------------------------------------

TEST_P(BackendVsRef, BitIdenticalToReferenceOnGeneratedCases) {
  const Target& t = GetParam();
  const OpInfo& op = t.info();
  int64_t compared = 0, nonzero = 0, rejected = 0, arrival_differences = 0, within_bound = 0, one_addend = 0;
  std::map<std::string, int64_t> tag_counts;
  Counterexample counterexample;
  const corpus::BackendPair pair{t.backend(), t.ref()};
  props::ShrinkBound shrink;
  const bool ok = rc::check(t.title() + " " + t.backend() + " vs " + t.ref(), [&] {
    shrink.run_bounded([&] {
      const Case c = *op.generate(t.direction);
      for (const std::string& tag : op.classes(c).tags) {
        RC_TAG(tag);
        ++tag_counts[tag];
      }
      const Outcome ref = run_outcome(registry(), t.ref(), c);
      const Outcome got = run_outcome(registry(), t.backend(), c);
      if (const std::string why = rejection_difference(t, got, ref); !why.empty())
        RC_FAIL(counterexample.record(c, "error_mismatch", pair, why));
      if (ref.rejected()) {
        RC_TAG("rejected:" + ref.reject_class);
        ++rejected;
        return;
      }
      ++compared;
      if (any_nonzero(*ref.outputs)) ++nonzero;
      const Comparison cmp = compare_outputs(*got.outputs, *ref.outputs);
      if (t.bounded() && cmp.verdict == Verdict::kBitMismatch) {
        // The shared classification (corpus/differential.h) judges both sides against the bound.
        const corpus::DiffResult r = corpus::classify(registry(), c, pair, got, ref);
        if (r.verdict != corpus::DiffVerdict::kAgree) RC_FAIL(counterexample.record(c, r.kind, pair, r.message));
        RC_CLASSIFY(true, "bits differ, within the error bound");
        ++within_bound;
        return;
      }
      // An order-of-arrival contract's case with one addend an output has the bits of every order.
      const bool arrival_matters = arrival_order_matters(t.contract_info(), c);
      if (t.order_of_arrival() && !arrival_matters) ++one_addend;
      RC_CLASSIFY(t.order_of_arrival() && !arrival_matters, "one addend an output: held to the reference's bits");
      if (cmp.verdict == Verdict::kShapeMismatch || (cmp.verdict != Verdict::kIdentical && !arrival_matters))
        RC_FAIL(counterexample.record(c, std::string(verdict_name(cmp.verdict)), pair,
                                      format_comparison(cmp, t.title(), t.backend(), t.ref())));
      if (cmp.verdict != Verdict::kIdentical) {
        // Where the order decides some bits, the shared classification still holds the elements of one
        // addend to their bits and the rest within the bound every order keeps.
        const corpus::DiffResult r = corpus::classify(registry(), c, pair, got, ref);
        if (r.verdict == corpus::DiffVerdict::kFinding) RC_FAIL(counterexample.record(c, r.kind, pair, r.message));
      }
      RC_CLASSIFY(cmp.verdict != Verdict::kIdentical, "added in another order than the reference's");
      if (cmp.verdict != Verdict::kIdentical) ++arrival_differences;
    });
  });
  EXPECT_TRUE(ok) << with_cut_note(counterexample.report(), shrink);
  RecordProperty("arrival_order_differences", static_cast<int>(arrival_differences));
  RecordProperty("one_addend_cases", static_cast<int>(one_addend));
  // Only those cases can fail on their values: the fixed ones too, however few the run drew.
  if (t.order_of_arrival()) {
    const std::vector<Case> fixed = one_addend_cases(t);
    EXPECT_FALSE(fixed.empty()) << "no generated case of one addend an output (ContractInfo::arrival_order_free)";
    for (const Case& c : fixed) {
      const Outcome ref = run_outcome(registry(), t.ref(), c);
      const Outcome got = run_outcome(registry(), t.backend(), c);
      EXPECT_TRUE(rejection_difference(t, got, ref).empty()) << rejection_difference(t, got, ref);
      if (ref.rejected() || got.rejected()) continue;
      const Comparison cmp = compare_outputs(*got.outputs, *ref.outputs);
      EXPECT_EQ(cmp.verdict, Verdict::kIdentical)
          << "[ MISMATCH ] one addend an output: " << format_comparison(cmp, t.title(), t.backend(), t.ref()) << "\n"
          << corpus::write_reproducer(c, std::string(verdict_name(cmp.verdict)), corpus::BackendPair{t.backend(), t.ref()},
                                      "one addend an output");
    }
  }
  RecordProperty("within_bound", static_cast<int>(within_bound));
  // A run that only compared zeros, or only rejections, proves nothing.
  EXPECT_GT(nonzero, 0) << compared << " cases compared, none with a non-zero output";
  std::ostringstream tags;
  for (const auto& [tag, n] : tag_counts) tags << " " << tag << "=" << n;
  RecordProperty("classes", tags.str());
  RecordProperty("rejected", static_cast<int>(rejected));
}

// --- determinism -------------------------------------------------------------------------------

// Every property here shrinks within the property programs' bound (props::ShrinkBound). A
// difference that shows only in some runs makes RapidCheck's shrinking wander (a candidate that
// happens to agree is rejected, one that happens to differ is taken): after the first difference, an
// order-of-arrival contract gets kArrivalShrinkRuns more runs or kArrivalShrinkSeconds, then every
// candidate passes and the smallest difference seen so far is the one reported.
constexpr int kArrivalShrinkRuns = 300;
constexpr double kArrivalShrinkSeconds = 15;

TEST_P(BackendVsRef, Deterministic) {
  const Target& t = GetParam();
  Counterexample counterexample;
  int64_t computed = 0;
  props::ShrinkBound shrink;
  if (t.order_of_arrival())
    shrink = props::ShrinkBound(kArrivalShrinkRuns, std::min(kArrivalShrinkSeconds, props::shrink_seconds()));
  // An order-of-arrival contract's runs differing on a case of one addend an output is no order's doing.
  std::string one_addend_difference;
  const bool ok = rc::check(t.title() + " " + t.backend() + " twice", [&] {
    shrink.run_bounded([&] {
      const Case c = *t.info().generate(t.direction);
      const Outcome first = run_outcome(registry(), t.backend(), c);
      if (first.rejected()) return;
      ++computed;
      const Outcome second = run_outcome(registry(), t.backend(), c);
      RC_ASSERT(!second.rejected());
      const Comparison cmp = compare_outputs(*first.outputs, *second.outputs, {.strict_nan = true});
      if (cmp.verdict == Verdict::kIdentical) return;
      const std::string message =
          counterexample.record(c, "nondeterminism", corpus::BackendPair{t.backend(), t.backend()},
                                format_comparison(cmp, t.title(), "first run", "second run"));
      if (t.order_of_arrival() && !arrival_order_matters(t.contract_info(), c) && one_addend_difference.empty())
        one_addend_difference = counterexample.report();
      RC_FAIL(message);
    });
  });
  EXPECT_GT(computed, 0) << "every generated case was rejected";
  EXPECT_TRUE(one_addend_difference.empty()) << "two runs of a case of one addend an output differ:\n"
                                             << one_addend_difference;
  // The run above stops at its first difference, for an order-of-arrival contract mostly one the
  // order makes: the fixed one-addend cases are run twice whatever it found.
  if (t.order_of_arrival())
    for (const Case& c : one_addend_cases(t)) {
      const Outcome first = run_outcome(registry(), t.backend(), c);
      const Outcome second = run_outcome(registry(), t.backend(), c);
      if (first.rejected() || second.rejected()) {
        EXPECT_EQ(first.rejected(), second.rejected()) << t.title() << ": one run of a case rejects, the other not";
        continue;
      }
      const Comparison cmp = compare_outputs(*first.outputs, *second.outputs, {.strict_nan = true});
      EXPECT_EQ(cmp.verdict, Verdict::kIdentical)
          << "[ MISMATCH ] two runs of a case of one addend an output differ: "
          << format_comparison(cmp, t.title(), "first run", "second run");
    }
  if (t.order_of_arrival() && !ok) {
    // The contract's atomics: two runs differing is what the determinism property exists to show.
    std::printf("[ ARRIVAL  ] %s %s: two runs differ (order of arrival), shrunk:\n%s\n", t.title().c_str(),
                t.backend().c_str(), with_cut_note(counterexample.report("  "), shrink).c_str());
    RecordProperty("nondeterminism", "found");
    return;
  }
  EXPECT_TRUE(ok) << with_cut_note(counterexample.report(), shrink);
}

// --- calls from several threads at once -------------------------------------------------------------

// A kind that runs any number of calls at once (a campaign's --jobs threads share it) gives every
// case the bits it gives alone: kConcurrentThreads threads run the same kConcurrentCases generated
// cases (every size, small to large) at once, each in its own order, and each result is held to the
// case's result run alone. Shared state between calls (a workspace, a cache, a stream) shows here.
constexpr int kConcurrentThreads = 8;
constexpr int kConcurrentCases = 32;
constexpr int kConcurrentRounds = 2;

std::string input_shapes(const Case& c) {
  std::string s;
  for (const auto& [name, t] : c.inputs) s += (s.empty() ? "" : ", ") + name + " " + shape_string(t.shape());
  return s;
}

TEST_P(BackendVsRef, SameBitsFromConcurrentThreads) {
  const Target& t = GetParam();
  if (registry().backend(t.kind)->concurrent_calls != kAnyNumberOfCalls)
    GTEST_SKIP() << t.kind << " runs its calls one at a time";
  // An order-of-arrival contract: its cases of one addend an output, whose bits no order changes.
  std::vector<Case> cases;
  std::vector<Outcome> alone;
  for (int j = 0; static_cast<int>(cases.size()) < kConcurrentCases && j < 50 * kConcurrentCases; ++j) {
    std::optional<Case> c;
    try {
      c = t.info().generate(t.direction)(rc::Random(uint64_t{0x5eed} + static_cast<uint64_t>(j)), (j * 7) % 101).value();
    } catch (const std::exception&) {
      continue;  // a draw the generator gives up on
    }
    if (arrival_order_matters(t.contract_info(), *c)) continue;
    Outcome o = run_outcome(registry(), t.backend(), *c);
    if (o.rejected()) continue;
    cases.push_back(std::move(*c));
    alone.push_back(std::move(o));
  }
  ASSERT_FALSE(cases.empty()) << "every generated case was rejected";
  std::mutex mutex;
  std::vector<std::string> failures;
  int64_t calls = 0;
  std::vector<std::thread> threads;
  for (int w = 0; w < kConcurrentThreads; ++w)
    threads.emplace_back([&, w] {
      for (int round = 0; round < kConcurrentRounds; ++round)
        for (size_t k = 0; k < cases.size(); ++k) {
          const size_t i = (k * (2 * static_cast<size_t>(w) + 1) + static_cast<size_t>(w) * 5) % cases.size();
          std::string failure;
          try {
            const Outcome got = run_outcome(registry(), t.backend(), cases[i]);
            if (got.rejected()) {
              failure = "rejects (" + got.message + ") what it computes alone";
            } else {
              const Comparison cmp = compare_outputs(*got.outputs, *alone[i].outputs, {.strict_nan = true});
              if (cmp.verdict != Verdict::kIdentical)
                failure = format_comparison(cmp, t.title(), "beside other threads", "alone");
            }
          } catch (const std::exception& e) {
            failure = std::string("throws: ") + e.what();
          }
          const std::lock_guard<std::mutex> lock(mutex);
          ++calls;
          if (!failure.empty() && failures.size() < 3)
            failures.push_back("case " + std::to_string(i) + " (" + input_shapes(cases[i]) + "), thread " +
                               std::to_string(w) + ": " + failure);
        }
    });
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(calls, int64_t{kConcurrentThreads} * kConcurrentRounds * static_cast<int64_t>(cases.size()));
  std::string all;
  for (const std::string& f : failures) all += "\n  " + f;
  EXPECT_TRUE(failures.empty()) << t.backend() << " from " << kConcurrentThreads << " threads at once:" << all;
  RecordProperty("cases", static_cast<int>(cases.size()));
}

// --- error inputs: both sides reject with the class the op names ------------------------------------

TEST_P(BackendVsRef, RejectsEveryErrorInputWithItsClass) {
  const Target& t = GetParam();
  if (!t.info().error_inputs) GTEST_SKIP() << t.op << " declares no error inputs";
  int checked = 0;
  for (const ErrorInput& e : t.info().error_inputs(t.direction)) {
    if (!applies_to(e.contracts, t.contract)) continue;
    ++checked;
    for (const std::string& backend : {t.backend(), t.ref()}) {
      const Outcome o = run_outcome(registry(), backend, e.c);
      ASSERT_TRUE(o.rejected()) << e.name << ": " << backend << " computes a case it must reject ("
                                << e.error_class << ")\n"
                                << corpus::write_reproducer(e.c, "error_mismatch", std::nullopt,
                                                            e.name + ": " + backend + " computes");
      EXPECT_EQ(o.reject_class, e.error_class) << e.name << ": " << backend << ": " << o.message;
      EXPECT_NE(o.message.find(e.field), std::string::npos)
          << e.name << ": " << backend << "'s message does not name " << e.field << ": " << o.message;
    }
  }
  RecordProperty("error_inputs", checked);
}

// --- zero rows: empty outputs of the right shape --------------------------------------------------

TEST_P(BackendVsRef, ZeroRowsGiveTheReferencesEmptyOutputs) {
  const Target& t = GetParam();
  std::optional<Case> base;
  for (const ReferenceInput& input : t.info().reference_inputs(t.direction))
    if (applies_to(input.contracts, t.contract) && !input.bench_only) {
      base = input.make();
      break;
    }
  if (!base) GTEST_SKIP() << t.title() << " has no reference input for " << t.contract;
  const Case c = testing_support::first_rows(t.info(), *base, 0);
  const Outcome ref = run_outcome(registry(), t.ref(), c);
  const Outcome got = run_outcome(registry(), t.backend(), c);
  ASSERT_EQ(rejection_difference(t, got, ref), "");
  if (ref.rejected()) GTEST_SKIP() << t.contract << " rejects zero rows (" << ref.message << ")";
  EXPECT_EQ(compare_outputs(*got.outputs, *ref.outputs).verdict, Verdict::kIdentical) << t.title();
  for (const TensorSpec& spec : t.info().output_specs(t.direction)) {
    if (!spec.rows_first || !got.outputs->count(spec.name)) continue;
    EXPECT_EQ(got.outputs->at(spec.name).dim(0), 0) << spec.name;
  }
}

#if defined(BITPARITY_CUDA_RECORDS)
// --- the ILP tuning knob of a CUDA kernel changes no bit ---------------------------------------------

TEST_P(BackendVsRef, SameBitsAtEveryIlp) {
  const Target& t = GetParam();
  if (t.kind != "cuda" || !gpu::kernel_record(t.op, t.contract)) GTEST_SKIP() << t.backend() << " has no ILP knob";
  // An order-of-arrival contract: its cases of one addend an output, whose bits no order changes.
  Counterexample counterexample;
  props::ShrinkBound shrink;
  int64_t compared = 0;
  const bool ok = rc::check(t.title() + " " + t.backend() + " at ILP 1, 2 and 4 against its default", [&] {
    shrink.run_bounded([&] {
      const Case c = *t.info().generate(t.direction);
      if (arrival_order_matters(t.contract_info(), c)) return;
      const Outcome base = run_outcome(registry(), t.backend(), c);
      if (base.rejected()) return;
      ++compared;
      for (int ilp : gpu::kIlpChoices) {
        const TensorMap other = gpu::kernel_impl_at_ilp(registry(), t.op, t.contract, ilp)(c, t.contract_info());
        const Comparison cmp = compare_outputs(other, *base.outputs, {.strict_nan = true});
        if (cmp.verdict != Verdict::kIdentical)
          RC_FAIL(counterexample.record(c, "nondeterminism", std::nullopt,
                                        format_comparison(cmp, t.title(), t.backend() + "@ilp" + std::to_string(ilp),
                                                          t.backend() + "@default")));
      }
    });
  });
  EXPECT_TRUE(ok) << with_cut_note(counterexample.report(), shrink);
  EXPECT_GT(compared, 0) << "no generated case computed";
}
#endif

std::string target_name(const ::testing::TestParamInfo<Target>& info) { return label(info.param); }
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(BackendVsRef);
INSTANTIATE_TEST_SUITE_P(Registry, BackendVsRef, ::testing::ValuesIn(targets()), target_name);

// --- reference inputs: the op's large realistic shapes ---------------------------------------------------

struct LargeTarget {
  Target target;
  std::string input;  // a ReferenceInput's name
};

std::vector<LargeTarget> large_targets() {
  std::vector<LargeTarget> out;
  for (const Target& t : targets()) {
    if (!t.info().reference_inputs) continue;
    for (const ReferenceInput& input : t.info().reference_inputs(t.direction))
      if (applies_to(input.contracts, t.contract) && !input.bench_only) out.push_back({t, input.name});
  }
  return out;
}

// The target op's reference input of that name, built; nullopt when the op has none of the name.
std::optional<Case> make_reference_input(const Target& t, const std::string& name) {
  for (const ReferenceInput& input : t.info().reference_inputs(t.direction))
    if (input.name == name) return input.make();
  return std::nullopt;
}

void PrintTo(const LargeTarget& t, std::ostream* os) { *os << label(t.target) << "_" << t.input; }

class BackendVsRefLarge : public ::testing::TestWithParam<LargeTarget> {
 protected:
  void SetUp() override {
    if (const auto why = unavailable(GetParam().target.kind)) GTEST_SKIP() << GetParam().target.kind << ": " << *why;
#if defined(BITPARITY_CUDA_RECORDS)
    gpu::set_checked_launches(true);
#endif
  }
};

TEST_P(BackendVsRefLarge, BitIdenticalAndDeterministic) {
  const Target& t = GetParam().target;
  const std::optional<Case> made = make_reference_input(t, GetParam().input);
  ASSERT_TRUE(made.has_value()) << "reference input " << GetParam().input << " vanished";
  const Case& c = *made;
  const Outcome ref = run_outcome(registry(), t.ref(), c);
  const Outcome got = run_outcome(registry(), t.backend(), c);
  ASSERT_FALSE(ref.rejected()) << t.ref() << " rejects a reference input: " << ref.message;
  ASSERT_FALSE(got.rejected()) << t.backend() << " rejects a reference input: " << got.message;
  ASSERT_TRUE(any_nonzero(*ref.outputs)) << "a reference input whose outputs are all zero proves nothing";
  const Comparison cmp = compare_outputs(*got.outputs, *ref.outputs);
  const Outcome again = run_outcome(registry(), t.backend(), c);
  ASSERT_FALSE(again.rejected());
  const Comparison twice = compare_outputs(*got.outputs, *again.outputs, {.strict_nan = true});
  if (arrival_order_matters(t.contract_info(), c)) {
    ASSERT_NE(cmp.verdict, Verdict::kShapeMismatch) << format_comparison(cmp, t.title(), t.backend(), t.ref());
    if (cmp.verdict != Verdict::kIdentical) {  // elements of one addend exact, the rest within the bound
      const corpus::DiffResult r = corpus::classify(registry(), c, {t.backend(), t.ref()}, got, ref);
      EXPECT_NE(r.verdict, corpus::DiffVerdict::kFinding) << r.message << "\n" << rerun_command();
    }
    std::printf("[ ARRIVAL  ] %s %s on %s: %s the reference's order; two runs %s\n", t.title().c_str(),
                t.backend().c_str(), GetParam().input.c_str(),
                cmp.verdict == Verdict::kIdentical ? "added in" : "did not add in",
                twice.verdict == Verdict::kIdentical ? "agree" : "differ");
    RecordProperty("matches_reference_order", cmp.verdict == Verdict::kIdentical ? "yes" : "no");
    RecordProperty("runs_differ", twice.verdict == Verdict::kIdentical ? "no" : "yes");
    return;
  }
  if (t.bounded() && cmp.verdict == Verdict::kBitMismatch) {
    const corpus::DiffResult r = corpus::classify(registry(), c, {t.backend(), t.ref()}, got, ref);
    EXPECT_EQ(r.verdict, corpus::DiffVerdict::kAgree) << r.message << "\n" << rerun_command();
    const OutputComparison* d = cmp.first_difference();
    std::printf("[ BOUNDED  ] %s %s on %s: %lld of %lld elements of %s differ in bits from %s, %s\n", t.title().c_str(),
                t.backend().c_str(), GetParam().input.c_str(), static_cast<long long>(d->mismatches),
                static_cast<long long>(d->numel), d->name.c_str(), t.ref().c_str(),
                r.verdict == corpus::DiffVerdict::kAgree ? "all within the error bound" : "some outside the bound");
  } else {
    EXPECT_EQ(cmp.verdict, Verdict::kIdentical) << format_comparison(cmp, t.title(), t.backend(), t.ref()) << "\n"
                                                << rerun_command();
  }
  EXPECT_EQ(twice.verdict, Verdict::kIdentical) << "nondeterminism on a reference input\n" << rerun_command();
}

std::string large_name(const ::testing::TestParamInfo<LargeTarget>& info) {
  return label(info.param.target) + "_" + info.param.input;
}
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(BackendVsRefLarge);
INSTANTIATE_TEST_SUITE_P(Registry, BackendVsRefLarge, ::testing::ValuesIn(large_targets()), large_name);

// --- row-count sweeps: ops whose library picks its order from the shape ---------------------------
// For an op with a contract whose order depends on the shape (ContractInfo::order_depends_on_shape:
// cuBLAS picks an algorithm, a tile and a split-K for each M, N, K), every second backend of every
// contract of the op runs each reference input (the bench-only GLM-4.5 shapes included) whole and
// cut to its first M rows, for M = 1..64 and the powers of two below its row count: the first M
// rows of every rows-first output that does not depend on the row count must not change. A
// contract with a written order must hold that at every M; a shape-dependent one reports each M
// where it breaks ("[ VARIANT  ]"), with the launch's description where its record has one.

struct SweepTarget {
  Target target;
  std::string input;
};

std::vector<SweepTarget> sweep_targets() {
  std::vector<SweepTarget> out;
  for (const Target& t : targets()) {
    const auto& contracts = t.info().contracts;
    const bool shape_dependent_op = std::any_of(contracts.begin(), contracts.end(),
                                                [](const ContractInfo& c) { return c.order_depends_on_shape; });
    if (!shape_dependent_op || !t.info().reference_inputs || t.order_of_arrival()) continue;
    for (const ReferenceInput& input : t.info().reference_inputs(t.direction))
      if (applies_to(input.contracts, t.contract)) out.push_back({t, input.name});
  }
  return out;
}

void PrintTo(const SweepTarget& t, std::ostream* os) { *os << label(t.target) << "_" << t.input; }

class RowCountSweep : public ::testing::TestWithParam<SweepTarget> {
 protected:
  void SetUp() override {
    if (const auto why = unavailable(GetParam().target.kind)) GTEST_SKIP() << GetParam().target.kind << ": " << *why;
#if defined(BITPARITY_CUDA_RECORDS)
    gpu::set_checked_launches(true);
#endif
  }
};

TEST_P(RowCountSweep, LeadingRowsKeepTheirBits) {
  const Target& t = GetParam().target;
  const OpInfo& op = t.info();
  const std::optional<Case> made = make_reference_input(t, GetParam().input);
  ASSERT_TRUE(made.has_value()) << "reference input " << GetParam().input << " vanished";
  const Case& c = *made;
  int64_t rows = -1;
  for (const TensorSpec& spec : op.input_specs(t.direction))
    if (const Tensor* in = c.input(spec.name); spec.rows_first && in && in->rank() > 0) rows = in->dim(0);
  if (rows < 2) GTEST_SKIP() << GetParam().input << " has fewer than two rows";
  std::vector<std::string> compared;
  for (const TensorSpec& spec : op.output_specs(t.direction))
    if (spec.rows_first && !spec.row_count_dependent) compared.push_back(spec.name);
  const Outcome whole = run_outcome(registry(), t.backend(), c);
  ASSERT_FALSE(whole.rejected()) << whole.message;
  std::function<std::string(const Case&)> describe;
#if defined(BITPARITY_CUDA_RECORDS)
  if (const gpu::KernelRecord* record = gpu::kernel_record(t.op, t.contract); record && t.kind == "cuda")
    describe = record->describe;
#endif
  const std::string whole_launch = describe ? describe(c) : "";
  std::vector<int64_t> counts;
  for (int64_t m = 1; m <= 64 && m < rows; ++m) counts.push_back(m);
  for (int64_t m = 128; m < rows; m *= 2) counts.push_back(m);
  std::vector<int64_t> breaking;
  for (const int64_t m : counts) {
    const Case part = testing_support::first_rows(op, c, m);
    const Outcome cut = run_outcome(registry(), t.backend(), part);
    ASSERT_FALSE(cut.rejected()) << "M = " << m << ": " << cut.message;
    TensorMap a, b;
    for (const std::string& name : compared) {
      a[name] = cut.outputs->at(name);
      b[name] = testing_support::leading_rows(whole.outputs->at(name), m);
    }
    const Comparison cmp = compare_outputs(a, b, {.strict_nan = true});
    if (cmp.verdict == Verdict::kIdentical) continue;
    breaking.push_back(m);
    const OutputComparison* d = cmp.first_difference();
    std::printf("[ VARIANT  ] %s %s %s: the first %lld rows alone differ from the %lld-row case's in %lld of %lld "
                "elements of %s (at most %llu ulps)%s%s\n",
                t.title().c_str(), t.backend().c_str(), GetParam().input.c_str(), static_cast<long long>(m),
                static_cast<long long>(rows), static_cast<long long>(d->mismatches), static_cast<long long>(d->numel),
                d->name.c_str(), static_cast<unsigned long long>(d->max_ulps),
                describe ? ("; alone: " + describe(part)).c_str() : "",
                describe ? ("; whole: " + whole_launch).c_str() : "");
  }
  std::string list;
  for (const int64_t m : breaking) list += (list.empty() ? "" : ",") + std::to_string(m);
  RecordProperty("row_counts_that_change_bits", list.empty() ? "none" : list);
  std::printf("[ SWEEP    ] %s %s %s: %zu of %zu row counts change the leading rows' bits%s%s\n", t.title().c_str(),
              t.backend().c_str(), GetParam().input.c_str(), breaking.size(), counts.size(),
              list.empty() ? "" : ": M = ", list.c_str());
  if (!t.contract_info().order_depends_on_shape) {
    EXPECT_TRUE(breaking.empty()) << t.backend() << " has a written order, yet its leading rows change at M = " << list
                                  << "\n" << rerun_command();
  }
}

std::string sweep_name(const ::testing::TestParamInfo<SweepTarget>& info) {
  return label(info.param.target) + "_" + info.param.input;
}
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(RowCountSweep);
INSTANTIATE_TEST_SUITE_P(Registry, RowCountSweep, ::testing::ValuesIn(sweep_targets()), sweep_name);

// --- eager PyTorch's own bits -----------------------------------------------------------------
// peers/torch/*.jsonl.gz hold outputs that eager PyTorch computed on an H200 (each line a case with
// its outputs and, in its provenance, the contract). The reference replays them in
// reference/peer_replay_test.cpp; here every available second backend of the contract must
// reproduce them too, bit for bit, or reject them as the reference does (unmodelled).

fs::path source_dir() {
  const char* env = std::getenv("BITPARITY_SOURCE_DIR");  // the GPU machine's checkout lies elsewhere
  return env ? env : BITPARITY_SOURCE_DIR;
}

TEST(BackendVsTorch, ReproducesRecordedEagerPyTorch) {
  const fs::path dir = source_dir() / "peers" / "torch";
  ASSERT_TRUE(fs::is_directory(dir)) << "no " << dir << " (set BITPARITY_SOURCE_DIR to the checkout)";
  const std::vector<fs::path> files = recordings_in(dir);
  ASSERT_FALSE(files.empty()) << "no recordings (*.jsonl.gz) in " << dir;
  int applicable = 0, compared = 0, rejected = 0;
  std::map<std::string, std::string> skipped;  // kind -> why it cannot run here
  for (const fs::path& path : files) {
    for (const auto& [line, text] : read_recording(path)) {
      const std::string where = path.string() + ":" + std::to_string(line);
      const nlohmann::json doc = parse_json_text(text, where);
      if (!registry().op(doc.at("op").get<std::string>())) continue;  // an op this registry lacks
      const Case c = case_from_json(doc, registry());
      const std::string contract = doc.at("provenance").at("contract").get<std::string>();
      for (const BackendKind& kind : registry().backends()) {
        const std::string backend = kind.name + ":" + contract;
        if (kind.name == kReferenceKind || !registry().impl(c.op, backend)) continue;
        ++applicable;
        if (const auto why = unavailable(kind.name)) {
          skipped[kind.name] = *why;
          continue;
        }
        const Outcome got = run_outcome(registry(), backend, c);
        if (got.rejected()) {  // the reference rejects these as unmodelled (peer_replay_test)
          EXPECT_EQ(got.reject_class, "unmodelled") << where << ": " << got.message;
          ++rejected;
          continue;
        }
        const Comparison cmp = compare_outputs(*got.outputs, tensors_from_json(doc.at("outputs"), "outputs"));
        EXPECT_EQ(cmp.verdict, Verdict::kIdentical)
            << where << "\n"
            << format_comparison(cmp, c.op + " " + std::string(direction_name(c.direction)), backend, "torch") << "\n"
            << (cmp.verdict == Verdict::kIdentical
                    ? std::string()
                    : corpus::write_reproducer(c, std::string(verdict_name(cmp.verdict)), std::nullopt,
                                               where + ": " + backend + " differs from the recorded eager PyTorch"));
        ++compared;
      }
    }
  }
  RecordProperty("compared", compared);
  RecordProperty("rejected", rejected);
  if (applicable == 0) GTEST_SKIP() << "no recorded case of an op with a second backend in this registry";
  if (compared + rejected == 0) {
    std::string why;
    for (const auto& [kind, reason] : skipped) why += " " + kind + ": " + reason + ";";
    GTEST_SKIP() << "no backend of the recorded cases can run here:" << why;
  }
  EXPECT_GT(compared, 0) << "every recorded case was rejected";
}

}  // namespace
}  // namespace bitparity
