// Parallel work with a sequential outcome: work(i) for i = 0, 1, 2, ... runs on several threads,
// and commit(i, result) sees the results one at a time in index order, as a plain loop would. The
// campaign runs its cases through it (`--jobs`), so that the report and the corpus do not depend on
// how many threads computed them.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <iterator>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace bitparity::campaign {

template <typename Result>
struct OrderedWork {
  // Whether index i may start (a budget, a case bound, an interrupt). Called for i = 0, 1, ... in
  // order, one call at a time; the first false ends the run, and the indices already started still
  // finish and commit (but see may_go_on), so the committed indices are always 0 .. n-1 for some n.
  std::function<bool(int64_t)> may_start;
  // Any thread, several at once.
  std::function<Result(int64_t)> work;
  // One call at a time, in index order. False ends the run at once: later results are dropped.
  std::function<bool(int64_t, Result&)> commit;
  // Indices that share work (the campaign's batches) form a group, named by its first index:
  // group(i) <= i, and a group's indices lie in one aligned span of run_ordered's `span` indices
  // ([k * span, (k + 1) * span)); -1: i is in no group (worked as it starts). Unset: no groups.
  // Called with run_ordered's lock held: quick, no locks of its own.
  std::function<int64_t(int64_t)> group;
  // The work group g shares, done once, by the thread that starts index g, before any index of
  // the group is worked. Any thread, several at once (on different groups).
  std::function<void(int64_t g)> prepare;
  // Whether an index already started may still be worked (an interrupt, a budget): asked just
  // before work; any thread, several at once. False ends the run there: that index is not worked,
  // and no index from it on commits. Unset: every index started is worked.
  std::function<bool(int64_t)> may_go_on;
};

namespace detail {

// One run_ordered call: its state under one lock, and the steps each thread takes.
template <typename Result>
class OrderedRun {
 public:
  OrderedRun(int64_t window, const OrderedWork<Result>& w, int64_t span, int max_preparing)
      : w_(w), window_(window), span_(std::max<int64_t>(span, 1)), max_preparing_(std::max(max_preparing, 1)) {}

  void run(int jobs) {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      look_at_next();
    }
    if (failure_) std::rethrow_exception(failure_);  // group(0) threw; no thread started yet
    std::vector<std::thread> helpers;
    for (int t = 1; t < jobs; ++t) helpers.emplace_back([this] { worker(); });
    worker();
    for (std::thread& t : helpers) t.join();
    if (failure_) std::rethrow_exception(failure_);
  }

 private:
  struct Group {
    bool ready = false;
    std::vector<int64_t> waiting;  // its indices started while it was prepared
  };
  enum class Step { kWork, kAgain, kStop };  // what a thread does next

  void worker() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      moved_.wait(lock, [&] {
        return commits_ended_ || !open_.empty() || may_start_more() || (starts_ended_ && preparing_ == 0);
      });
      if (commits_ended_) return;
      int64_t index = 0;
      if (!open_.empty()) {
        index = open_.front();
        open_.pop_front();
      } else {
        if (!may_start_more()) return;  // starts ended, nothing open, nothing being prepared
        const Step step = start(lock, index);
        if (step == Step::kStop) return;
        if (step == Step::kAgain) continue;
      }
      if (!work(lock, index)) return;
    }
  }

  // Starts next_start (index): its group set aside while another thread prepares it, or prepared
  // here when the index begins it. With the lock held.
  Step start(std::unique_lock<std::mutex>& lock, int64_t& index) {
    try {
      if (!w_.may_start(next_start_)) {
        starts_ended_ = true;
        moved_.notify_all();
        return Step::kAgain;
      }
    } catch (...) {
      fail();
      return Step::kStop;
    }
    index = next_start_++;
    const int64_t g = next_group_;
    look_at_next();
    if (commits_ended_) return Step::kStop;  // group() threw
    if (w_.group && index % span_ == 0)  // no index of an earlier span's groups starts from here on
      for (auto it = groups_.begin(); it != groups_.end() && it->first < index;)
        it = it->second.ready ? groups_.erase(it) : std::next(it);
    if (g < 0) return Step::kWork;
    const auto [it, fresh] = groups_.try_emplace(g);
    if (!fresh && !it->second.ready) {
      it->second.waiting.push_back(index);
      return Step::kAgain;
    }
    if (!fresh) return Step::kWork;
    ++preparing_;
    lock.unlock();
    try {
      if (g != index) throw std::logic_error("ordered work: index " + std::to_string(index) + " starts group " + std::to_string(g));
      if (w_.prepare) w_.prepare(g);
    } catch (...) {
      lock.lock();
      --preparing_;
      fail();
      return Step::kStop;
    }
    lock.lock();
    --preparing_;
    it->second.ready = true;
    for (const int64_t i : it->second.waiting) open_.push_back(i);
    it->second.waiting.clear();
    moved_.notify_all();
    return commits_ended_ ? Step::kStop : Step::kWork;  // the run may have ended while it was prepared
  }

  // Works `index` (unless may_go_on says no) and commits what is ready. False: this thread stops.
  // Called and returns with the lock held.
  bool work(std::unique_lock<std::mutex>& lock, int64_t index) {
    lock.unlock();
    std::optional<Result> result;
    try {
      if (!w_.may_go_on || w_.may_go_on(index)) result.emplace(w_.work(index));
    } catch (...) {
      lock.lock();
      fail();
      return false;
    }
    lock.lock();
    if (!result) {
      // Not worked: nothing from it on commits (commits stop in front of it), and no index starts.
      if (!starts_ended_) {
        starts_ended_ = true;
        moved_.notify_all();
      }
      return true;
    }
    finished_.emplace(index, std::move(*result));
    commit_ready(lock);
    return true;
  }

  // Commits what is ready, in order. Only one thread commits at a time (committing_), without the
  // lock, so that the others keep starting indices while an entry is written.
  void commit_ready(std::unique_lock<std::mutex>& lock) {
    if (committing_) return;  // that thread will find our result too: it looks again after each commit
    committing_ = true;
    for (auto it = finished_.find(next_commit_); !commits_ended_ && it != finished_.end();
         it = finished_.find(next_commit_)) {
      Result result = std::move(it->second);
      finished_.erase(it);
      lock.unlock();
      bool keep_going = false;
      try {
        keep_going = w_.commit(next_commit_, result);
      } catch (...) {
        lock.lock();
        committing_ = false;
        fail();
        return;
      }
      lock.lock();
      ++next_commit_;
      if (!keep_going) starts_ended_ = commits_ended_ = true;
      moved_.notify_all();
    }
    committing_ = false;
  }

  bool may_start_more() const {
    return !starts_ended_ && next_start_ < next_commit_ + window_ &&
           !(next_group_ == next_start_ && preparing_ >= max_preparing_);
  }

  // next_group_ = group(next_start_), or -1 without groups. With the lock held.
  void look_at_next() {
    next_group_ = -1;
    if (!w_.group) return;
    try {
      next_group_ = w_.group(next_start_);
    } catch (...) {
      fail();
    }
  }

  void fail() {  // with the lock held
    if (!failure_) failure_ = std::current_exception();
    starts_ended_ = commits_ended_ = true;
    moved_.notify_all();
  }

  const OrderedWork<Result>& w_;
  const int64_t window_, span_;
  const int max_preparing_;
  std::mutex mutex_;
  std::condition_variable moved_;  // an index committed or opened, or the run ended
  // Under mutex_:
  int64_t next_start_ = 0, next_commit_ = 0;
  int64_t next_group_ = -1;  // group(next_start_), or -1
  bool starts_ended_ = false, commits_ended_ = false, committing_ = false;
  std::map<int64_t, Group> groups_;  // by first index; those whose span has not been passed
  int preparing_ = 0;                // groups being prepared
  std::deque<int64_t> open_;         // started indices whose group is ready, not yet worked
  std::exception_ptr failure_;
  std::map<int64_t, Result> finished_;  // results waiting for the indices before them
};

}  // namespace detail

// Runs `jobs` threads, the calling one among them (jobs == 1 is a plain loop on the calling
// thread). At most `window` indices are started and not yet committed, which bounds the results
// held while a slow index (a long shrink) keeps the later ones from committing.
//
// With groups, a thread that starts an index of a group another thread is still preparing does not
// wait for it: the index is set aside, and the thread starts the next one (so it prepares the next
// group meanwhile). When a group is prepared, its indices set aside are open to every thread, and a
// thread works an open index before it starts a new one. At most `max_preparing` groups are
// prepared at once (the calls the preparation's backend takes at once): an index that would begin
// one more waits, so that the groups next in line are not held up by later ones.
//
// The first exception of prepare, work or commit ends the run and is rethrown here once every
// thread has stopped.
template <typename Result>
void run_ordered(int jobs, int64_t window, const OrderedWork<Result>& w, int64_t span = 1,
                 int max_preparing = std::numeric_limits<int>::max()) {
  detail::OrderedRun<Result>(window, w, span, max_preparing).run(jobs);
}

}  // namespace bitparity::campaign
