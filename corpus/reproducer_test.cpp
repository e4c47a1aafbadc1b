// The one reproduction path: write_reproducer's file, its name and the replay it leads to, on the
// toy registry.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "core/case_json.h"
#include "corpus/entry.h"
#include "corpus/replay.h"
#include "corpus/reproducer.h"
#include "testing/scratch.h"
#include "testing/toy_op.h"

namespace bitparity::corpus {
namespace {

namespace fs = std::filesystem;
using testing::make_fake_registry;
using testing::toy_case;

fs::path fresh_dir(const std::string& name) { return testing::fresh_dir("reproducer_test", name); }
std::string read(const fs::path& path) { return testing::read_text(path); }

constexpr std::string_view kPrefix = "To reproduce: bitparity replay ";

// The path that a "To reproduce" line names.
fs::path named_path(const std::string& line) {
  EXPECT_EQ(line.rfind(kPrefix, 0), 0u) << line;
  return fs::path(line.substr(kPrefix.size()));
}

class ReproducerTest : public ::testing::Test {
 protected:
  Registry registry = make_fake_registry();
  const Case with_three = toy_case(1, 2, {3.0f, 1.0f});
  const Case without_three = toy_case(1, 2, {2.0f, 1.0f});
  const BackendPair gpu{"fake_gpu:exact", "ref:exact"};
};

TEST_F(ReproducerTest, WritesAnOpenEntryNamedByContentHash) {
  const fs::path dir = fresh_dir("pair");
  const std::string line = write_reproducer(with_three, "bit_mismatch", gpu, "not bit-identical", dir);
  const fs::path path = named_path(line);
  EXPECT_EQ(path.parent_path(), dir);
  EXPECT_EQ(path.stem().string().size(), kNameDigits);
  EXPECT_EQ(path, reproducer_path(with_three, "bit_mismatch", gpu, dir));
  const nlohmann::json doc = nlohmann::json::parse(read(path));
  EXPECT_EQ(doc["format"], "bitparity-case/1");
  EXPECT_EQ(doc["pins"], "open");
  EXPECT_EQ(doc["finding"]["kind"], "bit_mismatch");
  EXPECT_EQ(doc["finding"]["message"], "not bit-identical");
  EXPECT_EQ(doc["finding"]["pair"], nlohmann::json({"fake_gpu:exact", "ref:exact"}));
  EXPECT_EQ(case_to_json(case_from_json(doc, registry)), case_to_json(with_three));

  // The same failure names the same file; another case or kind another one.
  EXPECT_EQ(write_reproducer(with_three, "bit_mismatch", gpu, "again", dir), line);
  EXPECT_NE(write_reproducer(without_three, "bit_mismatch", gpu, "", dir), line);
  EXPECT_NE(write_reproducer(with_three, "shape_mismatch", gpu, "", dir), line);
  fs::remove_all(dir);
}

TEST_F(ReproducerTest, ReplayTellsWhetherTheOpenFindingStillReproduces) {
  const fs::path dir = fresh_dir("replay");
  const Entry still = load_entry(named_path(write_reproducer(with_three, "bit_mismatch", gpu, "", dir)), registry);
  EXPECT_EQ(still.pins, "open");
  const ReplayResult r = replay_entry(registry, still);
  EXPECT_EQ(r.status, ReplayStatus::kPass);
  EXPECT_NE(r.summary.find("still reproduces"), std::string::npos) << r.summary;

  const Entry gone = load_entry(named_path(write_reproducer(without_three, "bit_mismatch", gpu, "", dir)), registry);
  EXPECT_NE(replay_entry(registry, gone).summary.find("no longer reproduces"), std::string::npos);
  fs::remove_all(dir);
}

TEST_F(ReproducerTest, WithoutAPairTheFileIsABareCase) {
  const fs::path dir = fresh_dir("bare");
  const fs::path path = named_path(write_reproducer(with_three, "invariance_violation", std::nullopt, "rows", dir));
  const nlohmann::json doc = nlohmann::json::parse(read(path));
  EXPECT_FALSE(doc.contains("pins"));
  EXPECT_FALSE(doc["finding"].contains("pair"));
  EXPECT_EQ(doc["finding"]["kind"], "invariance_violation");
  EXPECT_EQ(case_to_json(case_from_json(doc, registry)), case_to_json(with_three));
  fs::remove_all(dir);
}

TEST_F(ReproducerTest, OtherKindsOnAPairAreNotPinned) {
  const fs::path dir = fresh_dir("other_kind");
  const BackendPair same{"fake_gpu:exact", "fake_gpu:exact"};
  const fs::path path = named_path(write_reproducer(with_three, "invariance_violation", same, "", dir));
  const nlohmann::json doc = nlohmann::json::parse(read(path));
  EXPECT_FALSE(doc.contains("pins"));  // not a corpus finding: replay runs the pair and reports
  EXPECT_EQ(doc["finding"]["pair"], nlohmann::json({"fake_gpu:exact", "fake_gpu:exact"}));
  const ReplayDocument replay = load_replay_document(path, registry);
  EXPECT_FALSE(replay.entry.has_value());
  ASSERT_TRUE(replay.pair.has_value());
  EXPECT_EQ(*replay.pair, same);
  EXPECT_EQ(replay.kind, "invariance_violation");
  EXPECT_TRUE(load_replay_document(named_path(write_reproducer(with_three, "bit_mismatch", gpu, "", dir)), registry)
                  .entry.has_value());
  // A backend that disagreed with itself is a differential finding on its self pair: an open entry.
  const ReplayDocument twice =
      load_replay_document(named_path(write_reproducer(with_three, "nondeterminism", same, "", dir)), registry);
  ASSERT_TRUE(twice.entry.has_value());
  EXPECT_EQ(twice.entry->pins, "open");
  EXPECT_EQ(twice.entry->pair, same);
  fs::remove_all(dir);
}

TEST_F(ReproducerTest, FolderComesFromTheEnvironmentThenTheDefault) {
  const fs::path dir = fresh_dir("env");
  ::setenv(std::string(kFailureDirVariable).c_str(), dir.c_str(), 1);
  EXPECT_EQ(failure_dir(), dir);
  EXPECT_EQ(named_path(write_reproducer(with_three, "bit_mismatch", gpu, "")).parent_path(), dir);
  EXPECT_EQ(failure_dir("/given"), fs::path("/given"));
  ::unsetenv(std::string(kFailureDirVariable).c_str());
  EXPECT_EQ(failure_dir(), fs::path("bitparity-failures"));
  fs::remove_all(dir);
}

TEST_F(ReproducerTest, AWriteErrorIsReportedNotThrown) {
  const fs::path dir = fresh_dir("error");
  write_file_atomically(dir / "file", "x");  // a file where the folder should be
  const std::string line = write_reproducer(with_three, "bit_mismatch", gpu, "", dir / "file");
  EXPECT_EQ(line.rfind("Could not write a reproducer to ", 0), 0u) << line;
  EXPECT_NE(line.find("\"format\":\"bitparity-case/1\""), std::string::npos) << line;  // the case survives
  fs::remove_all(dir);
}

}  // namespace
}  // namespace bitparity::corpus
