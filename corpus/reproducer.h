// One reproduction path for every harness: a failing property, GPU test or fuzz run writes its case
// as a `bitparity-case/1` file named by the corpus's content hash and prints the command that
// reruns it ("To reproduce: bitparity replay bitparity-failures/3f9a....json").
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "core/case.h"
#include "corpus/differential.h"

namespace bitparity::corpus {

// Where reproducers go when the caller names no folder: $BITPARITY_FAILURE_DIR, else this folder
// under the working directory.
inline constexpr std::string_view kFailureDirVariable = "BITPARITY_FAILURE_DIR";
inline constexpr std::string_view kDefaultFailureDir = "bitparity-failures";

// `dir` when given, else $BITPARITY_FAILURE_DIR when set and not empty, else ./bitparity-failures.
std::filesystem::path failure_dir(const std::filesystem::path& dir = {});

// What names the file beside the case: a reproducer is not a campaign finding (it has no shape or
// value class), but the same kind on the same pair is the same failure.
std::string reproducer_signature(const Case& c, const std::string& kind, const std::optional<BackendPair>& pair);

// The reproducer document: the case, plus "finding" {kind, message} and, when a pair is given,
// the pair. For a differential kind (bit_mismatch, shape_mismatch, error_mismatch) the finding also
// gets an empty output and a signature, with pins "open": replay checks it like a corpus entry,
// reporting whether the pair still differs and never failing on it. For another kind
// (nondeterminism, invariance_violation) replay runs the case on the pair and reports what it
// shows. Without a pair the document replays as a bare case, on every pair of implementations.
nlohmann::json reproducer_document(const Case& c, const std::string& kind, const std::optional<BackendPair>& pair,
                                   const std::string& message);

// The path a reproducer of these arguments gets under `dir` (failure_dir(dir)/<content name>.json):
// the same failure always names the same file.
std::filesystem::path reproducer_path(const Case& c, const std::string& kind, const std::optional<BackendPair>& pair,
                                      const std::filesystem::path& dir = {});

// Writes the reproducer (atomically) and returns "To reproduce: bitparity replay <path>". Never
// throws: a failing test must still report its own failure, so a write error comes back as the
// line "Could not write a reproducer to <path>: <reason>" followed by the case's JSON.
std::string write_reproducer(const Case& c, const std::string& kind, const std::optional<BackendPair>& pair,
                             const std::string& message, std::filesystem::path dir = {});

}  // namespace bitparity::corpus
