// Hostile inputs and safe outputs: what bitparity does with files that other people and other
// tools wrote, crafted as a hostile user would. Every numbered defect of the hostile-input review
// (issue 10) that lives in reading, limits, writing or `merge` has a test here, named dNN_*; the
// crafted files under fuzz/hostile/ are replayed through the whole path a user's file takes.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>

#include <gtest/gtest.h>

#include "cli/app.h"
#include "core/case_json.h"
#include "core/error.h"
#include "core/json_strict.h"
#include "core/safe_file.h"
#include "corpus/entry.h"
#include "fuzz/invariants.h"
#include "reports/report.h"
#include "testing/toy_op.h"

namespace bitparity {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void spit(const fs::path& path, std::string_view text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary).write(text.data(), static_cast<std::streamsize>(text.size()));
}

// The ParseError's message, or "" when `f` does not throw one.
template <typename F>
std::string parse_error_of(F f) {
  try {
    f();
  } catch (const ParseError& e) {
    return e.what();
  }
  return "";
}

std::string toy_case_text(const std::string& shape, const std::string& hex, const std::string& extra = "") {
  return R"({"format": "bitparity-case/1", "op": "toy", "direction": "fwd", )" + extra +
         R"("inputs": {"x": {"dtype": "bf16", "shape": )" + shape + R"(, "hex": ")" + hex + R"("}}})";
}

class HostileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("bitparity_hostile_test_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path path(const std::string& name) const { return dir_ / name; }

  Registry registry_ = testing::make_fake_registry();
  fs::path dir_;
};

// ---- 1: a zero-element tensor with a huge dim hung run, diff and replay ----

TEST_F(HostileTest, d01_ZeroElementTensorWithAHugeDimIsRejectedAtParse) {
  const auto start = std::chrono::steady_clock::now();
  for (const std::string shape : {"[4611686018427387904, 0]", "[0, 4611686018427387904]", "[67108865, 0]",
                                  "[65536, 65536, 0]", "[0, 9223372036854775807]"}) {
    const std::string message = parse_error_of([&] { case_from_text(toy_case_text(shape, ""), registry_); });
    EXPECT_NE(message.find("inputs.x.shape"), std::string::npos) << shape << ": " << message;
    EXPECT_NE(message.find(std::to_string(kMaxTensorElements)), std::string::npos) << message;
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST_F(HostileTest, d01_ShapeLimitsAreOnTheProductOfNonzeroDims) {
  EXPECT_NO_THROW(check_shape_limits({kMaxTensorElements, 0}));
  EXPECT_NO_THROW(check_shape_limits({0, 0, 0}));
  EXPECT_NO_THROW(check_shape_limits({}));
  EXPECT_THROW(check_shape_limits({kMaxTensorElements + 1, 0}), std::invalid_argument);
  EXPECT_THROW(check_shape_limits({2, kMaxTensorElements / 2 + 1}), std::invalid_argument);
  EXPECT_THROW(check_shape_limits({int64_t{1} << 32, int64_t{1} << 32, 0}), std::invalid_argument);  // no wrap
  EXPECT_THROW(check_shape_limits(Shape(kMaxTensorRank + 1, 1)), std::invalid_argument);
  EXPECT_THROW(check_shape_limits({-1}), std::invalid_argument);
  // Within the limits a zero-element tensor with many rows parses, and the reference finishes.
  const Case c = case_from_text(toy_case_text("[65536, 0]", ""), registry_);
  EXPECT_EQ(fuzz::check_reference_invariants(registry_, c), std::nullopt);
}

TEST_F(HostileTest, d01_TensorBytesOverflowIsAnError) {
  EXPECT_THROW(Tensor(DType::kFP64, {int64_t{1} << 61, 2}), std::invalid_argument);
}

// ---- 2: deep nesting overflowed the stack (in an attribute's error path; in merge's note) ----

TEST_F(HostileTest, d02_DeepNestingIsRejectedBeforeATreeIsBuilt) {
  const int depth = 65536;
  const std::string deep = std::string(depth, '[') + std::string(depth, ']');
  for (const std::string& extra : {R"("attrs": {"scale": )" + deep + "}, ", R"("note": )" + deep + ", "}) {
    const std::string message = parse_error_of([&] { case_from_text(toy_case_text("[1, 2]", "3f804000", extra), registry_); });
    EXPECT_NE(message.find("nests deeper than " + std::to_string(kMaxJsonDepth)), std::string::npos) << message;
  }
  // At the limit a document parses; one level more does not.
  const std::string at_limit = std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']');
  EXPECT_NO_THROW(parse_json_text(at_limit, "the document"));
  EXPECT_THROW(parse_json_text("[" + at_limit + "]", "the document"), ParseError);
}

TEST_F(HostileTest, d02_AnAttributeOfTheWrongTypeIsNamedNotPrinted) {
  const std::string deep = std::string(40, '[') + std::string(40, ']');
  const std::string message = parse_error_of(
      [&] { case_from_text(toy_case_text("[1, 2]", "3f804000", R"("attrs": {"scale": )" + deep + "}, "), registry_); });
  EXPECT_NE(message.find("attrs.scale"), std::string::npos) << message;
  EXPECT_NE(message.find("got array"), std::string::npos) << message;
  EXPECT_EQ(message.find("[["), std::string::npos) << message;
}

// ---- 4: no limit on file size: a 200 MB file took 5.9 GB; --case /dev/zero grew until bad_alloc ----

TEST_F(HostileTest, d04_DevZeroFailsFastWithAClearError) {
  const auto start = std::chrono::steady_clock::now();
  const std::string message = parse_error_of([&] { case_from_file("/dev/zero", registry_); });
  EXPECT_NE(message.find("/dev/zero: the file is larger than the limit of " + std::to_string(kMaxDocumentBytes)),
            std::string::npos)
      << message;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

TEST_F(HostileTest, d04_AFileOverTheLimitIsNotRead) {
  const fs::path big = path("big.json");
  { std::ofstream touch(big); }
  fs::resize_file(big, kMaxDocumentBytes + 1);  // sparse: nothing is written, and nothing must be read
  EXPECT_NE(parse_error_of([&] { read_document(big); }).find("larger than the limit"), std::string::npos);
  fs::remove(big);
  spit(path("small.json"), "12345");
  EXPECT_NE(parse_error_of([&] { read_document(path("small.json"), 4); }).find("larger than the limit of 4"),
            std::string::npos);
  EXPECT_EQ(read_document(path("small.json"), 5), "12345");
}

TEST_F(HostileTest, d04_ManySmallValuesAreBounded) {
  std::string many = "[";
  for (size_t i = 0; i <= kMaxJsonValues; ++i) many += "0,";
  many += "0]";
  EXPECT_NE(parse_error_of([&] { parse_json_text(many, "the document"); }).find("more than"), std::string::npos);
}

// ---- 3 and 9: merge wrote outside --out, copied invalid entries and trusted counts ----

class MergeTest : public HostileTest {
 protected:
  int merge(std::vector<std::string> args) {
    args.insert(args.begin(), {"bitparity", "merge", "--out", path("out").string(), "--report", path("merged.json").string()});
    std::vector<const char*> argv;
    for (const std::string& a : args) argv.push_back(a.c_str());
    ::testing::internal::CaptureStdout();
    ::testing::internal::CaptureStderr();
    const int code = cli::run_command_line(registry_, static_cast<int>(argv.size()), argv.data());
    out_ = ::testing::internal::GetCapturedStdout();
    err_ = ::testing::internal::GetCapturedStderr();
    return code;
  }

  // A valid entry of the toy op: ref:exact vs ref:sloppy differ on an element 3.0.
  json entry() const {
    json doc = case_to_json(testing::toy_case(1, 2, {3.0f, 1.0f}));
    doc["finding"] = {{"kind", "bit_mismatch"},
                      {"pair", {"ref:exact", "ref:sloppy"}},
                      {"output", "y"},
                      {"signature", "toy|fwd|ref:exact|ref:sloppy|bit_mismatch|y|rows=1|plain"}};
    doc["pins"] = "divergence";
    doc["provenance"] = {{"seed", 7}, {"shard", "0/2"}};
    return doc;
  }

  json report(uint64_t seed, const std::string& shard, int64_t cases) const {
    reports::Report r;
    r.run.seed = seed;
    r.run.shards = {shard};
    reports::PairCounts& c = reports::counts_for(r, "toy", "fwd", "ref:exact", "ref:sloppy");
    c.cases = cases;
    c.agreements = cases;
    return reports::report_to_json(r);
  }

  // Shard folder `name` holding `entries` and `report`.
  std::string shard(const std::string& name, const std::vector<json>& entries, const json& report_doc) {
    for (size_t i = 0; i < entries.size(); ++i)
      spit(path(name) / "corpus" / "toy" / ("e" + std::to_string(i) + ".json"), entries[i].dump(2));
    if (!report_doc.is_null()) spit(path(name) / "report.json", report_doc.dump(2));
    return path(name).string();
  }

  // Every file under the test folder outside out/, the shards and merged.json.
  std::vector<std::string> stray_files() const {
    std::vector<std::string> stray;
    for (const fs::directory_entry& e : fs::recursive_directory_iterator(dir_)) {
      const std::string first = e.path().lexically_relative(dir_).begin()->string();
      if (first != "out" && first != "merged.json" && first.rfind("s", 0) != 0) stray.push_back(e.path().string());
    }
    return stray;
  }

  std::string out_, err_;
};

TEST_F(MergeTest, AValidMergeWritesUnderOutByContentName) {
  const json e = entry();
  ASSERT_EQ(merge({shard("s0", {e}, report(7, "0/2", 10)), shard("s1", {}, report(7, "1/2", 5))}), 0) << err_;
  const fs::path written = path("out") / "toy" /
                           (corpus::content_name(case_from_json(e, registry_), e["finding"]["signature"]) + ".json");
  EXPECT_TRUE(fs::is_regular_file(written)) << out_;
  const reports::Report merged = reports::report_from_json(parse_json_text(slurp(path("merged.json")), "report"));
  ASSERT_EQ(merged.counts.size(), 1u);
  EXPECT_EQ(merged.counts[0].cases, 15);
  EXPECT_EQ(stray_files(), std::vector<std::string>{});
}

TEST_F(MergeTest, d03_AnOpThatIsAPathIsRejectedAndNothingEscapes) {
  for (const std::string op : {"../../escape", "/tmp/bitparity_hostile_escape", "toy/../../escape"}) {
    json e = entry();
    e["op"] = op;
    fs::remove_all(path("s0"));
    EXPECT_EQ(merge({shard("s0", {e}, report(7, "0/1", 1))}), 2) << op;
    EXPECT_NE(err_.find("op"), std::string::npos) << err_;
    EXPECT_FALSE(fs::exists(path("out") / "toy")) << op;
    EXPECT_EQ(stray_files(), std::vector<std::string>{}) << op;
  }
  EXPECT_FALSE(fs::exists("/tmp/bitparity_hostile_escape"));
}

TEST_F(MergeTest, d03_InvalidEntriesAreRejectedBeforeAnythingIsWritten) {
  auto bad = [this](const std::function<void(json&)>& edit, const std::string& expected) {
    json e = entry();
    edit(e);
    fs::remove_all(path("s0"));
    EXPECT_EQ(merge({shard("s0", {entry(), e}, report(7, "0/1", 1))}), 2) << expected;
    EXPECT_NE(err_.find(expected), std::string::npos) << err_;
    EXPECT_FALSE(fs::exists(path("out") / "toy")) << "wrote an entry before validating all: " << expected;
  };
  bad([](json& e) { e["inputs"]["x"]["hex"] = "3f80zz00"; }, "inputs.x.hex");
  bad([](json& e) { e["finding"]["pair"] = {"ref:exact", "ref:renamed"}; }, "no contract");
  bad([](json& e) { e["finding"]["pair"] = {"ref:exact", "../x:sloppy"}; }, "not a plain name");
  bad([](json& e) { e["finding"]["pair"] = {"tpu:exact", "ref:sloppy"}; }, "unknown backend kind");
  bad([](json& e) { e["inputs"]["x"]["shape"] = {4611686018427387904, 0}; e["inputs"]["x"]["hex"] = ""; },
      "inputs.x.shape");
  // The toy's exact contract rejects rank 3: a bit mismatch cannot have come from such a case.
  bad([](json& e) { e["inputs"]["x"]["shape"] = {1, 1, 2}; }, "rejects");
  bad([](json& e) { e["provenance"]["seed"] = -1; }, "provenance.seed");
  // The signature (what campaigns and merges deduplicate on) must say what the entry says, and a
  // bit mismatch names an output the op has: otherwise one shard's entry could stand for another's.
  bad([](json& e) { e["finding"]["signature"] = "gemm|fwd|cuda:cublas|cuda:cublas|ulp_over_budget|y|rows=1|plain"; },
      "finding.signature: its op");
  bad([](json& e) { e["finding"]["kind"] = "sanitizer_hazard"; }, "finding.signature: its kind");
  bad([](json& e) { e["finding"]["signature"] = "toy|fwd|ref:exact|ref:sloppy|bit_mismatch|y|rows=1|plain\nx"; },
      "control character");
  bad([](json& e) { e["finding"]["signature"] = "toy|fwd|ref:exact|ref:sloppy|bit_mismatch|y|plain"; },
      "expected 8 fields");
  bad([](json& e) { e["finding"]["pair"] = {"ref:sloppy", "ref:exact"}; e["finding"]["output"] = "z"; },
      "finding.signature: its output");
  bad([](json& e) {
        e["finding"]["output"] = "z";
        e["finding"]["signature"] = "toy|fwd|ref:exact|ref:sloppy|bit_mismatch|z|rows=1|plain";
      },
      "finding.output: \"z\" is not an output");
}

TEST_F(MergeTest, d09_CountsMustBeNonNegativeAndAddWithoutWrapping) {
  json negative = report(7, "0/2", 1);
  negative["counts"][0]["cases"] = -2;
  EXPECT_EQ(merge({shard("s0", {}, negative)}), 2);
  EXPECT_NE(err_.find("counts[0].cases"), std::string::npos) << err_;

  const int64_t max = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(merge({shard("s1", {}, report(7, "0/2", max)), shard("s2", {}, report(7, "1/2", max))}), 2);
  EXPECT_NE(err_.find("overflow"), std::string::npos) << err_;
  EXPECT_FALSE(fs::exists(path("merged.json")));

  // The run's batch failures too.
  json failing0 = report(7, "0/2", 1), failing1 = report(7, "1/2", 1);
  failing0["run"]["batch_failures"] = {{"cuda:x", max}};
  failing1["run"]["batch_failures"] = {{"cuda:x", max}};
  err_.clear();
  EXPECT_EQ(merge({shard("s3", {}, failing0), shard("s4", {}, failing1)}), 2);
  EXPECT_NE(err_.find("overflow"), std::string::npos) << err_;
  EXPECT_FALSE(fs::exists(path("merged.json")));
}

TEST_F(MergeTest, d09_ShardsMustBeOneCampaignEachCountedOnce) {
  const std::string s0 = shard("s0", {}, report(7, "0/2", 1));
  EXPECT_EQ(merge({s0, s0}), 2);
  EXPECT_NE(err_.find("appears twice"), std::string::npos) << err_;
  EXPECT_EQ(merge({s0, shard("s1", {}, report(8, "1/2", 1))}), 2);
  EXPECT_NE(err_.find("seed"), std::string::npos) << err_;
  EXPECT_EQ(merge({s0, shard("s2", {}, report(7, "1/3", 1))}), 2);
  EXPECT_NE(err_.find("split the campaign differently"), std::string::npos) << err_;
  EXPECT_EQ(merge({s0, shard("s3", {}, report(7, "2/2", 1))}), 2);
  EXPECT_NE(err_.find("INDEX/COUNT"), std::string::npos) << err_;
  EXPECT_FALSE(fs::exists(path("merged.json")));
}

TEST_F(MergeTest, d02_ADeepNoteInAShardIsAnErrorNotACrash) {
  const std::string deep = std::string(65536, '[') + std::string(65536, ']');
  std::string text = entry().dump();
  text.insert(text.size() - 1, ", \"note\": " + deep);
  spit(path("s0") / "corpus" / "toy" / "deep.json", text);
  EXPECT_EQ(merge({path("s0").string()}), 2);
  EXPECT_NE(err_.find("nests deeper"), std::string::npos) << err_;
}

// ---- 7: outputs replaced symlinks and device nodes ----

TEST_F(HostileTest, d07_ASymlinkIsNotReplaced) {
  spit(path("target.json"), "keep");
  fs::create_symlink(path("target.json"), path("link.json"));
  try {
    write_file_safely(path("link.json"), "new");
    FAIL() << "replaced a symlink";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("symbolic link"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(fs::is_symlink(path("link.json")));
  EXPECT_EQ(slurp(path("target.json")), "keep");
  EXPECT_THROW(check_output_file(path("link.json")), std::runtime_error);
  // The corpus writer goes through the same check.
  EXPECT_THROW(corpus::write_file_atomically(path("link.json"), "new"), std::runtime_error);
}

TEST_F(HostileTest, d07_AFolderIsNotReplaced) {
  fs::create_directories(path("folder"));
  EXPECT_THROW(write_file_safely(path("folder"), "x"), std::runtime_error);
  EXPECT_THROW(check_output_file(path("folder")), std::runtime_error);
  EXPECT_TRUE(fs::is_directory(path("folder")));
}

TEST_F(HostileTest, d07_ACharacterDeviceIsWrittenThroughNotReplaced) {
  write_file_safely("/dev/null", "discarded");
  struct stat info {};
  ASSERT_EQ(::lstat("/dev/null", &info), 0);
  EXPECT_TRUE(S_ISCHR(info.st_mode));
  EXPECT_NO_THROW(check_output_file("/dev/null"));
  // A symlink to a character device (the way /dev/stdout is one) is written through too.
  fs::create_symlink("/dev/null", path("null_link"));
  write_file_safely(path("null_link"), "discarded");
  EXPECT_TRUE(fs::is_symlink(path("null_link")));
}

TEST_F(HostileTest, d07_RegularFilesAreReplacedWholeWithTheirModeAndNoTempLeft) {
  spit(path("r.json"), "old");
  fs::permissions(path("r.json"), fs::perms::owner_read | fs::perms::owner_write);
  write_file_safely(path("r.json"), "new");
  EXPECT_EQ(slurp(path("r.json")), "new");
  EXPECT_EQ(fs::status(path("r.json")).permissions() & fs::perms::all, fs::perms::owner_read | fs::perms::owner_write);
  write_file_safely(path("fresh.json"), "fresh");
  EXPECT_EQ(slurp(path("fresh.json")), "fresh");
  for (const fs::directory_entry& e : fs::directory_iterator(dir_))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
}

// ---- 8: a full disk or an unwritable output was only found at the end, with the reason hidden ----

TEST_F(HostileTest, d08_AFullDiskShowsItsReason) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full on this machine";
  try {
    write_file_safely("/dev/full", "x");
    FAIL() << "a write to /dev/full succeeded";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(std::strerror(ENOSPC)), std::string::npos) << e.what();
  }
}

TEST_F(HostileTest, d08_OutputsAreCheckedBeforeWork) {
  EXPECT_NO_THROW(check_output_file(path("new.json")));
  EXPECT_FALSE(fs::exists(path("new.json")));
  EXPECT_THROW(check_output_file(path("missing/new.json")), std::runtime_error);
  EXPECT_NO_THROW(check_output_file(path("missing/new.json"), /*create_folders=*/true));
  EXPECT_FALSE(fs::exists(path("missing")));
  EXPECT_NO_THROW(check_output_folder(path("corpus/deeper")));
  spit(path("file"), "x");
  EXPECT_THROW(check_output_folder(path("file")), std::runtime_error);
  EXPECT_THROW(check_output_folder(path("file/sub")), std::runtime_error);
  EXPECT_THROW(check_output_file(path("file/sub.json"), true), std::runtime_error);
  for (const fs::directory_entry& e : fs::directory_iterator(dir_)) EXPECT_EQ(e.path().filename(), "file");
}

// ---- 10: duplicate keys, out-of-range seeds, folders and unreadable files, corrupt hex ----

TEST_F(HostileTest, d10_DuplicateKeysAreRejectedWithThePath) {
  const std::string text = R"({"format": "bitparity-case/1", "op": "toy", "direction": "fwd", "inputs": {"x": )"
                           R"({"dtype": "bf16", "shape": [1, 2], "hex": "zz"}, "x": )"
                           R"({"dtype": "bf16", "shape": [1, 2], "hex": "3f804000"}}})";
  const std::string message = parse_error_of([&] { case_from_text(text, registry_); });
  EXPECT_NE(message.find("inputs.x: duplicate key"), std::string::npos) << message;
  EXPECT_NE(parse_error_of([] { parse_json_text(R"([{"a": 1}, {"b": [{"c": 1, "c": 2}]}])", "doc"); })
                .find("[1].b[0].c: duplicate key"),
            std::string::npos);
  EXPECT_NO_THROW(parse_json_text(R"([{"a": 1}, {"a": 2}])", "doc"));  // the same key in two objects
}

// A NUL byte ends nlohmann's input: without the check, a case followed by "\0" and anything at all
// read as the case alone.
TEST_F(HostileTest, d10_ANulByteIsNotJson) {
  const std::string text = toy_case_text("[1, 2]", "3f804000", "");
  EXPECT_NO_THROW(case_from_text(text, registry_));
  const std::string message = parse_error_of([&] { case_from_text(text + std::string(1, '\0') + "junk", registry_); });
  EXPECT_NE(message.find("a NUL byte at offset " + std::to_string(text.size())), std::string::npos) << message;
  EXPECT_THROW(parse_json_text(std::string("{}\0", 3), "doc"), ParseError);
}

TEST_F(HostileTest, d10_SeedsPastTheirRangeAreRejected) {
  for (const std::string seed : {"18446744073709551616", "-1", "1e30", "1.5", "\"7\""}) {
    const std::string message = parse_error_of(
        [&] { case_from_text(toy_case_text("[1, 2]", "3f804000", R"("provenance": {"seed": )" + seed + "}, "), registry_); });
    EXPECT_NE(message.find("provenance.seed"), std::string::npos) << seed << ": " << message;
  }
  EXPECT_NO_THROW(
      case_from_text(toy_case_text("[1, 2]", "3f804000", R"("provenance": {"seed": 18446744073709551615}, )"), registry_));
  const json report = json::parse(R"({"seed": 18446744073709551616})");
  EXPECT_THROW(get_uint64(report, "seed", "run"), ParseError);
}

TEST_F(HostileTest, d10_AFolderOrAMissingFileSaysSo) {
  EXPECT_NE(parse_error_of([&] { case_from_file(dir_, registry_); }).find("is a folder, not a file"), std::string::npos);
  EXPECT_NE(parse_error_of([&] { case_from_file(path("absent.json"), registry_); }).find(std::strerror(ENOENT)),
            std::string::npos);
}

TEST_F(HostileTest, d10_CorruptHexInACorpusFolderIsNotAKnownSignature) {
  json doc = json::parse(toy_case_text("[1, 2]", "3f80400g"));
  doc["finding"] = {{"signature", "toy|sig"}};
  spit(path("corpus") / "toy" / "corrupt.json", doc.dump());
  const std::string message = parse_error_of([&] { corpus::load_signatures(path("corpus")); });
  EXPECT_NE(message.find("corrupt.json: inputs.x.hex"), std::string::npos) << message;
}

TEST_F(HostileTest, d10_StrictGettersNameTheFieldAndTheRange) {
  const json j = json::parse(R"({"big": 9223372036854775808, "neg": -3, "f": 2.5, "s": "x", "o": {"n": -1}})");
  EXPECT_NE(parse_error_of([&] { get_int(j, "big", "run"); }).find("run.big: integer out of range"), std::string::npos);
  EXPECT_NE(parse_error_of([&] { get_count(j, "neg", "run"); }).find("run.neg: expected a non-negative"),
            std::string::npos);
  EXPECT_NE(parse_error_of([&] { get_int(j, "f", ""); }).find("f: expected an integer, got number"), std::string::npos);
  EXPECT_NE(parse_error_of([&] { get_count_map(j, "o", "c"); }).find("c.o.n"), std::string::npos);
  EXPECT_NE(parse_error_of([&] { get_string(j, "absent", "c"); }).find("c.absent: missing"), std::string::npos);
  EXPECT_EQ(get_string(j, "s", ""), "x");
}

// ---- every crafted file: rejected at the parse, cleanly, fast ----

TEST_F(HostileTest, EveryCraftedFileIsRejectedThroughTheWholePath) {
  size_t files = 0;
  for (const fs::directory_entry& e : fs::directory_iterator(BITPARITY_HOSTILE_DIR)) {
    ++files;
    const auto start = std::chrono::steady_clock::now();
    EXPECT_THROW(case_from_file(e.path(), registry_), ParseError) << e.path();
    EXPECT_THROW(corpus::load_entry(e.path(), registry_), ParseError) << e.path();
    EXPECT_EQ(fuzz::check_user_file(registry_, slurp(e.path())), std::nullopt) << e.path();
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5)) << e.path();
  }
  EXPECT_GE(files, 15u);
}

}  // namespace
}  // namespace bitparity
