// Replaying a corpus entry: the one verdict that `bitparity replay` and ctest's corpus tests share;
// and replaying a bare case through every pair of implementations of its op.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "corpus/entry.h"

namespace bitparity::corpus {

// kError: the entry cannot be replayed as written (a backend kind or a contract this binary does
// not know, a pair that does not implement the op): an error, never a skip, so a renamed contract
// cannot silently stop being tested.
enum class ReplayStatus { kPass, kFail, kSkip, kError };
std::string_view replay_status_name(ReplayStatus status);  // "PASS", "FAIL", "SKIP", "ERROR"

struct ReplayResult {
  ReplayStatus status = ReplayStatus::kPass;
  std::string summary;  // one line: "divergence still shows: bit_mismatch in y"
  std::string details;  // the differential message, for failures and reports
};

// pins "divergence": the pair must still differ with the entry's kind and output.
// pins "fixed": the pair must agree.
// pins "open": never fails; the summary says whether the bug still reproduces.
// A backend kind this binary does not know, a contract the op does not have, or a kind that does
// not implement the op under that contract is kError; a known backend that cannot run here (a GPU
// backend without a GPU) skips with the reason.
ReplayResult replay_entry(const Registry& registry, const Entry& entry);

// Why `backend` ("kind:contract") cannot be named for `op` in this binary (a backend kind it does
// not know, a contract the op does not have); nullopt when it can.
std::optional<std::string> unknown_backend(const Registry& registry, const std::string& op, const std::string& backend);
// Why a known `backend` cannot run here (BackendKind::unavailable_reason); nullopt when it can.
std::optional<std::string> unavailable_here(const Registry& registry, const std::string& backend);
// Why the pair cannot be replayed on `op`: kError for an unknown name (unknown_backend) or a kind
// that lacks the implementation, kSkip for a known backend unavailable here; nullopt when it can.
std::optional<ReplayResult> cannot_replay(const Registry& registry, const std::string& op, const BackendPair& pair);

// What `bitparity replay` reads: an entry when the document has pins or a finding signature (a
// corpus entry, a reproducer of a differing pair); a case with its pair when it has a finding with
// a pair and neither (a reproducer of another kind of failure, such as a nondeterministic cuda:C vs cuda:C);
// otherwise a bare case (a user's case, a reproducer without a pair). The file is bitparity-case/1
// JSON or .safetensors (read_case_document). ParseError naming the file and the field.
struct ReplayDocument {
  std::filesystem::path path;
  Case c;
  std::optional<Entry> entry;
  std::optional<BackendPair> pair;  // without an entry: the one pair to replay the case on
  std::string kind;                 // the finding's kind, when the document has one
};
ReplayDocument load_replay_document(const std::filesystem::path& path, const Registry& registry);
// Whether the file is a bitparity-case/1 document (false for a report or other JSON beside a
// corpus); unreadable files and invalid JSON count as case documents, so that loading reports them.
bool is_case_document(const std::filesystem::path& path);

// The pairs a bare case is replayed on: every implementation kind:C other than the reference
// against ref:C, then every pair of reference contracts (each pair once).
std::vector<BackendPair> case_pairs(const Registry& registry, const std::string& op);

// One pair on a bare case: nothing is pinned, so a difference is reported, not a failure.
struct PairReplay {
  BackendPair pair;
  std::optional<DiffResult> result;  // empty when skipped
  std::string summary;               // "agree", "bit_mismatch in y", "skipped: cuda is unavailable: ..."
};
// Replays the case on `pairs` (case_pairs when empty). A pair naming a backend or contract this
// binary does not know is a std::runtime_error; an unavailable backend skips the pair.
std::vector<PairReplay> replay_case(const Registry& registry, const Case& c, const CompareOptions& options = {},
                                    std::vector<BackendPair> pairs = {});

// "To reproduce: bitparity replay corpus/OP/3f9a....json"
std::string reproduce_line(const std::filesystem::path& path);

}  // namespace bitparity::corpus
