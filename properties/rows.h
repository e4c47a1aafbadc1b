// The row structure of row-wise ops, read from the registry's TensorSpec traits: an input or an
// output that says rows_first has the op's independent rows as its first dimension; an output that
// says row_count_dependent is invariant to the other rows' values but not to their number.
// Properties that cut, empty or refill rows (zero rows, batch invariance) use these and name no
// op; an output that is not rows-first (a permute's T*k rows) is never cut by rows.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <rapidcheck/Gen.h>

#include "core/case.h"
#include "core/registry.h"
#include "core/rows.h"
#include "properties/harness.h"

namespace bitparity::props {

// Names of the op's row inputs in a direction; empty when the op is not row-wise.
std::vector<std::string> row_inputs(const OpInfo& op, Direction d);
bool is_row_wise(const Target& target);

// The outputs whose rows are the case's rows: the op declares them rows_first and the target
// contract's output metas (validate) for this case put the case's row count first. Empty when
// validate refuses the case.
std::vector<std::string> row_outputs(const Target& target, const Case& c);
// Whether the op declares the output row_count_dependent.
bool row_count_dependent(const Target& target, const std::string& output);

// The case's row count (the first dimension its row inputs share); throws std::logic_error when
// the row inputs disagree or the op has none.
int64_t case_rows(const Case& c);

// The case restricted to rows [r0, r0 + n) (core/rows.h's cut_rows).
Case take_rows(const Case& c, int64_t r0, int64_t n);

// The case with every row except `keep` refilled with fresh random values of the same dtype
// and shape (each floating row input drawn anew by core/gen, then row `keep` copied back; integer
// and boolean row inputs, the case's structure, kept).
rc::Gen<Case> refill_other_rows(const Case& c, int64_t keep);

}  // namespace bitparity::props
