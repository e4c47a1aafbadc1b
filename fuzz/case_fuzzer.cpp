// The generic libFuzzer target: bytes -> a case of any registered op (case_decoder.h), then the
// invariants every reference contract must keep (invariants.h), along one of three paths chosen by
// the first byte: the decoded case run directly; its bitparity-case/1 file through the whole path a
// user's file takes (parse, validate, run); or that file with one input made a zero-element tensor
// with a huge dim ([0, 2^62], [65536, 0]), which the parse must reject past the shape limits and
// the references must finish quickly within them. A violation aborts, which is what libFuzzer
// records as a crash, with the message on stderr.
//
// On the direct path the case's numeric features (numeric_features.h: its classes, and per pair of
// reference contracts the finding kind and the ulp bucket of the largest difference) each light one
// of libFuzzer's extra counters, so inputs that show new numeric behaviour are kept like inputs that
// reach new code.
#include <array>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "core/case_json.h"
#include "fuzz/case_decoder.h"
#include "fuzz/invariants.h"
#include "fuzz/numeric_features.h"

namespace {

using namespace bitparity;

// libFuzzer's extra counters: a section it finds by name and reads after each input, as it reads
// the compiler's coverage counters.
constexpr size_t kNumericCounters = 1 << 14;
__attribute__((section("__libfuzzer_extra_counters"))) uint8_t g_numeric_counters[kNumericCounters];

void count_numeric_features(const Registry& registry, const Case& c) {
  for (const std::string& feature : fuzz::numeric_features(registry, c)) {
    uint8_t& counter = g_numeric_counters[fuzz::feature_slot(feature, kNumericCounters)];
    if (counter < 255) ++counter;
  }
}

// Dims around and far past the limits: within kMaxFuzzRunExtent, at and one past
// kMaxTensorElements, and the 2^62.
constexpr std::array<int64_t, 7> kHugeDims = {int64_t{1} << 12,      fuzz::kMaxFuzzRunExtent, kMaxTensorElements,
                                              kMaxTensorElements + 1, int64_t{1} << 40,        int64_t{1} << 62,
                                              std::numeric_limits<int64_t>::max()};

void require(const std::optional<std::string>& violation) {
  if (!violation) return;
  std::fprintf(stderr, "invariant violated: %s\n", violation->c_str());
  std::abort();
}

// The case's file with one input replaced by a zero-element tensor: rank 1 to 3, one dim zero,
// one dim huge, the others from the input's own shape.
std::string with_zero_element_input(const Case& c, fuzz::ByteReader& bytes) {
  nlohmann::json doc = case_to_json(c);
  nlohmann::json& inputs = doc["inputs"];
  if (inputs.empty()) return doc.dump();
  auto it = inputs.begin();
  std::advance(it, static_cast<std::ptrdiff_t>(bytes.take_index(inputs.size())));
  std::vector<int64_t> shape = (*it)["shape"].get<std::vector<int64_t>>();
  shape.resize(static_cast<size_t>(bytes.take_in_range(1, 3)), 1);
  const size_t zero_at = bytes.take_index(shape.size());
  const size_t huge_at = bytes.take_index(shape.size());
  shape[huge_at] = kHugeDims[bytes.take_index(kHugeDims.size())];
  shape[zero_at] = 0;
  (*it)["shape"] = shape;
  (*it)["hex"] = "";
  return doc.dump();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Registry& registry = harness_registry();
  fuzz::ByteReader bytes(data, size);
  const uint64_t path = bytes.take_front(1) % 3;
  const std::optional<Case> c = fuzz::decode_case(registry, bytes);
  if (!c) return 0;
  require(fuzz::check_json_round_trip(registry, *c));
  switch (path) {
    case 0:
      require(fuzz::check_reference_invariants(registry, *c));
      count_numeric_features(registry, *c);
      break;
    case 1: require(fuzz::check_user_file(registry, case_to_json(*c).dump())); break;
    default: require(fuzz::check_user_file(registry, with_zero_element_input(*c, bytes))); break;
  }
  return 0;
}
