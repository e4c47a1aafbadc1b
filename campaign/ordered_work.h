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
  span = std::max<int64_t>(span, 1);
  max_preparing = std::max(max_preparing, 1);
  std::mutex mutex;
  std::condition_variable moved;  // an index committed or opened, or the run ended
  int64_t next_start = 0, next_commit = 0;
  bool starts_ended = false, commits_ended = false, committing = false;
  struct Group {
    bool ready = false;
    std::vector<int64_t> waiting;  // its indices started while it was prepared
  };
  std::map<int64_t, Group> groups;  // by first index; those whose span has not been passed
  int preparing = 0;                // groups being prepared
  bool next_begins_group = false;   // whether next_start is the first index of its group
  std::deque<int64_t> open;         // started indices whose group is ready, not yet worked
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
  auto may_start_more = [&] {
    return !starts_ended && next_start < next_commit + window && !(next_begins_group && preparing >= max_preparing);
  };
  // Whether next_start begins a group; false without groups. With the lock held.
  int64_t next_group = -1;  // group(next_start), or -1
  auto look_at_next = [&] {
    next_group = -1;
    if (w.group) {
      try {
        next_group = w.group(next_start);
      } catch (...) {
        fail();
      }
    }
    next_begins_group = next_group == next_start;
  };
  auto worker = [&] {
    std::unique_lock<std::mutex> lock(mutex);
    for (;;) {
      moved.wait(lock, [&] {
        return commits_ended || !open.empty() || may_start_more() || (starts_ended && preparing == 0);
      });
      if (commits_ended) return;
      int64_t index = 0;
      if (!open.empty()) {
        index = open.front();
        open.pop_front();
      } else {
        if (!may_start_more()) return;  // starts ended, nothing open, nothing being prepared
        try {
          if (!w.may_start(next_start)) {
            starts_ended = true;
            moved.notify_all();
            continue;
          }
        } catch (...) {
          fail();
          return;
        }
        index = next_start++;
        const int64_t g = next_group;
        look_at_next();
        if (commits_ended) return;  // group() threw
        if (w.group && index % span == 0)  // no index of an earlier span's groups starts from here on
          for (auto it = groups.begin(); it != groups.end() && it->first < index;)
            it = it->second.ready ? groups.erase(it) : std::next(it);
        if (g >= 0) {
          const auto [it, fresh] = groups.try_emplace(g);
          if (!fresh && !it->second.ready) {
            it->second.waiting.push_back(index);
            continue;
          }
          if (fresh) {
            ++preparing;
            lock.unlock();
            try {
              if (g != index) throw std::logic_error("ordered work: index " + std::to_string(index) + " starts group " + std::to_string(g));
              if (w.prepare) w.prepare(g);
            } catch (...) {
              lock.lock();
              --preparing;
              fail();
              return;
            }
            lock.lock();
            --preparing;
            it->second.ready = true;
            for (const int64_t i : it->second.waiting) open.push_back(i);
            it->second.waiting.clear();
            moved.notify_all();
            if (commits_ended) return;  // the run ended while it was prepared
          }
        }
      }
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
        // Not worked: nothing from it on commits (commits stop in front of it), and no index starts.
        if (!starts_ended) {
          starts_ended = true;
          moved.notify_all();
        }
        continue;
      }
      finished.emplace(index, std::move(*result));
      commit_ready(lock);
    }
  };

  look_at_next();
  if (failure) std::rethrow_exception(failure);
  std::vector<std::thread> helpers;
  for (int t = 1; t < jobs; ++t) helpers.emplace_back(worker);
  worker();
  for (std::thread& t : helpers) t.join();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace bitparity::campaign
