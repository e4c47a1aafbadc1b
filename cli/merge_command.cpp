// `bitparity merge`: joins the corpora and reports of campaign shards.
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <set>

#include "cli/commands.h"
#include "cli/util.h"
#include "core/case_json.h"
#include "core/error.h"
#include "corpus/entry.h"
#include "reports/report.h"

namespace bitparity::cli {
namespace {

namespace fs = std::filesystem;

struct MergeFlags {
  std::string out, report_file, junit_file;
  std::vector<std::string> shard_dirs;
};

// Every bitparity-report/1 document under `dir`; ParseError naming the file when one is broken.
std::vector<reports::Report> read_reports(const fs::path& dir) {
  std::vector<reports::Report> found;
  for (const fs::path& path : corpus::find_json_files(dir)) {
    try {
      const nlohmann::json doc = parse_json_text(read_file(path), "the file");
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

// Copies entries with signatures new to `out` under their own names; returns signature -> path.
std::map<std::string, std::string> merge_entries(const fs::path& out, const std::vector<std::string>& shard_dirs,
                                                 int& duplicates) {
  std::set<std::string> known = corpus::load_signatures(out);
  std::map<std::string, std::string> written;
  for (const std::string& dir : shard_dirs)
    for (const corpus::StoredEntry& entry : corpus::read_stored_entries(dir)) {
      if (!known.insert(entry.signature).second) {
        ++duplicates;
        continue;
      }
      const fs::path path = out / entry.op / entry.path.filename();
      corpus::write_file_atomically(path, entry.document.dump(2) + "\n");
      written[entry.signature] = path.string();
    }
  return written;
}

int merge(const MergeFlags& flags) {
  for (const std::string& dir : flags.shard_dirs)
    if (!fs::is_directory(dir)) throw std::runtime_error("shard folder " + dir + " does not exist");
  int duplicates = 0;
  const std::map<std::string, std::string> written = merge_entries(flags.out, flags.shard_dirs, duplicates);
  std::vector<reports::Report> shards;
  for (const std::string& dir : flags.shard_dirs) {
    std::vector<reports::Report> found = read_reports(dir);
    if (found.empty()) std::cerr << "warning: no bitparity-report/1 file under " << dir << "; its counts are missing\n";
    shards.insert(shards.end(), found.begin(), found.end());
  }
  reports::Report merged = reports::merge_reports(shards);
  for (reports::FindingRecord& f : merged.findings)
    if (auto it = written.find(f.signature); it != written.end()) f.file = it->second;
  std::cout << reports::text_table(merged);
  std::cout << "merged " << shards.size() << " report(s); wrote " << written.size() << " entr"
            << (written.size() == 1 ? "y" : "ies") << " to " << flags.out << " (" << duplicates
            << " with a signature already there)\n";
  if (!flags.report_file.empty()) write_output(flags.report_file, reports::report_to_json(merged).dump(2) + "\n");
  if (!flags.junit_file.empty()) write_output(flags.junit_file, reports::junit_xml(merged));
  return kExitOk;
}

}  // namespace

Command add_merge(CLI::App& root, const Registry&) {
  auto flags = std::make_shared<MergeFlags>();
  CLI::App* app = root.add_subcommand(
      "merge",
      "Join the outputs of campaign shards: corpus entries (deduplicated by signature, also against what "
      "--out already holds) and bitparity-report/1 summaries (counts summed), found anywhere under each "
      "shard folder.");
  app->add_option("--out", flags->out, "corpus folder to merge into")->required();
  app->add_option("--report", flags->report_file, "write the merged JSON summary here");
  app->add_option("--junit", flags->junit_file, "write the merged JUnit XML here");
  app->add_option("shard_dirs", flags->shard_dirs, "shard folders (each with a corpus and a report)")->required();
  app->footer("Example:\n  bitparity merge --out corpus --report report.json shard0 shard1 shard2 shard3");
  return {app, [flags] { return merge(*flags); }};
}

}  // namespace bitparity::cli
