#include "gpu/common/batch_launch.h"

#include <algorithm>
#include <exception>
#include <stdexcept>
#include <string>
#include <utility>

namespace bitparity::gpu {
namespace {

thread_local LaunchBatch* current = nullptr;

}  // namespace

void LaunchBatch::begin_case() { case_last_group_ = -1; }

void LaunchBatch::add(BatchFlush flush, int max_items, const void* item, size_t bytes, unsigned blocks, void* stream,
                      const char* what) {
  if (!flush || max_items < 1 || bytes == 0) throw std::logic_error("LaunchBatch::add: no flush, items or bytes");
  auto find = [&] {
    return std::find_if(groups_.begin(), groups_.end(),
                        [&](const Group& g) { return g.flush == flush && g.stream == stream; });
  };
  auto it = find();
  // The group of the case's last launch or one before it: launched in group order, this launch
  // would run with that one or before it. Everything collected goes first, and the collecting
  // starts again. A failure of those launches is kept for launch_all to throw, so that it is the
  // batch's failure and not this case's alone.
  if (it != groups_.end() && static_cast<int>(it - groups_.begin()) <= case_last_group_) {
    try {
      launch_all();
    } catch (...) {
      if (!failure_) failure_ = std::current_exception();
    }
    it = groups_.end();
  }
  if (it == groups_.end()) {
    Group g;
    g.flush = flush;
    g.stream = stream;
    g.max_items = max_items;
    g.item_bytes = bytes;
    g.what = what;
    groups_.push_back(std::move(g));
    it = std::prev(groups_.end());
  }
  if (it->item_bytes != bytes || it->max_items != max_items)
    throw std::logic_error("LaunchBatch::add: one kernel's items of different sizes");
  const auto* p = static_cast<const unsigned char*>(item);
  it->bytes.insert(it->bytes.end(), p, p + bytes);
  it->blocks.push_back(blocks);
  case_last_group_ = static_cast<int>(it - groups_.begin());
  ++items_;
}

void LaunchBatch::note_direct_launch(const char* what) const {
  if (case_last_group_ >= 0)
    throw std::logic_error(std::string("a launch of ") + what +
                           " follows a collected launch of the same case, which would run after it "
                           "(gpu/common/batch_launch.h)");
}

void LaunchBatch::launch_all() {
  std::vector<Group> groups = std::move(groups_);
  groups_.clear();
  case_last_group_ = -1;
  if (failure_) std::rethrow_exception(std::exchange(failure_, nullptr));
  for (const Group& g : groups) {
    const int n = static_cast<int>(g.blocks.size());
    for (int first = 0; first < n; first += g.max_items) {
      const int count = std::min(g.max_items, n - first);
      const unsigned blocks = *std::max_element(g.blocks.begin() + first, g.blocks.begin() + first + count);
      g.flush(g.bytes.data() + static_cast<size_t>(first) * g.item_bytes, count, blocks, g.stream, g.what);
      ++launches_;
    }
  }
}

LaunchBatch* collecting_launches() { return current; }

CollectLaunches::CollectLaunches(LaunchBatch& batch) {
  if (current) throw std::logic_error("CollectLaunches: the thread already collects launches");
  current = &batch;
}

CollectLaunches::~CollectLaunches() { current = nullptr; }

LaunchDirectly::LaunchDirectly() : paused_(current) {
  if (paused_ && paused_->case_collected())
    throw std::logic_error("LaunchDirectly: the case has a collected launch, which would run after its direct ones");
  current = nullptr;
}

LaunchDirectly::~LaunchDirectly() { current = paused_; }

}  // namespace bitparity::gpu
