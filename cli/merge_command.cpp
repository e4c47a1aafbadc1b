// `bitparity merge`: joins the corpora and reports of campaign shards.
//
// Shard folders come from other machines, so nothing in them is trusted: every entry is validated
// against the registry (its op and contracts exist, its case parses and fits the op) and written
// under a path built from the registry's names and the content hash alone; every report must be a
// shard of the same campaign (same seed and shard count, no shard twice) whose counts add up
// without overflow. Everything is checked before anything is written.
//
// Shard i of n runs the case indices i, i + n, ... of the unsharded campaign, so the merge equals
// that run: of the shards' entries for one signature the representative is the one first seen at
// the lowest case index (provenance.case_index), the entry the unsharded run writes, and the merged
// report lists the findings in that order with that shard's record.
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <tuple>

#include "cli/commands.h"
#include "cli/util.h"
#include "core/case_json.h"
#include "core/error.h"
#include "core/json_strict.h"
#include "core/safe_file.h"
#include "corpus/entry.h"
#include "reports/report.h"

namespace bitparity::cli {
namespace {

namespace fs = std::filesystem;

struct MergeFlags {
  std::string out, report_file, junit_file;
  std::vector<std::string> shard_dirs;
};

// An entry that passed validation, with the path it will be written to.
struct ValidEntry {
  std::string signature;
  fs::path destination;
  std::string text;
  // Its provenance: where the campaign found it; an entry without one ranks last.
  int64_t case_index = std::numeric_limits<int64_t>::max();
  std::string shard;
};

// Which of two entries of one signature represents it: the lower case index, then (the same case
// in two folders) the lower destination, so the choice never depends on the order of the folders.
bool represents_better(const ValidEntry& a, const ValidEntry& b) {
  return std::tie(a.case_index, a.destination, a.text) < std::tie(b.case_index, b.destination, b.text);
}

void read_provenance(const nlohmann::json& doc, ValidEntry& entry) {
  const auto p = doc.find("provenance");
  if (p == doc.end() || !p->is_object()) return;
  if (const auto i = p->find("case_index"); i != p->end() && i->is_number_integer() && i->get<int64_t>() >= 0)
    entry.case_index = i->get<int64_t>();
  if (const auto s = p->find("shard"); s != p->end() && s->is_string()) entry.shard = s->get<std::string>();
}

// A name that is safe as one path component: letters, digits, '_', '-' and '.', not "." or "..".
bool is_plain_name(const std::string& name) {
  if (name.empty() || name == "." || name == "..") return false;
  return std::all_of(name.begin(), name.end(), [](char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' ||
           ch == '-' || ch == '.';
  });
}

// Whether `path` lies inside `root` once links and ".." are resolved.
bool is_inside(const fs::path& root, const fs::path& path) {
  const fs::path r = fs::weakly_canonical(root), p = fs::weakly_canonical(path);
  auto ri = r.begin(), pi = p.begin();
  for (; ri != r.end(); ++ri, ++pi)
    if (pi == p.end() || *ri != *pi) return false;
  return pi != p.end();
}

// A backend of the pair: a kind the registry knows (a build without CUDA knows the cuda kind, as
// unavailable) and a contract the op has.
void check_backend(const Registry& registry, const OpInfo& op, const std::string& backend, const fs::path& path) {
  const auto [kind, contract] = split_backend_name(backend);
  if (!is_plain_name(kind))
    throw ParseError("", path.string() + ": finding.pair: backend kind " + excerpt(kind) + " is not a plain name");
  if (!registry.backend(kind))
    throw ParseError("", path.string() + ": finding.pair: unknown backend kind " + excerpt(kind) +
                             " (see `bitparity list`)");
  if (!op.has_contract(contract))
    throw ParseError("", path.string() + ": finding.pair: " + op.name + " has no contract " + excerpt(contract) +
                             " (see `bitparity list`)");
}

// The whole check of one stored entry, run-free: the case parses against its op; the pair names
// the op's contracts; the signature says what the entry says; a case whose finding is not an error mismatch passes the op's validate
// under both contracts (both sides ran it).
ValidEntry validate_entry(const corpus::StoredEntry& stored, const Registry& registry, const fs::path& out) {
  const corpus::Entry entry = corpus::entry_from_json(stored.document, stored.path, registry);
  const OpInfo& op = *registry.op(entry.c.op);  // case_from_json found it
  if (!is_plain_name(op.name)) throw ParseError("", stored.path.string() + ": op: not a plain name");
  for (const std::string& backend : {entry.pair.a, entry.pair.b}) check_backend(registry, op, backend, stored.path);
  try {
    corpus::check_signature(entry, op);
  } catch (const ParseError& e) {
    throw ParseError("", stored.path.string() + ": " + e.what());
  }
  if (entry.kind != corpus::kErrorMismatch && op.validate)
    for (const std::string& backend : {entry.pair.a, entry.pair.b}) try {
        op.validate(entry.c, *op.contract(split_backend_name(backend).second));
      } catch (const RejectError& e) {
        throw ParseError("", stored.path.string() + ": a " + entry.kind + " whose case " + backend +
                                 " rejects: " + e.what());
      }
  // The name comes from the registry and the content hash, never from the shard's file names.
  const fs::path destination = out / op.name / (corpus::content_name(entry.c, entry.signature) + ".json");
  if (!is_inside(out, destination))
    throw std::runtime_error(stored.path.string() + ": would be written to " + destination.string() +
                             ", outside " + out.string());
  ValidEntry valid;
  valid.signature = entry.signature;
  valid.destination = destination;
  valid.text = stored.document.dump(2) + "\n";
  read_provenance(stored.document, valid);
  return valid;
}

// Every bitparity-report/1 document under `dir`; ParseError naming the file when one is broken.
std::vector<reports::Report> read_reports(const fs::path& dir) {
  std::vector<reports::Report> found;
  for (const fs::path& path : corpus::find_json_files(dir)) {
    try {
      const nlohmann::json doc = parse_json_text(read_document(path), "the file");
      if (!doc.is_object() || !doc.contains("format") || !doc["format"].is_string() ||
          doc["format"].get<std::string>() != reports::kReportFormat)
        continue;
      found.push_back(reports::report_from_json(doc));
    } catch (const ParseError& e) {
      throw ParseError("", path.string() + ": " + e.what());
    }
  }
  return found;
}

// The merged report's findings as the unsharded run lists them: each signature's record from the
// shard of its representative entry, in the order of their case indices (within one case, that
// shard's order, which is the pairs' order). Findings without an entry keep merge_reports' order,
// after those.
void order_like_unsharded(reports::Report& merged, const std::vector<reports::Report>& shards,
                          const std::map<std::string, ValidEntry>& representatives) {
  using Key = std::tuple<int64_t, size_t>;  // (case index, position in its shard's report)
  std::vector<std::pair<Key, reports::FindingRecord>> ordered;
  for (size_t at = 0; at < merged.findings.size(); ++at) {
    const reports::FindingRecord& f = merged.findings[at];
    Key key{std::numeric_limits<int64_t>::max(), at};
    reports::FindingRecord record = f;
    if (const auto rep = representatives.find(f.signature); rep != representatives.end())
      for (const reports::Report& shard : shards) {
        if (std::find(shard.run.shards.begin(), shard.run.shards.end(), rep->second.shard) == shard.run.shards.end())
          continue;
        for (size_t i = 0; i < shard.findings.size(); ++i)
          if (shard.findings[i].signature == f.signature) key = {rep->second.case_index, i}, record = shard.findings[i];
      }
    ordered.emplace_back(key, std::move(record));
  }
  std::stable_sort(ordered.begin(), ordered.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  merged.findings.clear();
  for (auto& [key, record] : ordered) merged.findings.push_back(std::move(record));
}

int merge(const MergeFlags& flags, const Registry& registry) {
  for (const std::string& dir : flags.shard_dirs)
    if (!fs::is_directory(dir)) throw std::runtime_error("shard folder " + dir + " does not exist");
  // Outputs are checked before anything is read or written.
  const fs::path out = flags.out;
  check_output_folder(out);
  if (!flags.report_file.empty()) check_output_file(flags.report_file);
  if (!flags.junit_file.empty()) check_output_file(flags.junit_file);

  const std::set<std::string> known = corpus::load_signatures(out);
  std::map<std::string, ValidEntry> representatives;  // signature -> its entry (represents_better)
  int entries = 0;
  for (const std::string& dir : flags.shard_dirs)
    for (const corpus::StoredEntry& stored : corpus::read_stored_entries(dir)) {
      ValidEntry entry = validate_entry(stored, registry, out);
      ++entries;
      auto [it, first] = representatives.try_emplace(entry.signature, entry);
      if (!first && represents_better(entry, it->second)) it->second = std::move(entry);
    }
  std::vector<ValidEntry> to_write;
  for (const auto& [signature, entry] : representatives)
    if (!known.count(signature)) to_write.push_back(entry);
  const int duplicates = entries - static_cast<int>(to_write.size());
  std::vector<reports::Report> shards;
  for (const std::string& dir : flags.shard_dirs) {
    std::vector<reports::Report> found = read_reports(dir);
    if (found.empty()) std::cerr << "warning: no bitparity-report/1 file under " << dir << "; its counts are missing\n";
    shards.insert(shards.end(), found.begin(), found.end());
  }
  if (!shards.empty()) reports::check_shards(shards);
  reports::check_counts_fit(shards);

  std::map<std::string, std::string> written;  // signature -> path
  for (const ValidEntry& entry : to_write) {
    corpus::write_file_atomically(entry.destination, entry.text);
    written[entry.signature] = entry.destination.string();
  }
  reports::Report merged = reports::merge_reports(shards);
  order_like_unsharded(merged, shards, representatives);
  for (reports::FindingRecord& f : merged.findings)
    if (auto it = written.find(f.signature); it != written.end()) f.file = it->second;
  std::cout << reports::text_table(merged);
  std::cout << "merged " << shards.size() << " report(s); wrote " << written.size() << " entr"
            << (written.size() == 1 ? "y" : "ies") << " to " << flags.out << " (" << duplicates
            << " with a signature already there or kept from another shard)\n";
  if (!flags.report_file.empty()) write_output(flags.report_file, reports::report_to_json(merged).dump(2) + "\n");
  if (!flags.junit_file.empty()) write_output(flags.junit_file, reports::junit_xml(merged));
  return kExitOk;
}

}  // namespace

Command add_merge(CLI::App& root, const Registry& registry) {
  auto flags = std::make_shared<MergeFlags>();
  CLI::App* app = root.add_subcommand(
      "merge",
      "Join the outputs of campaign shards: corpus entries (validated against the registry, deduplicated by "
      "signature, also against what --out already holds) and bitparity-report/1 summaries (shards of one "
      "campaign, counts summed), found anywhere under each shard folder.");
  app->add_option("--out", flags->out, "corpus folder to merge into")->required();
  app->add_option("--report", flags->report_file, "write the merged JSON summary here");
  app->add_option("--junit", flags->junit_file, "write the merged JUnit XML here");
  app->add_option("shard_dirs", flags->shard_dirs, "shard folders (each with a corpus and a report)")->required();
  app->footer("Example:\n  bitparity merge --out corpus --report report.json shard0 shard1 shard2 shard3");
  return {app, [flags, &registry] { return merge(*flags, registry); }};
}

}  // namespace bitparity::cli
