#include "corpus/entry.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <tuple>
#include <system_error>

#include "core/case_json.h"
#include "core/error.h"
#include "core/json_strict.h"
#include "core/rows.h"
#include "core/safe_file.h"
#include "corpus/reproducer.h"

namespace bitparity::corpus {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ull;
constexpr uint64_t kFnvPrime = 0x100000001b3ull;

std::string read_pins(const json& doc) {
  auto it = doc.find("pins");
  if (it == doc.end()) throw ParseError("pins", "missing (expected \"divergence\", \"fixed\" or \"open\")");
  const std::string pins = as_string(*it, "pins");
  if (pins != kPinDivergence && pins != kPinFixed && pins != kPinOpen)
    throw ParseError("pins", "expected \"divergence\", \"fixed\" or \"open\", got " + excerpt(pins));
  return pins;
}

BackendPair read_pair(const json& finding) {
  const json& pair = require(finding, "pair", "finding");
  if (!pair.is_array() || pair.size() != 2 || !pair[0].is_string() || !pair[1].is_string())
    throw ParseError("finding.pair", "expected two backend names [\"kind:contract\", \"kind:contract\"]");
  BackendPair p{pair[0].get<std::string>(), pair[1].get<std::string>()};
  try {
    split_backend_name(p.a);
    split_backend_name(p.b);
  } catch (const ParseError& e) {
    throw ParseError("finding.pair", e.what());
  }
  return p;
}

// The fields of an entry beyond the case; the case itself is validated by case_from_json.
void read_finding(const json& doc, Entry& entry) {
  const json& finding = require_object(doc, "finding", "");
  entry.pair = read_pair(finding);
  entry.kind = get_string(finding, "kind", "finding");
  if (!is_differential_kind(entry.kind) && entry.kind != kInvarianceViolation)
    throw ParseError("finding.kind",
                     "expected bit_mismatch, shape_mismatch, error_mismatch, backend_error, nondeterminism, device_fault, sanitizer_hazard, "
                     "ulp_over_budget or invariance_violation, got " + excerpt(entry.kind));
  if (entry.kind == kInvarianceViolation) {
    const json& rows = require_object(finding, "rows", "finding");
    RowCut cut;
    for (const auto& [field, value] : {std::pair<const char*, int64_t*>{"first", &cut.first}, {"count", &cut.count}}) {
      const json& v = require(rows, field, "finding.rows");
      if (!v.is_number_integer() || v.get<int64_t>() < 0)
        throw ParseError(std::string("finding.rows.") + field, "expected a non-negative integer");
      *value = v.get<int64_t>();
    }
    if (cut.count == 0) throw ParseError("finding.rows.count", "expected at least one row");
    if (entry.pair.a != entry.pair.b)
      throw ParseError("finding.pair", "an invariance_violation runs one backend twice; got " + entry.pair.name());
    entry.rows = cut;
  } else if (finding.contains("rows")) {
    throw ParseError("finding.rows", "only an invariance_violation names rows");
  }
  entry.output = get_string(finding, "output", "finding");
  entry.signature = get_string(finding, "signature", "finding");
  if (finding.contains("strict_nan")) entry.strict_nan = get_bool(finding, "strict_nan", "finding");
  entry.pins = read_pins(doc);
}

// A stored document's tensors (and provenance), checked without a registry: well-formed hex of the declared shape
// within the size limits. A corrupt entry is an error, not a signature the campaign counts as known.
void check_tensors(const json& doc) {
  check_provenance(doc);
  tensors_from_json(require(doc, "inputs", ""), "inputs");
  if (doc.contains("outputs")) tensors_from_json(doc["outputs"], "outputs");
}

bool has_format(const json& doc, std::string_view format) {
  if (!doc.is_object()) return false;
  auto it = doc.find("format");
  return it != doc.end() && it->is_string() && it->get<std::string>() == format;
}

// "corpus/swiglu/3f9a.json: finding.pair: expected ...": the file first, then the field.
std::string prefixed(const fs::path& path, const ParseError& e) { return path.string() + ": " + e.what(); }

}  // namespace

// The signature is what campaigns and merges deduplicate on, so it must say what the entry says: its
// op, direction, pair (in name order), kind and output, and two class fields (the classes of the case
// the finding was first seen on, which shrinking keeps), with no control character. Where the kind
// names an output by its name (a bit mismatch, a difference past the bound, a row that changes), the
// output is one the op has (an invariance_violation may name none: rows refused alone).
void check_signature(const Entry& entry, const OpInfo& op) {
  if (std::any_of(entry.signature.begin(), entry.signature.end(),
                  [](char ch) { return static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f; }))
    throw ParseError("finding.signature", "holds a control character");
  // A reproducer (a failing property's or GPU test's case) has a signature of its own form.
  if (entry.signature.rfind("reproducer|", 0) == 0) {
    if (entry.signature != reproducer_signature(entry.c, entry.kind, entry.pair))
      throw ParseError("finding.signature", excerpt(entry.signature) + " is not this reproducer's " +
                                                excerpt(reproducer_signature(entry.c, entry.kind, entry.pair)));
    return;
  }
  const std::optional<SignatureFields> f = parse_signature(entry.signature);
  if (!f) throw ParseError("finding.signature", "expected 8 fields separated by '|', got " + excerpt(entry.signature));
  const std::string first = std::min(entry.pair.a, entry.pair.b), second = std::max(entry.pair.a, entry.pair.b);
  const std::string output = entry.output.empty() ? "-" : entry.output;
  const std::string direction(direction_name(entry.c.direction));
  for (const auto& [field, got, want] : {std::tuple<const char*, const std::string&, const std::string&>{"op", f->op, entry.c.op},
                                         {"direction", f->direction, direction},
                                         {"first backend", f->a, first},
                                         {"second backend", f->b, second},
                                         {"kind", f->kind, entry.kind},
                                         {"output", f->output, output}})
    if (got != want)
      throw ParseError("finding.signature", std::string("its ") + field + " is " + excerpt(got) + " where the entry's is " +
                                                excerpt(want));
  // An invariance_violation without an output is rows refused alone while the whole case computes.
  const bool names_output = entry.kind == kBitMismatch || entry.kind == kUlpOverBudget ||
                            (entry.kind == kInvarianceViolation && !entry.output.empty());
  if (names_output) {
    const std::vector<TensorSpec>& outputs = op.output_specs(entry.c.direction);
    if (std::none_of(outputs.begin(), outputs.end(), [&](const TensorSpec& s) { return s.name == entry.output; }))
      throw ParseError("finding.output", excerpt(entry.output) + " is not an output of " + op.name + " " + direction);
  }
}

std::string default_pin(const BackendPair& pair, std::string_view same_contract_pin) {
  return std::string(pair.same_contract() ? same_contract_pin : kPinDivergence);
}

json make_entry(const OpInfo& op, const Case& c, const BackendPair& pair, const DiffResult& result,
                const std::string& signature, const std::string& pins, const Provenance& provenance, bool strict_nan,
                const std::optional<RowCut>& rows) {
  json doc = case_to_json(c);
  const Case judged = rows ? cut_rows(op, c, rows->first, rows->count) : c;
  doc["finding"] = {{"kind", result.kind},
                    {"pair", {pair.a, pair.b}},
                    {"output", result.output},
                    {"first", first_mismatch_json(result)},
                    {"signature", signature},
                    {"message", result.message},
                    {"arbitration", arbitration_json(op, judged, pair, result)},
                    {"strict_nan", strict_nan}};
  if (rows) doc["finding"]["rows"] = {{"first", rows->first}, {"count", rows->count}};
  doc["provenance"] = {{"seed", provenance.seed},     {"case_index", provenance.case_index},
                       {"shard", provenance.shard},   {"commit", provenance.commit},
                       {"device", provenance.device}, {"tool_version", provenance.tool_version},
                       {"date", provenance.date}};
  doc["pins"] = pins;
  return doc;
}

Entry load_entry(const fs::path& path, const Registry& registry) {
  json doc;
  try {
    doc = parse_json_text(read_document(path), "the corpus entry");
  } catch (const ParseError& e) {
    throw ParseError("", prefixed(path, e));
  }
  Entry entry = entry_from_json(doc, path, registry);
  try {
    check_signature(entry, *registry.op(entry.c.op));
  } catch (const ParseError& e) {
    throw ParseError("", prefixed(path, e));
  }
  return entry;
}

Entry entry_from_json(const json& doc, const fs::path& path, const Registry& registry) {
  try {
    Entry entry;
    entry.path = path;
    entry.c = case_from_json(doc, registry);
    read_finding(doc, entry);
    if (entry.rows) {
      int64_t total = 0;
      try {
        total = row_count(*registry.op(entry.c.op), entry.c);
      } catch (const std::logic_error& e) {  // a row input that is a scalar, or row counts that disagree
        throw ParseError("finding.rows", e.what());
      }
      if (!rows_within(entry.rows->first, entry.rows->count, total))
        throw ParseError("finding.rows", "the rows from " + std::to_string(entry.rows->first) + " (" +
                                             std::to_string(entry.rows->count) + " of them) are not all in the case's " +
                                             std::to_string(total) + " rows");
    }
    return entry;
  } catch (const ParseError& e) {
    throw ParseError("", prefixed(path, e));
  }
}

std::vector<fs::path> find_json_files(const fs::path& dir) {
  std::vector<fs::path> files;
  if (!fs::is_directory(dir)) return files;
  for (const fs::directory_entry& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<StoredEntry> read_stored_entries(const fs::path& dir) {
  std::vector<StoredEntry> entries;
  for (const fs::path& path : find_json_files(dir)) {
    try {
      json doc = parse_json_text(read_document(path), "the corpus entry");
      if (!has_format(doc, kCaseFormat)) continue;
      const json& finding = require_object(doc, "finding", "");
      StoredEntry entry{path, {}, get_string(doc, "op", ""), get_string(finding, "signature", "finding")};
      check_tensors(doc);
      entry.document = std::move(doc);
      entries.push_back(std::move(entry));
    } catch (const ParseError& e) {
      throw ParseError("", prefixed(path, e));
    }
  }
  return entries;
}

std::set<std::string> load_signatures(const fs::path& dir) {
  std::set<std::string> signatures;
  for (const StoredEntry& entry : read_stored_entries(dir)) signatures.insert(entry.signature);
  return signatures;
}

uint64_t fnv1a64(std::string_view bytes) {
  uint64_t hash = kFnvOffset;
  for (const char ch : bytes) {
    hash ^= static_cast<unsigned char>(ch);
    hash *= kFnvPrime;
  }
  return hash;
}

std::string content_name(const Case& c, const std::string& signature) {
  const uint64_t hash = fnv1a64(case_to_json(c).dump() + "\n" + signature);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash));
  return std::string(hex, kNameDigits);
}

void write_file_atomically(const fs::path& path, std::string_view text) {
  const fs::path dir = path.parent_path();
  std::error_code error;
  if (!dir.empty() && !fs::is_directory(dir, error) && !fs::create_directories(dir, error) && error)
    throw std::runtime_error("cannot write " + path.string() + ": cannot create folder " + dir.string() + ": " +
                             error.message());
  write_file_safely(path, text);
}

fs::path write_entry(const fs::path& dir, const Case& c, const json& entry) {
  const std::string signature = entry.at("finding").at("signature").get<std::string>();
  const fs::path path = dir / c.op / (content_name(c, signature) + ".json");
  // A message holds other programs' text: a byte that is no UTF-8 is written as U+FFFD, not thrown.
  write_file_atomically(path, entry.dump(2, ' ', false, json::error_handler_t::replace) + "\n");
  return path;
}

}  // namespace bitparity::corpus
