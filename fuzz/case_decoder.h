// Fuzzer bytes -> a Case of some registered op, through the registry alone (no op is named).
//
// The first byte picks the mode. Generator mode seeds the op's own RapidCheck generator (valid
// shapes, every edge class) and then overlays raw payload bits on its elements; a generated case
// larger than kMaxFuzzElements per tensor falls back to raw mode. Raw mode decodes
// everything: op, direction, attributes (interesting values or raw bits), dtypes, shapes drawn
// from a small pool of dims so that inputs often agree, and elements as raw bit patterns, so NaN,
// +-Inf, -0 and subnormals occur. Decoding never fails; a short input decodes to a small case.
#pragma once

#include <optional>

#include "core/registry.h"
#include "fuzz/byte_reader.h"

namespace bitparity::fuzz {

inline constexpr int64_t kMaxFuzzRank = 3;
inline constexpr int64_t kMaxFuzzDim = 16;
inline constexpr int64_t kMaxFuzzElements = 4096;  // per tensor: keeps one input fast

// Empty only when the registry has no op with a direction.
std::optional<Case> decode_case(const Registry& registry, ByteReader& bytes);

}  // namespace bitparity::fuzz
