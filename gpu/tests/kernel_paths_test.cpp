// Kernel paths are edge classes too (issue #15): every code path that a CUDA kernel record declares
// (KernelRecord::paths: a vector width, a partial-vector tail, a grid variant, a ring's fill) is the
// tag of a case class, and the record's op must generate it in at least 1 case in 100 at a small and
// at a large RapidCheck size. A path that only rare shapes take (F % 8 == 4 at F >= 128, once in
// 30,000 cases) then fails here by name instead of going untested by every GPU test and campaign.
// Reads the records and the registry only: no device.
#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include "core/registry.h"
#include "gpu/register.h"
#include "properties/harness.h"

namespace bitparity::gpu {
namespace {

constexpr int kSmallSize = 5, kLargeSize = 100;  // RapidCheck sizes: small cases, and the largest
constexpr int kQuickCasesPerSize = 200;          // label cpu
constexpr int kDeepCasesPerSize = 1000;          // label slow (BITPARITY_DEEP=1): 2000 cases a direction
constexpr int kCasesPerHundred = 1;              // a path's least share of the cases at each size
constexpr uint64_t kSeed = 0x6b65'726e'656c;

// How many of `cases` generated cases carry each tag.
struct Histogram {
  int cases = 0;
  std::map<std::string, int> count;
  int of(const std::string& tag) const {
    const auto it = count.find(tag);
    return it == count.end() ? 0 : it->second;
  }
};

Histogram tag_histogram(const OpInfo& op, Direction d, int size, int cases) {
  rc::Random random(kSeed + 2 * static_cast<uint64_t>(size) + static_cast<uint64_t>(d));
  const rc::Gen<Case> generator = op.generate(d);
  Histogram h;
  h.cases = cases;
  for (int i = 0; i < cases; ++i) {
    const Case c = generator(random.split(), size).value();
    const std::vector<std::string> tags = op.classes(c).tags;
    for (const std::string& tag : std::set<std::string>(tags.begin(), tags.end())) ++h.count[tag];
  }
  return h;
}

// The histograms of each op's direction at each size, generated once for all its records.
class Histograms {
 public:
  explicit Histograms(int cases_per_size) : cases_(cases_per_size) {}
  const Histogram& at(const OpInfo& op, Direction d, int size) {
    const auto key = std::make_tuple(op.name, d, size);
    auto it = cache_.find(key);
    if (it == cache_.end()) it = cache_.emplace(key, tag_histogram(op, d, size, cases_)).first;
    return it->second;
  }

 private:
  int cases_;
  std::map<std::tuple<std::string, Direction, int>, Histogram> cache_;
};

bool required(const OpInfo& op, Direction d, const std::string& tag) {
  if (!op.required_tags) return false;
  const std::vector<std::string> tags = op.required_tags(d);
  return std::find(tags.begin(), tags.end(), tag) != tags.end();
}

// A path belongs to the directions whose cases carry its tag (a backward's tail, a forward's
// vector width, or both); in each it must occur in at least 1 case in 100 at both sizes, and be
// among the op's required tags, so that the class-coverage test (properties/classes_test) guards
// it too.
void expect_generated(const KernelRecord& record, const OpInfo& op, const std::string& path, Histograms& histograms) {
  int seen = 0, cases = 0;
  for (const auto& [d, specs] : op.inputs) {
    const std::string where =
        record.op + " cuda:" + record.contract + " " + std::string(direction_name(d)) + ": path " + path;
    const Histogram& small = histograms.at(op, d, kSmallSize);
    const Histogram& large = histograms.at(op, d, kLargeSize);
    cases += small.cases + large.cases;
    if (small.of(path) + large.of(path) == 0) continue;
    seen += small.of(path) + large.of(path);
    auto expect_share = [&](int size, const Histogram& h) {
      EXPECT_GE(100 * h.of(path), kCasesPerHundred * h.cases)
          << where << " occurs in " << h.of(path) << " of " << h.cases << " cases at RapidCheck size " << size
          << "; at least " << kCasesPerHundred << " in 100 are required (a weighted branch of the generator)";
    };
    expect_share(kSmallSize, small);
    expect_share(kLargeSize, large);
    EXPECT_TRUE(required(op, d, path)) << where << " is not among the op's required_tags";
  }
  EXPECT_GT(seen, 0) << record.op << " cuda:" << record.contract << ": path " << path
                     << " is never a tag of the op's classes() in " << cases << " generated cases";
}

TEST(KernelPaths, EveryDeclaredPathIsGenerated) {
  Histograms histograms(props::deep_run() ? kDeepCasesPerSize : kQuickCasesPerSize);
  for (const KernelRecord& record : kernel_records()) {
    const std::string who = record.op + " cuda:" + record.contract;
    EXPECT_FALSE(record.paths.empty()) << who << " declares no kernel path (KernelRecord::paths)";
    const OpInfo* op = harness_registry().op(record.op);
    ASSERT_NE(op, nullptr) << who << ": no such op in the registry";
    ASSERT_TRUE(op->generate && op->classes) << who << ": the op has no generator or classes";
    for (const std::string& path : record.paths) expect_generated(record, *op, path, histograms);
  }
}

}  // namespace
}  // namespace bitparity::gpu
