// The campaign the fault tests run (peers/exec/exec_test.cpp, gpu/tests/cuda_fault_test.cpp): the
// toy op's KIND:strict against ref:strict for `cases` case indices, its findings written to a fresh
// corpus folder named after `label` and this process. Header-only: the tests link the campaign.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>

#include "campaign/campaign.h"

namespace bitparity::testing {

inline campaign::CampaignOptions toy_fault_campaign(const std::string& kind, const std::string& label, int64_t cases,
                                                    uint64_t seed, int max_shrink_calls) {
  campaign::CampaignOptions o;
  o.budget_seconds = 600;  // the case count ends it
  o.max_cases = cases;
  o.seed = seed;
  o.pairs = {{kind + ":strict", "ref:strict"}};
  o.corpus_dir = std::filesystem::temp_directory_path() / ("bitparity_" + label + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(o.corpus_dir);
  o.max_shrink_calls = max_shrink_calls;
  return o;
}

}  // namespace bitparity::testing
