// Batch invariance: a row's outputs depend on that row's values only. Refilling every other row
// with fresh random values leaves the row's outputs bit-identical, for every rows-first output and
// contract. Cutting the row out on its own (a batch of one) leaves every rows-first output
// bit-identical except those the op declares row_count_dependent: a reduction over the row whose
// summation order the row count sets (rule 7: torch.sum's last-dim reduce picks its lanes from the
// number of rows, so a one-row batch sums a 1408-wide row over 256 lanes where a 32-row batch uses
// 32). Such an output is only invariant to the other rows' values, not to their number.
// Outputs that are not rows-first (a permute's T*k rows) are not compared row by row; an op whose
// other inputs hang on its rows cuts a case through its own OpInfo::take_rows. A batch that a
// batch-wide rule refuses (unequal top-k counts) says nothing about its rows alone.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include "core/gen.h"
#include "corpus/entry.h"
#include "properties/harness.h"
#include "properties/rows.h"

namespace bitparity::props {
namespace {

constexpr const char* kFindingKind = "invariance_violation";

class BatchInvariance : public testing::TestWithParam<Target> {};

// A case of at least two rows and one of its rows, with the case's classes as tags. (suchThat, not
// RC_PRE: it retries at growing sizes, so a generator whose row count grows with the size still
// yields two rows early in a run.)
struct RowCase {
  Case c;
  int64_t rows, row;
};
RowCase draw_row_case(const Target& target) {
  const OpInfo& op = op_info(target.op);
  const Case c = *rc::gen::suchThat(op.generate(target.direction), [](const Case& c) { return case_rows(c) >= 2; });
  const int64_t rows = case_rows(c);
  RC_TAG(gen::rows_class(rows), op.classes(c).shape_class);
  reproduce_with(c, kFindingKind);
  return {c, rows, *rc::gen::inRange<int64_t>(0, rows)};
}

bool contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// Row `r` of each output in `names`; the other outputs dropped.
Outcome row_outcome(const Outcome& outcome, int64_t r, const std::vector<std::string>& names) {
  Outcome row = outcome;
  if (row.outputs) {
    std::erase_if(*row.outputs, [&](const auto& kv) { return !contains(names, kv.first); });
    for (auto& [name, tensor] : *row.outputs) tensor = tensor_rows(tensor, r, 1);
  }
  return row;
}

// The names in both lists.
std::vector<std::string> common(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  std::vector<std::string> both;
  for (const std::string& name : a)
    if (contains(b, name)) both.push_back(name);
  return both;
}

TEST_P(BatchInvariance, OtherRowsValuesDoNotChangeARow) {
  const Target target = GetParam();
  BITPARITY_SKIP_IF_UNAVAILABLE(target);
  BITPARITY_SKIP_IF_ARRIVAL_ORDER(target);
  check_property([&] {
    const RowCase rc = draw_row_case(target);
    const Case refilled = *refill_other_rows(rc.c, rc.row);
    const std::vector<std::string> rows_first = row_outputs(target, rc.c);
    RC_CLASSIFY(rows_first.empty(), "no rows-first output");
    const Outcome a = run(target, rc.c), b = run(target, refilled);
    const auto diff = difference(row_outcome(a, rc.row, rows_first), row_outcome(b, rc.row, rows_first),
                                 target.name() + " row " + std::to_string(rc.row) + " with the other rows refilled");
    if (diff) RC_FAIL(*diff);
  });
}

// Where [ VARIANT ] findings go as corpus entries (pinned divergences that `bitparity replay` and
// the corpus tests rerun on a machine with the backend): the folder $BITPARITY_VARIANT_CORPUS names;
// none are written without it. $BITPARITY_DEVICE, when set, is the entries' provenance.device (the
// GPU, its driver and the library that chose the order), $BITPARITY_COMMIT their commit.
void write_variant_entry(const Target& target, const Case& c, int64_t row) {
  const char* dir = std::getenv("BITPARITY_VARIANT_CORPUS");
  if (!dir || !*dir) return;
  const corpus::BackendPair pair{target.impl, target.impl};
  const corpus::DiffResult r = corpus::diff_rows(harness_registry(), c, target.impl, {row, 1});
  if (r.verdict != corpus::DiffVerdict::kFinding) {
    std::printf("[ VARIANT  ] not written: %s on the minimized case again gives %s\n", target.impl.c_str(),
                r.verdict == corpus::DiffVerdict::kAgree ? "the same bits" : r.kind.c_str());
    return;
  }
  const OpInfo& op = op_info(target.op);
  corpus::Provenance provenance;
  const char* device = std::getenv("BITPARITY_DEVICE");
  provenance.device = device ? device : "";
  if (const char* commit = std::getenv("BITPARITY_COMMIT"); commit && *commit) provenance.commit = commit;
  provenance.tool_version = "batch_invariance_test";
  const std::string signature = corpus::finding_signature(op, c, pair, r);
  const std::filesystem::path path = corpus::write_entry(
      dir, c,
      corpus::make_entry(op, c, pair, r, signature, std::string(corpus::kPinDivergence), provenance, false,
                         corpus::RowCut{row, 1}));
  std::printf("[ VARIANT  ] written: %s\n", path.c_str());
}

TEST_P(BatchInvariance, ARowAloneKeepsItsRowCountIndependentOutputs) {
  const Target target = GetParam();
  BITPARITY_SKIP_IF_UNAVAILABLE(target);
  BITPARITY_SKIP_IF_ARRIVAL_ORDER(target);
  std::optional<std::pair<Case, int64_t>> last_failure;  // the last failing run: the minimized case
  const std::optional<std::string> failure = property_failure([&] {
    const RowCase rc = draw_row_case(target);
    const Case single = take_rows(rc.c, rc.row, 1);
    std::vector<std::string> compared, dependent;
    for (const std::string& name : common(row_outputs(target, rc.c), row_outputs(target, single)))
      (row_count_dependent(target, name) ? dependent : compared).push_back(name);
    const Outcome whole = run(target, rc.c), alone = run(target, single);
    // A rule about the whole batch (every token routes to the same number of experts) may refuse
    // the batch and accept each of its rows: nothing to compare then. A row refused alone while
    // its batch computes is still a violation.
    RC_CLASSIFY(whole.rejected() && !alone.rejected(), "the batch is refused, the row alone is not");
    if (whole.rejected() && !alone.rejected()) return;
    const auto diff = difference(row_outcome(whole, rc.row, compared), row_outcome(alone, 0, compared),
                                 target.name() + " row " + std::to_string(rc.row) + " of " +
                                     std::to_string(rc.rows) + " vs that row alone");
    if (diff) {
      last_failure = std::pair{rc.c, rc.row};
      RC_FAIL(*diff);
    }
    if (whole.rejected()) return;
    const Outcome whole_row = row_outcome(whole, rc.row, dependent);
    for (const auto& [name, tensor] : *whole_row.outputs)
      RC_CLASSIFY(!bit_identical(tensor, alone.outputs->at(name)), name + " changes with the row count");
  });
  if (!failure) return;
  // A contract whose library picks its order from the shape (cuBLAS): the violation is what the
  // property exists to show about it, reported minimized, with its reproducer, and not a failure.
  if (target.contract_info().order_depends_on_shape) {
    std::printf("[ VARIANT  ] %s: a row's bits change with the row count (the order depends on the shape), "
                "minimized:\n%s\n", target.name().c_str(), failure->c_str());
    RecordProperty("row_count_changes_bits", "found");
    if (last_failure) write_variant_entry(target, last_failure->first, last_failure->second);
    return;
  }
  FAIL() << *failure;
}

INSTANTIATE_TEST_SUITE_P(Rows, BatchInvariance, testing::ValuesIn(targets_where(is_row_wise)), target_name);

}  // namespace
}  // namespace bitparity::props
