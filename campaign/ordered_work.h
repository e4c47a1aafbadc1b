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
#include <map>
#include <mutex>
#include <optional>
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
  // With runs (run_ordered's `run`): what a run's indices share, done once for the run's indices
  // [first, last) by the thread that takes the run, before any of them is worked. Any thread,
  // several at once (on different runs). Unset: nothing.
  std::function<void(int64_t first, int64_t last)> prepare;
  // Whether an index already started (may_start'ed, its run prepared) may still be worked (an
  // interrupt, a budget): asked just before work; any thread, several at once. False ends the run
  // there: that index is not worked, and no index from it on commits. Unset: every index started
  // is worked.
  std::function<bool(int64_t)> may_go_on;
};

// Runs `jobs` threads, the calling one among them (jobs == 1 is a plain loop on the calling
// thread). At most `window` indices are started and not yet committed (and the rest of a run begun
// below it), which bounds the results held while a slow index (a long shrink) keeps the later ones
// from committing.
//
// Indices are taken in runs of `run` (from a multiple of `run` to the next, each index
// may_start'ed in order as the run is taken). The thread that takes a run prepares it; its indices
// are then open to every thread, and a thread works an open index before it takes a new run. So
// work that a run's indices share (the campaign's batches) is done by one thread while the others
// prepare other runs or work open indices: no thread waits for another's preparation, and the
// last runs' indices still spread over every thread.
//
// The first exception of prepare, work or commit ends the run and is rethrown here once every
// thread has stopped.
template <typename Result>
void run_ordered(int jobs, int64_t window, const OrderedWork<Result>& w, int64_t run = 1) {
  run = std::max<int64_t>(run, 1);
  std::mutex mutex;
  std::condition_variable moved;  // an index committed or opened, or the run ended
  int64_t next_start = 0, next_commit = 0;
  bool starts_ended = false, commits_ended = false, committing = false;
  int preparing = 0;          // runs taken and being prepared
  std::deque<int64_t> open;   // indices of prepared runs, not yet worked, in order
  std::exception_ptr failure;
  std::map<int64_t, Result> finished;  // results waiting for the indices before them

  auto fail = [&] {  // with the lock held
    if (!failure) failure = std::current_exception();
    starts_ended = commits_ended = true;
    moved.notify_all();
  };
  // Commits what is ready, in order. Only one thread commits at a time (`committing`), without the
  // lock, so that the others keep starting indices while an entry is written.
  auto commit_ready = [&](std::unique_lock<std::mutex>& lock) {
    if (committing) return;  // that thread will find our result too: it looks again after each commit
    committing = true;
    for (auto it = finished.find(next_commit); !commits_ended && it != finished.end();
         it = finished.find(next_commit)) {
      Result result = std::move(it->second);
      finished.erase(it);
      lock.unlock();
      bool keep_going = false;
      try {
        keep_going = w.commit(next_commit, result);
      } catch (...) {
        lock.lock();
        committing = false;
        fail();
        return;
      }
      lock.lock();
      ++next_commit;
      if (!keep_going) starts_ended = commits_ended = true;
      moved.notify_all();
    }
    committing = false;
  };
  auto may_take_run = [&] { return !starts_ended && next_start < next_commit + window; };
  auto worker = [&] {
    std::unique_lock<std::mutex> lock(mutex);
    for (;;) {
      moved.wait(lock, [&] {
        return commits_ended || !open.empty() || may_take_run() || (starts_ended && preparing == 0);
      });
      if (commits_ended) return;
      if (!open.empty()) {
        const int64_t index = open.front();
        open.pop_front();
        lock.unlock();
        std::optional<Result> result;
        try {
          if (!w.may_go_on || w.may_go_on(index)) result.emplace(w.work(index));
        } catch (...) {
          lock.lock();
          fail();
          return;
        }
        lock.lock();
        if (!result) {
          // Not worked: nothing from it on commits (commits stop in front of it), and no run starts.
          if (!starts_ended) {
            starts_ended = true;
            moved.notify_all();
          }
          continue;
        }
        finished.emplace(index, std::move(*result));
        commit_ready(lock);
        continue;
      }
      if (!may_take_run()) return;  // starts ended, nothing open, nothing being prepared
      // The run: [first, last), each index may_start'ed in order; the first false ends the starts.
      const int64_t first = next_start;
      const int64_t run_end = (first / run + 1) * run;
      int64_t last = first;
      try {
        while (last < run_end && w.may_start(last)) ++last;
      } catch (...) {
        fail();
        return;
      }
      next_start = last;
      if (last < run_end) {
        starts_ended = true;
        moved.notify_all();
      }
      if (first == last) continue;
      ++preparing;
      lock.unlock();
      try {
        if (w.prepare) w.prepare(first, last);
      } catch (...) {
        lock.lock();
        --preparing;
        fail();
        return;
      }
      lock.lock();
      --preparing;
      for (int64_t index = first; index < last; ++index) open.push_back(index);
      moved.notify_all();
    }
  };

  std::vector<std::thread> helpers;
  for (int t = 1; t < jobs; ++t) helpers.emplace_back(worker);
  worker();
  for (std::thread& t : helpers) t.join();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace bitparity::campaign
