// The row structure of a case, read from its op's TensorSpec traits: the inputs that say rows_first
// share the op's independent rows (tokens) as their first dimension. Cutting a case to some of its
// rows is the op's take_rows where it has one (a permute's [T*k, H] tensors follow the routing
// map), otherwise every rows-first input is cut and the other inputs are kept. Properties, GPU
// tests and corpus replay cut cases through here and name no op.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/registry.h"

namespace bitparity {

// Names of the op's rows-first inputs in a direction; empty when the op is not row-wise.
std::vector<std::string> row_input_names(const OpInfo& op, Direction direction);

// The case's row count (the first dimension its rows-first inputs share); throws std::logic_error
// when they disagree, and returns -1 when the case has none.
int64_t row_count(const OpInfo& op, const Case& c);

// Whether rows [first, first + count) lie within `total` rows: both non-negative and count <= total -
// first, so that no sum of a hostile file's int64 fields can wrap past the check.
bool rows_within(int64_t first, int64_t count, int64_t total);

// Rows [r0, r0 + n) of a tensor whose first dimension is rows; rank and other dims unchanged.
// Throws std::out_of_range when the rows are not all there.
Tensor tensor_rows(const Tensor& t, int64_t r0, int64_t n);

// `t` with rows of zero bit patterns (+0) appended up to `rows` (at least t's own).
Tensor zero_padded_rows(const Tensor& t, int64_t rows);

// The case restricted to rows [r0, r0 + n) (see above).
Case cut_rows(const OpInfo& op, const Case& c, int64_t r0, int64_t n);

}  // namespace bitparity
