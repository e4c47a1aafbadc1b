// Every corpus entry (corpus/**/*.json) is a regression test, replayed with the verdict of
// `bitparity replay` (corpus/replay.h). Entries are discovered when the test binary starts, and
// ctest lists the tests at test time, so a new entry needs no rebuild.
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "corpus/replay.h"
#include "core/registry.h"

#ifndef BITPARITY_CORPUS_DIR
#error "BITPARITY_CORPUS_DIR must name the corpus folder"
#endif

namespace bitparity::corpus {
namespace {

namespace fs = std::filesystem;

const fs::path kCorpusDir = BITPARITY_CORPUS_DIR;

class ReplayEntry : public ::testing::Test {
 public:
  explicit ReplayEntry(fs::path path) : path_(std::move(path)) {}

  void TestBody() override {
    Entry entry;
    try {
      entry = load_entry(path_, harness_registry());
    } catch (const std::exception& e) {
      FAIL() << e.what();
    }
    const ReplayResult r = replay_entry(harness_registry(), entry);
    if (r.status == ReplayStatus::kSkip) GTEST_SKIP() << r.summary;
    RecordProperty("entry", path_.string());
    RecordProperty("replay", r.summary);
    EXPECT_EQ(r.status, ReplayStatus::kPass) << r.summary << "\n" << r.details << "\n" << reproduce_line(path_);
  }

 private:
  fs::path path_;
};

// "OP/3f9a0c1d2e3f4a5b.json" -> "OP_3f9a0c1d2e3f4a5b": a test name ctest and gtest accept.
std::string test_name(const fs::path& path) {
  std::string name = fs::relative(path, kCorpusDir).replace_extension().string();
  for (char& ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return name;
}

TEST(Corpus, FolderExists) { ASSERT_TRUE(fs::is_directory(kCorpusDir)) << "no corpus folder at " << kCorpusDir; }

void register_entries() {
  const std::vector<fs::path> entries = find_json_files(kCorpusDir);
  for (const fs::path& path : entries)
    ::testing::RegisterTest("CorpusReplay", test_name(path).c_str(), nullptr, nullptr, __FILE__, __LINE__,
                            [path]() -> ::testing::Test* { return new ReplayEntry(path); });
  if (entries.empty())
    ::testing::RegisterTest("CorpusReplay", "NoEntries", nullptr, nullptr, __FILE__, __LINE__,
                            []() -> ::testing::Test* {
                              struct NoEntries : ::testing::Test {
                                void TestBody() override {
                                  GTEST_SKIP() << "no corpus entries under " << kCorpusDir
                                               << ": nothing is replayed (run `bitparity campaign --corpus "
                                               << kCorpusDir.string() << "` to add some)";
                                }
                              };
                              return new NoEntries;
                            });
}

}  // namespace
}  // namespace bitparity::corpus

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  bitparity::corpus::register_entries();
  return RUN_ALL_TESTS();
}
