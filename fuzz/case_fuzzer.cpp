// The generic libFuzzer target: bytes -> a case of any registered op (case_decoder.h), then the
// invariants every reference contract must keep (invariants.h). A violation aborts, which is what
// libFuzzer records as a crash, with the message on stderr.
#include <cstdio>
#include <cstdlib>

#include "fuzz/case_decoder.h"
#include "fuzz/invariants.h"
#include "ops/builtin.h"

namespace {

void require(const std::optional<std::string>& violation) {
  if (!violation) return;
  std::fprintf(stderr, "invariant violated: %s\n", violation->c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const bitparity::Registry& registry = bitparity::builtin_registry();
  bitparity::fuzz::ByteReader bytes(data, size);
  const std::optional<bitparity::Case> c = bitparity::fuzz::decode_case(registry, bytes);
  if (!c) return 0;
  require(bitparity::fuzz::check_json_round_trip(registry, *c));
  require(bitparity::fuzz::check_reference_invariants(registry, *c));
  return 0;
}
