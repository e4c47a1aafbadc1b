// fanout_grad: the gradient of the MoE layer's input, which the layer clones three times (router,
// dispatcher, shared expert; spec OP-11). d_hidden is the sum of the three branches' gradients,
// each addition an eager add rounded to the dtype; the contracts differ only in the order.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <Eigen/Dense>
#include <rapidcheck.h>

#include "core/error.h"
#include "core/gen.h"
#include "ops/training.h"

namespace bitparity::ops {
namespace {

const char* const kGlm45From =
    "PaddleFleet GLM-4.5 alignment, ThreePathCloneAlignMG backward: bf(bf(g_dispatcher + g_shared) + g_router); "
    "eager PyTorch 2.11 add on CUDA 13.0, sm_90 (fp32 opmath, one rounding per add)";
const char* const kDsv4From =
    "PaddleFleet DSv4 / KimiK2 switches, 'Megatron accumulates the shared branch last': "
    "bf(bf(g_dispatcher + g_router) + g_shared); eager PyTorch 2.11 add on CUDA 13.0, sm_90";

const char* const kInputs[] = {"g_router", "g_dispatcher", "g_shared"};
constexpr int64_t kModelH = 4096;   // GLM-4.5's hidden size
constexpr int64_t kSmallHMax = 33;  // widths 1..33 cross every vector-width residue
constexpr int64_t kMinElements = 4096, kElementsPerSize = 1024;

// --- validate ----------------------------------------------------------------------------------

OutputMetas validate(const Case& c, const ContractInfo&) {
  const std::string who = "fanout_grad";
  const Tensor* first = nullptr;
  for (const char* name : kInputs) {
    const Tensor* t = c.input(name);
    if (!t) throw RejectError("shape", who + ": missing input " + name);
    if (t->dtype() != DType::kBF16 && t->dtype() != DType::kFP16 && t->dtype() != DType::kFP32)
      throw RejectError("dtype", who + ": " + name + " must be bf16, fp16 or fp32; got " +
                                     std::string(dtype_name(t->dtype())));
    if (t->rank() != 2)
      throw RejectError("shape", who + ": " + name + " must have shape [T, H]; got " + shape_string(t->shape()));
    if (!first) {
      first = t;
      continue;
    }
    if (t->dtype() != first->dtype())
      throw RejectError("dtype", who + ": " + name + " must have g_router's dtype " +
                                     std::string(dtype_name(first->dtype())) + "; got " +
                                     std::string(dtype_name(t->dtype())));
    if (t->shape() != first->shape())
      throw RejectError("shape", who + ": " + name + " must have g_router's shape " + shape_string(first->shape()) +
                                     "; got " + shape_string(t->shape()));
  }
  return {{"d_hidden", {first->shape(), first->dtype()}}};
}

// --- generation ------------------------------------------------------------------------------

rc::Gen<int64_t> hidden_H() {
  return rc::gen::weightedOneOf<int64_t>({
      {4, rc::gen::inRange<int64_t>(1, kSmallHMax + 1)},
      {4, rc::gen::map(rc::gen::inRange<int64_t>(1, 33), [](int64_t m) { return 8 * m; })},
      {1, rc::gen::just(kModelH)},
  });
}

// How the three gradients relate: independent draws, or g_router = -g_dispatcher elementwise with a
// small g_shared (then the two orders round the cancellation differently: x + s - x against
// x - x + s), or equal to one another (a sum of equal terms, exact in any order while it does not
// overflow).
enum class Relation { kIndependent, kCancelling, kEqual };

rc::Gen<Case> generate(Direction) {
  return rc::gen::exec([] {
    Case c;
    c.op = "fanout_grad";
    c.direction = Direction::kForward;
    const DType dt = *rc::gen::weightedElement<DType>({{6, DType::kBF16}, {2, DType::kFP32}, {1, DType::kFP16}});
    const int64_t H = *hidden_H();
    int64_t T = *gen::rows();
    const int64_t max_elements =
        kMinElements + int64_t{*rc::gen::withSize([](int size) { return rc::gen::just(size); })} * kElementsPerSize;
    if (T > 1 && T * H > max_elements) T = std::max<int64_t>(1, max_elements / H);
    const Relation rel = *rc::gen::weightedElement<Relation>(
        {{4, Relation::kIndependent}, {2, Relation::kCancelling}, {1, Relation::kEqual}});
    const Shape shape{T, H};
    auto draw = [&] { return *gen::tensor(dt, shape, *gen::value_family()); };
    c.inputs["g_dispatcher"] = draw();
    if (rel == Relation::kIndependent) {
      c.inputs["g_router"] = draw();
      c.inputs["g_shared"] = draw();
    } else if (rel == Relation::kCancelling) {
      const Tensor& d = c.inputs["g_dispatcher"];
      Tensor r(dt, shape);
      const uint64_t sign = uint64_t{1} << (8 * dtype_size(dt) - 1);
      for (int64_t i = 0; i < d.numel(); ++i) r.set_bits(i, d.bits(i) ^ sign);
      c.inputs["g_router"] = r;
      c.inputs["g_shared"] = *gen::tensor(dt, shape, gen::ValueFamily::kModerate);
    } else {
      c.inputs["g_router"] = c.inputs["g_dispatcher"];
      c.inputs["g_shared"] = c.inputs["g_dispatcher"];
    }
    return c;
  });
}

// --- classes ---------------------------------------------------------------------------------

// f32(a) + f32(b) rounded to the dtype, as one eager add on CUDA (fp32 opmath).
double add_in(DType dt, double a, double b) {
  Tensor t(dt, {1});
  t.set_f32(0, static_cast<float>(a) + static_cast<float>(b));
  return t.f64(0);
}

// Whether the two contracts' orders give different values for some element (NaNs compared as
// equal: which NaN is not a matter of order here).
bool orders_differ(const Case& c) {
  const Tensor& r = *c.input("g_router");
  const Tensor& d = *c.input("g_dispatcher");
  const Tensor& s = *c.input("g_shared");
  for (int64_t i = 0; i < r.numel(); ++i) {
    const double glm = add_in(r.dtype(), add_in(r.dtype(), d.f64(i), s.f64(i)), r.f64(i));
    const double dsv = add_in(r.dtype(), add_in(r.dtype(), d.f64(i), r.f64(i)), s.f64(i));
    if (std::isnan(glm) && std::isnan(dsv)) continue;
    if (glm != dsv || std::signbit(glm) != std::signbit(dsv)) return true;
  }
  return false;
}

// The CUDA kernel's paths (KernelRecord::paths; gpu/training.cu fanout_grad_kernel): 16-byte
// packets, then the last numel % packet elements one a thread; nothing for an empty tensor.
void add_kernel_paths(const Tensor& t, std::vector<std::string>& tags) {
  constexpr int64_t kPacketBytes = 16;
  if (t.numel() == 0) return;
  const int64_t packet = kPacketBytes / static_cast<int64_t>(dtype_size(t.dtype()));
  tags.push_back(t.numel() % packet == 0 ? "numel%packet=0" : "numel%packet!=0");
}

CaseClasses classes(const Case& c) {
  CaseClasses k;
  const Tensor& r = *c.input("g_router");
  const int64_t H = r.rank() == 2 ? r.dim(1) : 0;
  bool nan = false;
  for (const char* name : kInputs)
    for (const std::string& v : gen::value_tags(*c.input(name))) nan = nan || v == "nan";
  const bool differ = orders_differ(c);
  k.shape_class = H == kModelH ? "H=4096" : H <= kSmallHMax ? "H=small" : "H=multiple_of_8";
  k.value_class = std::string(differ ? "orders_differ" : "orders_agree") + (nan ? ",nan" : "");
  k.tags = {gen::rows_class(r.dim(0)), k.shape_class, differ ? "orders_differ" : "orders_agree",
            "dtype=" + std::string(dtype_name(r.dtype()))};
  add_kernel_paths(r, k.tags);
  for (const char* name : kInputs)
    for (const std::string& v : gen::value_tags(*c.input(name))) k.tags.push_back(std::string(name) + ":" + v);
  return k;
}

std::vector<std::string> required_tags(Direction) {
  std::vector<std::string> tags = {"rows=0", "rows=1..16", "rows=17", "rows=32", "rows=large",
                                   "H=small", "H=multiple_of_8", "H=4096", "orders_differ", "orders_agree",
                                   "dtype=bf16", "dtype=fp16", "dtype=fp32", "numel%packet=0", "numel%packet!=0"};
  for (const char* name : kInputs)
    for (const char* value : {"nan", "inf", "-0", "subnormal"}) tags.push_back(std::string(name) + ":" + value);
  return tags;
}

// --- error inputs --------------------------------------------------------------------------------

Case small_case() {
  Case c;
  c.op = "fanout_grad";
  c.direction = Direction::kForward;
  for (const char* name : kInputs) c.inputs[name] = Tensor(DType::kBF16, {2, 8});
  return c;
}

std::vector<ErrorInput> error_inputs(Direction) {
  std::vector<ErrorInput> out;
  auto add = [&](std::string name, auto edit, std::string error_class, std::string field) {
    Case c = small_case();
    edit(c);
    out.push_back({std::move(name), std::move(c), std::move(error_class), std::move(field), {}});
  };
  add("g_shared_fp32_beside_bf16", [](Case& c) { c.inputs["g_shared"] = Tensor(DType::kFP32, {2, 8}); }, "dtype",
      "g_shared");
  add("g_dispatcher_other_shape", [](Case& c) { c.inputs["g_dispatcher"] = Tensor(DType::kBF16, {2, 9}); }, "shape",
      "g_dispatcher");
  add("g_shared_more_rows", [](Case& c) { c.inputs["g_shared"] = Tensor(DType::kBF16, {3, 8}); }, "shape",
      "g_shared");
  add("g_router_rank1", [](Case& c) { c.inputs["g_router"] = Tensor(DType::kBF16, {16}); }, "shape", "g_router");
  add("g_router_int32", [](Case& c) { c.inputs["g_router"] = Tensor(DType::kI32, {2, 8}); }, "dtype", "g_router");
  return out;
}

// --- reference inputs ----------------------------------------------------------------------------

std::vector<ReferenceInput> reference_inputs(Direction) {
  struct Shape2 {
    int64_t T, H;
    bool bench_only;
  };
  // GLM-4.5's hidden size at 16384 tokens (benchmarks), and 2048 tokens for GPU tests.
  constexpr Shape2 kShapes[] = {{16384, kModelH, true}, {2048, kModelH, false}};
  std::vector<ReferenceInput> out;
  for (const Shape2& s : kShapes)
    out.push_back({"tokens" + std::to_string(s.T) + "_H" + std::to_string(s.H), {},
                   [s] {
                     Case c;
                     c.op = "fanout_grad";
                     c.direction = Direction::kForward;
                     uint64_t seed = 21;
                     for (const char* name : kInputs) c.inputs[name] = gen::large_tensor(DType::kBF16, {s.T, s.H}, seed++);
                     return c;
                   },
                   s.bench_only});
  return out;
}

// --- shrinking -------------------------------------------------------------------------------

// Rows [r0, r0 + nr) and columns [h0, h0 + nh) of every input.
Case window(const Case& c, int64_t r0, int64_t nr, int64_t h0, int64_t nh) {
  Case out = c;
  for (const char* name : kInputs) {
    const Tensor& t = *c.input(name);
    Tensor w(t.dtype(), {nr, nh});
    for (int64_t r = 0; r < nr; ++r)
      for (int64_t h = 0; h < nh; ++h) w.set_bits(r * nh + h, t.bits((r0 + r) * t.dim(1) + h0 + h));
    out.inputs[name] = w;
  }
  return out;
}

std::vector<Case> shrink_shape(const Case& c) {
  constexpr int64_t kMaxSingles = 8;
  const Tensor& r = *c.input("g_router");
  const int64_t T = r.dim(0), H = r.dim(1);
  std::vector<Case> out;
  if (T > 1) {
    for (int64_t t = 0; t < std::min(T, kMaxSingles); ++t) out.push_back(window(c, t, 1, 0, H));
    out.push_back(window(c, 0, T / 2, 0, H));
    out.push_back(window(c, T / 2, T - T / 2, 0, H));
  }
  if (H > 1) {
    out.push_back(window(c, 0, T, 0, H / 2));
    out.push_back(window(c, 0, T, H / 2, H - H / 2));
    for (int64_t h = 0; h < std::min(H, 2 * kMaxSingles); ++h) out.push_back(window(c, 0, T, h, 1));
  }
  return out;
}

// --- oracle: the exact sum ------------------------------------------------------------------------

// The sum of the three gradients in fp64, corrected by the two additions' rounding errors (TwoSum):
// the exact sum wherever it fits 53 bits, and within an fp64 ulp of it otherwise; a non-finite sum as
// IEEE gives it.
std::map<std::string, std::vector<double>> oracle(const Case& c) {
  const Tensor& r = *c.input("g_router");
  const int64_t n = r.numel();
  auto column = [&](const char* name) {
    const Tensor& t = *c.input(name);
    Eigen::ArrayXd a(n);
    for (int64_t i = 0; i < n; ++i) a(i) = t.f64(i);
    return a;
  };
  const Eigen::ArrayXd g_r = column("g_router"), g_d = column("g_dispatcher"), g_s = column("g_shared");
  auto two_sum_error = [](double a, double b) {
    const double s = a + b, bb = s - a;
    return (a - (s - bb)) + (b - bb);
  };
  const Eigen::ArrayXd s1 = g_d + g_s;
  const Eigen::ArrayXd e1 = g_d.binaryExpr(g_s, two_sum_error);
  const Eigen::ArrayXd s2 = s1 + g_r;
  const Eigen::ArrayXd e2 = s1.binaryExpr(g_r, two_sum_error);
  std::vector<double> exact(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) exact[static_cast<size_t>(i)] = std::isfinite(s2(i)) ? s2(i) + (e1(i) + e2(i)) : s2(i);
  return {{"d_hidden", exact}};
}

}  // namespace

OpInfo fanout_grad() {
  OpInfo op;
  op.name = "fanout_grad";
  op.doc = "gradient of the MoE input's three clones (router, dispatcher, shared expert): their sum, in a fixed order";
  op.inputs[Direction::kForward] = {{"g_router", "[T, H] gradient through the router's clone", false, true},
                                    {"g_dispatcher", "[T, H] gradient through the dispatcher's clone", false, true},
                                    {"g_shared", "[T, H] gradient through the shared expert's clone", false, true}};
  op.outputs[Direction::kForward] = {{"d_hidden", "[T, H] gradient of the layer's input", false, true}};
  op.contracts = {{"glm45", "bf(bf(g_dispatcher + g_shared) + g_router): each add in fp32, rounded to the dtype", kGlm45From},
                  {"dsv4", "bf(bf(g_dispatcher + g_router) + g_shared): the shared branch last", kDsv4From}};
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

}  // namespace bitparity::ops
