// A case cut to its first rows (core/rows.h's cut_rows: the op's own cut where it has one,
// otherwise every rows-first input). Used to run a reference input at zero rows and at one row
// without naming any of its tensors.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/rows.h"

namespace bitparity::testing_support {

// The first min(n, rows) rows of a tensor whose dimension 0 is rows; the other dimensions kept.
inline Tensor leading_rows(const Tensor& whole, int64_t n) { return tensor_rows(whole, 0, std::min(n, whole.dim(0))); }

inline Case first_rows(const OpInfo& op, const Case& c, int64_t n) {
  const int64_t rows = row_count(op, c);
  return cut_rows(op, c, 0, rows < 0 ? 0 : std::min(n, rows));
}

}  // namespace bitparity::testing_support
