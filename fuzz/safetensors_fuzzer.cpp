// libFuzzer target for the path a user's .safetensors file takes: any bytes through the strict
// reader, the case import, its validation, export and import again and, for a case it accepts,
// every reference contract (safetensors_invariants.h). Only ParseError and RejectError may come
// out, and nothing may crash, hang or exhaust memory. Seeds: fuzz/seeds/safetensors_fuzzer/ and
// the crafted files of fuzz/hostile/.
#include <cstdio>
#include <cstdlib>

#include "fuzz/byte_reader.h"
#include "fuzz/safetensors_invariants.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  bitparity::fuzz::ByteReader bytes(data, size);
  if (const std::optional<std::string> violation =
          bitparity::fuzz::check_safetensors_file(bitparity::harness_registry(), bytes.take_rest())) {
    std::fprintf(stderr, "%s\n", violation->c_str());
    std::abort();
  }
  return 0;
}
