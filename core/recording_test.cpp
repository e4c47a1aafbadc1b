#include "core/recording.h"

#include <zlib.h>

#include <fstream>
#include <iterator>
#include <stdexcept>

#include <gtest/gtest.h>

#include "testing/scratch.h"

namespace bitparity {
namespace {

namespace fs = std::filesystem;

void write_gzip(const fs::path& path, const std::string& text) {
  gzFile out = gzopen(path.c_str(), "wb9");
  ASSERT_NE(out, nullptr);
  ASSERT_EQ(gzwrite(out, text.data(), static_cast<unsigned>(text.size())), static_cast<int>(text.size()));
  ASSERT_EQ(gzclose(out), Z_OK);
}

TEST(Recording, ReadsGzipAndPlainLinesWithTheirNumbers) {
  const fs::path dir = testing::fresh_dir("recording", "lines");
  write_gzip(dir / "b.jsonl.gz", "{\"a\": 1}\n\n{\"a\": 2}\n");
  std::ofstream(dir / "a.jsonl") << "{\"p\": 1}\n";
  std::ofstream(dir / "c.json") << "{}\n";
  const std::vector<fs::path> files = recordings_in(dir);
  ASSERT_EQ(files.size(), 2u);  // c.json is not a recording
  EXPECT_EQ(files[0].filename(), "a.jsonl");
  EXPECT_EQ(files[1].filename(), "b.jsonl.gz");
  const std::vector<RecordedLine> gz = read_recording(files[1]);
  ASSERT_EQ(gz.size(), 2u);
  EXPECT_EQ(gz[0].line, 1);
  EXPECT_EQ(gz[0].text, "{\"a\": 1}");
  EXPECT_EQ(gz[1].line, 3);  // the empty line 2 is skipped, not renumbered
  EXPECT_EQ(gz[1].text, "{\"a\": 2}");
  EXPECT_EQ(read_recording(files[0]).at(0).text, "{\"p\": 1}");
  fs::remove_all(dir);
}

TEST(Recording, ABrokenCompressedStreamIsAnErrorNamingTheFile) {
  const fs::path dir = testing::fresh_dir("recording", "broken");
  write_gzip(dir / "whole.jsonl.gz", std::string(100000, 'x') + "\n");
  std::ifstream in(dir / "whole.jsonl.gz", std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), {});
  std::ofstream(dir / "cut.jsonl.gz", std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  try {
    read_recording(dir / "cut.jsonl.gz");
    ADD_FAILURE() << "a truncated gzip stream was read without an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("cut.jsonl.gz"), std::string::npos) << e.what();
  }
  EXPECT_THROW(read_recording(dir / "absent.jsonl.gz"), std::runtime_error);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace bitparity
