#include "corpus/entry.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <system_error>

#include "core/case_json.h"
#include "core/error.h"

namespace bitparity::corpus {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ull;
constexpr uint64_t kFnvPrime = 0x100000001b3ull;

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ParseError("", "cannot read the file");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

const json& require(const json& object, const std::string& key, const std::string& field) {
  auto it = object.find(key);
  if (it == object.end()) throw ParseError(field.empty() ? key : field + "." + key, "missing");
  return *it;
}

std::string require_string(const json& object, const std::string& key, const std::string& field) {
  const json& v = require(object, key, field);
  const std::string path = field.empty() ? key : field + "." + key;
  if (!v.is_string()) throw ParseError(path, "expected a string, got " + std::string(v.type_name()));
  return v.get<std::string>();
}

std::string read_pins(const json& doc) {
  auto it = doc.find("pins");
  if (it == doc.end()) throw ParseError("pins", "missing (expected \"divergence\", \"fixed\" or \"open\")");
  if (!it->is_string()) throw ParseError("pins", "expected a string");
  const std::string pins = it->get<std::string>();
  if (pins != kPinDivergence && pins != kPinFixed && pins != kPinOpen)
    throw ParseError("pins", "expected \"divergence\", \"fixed\" or \"open\", got \"" + pins + "\"");
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
  const json& finding = require(doc, "finding", "");
  if (!finding.is_object()) throw ParseError("finding", "expected an object");
  entry.pair = read_pair(finding);
  entry.kind = require_string(finding, "kind", "finding");
  if (entry.kind != kBitMismatch && entry.kind != kShapeMismatch && entry.kind != kErrorMismatch)
    throw ParseError("finding.kind",
                     "expected bit_mismatch, shape_mismatch or error_mismatch, got \"" + entry.kind + "\"");
  entry.output = require_string(finding, "output", "finding");
  entry.signature = require_string(finding, "signature", "finding");
  if (auto it = finding.find("strict_nan"); it != finding.end()) {
    if (!it->is_boolean()) throw ParseError("finding.strict_nan", "expected true or false");
    entry.strict_nan = it->get<bool>();
  }
  entry.pins = read_pins(doc);
}

bool has_format(const json& doc, std::string_view format) {
  if (!doc.is_object()) return false;
  auto it = doc.find("format");
  return it != doc.end() && it->is_string() && it->get<std::string>() == format;
}

// "corpus/swiglu/3f9a.json: finding.pair: expected ...": the file first, then the field.
std::string prefixed(const fs::path& path, const ParseError& e) { return path.string() + ": " + e.what(); }

}  // namespace

std::string default_pin(const BackendPair& pair, std::string_view same_contract_pin) {
  return std::string(pair.same_contract() ? same_contract_pin : kPinDivergence);
}

json make_entry(const OpInfo& op, const Case& c, const BackendPair& pair, const DiffResult& result,
                const std::string& signature, const std::string& pins, const Provenance& provenance, bool strict_nan) {
  json doc = case_to_json(c);
  doc["finding"] = {{"kind", result.kind},
                    {"pair", {pair.a, pair.b}},
                    {"output", result.output},
                    {"first", first_mismatch_json(result)},
                    {"signature", signature},
                    {"message", result.message},
                    {"arbitration", arbitration_json(op, c, pair, result)},
                    {"strict_nan", strict_nan}};
  doc["provenance"] = {{"seed", provenance.seed},     {"case_index", provenance.case_index},
                       {"shard", provenance.shard},   {"commit", provenance.commit},
                       {"device", provenance.device}, {"tool_version", provenance.tool_version},
                       {"date", provenance.date}};
  doc["pins"] = pins;
  return doc;
}

Entry load_entry(const fs::path& path, const Registry& registry) {
  try {
    const json doc = parse_json_text(read_text(path), "the corpus entry");
    Entry entry;
    entry.path = path;
    entry.c = case_from_json(doc, registry);
    read_finding(doc, entry);
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
      json doc = parse_json_text(read_text(path), "the corpus entry");
      if (!has_format(doc, kCaseFormat)) continue;
      const json& finding = require(doc, "finding", "");
      if (!finding.is_object()) throw ParseError("finding", "expected an object");
      StoredEntry entry{path, {}, require_string(doc, "op", ""), require_string(finding, "signature", "finding")};
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
  const fs::path dir = path.parent_path().empty() ? fs::path(".") : path.parent_path();
  fs::create_directories(dir);
  // Same folder as the destination: rename is atomic only within one file system.
  const fs::path temp = dir / ("." + path.filename().string() + ".tmp" + std::to_string(::getpid()));
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) {
      std::error_code ignored;
      fs::remove(temp, ignored);
      throw std::runtime_error("cannot write " + temp.string());
    }
  }
  std::error_code error;
  fs::rename(temp, path, error);
  if (error) {
    fs::remove(temp, error);
    throw std::runtime_error("cannot rename " + temp.string() + " to " + path.string());
  }
}

fs::path write_entry(const fs::path& dir, const Case& c, const json& entry) {
  const std::string signature = entry.at("finding").at("signature").get<std::string>();
  const fs::path path = dir / c.op / (content_name(c, signature) + ".json");
  write_file_atomically(path, entry.dump(2) + "\n");
  return path;
}

}  // namespace bitparity::corpus
