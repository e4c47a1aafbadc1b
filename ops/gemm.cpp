// gemm: out[M, N] = a[M, K] @ b[K, N], bf16 inputs, fp32 accumulation, one RNE rounding to bf16
// (spec OP-10; rule 13 for the tensor core's step). The expert MLP's fc1 and fc2 are this op.
#include "ops/gemm.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <Eigen/Dense>
#include <rapidcheck.h>

#include "core/error.h"
#include "core/gen.h"
#include "core/random.h"

namespace bitparity::ops {
namespace {

const char* const kFixedOrderFrom =
    "bitparity's tensor-core GEMM: mma.sync m16n8k16 bf16 -> fp32 on sm_90 (spec rule 13, verified on an H200 "
    "with 0 mismatches over 10.5 M outputs), one chunk of 16 products a step, chunks in ascending k, no split-K";

constexpr int64_t kModelH = 4096, kModelF = 1408;  // GLM-4.5's hidden size and expert width
// The row counts where bitparity's kernel changes its tiles (gpu/gemm_kernels.h).
constexpr int64_t kSmallTileMaxM = 32, kMediumTileMaxM = 256;
// A generated case's products (M * N * K) stay below kMinProducts + size * kProductsPerSize.
constexpr int64_t kMinProducts = 1 << 16, kProductsPerSize = 1 << 14;

// --- validate ----------------------------------------------------------------------------------

OutputMetas validate(const Case& c, const ContractInfo&) {
  const std::string who = "gemm";
  const Tensor* a = c.input("a");
  const Tensor* b = c.input("b");
  for (const auto& [name, t] : {std::pair{"a", a}, std::pair{"b", b}}) {
    if (!t) throw RejectError("shape", who + ": missing input " + name);
    if (t->dtype() != DType::kBF16)
      throw RejectError("dtype", who + ": " + name + " must be bf16; got " + std::string(dtype_name(t->dtype())));
    if (t->rank() != 2)
      throw RejectError("shape", who + ": " + name + " must have rank 2 (" + (std::string(name) == "a" ? "[M, K]" : "[K, N]") +
                                     "); got " + shape_string(t->shape()));
  }
  if (b->dim(0) != a->dim(1))
    throw RejectError("shape", who + ": b must have shape [K, N] with K = a's " + std::to_string(a->dim(1)) +
                                   " columns; got " + shape_string(b->shape()));
  return {{"out", {{a->dim(0), b->dim(1)}, DType::kBF16}}};
}

// --- generation ------------------------------------------------------------------------------

// How the elements are drawn. The structured families aim at the tensor core's fused step: its
// truncation below 2^(Emax - 25) (products spread over more than 24 binades), cancellation (products
// that sum to zero or nearly), fp32 subnormal and overflowing accumulators.
enum class Values { kMixed, kModerate, kSmallInt, kSpread, kCancelling, kTiny, kHuge };

// A bf16 value 2^e * (1 + m / 128), random sign, e uniform in [lo, hi] (e < -126: subnormal).
uint16_t bf16_with_exponent(uint64_t r, int lo, int hi) {
  const int e = lo + static_cast<int>((r >> 8) % static_cast<uint64_t>(hi - lo + 1));
  const uint16_t sign = (r & 1) ? 0x8000 : 0;
  const uint16_t mantissa = static_cast<uint16_t>((r >> 32) & 0x7F);
  if (e < -126) {  // subnormal: the bf16 pattern with biased exponent 0 and a nonzero significand
    const int shift = std::min(-126 - e, 6);
    return static_cast<uint16_t>(sign | std::max<uint16_t>(1, static_cast<uint16_t>((0x80 | mantissa) >> (shift + 1))));
  }
  return static_cast<uint16_t>(sign | (static_cast<uint16_t>(e + 127) << 7) | mantissa);
}

Tensor filled(Shape shape, uint64_t seed, int lo, int hi) { return bf16_with_exponents(std::move(shape), seed, lo, hi); }

// a's odd columns negate its even ones, and b's odd rows repeat its even ones: each pair of products
// cancels exactly, except in every third column of b, whose odd rows have their last bit flipped
// (each pair then leaves about 2^-8 of itself).
void make_cancelling(Tensor& a, Tensor& b) {
  const int64_t M = a.dim(0), K = a.dim(1), N = b.dim(1);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = 1; k < K; k += 2) a.set_bits(m * K + k, a.bits(m * K + k - 1) ^ 0x8000u);
  for (int64_t k = 1; k < K; k += 2)
    for (int64_t n = 0; n < N; ++n) b.set_bits(k * N + n, b.bits((k - 1) * N + n) ^ (n % 3 == 0 ? 1u : 0u));
}

rc::Gen<int64_t> inner_K() {
  return rc::gen::weightedOneOf<int64_t>({
      {1, rc::gen::just<int64_t>(0)},
      {3, rc::gen::inRange<int64_t>(1, 16)},
      {3, rc::gen::map(rc::gen::inRange<int64_t>(1, 9), [](int64_t c) { return kGemmChunk * c; })},
      {3, rc::gen::inRange<int64_t>(17, 160)},
  });
}

rc::Gen<int64_t> columns_N() {
  return rc::gen::weightedOneOf<int64_t>({
      {3, rc::gen::inRange<int64_t>(1, 17)},
      {3, rc::gen::map(rc::gen::inRange<int64_t>(1, 17), [](int64_t m) { return 8 * m; })},
      {1, rc::gen::inRange<int64_t>(129, 300)},
  });
}

rc::Gen<Case> generate(Direction) {
  return rc::gen::exec([] {
    Case c;
    c.op = "gemm";
    c.direction = Direction::kForward;
    // The row classes, and rows past the kernel's medium tiles (its large-tile path).
    int64_t M = *rc::gen::weightedOneOf<int64_t>(
        {{11, gen::rows()}, {1, rc::gen::inRange<int64_t>(kMediumTileMaxM + 1, kMediumTileMaxM + 150)}});
    int64_t K = *inner_K();
    int64_t N = *columns_N();
    const int64_t budget =
        kMinProducts + int64_t{*rc::gen::withSize([](int size) { return rc::gen::just(size); })} * kProductsPerSize;
    // Over the budget, many rows keep their number (N, then K give way); fewer rows give way.
    if (M > kMediumTileMaxM) {
      N = std::clamp<int64_t>(budget / (M * std::max<int64_t>(K, 1)), 1, N);
      K = std::min<int64_t>(K, std::max<int64_t>(1, budget / (M * N)));
    }
    if (M > 1 && M * N * std::max<int64_t>(K, 1) > budget) M = std::max<int64_t>(1, budget / (N * std::max<int64_t>(K, 1)));
    const Values values = *rc::gen::weightedElement<Values>({{3, Values::kMixed},
                                                             {3, Values::kModerate},
                                                             {1, Values::kSmallInt},
                                                             {3, Values::kSpread},
                                                             {2, Values::kCancelling},
                                                             {1, Values::kTiny},
                                                             {1, Values::kHuge}});
    const uint64_t seed = *rc::gen::arbitrary<uint64_t>();
    Tensor a, b;
    switch (values) {
      case Values::kMixed:
      case Values::kModerate:
      case Values::kSmallInt: {
        const gen::ValueFamily family = values == Values::kMixed      ? gen::ValueFamily::kMixed
                                        : values == Values::kModerate ? gen::ValueFamily::kModerate
                                                                      : gen::ValueFamily::kSmallInt;
        a = *gen::tensor(DType::kBF16, {M, K}, family);
        b = *gen::tensor(DType::kBF16, {K, N}, family);
        break;
      }
      case Values::kSpread:
        a = filled({M, K}, seed, -30, 30);
        b = filled({K, N}, seed ^ kSplitmixGamma, -30, 30);
        break;
      case Values::kCancelling:
        a = filled({M, K}, seed, -6, 6);
        b = filled({K, N}, seed ^ kSplitmixGamma, -6, 6);
        make_cancelling(a, b);
        break;
      case Values::kTiny:  // products below fp32's smallest normal, some below its subnormals
        a = filled({M, K}, seed, -133, -50);
        b = filled({K, N}, seed ^ kSplitmixGamma, -80, -20);
        break;
      case Values::kHuge:  // products and sums beyond fp32's largest finite value
        a = filled({M, K}, seed, 40, 127);
        b = filled({K, N}, seed ^ kSplitmixGamma, 20, 90);
        break;
    }
    c.inputs["a"] = std::move(a);
    c.inputs["b"] = std::move(b);
    return c;
  });
}

// --- classes ---------------------------------------------------------------------------------

// What the outputs' products do, from their exact values (a bf16 product is exact in fp64).
struct ProductShape {
  bool spread = false;        // a chunk of 16 whose nonzero finite products span more than 24 binades
  bool cancellation = false;  // an output whose products cancel below 2^-24 of the largest
  bool overflow = false;      // finite inputs, a product or sum beyond fp32's range
  bool subnormal_sum = false; // a nonzero sum below fp32's smallest normal
};

ProductShape product_shape(const Tensor& a, const Tensor& b) {
  ProductShape s;
  const int64_t M = a.dim(0), K = a.dim(1), N = b.dim(1);
  const double kFp32Max = std::ldexp(1.0, 128), kFp32MinNormal = std::ldexp(1.0, -126);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double sum = 0, largest = 0;
      bool finite = true;
      int chunk_lo = 1 << 20, chunk_hi = -(1 << 20);
      for (int64_t k = 0; k < K; ++k) {
        if (k % kGemmChunk == 0) chunk_lo = 1 << 20, chunk_hi = -(1 << 20);
        const double p = a.f64(m * K + k) * b.f64(k * N + n);
        if (!std::isfinite(a.f64(m * K + k)) || !std::isfinite(b.f64(k * N + n))) {
          finite = false;
          continue;
        }
        sum += p;
        largest = std::max(largest, std::fabs(p));
        if (p != 0) {
          const int e = std::ilogb(p);
          chunk_lo = std::min(chunk_lo, e);
          chunk_hi = std::max(chunk_hi, e);
          s.spread = s.spread || chunk_hi - chunk_lo > 24;
        }
      }
      if (!finite) continue;
      s.overflow = s.overflow || largest >= kFp32Max || std::fabs(sum) >= kFp32Max;
      s.cancellation = s.cancellation || (largest > 0 && std::fabs(sum) < std::ldexp(largest, -24));
      s.subnormal_sum = s.subnormal_sum || (sum != 0 && std::fabs(sum) < kFp32MinNormal);
    }
  return s;
}

std::string k_class(int64_t K) {
  if (K == 0) return "K=0";
  if (K < kGemmChunk) return "K=1..15";
  return K % kGemmChunk == 0 ? "K%16=0" : "K%16!=0";
}

// bitparity's kernel (gpu/gemm.cu) loads 16-byte vectors where every row of a and b starts on one
// (K and N multiples of 8), element by element otherwise; and takes one of three tile
// configurations by M (gpu/gemm_kernels.h: kGemmSmallMaxM, kGemmMediumMaxM).
std::string loads_path(int64_t K, int64_t N) { return K % 8 == 0 && N % 8 == 0 ? "loads=16B" : "loads=2B"; }
std::string tiles_path(int64_t M) {
  if (M <= kSmallTileMaxM) return "tiles=small";
  return M <= kMediumTileMaxM ? "tiles=medium" : "tiles=large";
}

CaseClasses classes(const Case& c) {
  CaseClasses k;
  const Tensor& a = *c.input("a");
  const Tensor& b = *c.input("b");
  const int64_t M = a.dim(0), K = a.dim(1), N = b.dim(1);
  const ProductShape s = product_shape(a, b);
  k.shape_class = k_class(K);
  std::vector<std::string> values;
  if (s.spread) values.push_back("spread>24");
  if (s.cancellation) values.push_back("cancellation");
  if (s.overflow) values.push_back("overflow");
  if (s.subnormal_sum) values.push_back("subnormal_sum");
  for (const char* name : {"a", "b"})
    for (const std::string& v : gen::value_tags(*c.input(name)))
      if (v == "nan" || v == "inf") values.push_back(std::string(name) + ":" + v);
  for (const std::string& v : values) k.value_class += (k.value_class.empty() ? "" : ",") + v;
  if (k.value_class.empty()) k.value_class = "plain";
  k.tags = {gen::rows_class(M), k_class(K), N % 8 == 0 ? "N%8=0" : "N%8!=0", loads_path(K, N)};
  if (M > 0) k.tags.push_back(tiles_path(M));
  for (const std::string& v : values) k.tags.push_back(v);
  for (const char* name : {"a", "b"})
    for (const std::string& v : gen::value_tags(*c.input(name))) k.tags.push_back(std::string(name) + ":" + v);
  return k;
}

std::vector<std::string> required_tags(Direction) {
  std::vector<std::string> tags = {"rows=0",   "rows=1..16", "rows=17",      "rows=32",   "rows=large",
                                   "K=0",      "K=1..15",    "K%16=0",       "K%16!=0",   "N%8=0",
                                   "N%8!=0",   "loads=16B",  "loads=2B",     "spread>24", "cancellation",
                                   "tiles=small", "tiles=medium", "tiles=large",
                                   "overflow", "subnormal_sum"};
  for (const char* name : {"a", "b"})
    for (const char* value : {"nan", "inf", "-0", "subnormal"}) tags.push_back(std::string(name) + ":" + value);
  return tags;
}

// --- error inputs --------------------------------------------------------------------------------

Case small_case() {
  Case c;
  c.op = "gemm";
  c.direction = Direction::kForward;
  c.inputs["a"] = Tensor(DType::kBF16, {2, 16});
  c.inputs["b"] = Tensor(DType::kBF16, {16, 8});
  return c;
}

std::vector<ErrorInput> error_inputs(Direction) {
  std::vector<ErrorInput> out;
  auto add = [&](std::string name, auto edit, std::string error_class, std::string field) {
    Case c = small_case();
    edit(c);
    out.push_back({std::move(name), std::move(c), std::move(error_class), std::move(field), {}});
  };
  add("a_fp32", [](Case& c) { c.inputs["a"] = Tensor(DType::kFP32, {2, 16}); }, "dtype", "a");
  add("b_fp16", [](Case& c) { c.inputs["b"] = Tensor(DType::kFP16, {16, 8}); }, "dtype", "b");
  add("a_rank1", [](Case& c) { c.inputs["a"] = Tensor(DType::kBF16, {32}); }, "shape", "a");
  add("b_rank3", [](Case& c) { c.inputs["b"] = Tensor(DType::kBF16, {16, 8, 1}); }, "shape", "b");
  add("inner_dims_differ", [](Case& c) { c.inputs["b"] = Tensor(DType::kBF16, {15, 8}); }, "shape", "b");
  add("b_missing", [](Case& c) { c.inputs.erase("b"); }, "shape", "b");
  return out;
}

// --- reference inputs ----------------------------------------------------------------------------

// Moderate values (|x| in [2^-6, 2^2), random sign and mantissa): products span 16 binades, as a
// layer's activations and weights do, with no special value to turn a whole row into NaN.
Tensor moderate(Shape shape, uint64_t seed) { return filled(std::move(shape), seed, -6, 1); }

std::vector<ReferenceInput> reference_inputs(Direction) {
  struct Dims {
    int64_t M, K, N;
    bool bench_only;
  };
  // GLM-4.5's fc1 ([M, H] @ [H, 2F]) and fc2 ([M, F] @ [F, H]) per expert, at the token counts the
  // padding rule meets (16, 32), a typical expert (256) and a large one (4096); fc2 at 64 tokens
  // for GPU tests (the CPU reference takes seconds there).
  const Dims kDims[] = {
      {64, kModelF, kModelH, false},       {16, kModelH, 2 * kModelF, true}, {32, kModelH, 2 * kModelF, true},
      {256, kModelH, 2 * kModelF, true},   {4096, kModelH, 2 * kModelF, true}, {256, kModelF, kModelH, true},
      {4096, kModelF, kModelH, true},
  };
  std::vector<ReferenceInput> out;
  for (const Dims& d : kDims)
    out.push_back({"M" + std::to_string(d.M) + "_K" + std::to_string(d.K) + "_N" + std::to_string(d.N), {},
                   [d] {
                     Case c;
                     c.op = "gemm";
                     c.direction = Direction::kForward;
                     c.inputs["a"] = moderate({d.M, d.K}, 31);
                     c.inputs["b"] = moderate({d.K, d.N}, 32);
                     return c;
                   },
                   d.bench_only, 0, 2.0 * static_cast<double>(d.M) * static_cast<double>(d.K) * static_cast<double>(d.N)});
  return out;
}

// --- shrinking -------------------------------------------------------------------------------

// a's rows [m0, m0 + nm) and the products k in [k0, k0 + nk) of columns [n0, n0 + nn).
Case window(const Case& c, int64_t m0, int64_t nm, int64_t k0, int64_t nk, int64_t n0, int64_t nn) {
  const Tensor& a = *c.input("a");
  const Tensor& b = *c.input("b");
  const int64_t K = a.dim(1), N = b.dim(1);
  Tensor wa(DType::kBF16, {nm, nk}), wb(DType::kBF16, {nk, nn});
  for (int64_t m = 0; m < nm; ++m)
    for (int64_t k = 0; k < nk; ++k) wa.set_bits(m * nk + k, a.bits((m0 + m) * K + k0 + k));
  for (int64_t k = 0; k < nk; ++k)
    for (int64_t n = 0; n < nn; ++n) wb.set_bits(k * nn + n, b.bits((k0 + k) * N + n0 + n));
  Case out = c;
  out.inputs["a"] = wa;
  out.inputs["b"] = wb;
  return out;
}

std::vector<Case> shrink_shape(const Case& c) {
  constexpr int64_t kMaxSingles = 8;
  const Tensor& a = *c.input("a");
  const int64_t M = a.dim(0), K = a.dim(1), N = c.input("b")->dim(1);
  std::vector<Case> out;
  if (M > 1) {
    for (int64_t m = 0; m < std::min(M, kMaxSingles); ++m) out.push_back(window(c, m, 1, 0, K, 0, N));
    out.push_back(window(c, 0, M / 2, 0, K, 0, N));
    out.push_back(window(c, M / 2, M - M / 2, 0, K, 0, N));
  }
  if (N > 1) {
    for (int64_t n = 0; n < std::min(N, kMaxSingles); ++n) out.push_back(window(c, 0, M, 0, K, n, 1));
    out.push_back(window(c, 0, M, 0, K, 0, N / 2));
    out.push_back(window(c, 0, M, 0, K, N / 2, N - N / 2));
  }
  if (K > kGemmChunk) {  // whole chunks first (each a step of its own), then halves
    for (int64_t k0 = 0; k0 < std::min(K, kMaxSingles * kGemmChunk); k0 += kGemmChunk)
      out.push_back(window(c, 0, M, k0, std::min(kGemmChunk, K - k0), 0, N));
  }
  if (K > 1) {
    out.push_back(window(c, 0, M, 0, K / 2, 0, N));
    out.push_back(window(c, 0, M, K / 2, K - K / 2, 0, N));
  }
  return out;
}

// --- oracle: the exact sum -------------------------------------------------------------------------

}  // namespace

Tensor bf16_with_exponents(Shape shape, uint64_t seed, int lo, int hi) {
  Tensor t(DType::kBF16, std::move(shape));
  uint64_t state = seed;
  for (int64_t i = 0; i < t.numel(); ++i) t.set_bits(i, bf16_with_exponent(splitmix64_next(state), lo, hi));
  return t;
}

// Every product of two bf16 values is exact in fp64, and the sum is within K fp64 ulps of the
// largest partial sum, far below a bf16 ulp of any output that does not cancel. Non-finite inputs
// give what IEEE fp64 gives.
namespace {

// Element i of a floating tensor as its exact double, the dtype decided once: a bf16 tensor (every
// gemm operand) is read straight from its bit patterns, not through Tensor::f64's per-element dispatch.
template <typename Visit>
void with_element_reader(const Tensor& t, Visit visit) {
  if (t.dtype() == DType::kBF16) {
    const auto* bits = reinterpret_cast<const uint16_t*>(t.data());
    visit([bits](int64_t i) { return static_cast<double>(f32_from_bf16(bits[i])); });
  } else {
    visit([&t](int64_t i) { return t.f64(i); });
  }
}

}  // namespace

std::vector<double> gemm_exact_sums(const Tensor& a, const Tensor& b) {
  const int64_t M = a.dim(0), K = a.dim(1), N = b.dim(1);
  // a's rows and b's columns as contiguous vectors. A product of a zero and a finite value is +-0,
  // and adding +-0 to the running sum changes nothing (the sum starts at +0 and is never -0), so
  // each output stops where one side's trailing zeros begin, if the other side holds no Inf or NaN
  // there: a padded expert's zero rows are not walked, nor the zero tail of K in a weight gradient.
  using RowMajor = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  RowMajor rows(M, K), columns(N, K);
  // Per vector: one past its last nonzero, and its last non-finite index (-1 if none).
  std::vector<int64_t> row_end(static_cast<size_t>(M), 0), row_last_special(static_cast<size_t>(M), -1);
  std::vector<int64_t> column_end(static_cast<size_t>(N), 0), column_last_special(static_cast<size_t>(N), -1);
  // Vector v's element k is t's element v * v_stride + k * k_stride (a's rows: K, 1; b's columns: 1, N).
  const auto fill = [K](const Tensor& t, int64_t v_stride, int64_t k_stride, RowMajor& vectors,
                        std::vector<int64_t>& end, std::vector<int64_t>& last_special) {
    with_element_reader(t, [&](auto element) {
      for (int64_t v = 0; v < vectors.rows(); ++v)
        for (int64_t k = 0; k < K; ++k) {
          const double x = element(v * v_stride + k * k_stride);
          vectors(v, k) = x;
          if (x != 0) end[static_cast<size_t>(v)] = k + 1;
          if (!std::isfinite(x)) last_special[static_cast<size_t>(v)] = k;
        }
    });
  };
  fill(a, K, 1, rows, row_end, row_last_special);
  fill(b, 1, N, columns, column_end, column_last_special);
  std::vector<double> out(static_cast<size_t>(M * N));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      const auto mi = static_cast<size_t>(m), ni = static_cast<size_t>(n);
      int64_t end = K;
      if (column_last_special[ni] < row_end[mi]) end = std::min(end, row_end[mi]);
      if (row_last_special[mi] < column_end[ni]) end = std::min(end, column_end[ni]);
      // Sequential, so that a blocked order does not turn an Inf * 0 into a different NaN pattern.
      const double* x = rows.row(m).data();
      const double* y = columns.row(n).data();
      double s = 0;
      for (int64_t k = 0; k < end; ++k) s += x[k] * y[k];
      out[static_cast<size_t>(m * N + n)] = s;
    }
  return out;
}

double gemm_element_bound(int64_t K, double S, double truth) {
  const double k = static_cast<double>(K);
  const double d = std::ldexp(1.0, -23) + 33 * std::ldexp(1.0, -25);
  const double gamma32 = std::expm1(k * std::log1p(d)) * (1 + 1e-12);  // (1 + d)^K - 1, rounded up generously
  const double u64 = std::ldexp(1.0, -53);
  const double gamma64 = k * u64 / (1 - k * u64);
  const double kFp32Overflow = std::ldexp(1.0, 128), kFlush = std::ldexp(1.0, -126);
  if (S * (1 + gamma32) >= kFp32Overflow) return INFINITY;  // a partial sum may overflow in some order
  if (!std::isfinite(truth)) return 0;                         // NaN or an infinity, whatever the order
  const double e64 = gamma64 * S * (1 + 1e-12);
  const double e32 = gamma32 * S + (k + 1) * kFlush;
  // Split-K partials stored in bf16 (CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE): each partial P_i rounded
  // once, sum |P_i| <= S + e32 whatever the split, each at most K 2^-134 below the subnormal spacing.
  // One product cannot be split: at K = 1 the only rounding is the final one.
  const double partials = K > 1 ? std::ldexp(S + e32, -8) + k * std::ldexp(1.0, -134) : 0.0;
  return (e32 + partials + std::ldexp(std::fabs(truth) + e32 + e64 + partials, -8) + std::ldexp(1.0, -134) + e64) *
         (1 + 1e-12);
}

namespace {

std::map<std::string, std::vector<double>> oracle(const Case& c) {
  return {{"out", gemm_exact_sums(*c.input("a"), *c.input("b"))}};
}

// --- the cublas contract's error bound -----------------------------------------------------------

const char* const kCublasFrom =
    "cuBLASLt (cublasLtMatmul: bf16 A, B and D, CUBLAS_COMPUTE_32F, fp32 alpha = 1 and beta = 0, the first "
    "algorithm of its heuristic, a 32 MiB workspace, no reduction-scheme mask), as PyTorch calls it by default "
    "(torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = True lets the heuristic store split-K "
    "partials in bf16); its order is NVIDIA's and unknown, so its outputs are judged against the true product "
    "within kCublasBoundDoc's bound";

const char* const kCublasBoundDoc =
    "fp32 accumulation in any order, split-K partials possibly stored in bf16: |out - truth| <= e32 + p + "
    "2^-8 (|truth| + e32 + e64 + p) + 2^-134 + e64, where "
    "S = sum_k |a_k b_k| (the finite products), e32 = ((1 + d)^K - 1) S + (K + 1) 2^-126 and "
    "d = 2^-23 + 33 * 2^-25 (a fused tensor-core step of up to 32 products and the accumulator, each term "
    "truncated below 2^-25 of the largest, the sum rounded toward zero; an fp32 add or fma is within it), every "
    "product passing through at most K steps (any summation tree of K products, split-K reductions included); "
    "(K + 1) 2^-126 allows each step and the epilogue to flush a subnormal; p = 2^-8 (S + e32) + K 2^-134 "
    "covers split-K partials each rounded once to bf16 before their fp32 reduction (the reduction scheme "
    "OUTPUT_TYPE, which PyTorch's default allows: the sum of the partials' magnitudes is at most S + e32, "
    "whatever the split; 0 at K = 1, which cannot be split); 2^-8 |x| + 2^-134 is the bf16 "
    "rounding (RNE) of the fp32 result; e64 = K 2^-53 S / (1 - K 2^-53) the fp64 truth's own error. An output "
    "whose S may overflow fp32 on the way (S (1 + d)^K >= 2^128) is unbounded; a NaN or infinite truth (NaN or "
    "infinite inputs) asks for the same";

// ContractInfo::error_bound of `cublas` (kCublasBoundDoc).
std::map<std::string, ElementBounds> cublas_bound(const Case& c) {
  const Tensor& a = *c.input("a");
  const Tensor& b = *c.input("b");
  const int64_t M = a.dim(0), K = a.dim(1), N = b.dim(1);
  ElementBounds out;
  out.truth = gemm_exact_sums(a, b);
  out.bound.resize(out.truth.size());
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double S = 0;
      for (int64_t j = 0; j < K; ++j) {
        const double p = a.f64(m * K + j) * b.f64(j * N + n);
        if (std::isfinite(p)) S += std::fabs(p);
      }
      const auto i = static_cast<size_t>(m * N + n);
      out.bound[i] = gemm_element_bound(K, S, out.truth[i]);
    }
  return {{"out", std::move(out)}};
}

}  // namespace

OpInfo gemm() {
  OpInfo op;
  op.name = "gemm";
  op.doc = "a [M, K] @ b [K, N] in bf16 with fp32 accumulation, rounded once to bf16 (the expert MLP's fc1 and fc2)";
  op.inputs[Direction::kForward] = {{"a", "[M, K] bf16: the tokens' rows", false, true},
                                    {"b", "[K, N] bf16: the weight", false, false}};
  op.outputs[Direction::kForward] = {{"out", "[M, N] bf16", false, true}};
  op.contracts = {{"fixed_order",
                   "K-chunks of 16 through the tensor core's fused MMA step (rule 13: exact products, truncation "
                   "below 2^(Emax-25), fp32 toward zero), chunks in ascending k from +0, then bf16 RNE",
                   kFixedOrderFrom},
                  {"cublas",
                   "cuBLASLt's bf16 GEMM with fp32 accumulation, in the order of the algorithm it picks (unknown, and "
                   "chosen anew for each shape): judged against the true product within a derived error bound",
                   kCublasFrom}};
  ContractInfo& cublas = op.contracts.back();
  cublas.error_bound = cublas_bound;
  cublas.bound_doc = kCublasBoundDoc;
  cublas.order_depends_on_shape = true;
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
