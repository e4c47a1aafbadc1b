#include "fuzz/numeric_features.h"

#include <algorithm>
#include <map>
#include <optional>

#include "core/compare.h"
#include "core/error.h"
#include "core/outcome.h"
#include "corpus/differential.h"
#include "corpus/entry.h"

namespace bitparity::fuzz {

std::vector<std::string> numeric_features(const Registry& registry, const Case& c) {
  const OpInfo* op = registry.op(c.op);
  if (!op) return {};
  // An op's classes read a case that its validate accepts (under some contract); a decoded case may
  // be one that every contract rejects, and its classes are not read then.
  std::string classes = "|";
  std::string rejected;
  bool accepted = false;
  for (const ContractInfo& contract : op->contracts) {
    try {
      op->validate(c, contract);
      accepted = true;
      break;
    } catch (const RejectError& e) {
      if (rejected.empty()) rejected = "rejected:" + e.error_class() + "|";
    }
  }
  if (!accepted) {
    classes = rejected.empty() ? "rejected:|" : rejected;
  } else if (op->classes) {
    const CaseClasses k = op->classes(c);
    classes = k.shape_class + "|" + k.value_class;
  }
  const std::string head = c.op + "|" + std::string(direction_name(c.direction)) + "|";
  std::vector<std::string> features = {head + classes};
  std::map<std::string, Outcome> outcomes;  // each reference contract once
  auto outcome = [&](const std::string& backend) -> const Outcome& {
    auto it = outcomes.find(backend);
    if (it == outcomes.end()) it = outcomes.emplace(backend, corpus::run_side(registry, backend, c)).first;
    return it->second;
  };
  for (const corpus::BackendPair& pair : corpus::reference_pairs(registry, c.op)) {
    const corpus::DiffResult r = corpus::classify(registry, c, pair, outcome(pair.a), outcome(pair.b));
    std::string verdict;
    switch (r.verdict) {
      case corpus::DiffVerdict::kAgree: verdict = "agree"; break;
      case corpus::DiffVerdict::kSkip: verdict = "skip:" + r.kind; break;
      case corpus::DiffVerdict::kFinding: {
        // The largest difference's bucket; "-" where no outputs were compared (a rejection, shapes).
        std::string bucket = "-";
        if (r.comparison) {
          uint64_t largest = 0;
          bool finite = false, nan = false;  // differing elements with an ulp distance, or a NaN side
          for (const OutputComparison& out : r.comparison->outputs)
            for (const auto& [b, n] : out.ulp_histogram) {
              (b == "nan" ? nan : finite) = true;
              if (b != "nan") largest = std::max(largest, out.max_ulps);
            }
          if (finite) bucket = ulp_bucket(largest);
          else if (nan) bucket = ulp_bucket(std::nullopt);
        }
        verdict = r.kind + "|" + r.output + "|ulp=" + bucket;
        break;
      }
    }
    features.push_back(head + pair.name() + "|" + classes + "|" + verdict);
  }
  return features;
}

size_t feature_slot(const std::string& feature, size_t slots) {
  return slots == 0 ? 0 : static_cast<size_t>(corpus::fnv1a64(feature) % slots);
}

}  // namespace bitparity::fuzz
