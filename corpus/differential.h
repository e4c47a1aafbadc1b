// One differential run: a case through two backends, classified as agreement, skip or finding.
// The campaign, `bitparity diff`, `bitparity replay` and the corpus tests all classify here, so a
// finding means the same thing everywhere.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/compare.h"
#include "core/outcome.h"
#include "core/registry.h"

namespace bitparity::corpus {

// Finding kinds (design.md, "Comparison and findings") that a differential run produces.
inline constexpr std::string_view kBitMismatch = "bit_mismatch";
inline constexpr std::string_view kShapeMismatch = "shape_mismatch";
inline constexpr std::string_view kErrorMismatch = "error_mismatch";
// A backend failed with something other than a rejection (a launch error, a device fault, an
// exception of its own): a finding, shrunk and kept like the others, never a skip.
inline constexpr std::string_view kBackendError = "backend_error";
// A backend paired with itself (the pair "K:C vs K:C" runs it twice on the case) gave two
// different results: different bits, shapes or verdicts. Shrunk and kept like the others.
inline constexpr std::string_view kNondeterminism = "nondeterminism";
// A backend's process died, hung or broke its protocol on the case (DeviceFault: a worker that
// crashed, an illegal address): the case may be what killed it. Shrunk (each run in a fresh
// process) and kept like the others.
inline constexpr std::string_view kDeviceFault = "device_fault";
// A backend's worker answered the case, but its checker (compute-sanitizer, `--sanitizer TOOL`)
// reported a memory error, a race or another hazard on it (SanitizerHazard). Shrunk in fresh
// workers and kept like the others; the message holds the checker's report.
inline constexpr std::string_view kSanitizerHazard = "sanitizer_hazard";
// An output of a contract judged by its error bound (ContractInfo::error_bound: an unknown order,
// such as cuBLAS's) has elements farther from the true value than the bound allows.
inline constexpr std::string_view kUlpOverBudget = "ulp_over_budget";
// Batch invariance (the row-count properties): rows of a case, run alone, do not give the bits
// they have in the whole case, on one backend. A corpus entry of this kind names the rows (RowCut)
// and replays through diff_rows.
inline constexpr std::string_view kInvarianceViolation = "invariance_violation";
// Whether `kind` is one of the eight above: the kinds a differential run, and so a corpus entry,
// records. Other harnesses report other kinds (invariance_violation).
bool is_differential_kind(std::string_view kind);
// The reject class with which a reference says "this input is outside what I model": never a
// finding, always a counted skip.
inline constexpr std::string_view kUnmodelled = "unmodelled";
// Two different sides of a pair, one of them an order-of-arrival contract (ContractInfo::
// order_of_arrival) on a kind other than the reference (which fixes one order), differ in bits on a
// case where that order decides them (arrival_order_matters: an output of more than one addend),
// and nowhere else (the elements of one addend, ContractInfo::arrival_order_fixed, agree), its
// sides within the bound every order keeps (ContractInfo::arrival_order_bound, where the contract
// has one; outside it: kUlpOverBudget): not a finding, a counted skip. The same pair's cases of one
// addend an output are compared bit for bit; the contract's self pair still reports the order's
// differences as nondeterminism.
inline constexpr std::string_view kArrivalOrder = "arrival_order";

struct BackendPair {
  std::string a, b;  // "kind:contract" names, such as "cuda:C" and "ref:C"
  std::string name() const { return a + " vs " + b; }
  // cuda:C vs ref:C: a difference is a bug in one of them, not a documented divergence.
  bool same_contract() const;
  // cuda:C vs cuda:C: the backend runs the case twice, and any difference is nondeterminism.
  bool twice() const { return a == b; }
  // K:*,L:* (a campaign's --pair): K:C vs L:C for every contract C that both kinds implement.
  bool every_contract() const;
  bool operator==(const BackendPair&) const = default;
};
// The backend kind of bitparity's own reference, which every other kind is compared against.
inline constexpr std::string_view kReferenceKind = "ref";

// kind:C vs ref:C for each implementation of `op` on a kind other than the reference that has a
// reference twin, except contracts that depend on the order of arrival (ContractInfo) and cannot
// tell which cases they decide (no arrival_order_free); with `available_only`, only kinds that can
// run here.
std::vector<BackendPair> twin_pairs(const Registry& registry, const std::string& op, bool available_only);
// K:C vs K:C for each implementation of `op` on a kind other than the reference (which is
// deterministic by construction); with `available_only`, only kinds that can run here.
std::vector<BackendPair> self_pairs(const Registry& registry, const std::string& op, bool available_only);
// Every pair of the op's reference contracts (contract against contract), each pair once.
std::vector<BackendPair> reference_pairs(const Registry& registry, const std::string& op);

// "A,B" as the command line writes a pair; ParseError naming `field` when malformed.
BackendPair parse_pair(const std::string& text, const std::string& field = "pair");

// What a differential run concluded about a pair on a case.
enum class DiffVerdict { kAgree, kSkip, kFinding };

// The first element beyond a contract's error bound (kUlpOverBudget).
struct BoundExcess {
  std::string output, backend;  // the output, and the side ("kind:contract") outside the bound
  int64_t outside = 0;          // elements of that output outside the bound on that side
  int64_t index = 0;            // the first of them (row-major)
  Shape position;
  uint64_t a_bits = 0, b_bits = 0;  // both sides' bits there
  double value = 0, truth = 0, bound = 0;
};

struct DiffResult {
  DiffVerdict verdict = DiffVerdict::kAgree;
  std::string kind;                      // a finding kind, or the skip reason ("unmodelled")
  std::string output;                    // the first differing output; empty for error mismatches
  std::optional<Comparison> comparison;  // when both sides returned outputs
  std::string message;                   // format_comparison text, or what each side rejected
  // The sides differ in bits and a contract's error bound judged them (ContractInfo::error_bound):
  // an agreement within the bound, or a kUlpOverBudget finding (also where an element is outside the
  // bound every order of arrival keeps, ContractInfo::arrival_order_bound). Reports count the
  // agreements apart from the bit-exact ones.
  bool bounded = false;
  std::optional<BoundExcess> excess;  // kUlpOverBudget: where
  // A bit mismatch in a case whose order of arrival decides other elements: the first element of
  // one addend (ContractInfo::arrival_order_fixed) that differs, in `output`, the one that makes it a
  // finding; the corpus entry's finding.first and arbitration name it.
  std::optional<ElementMismatch> one_addend;
};

// Both reject with one class: agreement. Either rejects as unmodelled: skip. One rejects, or they
// reject differently: error_mismatch. Otherwise compare_outputs decides, except where a side's
// contract has an error bound (ContractInfo::error_bound) and the two runs are not one backend
// twice: outputs that differ in bits are then judged element by element against the bound, both
// sides, and an element outside it is kUlpOverBudget; inside it the pair agrees (DiffResult::bounded);
// and except where the order of arrival decides the bits (kArrivalOrder above).
DiffResult classify(const Registry& registry, const Case& c, const BackendPair& pair, const Outcome& a,
                    const Outcome& b, const CompareOptions& options = {});
// One side of a differential run: run_outcome, except that an exception of the implementation
// itself (anything but a RejectError, a std::exception or not) becomes an outcome whose
// reject_class is kBackendError (or kDeviceFault for a DeviceFault, kSanitizerHazard for a
// SanitizerHazard) and whose message is the exception's text. A backend that is unknown, cannot run here or does not
// implement the op is the caller's error and throws std::runtime_error.
Outcome run_side(const Registry& registry, const std::string& backend, const Case& c);
// run_side's outcome for one case of a batch (run_batch_impl on a backend that can be used): its
// outputs, or its exception judged as run_side judges it.
Outcome side_outcome(BatchOutcome b);
// Runs both sides (run_side) and classifies: a side's backend error is a kBackendError finding.
DiffResult diff_case(const Registry& registry, const Case& c, const BackendPair& pair,
                     const CompareOptions& options = {});

// Rows [first, first + count) of a case (core/rows.h's cut_rows).
struct RowCut {
  int64_t first = 0, count = 0;
};
// One backend on the whole case and on the rows `cut` alone: the rows-first outputs whose values do
// not depend on the row count (TensorSpec::row_count_dependent) must keep their bits. A finding is
// kInvarianceViolation in the first output that changes (a = the whole case's rows, b = the rows
// alone), or when the rows alone are refused while the whole case is not; a whole case refused
// while its rows are not is an agreement (a rule about the batch).
DiffResult diff_rows(const Registry& registry, const Case& c, const std::string& backend, const RowCut& cut,
                     const CompareOptions& options = {});

// "op dir", the title of every message about a case.
std::string case_title(const Case& c);

// The signature that deduplicates findings: op, direction, the pair (order-insensitive), kind,
// output, and the op's shape and value class of the case.
std::string finding_signature(const OpInfo& op, const Case& c, const BackendPair& pair, const DiffResult& result);

// A signature's fields, as finding_signature joins them ("op|dir|a|b|kind|output|shape|value", the
// pair in name order); nullopt for a string of another form.
struct SignatureFields {
  std::string op, direction, a, b, kind, output, shape_class, value_class;
};
std::optional<SignatureFields> parse_signature(const std::string& signature);

// The first mismatching element, as a corpus entry and a report write it:
// {index, position, a_bits "0x3f80", b_bits, ulps (null when one side is NaN)}; null when there is none.
nlohmann::json first_mismatch_json(const DiffResult& result);

// Which side of the first mismatch is closer to the op's oracle, when the op has one for that
// output: {truth, a_ulps, b_ulps, closer: backend name or "tie"}; null otherwise.
nlohmann::json arbitration_json(const OpInfo& op, const Case& c, const BackendPair& pair, const DiffResult& result);

}  // namespace bitparity::corpus
