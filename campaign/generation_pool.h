// Cases drawn ahead in processes of their own, so that a campaign's generation runs on several
// cores. RapidCheck keeps its implicit parameters (gen::exec's handler) in process-wide stacks
// that are not synchronized, so one process draws one case at a time; a campaign whose sides are
// fast (small cases on a GPU) is then bound by that one thread. The pool forks `processes` copies
// of the campaign's process when it is made, before the campaign's threads start; each copy draws
// the cases it is asked for, one at a time, and sends each back over a socket as it is drawn. A
// process is sent its requests in groups (the lookahead topped up once half of it is taken), and a
// take is woken by its own index's answer only, so that small cases cost few wake-ups. A case's draw is a
// pure function of its index (the campaign's seed, target and size rules), so the cases are the
// same whichever process drew them, and the report is the one of a campaign that draws in its own
// process.
//
// The campaign asks for each local case index once, in about increasing order (take); the pool
// keeps between half and all of the next `lookahead` indices in flight at the processes with the fewest waiting, within a
// bound on the bytes of cases drawn and not yet taken (those in flight counted at the mean size of
// the cases drawn so far). No call blocks on a socket while the pool's lock is held: requests a
// process has no room for wait in its outbox until it answers.
//
// The process may already run library threads when the pool forks it (the CUDA driver's, once a
// backend asked whether a device is there); a copy runs only the generators and the contracts'
// input checks, which use neither the device nor those threads' locks.
//
// A process that dies (a generator that crashes, the OOM killer) or draws one case for longer than
// kPoolDrawSeconds (then it is killed) costs the case it was drawing, which is answered as not
// drawn with the reason (Drawn::lost); its other waiting indices go to the processes still alive,
// and when none is, take says so and the campaign draws in its own process again.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <sys/types.h>

#include "core/case.h"

namespace bitparity::campaign {

// One draw: the case, or none with the reason (a generator's error, a process that died).
struct Drawn {
  std::optional<Case> c;
  std::string error;
  bool lost = false;  // the process drawing it ended or was killed; `error` says how
};

// The case as bytes between a generator process and its campaign, and back. Not a file format:
// both ends are the same program. decode throws std::runtime_error on bytes that encode did not write.
std::string encode_case(const Case& c);
Case decode_case(std::string_view bytes);

// Cases drawn or in flight and not yet taken, at most about this many bytes of tensors (beyond the
// indices up to the one a take waits for).
inline constexpr size_t kPoolWaitingBytes = size_t{512} << 20;
// The campaign keeps max(2 × its block, this × processes) indices in flight: groups of several
// requests a process.
inline constexpr int64_t kPoolLookaheadPerProcess = 16;
// A process that draws one case for longer is killed (a generator that hangs), and the case counted
// as not drawn.
inline constexpr double kPoolDrawSeconds = 300;

class GenerationPool {
 public:
  // Forks `processes` (>= 1) copies of this process; in each, draw(local) runs for every index it
  // is sent (it must not throw: a failed draw is a Drawn without a case), and the process ends when
  // the pool does (or its parent dies). `end` bounds the local
  // indices asked for ahead (none: unbounded). Call it before the campaign starts threads of its own:
  // a copy runs only draw, on the forking thread's state. When no process can be made, every take
  // answers none.
  GenerationPool(int processes, int64_t lookahead, std::optional<int64_t> end,
                 std::function<Drawn(int64_t local)> draw, double draw_seconds = kPoolDrawSeconds);
  ~GenerationPool();
  GenerationPool(const GenerationPool&) = delete;
  GenerationPool& operator=(const GenerationPool&) = delete;

  // Any thread, once per index: the draw of `local`, waited for, with the indices after it sent
  // ahead. None when no process is alive to draw it: the caller draws it in its own process.
  std::optional<Drawn> take(int64_t local);

  int alive() const;  // processes still drawing
  // Why a process could not be made ("fork: Resource temporarily unavailable"), or empty.
  const std::string& failure() const { return failure_; }

 private:
  using Clock = std::chrono::steady_clock;
  struct Child {
    pid_t pid = -1;
    int fd = -1;                  // this end of the socket: requests out, draws in
    // Under mutex_:
    bool alive = false;
    std::deque<int64_t> waiting;  // indices sent (or in the outbox) and not answered, in order
    std::string outbox;           // request bytes the socket had no room for yet
    Clock::time_point since;      // of its last answer, or of its first request after being idle
    std::string killed_because;   // set when the pool killed it
    std::thread reader;
  };

  [[noreturn]] static void serve(int fd, pid_t parent, const std::function<Drawn(int64_t)>& draw);
  void read_answers(Child& child);
  void child_ended(Child& child, const std::string& why);   // mutex_ held
  bool send(int64_t local);                                 // mutex_ held; false: no process alive
  void flush(Child& child);                                 // mutex_ held; never blocks
  void flush_all();                                         // mutex_ held; never blocks
  void send_ahead(int64_t through);                         // mutex_ held
  void kill_stuck();                                        // mutex_ held

  const int64_t lookahead_;
  const double draw_seconds_;
  const std::optional<int64_t> end_;
  std::vector<Child> children_;
  mutable std::mutex mutex_;
  std::map<int64_t, std::condition_variable*> awaited_;  // index -> the take waiting for it
  int64_t next_to_send_ = 0;                 // every index below it was sent (or left to the caller)
  std::map<int64_t, Drawn> answers_;         // drawn, not yet taken
  size_t answer_bytes_ = 0;                  // their tensors' bytes
  size_t drawn_bytes_ = 0, drawn_ = 0;       // every answer's tensors so far: their mean sizes those in flight
  std::set<int64_t> unserved_;               // indices no process will draw: take answers none
  bool closing_ = false;
  std::string failure_;  // why the last process that could not be made could not
};

}  // namespace bitparity::campaign
