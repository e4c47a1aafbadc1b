#include "core/allocator.h"

#include <cstdlib>  // defines __GLIBC__ where the C library is glibc
#include <initializer_list>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace bitparity {

bool allocator_tuned_by_user() {
  for (const char* name : {"GLIBC_TUNABLES", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_",
                           "MALLOC_MMAP_MAX_", "MALLOC_ARENA_MAX"})
    if (std::getenv(name)) return true;
  return false;
}

bool keep_freed_memory() {
#if defined(__GLIBC__)
  if (allocator_tuned_by_user()) return false;
  constexpr int kMiB = 1 << 20;
  // Each setting also stops glibc from moving the thresholds with the blocks it frees.
  const bool mmap = mallopt(M_MMAP_THRESHOLD, 32 * kMiB) == 1;  // glibc's largest
  const bool trim = mallopt(M_TRIM_THRESHOLD, 64 * kMiB) == 1;
  const bool pad = mallopt(M_TOP_PAD, 16 * kMiB) == 1;
  return mmap && trim && pad;
#else
  return false;
#endif
}

}  // namespace bitparity
