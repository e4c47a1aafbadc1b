// The suite against its own planted bugs (testing/planted_bugs.h): for each, a short campaign of
// the planted backend against the reference contract it imitates, from a fixed seed, must report
// the bug as a failure (not as a documented divergence), write it to the corpus, shrink it to the
// bug's row bound, and replay it. Every op of the builtin registry must have at least one planted
// bug, so an op that lands without one fails here by name.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "campaign/campaign.h"
#include "corpus/entry.h"
#include "corpus/replay.h"
#include "ops/builtin.h"
#include "testing/planted_bugs.h"
#include "testing/scratch.h"

namespace bitparity::testing {
namespace {

namespace fs = std::filesystem;

const Registry& planted_registry() {
  static const Registry registry = with_planted_bugs(builtin_registry());
  return registry;
}

std::vector<PlantedBug> bugs() { return planted_bugs(builtin_registry()); }

TEST(PlantedBugs, EveryOpHasOne) {
  std::set<std::string> covered;
  for (const PlantedBug& bug : bugs()) covered.insert(bug.op);
  for (const OpInfo& op : builtin_registry().ops())
    EXPECT_TRUE(covered.count(op.name)) << op.name << " has no planted bug in testing/planted_bugs.cpp: add one aimed "
                                        << "at the numerical rule the op exists for";
}

TEST(PlantedBugs, NamesAreUniqueAndEachImitatesARealContract) {
  std::set<std::string> names;
  for (const PlantedBug& bug : bugs()) {
    EXPECT_TRUE(names.insert(bug.name).second) << bug.name;
    EXPECT_NE(builtin_registry().impl(bug.op, "ref:" + bug.contract), nullptr) << bug.name;
    EXPECT_NE(planted_registry().impl(bug.op, "planted_" + bug.name + ":" + bug.contract), nullptr) << bug.name;
  }
}

// The rows of a case: dimension 0 of the op's first rows-first input present (a permute's tokens,
// not its T*k slots), else of its first input (AdamW's flat parameters).
int64_t rows_of(const Registry& registry, const Case& c) {
  for (const TensorSpec& spec : registry.op(c.op)->inputs.at(c.direction))
    if (const Tensor* t = c.input(spec.name); spec.rows_first && t && t->rank() > 0) return t->dim(0);
  for (const auto& [name, t] : c.inputs)
    if (t.rank() > 0) return t.dim(0);
  return 0;
}

int64_t case_index_of(const fs::path& entry) {
  std::ifstream in(entry);
  const nlohmann::json doc = nlohmann::json::parse(in);
  return doc.at("provenance").at("case_index").get<int64_t>();
}

class PlantedBugFound : public ::testing::TestWithParam<std::string> {};

TEST_P(PlantedBugFound, ByAShortCampaignAndShrunk) {
  const std::vector<PlantedBug> all = bugs();
  const auto it = std::find_if(all.begin(), all.end(), [](const PlantedBug& b) { return b.name == GetParam(); });
  ASSERT_NE(it, all.end());
  const PlantedBug& bug = *it;
  const Registry& registry = planted_registry();
  const fs::path dir = fresh_dir("planted", bug.name);

  campaign::CampaignOptions o;
  // Every planted bug shows within the first 110 cases of this seed (the first 15 for the ops with
  // a smaller bound); the case bound keeps the test short, and the time budget is only a backstop.
  o.budget_seconds = 150;
  o.max_cases = bug.campaign_cases;
  o.seed = 20261201;
  o.ops = {bug.op};
  o.pairs = {{"planted_" + bug.name + ":" + bug.contract, "ref:" + bug.contract}};
  o.corpus_dir = dir;
  const auto start = std::chrono::steady_clock::now();
  const reports::Report report = campaign::run_campaign(registry, o);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  ASSERT_FALSE(report.findings.empty()) << bug.name << " (" << bug.rule << ") was not found in "
                                        << reports::text_table(report);
  int64_t fewest_rows = INT64_MAX, first_case = INT64_MAX;
  std::string smallest;
  for (const reports::FindingRecord& f : report.findings) {
    EXPECT_TRUE(reports::is_failure(f)) << f.signature << " pinned as " << f.pins;
    ASSERT_FALSE(f.file.empty()) << f.signature;
    const corpus::Entry entry = corpus::load_entry(f.file, registry);
    const corpus::ReplayResult replay = corpus::replay_entry(registry, entry);
    EXPECT_EQ(replay.status, corpus::ReplayStatus::kPass) << f.file << ": " << replay.summary;
    EXPECT_NE(replay.summary.find("still reproduces"), std::string::npos) << f.file << ": " << replay.summary;
    if (const int64_t rows = rows_of(registry, entry.c); rows < fewest_rows) {
      fewest_rows = rows;
      smallest = f.signature;
    }
    first_case = std::min(first_case, case_index_of(f.file));
  }
  fs::remove_all(dir);
  EXPECT_LE(fewest_rows, bug.max_shrunk_rows) << bug.name << ": no finding shrank to " << bug.max_shrunk_rows << " rows";
  int64_t cases = 0;
  for (const reports::PairCounts& p : report.counts) cases += p.cases;
  RecordProperty("first_case_index", static_cast<int>(first_case));
  RecordProperty("cases", static_cast<int>(cases));
  std::cout << "[ PLANTED  ] " << bug.name << ": first found at case " << first_case << " of " << cases << " ("
            << report.findings.size() << " signatures, fewest rows " << fewest_rows << " in " << smallest << ", " << seconds << " s with shrinking)\n";
}

std::vector<std::string> bug_names() {
  std::vector<std::string> names;
  for (const PlantedBug& bug : bugs()) names.push_back(bug.name);
  return names;
}

INSTANTIATE_TEST_SUITE_P(All, PlantedBugFound, ::testing::ValuesIn(bug_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace bitparity::testing
