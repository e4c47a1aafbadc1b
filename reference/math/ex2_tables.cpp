#include "reference/math/ex2_tables.h"

#include <array>
#include <bit>
#include <future>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>

#include "reference/math/embedded_blob.h"
#include "reference/math/flat_json.h"

namespace bitparity::ref::math {
namespace {

using detail::ByteReader;
using detail::put_u32;

constexpr char kMagic[8] = {'B', 'P', 'E', 'X', '2', 'v', '1', '\n'};
constexpr uint32_t kExceptionCode = 3;
constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ull;
constexpr uint64_t kFnvPrime = 0x100000001b3ull;

// --- one table ----------------------------------------------------------------------------------

void encode_table(std::vector<unsigned char>& out, const std::vector<float>& table, bool increasing) {
  std::vector<std::pair<uint32_t, uint32_t>> exceptions;
  std::vector<unsigned char> codes(kEx2TableSize / 4, 0);
  uint32_t prev = std::bit_cast<uint32_t>(table[0]);
  for (uint32_t f = 1; f < kEx2TableSize; ++f) {
    uint32_t bits = std::bit_cast<uint32_t>(table[f]);
    uint32_t delta = increasing ? bits - prev : prev - bits;  // wraps to huge when out of order
    uint32_t code = delta < kExceptionCode ? delta : kExceptionCode;
    if (code == kExceptionCode) exceptions.emplace_back(f, bits);
    codes[f / 4] |= static_cast<unsigned char>(code << (2 * (f % 4)));
    prev = bits;
  }
  put_u32(out, std::bit_cast<uint32_t>(table[0]));
  put_u32(out, static_cast<uint32_t>(exceptions.size()));
  for (auto [index, bits] : exceptions) {
    put_u32(out, index);
    put_u32(out, bits);
  }
  out.insert(out.end(), codes.begin(), codes.end());
}

// One table as stored, before expansion.
struct CodedTable {
  const char* name;
  uint32_t first;
  uint32_t n_exceptions;
  std::span<const unsigned char> exceptions;  // (index, bits) pairs
  std::span<const unsigned char> codes;       // 2^23 two-bit codes
};

CodedTable read_coded_table(ByteReader& in, const char* name) {
  CodedTable t{name, in.u32(name), in.u32(name), {}, {}};
  if (t.n_exceptions > kEx2TableSize) {
    throw Ex2TableError(std::string("ex2 table file: ") + name + " claims " + std::to_string(t.n_exceptions) +
                        " exceptions, more than its " + std::to_string(kEx2TableSize) + " entries");
  }
  t.exceptions = in.take(size_t(t.n_exceptions) * 8, name);
  t.codes = in.take(kEx2TableSize / 4, name);
  return t;
}

// The four codes of one byte as running sums, so that a byte without exceptions expands
// without a loop-carried dependency between its entries.
struct ByteStep {
  uint32_t sum[4];
  bool has_exception;
};

constexpr std::array<ByteStep, 256> make_byte_steps() {
  std::array<ByteStep, 256> steps{};
  for (uint32_t v = 0; v < 256; ++v) {
    uint32_t acc = 0;
    steps[v].has_exception = false;
    for (uint32_t k = 0; k < 4; ++k) {
      const uint32_t code = (v >> (2 * k)) & 3u;
      if (code == kExceptionCode) steps[v].has_exception = true;
      acc += code;
      steps[v].sum[k] = acc;
    }
  }
  return steps;
}
constexpr std::array<ByteStep, 256> kByteSteps = make_byte_steps();

template <bool kIncreasing>
std::vector<float> expand_table(const CodedTable& t) {
  auto exc_word = [&](size_t k) { return detail::get_u32(t.exceptions.data() + 4 * k); };
  auto step = [](uint32_t prev, uint32_t delta) { return kIncreasing ? prev + delta : prev - delta; };
  std::vector<float> table(kEx2TableSize);
  float* out = table.data();
  uint32_t prev = t.first;
  size_t next_exc = 0;
  out[0] = std::bit_cast<float>(prev);
  for (uint32_t byte = 0; byte < kEx2TableSize / 4; ++byte) {
    const unsigned c4 = t.codes[byte];
    const ByteStep& s = kByteSteps[c4];
    if (!s.has_exception && byte != 0) {
      for (uint32_t k = 0; k < 4; ++k) out[4 * byte + k] = std::bit_cast<float>(step(prev, s.sum[k]));
      prev = step(prev, s.sum[3]);
      continue;
    }
    for (uint32_t k = (byte == 0 ? 1 : 0); k < 4; ++k) {
      const uint32_t f = 4 * byte + k;
      const uint32_t code = (c4 >> (2 * k)) & 3u;
      if (code == kExceptionCode) {
        if (next_exc >= t.n_exceptions || exc_word(2 * next_exc) != f) {
          throw Ex2TableError(std::string("ex2 table file: ") + t.name + " entry " + std::to_string(f) +
                              " is coded as an exception that the exception list does not hold");
        }
        prev = exc_word(2 * next_exc + 1);
        ++next_exc;
      } else {
        prev = step(prev, code);
      }
      out[f] = std::bit_cast<float>(prev);
    }
  }
  if (next_exc != t.n_exceptions) {
    throw Ex2TableError(std::string("ex2 table file: ") + t.name + " lists " + std::to_string(t.n_exceptions) +
                        " exceptions but its codes use " + std::to_string(next_exc));
  }
  return table;
}

Ex2Metadata metadata_from_json(std::string_view text) {
  std::map<std::string, std::string> kv;
  try {
    kv = detail::parse_flat_json(text, "ex2 table header");
  } catch (const std::runtime_error& e) {
    throw Ex2TableError(e.what());
  }
  auto to_str = [&](const char* key) { return detail::json_string(kv, key); };
  auto to_int = [&](const char* key) { return static_cast<int>(detail::json_int(kv, key)); };
  if (to_str("format") != "bitparity-ex2/1") {
    throw Ex2TableError("ex2 table header: format is \"" + to_str("format") + "\", expected \"bitparity-ex2/1\"");
  }
  Ex2Metadata m;
  m.arch = to_str("arch");
  m.gpu_name = to_str("gpu_name");
  m.cc_major = to_int("cc_major");
  m.cc_minor = to_int("cc_minor");
  m.driver_version = to_str("driver_version");
  m.cuda_driver_api_version = to_int("cuda_driver_api_version");
  m.cuda_runtime_version = to_int("cuda_runtime_version");
  m.nvcc_version = to_str("nvcc_version");
  m.captured_utc = to_str("captured_utc");
  m.tp_hash = to_str("tp_hash");
  m.tn_hash = to_str("tn_hash");
  if (m.arch.empty()) throw Ex2TableError("ex2 table header names no architecture (\"arch\")");
  if (to_int("entries") != static_cast<int>(kEx2TableSize)) {
    throw Ex2TableError("ex2 table header: entries is " + to_str("entries") + ", expected " +
                        std::to_string(kEx2TableSize));
  }
  return m;
}

}  // namespace

uint64_t ex2_table_hash(std::span<const float> table) {
  uint64_t h = kFnvOffset;
  for (float v : table) {
    uint32_t w = std::bit_cast<uint32_t>(v);
    for (int k = 0; k < 4; ++k) {
      h ^= (w >> (8 * k)) & 0xFFu;
      h *= kFnvPrime;
    }
  }
  return h;
}

std::string ex2_table_hash_hex(std::span<const float> table) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(ex2_table_hash(table)));
  return buf;
}

std::string ex2_metadata_json(const Ex2Metadata& m) {
  std::string s = "{\n";
  auto str = [&](const char* k, const std::string& v) { s += std::string("  \"") + k + "\": " + detail::json_quote(v) + ",\n"; };
  auto num = [&](const char* k, long long v) { s += std::string("  \"") + k + "\": " + std::to_string(v) + ",\n"; };
  str("format", "bitparity-ex2/1");
  str("what", "ex2.approx.ftz.f32 tables TP[f] = ex2(f*2^-23), TN[f] = ex2(-f*2^-23), f < 2^23");
  str("arch", m.arch);
  str("gpu_name", m.gpu_name);
  num("cc_major", m.cc_major);
  num("cc_minor", m.cc_minor);
  str("driver_version", m.driver_version);
  num("cuda_driver_api_version", m.cuda_driver_api_version);
  num("cuda_runtime_version", m.cuda_runtime_version);
  str("nvcc_version", m.nvcc_version);
  str("captured_utc", m.captured_utc);
  num("entries", kEx2TableSize);
  str("encoding", "2-bit delta codes, exceptions listed (see reference/math/ex2_tables.h)");
  str("tp_hash", m.tp_hash);
  s += "  \"tn_hash\": " + detail::json_quote(m.tn_hash) + "\n}\n";
  return s;
}

std::vector<unsigned char> encode_ex2_tables(const Ex2Tables& tables) {
  if (tables.tp.size() != kEx2TableSize || tables.tn.size() != kEx2TableSize) {
    throw Ex2TableError("ex2 tables must have " + std::to_string(kEx2TableSize) + " entries each");
  }
  Ex2Metadata meta = tables.meta;
  meta.tp_hash = ex2_table_hash_hex(tables.tp);
  meta.tn_hash = ex2_table_hash_hex(tables.tn);
  std::string json = ex2_metadata_json(meta);
  std::vector<unsigned char> out(std::begin(kMagic), std::end(kMagic));
  put_u32(out, static_cast<uint32_t>(json.size()));
  out.insert(out.end(), json.begin(), json.end());
  encode_table(out, tables.tp, /*increasing=*/true);
  encode_table(out, tables.tn, /*increasing=*/false);
  return out;
}

namespace {

Ex2Tables decode_unchecked(std::span<const unsigned char> bytes, bool verify_hashes) {
  ByteReader in(bytes, "ex2 table file");
  auto magic = in.take(sizeof kMagic, "magic");
  if (std::memcmp(magic.data(), kMagic, sizeof kMagic) != 0) {
    throw Ex2TableError("not an ex2 table file (bad magic; expected \"BPEX2v1\")");
  }
  uint32_t json_len = in.u32("header length");
  auto json = in.take(json_len, "header");
  Ex2Tables t;
  t.meta = metadata_from_json(std::string_view(reinterpret_cast<const char*>(json.data()), json.size()));
  const CodedTable tp = read_coded_table(in, "TP");
  const CodedTable tn = read_coded_table(in, "TN");
  if (in.remaining() != 0) {
    throw Ex2TableError("ex2 table file has " + std::to_string(in.remaining()) + " trailing bytes");
  }
  // The two tables expand independently: TN on a second thread halves the load time.
  auto tn_future = std::async(std::launch::async, [&] { return expand_table<false>(tn); });
  t.tp = expand_table<true>(tp);
  t.tn = tn_future.get();
  if (verify_hashes) {
    std::string tp = ex2_table_hash_hex(t.tp), tn = ex2_table_hash_hex(t.tn);
    if (tp != t.meta.tp_hash || tn != t.meta.tn_hash) {
      throw Ex2TableError("ex2 table file is corrupt: decoded hashes " + tp + "/" + tn + " differ from the header's " +
                          t.meta.tp_hash + "/" + t.meta.tn_hash);
    }
  }
  return t;
}

}  // namespace

Ex2Tables decode_ex2_tables(std::span<const unsigned char> bytes, bool verify_hashes) {
  try {
    return decode_unchecked(bytes, verify_hashes);
  } catch (const Ex2TableError&) {
    throw;
  } catch (const std::runtime_error& e) {  // truncation, reported by ByteReader
    throw Ex2TableError(e.what());
  }
}

Ex2Tables load_ex2_tables_file(const std::string& path, bool verify_hashes) {
  try {
    std::vector<unsigned char> bytes = detail::read_whole_file(path);
    return decode_ex2_tables(bytes, verify_hashes);
  } catch (const std::runtime_error& e) {
    throw Ex2TableError(path + ": " + e.what());
  }
}

void write_ex2_tables_file(const std::string& path, const Ex2Tables& tables) {
  try {
    detail::write_file_atomically(path, encode_ex2_tables(tables));
  } catch (const std::runtime_error& e) {
    throw Ex2TableError(e.what());
  }
}

bool has_embedded_ex2_tables() { return !embedded_ex2_blob().empty(); }

const Ex2Tables& default_ex2_tables() {
  // A function-local static is initialized once, thread-safely; an exception leaves it
  // uninitialized, so the next call tries again and throws the same message.
  static const Ex2Tables tables = [] {
    if (const char* path = std::getenv("BITPARITY_EX2_TABLES"); path != nullptr && *path != '\0') {
      return load_ex2_tables_file(path);
    }
    std::span<const unsigned char> blob = embedded_ex2_blob();
    if (blob.empty()) {
      throw Ex2TableError(
          "no ex2 tables: this build has none compiled in and BITPARITY_EX2_TABLES is not set; capture them "
          "on the GPU with `bitparity capture-math <file>` and set BITPARITY_EX2_TABLES=<file>");
    }
    return decode_ex2_tables(blob);
  }();
  return tables;
}

std::string gpu_arch_name(int cc_major, int cc_minor) {
  return "sm_" + std::to_string(cc_major * 10 + cc_minor);
}

void require_same_arch(const Ex2Tables& tables, std::string_view device_arch) {
  if (tables.meta.arch == device_arch) return;
  throw Ex2TableError("the ex2 tables were captured on " + tables.meta.arch + " (" + tables.meta.gpu_name +
                      "), so they cannot mirror a " + std::string(device_arch) +
                      " device: whether MUFU.EX2 agrees across GPU generations is not known. Capture tables "
                      "on that GPU with `bitparity capture-math <file>` and point BITPARITY_EX2_TABLES at it");
}

const Ex2Tables& ex2_tables_for_device(std::string_view device_arch) {
  const Ex2Tables& t = default_ex2_tables();
  require_same_arch(t, device_arch);
  return t;
}

}  // namespace bitparity::ref::math
