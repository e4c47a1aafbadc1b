// Replaying a corpus entry: the one verdict that `bitparity replay` and ctest's corpus tests share.
#pragma once

#include <filesystem>
#include <string>

#include "corpus/entry.h"

namespace bitparity::corpus {

enum class ReplayStatus { kPass, kFail, kSkip };
std::string_view replay_status_name(ReplayStatus status);  // "PASS", "FAIL", "SKIP"

struct ReplayResult {
  ReplayStatus status = ReplayStatus::kPass;
  std::string summary;  // one line: "divergence still shows: bit_mismatch in y"
  std::string details;  // the differential message, for failures and reports
};

// pins "divergence": the pair must still differ with the entry's kind and output.
// pins "fixed": the pair must agree.
// pins "open": never fails; the summary says whether the bug still reproduces.
// A backend that is not built into this binary or unavailable here skips with the reason.
ReplayResult replay_entry(const Registry& registry, const Entry& entry);

// "To reproduce: bitparity replay corpus/swiglu/3f9a....json"
std::string reproduce_line(const std::filesystem::path& path);

}  // namespace bitparity::corpus
