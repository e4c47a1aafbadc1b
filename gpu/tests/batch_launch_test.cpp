// LaunchBatch (gpu/common/batch_launch.h), the host side of batched launches, with made-up flush
// functions in place of kernels: which items go into which launch, in what order, and when a case's
// order forces what was collected out first. No GPU needed; the batched kernels themselves are held
// against the cases' runs alone by cuda_vs_ref_test (CaseBatches.EachCaseGetsWhatItGetsAlone).
#include "gpu/common/batch_launch.h"

#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace bitparity::gpu {
namespace {

struct Flushed {
  char kernel;
  std::vector<int> items;
  unsigned blocks;
  void* stream;
  std::string what;
};
std::vector<Flushed> flushed;

template <char kKernel>
void flush(const unsigned char* items, int count, unsigned blocks, void* stream, const char* what) {
  Flushed f{kKernel, {}, blocks, stream, what};
  for (int i = 0; i < count; ++i) {
    int v = 0;
    std::memcpy(&v, items + i * sizeof(int), sizeof(int));
    f.items.push_back(v);
  }
  flushed.push_back(f);
}

void add(LaunchBatch& b, BatchFlush f, int max_items, int item, unsigned blocks, void* stream = nullptr) {
  b.add(f, max_items, &item, sizeof item, blocks, stream, "made-up kernel");
}

// Each kernel's items go out in one launch a kernel (max_items at a time), in the order the kernels
// were first used, each launch as wide as its widest item.
TEST(LaunchBatch, OneLaunchAKernelInTheOrderOfFirstUse) {
  flushed.clear();
  LaunchBatch b;
  for (int c = 0; c < 5; ++c) {
    b.begin_case();
    add(b, &flush<'a'>, 3, 10 + c, 1 + c);
    add(b, &flush<'b'>, 8, 20 + c, 7);
  }
  EXPECT_TRUE(flushed.empty()) << "launched before launch_all";
  b.launch_all();
  ASSERT_EQ(flushed.size(), 3u);
  EXPECT_EQ(flushed[0].kernel, 'a');
  EXPECT_EQ(flushed[0].items, (std::vector<int>{10, 11, 12}));
  EXPECT_EQ(flushed[0].blocks, 3u);
  EXPECT_EQ(flushed[1].kernel, 'a');
  EXPECT_EQ(flushed[1].items, (std::vector<int>{13, 14}));
  EXPECT_EQ(flushed[1].blocks, 5u);
  EXPECT_EQ(flushed[2].kernel, 'b');
  EXPECT_EQ(flushed[2].items, (std::vector<int>{20, 21, 22, 23, 24}));
  EXPECT_EQ(flushed[2].what, "made-up kernel");
  EXPECT_EQ(b.items(), 10);
  EXPECT_EQ(b.launches(), 3);
  flushed.clear();
  b.launch_all();  // emptied
  EXPECT_TRUE(flushed.empty());
}

// Another stream is another group: a launch goes on its own case's stream.
TEST(LaunchBatch, StreamsAreKeptApart) {
  flushed.clear();
  LaunchBatch b;
  int s1 = 0, s2 = 0;
  add(b, &flush<'a'>, 8, 1, 1, &s1);
  b.begin_case();
  add(b, &flush<'a'>, 8, 2, 1, &s2);
  b.launch_all();
  ASSERT_EQ(flushed.size(), 2u);
  EXPECT_EQ(flushed[0].stream, &s1);
  EXPECT_EQ(flushed[1].stream, &s2);
}

// A case whose kernels come in the other order (b, then a, after a case of a, then b): launched
// group after group, its a would run before its b. What was collected goes out first, so that the
// case's b runs before its a.
TEST(LaunchBatch, ACaseOutOfTheGroupsOrderSendsWhatWasCollectedFirst) {
  flushed.clear();
  LaunchBatch b;
  b.begin_case();
  add(b, &flush<'a'>, 8, 1, 1);
  add(b, &flush<'b'>, 8, 2, 1);
  b.begin_case();
  add(b, &flush<'b'>, 8, 3, 1);
  EXPECT_TRUE(flushed.empty()) << "b after b keeps the order";
  add(b, &flush<'a'>, 8, 4, 1);
  ASSERT_EQ(flushed.size(), 2u) << "a after b: a, b, b went out first";
  EXPECT_EQ(flushed[0].items, (std::vector<int>{1}));
  EXPECT_EQ(flushed[1].items, (std::vector<int>{2, 3}));
  b.launch_all();
  ASSERT_EQ(flushed.size(), 3u);
  EXPECT_EQ(flushed[2].kernel, 'a');
  EXPECT_EQ(flushed[2].items, (std::vector<int>{4}));
  // The same kernel twice in a case: in one launch the two would run at once. The first goes out
  // before the second is collected.
  flushed.clear();
  b.begin_case();
  add(b, &flush<'a'>, 8, 5, 1);
  add(b, &flush<'a'>, 8, 6, 1);
  ASSERT_EQ(flushed.size(), 1u);
  EXPECT_EQ(flushed[0].items, (std::vector<int>{5}));
  b.launch_all();
  ASSERT_EQ(flushed.size(), 2u);
  EXPECT_EQ(flushed[1].items, (std::vector<int>{6}));
}

// A launch that add makes (a case out of the groups' order) and that fails is the batch's failure:
// launch_all throws it, after the rest was collected, rather than the case that happened to be
// adding.
TEST(LaunchBatch, AFailureOfALaunchMadeWhileCollectingIsThrownByLaunchAll) {
  flushed.clear();
  LaunchBatch b;
  const BatchFlush failing = [](const unsigned char*, int, unsigned, void*, const char*) {
    throw std::runtime_error("launch failed");
  };
  b.begin_case();
  add(b, failing, 8, 1, 1);
  EXPECT_NO_THROW(add(b, failing, 8, 2, 1));  // launches the first, which fails
  b.begin_case();
  add(b, &flush<'b'>, 8, 3, 1);
  EXPECT_THROW(b.launch_all(), std::runtime_error);
  EXPECT_TRUE(flushed.empty()) << "launched after the failure";
  EXPECT_NO_THROW(b.launch_all());  // thrown once; the batch is empty
}

// A plain launch after a collected one of the same case would run first: an error. Before the
// case's first collected launch, or in a case that collects nothing, it is not.
TEST(LaunchBatch, APlainLaunchAfterACollectedOneOfTheCaseIsAnError) {
  LaunchBatch b;
  b.begin_case();
  EXPECT_NO_THROW(b.note_direct_launch("k"));
  add(b, &flush<'a'>, 8, 1, 1);
  EXPECT_THROW(b.note_direct_launch("k"), std::logic_error);
  b.begin_case();
  EXPECT_NO_THROW(b.note_direct_launch("k"));
  flushed.clear();
  b.launch_all();
}

TEST(LaunchBatch, ItemsOfOneKernelHaveOneSize) {
  LaunchBatch b;
  add(b, &flush<'a'>, 8, 1, 1);
  b.begin_case();
  const double other = 2;
  EXPECT_THROW(b.add(&flush<'a'>, 8, &other, sizeof other, 1, nullptr, "k"), std::logic_error);
  EXPECT_THROW(b.add(nullptr, 8, &other, sizeof other, 1, nullptr, "k"), std::logic_error);
}

// The calling thread's batch while a CollectLaunches lives, and no other thread's; not nested.
TEST(LaunchBatch, CollectingIsTheCallingThreadsWhileItLasts) {
  EXPECT_EQ(collecting_launches(), nullptr);
  LaunchBatch b, other;
  {
    const CollectLaunches collecting(b);
    EXPECT_EQ(collecting_launches(), &b);
    LaunchBatch* seen = &other;
    std::thread([&] { seen = collecting_launches(); }).join();
    EXPECT_EQ(seen, nullptr);
    EXPECT_THROW(CollectLaunches nested(other), std::logic_error);
    EXPECT_EQ(collecting_launches(), &b);
  }
  EXPECT_EQ(collecting_launches(), nullptr);
}

// LaunchDirectly leaves the thread without a batch for its lifetime and gives the batch back after;
// where the thread collects nothing it changes nothing.
TEST(LaunchBatch, LaunchDirectlyPausesTheThreadsBatch) {
  LaunchBatch b;
  {
    const LaunchDirectly direct;
    EXPECT_EQ(collecting_launches(), nullptr);
  }
  EXPECT_EQ(collecting_launches(), nullptr);
  {
    const CollectLaunches collecting(b);
    {
      const LaunchDirectly direct;
      EXPECT_EQ(collecting_launches(), nullptr);
    }
    EXPECT_EQ(collecting_launches(), &b);
    // Not for a case that has collected a launch: that launch would run after the direct ones.
    b.begin_case();
    add(b, &flush<'a'>, 8, 1, 1);
    EXPECT_THROW(LaunchDirectly late, std::logic_error);
    EXPECT_EQ(collecting_launches(), &b);
    b.begin_case();
    {
      const LaunchDirectly direct;  // the next case may
      EXPECT_EQ(collecting_launches(), nullptr);
    }
  }
  EXPECT_EQ(collecting_launches(), nullptr);
}

}  // namespace
}  // namespace bitparity::gpu
