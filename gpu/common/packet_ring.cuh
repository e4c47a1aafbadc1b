// The cp.async ring that persistent warps stream rows through: 16-byte copies from global to
// shared memory that hold no register while in flight, a per-thread ring of stages, and the loop
// that keeps kStages units of copies ahead of a team's arithmetic across row boundaries.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

namespace bitparity::gpu::device {

// --- asynchronous copies to shared memory (cp.async, sm_80 and later) ---------------------------
//
// A thread's loads in flight cost registers until they land; the two reducing backwards hold
// eight or more partial sums and a packet's arithmetic besides, so registers, not bandwidth,
// bounded how far ahead they could load. cp.async copies 16 bytes from global to shared memory
// without a register; a thread that copies a packet and later reads only that same packet needs
// no barrier, only cp.async.wait_group.

__device__ __forceinline__ void copy_async_16(void* shared, const void* global) {
#if defined(__CUDA_ARCH__)
  const auto address = static_cast<unsigned>(__cvta_generic_to_shared(shared));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(address), "l"(global) : "memory");
#else
  *static_cast<uint4*>(shared) = *static_cast<const uint4*>(global);
#endif
}

// Closes the group of copies issued since the last commit (an empty group where none was).
__device__ __forceinline__ void commit_copies() {
#if defined(__CUDA_ARCH__)
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

// Waits until at most kPending of this thread's committed groups are still in flight.
template <int kPending>
__device__ __forceinline__ void wait_copies() {
#if defined(__CUDA_ARCH__)
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
#endif
}

// A thread's ring of kStages stages of kLoads 16-byte packets in dynamic shared memory, laid out
// [stage][load][thread] so that a warp's 16-byte accesses are consecutive (no bank conflicts).
template <int kStages, int kLoads>
struct PacketRing {
  uint4* mine;  // this thread's packet of stage 0, load 0
  int threads;  // the block's threads: the distance between two of one thread's packets
  static constexpr size_t bytes(int block_threads) { return size_t{16} * kStages * kLoads * block_threads; }
  __device__ uint4* at(int stage, int load) const { return mine + (stage * kLoads + load) * threads; }
  __device__ void fill(int stage, int load, const void* global) const { copy_async_16(at(stage, load), global); }
  __device__ uint4 get(int stage, int load) const { return *at(stage, load); }
};

// Streams a team's rows through a PacketRing: the team walks rows first, first + step, ... below
// `rows`; a row has `units` units, a unit being at most one packet per load per thread. Copies run
// kStages units ahead of the arithmetic, across row boundaries, so that a row's first units are in
// flight while the previous row finishes.
//   issue(stage, row, unit)    the thread's copies of one unit
//   begin(row), end(row)       around each row
//   consume(stage, row, unit)  the unit's arithmetic, once its copies have landed
// The loop body is one copy of consume: unrolled over a row's units, the kernel overflowed the
// instruction cache.
template <int kStages, class Issue, class Begin, class Consume, class End>
__device__ __forceinline__ void stream_rows(int64_t first, int64_t step, int64_t rows, int units, Issue&& issue,
                                            Begin&& begin, Consume&& consume, End&& end) {
  int64_t next_row = first;  // the producer's cursor, kStages units ahead of the consumer
  int next_unit = 0;
  auto produce = [&](int stage) {
    if (next_row < rows) issue(stage, next_row, next_unit);
    commit_copies();
    if (++next_unit == units) {
      next_unit = 0;
      next_row += step;
    }
  };
  for (int s = 0; s < kStages; ++s) produce(s);
  int stage = 0;
  for (int64_t row = first; row < rows; row += step) {
    begin(row);
    for (int unit = 0; unit < units; ++unit) {
      wait_copies<kStages - 1>();  // this unit's group, committed kStages groups ago, has landed
      consume(stage, row, unit);
      produce(stage);  // the stage just read takes the unit kStages ahead
      stage = stage + 1 == kStages ? 0 : stage + 1;
    }
    end(row);
  }
}


}  // namespace bitparity::gpu::device
