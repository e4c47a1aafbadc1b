// A host tensor: a dtype, a row-major shape, and the elements' raw bit patterns.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace bitparity {

using Shape = std::vector<int64_t>;

// "[3, 2]", the way every message writes a shape.
std::string shape_string(const Shape& shape);
// Product of the dims; throws std::invalid_argument when it overflows int64 or a dim is negative.
int64_t shape_numel(const Shape& shape);

// The largest tensor a document may describe. Harnesses and references loop over rows and columns
// even where a tensor has no elements, so the limit is on the product of the nonzero dims (which
// bounds every dim and every loop over any of them): [4611686018427387904, 0] is rejected, not
// iterated.
inline constexpr int64_t kMaxTensorRank = 8;
inline constexpr int64_t kMaxTensorElements = int64_t{1} << 26;
// Throws std::invalid_argument naming the limit when `shape` has a negative dim, more than
// kMaxTensorRank dims, or nonzero dims whose product (overflow-checked) exceeds kMaxTensorElements.
void check_shape_limits(const Shape& shape);

// The byte every element of a fresh backend output holds before the backend writes it (the CUDA
// backend's and plug-ins' outputs): 0x5a5a (bf16 about 1.5e16) and 0x5a5a5a5a (fp32 about 1.5e16)
// are finite, not zero and no value a kernel produces from the generated cases by chance, and
// compare unequal to NaN even where NaNs compare equal.
inline constexpr int kPoisonByte = 0x5a;

class Tensor {
 public:
  Tensor() = default;
  Tensor(DType dtype, Shape shape);  // zero-filled

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  int64_t dim(int64_t i) const { return shape_.at(static_cast<size_t>(i)); }
  int64_t numel() const { return numel_; }

  // Element i's bit pattern, zero-extended (little-endian hosts only: x86-64, aarch64). One load of
  // the element's width: a copy of a variable size into a wider value is read back through memory.
  uint64_t bits(int64_t i) const {
    switch (dtype_size(dtype_)) {
      case 1: return load<uint8_t>(i);
      case 2: return load<uint16_t>(i);
      case 4: return load<uint32_t>(i);
      default: return load<uint64_t>(i);
    }
  }
  void set_bits(int64_t i, uint64_t bits) {
    switch (dtype_size(dtype_)) {
      case 1: return store(i, static_cast<uint8_t>(bits));
      case 2: return store(i, static_cast<uint16_t>(bits));
      case 4: return store(i, static_cast<uint32_t>(bits));
      default: return store(i, bits);
    }
  }

  // Floating element i as fp32 (exact for bf16, fp16 and fp32) or as its exact double. bf16 and
  // fp32 inline: the references read and write one element at a time.
  float f32(int64_t i) const {
    if (dtype_ == DType::kBF16) return f32_from_bf16(load<uint16_t>(i));
    if (dtype_ == DType::kFP32) return f32_from_bits(load<uint32_t>(i));
    return other_f32(i);
  }
  double f64(int64_t i) const { return to_double(dtype_, bits(i)); }
  // Stores fp32 `value` rounded once (RNE) to the tensor's dtype.
  void set_f32(int64_t i, float value) {
    if (dtype_ == DType::kBF16) return store(i, static_cast<uint16_t>(bf16_from_f32(value)));
    if (dtype_ == DType::kFP32) return store(i, static_cast<uint32_t>(f32_bits(value)));
    set_other_f32(i, value);
  }

  const uint8_t* data() const { return bytes_.data(); }
  uint8_t* data() { return bytes_.data(); }
  size_t nbytes() const { return bytes_.size(); }

  // Same elements, another shape of the same numel (e.g. [rows] <-> [rows, 1]).
  Tensor reshaped(Shape shape) const;

  bool operator==(const Tensor& other) const = default;

 private:
  template <typename Word>
  Word load(int64_t i) const {
    Word w;
    std::memcpy(&w, bytes_.data() + i * static_cast<int64_t>(sizeof(Word)), sizeof(Word));
    return w;
  }
  template <typename Word>
  void store(int64_t i, Word w) {
    std::memcpy(bytes_.data() + i * static_cast<int64_t>(sizeof(Word)), &w, sizeof(Word));
  }
  float other_f32(int64_t i) const;             // dtypes other than bf16 and fp32
  void set_other_f32(int64_t i, float value);  // the same
  DType dtype_ = DType::kFP32;
  Shape shape_;
  int64_t numel_ = 0;
  std::vector<uint8_t> bytes_;
};

}  // namespace bitparity
