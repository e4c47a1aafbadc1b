#include "core/tensor.h"

#include <cstring>
#include <limits>
#include <stdexcept>

namespace bitparity {

std::string shape_string(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) throw std::invalid_argument("negative dimension in shape " + shape_string(shape));
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d)
      throw std::invalid_argument("shape " + shape_string(shape) + " has too many elements");
    n *= d;
  }
  return n;
}

void check_shape_limits(const Shape& shape) {
  if (static_cast<int64_t>(shape.size()) > kMaxTensorRank)
    throw std::invalid_argument("shape has " + std::to_string(shape.size()) + " dims; at most " +
                                std::to_string(kMaxTensorRank) + " are accepted");
  int64_t extent = 1;  // the product of the nonzero dims
  for (int64_t d : shape) {
    if (d < 0) throw std::invalid_argument("negative dimension in shape " + shape_string(shape));
    if (d == 0) continue;
    if (d > kMaxTensorElements || extent > kMaxTensorElements / d)
      throw std::invalid_argument("shape " + shape_string(shape) + " is too large: the product of its nonzero dims " +
                                  "may not exceed " + std::to_string(kMaxTensorElements));
    extent *= d;
  }
}

Tensor::Tensor(DType dtype, Shape shape)
    : dtype_(dtype), shape_(std::move(shape)), numel_(shape_numel(shape_)) {
  const size_t width = static_cast<size_t>(dtype_size(dtype_));
  if (static_cast<uint64_t>(numel_) > std::numeric_limits<size_t>::max() / width)
    throw std::invalid_argument("shape " + shape_string(shape_) + " has too many bytes");
  bytes_.assign(static_cast<size_t>(numel_) * width, 0);
}


float Tensor::other_f32(int64_t i) const {
  if (dtype_ == DType::kFP16) return f32_from_fp16(static_cast<uint16_t>(bits(i)));
  return static_cast<float>(f64(i));
}

void Tensor::set_other_f32(int64_t i, float value) {
  if (dtype_ == DType::kFP16) return set_bits(i, fp16_from_f32(value));
  set_bits(i, from_double(dtype_, value));
}

Tensor Tensor::reshaped(Shape shape) const {
  if (shape_numel(shape) != numel_)
    throw std::invalid_argument("cannot reshape " + shape_string(shape_) + " to " + shape_string(shape));
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

}  // namespace bitparity
