// A sample of the GPU's own results for the emulated functions, captured once on a GPU and
// committed, so that CI without a GPU replays it against the emulation (0 mismatches required).
//
// Inputs (fp32 bit patterns), in this order: all 65,536 bf16-valued fp32 patterns (b << 16); an
// explicit list of boundary inputs stored in the file (overflow/underflow thresholds, subnormals,
// ±0, ±Inf, NaNs, ...); `random_bits_count` uniformly random bit patterns and `random_range_count`
// random values with |x| in [2^-30, 2^8), both drawn from splitmix64 with the stored seeds.
//
// Outputs: for each function, the difference (in bit patterns) between the GPU's result and a
// deterministic fp64 predictor (sample_predict, IEEE +,-,*,/ only, so every machine computes the
// same prediction), as codes {0, +1, -1, escape} compressed by an adaptive binary range coder;
// escapes carry their difference as a zigzag varint. The predictor is independent of the
// emulation under test: it only makes the file small.
//
// File format "bitparity-math-sample/1": 8 bytes magic "BPMSMP1\n", u32 length L, L bytes of a flat
// JSON header; u32 boundary count B, B u32 patterns; then per function (SampleFunction order):
// u32 coded-byte count C, C bytes of range-coded codes, u32 escape-byte count V, V bytes of varints.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "reference/math/ex2_tables.h"

namespace bitparity::ref::math {

enum class SampleFunction { kEx2, kExpf, kLogf, kLog1pf, kSigmoid, kSilu, kSoftplus };
inline constexpr int kSampleFunctionCount = 7;
inline constexpr std::array<SampleFunction, kSampleFunctionCount> kSampleFunctions = {
    SampleFunction::kEx2,     SampleFunction::kExpf, SampleFunction::kLogf,    SampleFunction::kLog1pf,
    SampleFunction::kSigmoid, SampleFunction::kSilu, SampleFunction::kSoftplus};

// "ex2", "expf", "logf", "log1pf", "sigmoid", "silu", "softplus".
const char* sample_function_name(SampleFunction f);

// Which inputs a sample holds.
struct SampleInputSpec {
  std::vector<uint32_t> boundaries;
  uint64_t random_bits_seed = 0x5EEDB17C0FFEE001ull;
  uint32_t random_bits_count = 1u << 20;
  uint64_t random_range_seed = 0x5EEDB17C0FFEE002ull;
  uint32_t random_range_count = 1u << 20;
};

// The boundary inputs a capture stores: each anchor and its 8 neighbours on each side.
std::vector<uint32_t> default_boundary_inputs();
SampleInputSpec default_sample_input_spec();

// All inputs of a sample, in order.
std::vector<uint32_t> sample_inputs(const SampleInputSpec& spec);

// The emulation of `f` under kLibdevice with `tables` (what the sample is replayed against).
float emulate_sample_function(const Ex2Tables& tables, SampleFunction f, float x);

// The deterministic fp64 predictor of `f`'s fp32 result (bit pattern; NaN is 0x7FFFFFFF).
uint32_t sample_predict(SampleFunction f, uint32_t x_bits);

struct DeviceSample {
  Ex2Metadata device;  // arch, gpu_name, cc, driver, CUDA versions, captured_utc (hashes unused)
  SampleInputSpec spec;
  // outputs[k][i]: the GPU's bit pattern of kSampleFunctions[k] at input i.
  std::array<std::vector<uint32_t>, kSampleFunctionCount> outputs;
};

class SampleError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

std::vector<unsigned char> encode_device_sample(const DeviceSample& sample);
DeviceSample decode_device_sample(std::span<const unsigned char> bytes);  // throws SampleError
DeviceSample load_device_sample_file(const std::string& path);
void write_device_sample_file(const std::string& path, const DeviceSample& sample);  // via .tmp + rename

}  // namespace bitparity::ref::math
