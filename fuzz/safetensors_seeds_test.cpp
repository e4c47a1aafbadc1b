// The safetensors fuzz target's seeds and the crafted hostile .safetensors files, replayed through
// the whole path a user's file takes (safetensors_invariants.h) without libFuzzer, over the builtin
// registry, in every build. Each hostile file must be refused with the message its name promises.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>

#include <gtest/gtest.h>

#include "core/error.h"
#include "core/safetensors_case.h"
#include "fuzz/safetensors_invariants.h"

namespace bitparity::fuzz {
namespace {

namespace fs = std::filesystem;

constexpr auto kMaxSecondsPerFile = std::chrono::seconds(5);

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::vector<fs::path> files_in(const fs::path& dir, const std::string& extension) {
  std::vector<fs::path> files;
  for (const fs::directory_entry& e : fs::directory_iterator(dir))
    if (e.path().extension() == extension) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

std::string parse_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ParseError& e) {
    return e.what();
  }
  return "(accepted)";
}

// Each crafted file, and a part of the message that refuses it.
const std::map<std::string, std::string> kHostile = {
    {"st_header_length_past_file", "the header length 4096 reaches past the end of the file (8 bytes follow"},
    {"st_header_length_huge", "the header length 18446744073709551615 is past the limit of 100000000 bytes"},
    {"st_header_not_json", "the header is not valid JSON"},
    {"st_header_invalid_utf8", "the header is not valid JSON"},
    {"st_header_nul_then_junk", "the header holds a NUL byte at offset 2"},
    {"st_padded_with_newlines", "the header is padded with bytes other than spaces (0x20)"},
    {"st_deep_header", "nests deeper than 64 levels"},
    {"st_duplicate_tensor", "y: duplicate key in the header"},
    {"st_unknown_dtype", "y.dtype: unknown or unsupported dtype \"C64\""},
    {"st_zero_element_huge_dim", "y.shape: shape [4611686018427387904, 0] is too large"},
    {"st_offsets_reversed", "y.data_offsets: [4, 0] ends before it begins"},
    {"st_offsets_past_buffer", "y.data_offsets: [0, 8] reaches past the end of the byte buffer (4 bytes)"},
    {"st_truncated_buffer", "y.data_offsets: [0, 16] reaches past the end of the byte buffer (9 bytes)"},
    {"st_offsets_not_dtype_times_shape", "y.data_offsets: [0, 4] holds 4 bytes; BF16 of shape [1, 4] takes 8"},
    {"st_overlapping_offsets", "g.data_offsets: [2, 6] overlaps tensor \"y\" at [0, 4]"},
    {"st_hole", "bytes [4, 8) of the byte buffer belong to no tensor (the format allows no holes)"},
    {"st_trailing_junk", "the last 30 bytes of the file belong to no tensor"},
    {"st_metadata_not_string", "__metadata__.attrs: expected a string, got object"},
    {"st_bool_not_0_or_1", "m: BOOL element 2 is 255; a bool is 0 or 1"},
};

TEST(SafetensorsSeedsTest, EveryHostileFileIsRefusedWithItsMessage) {
  const std::vector<fs::path> files = files_in(BITPARITY_HOSTILE_DIR, ".safetensors");
  EXPECT_EQ(files.size(), kHostile.size()) << "every crafted file has its expected message here";
  for (const fs::path& path : files) {
    const auto start = std::chrono::steady_clock::now();
    const auto expected = kHostile.find(path.stem().string());
    ASSERT_NE(expected, kHostile.end()) << path << " has no expected message";
    const std::string message = parse_error_of([&] { read_safetensors(path); });
    EXPECT_EQ(message.rfind(path.string() + ": ", 0), 0u) << message;
    EXPECT_NE(message.find(expected->second), std::string::npos) << path << "\nexpected: " << expected->second
                                                                 << "\ngot: " << message;
    // The commands' path: the same refusal, and nothing but ParseError all the way through.
    EXPECT_EQ(parse_error_of([&] { case_from_any_file(path, harness_registry()); }), message);
    EXPECT_EQ(check_safetensors_file(harness_registry(), slurp(path)), std::nullopt) << path;
    EXPECT_LT(std::chrono::steady_clock::now() - start, kMaxSecondsPerFile) << path;
  }
}

// Seeds named valid_* are well-formed files; case_* are cases of the builtin registry (a case, an
// entry's fields, a result's outputs, a PyTorch dump with its own format tag, an empty batch).
TEST(SafetensorsSeedsTest, EverySeedKeepsTheInvariants) {
  const std::vector<fs::path> files = files_in(BITPARITY_SAFETENSORS_SEEDS_DIR, ".safetensors");
  int valid = 0, cases = 0;
  for (const fs::path& path : files) {
    const std::string name = path.stem().string();
    EXPECT_EQ(check_safetensors_file(harness_registry(), slurp(path)), std::nullopt) << path;
    if (name.rfind("valid_", 0) == 0) {
      ++valid;
      EXPECT_NO_THROW(read_safetensors(path)) << parse_error_of([&] { read_safetensors(path); });
    }
    if (name.rfind("case_", 0) == 0) {
      ++cases;
      EXPECT_NO_THROW(case_from_any_file(path, harness_registry()))
          << parse_error_of([&] { case_from_any_file(path, harness_registry()); });
    }
  }
  EXPECT_GE(valid, 4);
  EXPECT_GE(cases, 6);
}

}  // namespace
}  // namespace bitparity::fuzz
