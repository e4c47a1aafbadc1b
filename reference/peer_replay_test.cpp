// Replays outputs recorded from eager PyTorch on an H200 (peers/torch/record_swiglu.py) against
// ref:<contract>: the reference must reproduce PyTorch's bits, not only our reading of its source.
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "core/case_json.h"
#include "core/compare.h"
#include "core/error.h"
#include "ops/builtin.h"

namespace bitparity {
namespace {

struct Recorded {
  int line = 0;
  nlohmann::json doc;
};

std::vector<Recorded> load(const std::string& path) {
  std::ifstream in(path);
  std::vector<Recorded> out;
  std::string text;
  for (int line = 1; std::getline(in, text); ++line)
    if (!text.empty()) out.push_back({line, parse_json_text(text, path + ":" + std::to_string(line))});
  return out;
}

TEST(PeerReplayTest, ReferenceReproducesEagerPyTorch) {
  const std::string path = std::string(BITPARITY_SOURCE_DIR) + "/peers/torch/swiglu_family.jsonl";
  const std::vector<Recorded> recorded = load(path);
  ASSERT_GE(recorded.size(), 100u) << "recorded cases missing from " << path;
  int compared = 0, unmodelled = 0, nonzero_outputs = 0;
  for (const Recorded& r : recorded) {
    const Case c = case_from_json(r.doc, builtin_registry());
    const std::string contract = r.doc.at("provenance").at("contract").get<std::string>();
    const TensorMap expected = tensors_from_json(r.doc.at("outputs"), "outputs");
    TensorMap got;
    try {
      got = run_impl(builtin_registry(), "ref:" + contract, c);
    } catch (const RejectError& e) {
      ASSERT_EQ(e.error_class(), "unmodelled") << path << ":" << r.line << ": " << e.what();
      ++unmodelled;
      continue;
    }
    const Comparison cmp = compare_outputs(got, expected);
    EXPECT_EQ(cmp.verdict, Verdict::kIdentical)
        << path << ":" << r.line << "\n"
        << format_comparison(cmp, c.op + " " + std::string(direction_name(c.direction)), "ref:" + contract, "torch");
    ++compared;
    for (const auto& [name, t] : expected)
      for (int64_t i = 0; i < t.numel(); ++i)
        if (t.f64(i) != 0) {
          ++nonzero_outputs;
          break;
        }
  }
  EXPECT_GT(nonzero_outputs, compared / 2) << "recorded outputs are mostly zero: the comparison proves little";
  std::printf("compared %d recorded cases, %d unmodelled\n", compared, unmodelled);
}

}  // namespace
}  // namespace bitparity
