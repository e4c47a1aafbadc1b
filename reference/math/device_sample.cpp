#include "reference/math/device_sample.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <map>

#include "reference/math/device_math.h"
#include "reference/math/flat_json.h"

namespace bitparity::ref::math {
namespace {

using detail::ByteReader;
using detail::put_u32;

constexpr char kMagic[8] = {'B', 'P', 'M', 'S', 'M', 'P', '1', '\n'};
constexpr uint32_t kBf16Count = 1u << 16;
constexpr int kBoundaryNeighbours = 8;

float f32(uint32_t bits) { return std::bit_cast<float>(bits); }
uint32_t bits_of(float v) { return std::bit_cast<uint32_t>(v); }

// --- inputs ---------------------------------------------------------------------------------------

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Exponents of the in-range family: |x| in [2^-30, 2^8).
constexpr uint32_t kRangeMinExponent = 127 - 30;
constexpr uint32_t kRangeExponents = 38;

// --- the deterministic fp64 predictor -------------------------------------------------------------
// IEEE +, -, *, / plus floor, frexp and ldexp (all exact) only, compiled with -ffp-contract=off:
// every IEEE machine computes the same bits. Accuracy (a few fp64 ulps) only sizes the file.

constexpr double kLn2Hi = std::bit_cast<double>(0x3FE62E42FEE00000ull);  // low bits zero: k * hi exact
constexpr double kLn2Lo = std::bit_cast<double>(0x3DEA39EF35793C76ull);
constexpr double kLn2 = 0.6931471805599453;
constexpr double kInvLn2 = 1.4426950408889634;
constexpr double kSqrtHalf = 0.7071067811865476;
constexpr double kInfD = std::numeric_limits<double>::infinity();

double exp_det(double x) {
  if (x != x) return x;
  if (x > 710.0) return kInfD;
  if (x < -746.0) return 0.0;
  const double k = std::floor(x * kInvLn2 + 0.5);
  const double r = (x - k * kLn2Hi) - k * kLn2Lo;  // |r| <= 0.35
  static const std::array<double, 14> inv_fact = [] {
    std::array<double, 14> c{};
    c[0] = 1.0;
    for (int n = 1; n < 14; ++n) c[n] = c[n - 1] / n;
    return c;
  }();
  double p = inv_fact[13];
  for (int n = 12; n >= 0; --n) p = p * r + inv_fact[n];
  return std::ldexp(p, static_cast<int>(k));
}

double log_det(double x) {
  if (x != x || x < 0.0) return std::numeric_limits<double>::quiet_NaN();
  if (x == 0.0) return -kInfD;
  if (x == kInfD) return kInfD;
  int e = 0;
  double m = std::frexp(x, &e);  // [0.5, 1)
  if (m < kSqrtHalf) {
    m = m * 2.0;
    e -= 1;
  }
  const double s = (m - 1.0) / (m + 1.0);  // |s| <= 0.172
  const double z = s * s;
  double p = 1.0 / 25.0;
  for (int k = 11; k >= 0; --k) p = p * z + 1.0 / (2 * k + 1);
  return e * kLn2Hi + (e * kLn2Lo + 2.0 * s * p);
}

double log1p_det(double x) {
  if (x != x || x < -1.0) return std::numeric_limits<double>::quiet_NaN();
  if (x == -1.0) return -kInfD;
  if (x == kInfD) return kInfD;
  if (std::fabs(x) < 1e-4) {
    double p = -1.0 / 6.0;
    for (int k = 5; k >= 1; --k) p = p * x + ((k % 2) ? 1.0 : -1.0) / k;
    return p * x;
  }
  const double u = 1.0 + x;
  return log_det(u) * (x / (u - 1.0));
}

uint32_t to_f32_bits(double v) {
  float f = static_cast<float>(v);
  return std::isnan(f) ? kCanonicalNanBits : bits_of(f);
}

// --- adaptive binary range coder (the LZMA scheme: 11-bit probabilities, shift 5) ------------------

constexpr uint32_t kProbBits = 11;
constexpr uint32_t kProbOne = 1u << kProbBits;
constexpr uint32_t kMoveBits = 5;
constexpr uint32_t kTop = 1u << 24;

// Codes {0: same as predicted, 1: +1, 2: -1, 3: escape}, each coded as up to three binary
// decisions whose probabilities depend on the previous code.
struct CodeModel {
  uint16_t nonzero[4], escape[4], minus[4];
  CodeModel() {
    for (int k = 0; k < 4; ++k) nonzero[k] = escape[k] = minus[k] = kProbOne / 2;
  }
};

class RangeEncoder {
 public:
  void bit(uint16_t& p, uint32_t b) {
    uint32_t bound = (range_ >> kProbBits) * p;
    if (b == 0) {
      range_ = bound;
      p = static_cast<uint16_t>(p + ((kProbOne - p) >> kMoveBits));
    } else {
      low_ += bound;
      range_ -= bound;
      p = static_cast<uint16_t>(p - (p >> kMoveBits));
    }
    while (range_ < kTop) {
      range_ <<= 8;
      shift_low();
    }
  }
  std::vector<unsigned char> finish() {
    for (int k = 0; k < 5; ++k) shift_low();
    return std::move(out_);
  }

 private:
  void shift_low() {
    if (static_cast<uint32_t>(low_) < 0xFF000000u || (low_ >> 32) != 0) {
      unsigned char carry = static_cast<unsigned char>(low_ >> 32);
      unsigned char temp = cache_;
      do {
        out_.push_back(static_cast<unsigned char>(temp + carry));
        temp = 0xFF;
      } while (--cache_size_ != 0);
      cache_ = static_cast<unsigned char>(low_ >> 24);
    }
    ++cache_size_;
    low_ = (low_ & 0x00FFFFFFull) << 8;
  }
  uint64_t low_ = 0;
  uint32_t range_ = 0xFFFFFFFFu;
  unsigned char cache_ = 0;
  uint64_t cache_size_ = 1;
  std::vector<unsigned char> out_;
};

class RangeDecoder {
 public:
  explicit RangeDecoder(std::span<const unsigned char> in) : in_(in) {
    for (int k = 0; k < 5; ++k) code_ = (code_ << 8) | next();
  }
  uint32_t bit(uint16_t& p) {
    uint32_t bound = (range_ >> kProbBits) * p;
    uint32_t b;
    if (code_ < bound) {
      range_ = bound;
      p = static_cast<uint16_t>(p + ((kProbOne - p) >> kMoveBits));
      b = 0;
    } else {
      code_ -= bound;
      range_ -= bound;
      p = static_cast<uint16_t>(p - (p >> kMoveBits));
      b = 1;
    }
    while (range_ < kTop) {
      range_ <<= 8;
      code_ = (code_ << 8) | next();
    }
    return b;
  }
  bool overran() const { return overrun_ > 4; }

 private:
  uint32_t next() {
    if (pos_ < in_.size()) return in_[pos_++];
    ++overrun_;
    return 0;
  }
  std::span<const unsigned char> in_;
  size_t pos_ = 0;
  int overrun_ = 0;
  uint32_t code_ = 0;
  uint32_t range_ = 0xFFFFFFFFu;
};

void put_varint(std::vector<unsigned char>& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<unsigned char>(v | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<unsigned char>(v));
}

uint64_t zigzag(int64_t v) { return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63); }
int64_t unzigzag(uint64_t v) { return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1); }

void encode_outputs(std::vector<unsigned char>& out, SampleFunction f, const std::vector<uint32_t>& inputs,
                    const std::vector<uint32_t>& outputs) {
  CodeModel model;
  RangeEncoder rc;
  std::vector<unsigned char> escapes;
  uint32_t prev = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const int64_t diff = static_cast<int64_t>(outputs[i]) - static_cast<int64_t>(sample_predict(f, inputs[i]));
    const uint32_t code = diff == 0 ? 0 : diff == 1 ? 1 : diff == -1 ? 2 : 3;
    rc.bit(model.nonzero[prev], code != 0);
    if (code != 0) {
      rc.bit(model.escape[prev], code == 3);
      if (code == 3) {
        put_varint(escapes, zigzag(diff));
      } else {
        rc.bit(model.minus[prev], code == 2);
      }
    }
    prev = code;
  }
  std::vector<unsigned char> coded = rc.finish();
  put_u32(out, static_cast<uint32_t>(coded.size()));
  out.insert(out.end(), coded.begin(), coded.end());
  put_u32(out, static_cast<uint32_t>(escapes.size()));
  out.insert(out.end(), escapes.begin(), escapes.end());
}

std::vector<uint32_t> decode_outputs(ByteReader& in, SampleFunction f, const std::vector<uint32_t>& inputs) {
  const char* name = sample_function_name(f);
  auto coded = in.take(in.u32(name), name);
  auto esc = in.take(in.u32(name), name);
  size_t esc_pos = 0;
  CodeModel model;
  RangeDecoder rc(coded);
  std::vector<uint32_t> outputs(inputs.size());
  uint32_t prev = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    uint32_t code = 0;
    if (rc.bit(model.nonzero[prev])) {
      code = rc.bit(model.escape[prev]) ? 3 : (rc.bit(model.minus[prev]) ? 2 : 1);
    }
    int64_t diff = code == 0 ? 0 : code == 1 ? 1 : code == 2 ? -1 : 0;
    if (code == 3) {
      uint64_t v = 0;
      int shift = 0;
      while (true) {
        if (esc_pos >= esc.size() || shift > 63) {
          throw SampleError(std::string("device sample: escapes of ") + name + " end early at input " + std::to_string(i));
        }
        unsigned char byte = esc[esc_pos++];
        v |= static_cast<uint64_t>(byte & 0x7F) << shift;
        shift += 7;
        if ((byte & 0x80) == 0) break;
      }
      diff = unzigzag(v);
    }
    outputs[i] = static_cast<uint32_t>(static_cast<int64_t>(sample_predict(f, inputs[i])) + diff);
    prev = code;
  }
  if (rc.overran() || esc_pos != esc.size()) {
    throw SampleError(std::string("device sample: the coded outputs of ") + name + " do not match its input count");
  }
  return outputs;
}

}  // namespace

const char* sample_function_name(SampleFunction f) {
  switch (f) {
    case SampleFunction::kEx2: return "ex2";
    case SampleFunction::kExpf: return "expf";
    case SampleFunction::kLogf: return "logf";
    case SampleFunction::kLog1pf: return "log1pf";
    case SampleFunction::kSigmoid: return "sigmoid";
    case SampleFunction::kSilu: return "silu";
    case SampleFunction::kSoftplus: return "softplus";
  }
  return "?";
}

std::vector<uint32_t> default_boundary_inputs() {
  const float anchors[] = {
      0.0f, 1.0f, 2.0f, 0.5f, 0.25f, 0.75f, 1.5f, 3.0f,
      0.6931472f,                                   // ln 2
      88.72283f, 88.7228394f,                       // expf overflow threshold, log(FLT_MAX)
      87.33654f, 87.3365479f,                       // log(2^-126): saturation of t, normal underflow
      103.27893f, 103.972084f, 104.0f,              // log(2^-149), log(2^-150): subnormal underflow
      126.0f, 127.0f, 128.0f, 149.0f, 150.0f, 252.0f,  // ex2 exponent edges
      20.0f,                                        // softplus threshold
      16.635532f, 17.3286795f,                      // expf(-x) below 2^-24, 2^-25
      0.6666667f, 1.3333334f,                       // logf mantissa split (0x3F2AAAAB)
      1e-4f, 1e-10f, 5.9604645e-8f, 2.9802322e-8f,  // 2^-24, 2^-25
      1.1920929e-7f, 16777216.0f, 8388608.0f, 1e30f,
      std::numeric_limits<float>::min(),            // 2^-126
      std::numeric_limits<float>::denorm_min(),
      std::numeric_limits<float>::max(),
      std::numeric_limits<float>::infinity(),
  };
  std::vector<uint32_t> out;
  for (float a : anchors) {
    for (float s : {a, -a}) {
      const uint32_t b = bits_of(s);
      for (int k = -kBoundaryNeighbours; k <= kBoundaryNeighbours; ++k) out.push_back(b + static_cast<uint32_t>(k));
    }
  }
  const uint32_t extra[] = {0x007FFFFFu, 0x807FFFFFu, 0x00400000u, 0x80400000u,   // subnormals
                            0x7FC00000u, 0xFFC00000u, 0x7FFFFFFFu, 0xFFFFFFFFu,   // NaNs
                            0x7F800001u, 0xFF800001u, 0x7FA00000u};               // signalling NaNs
  out.insert(out.end(), std::begin(extra), std::end(extra));
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

SampleInputSpec default_sample_input_spec() {
  SampleInputSpec spec;
  spec.boundaries = default_boundary_inputs();
  return spec;
}

std::vector<uint32_t> sample_inputs(const SampleInputSpec& spec) {
  std::vector<uint32_t> x;
  x.reserve(kBf16Count + spec.boundaries.size() + spec.random_bits_count + spec.random_range_count);
  for (uint32_t b = 0; b < kBf16Count; ++b) x.push_back(b << 16);
  x.insert(x.end(), spec.boundaries.begin(), spec.boundaries.end());
  uint64_t state = spec.random_bits_seed;
  for (uint32_t k = 0; k < spec.random_bits_count; ++k) x.push_back(static_cast<uint32_t>(splitmix64(state) >> 32));
  state = spec.random_range_seed;
  for (uint32_t k = 0; k < spec.random_range_count; ++k) {
    const uint64_t r = splitmix64(state);
    const uint32_t sign = static_cast<uint32_t>(r >> 23 & 1) << 31;
    const uint32_t exponent = kRangeMinExponent + static_cast<uint32_t>((r >> 32) % kRangeExponents);
    const uint32_t mantissa = static_cast<uint32_t>(r) & 0x7FFFFFu;
    x.push_back(sign | exponent << 23 | mantissa);
  }
  return x;
}

float emulate_sample_function(const Ex2Tables& tables, SampleFunction f, float x) {
  switch (f) {
    case SampleFunction::kEx2: return ex2_approx(tables, x);
    case SampleFunction::kExpf: return libdevice_expf(tables, x);
    case SampleFunction::kLogf: return libdevice_logf(x);
    case SampleFunction::kLog1pf: return libdevice_log1pf(x);
    case SampleFunction::kSigmoid: return libdevice_sigmoid(tables, x);
    case SampleFunction::kSilu: return libdevice_silu(tables, x);
    case SampleFunction::kSoftplus: return libdevice_softplus(tables, x);
  }
  return f32(kCanonicalNanBits);
}

uint32_t sample_predict(SampleFunction f, uint32_t x_bits) {
  const float xf = f32(x_bits);
  const double x = xf;
  switch (f) {
    case SampleFunction::kEx2: {
      if (std::isnan(xf)) return kCanonicalNanBits;
      if (std::fabs(xf) < std::numeric_limits<float>::min()) return bits_of(1.0f);  // FTZ input
      const float y = static_cast<float>(exp_det(x * kLn2));
      return y < std::numeric_limits<float>::min() ? 0u : bits_of(y);  // FTZ output
    }
    case SampleFunction::kExpf: return to_f32_bits(exp_det(x));
    case SampleFunction::kLogf: return to_f32_bits(log_det(x));
    case SampleFunction::kLog1pf: return to_f32_bits(log1p_det(x));
    case SampleFunction::kSigmoid: return to_f32_bits(1.0 / (1.0 + exp_det(-x)));
    case SampleFunction::kSilu: return to_f32_bits(x / (1.0 + exp_det(-x)));
    case SampleFunction::kSoftplus:
      return xf > kSoftplusThreshold ? x_bits : to_f32_bits(log1p_det(exp_det(x)));
  }
  return kCanonicalNanBits;
}

std::vector<unsigned char> encode_device_sample(const DeviceSample& s) {
  const std::vector<uint32_t> inputs = sample_inputs(s.spec);
  for (const auto& o : s.outputs) {
    if (o.size() != inputs.size()) {
      throw SampleError("device sample: every function needs " + std::to_string(inputs.size()) + " outputs");
    }
  }
  auto num = [](uint64_t v) { return std::to_string(v); };
  using detail::json_quote;
  std::string json = "{\n";
  json += "  \"format\": \"bitparity-math-sample/1\",\n";
  json += "  \"functions\": \"ex2,expf,logf,log1pf,sigmoid,silu,softplus\",\n";
  json += "  \"arch\": " + json_quote(s.device.arch) + ",\n";
  json += "  \"gpu_name\": " + json_quote(s.device.gpu_name) + ",\n";
  json += "  \"cc_major\": " + num(s.device.cc_major) + ",\n";
  json += "  \"cc_minor\": " + num(s.device.cc_minor) + ",\n";
  json += "  \"driver_version\": " + json_quote(s.device.driver_version) + ",\n";
  json += "  \"cuda_driver_api_version\": " + num(s.device.cuda_driver_api_version) + ",\n";
  json += "  \"cuda_runtime_version\": " + num(s.device.cuda_runtime_version) + ",\n";
  json += "  \"nvcc_version\": " + json_quote(s.device.nvcc_version) + ",\n";
  json += "  \"captured_utc\": " + json_quote(s.device.captured_utc) + ",\n";
  json += "  \"bf16_count\": " + num(kBf16Count) + ",\n";
  json += "  \"boundary_count\": " + num(s.spec.boundaries.size()) + ",\n";
  json += "  \"random_bits_seed\": \"" + num(s.spec.random_bits_seed) + "\",\n";
  json += "  \"random_bits_count\": " + num(s.spec.random_bits_count) + ",\n";
  json += "  \"random_range_seed\": \"" + num(s.spec.random_range_seed) + "\",\n";
  json += "  \"random_range_count\": " + num(s.spec.random_range_count) + ",\n";
  json += "  \"inputs\": " + num(inputs.size()) + "\n}\n";

  std::vector<unsigned char> out(std::begin(kMagic), std::end(kMagic));
  put_u32(out, static_cast<uint32_t>(json.size()));
  out.insert(out.end(), json.begin(), json.end());
  put_u32(out, static_cast<uint32_t>(s.spec.boundaries.size()));
  for (uint32_t b : s.spec.boundaries) put_u32(out, b);
  for (int k = 0; k < kSampleFunctionCount; ++k) encode_outputs(out, kSampleFunctions[k], inputs, s.outputs[k]);
  return out;
}

DeviceSample decode_device_sample(std::span<const unsigned char> bytes) {
  try {
    ByteReader in(bytes, "device sample");
    auto magic = in.take(sizeof kMagic, "magic");
    if (std::memcmp(magic.data(), kMagic, sizeof kMagic) != 0) {
      throw SampleError("not a device sample file (bad magic; expected \"BPMSMP1\")");
    }
    auto json = in.take(in.u32("header length"), "header");
    auto kv = detail::parse_flat_json(std::string_view(reinterpret_cast<const char*>(json.data()), json.size()),
                                      "device sample header");
    if (detail::json_string(kv, "format") != "bitparity-math-sample/1") {
      throw SampleError("device sample: format is \"" + detail::json_string(kv, "format") +
                        "\", expected \"bitparity-math-sample/1\"");
    }
    DeviceSample s;
    s.device.arch = detail::json_string(kv, "arch");
    s.device.gpu_name = detail::json_string(kv, "gpu_name");
    s.device.cc_major = static_cast<int>(detail::json_int(kv, "cc_major"));
    s.device.cc_minor = static_cast<int>(detail::json_int(kv, "cc_minor"));
    s.device.driver_version = detail::json_string(kv, "driver_version");
    s.device.cuda_driver_api_version = static_cast<int>(detail::json_int(kv, "cuda_driver_api_version"));
    s.device.cuda_runtime_version = static_cast<int>(detail::json_int(kv, "cuda_runtime_version"));
    s.device.nvcc_version = detail::json_string(kv, "nvcc_version");
    s.device.captured_utc = detail::json_string(kv, "captured_utc");
    s.spec.random_bits_seed = std::stoull(detail::json_string(kv, "random_bits_seed"));
    s.spec.random_bits_count = static_cast<uint32_t>(detail::json_int(kv, "random_bits_count"));
    s.spec.random_range_seed = std::stoull(detail::json_string(kv, "random_range_seed"));
    s.spec.random_range_count = static_cast<uint32_t>(detail::json_int(kv, "random_range_count"));
    const uint32_t n_boundary = in.u32("boundary count");
    auto b = in.take(size_t(n_boundary) * 4, "boundaries");
    for (uint32_t k = 0; k < n_boundary; ++k) s.spec.boundaries.push_back(detail::get_u32(b.data() + 4 * k));
    const std::vector<uint32_t> inputs = sample_inputs(s.spec);
    if (static_cast<long long>(inputs.size()) != detail::json_int(kv, "inputs")) {
      throw SampleError("device sample: header says " + detail::json_string(kv, "inputs") + " inputs, its spec gives " +
                        std::to_string(inputs.size()));
    }
    for (int k = 0; k < kSampleFunctionCount; ++k) s.outputs[k] = decode_outputs(in, kSampleFunctions[k], inputs);
    if (in.remaining() != 0) throw SampleError("device sample has " + std::to_string(in.remaining()) + " trailing bytes");
    return s;
  } catch (const SampleError&) {
    throw;
  } catch (const std::exception& e) {
    throw SampleError(e.what());
  }
}

DeviceSample load_device_sample_file(const std::string& path) {
  try {
    return decode_device_sample(detail::read_whole_file(path));
  } catch (const std::exception& e) {
    throw SampleError(path + ": " + e.what());
  }
}

void write_device_sample_file(const std::string& path, const DeviceSample& sample) {
  try {
    detail::write_file_atomically(path, encode_device_sample(sample));
  } catch (const std::exception& e) {
    throw SampleError(e.what());
  }
}

}  // namespace bitparity::ref::math
