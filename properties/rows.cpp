#include "properties/rows.h"

#include <cstring>
#include <stdexcept>

#include <rapidcheck.h>

#include "core/gen.h"
#include "core/rows.h"
#include "properties/harness.h"

namespace bitparity::props {
namespace {

constexpr int kFreshRowsSize = 100;  // RapidCheck size for the refilled rows' values

int64_t row_width(const Tensor& t) { return t.dim(0) == 0 ? 0 : t.numel() / t.dim(0); }

}  // namespace

std::vector<std::string> row_inputs(const OpInfo& op, Direction d) { return row_input_names(op, d); }

bool is_row_wise(const Target& target) { return !row_inputs(op_info(target.op), target.direction).empty(); }

std::vector<std::string> row_outputs(const Target& target, const Case& c) {
  std::vector<std::string> names;
  const Metas metas = output_metas(target, c);
  if (!metas.metas) return names;
  const int64_t rows = case_rows(c);
  for (const TensorSpec& spec : op_info(target.op).output_specs(target.direction)) {
    auto it = metas.metas->find(spec.name);
    if (spec.rows_first && it != metas.metas->end() && !it->second.shape.empty() && it->second.shape[0] == rows)
      names.push_back(spec.name);
  }
  return names;
}

bool row_count_dependent(const Target& target, const std::string& output) {
  for (const TensorSpec& spec : op_info(target.op).output_specs(target.direction))
    if (spec.name == output) return spec.row_count_dependent;
  return false;
}

int64_t case_rows(const Case& c) {
  const int64_t rows = row_count(op_info(c.op), c);
  if (rows < 0) throw std::logic_error(c.op + " has no row input");
  return rows;
}

Case take_rows(const Case& c, int64_t r0, int64_t n) { return cut_rows(op_info(c.op), c, r0, n); }

rc::Gen<Case> refill_other_rows(const Case& c, int64_t keep) {
  return rc::gen::exec([c, keep] {
    // One seed and one value family per case: the fresh rows are drawn outside RapidCheck's
    // shrink tree (shrinking them would not make a counterexample simpler), which keeps this cheap.
    rc::Random random(*rc::gen::arbitrary<uint64_t>());
    const gen::ValueFamily family = *gen::value_family();
    Case out = c;
    for (const std::string& name : row_inputs(op_info(c.op), c.direction)) {
      const Tensor* t = c.input(name);
      // Integer and boolean row inputs are structure (routing maps, indices), not values: drawn
      // anew they would make a case the op rejects, so they are kept.
      if (!t || !is_floating(t->dtype())) continue;
      Tensor fresh = gen::tensor(t->dtype(), t->shape(), family)(random.split(), kFreshRowsSize).value();
      const size_t row_bytes = static_cast<size_t>(row_width(*t) * dtype_size(t->dtype()));
      if (row_bytes > 0) std::memcpy(fresh.data() + keep * row_bytes, t->data() + keep * row_bytes, row_bytes);
      out.inputs[name] = fresh;
    }
    return out;
  });
}

}  // namespace bitparity::props
