// libFuzzer target for the path a user's file takes: any bytes through the bounded parse
// (case_from_text), the op's validation and, for a case it accepts, every reference contract
// (invariants.h, check_user_file). Only ParseError and RejectError may come out of the parse, and
// nothing may crash, hang or exhaust memory. Seeds: fuzz/hostile/ and the corpus entries.
#include <cstdio>
#include <cstdlib>

#include "fuzz/byte_reader.h"
#include "fuzz/invariants.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  bitparity::fuzz::ByteReader bytes(data, size);
  if (const std::optional<std::string> violation =
          bitparity::fuzz::check_user_file(bitparity::harness_registry(), bytes.take_rest())) {
    std::fprintf(stderr, "%s\n", violation->c_str());
    std::abort();
  }
  return 0;
}
