#include "corpus/testing/fake_registry.h"

#include <atomic>

#include <rapidcheck.h>

#include "core/error.h"

namespace bitparity::testing {
namespace {

constexpr float kSloppyTrigger = 3.0f;  // the input value on which "sloppy" is one ulp off
constexpr int64_t kMaxGenRows = 4, kMaxGenCols = 8;

std::atomic<bool> g_fake_gpu_available{true};

const Tensor& input_x(const Case& c) {
  const Tensor* x = c.input("x");
  if (!x) throw RejectError("shape", "toy needs input x");
  if (x->rank() != 2) throw RejectError("shape", "x must have rank 2; got " + shape_string(x->shape()));
  if (x->dtype() != DType::kBF16) throw RejectError("dtype", "x must be bf16");
  return *x;
}

float scale_of(const Case& c) { return static_cast<float>(c.float_attr("scale").value_or(1.0)); }

TensorMap exact(const Case& c) {
  const Tensor& x = input_x(c);
  Tensor y(DType::kBF16, x.shape());
  for (int64_t i = 0; i < x.numel(); ++i) y.set_f32(i, x.f32(i) * scale_of(c));
  return {{"y", y}};
}

TensorMap sloppy(const Case& c) {
  const Tensor& x = input_x(c);
  if (x.dim(1) > kToyModelledCols) throw RejectError("unmodelled", "sloppy does not model wide rows");
  TensorMap out = exact(c);
  Tensor& y = out.at("y");
  for (int64_t i = 0; i < x.numel(); ++i)
    if (x.f32(i) == kSloppyTrigger) y.set_bits(i, y.bits(i) + 1);
  return out;
}

TensorMap strict(const Case& c) {
  if (input_x(c).dim(0) == 0) throw RejectError("shape", "strict rejects zero rows");
  return exact(c);
}

TensorMap flat(const Case& c) {
  TensorMap out = exact(c);
  out.at("y") = out.at("y").reshaped({out.at("y").numel()});
  return out;
}

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

std::map<std::string, std::vector<double>> oracle(const Case& c) {
  const Tensor& x = input_x(c);
  std::vector<double> y;
  for (int64_t i = 0; i < x.numel(); ++i) y.push_back(x.f64(i) * c.float_attr("scale").value_or(1.0));
  return {{"y", y}};
}

rc::Gen<Case> generate(Direction) {
  // Values from a small set so that 3.0 (the sloppy trigger) shows in many cases.
  const rc::Gen<float> value = rc::gen::element(0.0f, 1.0f, -2.0f, 3.0f, 0.375f, 1.0e3f);
  return rc::gen::mapcat(
      rc::gen::pair(rc::gen::inRange<int64_t>(0, kMaxGenRows + 1), rc::gen::inRange<int64_t>(1, kMaxGenCols + 1)),
      [value](const std::pair<int64_t, int64_t>& shape) {
        return rc::gen::map(
            rc::gen::container<std::vector<float>>(static_cast<size_t>(shape.first * shape.second), value),
            [shape](const std::vector<float>& values) { return toy_case(shape.first, shape.second, values); });
      });
}

OpInfo toy_op() {
  OpInfo op;
  op.name = "toy";
  op.doc = "y = x * scale, elementwise (a test double)";
  op.inputs[Direction::kForward] = {{"x", "bf16 [rows, cols]", false}};
  op.outputs[Direction::kForward] = {{"y", "bf16 [rows, cols]", false}};
  op.attrs = {{"scale", AttrType::kFloat, "multiplier, 1 when absent"}, {"flag", AttrType::kBool, "ignored"}};
  op.contracts = {{"exact", "one rounding", "arithmetic"},
                  {"sloppy", "one ulp high on 3.0", ""},
                  {"strict", "rejects zero rows", ""},
                  {"flat", "flattens y", ""}};
  op.generate = generate;
  op.shrink_shape = shrink_shape;
  op.classes = classes;
  op.oracle = oracle;
  return op;
}

}  // namespace

Registry make_fake_registry() {
  Registry r;
  r.add_op(toy_op());
  r.add_backend({"ref", "test reference", nullptr});
  r.add_backend({"fake_gpu", "test double of a GPU backend", []() -> std::optional<std::string> {
                   if (g_fake_gpu_available.load()) return std::nullopt;
                   return "no fake device";
                 }});
  r.add_impl("toy", "ref", "exact", exact);
  r.add_impl("toy", "ref", "sloppy", sloppy);
  r.add_impl("toy", "ref", "strict", strict);
  r.add_impl("toy", "ref", "flat", flat);
  r.add_impl("toy", "fake_gpu", "exact", sloppy);
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
