// Corpus entries: one minimized case per JSON file, named by content hash under <corpus>/<op>/.
//
// An entry is a `bitparity-case/1` document plus
//   "finding":    {kind, pair [a, b], output, first {...}, signature, message, arbitration, strict_nan}
//                 and, for kind invariance_violation, rows {first, count}: the pair is one backend
//                 twice, run on the whole case and on those rows alone (corpus::diff_rows)
//   "provenance": {seed, case_index, shard, commit, device, tool_version, date}
//   "pins":       "divergence" | "fixed" | "open"
// The pin says what replay checks: a divergence between two contracts must keep showing; a fixed
// bug must now agree; an open bug is reported, not enforced.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "corpus/differential.h"

namespace bitparity::corpus {

inline constexpr std::string_view kPinDivergence = "divergence";
inline constexpr std::string_view kPinFixed = "fixed";
inline constexpr std::string_view kPinOpen = "open";

// Hex digits of the content hash that name an entry file.
inline constexpr size_t kNameDigits = 16;

struct Provenance {
  uint64_t seed = 0;
  int64_t case_index = 0;
  std::string shard = "0/1";
  std::string commit = "unknown", device, tool_version, date;
};

// The default pin of a new finding: contract-vs-contract differences are documented divergences;
// same-contract differences are bugs, "open" unless the user asks for "fixed".
std::string default_pin(const BackendPair& pair, std::string_view same_contract_pin = kPinOpen);

// The entry document for a finding on (already shrunk) case `c`.
// `rows`: the cut of an invariance_violation (diff_rows' result); its arbitration is made on the cut
// case, whose outputs the finding's positions index.
nlohmann::json make_entry(const OpInfo& op, const Case& c, const BackendPair& pair, const DiffResult& result,
                          const std::string& signature, const std::string& pins, const Provenance& provenance,
                          bool strict_nan = false, const std::optional<RowCut>& rows = std::nullopt);

struct Entry {
  std::filesystem::path path;
  Case c;
  BackendPair pair;
  std::string kind, output, signature, pins;
  bool strict_nan = false;
  std::optional<RowCut> rows;  // invariance_violation only
};

// Reads and validates an entry against the registry. Every problem is a ParseError whose message
// starts with the file and names the field ("corpus/swiglu/3f9a.json: finding.pair: ...").
Entry load_entry(const std::filesystem::path& path, const Registry& registry);
// The same checks on a document already read (merge validates the very document it writes), but for
// the signature's (check_signature): merge makes it after its own checks of the pair, and replay,
// which compares the pair again and deduplicates nothing, does not.
Entry entry_from_json(const nlohmann::json& doc, const std::filesystem::path& path, const Registry& registry);
// The signature says what the entry says: a campaign's (8 fields) names the op, direction, pair in
// name order, kind and output, with no control character, and a kind that names an output by its
// name names one the op has; a reproducer's (corpus/reproducer.h) is reproducer_signature's. A
// ParseError naming the field (finding.signature, finding.output).
void check_signature(const Entry& entry, const OpInfo& op);

// Every *.json under `dir`, recursively, sorted; empty when `dir` does not exist.
std::vector<std::filesystem::path> find_json_files(const std::filesystem::path& dir);

// A corpus document read without a registry, for merging and deduplication.
struct StoredEntry {
  std::filesystem::path path;
  nlohmann::json document;
  std::string op, signature;
};
// Every bitparity-case/1 document under `dir` (files of another format, such as a report written
// beside the corpus, are ignored). Invalid JSON, a missing op or finding.signature, a malformed
// tensor (corrupt hex, a shape past the limits) or an out-of-range provenance seed is a
// ParseError naming the file and the field.
std::vector<StoredEntry> read_stored_entries(const std::filesystem::path& dir);

// Signatures of the corpus entries under `dir`. Files of another format (a report written beside
// the corpus) are ignored; a case document without finding.signature is a ParseError naming it.
std::set<std::string> load_signatures(const std::filesystem::path& dir);

// 64-bit FNV-1a: small, stable across platforms and builds, enough to name a few thousand files.
uint64_t fnv1a64(std::string_view bytes);
// The first kNameDigits hex digits of the hash of the canonical case JSON (sorted keys, compact)
// followed by the finding's signature: one minimized case often shows the same divergence for
// several pairs, and each pair's finding needs its own entry.
std::string content_name(const Case& c, const std::string& signature);

// Creates missing folders, then write_file_safely (core/safe_file.h): a unique temporary file in
// the destination's folder, synced and renamed over `path`, so a reader (or an interrupted
// campaign) never sees a partial file; a link, a folder or a device is never replaced.
void write_file_atomically(const std::filesystem::path& path, std::string_view text);

// Writes an entry document (make_entry) to <dir>/<op>/<content name>.json; returns the path.
std::filesystem::path write_entry(const std::filesystem::path& dir, const Case& c, const nlohmann::json& entry);

}  // namespace bitparity::corpus
