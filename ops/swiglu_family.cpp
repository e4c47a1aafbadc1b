#include "ops/swiglu_family.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <Eigen/Dense>
#include <rapidcheck.h>
#include <unsupported/Eigen/MPRealSupport>

#include "core/error.h"
#include "core/gen.h"

namespace bitparity::ops::swiglu_family {
namespace {

constexpr int64_t kGlmExpertF = 1408;    // GLM-4.5-Air expert FFN size
constexpr int64_t kMaxRowsForWideF = 32; // keeps generated cases small when F is wide
constexpr int64_t kMinElements = 4096, kElementsPerSize = 1024;  // elements of y by RapidCheck size

// --- generation ------------------------------------------------------------------------------

// Widths that reach the kernels' rarer paths (the tags of add_kernel_paths) at every RapidCheck
// size, where inRange's widths shrink with the size: 0 (rows without elements: d_scale is the
// empty sum), 8k + 4 for small and large k (a partial 8-element vector: single elements in the
// elementwise kernels, 4-element groups in Megatron's d_scale from F = 128), 256 (whole vectors
// from 128: d_scale's 16-bit accumulators) and 2048 (a multiple of 256 packets in bf16 and fp32:
// Paddle's backward ends a row without rotating its slots): all narrow but the last, which must
// be wide, so that the cases stay about as small as before.
rc::Gen<int64_t> kernel_path_F() {
  return rc::gen::weightedElement<int64_t>({{3, 0}, {1, 4}, {1, 12}, {3, 132}, {3, 260}, {4, 256}, {3, 2048}});
}

rc::Gen<int64_t> hidden_F() {
  return rc::gen::weightedOneOf<int64_t>({
      {2, rc::gen::inRange<int64_t>(1, 17)},                                                  // small
      {4, rc::gen::map(rc::gen::inRange<int64_t>(1, 33), [](int64_t k) { return 8 * k; })},  // vector multiples
      {1, rc::gen::just(kGlmExpertF)},
      {1, rc::gen::map(rc::gen::pair(rc::gen::inRange<int64_t>(1, 17), rc::gen::inRange<int64_t>(1, 8)),
                       [](const std::pair<int64_t, int64_t>& p) { return 8 * p.first + p.second; })},  // not a multiple
      {4, kernel_path_F()},
  });
}

rc::Gen<DType> activation_dtype() {
  return rc::gen::weightedElement<DType>({{6, DType::kBF16}, {2, DType::kFP32}, {1, DType::kFP16}});
}

rc::Gen<DType> scale_dtype() {
  return rc::gen::weightedElement<DType>({{4, DType::kFP32}, {3, DType::kBF16}, {1, DType::kFP16}});
}

void set_clamp(Case& c, std::optional<double> clamp) {
  if (clamp) c.attrs["clamp"] = *clamp;
}

rc::Gen<Case> generate_case(const std::string& op, Direction dir) {
  const bool scaled = op == "swiglu_scale";
  return rc::gen::exec([op, dir, scaled] {
    Case c;
    c.op = op;
    c.direction = dir;
    const DType act = *activation_dtype();
    const int64_t F = *hidden_F();
    int64_t rows = *gen::rows();
    if (F > 64 && rows > kMaxRowsForWideF) rows = kMaxRowsForWideF;
    // RapidCheck's size (0..100) bounds the elements of y, so small sizes give small cases.
    const int64_t max_elements = kMinElements + int64_t{*rc::gen::withSize([](int size) { return rc::gen::just(size); })} * kElementsPerSize;
    if (rows > 1 && rows * 2 * F > max_elements) rows = std::max<int64_t>(1, max_elements / (2 * F));
    set_clamp(c, *gen::clamp());
    c.inputs["y"] = *gen::tensor(act, {rows, 2 * F}, *gen::value_family());
    if (scaled) {
      const bool two_d = *rc::gen::arbitrary<bool>();
      const Shape shape = two_d ? Shape{rows, 1} : Shape{rows};
      c.inputs["scale"] = *gen::tensor(*scale_dtype(), shape, *gen::value_family());
    } else if (*rc::gen::weightedElement<bool>({{3, false}, {1, true}})) {
      c.inputs["bias"] = *gen::tensor(act, {2 * F}, *gen::value_family());
    }
    if (dir == Direction::kBackward) c.inputs["g"] = *gen::tensor(act, {rows, F}, *gen::value_family());
    return c;
  });
}

// --- shrinking -------------------------------------------------------------------------------

// The case restricted to rows [r0, r0 + nr) and columns [j0, j0 + nf) of F (in both halves of y).
Case slice(const Case& c, int64_t r0, int64_t nr, int64_t j0, int64_t nf) {
  const int64_t F = c.input("y")->dim(1) / 2;
  Case out = c;
  auto copy_rows_cols = [&](const Tensor& t, bool two_halves) {
    const int64_t width = t.rank() == 1 ? 1 : t.dim(1);
    const bool per_row = t.rank() >= 1;
    Shape shape = t.shape();
    shape[0] = nr;
    if (t.rank() == 2 && width != 1) shape[1] = two_halves ? 2 * nf : nf;
    Tensor s(t.dtype(), shape);
    const int64_t out_w = t.rank() == 2 ? shape[1] : 1;
    for (int64_t r = 0; r < nr && per_row; ++r)
      for (int64_t k = 0; k < out_w; ++k) {
        int64_t src_col = k;
        if (t.rank() == 2 && width != 1) src_col = two_halves ? (k < nf ? j0 + k : F + j0 + k - nf) : j0 + k;
        s.set_bits(r * out_w + k, t.bits((r0 + r) * width + src_col));
      }
    return s;
  };
  out.inputs["y"] = copy_rows_cols(*c.input("y"), true);
  if (const Tensor* g = c.input("g")) out.inputs["g"] = copy_rows_cols(*g, false);
  if (const Tensor* s = c.input("scale")) out.inputs["scale"] = copy_rows_cols(*s, false);
  if (const Tensor* b = c.input("bias")) {
    Tensor nb(b->dtype(), {2 * nf});
    for (int64_t k = 0; k < nf; ++k) {
      nb.set_bits(k, b->bits(j0 + k));
      nb.set_bits(nf + k, b->bits(F + j0 + k));
    }
    out.inputs["bias"] = nb;
  }
  return out;
}

// Candidates from most to least aggressive: drop the bias, a 2-D scale as 1-D (the simpler
// form, so that findings that do not depend on the rank meet under one signature), single rows,
// halves of the rows, then column windows: halves (rounded to the 8-element vector so that
// contracts with a vector width still accept them), then narrow windows.
std::vector<Case> shrink_family(const Case& c) {
  constexpr int64_t kMaxSingleRows = 8, kMaxWindows = 16, kVector = 8;
  const Tensor& y = *c.input("y");
  const int64_t rows = y.dim(0), F = y.dim(1) / 2;
  std::vector<Case> out;
  if (c.inputs.count("bias")) {
    Case nb = c;
    nb.inputs.erase("bias");
    out.push_back(nb);
  }
  if (const Tensor* s = c.input("scale"); s && s->rank() == 2) {
    Case flat = c;
    flat.inputs["scale"] = s->reshaped({rows});
    out.push_back(flat);
  }
  if (rows > 1) {
    for (int64_t r = 0; r < std::min(rows, kMaxSingleRows); ++r) out.push_back(slice(c, r, 1, 0, F));
    out.push_back(slice(c, 0, rows / 2, 0, F));
    out.push_back(slice(c, rows / 2, rows - rows / 2, 0, F));
  }
  auto add_windows = [&](int64_t width, int64_t max_windows) {
    if (width <= 0 || width >= F) return;
    for (int64_t w = 0; w < std::min((F + width - 1) / width, max_windows); ++w) {
      const int64_t start = std::min(w * width, F - width);
      out.push_back(slice(c, 0, rows, start, width));
    }
  };
  add_windows(F / 2, 3);
  add_windows(F / 2 / kVector * kVector, 3);
  for (int64_t width : {int64_t{1}, int64_t{2}, int64_t{4}, int64_t{8}, int64_t{16}}) add_windows(width, kMaxWindows);
  return out;
}

// --- kernel paths (KernelRecord::paths, gpu/common/kernel_record.h) ----------------------------
//
// The code paths of the family's CUDA kernels that a case's shape and dtypes select, as tags:
// whole 16-byte packets or single elements (gpu/swiglu.cu), the plan of Megatron's d_scale and the
// units of Paddle's backward (gpu/swiglu_scale.cu). Every launcher returns before any kernel on
// zero rows ("rows=0").

constexpr int64_t kVectorBytes = 16;  // the kernels' packets, and rule 7's vector loads
constexpr int64_t kWarpLanes = 32;

int64_t packet_elements(DType dt) { return kVectorBytes / static_cast<int64_t>(dtype_size(dt)); }

// Rule 7's plan of a row sum (the spec's rule 7; the backends keep their own, gpu/common/row_sum.h
// and reference/numerics.h): whether the lanes load vectors, how many lanes share a row, and
// whether the rule models the row at all (a row it does not is rejected, and nothing runs).
struct Rule7Lanes {
  bool modelled = false, vectorized = false;
  int64_t lanes = 1;
};
constexpr int64_t kRule7VectorizeFrom = 128, kRule7MaxThreads = 512;
constexpr int64_t kRule7MaxWidth = 8192, kRule7MaxWidth16 = 4096;

int64_t rule7_pow2(int64_t n) {  // P2(n): the largest power of two <= n, capped at 512
  int64_t p = 1;
  while (p * 2 <= n && p * 2 <= kRule7MaxThreads) p *= 2;
  return p;
}

Rule7Lanes rule7_lanes(int64_t width, int64_t rows, int64_t element_bytes) {
  Rule7Lanes r;
  const int64_t vector = kVectorBytes / element_bytes;
  r.vectorized = width >= kRule7VectorizeFrom;
  r.modelled = width >= 1 && width <= (element_bytes == 2 ? kRule7MaxWidth16 : kRule7MaxWidth) &&
               (!r.vectorized || width % vector == 0);
  if (!r.modelled) return r;
  const int64_t dim0 = r.vectorized ? width / vector : width;
  const int64_t first_lanes = std::min(rule7_pow2(dim0), kWarpLanes);
  const int64_t height = std::min(rule7_pow2(std::max<int64_t>(rows, 1)), kRule7MaxThreads / first_lanes);
  r.lanes = std::min(rule7_pow2(dim0), kRule7MaxThreads / height);
  return r;
}

// The elementwise kernels (swiglu, Megatron's weighted forward, Paddle's forward): a row of 16-byte
// packets, or single elements where F is not a multiple of the packet; F == 0 launches nothing.
void add_elementwise_paths(int64_t F, DType act, std::vector<std::string>& tags) {
  if (F == 0) tags.push_back("F=0");
  else tags.push_back(F % packet_elements(act) == 0 ? "F%packet=0" : "F%packet!=0");
}

// Megatron's weighted backward: d_scale is rule 7's sum of the products act(swiglu) * g.to(w), a
// 16-bit tensor where w has y's 16-bit dtype (8 accumulators a lane), else fp32 (4). A thread holds
// two lanes where fp32 sums meet 16-bit activations, so that it still reads one packet an
// iteration (each lane's 4-element group alone where F % 8 == 4); a row's threads meet in warp
// shuffles, or above a warp in one block's shared memory.
void add_d_scale_paths(int64_t rows, int64_t F, DType act, DType w, std::vector<std::string>& tags) {
  const bool act16 = dtype_size(act) == 2;
  const bool products16 = act16 && w == act;
  const Rule7Lanes plan = rule7_lanes(F, rows, products16 ? 2 : 4);
  if (!plan.modelled) return;
  const int64_t lanes_per_thread = plan.vectorized && products16 ? 1 : act16 ? 2 : 1;
  tags.push_back(plan.vectorized ? "d_scale:vectorized" : "d_scale:strided");
  if (plan.vectorized && products16) tags.push_back("d_scale:16-bit_products");
  if (plan.vectorized && lanes_per_thread == 2 && F % 8 == 4) tags.push_back("d_scale:F%8=4");
  tags.push_back(plan.lanes / lanes_per_thread > kWarpLanes ? "d_scale:block_tree" : "d_scale:warp_tree");
}

// PaddleFleet's backward (bf16 or fp32 rows of whole packets): a warp streams a row in units of 32
// packets (a lane's each), the stored kernel's 256 threads being 8 slots a lane that rotate once a
// unit: a row of a multiple of 8 units ends with no rotation back, and a last unit of fewer than 32
// packets leaves lanes idle.
constexpr int64_t kPaddleSlots = 8;
void add_paddle_backward_paths(int64_t F, DType act, std::vector<std::string>& tags) {
  const int64_t packet = paddle_packet_elements(act);
  if ((act != DType::kBF16 && act != DType::kFP32) || F == 0 || F % packet != 0) return;
  const int64_t packets = F / packet, units = (packets + kWarpLanes - 1) / kWarpLanes;
  tags.push_back(units % kPaddleSlots == 0 ? "units%8=0" : "units%8!=0");
  if (packets % kWarpLanes != 0) tags.push_back("packets%32!=0");
}

void add_kernel_paths(const Case& c, std::vector<std::string>& tags) {
  const Tensor& y = *c.input("y");
  if (y.rank() != 2 || y.dim(0) == 0) return;
  const int64_t rows = y.dim(0), F = y.dim(1) / 2;
  add_elementwise_paths(F, y.dtype(), tags);
  const Tensor* scale = c.input("scale");
  if (c.direction != Direction::kBackward || !scale || F == 0) return;
  add_d_scale_paths(rows, F, y.dtype(), scale->dtype(), tags);
  add_paddle_backward_paths(F, y.dtype(), tags);
}

// --- classes ---------------------------------------------------------------------------------

std::string coarse_clamp_class(const Case& c) {
  const std::string cls = gen::clamp_class(c.float_attr("clamp"));
  if (cls == "clamp=0" || cls == "clamp=-0" || cls == "clamp=negative") return "clamp<=0";
  if (cls == "clamp=tiny" || cls == "clamp=normal") return "clamp>0";
  return cls;
}

CaseClasses family_classes(const Case& c) {
  CaseClasses k;
  const Tensor& y = *c.input("y");
  // The signature keeps what separates distinct behaviours: the scale's rank (the d_scale shape
  // rule), the bias variant, the clamp's class and whether y holds a NaN (Paddle turns a NaN gate
  // into the clamp value). Finer tags (Inf, -0, subnormals) stay in `tags`: they would split one
  // divergence into many entries.
  if (const Tensor* s = c.input("scale")) k.shape_class = s->rank() == 1 ? "scale=1d" : "scale=2d";
  else k.shape_class = c.input("bias") ? "bias" : "no_bias";
  bool nan = false;
  for (const std::string& v : gen::value_tags(y)) nan = nan || v == "nan";
  k.value_class = coarse_clamp_class(c) + (nan ? ",nan" : "");
  k.tags = {gen::rows_class(y.dim(0)), gen::clamp_class(c.float_attr("clamp")),
            std::string("y=") + std::string(dtype_name(y.dtype()))};
  const int64_t F = y.dim(1) / 2;
  k.tags.push_back(F == kGlmExpertF ? "F=1408" : F % 8 != 0 ? "F%8!=0" : F <= 16 ? "F=small" : "F=vector-multiple");
  if (!k.shape_class.empty()) k.tags.push_back(k.shape_class);
  add_kernel_paths(c, k.tags);
  for (const auto& [name, t] : c.inputs)
    for (const std::string& v : gen::value_tags(t)) k.tags.push_back(name + ":" + v);
  return k;
}


// --- input checks (every backend's run goes through these, via OpInfo::validate) --------------

void check_activation_dtype(const std::string& who, const Tensor& t, const std::string& name) {
  if (t.dtype() != DType::kBF16 && t.dtype() != DType::kFP16 && t.dtype() != DType::kFP32)
    throw RejectError("dtype", who + ": " + name + " must be bf16, fp16 or fp32; got " + std::string(dtype_name(t.dtype())));
}

void check_bias(const Tensor& y, const Tensor* bias) {
  if (!bias) return;
  if (bias->rank() != 1 || bias->dim(0) != y.dim(1))
    throw RejectError("shape", "swiglu: bias must have shape [" + std::to_string(y.dim(1)) + "]; got " +
                                   shape_string(bias->shape()));
  if (bias->dtype() != y.dtype()) throw RejectError("dtype", "swiglu: bias must have y's dtype");
}

// scale is [rows] or [rows, 1]; d_scale takes the same shape (the rank rule of the #1078 review).
void check_scale_shape(const std::string& who, const Tensor& scale, int64_t rows) {
  const bool ok = (scale.rank() == 1 && scale.dim(0) == rows) ||
                  (scale.rank() == 2 && scale.dim(0) == rows && scale.dim(1) == 1);
  if (!ok)
    throw RejectError("shape", who + ": scale must have shape [rows] or [rows, 1] with rows = " +
                                   std::to_string(rows) + "; got " + shape_string(scale.shape()));
}

void check_grad(const std::string& who, const Tensor& g, int64_t rows, int64_t F, DType act) {
  if (g.shape() != Shape{rows, F})
    throw RejectError("shape", who + ": g must have shape " + shape_string({rows, F}) + "; got " +
                                   shape_string(g.shape()));
  if (g.dtype() != act) throw RejectError("dtype", who + ": g must have y's dtype");
}

// The checks of PaddleFleet's kernel host code, in its order (dtypes, vector width, the clamp
// kernel's own check of clamp_value); the clamp is active when present and > 0 (the wrapper).
void check_paddle(const Case& c) {
  const bool bwd = c.direction == Direction::kBackward;
  const std::string who = bwd ? "fused_swiglu_scale_bwd" : "fused_swiglu_scale";
  const Tensor& y = *c.input("y");
  const Tensor& scale = *c.input("scale");
  const auto [rows, F] = split_y(who, y);
  check_scale_shape(who, scale, rows);
  if (bwd) check_grad(who, *c.input("g"), rows, F, y.dtype());
  if (y.dtype() != DType::kBF16 && y.dtype() != DType::kFP32)
    throw RejectError("dtype", who + ": X must be bfloat16 or float32; got " + std::string(dtype_name(y.dtype())));
  if (scale.dtype() != DType::kBF16 && scale.dtype() != DType::kFP32)
    throw RejectError("dtype", who + ": Scale must be bfloat16 or float32; got " + std::string(dtype_name(scale.dtype())));
  if (y.dtype() == DType::kFP32 && scale.dtype() != DType::kFP32)
    throw RejectError("dtype", who + ": float32 X requires float32 Scale");
  const int64_t vec = paddle_packet_elements(y.dtype());
  if (F % vec != 0)
    throw RejectError("shape", who + ": hidden_size must be divisible by the vector width (" + std::to_string(vec) +
                                   " for " + std::string(dtype_name(y.dtype())) + "); got " + std::to_string(F));
  const std::optional<double> clamp = c.float_attr("clamp");
  if (clamp && *clamp > 0 && !std::isfinite(*clamp))
    throw RejectError("attr", who + "_clamp: clamp_value must be finite and greater than zero");
}


// --- oracle: the exact values under Megatron's semantics (clamp when > 0, NaN propagates) ------

constexpr int kOracleBits = 160;  // MPFR precision of the d_scale row sums

using Matrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Column = Eigen::Matrix<double, Eigen::Dynamic, 1>;
using MpRow = Eigen::Matrix<mpfr::mpreal, 1, Eigen::Dynamic>;

Matrix to_matrix(const Tensor& t, int64_t rows, int64_t cols) {
  Matrix m(rows, cols);
  for (int64_t i = 0; i < rows * cols; ++i) m.data()[i] = t.f64(i);
  return m;
}

// Row scale as a column (ones for swiglu).
Column row_scale(const Tensor* scale, int64_t rows) {
  Column s = Column::Ones(rows);
  if (scale)
    for (int64_t r = 0; r < rows; ++r) s(r) = scale->f64(r);
  return s;
}

}  // namespace

Split split_y(const std::string& who, const Tensor& y) {
  if (y.rank() != 2 || y.dim(1) % 2 != 0)
    throw RejectError("shape", who + ": y must have shape [rows, 2 * F]; got " + shape_string(y.shape()));
  return {y.dim(0), y.dim(1) / 2};
}

bool is_paddle_contract(const ContractInfo& contract) { return contract.name.rfind("paddle_", 0) == 0; }
bool is_shipped_clamp_shape(const ContractInfo& contract) { return contract.name == "paddle_fused_shipped"; }

OutputMetas validate_swiglu(const Case& c, const ContractInfo&) {
  const Tensor& y = *c.input("y");
  check_activation_dtype("swiglu", y, "y");
  const auto [rows, F] = split_y("swiglu", y);
  check_bias(y, c.input("bias"));
  if (c.direction == Direction::kForward) return {{"out", {{rows, F}, y.dtype()}}};
  check_grad("swiglu", *c.input("g"), rows, F, y.dtype());
  return {{"d_y", {{rows, 2 * F}, y.dtype()}}};
}

OutputMetas validate_swiglu_scale(const Case& c, const ContractInfo& contract) {
  const std::string who = "swiglu_scale";
  const Tensor& y = *c.input("y");
  const Tensor& scale = *c.input("scale");
  if (is_paddle_contract(contract)) {
    check_paddle(c);
  } else {
    check_activation_dtype(who, y, "y");
    check_activation_dtype(who, scale, "scale");
    check_scale_shape(who, scale, split_y(who, y).rows);
  }
  const auto [rows, F] = split_y(who, y);
  if (c.direction == Direction::kForward) return {{"out", {{rows, F}, y.dtype()}}};
  check_grad(who, *c.input("g"), rows, F, y.dtype());
  // The stored PaddleFleet clamp kernels return [rows, 1] whatever scale's rank (spec OP-6,
  // FusedGradClampInferShape); everything else keeps scale's shape.
  const std::optional<double> clamp = c.float_attr("clamp");
  const bool paddle_clamp_kernel = clamp && *clamp > 0;
  const Shape d_scale = is_shipped_clamp_shape(contract) && paddle_clamp_kernel ? Shape{rows, 1} : scale.shape();
  return {{"d_y", {{rows, 2 * F}, y.dtype()}}, {"d_scale", {d_scale, scale.dtype()}}};
}

// style.md: show that the edge classes (zero rows, M < 17, 1-D scale, clamp <= 0, NaN/Inf/-0/
// subnormal values) are actually generated; the hidden sizes (small, GLM-4.5-Air's 1408, not a
// multiple of the 16-byte vector) and the scale ranks too.
namespace {

std::vector<std::string> required_tags(const std::string& op, Direction direction) {
  std::vector<std::string> tags = {"rows=0", "rows=1..16", "rows=17", "rows=32", "rows=large",
                                   "clamp=none", "clamp=0", "clamp=-0", "clamp=negative", "clamp=tiny",
                                   "clamp=normal", "clamp=+inf", "clamp=nan", "F=small", "F=1408", "F%8!=0"};
  // The CUDA kernels' paths (KernelRecord::paths): dtypes, packets or elements, and the backward's.
  tags.insert(tags.end(), {"y=bf16", "y=fp32", "y=fp16", "F=0", "F%packet=0", "F%packet!=0"});
  std::vector<std::string> inputs = {"y"};
  if (op == "swiglu_scale") {
    inputs.push_back("scale");
    tags.insert(tags.end(), {"scale=1d", "scale=2d"});
    if (direction == Direction::kBackward)
      tags.insert(tags.end(), {"d_scale:vectorized", "d_scale:strided", "d_scale:16-bit_products", "d_scale:F%8=4",
                               "d_scale:block_tree", "d_scale:warp_tree", "units%8=0", "units%8!=0", "packets%32!=0"});
  } else {
    tags.insert(tags.end(), {"bias", "no_bias"});
  }
  if (direction == Direction::kBackward) inputs.push_back("g");
  for (const std::string& input : inputs)
    for (const char* value : {"nan", "inf", "-0", "subnormal", "bf16_tie"}) tags.push_back(input + ":" + value);
  return tags;
}

// --- error inputs --------------------------------------------------------------------------------

Case small_case(const std::string& op, Direction direction, int64_t rows, int64_t F, DType act = DType::kBF16) {
  Case c;
  c.op = op;
  c.direction = direction;
  c.inputs["y"] = Tensor(act, {rows, 2 * F});
  if (op == "swiglu_scale") c.inputs["scale"] = Tensor(DType::kFP32, {rows});
  if (direction == Direction::kBackward) c.inputs["g"] = Tensor(act, {rows, F});
  return c;
}

std::vector<ErrorInput> error_inputs(const std::string& op, Direction direction) {
  constexpr int64_t kRows = 2, kF = 8;
  const bool scaled = op == "swiglu_scale";
  const std::vector<std::string> paddle = {"paddle_fused", "paddle_fused_shipped"};
  const std::vector<std::string> megatron =
      scaled ? std::vector<std::string>{"megatron_eager", "megatron_unfused"} : std::vector<std::string>{};
  std::vector<ErrorInput> out;
  auto add = [&](std::string name, auto edit, std::string error_class, std::string field,
                 std::vector<std::string> contracts = {}) {
    Case c = small_case(op, direction, kRows, kF);
    edit(c);
    out.push_back({std::move(name), std::move(c), std::move(error_class), std::move(field), std::move(contracts)});
  };
  add("y_rank1", [](Case& c) { c.inputs["y"] = Tensor(DType::kBF16, {2 * kF}); }, "shape", "y");
  add("y_odd_width", [](Case& c) { c.inputs["y"] = Tensor(DType::kBF16, {kRows, 2 * kF + 1}); }, "shape", "y");
  // y and g of one dtype that no contract accepts (g follows y, so that the dtype rule, not g's
  // own check, is what rejects it).
  auto int32_y = [](Case& c) {
    c.inputs["y"] = Tensor(DType::kI32, {kRows, 2 * kF});
    if (c.inputs.count("g")) c.inputs["g"] = Tensor(DType::kI32, {kRows, kF});
  };
  if (scaled) {
    add("y_int32_paddle", int32_y, "dtype", "X", paddle);
    add("y_int32_megatron", int32_y, "dtype", "y", megatron);
  } else {
    add("y_int32", int32_y, "dtype", "y");
  }
  if (scaled) {
    add("scale_rows_by_2", [](Case& c) { c.inputs["scale"] = Tensor(DType::kFP32, {kRows, 2}); }, "shape", "scale");
    add("scale_rank3", [](Case& c) { c.inputs["scale"] = Tensor(DType::kFP32, {kRows, 1, 1}); }, "shape", "scale");
    add("scale_wrong_rows", [](Case& c) { c.inputs["scale"] = Tensor(DType::kFP32, {kRows + 1}); }, "shape", "scale");
    add("scale_int64_megatron", [](Case& c) { c.inputs["scale"] = Tensor(DType::kI64, {kRows}); }, "dtype", "scale",
        megatron);
    add("scale_int64_paddle", [](Case& c) { c.inputs["scale"] = Tensor(DType::kI64, {kRows}); }, "dtype", "Scale",
        paddle);
    add("y_fp16_paddle", [](Case& c) { c.inputs["y"] = Tensor(DType::kFP16, {kRows, 2 * kF}); }, "dtype", "X",
        paddle);
    if (direction == Direction::kBackward) out.back().c.inputs["g"] = Tensor(DType::kFP16, {kRows, kF});
    add("fp32_y_bf16_scale_paddle", [](Case& c) {
          c.inputs["y"] = Tensor(DType::kFP32, {kRows, 2 * kF});
          c.inputs["scale"] = Tensor(DType::kBF16, {kRows});
        }, "dtype", "Scale", paddle);
    if (direction == Direction::kBackward) out.back().c.inputs["g"] = Tensor(DType::kFP32, {kRows, kF});
    add("F_not_a_packet_multiple_paddle", [](Case& c) {
          c.inputs["y"] = Tensor(DType::kBF16, {kRows, 2 * 12});
          if (c.inputs.count("g")) c.inputs["g"] = Tensor(DType::kBF16, {kRows, 12});
        }, "shape", "hidden_size", paddle);
    add("clamp_inf_paddle", [](Case& c) { c.attrs["clamp"] = INFINITY; }, "attr", "clamp_value", paddle);
  } else {
    add("bias_wrong_width", [](Case& c) { c.inputs["bias"] = Tensor(DType::kBF16, {kF}); }, "shape", "bias");
    add("bias_other_dtype", [](Case& c) { c.inputs["bias"] = Tensor(DType::kFP32, {2 * kF}); }, "dtype", "bias");
  }
  if (direction == Direction::kBackward) {
    add("g_wrong_shape", [](Case& c) { c.inputs["g"] = Tensor(DType::kBF16, {kRows, kF + 1}); }, "shape", "g");
    add("g_other_dtype", [](Case& c) { c.inputs["g"] = Tensor(DType::kFP32, {kRows, kF}); }, "dtype", "g");
  }
  return out;
}

// --- reference inputs ------------------------------------------------------------------------------

constexpr int64_t kReferenceRows[] = {16384, 65536};
constexpr int64_t kReferenceF[] = {kGlmExpertF, 4096};  // GLM-4.5-Air's expert F; a wide expert
constexpr double kReferenceClamp = 7.0;
enum : uint64_t { kSeedY = 1, kSeedScale = 2, kSeedG = 3 };

// bf16 activations, an fp32 scale [rows] (the fp64-denominator probs of the aligned router).
Case reference_case(const std::string& op, Direction direction, int64_t rows, int64_t F, bool clamp) {
  Case c;
  c.op = op;
  c.direction = direction;
  if (clamp) c.attrs["clamp"] = kReferenceClamp;
  c.inputs["y"] = gen::large_tensor(DType::kBF16, {rows, 2 * F}, kSeedY);
  if (op == "swiglu_scale") c.inputs["scale"] = gen::large_tensor(DType::kFP32, {rows}, kSeedScale);
  if (direction == Direction::kBackward) c.inputs["g"] = gen::large_tensor(DType::kBF16, {rows, F}, kSeedG);
  return c;
}

// Every benchmark shape without a clamp for the contracts whose kernels differ (Megatron's and
// PaddleFleet's); the GLM-4.5-Air shape with a clamp of 7 for the contracts that clamp it.
std::vector<ReferenceInput> reference_inputs(const std::string& op, const std::vector<ContractInfo>& contracts,
                                             Direction direction) {
  std::vector<std::string> plain, clamped;
  for (const ContractInfo& contract : contracts)
    (contract.name == "megatron_eager" || contract.name == "paddle_fused" ? plain : clamped).push_back(contract.name);
  std::vector<ReferenceInput> out;
  const std::string name = op;
  for (const int64_t rows : kReferenceRows)
    for (const int64_t F : kReferenceF) {
      const bool glm = rows == kReferenceRows[0] && F == kReferenceF[0];
      out.push_back({"rows" + std::to_string(rows) + "_F" + std::to_string(F), plain,
                     [=] { return reference_case(name, direction, rows, F, false); }, !glm});
    }
  out.push_back({"rows16384_F1408_clamp7", clamped,
                 [=] { return reference_case(name, direction, kReferenceRows[0], kReferenceF[0], true); }, false});
  return out;
}

// --- oracle ------------------------------------------------------------------------------------------

std::map<std::string, std::vector<double>> oracle(const Case& c) {
  const Tensor& y = *c.input("y");
  const int64_t rows = y.dim(0), F = y.dim(1) / 2;
  const Tensor* bias = c.input("bias");
  std::optional<double> clamp = c.float_attr("clamp");
  if (clamp && !(*clamp > 0)) clamp.reset();  // Megatron's fused gate
  Matrix Y = to_matrix(y, rows, 2 * F);
  if (bias) Y.rowwise() += to_matrix(*bias, 1, 2 * F).row(0);
  Matrix A = Y.leftCols(F), B = Y.rightCols(F);
  Matrix mask_a = Matrix::Ones(rows, F), mask_b = Matrix::Ones(rows, F);
  if (clamp) {
    const double cv = *clamp;
    mask_a = A.unaryExpr([cv](double a) { return a <= cv ? 1.0 : 0.0; });
    mask_b = B.unaryExpr([cv](double b) { return b >= -cv && b <= cv ? 1.0 : 0.0; });
    A = A.unaryExpr([cv](double a) { return std::isnan(a) ? a : std::min(a, cv); });
    B = B.unaryExpr([cv](double b) { return std::isnan(b) ? b : std::clamp(b, -cv, cv); });
  }
  const Matrix sig = A.unaryExpr([](double a) { return 1.0 / (1.0 + std::exp(-a)); });
  const Matrix silu = A.cwiseProduct(sig);
  const Column s = row_scale(c.input("scale"), rows);
  std::map<std::string, std::vector<double>> truth;
  auto flat = [](const Matrix& m) { return std::vector<double>(m.data(), m.data() + m.size()); };
  if (c.direction == Direction::kForward) {
    truth["out"] = flat(s.asDiagonal() * silu.cwiseProduct(B));
    return truth;
  }
  const Matrix G = to_matrix(*c.input("g"), rows, F);
  const Matrix Gs = s.asDiagonal() * G;
  const Matrix bracket = (A.array() * (1.0 - sig.array()) + 1.0).matrix();
  Matrix d_y(rows, 2 * F);
  d_y.leftCols(F) = Gs.cwiseProduct(sig).cwiseProduct(bracket).cwiseProduct(B).cwiseProduct(mask_a);
  d_y.rightCols(F) = Gs.cwiseProduct(A).cwiseProduct(sig).cwiseProduct(mask_b);
  truth["d_y"] = flat(d_y);
  if (c.input("scale")) {
    // d_scale[r] = sum_j silu(a) * b * g, each term's products exact to kOracleBits bits.
    auto& d_scale = truth["d_scale"];
    for (int64_t r = 0; r < rows; ++r) {
      MpRow terms(F);
      for (int64_t j = 0; j < F; ++j)
        terms(j) = mpfr::mpreal(silu(r, j), kOracleBits) * B(r, j) * G(r, j);
      d_scale.push_back(F == 0 ? 0.0 : terms.sum().toDouble());
    }
  }
  return truth;
}

}  // namespace

void add_family_generators(OpInfo& op) {
  const std::string name = op.name;
  op.generate = [name](Direction d) { return generate_case(name, d); };
  op.required_tags = [name](Direction d) { return required_tags(name, d); };
  op.classes = family_classes;
  op.error_inputs = [name](Direction d) { return error_inputs(name, d); };
  op.reference_inputs = [name, contracts = op.contracts](Direction d) { return reference_inputs(name, contracts, d); };
  op.shrink_shape = shrink_family;
  op.oracle = oracle;
}

}  // namespace bitparity::ops::swiglu_family
