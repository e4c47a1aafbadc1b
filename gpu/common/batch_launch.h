// Launches of several small cases folded into few: while run_batch (gpu/common/kernel_record.h)
// launches a batch's cases, a kernel launched through a batchable helper (launch_row_chunks for the
// row-chunk kernels, gpu/common/launch.cuh; a body's launch, such as the routing kernels'
// launch_body in gpu/routing.cu) is not launched at once but collected here, and the collected
// launches of one kernel are then launched together as one batched launch (the kernel's twin that
// takes up to 32 cases' arguments and finds its own by blockIdx.y). A small case costs the driver a launch
// call a kernel; a batch of 16 cases then costs one a kernel instantiation for all 16. Where the
// driver's calls bound a campaign's jobs (bench/NOTES.md, "Where the jobs wait"), that is what
// moves it.
//
// Order. A case's launches may depend on one another (the second reads what the first wrote), so
// they must run in the order the case made them; the cases are independent. Collected launches are
// kept in groups, one a kernel, in the order the groups were first used, and launched group after
// group: a case whose launches use groups in that order keeps its order. A collected launch whose
// group is that of the case's previous collected launch (it would run beside it) or comes before
// it (it would run first) would not, so that everything collected is launched first. A launch that
// is not collected (a plain kernel launch, whose check_launch is called while collecting) after one
// of the same case that is would run before it: that is an error of the launcher's code
// (std::logic_error), which no direction a record collects makes (KernelRecord::collect_launches); the GPU
// tests run every record through run_batch against its runs alone. (A copy or a memset after a
// collected launch is not seen here: a launcher whose kernels are collected makes none after them.)
// Host code, no CUDA types.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <vector>

namespace bitparity::gpu {

// Launches `count` collected items (each the bytes a group's helper wrote) as one batched launch of
// `blocks` blocks a case on `stream`; checks the launch as `what` (CudaError).
using BatchFlush = void (*)(const unsigned char* items, int count, unsigned blocks, void* stream, const char* what);

class LaunchBatch {
 public:
  LaunchBatch() = default;
  LaunchBatch(const LaunchBatch&) = delete;
  LaunchBatch& operator=(const LaunchBatch&) = delete;

  // The launches after this belong to the next case.
  void begin_case();
  // Collects one launch of `blocks` blocks: `item` (`bytes` bytes) for the group of `flush`, which
  // takes at most `max_items` items a launch, on `stream`; `what` names the kernel in errors and
  // is kept, not copied (a string literal). Where the case's order needs what was collected
  // launched first, it is launched here; a failure of it is thrown by the next launch_all.
  void add(BatchFlush flush, int max_items, const void* item, size_t bytes, unsigned blocks, void* stream,
           const char* what);
  // A launch that is not collected, made now (check_launch): std::logic_error where the current case
  // has a collected launch still waiting, which would run after it.
  void note_direct_launch(const char* what) const;
  // Whether the current case has a collected launch still waiting.
  bool case_collected() const { return case_last_group_ >= 0; }
  // Launches everything collected, group after group in the order of their first use, each in
  // launches of at most its max_items items; empties the batch. Throws the first failure: of a
  // launch made in add, or of one here (what was not launched is dropped).
  void launch_all();

  // Items collected since the batch was made, and the batched launches made for them.
  int64_t items() const { return items_; }
  int64_t launches() const { return launches_; }

 private:
  struct Group {
    BatchFlush flush = nullptr;
    void* stream = nullptr;
    int max_items = 1;
    size_t item_bytes = 0;
    const char* what = "";
    std::vector<unsigned char> bytes;  // the items one after another
    std::vector<unsigned> blocks;      // each item's
  };
  std::vector<Group> groups_;
  int case_last_group_ = -1;  // the group of the current case's last collected launch
  int64_t items_ = 0, launches_ = 0;
  std::exception_ptr failure_;  // of the launches add made, until launch_all throws it
};

// The calling thread's batch while a CollectLaunches lives on it, else nullptr.
LaunchBatch* collecting_launches();

// Makes `batch` the calling thread's (collecting_launches) for its lifetime; not nested.
class CollectLaunches {
 public:
  explicit CollectLaunches(LaunchBatch& batch);
  ~CollectLaunches();
  CollectLaunches(const CollectLaunches&) = delete;
  CollectLaunches& operator=(const CollectLaunches&) = delete;
};

// Makes the calling thread launch directly for its lifetime (collecting_launches() is nullptr), for
// a case whose launches cannot all be collected (a kernel with no batched twin among them): every
// launch of that case is then made at once, before what the batch has collected of earlier cases,
// which its memory does not touch (the cases are independent). Not for a case that has collected a
// launch already (std::logic_error: that launch would run after the direct ones). Nests inside
// CollectLaunches; a no-op where the thread does not collect.
class LaunchDirectly {
 public:
  LaunchDirectly();
  ~LaunchDirectly();
  LaunchDirectly(const LaunchDirectly&) = delete;
  LaunchDirectly& operator=(const LaunchDirectly&) = delete;

 private:
  LaunchBatch* paused_;
};

}  // namespace bitparity::gpu
