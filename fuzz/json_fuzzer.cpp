// libFuzzer target for the case parser: any text through case_from_text may only throw
// ParseError or RejectError. Seed it with corpus entries (`json_fuzzer ../corpus/swiglu`).
#include <cstdio>
#include <cstdlib>

#include "fuzz/byte_reader.h"
#include "fuzz/invariants.h"
#include "ops/builtin.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  bitparity::fuzz::ByteReader bytes(data, size);
  if (const std::optional<std::string> violation =
          bitparity::fuzz::check_parser(bitparity::builtin_registry(), bytes.take_rest())) {
    std::fprintf(stderr, "%s\n", violation->c_str());
    std::abort();
  }
  return 0;
}
