// Classification, entries, atomic writes and replay semantics, on the fake "toy" registry whose
// contracts differ on known inputs (testing/toy_op.h).
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>

#include <gtest/gtest.h>

#include "core/case_json.h"
#include "core/error.h"
#include "core/rows.h"
#include "corpus/entry.h"
#include "corpus/replay.h"
#include "testing/scratch.h"
#include "testing/toy_op.h"

namespace bitparity::corpus {
namespace {

namespace fs = std::filesystem;
using testing::make_fake_registry;
using testing::toy_case;

const BackendPair kExactVsSloppy{"ref:exact", "ref:sloppy"};

fs::path fresh_dir(const std::string& name) { return testing::fresh_dir("corpus_test", name); }
std::string read(const fs::path& path) { return testing::read_text(path); }

class CorpusTest : public ::testing::Test {
 protected:
  void TearDown() override { testing::set_fake_gpu_available(true); }

  // Writes an entry for `c` under `pair` with `pins`, whatever the pair does on it now.
  fs::path write(const fs::path& dir, const Case& c, const BackendPair& pair, const std::string& pins,
                 const std::string& kind = std::string(kBitMismatch), const std::string& output = "y") {
    DiffResult r = diff_case(registry, c, pair);
    r.kind = kind, r.output = output;
    const OpInfo& op = *registry.op("toy");
    return write_entry(dir, c, make_entry(op, c, pair, r, finding_signature(op, c, pair, r), pins, Provenance{}));
  }

  Registry registry = make_fake_registry();
  const Case with_three = toy_case(1, 2, {3.0f, 1.0f});
  const Case without_three = toy_case(1, 2, {2.0f, 1.0f});
};

TEST_F(CorpusTest, ClassifiesEveryKindOfOutcome) {
  DiffResult r = diff_case(registry, with_three, kExactVsSloppy);
  EXPECT_EQ(r.verdict, DiffVerdict::kFinding);
  EXPECT_EQ(r.kind, kBitMismatch);
  EXPECT_EQ(r.output, "y");
  EXPECT_NE(r.message.find("First mismatch at y[0, 0]"), std::string::npos) << r.message;

  EXPECT_EQ(diff_case(registry, without_three, kExactVsSloppy).verdict, DiffVerdict::kAgree);

  r = diff_case(registry, toy_case(0, 3, {}), {"ref:exact", "ref:strict"});
  EXPECT_EQ(r.kind, kErrorMismatch);
  EXPECT_NE(r.message.find("ref:strict rejected (shape)"), std::string::npos) << r.message;

  r = diff_case(registry, without_three, {"ref:exact", "ref:flat"});
  EXPECT_EQ(r.kind, kShapeMismatch);
  EXPECT_EQ(r.output, "y");

  r = diff_case(registry, toy_case(1, testing::kToyModelledCols + 1, {}), kExactVsSloppy);
  EXPECT_EQ(r.verdict, DiffVerdict::kSkip);
  EXPECT_EQ(r.kind, kUnmodelled);

  Case rank3 = without_three;
  rank3.inputs["x"] = Tensor(DType::kBF16, {1, 1, 2});
  EXPECT_EQ(diff_case(registry, rank3, {"ref:exact", "ref:strict"}).verdict, DiffVerdict::kAgree);  // both "shape"
}

// A registry of `op` (the toy's, its contracts changed) with the toy's ref:exact, ref:sloppy and
// fake_gpu:exact (which carries the sloppy bug).
Registry toy_refs_registry(const OpInfo& op) {
  const Registry fake = make_fake_registry();
  Registry r;
  r.add_op(op);
  for (const char* kind : {"ref", "fake_gpu"}) r.add_backend(*fake.backend(kind));
  for (const char* contract : {"exact", "sloppy"})
    r.add_impl("toy", "ref", contract, *fake.impl("toy", std::string("ref:") + contract));
  r.add_impl("toy", "fake_gpu", "exact", *fake.impl("toy", "fake_gpu:exact"));
  return r;
}

// A toy registry whose exact contract adds in the order of arrival (ContractInfo::order_of_arrival),
// every case of at most one row being one addend an output (arrival_order_free) when `one_row_free`,
// and row 0's elements of y and y_sum being one addend each (arrival_order_fixed) when `row0_fixed`
// (y_sum[0] alone with `sum_only`), and every order keeping y within `bound` of the oracle where
// one is given (arrival_order_bound).
Registry arrival_registry(bool one_row_free, bool row0_fixed = false, bool sum_only = false,
                          std::optional<double> bound = {}) {
  OpInfo op = testing::toy_op();
  for (ContractInfo& contract : op.contracts)
    if (contract.name == "exact") {
      contract.order_of_arrival = true;
      if (bound)
        contract.arrival_order_bound = [bound = *bound, oracle = op.oracle](const Case& c) {
          const std::vector<double> truth = oracle(c).at("y");
          return std::map<std::string, ElementBounds>{{"y", {truth, std::vector<double>(truth.size(), bound)}}};
        };
      if (one_row_free)
        contract.arrival_order_free = [](const Case& c) { return c.input("x") && c.input("x")->dim(0) <= 1; };
      if (row0_fixed)
        contract.arrival_order_fixed = [sum_only](const Case& c) {
          const Tensor& x = *c.input("x");
          std::vector<bool> y(static_cast<size_t>(x.numel()), false), y_sum(static_cast<size_t>(x.dim(0)), false);
          for (int64_t j = 0; j < x.dim(1) && !sum_only; ++j) y[static_cast<size_t>(j)] = true;
          if (!y_sum.empty()) y_sum[0] = true;
          return std::map<std::string, std::vector<bool>>{{"y", y}, {"y_sum", y_sum}};
        };
    }
  return toy_refs_registry(op);
}

// Across two sides, a bit mismatch on a case whose order of arrival decides its bits (on a side
// other than the reference, which fixes one order) is a counted skip (arrival_order), on a case of
// one addend an output a finding.
TEST_F(CorpusTest, TheOrderOfArrivalSkipsOnlyTheCasesItDecides) {
  const Registry atomic = arrival_registry(true);
  const BackendPair gpu_vs_ref{"fake_gpu:exact", "ref:exact"};
  const Case two_rows = toy_case(2, 2, {3.0f, 1.0f, 2.0f, 1.0f});
  DiffResult r = diff_case(atomic, with_three, gpu_vs_ref);  // one row: one addend an output
  EXPECT_EQ(r.verdict, DiffVerdict::kFinding);
  EXPECT_EQ(r.kind, kBitMismatch);
  r = diff_case(atomic, two_rows, gpu_vs_ref);
  EXPECT_EQ(r.verdict, DiffVerdict::kSkip);
  EXPECT_EQ(r.kind, kArrivalOrder);
  EXPECT_NE(r.message.find("exact adds in the order its additions arrive"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("First mismatch at y[0, 0]"), std::string::npos) << r.message;
  EXPECT_EQ(diff_case(atomic, two_rows, {"ref:exact", "fake_gpu:exact"}).kind, kArrivalOrder);  // either side
  EXPECT_EQ(diff_case(atomic, toy_case(2, 2, {2.0f, 1.0f, 2.0f, 1.0f}), gpu_vs_ref).verdict, DiffVerdict::kAgree);
  // The references fix one order: their contracts' difference stays a finding.
  EXPECT_EQ(diff_case(atomic, two_rows, kExactVsSloppy).kind, kBitMismatch);
  // Without arrival_order_free every case's order may matter.
  EXPECT_EQ(diff_case(arrival_registry(false), with_three, gpu_vs_ref).kind, kArrivalOrder);
  // The same two sides on the normal registry: a finding.
  EXPECT_EQ(diff_case(registry, two_rows, gpu_vs_ref).kind, kBitMismatch);
}

// In a case whose order of arrival decides some outputs, a difference at an element of one addend
// (ContractInfo::arrival_order_fixed) is still a finding, and names that output.
TEST_F(CorpusTest, AnElementOfOneAddendDiffersAsAFindingWhereTheRestIsArrivalOrder) {
  const Registry atomic = arrival_registry(true, true);
  const BackendPair gpu_vs_ref{"fake_gpu:exact", "ref:exact"};
  DiffResult r = diff_case(atomic, toy_case(2, 2, {3.0f, 1.0f, 2.0f, 1.0f}), gpu_vs_ref);  // the 3.0 in row 0
  EXPECT_EQ(r.verdict, DiffVerdict::kFinding);
  EXPECT_EQ(r.kind, kBitMismatch);
  EXPECT_EQ(r.output, "y");
  EXPECT_NE(r.message.find("y[0, 0] differs (0x4041 against 0x4040), an element of one addend"), std::string::npos)
      << r.message;
  ASSERT_TRUE(r.one_addend.has_value());
  EXPECT_EQ(r.one_addend->index, 0);
  r = diff_case(atomic, toy_case(2, 2, {2.0f, 1.0f, 3.0f, 1.0f}), gpu_vs_ref);  // the 3.0 in row 1
  EXPECT_EQ(r.verdict, DiffVerdict::kSkip);
  EXPECT_EQ(r.kind, kArrivalOrder);
  // Only y_sum[0] of one addend: the finding names y_sum and its element, though y differs first.
  r = diff_case(arrival_registry(true, true, true), toy_case(2, 2, {3.0f, 0.0f, 2.0f, 1.0f}), gpu_vs_ref);
  EXPECT_EQ(r.verdict, DiffVerdict::kFinding);
  EXPECT_EQ(r.output, "y_sum");
  ASSERT_TRUE(r.one_addend.has_value());
  EXPECT_EQ(r.one_addend->index, 0);
  EXPECT_EQ(r.comparison->first_difference()->name, "y");
  EXPECT_NE(r.message.find("y_sum[0] differs"), std::string::npos) << r.message;
}

// Where the order of arrival decides the bits, both sides are held within the bound every order keeps
// (ContractInfo::arrival_order_bound): a value no order gives is a finding (ulp_over_budget), found
// on the elements of several addends, which are skips otherwise.
TEST_F(CorpusTest, AValueNoOrderOfArrivalGivesIsAFinding) {
  const BackendPair gpu_vs_ref{"fake_gpu:exact", "ref:exact"};
  const Case two_rows = toy_case(2, 2, {3.0f, 1.0f, 2.0f, 1.0f});  // 3.0 one bf16 ulp (2^-6) high on fake_gpu
  DiffResult r = diff_case(arrival_registry(true, false, false, 0.1), two_rows, gpu_vs_ref);
  EXPECT_EQ(r.verdict, DiffVerdict::kSkip) << r.message;
  EXPECT_EQ(r.kind, kArrivalOrder);
  EXPECT_NE(r.message.find("(within the bound every order keeps)"), std::string::npos) << r.message;
  r = diff_case(arrival_registry(true, false, false, 1e-3), two_rows, gpu_vs_ref);
  ASSERT_EQ(r.verdict, DiffVerdict::kFinding) << r.message;
  EXPECT_EQ(r.kind, kUlpOverBudget);
  EXPECT_EQ(r.output, "y");
  EXPECT_TRUE(r.bounded);
  ASSERT_TRUE(r.excess);
  EXPECT_EQ(r.excess->backend, "fake_gpu:exact");
  EXPECT_EQ(r.excess->index, 0);
  EXPECT_EQ(r.excess->truth, 3.0);
  EXPECT_NE(r.message.find("outside the bound every order of arrival of contract exact keeps"), std::string::npos)
      << r.message;
  EXPECT_EQ(diff_case(arrival_registry(true, false, false, 1e-3), two_rows, {"ref:exact", "fake_gpu:exact"}).kind,
            kUlpOverBudget);  // either side
  // An element of one addend that differs is a bit mismatch before any bound is asked.
  EXPECT_EQ(diff_case(arrival_registry(true, true, false, 1e-3), two_rows, gpu_vs_ref).kind, kBitMismatch);
  // A case of one addend an output is held to its bits, the bound aside.
  EXPECT_EQ(diff_case(arrival_registry(true, false, false, 0.1), with_three, gpu_vs_ref).kind, kBitMismatch);
  // Two runs of one backend are judged by their bits alone: any difference is nondeterminism.
  EXPECT_EQ(classify(arrival_registry(true, false, false, 0.1), two_rows, {"fake_gpu:exact", "fake_gpu:exact"},
                     run_side(registry, "fake_gpu:exact", two_rows), run_side(registry, "ref:exact", two_rows))
                .kind,
            kNondeterminism);
}

// The toy registry with the sloppy contract judged by an error bound of `bound` around the oracle,
// on `outputs` only.
Registry bounded_registry(double bound, std::vector<std::string> outputs) {
  OpInfo op = testing::toy_op();
  for (ContractInfo& contract : op.contracts)
    if (contract.name == "sloppy")
      contract.error_bound = [bound, outputs, oracle = op.oracle](const Case& c) {
        std::map<std::string, ElementBounds> out;
        for (const auto& [name, truth] : oracle(c))
          if (std::find(outputs.begin(), outputs.end(), name) != outputs.end())
            out[name] = ElementBounds{truth, std::vector<double>(truth.size(), bound)};
        return out;
      };
  return toy_refs_registry(op);
}

TEST_F(CorpusTest, ABoundedContractIsJudgedAgainstTheTruthWithinItsBound) {
  // 3.0 comes out one bf16 ulp (2^-6) high on ref:sloppy, and so does its row's sum.
  const Registry wide = bounded_registry(0.1, {"y", "y_sum"});
  DiffResult r = diff_case(wide, with_three, kExactVsSloppy);
  EXPECT_EQ(r.verdict, DiffVerdict::kAgree) << r.message;
  EXPECT_TRUE(r.bounded);
  EXPECT_NE(r.message.find("within the error bound of contract sloppy"), std::string::npos) << r.message;
  // Bit-identical sides are a plain agreement, not a bounded one.
  r = diff_case(wide, without_three, kExactVsSloppy);
  EXPECT_EQ(r.verdict, DiffVerdict::kAgree);
  EXPECT_FALSE(r.bounded);
  // A bound below the ulp: the sloppy side is outside, the exact one is not.
  const Registry tight = bounded_registry(1e-3, {"y", "y_sum"});
  r = diff_case(tight, with_three, kExactVsSloppy);
  ASSERT_EQ(r.verdict, DiffVerdict::kFinding) << r.message;
  EXPECT_EQ(r.kind, kUlpOverBudget);
  EXPECT_EQ(r.output, "y");
  ASSERT_TRUE(r.excess);
  EXPECT_EQ(r.excess->backend, "ref:sloppy");
  EXPECT_EQ(r.excess->outside, 1);
  EXPECT_EQ(r.excess->truth, 3.0);
  EXPECT_EQ(r.excess->value, 3.0 + 1.0 / 64);
  const nlohmann::json first = first_mismatch_json(r);
  EXPECT_EQ(first.at("a_bits"), "0x4040");
  EXPECT_EQ(first.at("b_bits"), "0x4041");
  EXPECT_EQ(first.at("bound").at("backend"), "ref:sloppy");
  EXPECT_TRUE(is_differential_kind(r.kind));
  // An output the bound does not cover stays a bit mismatch, named as such: y_sum is 3 + 2^-6 exactly,
  // and 3 + 2^-5 from the sloppy y.
  r = diff_case(bounded_registry(0.1, {"y"}), toy_case(1, 2, {3.0f, 0.015625f}), kExactVsSloppy);
  EXPECT_EQ(r.kind, kBitMismatch);
  EXPECT_EQ(r.output, "y_sum");
  // One backend twice is judged bit for bit, bound or not.
  r = classify(tight, with_three, {"ref:sloppy", "ref:sloppy"}, run_side(tight, "ref:sloppy", with_three),
               run_side(tight, "ref:exact", with_three));
  EXPECT_EQ(r.kind, kNondeterminism);
}

TEST_F(CorpusTest, SignatureIgnoresPairOrderButNotClasses) {
  const OpInfo& op = *registry.op("toy");
  const DiffResult r = diff_case(registry, with_three, kExactVsSloppy);
  EXPECT_EQ(finding_signature(op, with_three, kExactVsSloppy, r),
            finding_signature(op, with_three, {"ref:sloppy", "ref:exact"}, r));
  EXPECT_EQ(finding_signature(op, with_three, kExactVsSloppy, r),
            "toy|fwd|ref:exact|ref:sloppy|bit_mismatch|y|rows=1|has3");
  EXPECT_NE(finding_signature(op, toy_case(2, 1, {3.0f, 1.0f}), kExactVsSloppy, r),
            finding_signature(op, with_three, kExactVsSloppy, r));
}

TEST_F(CorpusTest, EntryRecordsFirstMismatchArbitrationAndPins) {
  const fs::path dir = fresh_dir("entry");
  const fs::path path = write(dir, with_three, kExactVsSloppy, default_pin(kExactVsSloppy));
  EXPECT_EQ(path, dir / "toy" /
                      (content_name(with_three, "toy|fwd|ref:exact|ref:sloppy|bit_mismatch|y|rows=1|has3") + ".json"));
  const nlohmann::json doc = nlohmann::json::parse(read(path));
  EXPECT_EQ(doc["pins"], "divergence");
  EXPECT_EQ(doc["finding"]["first"]["a_bits"], "0x4040");  // bf16 3.0
  EXPECT_EQ(doc["finding"]["first"]["b_bits"], "0x4041");
  EXPECT_EQ(doc["finding"]["first"]["ulps"], 1);
  EXPECT_EQ(doc["finding"]["arbitration"]["closer"], "ref:exact");  // the oracle says y = 3 exactly
  const Entry entry = load_entry(path, registry);
  EXPECT_EQ(entry.pair, kExactVsSloppy);
  EXPECT_EQ(entry.pins, "divergence");
  fs::remove_all(dir);
}

TEST_F(CorpusTest, SameContractFindingsAreOpenUnlessAskedOtherwise) {
  const BackendPair gpu{"fake_gpu:exact", "ref:exact"};
  EXPECT_TRUE(gpu.same_contract());
  EXPECT_FALSE(kExactVsSloppy.same_contract());
  EXPECT_EQ(default_pin(gpu), "open");
  EXPECT_EQ(default_pin(gpu, kPinFixed), "fixed");
  EXPECT_EQ(default_pin(kExactVsSloppy, kPinFixed), "divergence");
}

TEST_F(CorpusTest, DivergencePassesWhileItShowsAndFailsWhenItStops) {
  const fs::path dir = fresh_dir("divergence");
  const Entry shows = load_entry(write(dir, with_three, kExactVsSloppy, "divergence"), registry);
  EXPECT_EQ(replay_entry(registry, shows).status, ReplayStatus::kPass);

  const Entry stopped = load_entry(write(dir, without_three, kExactVsSloppy, "divergence"), registry);
  const ReplayResult r = replay_entry(registry, stopped);
  EXPECT_EQ(r.status, ReplayStatus::kFail);
  EXPECT_NE(r.summary.find("no longer shows"), std::string::npos) << r.summary;

  // Same pair still differing, but in another way, is not the pinned divergence.
  const Entry other = load_entry(write(dir, with_three, kExactVsSloppy, "divergence", "shape_mismatch"), registry);
  EXPECT_EQ(replay_entry(registry, other).status, ReplayStatus::kFail);
  fs::remove_all(dir);
}

TEST_F(CorpusTest, FixedMustAgreeAndOpenOnlyReports) {
  const fs::path dir = fresh_dir("fixed");
  const BackendPair gpu{"fake_gpu:exact", "ref:exact"};
  EXPECT_EQ(replay_entry(registry, load_entry(write(dir, with_three, gpu, "fixed"), registry)).status,
            ReplayStatus::kFail);
  EXPECT_EQ(replay_entry(registry, load_entry(write(dir, without_three, gpu, "fixed"), registry)).status,
            ReplayStatus::kPass);

  const ReplayResult still = replay_entry(registry, load_entry(write(dir, with_three, gpu, "open"), registry));
  EXPECT_EQ(still.status, ReplayStatus::kPass);
  EXPECT_NE(still.summary.find("still reproduces"), std::string::npos) << still.summary;
  const ReplayResult gone = replay_entry(registry, load_entry(write(dir, without_three, gpu, "open"), registry));
  EXPECT_EQ(gone.status, ReplayStatus::kPass);
  EXPECT_NE(gone.summary.find("no longer reproduces"), std::string::npos) << gone.summary;
  fs::remove_all(dir);
}

TEST_F(CorpusTest, UnavailableBackendSkipsWithTheReason) {
  const fs::path dir = fresh_dir("skip");
  const Entry entry = load_entry(write(dir, with_three, {"fake_gpu:exact", "ref:exact"}, "fixed"), registry);
  testing::set_fake_gpu_available(false);
  const ReplayResult r = replay_entry(registry, entry);
  EXPECT_EQ(r.status, ReplayStatus::kSkip);
  EXPECT_NE(r.summary.find("no fake device"), std::string::npos) << r.summary;
  fs::remove_all(dir);
}

// Issue 10 #6: an unknown kind or contract is an error; a known kind that cannot run here (even one
// that registered no implementations, as a backend left out of the build) is a skip.
TEST_F(CorpusTest, UnknownNamesAreErrorsAndUnavailableKindsSkip) {
  const fs::path dir = fresh_dir("unknown");
  const Entry entry = load_entry(write(dir, with_three, {"fake_gpu:exact", "ref:exact"}, "fixed"), registry);
  auto with_pair = [&](const BackendPair& pair) {
    Entry e = entry;
    e.pair = pair;
    return replay_entry(registry, e);
  };
  ReplayResult r = with_pair({"gone:exact", "ref:exact"});
  EXPECT_EQ(r.status, ReplayStatus::kError);
  EXPECT_NE(r.summary.find("backend kind 'gone'"), std::string::npos) << r.summary;
  r = with_pair({"ref:exact", "ref:renamed"});
  EXPECT_EQ(r.status, ReplayStatus::kError);
  EXPECT_NE(r.summary.find("contract 'renamed'"), std::string::npos) << r.summary;
  EXPECT_EQ(with_pair({"fake_gpu:sloppy", "ref:sloppy"}).status, ReplayStatus::kError);  // no such implementation

  registry.add_backend({"absent", "a backend left out of this build", [] {
                          return std::optional<std::string>("built without it");
                        }});
  r = with_pair({"absent:exact", "ref:exact"});
  EXPECT_EQ(r.status, ReplayStatus::kSkip);
  EXPECT_EQ(r.summary, "absent is unavailable here: built without it");
  fs::remove_all(dir);
}

TEST_F(CorpusTest, BrokenEntriesNameTheFileAndTheField) {
  const fs::path dir = fresh_dir("broken");
  const fs::path good = write(dir, with_three, kExactVsSloppy, "divergence");
  auto broken = [&](const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json doc = nlohmann::json::parse(read(good));
    edit(doc);
    const fs::path path = dir / "broken.json";
    write_file_atomically(path, doc.dump());
    try {
      load_entry(path, registry);
    } catch (const ParseError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string file = (dir / "broken.json").string();
  EXPECT_EQ(broken([](auto& d) { d["finding"].erase("pair"); }), file + ": finding.pair: missing");
  EXPECT_EQ(broken([](auto& d) { d["pins"] = "maybe"; }).rfind(file + ": pins: expected", 0), 0u);
  EXPECT_EQ(broken([](auto& d) {
              d["finding"]["pair"] = {"ref:exact", "sloppy"};
            }).rfind(file + ": finding.pair:", 0),
            0u);
  EXPECT_EQ(broken([](auto& d) { d["inputs"]["x"]["hex"] = "40"; }).rfind(file + ": inputs.x.hex:", 0), 0u);
  EXPECT_EQ(broken([](auto& d) { d["finding"]["kind"] = "bad"; }).rfind(file + ": finding.kind:", 0), 0u);
  fs::remove_all(dir);
}

// The toy registry plus "rowcount:exact": ref:exact whose y comes out one ulp high in every row
// when the case has more than one row (a library picking another algorithm for a larger batch).
Registry rowcount_registry() {
  Registry r = make_fake_registry();
  r.add_backend({"rowcount", "test-only: y changes with the row count", nullptr});
  const Impl exact = *r.impl("toy", "ref:exact");
  r.add_impl("toy", "rowcount", "exact", [exact](const Case& c, const ContractInfo& contract) {
    TensorMap out = exact(c, contract);
    Tensor& y = out.at("y");
    if (y.dim(0) > 1)
      for (int64_t i = 0; i < y.numel(); ++i) y.set_bits(i, y.bits(i) + 1);
    return out;
  });
  return r;
}

TEST_F(CorpusTest, AnInvarianceEntryReplaysTheRowsAloneAgainstTheWholeCase) {
  const Registry rows = rowcount_registry();
  const Case three_rows = toy_case(3, 2, {1.0f, 2.0f, 1.5f, 0.5f, 2.5f, 1.25f});
  // An honest backend: y's rows alone are y's rows (y_sum, row-count dependent, is not compared).
  EXPECT_EQ(diff_rows(rows, three_rows, "ref:exact", {1, 1}).verdict, DiffVerdict::kAgree)
      << diff_rows(rows, three_rows, "ref:exact", {1, 1}).message;
  const DiffResult r = diff_rows(rows, three_rows, "rowcount:exact", {2, 1});
  ASSERT_EQ(r.verdict, DiffVerdict::kFinding);
  EXPECT_EQ(r.kind, kInvarianceViolation);
  EXPECT_EQ(r.output, "y");
  EXPECT_NE(r.message.find("rows [2, 3) of 3"), std::string::npos) << r.message;

  const fs::path dir = fresh_dir("invariance");
  const OpInfo& op = *rows.op("toy");
  const BackendPair twice{"rowcount:exact", "rowcount:exact"};
  const fs::path path = write_entry(
      dir, three_rows,
      make_entry(op, three_rows, twice, r, finding_signature(op, three_rows, twice, r), "divergence", Provenance{},
                 false, RowCut{2, 1}));
  const Entry entry = load_entry(path, rows);
  ASSERT_TRUE(entry.rows.has_value());
  EXPECT_EQ(entry.rows->first, 2);
  EXPECT_EQ(entry.rows->count, 1);
  EXPECT_EQ(replay_entry(rows, entry).status, ReplayStatus::kPass) << replay_entry(rows, entry).summary;
  // The same entry on a backend that keeps its rows: the pinned divergence no longer shows.
  Entry honest = entry;
  honest.pair = {"ref:exact", "ref:exact"};
  const ReplayResult fixed = replay_entry(rows, honest);
  EXPECT_EQ(fixed.status, ReplayStatus::kFail);
  EXPECT_NE(fixed.summary.find("no longer shows"), std::string::npos) << fixed.summary;

  // The rows are checked when the entry is read.
  auto broken = [&](const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json doc = nlohmann::json::parse(read(path));
    edit(doc);
    const fs::path bad = dir / "broken.json";
    write_file_atomically(bad, doc.dump());
    try {
      load_entry(bad, rows);
    } catch (const ParseError& e) {
      return std::string(e.what()).substr(bad.string().size() + 2);
    }
    return std::string("no error");
  };
  EXPECT_EQ(broken([](auto& d) { d["finding"].erase("rows"); }), "finding.rows: missing");
  EXPECT_EQ(broken([](auto& d) { d["finding"]["rows"]["count"] = 0; }).rfind("finding.rows.count:", 0), 0u);
  EXPECT_EQ(broken([](auto& d) { d["finding"]["rows"]["first"] = -1; }).rfind("finding.rows.first:", 0), 0u);
  EXPECT_EQ(broken([](auto& d) { d["finding"]["rows"]["first"] = 3; }),
            "finding.rows: the rows from 3 (1 of them) are not all in the case's 3 rows");
  // Fields whose sum wraps past int64 are out of range as well: first + count must not turn negative
  // and pass the check (replay then read before the case's rows).
  static constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(broken([](auto& d) { d["finding"]["rows"]["first"] = kMax; }).rfind("finding.rows: the rows from", 0), 0u);
  EXPECT_EQ(broken([](auto& d) {
              d["finding"]["rows"]["first"] = kMax - 100000;
              d["finding"]["rows"]["count"] = 100001;
            }).rfind("finding.rows: the rows from", 0),
            0u);
  EXPECT_EQ(broken([](auto& d) { d["finding"]["rows"]["count"] = kMax; }).rfind("finding.rows: the rows from", 0), 0u);
  // Rows refused alone while the whole case computes name no output (diff_rows): such an entry reads.
  EXPECT_EQ(broken([](auto& d) {
              d["finding"]["output"] = "";
              std::string sig = d["finding"]["signature"];
              sig.replace(sig.find("|y|"), 3, "|-|");
              d["finding"]["signature"] = sig;
            }),
            "no error");
  EXPECT_EQ(broken([](auto& d) {
              d["finding"]["output"] = "z";
              std::string sig = d["finding"]["signature"];
              sig.replace(sig.find("|y|"), 3, "|z|");
              d["finding"]["signature"] = sig;
            }).rfind("finding.output:", 0),
            0u);
  // A case whose row input is a scalar has no rows to name: the file and the field, not a logic_error.
  EXPECT_EQ(broken([](auto& d) {
              d["inputs"]["x"]["shape"] = nlohmann::json::array();
              d["inputs"]["x"]["hex"] = "3f80";
            }).rfind("finding.rows:", 0),
            0u);
  // And the cut itself, wherever its rows come from.
  const Tensor three = testing::toy_case(3, 2, {1, 2, 3, 4, 5, 6}).inputs.at("x");
  EXPECT_THROW(tensor_rows(three, kMax, 1), std::out_of_range);
  EXPECT_THROW(tensor_rows(three, kMax - 1, 2), std::out_of_range);
  EXPECT_THROW(tensor_rows(three, 1, kMax), std::out_of_range);
  EXPECT_EQ(tensor_rows(three, 1, 2).dim(0), 2);
  EXPECT_TRUE(rows_within(3, 0, 3));
  EXPECT_FALSE(rows_within(4, 0, 3));
  EXPECT_FALSE(rows_within(kMax, kMax, kMax));
  EXPECT_EQ(broken([](auto& d) { d["finding"]["pair"] = {"rowcount:exact", "ref:exact"}; }).rfind("finding.pair:", 0), 0u);
  EXPECT_EQ(broken([](auto& d) { d["finding"]["kind"] = "bit_mismatch"; }).rfind("finding.rows: only", 0), 0u);
  fs::remove_all(dir);
}

TEST_F(CorpusTest, SignaturesComeFromEntriesOnly) {
  const fs::path dir = fresh_dir("signatures");
  write(dir, with_three, kExactVsSloppy, "divergence");
  write_file_atomically(dir / "report.json", R"({"format": "bitparity-report/1", "run": {}})");
  const std::set<std::string> signatures = load_signatures(dir);
  ASSERT_EQ(signatures.size(), 1u);
  EXPECT_EQ(*signatures.begin(), "toy|fwd|ref:exact|ref:sloppy|bit_mismatch|y|rows=1|has3");
  write_file_atomically(dir / "toy" / "bad.json", R"({"format": "bitparity-case/1", "op": "toy"})");
  EXPECT_THROW(load_signatures(dir), ParseError);
  fs::remove_all(dir);
}

TEST_F(CorpusTest, ContentNamesAreStableAndDistinct) {
  EXPECT_EQ(content_name(with_three, "s"), content_name(toy_case(1, 2, {3.0f, 1.0f}), "s"));
  EXPECT_NE(content_name(with_three, "s"), content_name(without_three, "s"));
  EXPECT_NE(content_name(with_three, "s"), content_name(with_three, "t"));  // one entry per finding
  EXPECT_EQ(content_name(with_three, "s").size(), kNameDigits);
  EXPECT_EQ(fnv1a64(""), 0xcbf29ce484222325ull);   // the FNV-1a offset basis
  EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cull);  // published test vector
}

TEST_F(CorpusTest, AtomicWriteLeavesOnlyTheFinishedFile) {
  const fs::path dir = fresh_dir("atomic");
  const fs::path path = dir / "sub" / "entry.json";
  write_file_atomically(path, "first");
  write_file_atomically(path, "second");
  EXPECT_EQ(read(path), "second");
  int files = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) files += e.is_regular_file();
  EXPECT_EQ(files, 1);                         // no temporary left behind
  fs::create_directories(dir / "taken.json");  // a folder where the file should go: rename fails
  EXPECT_THROW(write_file_atomically(dir / "taken.json", "x"), std::runtime_error);
  files = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) files += e.is_regular_file();
  EXPECT_EQ(files, 1);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace bitparity::corpus
