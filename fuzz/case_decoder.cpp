#include "fuzz/case_decoder.h"

#include <array>
#include <cmath>
#include <limits>

#include <rapidcheck/Random.h>

namespace bitparity::fuzz {
namespace {

// Mode byte values below this use the op's generator; the rest decode raw. A quarter generator
// keeps deep (valid) paths covered while raw mode covers the reject paths.
constexpr uint64_t kGeneratorModeBelow = 64;
// Generator sizes stay small: a fuzzer lives on executions per second, and the edge classes
// (zero rows, small widths, special values) already show at small sizes.
constexpr int kMaxGenSize = 20;
constexpr int64_t kMinIntAttr = -4, kMaxIntAttr = 16;
constexpr size_t kDimPoolSize = 3;

// bf16 three times: it is the dtype every contract accepts, so most inputs should carry it.
constexpr std::array kDTypes = {DType::kBF16, DType::kBF16, DType::kBF16, DType::kFP32,    DType::kFP16,   DType::kFP64,
                                DType::kI32,  DType::kI64,  DType::kBool, DType::kFP8E4M3, DType::kFP8E5M2};

// Attribute values where contracts branch (clamp <= 0, NaN, Inf, subnormal, overflow).
const std::array<double, 14> kInterestingFloats = {0.0,
                                                   -0.0,
                                                   1.0,
                                                   -1.0,
                                                   7.0,
                                                   -7.0,
                                                   0.5,
                                                   1e-40,
                                                   65504.0,
                                                   3.4028234663852886e38,
                                                   INFINITY,
                                                   -INFINITY,
                                                   std::numeric_limits<double>::quiet_NaN(),
                                                   1e300};
const std::array<const char*, 3> kStrings = {"", "none", "mean"};

AttrValue decode_attr(const AttrSpec& spec, ByteReader& bytes) {
  switch (spec.type) {
    case AttrType::kFloat: {
      const size_t choice = bytes.take_index(kInterestingFloats.size() + 1);
      if (choice < kInterestingFloats.size()) return kInterestingFloats[choice];
      return f64_from_bits(bytes.take_front(8));
    }
    case AttrType::kInt:
      return bytes.take_in_range(kMinIntAttr, kMaxIntAttr);
    case AttrType::kBool:
      return bytes.take_bool();
    case AttrType::kString:
      return std::string(kStrings[bytes.take_index(kStrings.size())]);
  }
  return false;
}

// A dim drawn from the pool (as is, or doubled: SwiGLU inputs are twice their output width),
// or 1, or any small value.
int64_t decode_dim(const std::array<int64_t, kDimPoolSize>& pool, ByteReader& bytes) {
  const size_t choice = bytes.take_index(2 * kDimPoolSize + 2);
  if (choice < kDimPoolSize) return pool[choice];
  if (choice < 2 * kDimPoolSize) return 2 * pool[choice - kDimPoolSize];
  if (choice == 2 * kDimPoolSize) return 1;
  return bytes.take_in_range(0, kMaxFuzzDim);
}

uint64_t payload_bits(DType dtype, ByteReader& bytes) {
  const uint64_t bits = bytes.take_back(dtype_size(dtype));
  return dtype == DType::kBool ? bits & 1 : bits;
}

Tensor decode_tensor(const std::array<int64_t, kDimPoolSize>& pool, ByteReader& bytes) {
  const DType dtype = kDTypes[bytes.take_index(kDTypes.size())];
  const int64_t rank = bytes.take_in_range(0, kMaxFuzzRank);
  Shape shape;
  int64_t numel = 1;
  for (int64_t d = 0; d < rank; ++d) {
    int64_t dim = decode_dim(pool, bytes);
    if (numel * dim > kMaxFuzzElements) dim = 1;
    numel *= dim;
    shape.push_back(dim);
  }
  Tensor t(dtype, shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.set_bits(i, payload_bits(dtype, bytes));
  return t;
}

std::vector<Direction> directions_of(const OpInfo& op) {
  std::vector<Direction> out;
  for (const auto& [direction, specs] : op.inputs) out.push_back(direction);
  return out;
}

Case decode_raw(const OpInfo& op, Direction direction, ByteReader& bytes) {
  Case c;
  c.op = op.name;
  c.direction = direction;
  for (const AttrSpec& spec : op.attrs)
    if (bytes.take_bool()) c.attrs[spec.name] = decode_attr(spec, bytes);
  std::array<int64_t, kDimPoolSize> pool{};
  for (int64_t& dim : pool) dim = bytes.take_in_range(0, kMaxFuzzDim / 2);
  for (const TensorSpec& spec : op.inputs.at(direction))
    if (!spec.optional || bytes.take_bool()) c.inputs[spec.name] = decode_tensor(pool, bytes);
  return c;
}

// The generator's case with its elements overwritten by payload bits while payload lasts.
std::optional<Case> decode_generated(const OpInfo& op, Direction direction, ByteReader& bytes) {
  const uint64_t seed = bytes.take_front(8);
  const int size = static_cast<int>(bytes.take_in_range(0, kMaxGenSize));
  Case c;
  try {
    c = op.generate(direction)(rc::Random(seed), size).value();
  } catch (const std::exception&) {
    return std::nullopt;  // a generator that gives up (suchThat) is not the fuzzer's finding
  }
  for (const auto& [name, t] : c.inputs)
    if (t.numel() > kMaxFuzzElements) return std::nullopt;
  for (auto& [name, t] : c.inputs)
    for (int64_t i = 0; i < t.numel() && bytes.remaining() >= static_cast<size_t>(dtype_size(t.dtype())); ++i)
      t.set_bits(i, payload_bits(t.dtype(), bytes));
  return c;
}

}  // namespace

std::optional<Case> decode_case(const Registry& registry, ByteReader& bytes) {
  std::vector<const OpInfo*> ops;
  for (const OpInfo& op : registry.ops())
    if (!op.inputs.empty()) ops.push_back(&op);
  if (ops.empty()) return std::nullopt;
  const bool use_generator = bytes.take_front(1) < kGeneratorModeBelow;
  const OpInfo& op = *ops[bytes.take_index(ops.size())];
  const std::vector<Direction> directions = directions_of(op);
  const Direction direction = directions[bytes.take_index(directions.size())];
  if (use_generator && op.generate)
    if (std::optional<Case> c = decode_generated(op, direction, bytes)) return c;
  return decode_raw(op, direction, bytes);
}

}  // namespace bitparity::fuzz
