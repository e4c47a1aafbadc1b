// Parallel work with a sequential outcome: work(i) for i = 0, 1, 2, ... runs on several threads,
// and commit(i, result) sees the results one at a time in index order, as a plain loop would. The
// campaign runs its cases through it (`--jobs`), so that the report and the corpus do not depend on
// how many threads computed them.
#pragma once

#include <condition_variable>
#include <cstdint>
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
  // finish and commit, so the committed indices are always 0 .. n-1 for some n.
  std::function<bool(int64_t)> may_start;
  // Any thread, several at once.
  std::function<Result(int64_t)> work;
  // One call at a time, in index order. False ends the run at once: later results are dropped.
  std::function<bool(int64_t, Result&)> commit;
};

// Runs `jobs` threads, the calling one among them (jobs == 1 is a plain loop on the calling
// thread). At most `window` indices are started and not yet committed, which bounds the results
// held while a slow index (a long shrink) keeps the later ones from committing. The first exception
// of work or commit ends the run and is rethrown here once every thread has stopped.
template <typename Result>
void run_ordered(int jobs, int64_t window, const OrderedWork<Result>& w) {
  std::mutex mutex;
  std::condition_variable moved;  // an index committed, or the run ended
  int64_t next_start = 0, next_commit = 0;
  bool starts_ended = false, commits_ended = false, committing = false;
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
  auto worker = [&] {
    std::unique_lock<std::mutex> lock(mutex);
    for (;;) {
      moved.wait(lock, [&] { return starts_ended || next_start < next_commit + window; });
      if (starts_ended) return;
      bool may = false;
      try {
        may = w.may_start(next_start);
      } catch (...) {
        fail();
        return;
      }
      if (!may) {
        starts_ended = true;
        moved.notify_all();
        return;
      }
      const int64_t index = next_start++;
      lock.unlock();
      std::optional<Result> result;
      try {
        result.emplace(w.work(index));
      } catch (...) {
        lock.lock();
        fail();
        return;
      }
      lock.lock();
      finished.emplace(index, std::move(*result));
      commit_ready(lock);
    }
  };

  std::vector<std::thread> helpers;
  for (int t = 1; t < jobs; ++t) helpers.emplace_back(worker);
  worker();
  for (std::thread& t : helpers) t.join();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace bitparity::campaign
