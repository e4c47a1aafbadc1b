// Typed values out of fuzzer bytes, in the manner of LLVM's FuzzedDataProvider: structure (choices,
// counts, dims) is read from the front, payload (element bit patterns) from the back, so a
// mutation of one rarely shifts the other. It never fails: once the bytes run out every read
// returns zeros, which decode to the smallest choices.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace bitparity::fuzz {

class ByteReader {
 public:
  ByteReader(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  size_t remaining() const { return size_; }

  // An integer from the next `bytes` (at most 8) bytes of the front, little end first.
  uint64_t take_front(int bytes) {
    uint64_t value = 0;
    for (int i = 0; i < bytes && size_ > 0; ++i, ++data_, --size_) value |= uint64_t{*data_} << (8 * i);
    return value;
  }

  // A bit pattern from the last `bytes` bytes: payload, read from the other end.
  uint64_t take_back(int bytes) {
    uint64_t value = 0;
    for (int i = 0; i < bytes && size_ > 0; ++i, --size_) value |= uint64_t{data_[size_ - 1]} << (8 * i);
    return value;
  }

  // lo..hi inclusive, from as few front bytes as the range needs; lo when the bytes ran out.
  int64_t take_in_range(int64_t lo, int64_t hi) {
    if (hi <= lo) return lo;
    const uint64_t span = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo);
    int bytes = 0;
    for (uint64_t s = span; s > 0; s >>= 8) ++bytes;
    const uint64_t raw = take_front(bytes);
    return static_cast<int64_t>(static_cast<uint64_t>(lo) + (span == UINT64_MAX ? raw : raw % (span + 1)));
  }

  bool take_bool() { return take_front(1) & 1; }

  // An index into a table of `count` choices.
  size_t take_index(size_t count) {
    return count == 0 ? 0 : static_cast<size_t>(take_in_range(0, static_cast<int64_t>(count) - 1));
  }

  // Everything left, as text (for parsers).
  std::string_view take_rest() {
    std::string_view rest(reinterpret_cast<const char*>(data_), size_);
    data_ += size_;
    size_ = 0;
    return rest;
  }

 private:
  const uint8_t* data_;
  size_t size_;
};

}  // namespace bitparity::fuzz
