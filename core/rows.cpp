#include "core/rows.h"

#include <cstring>
#include <stdexcept>

namespace bitparity {

std::vector<std::string> row_input_names(const OpInfo& op, Direction direction) {
  std::vector<std::string> names;
  for (const TensorSpec& spec : op.input_specs(direction))
    if (spec.rows_first) names.push_back(spec.name);
  return names;
}

int64_t row_count(const OpInfo& op, const Case& c) {
  int64_t rows = -1;
  for (const std::string& name : row_input_names(op, c.direction)) {
    const Tensor* t = c.input(name);
    if (!t) continue;
    if (t->rank() == 0) throw std::logic_error(c.op + ": row input " + name + " is a scalar");
    if (rows >= 0 && t->dim(0) != rows) throw std::logic_error(c.op + ": row inputs disagree on the row count");
    rows = t->dim(0);
  }
  return rows;
}

bool rows_within(int64_t first, int64_t count, int64_t total) {
  return first >= 0 && count >= 0 && first <= total && count <= total - first;
}

Tensor tensor_rows(const Tensor& t, int64_t r0, int64_t n) {
  if (t.rank() == 0 || !rows_within(r0, n, t.dim(0)))
    throw std::out_of_range("the rows from " + std::to_string(r0) + " (" + std::to_string(n) +
                            " of them) of a tensor of shape " + shape_string(t.shape()));
  Shape shape = t.shape();
  const size_t row_bytes = t.dim(0) > 0 ? t.nbytes() / static_cast<size_t>(t.dim(0)) : 0;
  shape[0] = n;
  Tensor out(t.dtype(), shape);
  if (n > 0 && row_bytes > 0)
    std::memcpy(out.data(), t.data() + static_cast<size_t>(r0) * row_bytes, static_cast<size_t>(n) * row_bytes);
  return out;
}

Tensor zero_padded_rows(const Tensor& t, int64_t rows) {
  if (t.rank() == 0 || rows < t.dim(0))
    throw std::out_of_range("padding a tensor of shape " + shape_string(t.shape()) + " to " + std::to_string(rows) +
                            " rows");
  if (rows == t.dim(0)) return t;
  Shape shape = t.shape();
  shape[0] = rows;
  Tensor out(t.dtype(), shape);  // zero-filled
  if (t.nbytes() > 0) std::memcpy(out.data(), t.data(), t.nbytes());
  return out;
}

Case cut_rows(const OpInfo& op, const Case& c, int64_t r0, int64_t n) {
  if (op.take_rows) return op.take_rows(c, r0, n);
  Case out = c;
  for (const std::string& name : row_input_names(op, c.direction))
    if (const Tensor* t = c.input(name)) out.inputs[name] = tensor_rows(*t, r0, n);
  return out;
}

}  // namespace bitparity
