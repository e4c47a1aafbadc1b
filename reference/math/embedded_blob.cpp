#include "reference/math/embedded_blob.h"

// BITPARITY_EX2_BLOB_PATH is a string literal: the absolute path of the table file. The bytes go
// into .rodata as they are, so the build neither converts them to a C array nor reads them at
// start-up from a path that may not exist where the binary runs.
#ifdef BITPARITY_EX2_BLOB_PATH
__asm__(
    ".pushsection .rodata\n"
    ".balign 16\n"
    ".globl bitparity_ex2_blob_begin\n"
    "bitparity_ex2_blob_begin:\n"
    ".incbin \"" BITPARITY_EX2_BLOB_PATH "\"\n"
    ".globl bitparity_ex2_blob_end\n"
    "bitparity_ex2_blob_end:\n"
    ".popsection\n");
extern "C" const unsigned char bitparity_ex2_blob_begin[];
extern "C" const unsigned char bitparity_ex2_blob_end[];
#endif

namespace bitparity::ref::math {

std::span<const unsigned char> embedded_ex2_blob() {
#ifdef BITPARITY_EX2_BLOB_PATH
  return {bitparity_ex2_blob_begin, bitparity_ex2_blob_end};
#else
  return {};
#endif
}

}  // namespace bitparity::ref::math
