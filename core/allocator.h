// How the process's allocator (glibc malloc) treats freed memory, set once by the programs that run
// campaigns (the `bitparity` command, campaign_bench). A case allocates its tensors and frees them
// when it is judged; several sides of one case hold outputs of one size at once (an embedding
// backward's [V, H] tables, hundreds of KB to MBs). glibc's defaults return such memory to the
// kernel (a large block is its own mapping, and the heap's top is trimmed above twice the largest
// block freed), so that the next case takes page faults to get it back: on a 2-core machine, 20 % of
// a small embedding backward case's time was page faults under the zero fill of its tables. Host
// code.
#pragma once

namespace bitparity {

// Whether the user set glibc's malloc through the environment (GLIBC_TUNABLES, MALLOC_*_): then
// keep_freed_memory leaves it as set.
bool allocator_tuned_by_user();

// Blocks up to 32 MiB from the heap, the heap's top trimmed only above 64 MiB and grown 16 MiB at a
// time, so that freed tensors are reused in place; each job's heap keeps what it held at its peak, up
// to glibc's 64 MiB a thread heap. Process-wide; call before starting threads. Returns whether the
// allocator took every setting: false where the user set it (allocator_tuned_by_user), where malloc
// is not glibc's, or under a sanitizer that replaces malloc.
bool keep_freed_memory();

}  // namespace bitparity
