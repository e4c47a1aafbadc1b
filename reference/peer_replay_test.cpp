// Replays outputs recorded on an H200 against ref:<contract>: eager PyTorch's (every
// peers/torch/*.jsonl.gz, written by the recorders beside them) and, for a contract that is an
// instruction's own arithmetic (gemm's fixed_order: the tensor core's MMA step), the instruction's
// (peers/hw/*.jsonl.gz). The reference must reproduce the peer's bits: the reference must reproduce PyTorch's bits, not
// only our reading of its source, NaN payloads included (a NaN that CUDA's arithmetic writes is
// canonical; x86's keeps its input's payload, so the reference canonicalizes what it computes).
// Every op in the registry that has a recording is replayed; each
// recording must hold enough cases, mostly with non-zero outputs, to prove something.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "core/case_json.h"
#include "core/compare.h"
#include "core/error.h"
#include "core/recording.h"
#include "ops/builtin.h"

namespace bitparity {
namespace {

struct Recorded {
  int line = 0;
  nlohmann::json doc;
};

std::vector<Recorded> load(const std::string& path) {
  std::vector<Recorded> out;
  for (const RecordedLine& l : read_recording(path))
    out.push_back({l.line, parse_json_text(l.text, path + ":" + std::to_string(l.line))});
  return out;
}

// The recordings beside the recorders (*.jsonl.gz, or a fresh *.jsonl), sorted by name: eager
// PyTorch's, then the hardware's.
std::vector<std::filesystem::path> recordings() {
  std::vector<std::filesystem::path> files;
  for (const char* peer : {"torch", "hw"})
    for (const std::filesystem::path& p : recordings_in(std::filesystem::path(BITPARITY_SOURCE_DIR) / "peers" / peer))
      files.push_back(p);
  return files;
}

TEST(PeerReplayTest, ReferenceReproducesEagerPyTorch) {
  const std::vector<std::filesystem::path> files = recordings();
  ASSERT_FALSE(files.empty()) << "no recordings in peers/torch";
  std::set<std::string> ops_recorded;
  for (const std::filesystem::path& file : files) {
    const std::string path = file.string();
    const std::vector<Recorded> recorded = load(path);
    ASSERT_GE(recorded.size(), 100u) << "recorded cases missing from " << path;
    int compared = 0, unmodelled = 0, nonzero_outputs = 0;
    std::map<std::string, int> per_op;
    for (const Recorded& r : recorded) {
      const Case c = case_from_json(r.doc, builtin_registry());
      const std::string contract = r.doc.at("provenance").at("contract").get<std::string>();
      const TensorMap expected = tensors_from_json(r.doc.at("outputs"), "outputs");
      ops_recorded.insert(c.op);
      TensorMap got;
      try {
        got = run_impl(builtin_registry(), "ref:" + contract, c);
      } catch (const RejectError& e) {
        ASSERT_EQ(e.error_class(), "unmodelled") << path << ":" << r.line << ": " << e.what();
        ++unmodelled;
        continue;
      }
      const Comparison cmp = compare_outputs(got, expected, {.strict_nan = true});
      EXPECT_EQ(cmp.verdict, Verdict::kIdentical)
          << path << ":" << r.line << "\n"
          << format_comparison(cmp, c.op + " " + std::string(direction_name(c.direction)), "ref:" + contract,
                               file.parent_path().filename().string());
      ++compared;
      ++per_op[c.op + " " + std::string(direction_name(c.direction)) + " " + contract];
      for (const auto& [name, t] : expected)
        for (int64_t i = 0; i < t.numel(); ++i)
          if (t.f64(i) != 0) {
            ++nonzero_outputs;
            break;
          }
    }
    EXPECT_GT(nonzero_outputs, compared / 2) << path << ": recorded outputs are mostly zero: the comparison proves little";
    std::printf("%s: compared %d recorded cases, %d unmodelled\n", file.filename().c_str(), compared, unmodelled);
    for (const auto& [what, n] : per_op) std::printf("  %-48s %d\n", what.c_str(), n);
  }
  // Every op is pinned to the real thing (the framework, or the instruction its contract names): an
  // op without a recording is checked only against our reading of its source.
  for (const OpInfo& op : builtin_registry().ops())
    EXPECT_TRUE(ops_recorded.count(op.name)) << op.name << " has no recording of eager PyTorch (peers/torch) or of the hardware (peers/hw)";
}

}  // namespace
}  // namespace bitparity
