// The two tables that are the GPU's ex2.approx.ftz.f32 (spec rule 12), their file format, and
// the lazily loaded default capture.
//
// ex2.approx.ftz.f32(r), for |r| >= 2^-126 and finite, writes |r| * 2^23 = i * 2^23 + f (the
// magnitude truncated to 23 fraction bits) and returns TP[f] * 2^i for r >= 0 and TN[f] * 2^-i for
// r < 0, where TP[f] = ex2.approx(f * 2^-23) and TN[f] = ex2.approx(-f * 2^-23). The tables are read
// off a GPU by `bitparity capture-math` (gpu/math/capture_math.h) and named by its architecture:
// whether one generation's tables hold on another is not known, so a table mirrors only its own.
//
// File format "bitparity-ex2/1" (little-endian):
//   8 bytes magic "BPEX2v1\n", u32 length L, L bytes of a flat JSON object (the metadata below);
//   then TP, then TN, each: u32 first-entry bits, u32 exception count E, E pairs (u32 index,
//   u32 bits) in ascending index, and 2^23 two-bit codes packed four to a byte, lowest bits first.
//   Code c of entry f > 0 (the code of entry 0 is unused): c in {0, 1, 2} means
//   bits[f] = bits[f-1] + c for TP (increasing) and bits[f-1] - c for TN (decreasing); c = 3 means
//   bits[f] is the next exception. So a table takes 2 MiB plus its exceptions.
#pragma once

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace bitparity::ref::math {

inline constexpr int kEx2FractionBits = 23;
inline constexpr uint32_t kEx2TableSize = 1u << kEx2FractionBits;

// Where and how a pair of tables was captured. Stored as the file's JSON header.
struct Ex2Metadata {
  std::string arch;                  // "sm_90": what the tables mirror
  std::string gpu_name;              // "NVIDIA H200"
  int cc_major = 0;                  // compute capability
  int cc_minor = 0;
  std::string driver_version;        // the NVIDIA driver, "580.159.04"
  int cuda_driver_api_version = 0;   // cudaDriverGetVersion, e.g. 13000
  int cuda_runtime_version = 0;      // cudaRuntimeGetVersion of the capture program
  std::string nvcc_version;          // nvcc that built the capture program, "13.0.88"
  std::string captured_utc;          // "2026-11-29T18:30:00Z"
  std::string tp_hash;               // ex2_table_hash of TP, 16 hex digits
  std::string tn_hash;               // ex2_table_hash of TN
};

struct Ex2Tables {
  Ex2Metadata meta;
  std::vector<float> tp;  // ex2.approx(f * 2^-23), f in [0, 2^23)
  std::vector<float> tn;  // ex2.approx(-f * 2^-23)
};

// A table file that cannot be read, or tables asked to mirror a device they do not belong to.
class Ex2TableError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// FNV-1a (64 bits) over the tables' bit patterns, taken as little-endian 32-bit words.
uint64_t ex2_table_hash(std::span<const float> table);
std::string ex2_table_hash_hex(std::span<const float> table);

// The flat JSON header of `meta` (one key per line).
std::string ex2_metadata_json(const Ex2Metadata& meta);

// File bytes of `tables` in format bitparity-ex2/1; the header's hashes are recomputed.
std::vector<unsigned char> encode_ex2_tables(const Ex2Tables& tables);
// Throws Ex2TableError on a malformed or truncated file. `verify_hashes` recomputes both table
// hashes and compares them with the header (costs about as much as decoding).
Ex2Tables decode_ex2_tables(std::span<const unsigned char> bytes, bool verify_hashes = false);
Ex2Tables load_ex2_tables_file(const std::string& path, bool verify_hashes = false);
// Writes to `path` + ".tmp", then renames. Throws Ex2TableError.
void write_ex2_tables_file(const std::string& path, const Ex2Tables& tables);

// The tables every emulated expf uses: the file named by the environment variable
// BITPARITY_EX2_TABLES when it is set, else the sm_90 capture compiled into the library
// (reference/math/data/ex2_sm90.bin). Loaded once, on first use, thread-safely. Throws
// Ex2TableError when neither exists or the file is malformed.
const Ex2Tables& default_ex2_tables();
// Whether the library was built with the committed capture compiled in.
bool has_embedded_ex2_tables();

// The default tables, after checking that they mirror a device of architecture `device_arch`
// ("sm_90", as gpu_arch_name() spells it). Throws Ex2TableError, naming both architectures and
// how to capture tables for the device, when they differ.
const Ex2Tables& ex2_tables_for_device(std::string_view device_arch);
// The same check for any tables.
void require_same_arch(const Ex2Tables& tables, std::string_view device_arch);

// "sm_90" for compute capability 9.0.
std::string gpu_arch_name(int cc_major, int cc_minor);

}  // namespace bitparity::ref::math
