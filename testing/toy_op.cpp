#include "testing/toy_op.h"

#include <atomic>

#include <rapidcheck.h>

#include "core/error.h"
#include "core/random.h"

namespace bitparity::testing {
namespace {

constexpr float kSloppyTrigger = 3.0f;  // the input value on which "sloppy" is one ulp off
constexpr int64_t kMaxGenRows = 4, kMaxGenCols = 8;
// The values of generated and reference cases: 3.0 (the sloppy trigger) shows in many cases, and
// 1000 beside small ones makes y_sum's bf16 partial sums depend on the summation order.
constexpr float kToyValues[] = {0.0f, 1.0f, -2.0f, 3.0f, 0.375f, 1.0e3f};
constexpr int64_t kReferenceRows = 64;
constexpr uint64_t kReferenceSeed = 0x70e7;  // seeds the reference inputs' splitmix64 stream

std::atomic<bool> g_fake_gpu_available{true};

float scale_of(const Case& c) { return static_cast<float>(c.float_attr("scale").value_or(1.0)); }

// --- validation: the checks every backend's run goes through ---------------------------------

OutputMetas validate(const Case& c, const ContractInfo& contract) {
  const Tensor* x = c.input("x");
  if (!x) throw RejectError("shape", "toy needs input x");
  if (x->rank() != 2) throw RejectError("shape", "x must have rank 2; got " + shape_string(x->shape()));
  if (x->dtype() != DType::kBF16) throw RejectError("dtype", "x must be bf16");
  const int64_t rows = x->dim(0), cols = x->dim(1);
  if (contract.name == "strict" && rows == 0)
    throw RejectError("shape", "x must have at least one row under strict; got " + shape_string(x->shape()));
  const Shape y_shape = contract.name == "flat" ? Shape{rows * cols} : Shape{rows, cols};
  return {{"y", {y_shape, DType::kBF16}}, {"y_sum", {{rows}, DType::kBF16}}};
}

// --- the contracts' arithmetic -----------------------------------------------------------------

// y_sum of a [rows, cols] y: each row's sum with every partial sum rounded to bf16, from the first
// column when rows is odd and from the last when it is even.
Tensor row_sums(const Tensor& y) {
  const int64_t rows = y.dim(0), cols = y.dim(1);
  const bool from_first = rows % 2 == 1;
  Tensor sums(DType::kBF16, {rows});
  for (int64_t r = 0; r < rows; ++r) {
    float sum = 0.0f;
    for (int64_t k = 0; k < cols; ++k) sum = round_to(DType::kBF16, sum + y.f32(r * cols + (from_first ? k : cols - 1 - k)));
    sums.set_f32(r, sum);
  }
  return sums;
}

Tensor scaled(const Case& c) {
  const Tensor& x = *c.input("x");
  Tensor y(DType::kBF16, x.shape());
  for (int64_t i = 0; i < x.numel(); ++i) y.set_f32(i, x.f32(i) * scale_of(c));
  return y;
}

TensorMap with_row_sums(Tensor y) {
  Tensor sums = row_sums(y);
  return {{"y", std::move(y)}, {"y_sum", std::move(sums)}};
}

TensorMap exact(const Case& c, const ContractInfo&) { return with_row_sums(scaled(c)); }

TensorMap sloppy(const Case& c, const ContractInfo&) {
  const Tensor& x = *c.input("x");
  if (x.dim(1) > kToyModelledCols) throw RejectError("unmodelled", "sloppy does not model wide rows");
  Tensor y = scaled(c);
  for (int64_t i = 0; i < x.numel(); ++i)
    if (x.f32(i) == kSloppyTrigger) y.set_bits(i, y.bits(i) + 1);
  return with_row_sums(std::move(y));
}

TensorMap flat(const Case& c, const ContractInfo& contract) {
  TensorMap out = exact(c, contract);
  out.at("y") = out.at("y").reshaped({out.at("y").numel()});
  return out;
}

// --- cases ---------------------------------------------------------------------------------------

// The block of x starting at (row, col) of shape [rows, cols].
Case crop(const Case& c, int64_t row, int64_t rows, int64_t col, int64_t cols) {
  const Tensor& x = *c.input("x");
  Tensor small(x.dtype(), {rows, cols});
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < cols; ++k) small.set_bits(r * cols + k, x.bits((row + r) * x.dim(1) + col + k));
  Case out = c;
  out.inputs["x"] = small;
  return out;
}

// Single rows, single columns, then halves: the most aggressive first.
std::vector<Case> shrink_shape(const Case& c) {
  const Tensor* x = c.input("x");
  if (!x || x->rank() != 2) return {};
  const int64_t rows = x->dim(0), cols = x->dim(1);
  std::vector<Case> out;
  for (int64_t r = 0; rows > 1 && r < rows; ++r) out.push_back(crop(c, r, 1, 0, cols));
  for (int64_t k = 0; cols > 1 && k < cols; ++k) out.push_back(crop(c, 0, rows, k, 1));
  if (rows > 2)
    out.push_back(crop(c, 0, rows / 2, 0, cols)), out.push_back(crop(c, rows / 2, rows - rows / 2, 0, cols));
  if (cols > 2)
    out.push_back(crop(c, 0, rows, 0, cols / 2)), out.push_back(crop(c, 0, rows, cols / 2, cols - cols / 2));
  return out;
}

CaseClasses classes(const Case& c) {
  CaseClasses k;
  const Tensor* x = c.input("x");
  const int64_t rows = x && x->rank() == 2 ? x->dim(0) : -1;
  k.shape_class = rows == 0 ? "rows=0" : rows == 1 ? "rows=1" : "rows>1";
  bool has_trigger = false;
  for (int64_t i = 0; x && i < x->numel(); ++i) has_trigger = has_trigger || x->f32(i) == kSloppyTrigger;
  k.value_class = has_trigger ? "has3" : "plain";
  k.tags = {k.shape_class, k.value_class};
  return k;
}

std::vector<std::string> required_tags(Direction) { return {"rows=0", "rows=1", "rows>1", "has3", "plain"}; }

std::map<std::string, std::vector<double>> oracle(const Case& c) {
  const Tensor& x = *c.input("x");
  const double scale = c.float_attr("scale").value_or(1.0);
  const int64_t rows = x.dim(0), cols = x.dim(1);
  std::vector<double> y, y_sum(static_cast<size_t>(rows), 0.0);
  for (int64_t i = 0; i < x.numel(); ++i) {
    y.push_back(x.f64(i) * scale);
    y_sum[static_cast<size_t>(i / cols)] += y.back();
  }
  return {{"y", y}, {"y_sum", y_sum}};
}

rc::Gen<Case> generate(Direction) {
  const rc::Gen<float> value = rc::gen::elementOf(std::vector<float>(std::begin(kToyValues), std::end(kToyValues)));
  return rc::gen::mapcat(
      rc::gen::pair(rc::gen::inRange<int64_t>(0, kMaxGenRows + 1), rc::gen::inRange<int64_t>(1, kMaxGenCols + 1)),
      [value](const std::pair<int64_t, int64_t>& shape) {
        return rc::gen::map(
            rc::gen::container<std::vector<float>>(static_cast<size_t>(shape.first * shape.second), value),
            [shape](const std::vector<float>& values) { return toy_case(shape.first, shape.second, values); });
      });
}

std::vector<ErrorInput> error_inputs(Direction) {
  Case rank3 = toy_case(1, 2, {1.0f, 2.0f});
  rank3.inputs["x"] = rank3.inputs["x"].reshaped({1, 1, 2});
  Case fp16 = toy_case(1, 2, {});
  fp16.inputs["x"] = Tensor(DType::kFP16, {1, 2});
  return {{"x_rank3", rank3, "shape", "x", {}},
          {"x_fp16", fp16, "dtype", "x", {}},
          {"x_zero_rows", toy_case(0, 3, {}), "shape", "x", {"strict"}}};
}

// A [rows, kToyModelledCols] case of the toy's values drawn by splitmix64: the widest rows that
// every contract models.
Case reference_case(int64_t rows) {
  std::vector<float> values;
  uint64_t state = kReferenceSeed + static_cast<uint64_t>(rows);
  for (int64_t i = 0; i < rows * kToyModelledCols; ++i)
    values.push_back(kToyValues[splitmix64_next(state) % std::size(kToyValues)]);
  return toy_case(rows, kToyModelledCols, values, 0.5);
}

std::vector<ReferenceInput> reference_inputs(Direction) {
  return {{"rows1_cols64", {}, [] { return reference_case(1); }},
          {"rows64_cols64", {}, [] { return reference_case(kReferenceRows); }}};
}

}  // namespace

OpInfo toy_op() {
  OpInfo op;
  op.name = "toy";
  op.doc = "y = x * scale, elementwise, and y's row sums (a test double)";
  op.inputs[Direction::kForward] = {{.name = "x", .doc = "bf16 [rows, cols]", .rows_first = true}};
  op.outputs[Direction::kForward] = {
      {.name = "y", .doc = "bf16 [rows, cols]", .rows_first = true},
      {.name = "y_sum",
       .doc = "bf16 [rows], partial sums in bf16 in an order the row count sets",
       .rows_first = true,
       .row_count_dependent = true}};
  op.attrs = {{"scale", AttrType::kFloat, "multiplier, 1 when absent"}, {"flag", AttrType::kBool, "ignored"}};
  op.contracts = {{"exact", "one rounding", "arithmetic"},
                  {"sloppy", "one ulp high on 3.0", ""},
                  {"strict", "rejects zero rows", ""},
                  {"flat", "flattens y", ""}};
  op.validate = validate;
  op.generate = generate;
  op.required_tags = required_tags;
  op.classes = classes;
  op.error_inputs = error_inputs;
  op.reference_inputs = reference_inputs;
  op.shrink_shape = shrink_shape;
  op.oracle = oracle;
  return op;
}

Registry make_fake_registry() {
  Registry r;
  r.add_op(toy_op());
  r.add_backend({"ref", "test reference", nullptr});
  r.add_backend({"fake_gpu", "test double of a GPU backend", []() -> std::optional<std::string> {
                   if (g_fake_gpu_available.load()) return std::nullopt;
                   return "no fake device";
                 }});
  r.add_impls("ref", {{"toy", "exact", exact}, {"toy", "sloppy", sloppy}, {"toy", "strict", exact}, {"toy", "flat", flat}});
  r.add_impls("fake_gpu", {{"toy", "exact", sloppy}});
  return r;
}

void set_fake_gpu_available(bool available) { g_fake_gpu_available.store(available); }

Case toy_case(int64_t rows, int64_t cols, const std::vector<float>& values, std::optional<double> scale) {
  Case c;
  c.op = "toy";
  c.direction = Direction::kForward;
  Tensor x(DType::kBF16, {rows, cols});
  for (int64_t i = 0; i < x.numel() && i < static_cast<int64_t>(values.size()); ++i)
    x.set_f32(i, values[static_cast<size_t>(i)]);
  c.inputs["x"] = x;
  if (scale) c.attrs["scale"] = *scale;
  return c;
}

}  // namespace bitparity::testing
