// A case cut to its first rows: the op's own cut where it has one (OpInfo::take_rows: a permute's
// [T*k, H] tensors follow the routing map), otherwise every input that its op declares rows-first
// (TensorSpec::rows_first) keeps its first n rows and the other inputs stay whole. Used to run a
// reference input at zero rows and at one row without naming any of its tensors.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "core/registry.h"

namespace bitparity::testing_support {

// The first min(n, rows) rows of a tensor whose dimension 0 is rows; the other dimensions kept.
inline Tensor leading_rows(const Tensor& whole, int64_t n) {
  Shape shape = whole.shape();
  const size_t row_bytes = shape[0] > 0 ? whole.nbytes() / static_cast<size_t>(shape[0]) : 0;
  shape[0] = std::min(n, shape[0]);
  Tensor cut(whole.dtype(), shape);
  if (cut.nbytes() > 0) std::memcpy(cut.data(), whole.data(), row_bytes * static_cast<size_t>(shape[0]));
  return cut;
}

inline Case first_rows(const OpInfo& op, const Case& c, int64_t n) {
  if (op.take_rows) {
    int64_t rows = -1;  // the row count the rows-first inputs share
    for (const TensorSpec& spec : op.input_specs(c.direction))
      if (const Tensor* t = c.input(spec.name); spec.rows_first && t && t->rank() > 0) rows = t->dim(0);
    return op.take_rows(c, 0, rows < 0 ? 0 : std::min(n, rows));
  }
  Case out = c;
  for (const TensorSpec& spec : op.input_specs(c.direction)) {
    auto it = out.inputs.find(spec.name);
    if (!spec.rows_first || it == out.inputs.end() || it->second.rank() == 0) continue;
    it->second = leading_rows(it->second, n);
  }
  return out;
}

}  // namespace bitparity::testing_support
