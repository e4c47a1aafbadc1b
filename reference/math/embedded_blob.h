// The committed sm_90 ex2 table file, compiled into the library with the assembler's .incbin
// (reference/math/CMakeLists.txt names the file). Empty when the build names none.
#pragma once

#include <span>

namespace bitparity::ref::math {

std::span<const unsigned char> embedded_ex2_blob();

}  // namespace bitparity::ref::math
