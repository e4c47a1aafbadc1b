#include "campaign/generation_pool.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <utility>

#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/process_status.h"

namespace bitparity::campaign {
namespace {

// ---- the bytes of a case -------------------------------------------------------------------------

class Writer {
 public:
  void u64(uint64_t v) { bytes(&v, sizeof v); }
  void i64(int64_t v) { bytes(&v, sizeof v); }
  void u8(uint8_t v) { bytes(&v, 1); }
  void str(std::string_view s) {
    u64(s.size());
    bytes(s.data(), s.size());
  }
  void bytes(const void* p, size_t n) { out_.append(static_cast<const char*>(p), n); }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  uint64_t u64() { return pod<uint64_t>(); }
  int64_t i64() { return pod<int64_t>(); }
  uint8_t u8() { return pod<uint8_t>(); }
  std::string_view str() { return bytes(u64()); }
  std::string_view bytes(uint64_t n) {
    if (n > in_.size() - at_) throw std::runtime_error("a drawn case's bytes end early");
    const std::string_view s = in_.substr(at_, n);
    at_ += n;
    return s;
  }
  bool done() const { return at_ == in_.size(); }

 private:
  template <typename T>
  T pod() {
    T v;
    std::memcpy(&v, bytes(sizeof v).data(), sizeof v);
    return v;
  }
  std::string_view in_;
  size_t at_ = 0;
};

constexpr uint8_t kLastDType = static_cast<uint8_t>(DType::kI64);
constexpr uint64_t kMaxFrameBytes = uint64_t{1} << 36;  // far above any case a generator draws

// A generator process reads up to kServeGroup requests at a time.
constexpr size_t kServeGroup = 256;
// The campaign's side reads answers this many bytes at a time (more where a frame begun is larger).
constexpr size_t kReadChunkBytes = size_t{256} << 10;

size_t tensor_bytes(const Case& c) {
  size_t n = 0;
  for (const auto& [name, t] : c.inputs) n += t.nbytes();
  return n;
}

// ---- the socket ------------------------------------------------------------------------------------

bool write_all(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// A draw on the wire: [u64 length][i64 local][u8 1 case | 0 none][the case's bytes | the error's text].
std::string frame_of(int64_t local, const Drawn& d) {
  Writer w;
  w.i64(local);
  w.u8(d.c ? 1 : 0);
  std::string body = w.take();
  body += d.c ? encode_case(*d.c) : d.error;
  Writer framed;
  framed.u64(body.size());
  framed.bytes(body.data(), body.size());
  return framed.take();
}

}  // namespace

std::string encode_case(const Case& c) {
  Writer w;
  w.str(c.op);
  w.u8(c.direction == Direction::kForward ? 0 : 1);
  w.u64(c.attrs.size());
  for (const auto& [name, value] : c.attrs) {
    w.str(name);
    w.u8(static_cast<uint8_t>(value.index()));
    std::visit(
        [&](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, std::string>) w.str(v);
          else if constexpr (std::is_same_v<T, bool>) w.u8(v ? 1 : 0);
          else w.bytes(&v, sizeof v);
        },
        value);
  }
  w.u64(c.inputs.size());
  for (const auto& [name, t] : c.inputs) {
    w.str(name);
    w.u8(static_cast<uint8_t>(t.dtype()));
    // A default-constructed tensor (no shape, no bytes) is not the rank-0 tensor of one element.
    w.u8(t.shape().empty() && t.nbytes() == 0 ? 1 : 0);
    w.u64(t.shape().size());
    for (const int64_t d : t.shape()) w.i64(d);
    w.bytes(t.data(), t.nbytes());
  }
  return w.take();
}

Case decode_case(std::string_view bytes) {
  Reader r(bytes);
  Case c;
  c.op = std::string(r.str());
  const uint8_t direction = r.u8();
  if (direction > 1) throw std::runtime_error("a drawn case's direction is not 0 or 1");
  c.direction = direction == 0 ? Direction::kForward : Direction::kBackward;
  for (uint64_t n = r.u64(), i = 0; i < n; ++i) {
    std::string name(r.str());
    AttrValue value;
    switch (r.u8()) {
      case 0: value = r.u8() != 0; break;
      case 1: value = r.i64(); break;
      case 2: {
        double v;
        std::memcpy(&v, r.bytes(sizeof v).data(), sizeof v);
        value = v;
        break;
      }
      case 3: value = std::string(r.str()); break;
      default: throw std::runtime_error("a drawn case's attribute type is unknown");
    }
    c.attrs.emplace(std::move(name), std::move(value));
  }
  for (uint64_t n = r.u64(), i = 0; i < n; ++i) {
    std::string name(r.str());
    const uint8_t dtype = r.u8();
    if (dtype > kLastDType) throw std::runtime_error("a drawn case's dtype is unknown");
    if (r.u8() == 1) {
      if (r.u64() != 0) throw std::runtime_error("a drawn case's empty tensor has a shape");
      Tensor t;
      if (t.dtype() != static_cast<DType>(dtype)) throw std::runtime_error("a drawn case's empty tensor has a dtype");
      c.inputs.emplace(std::move(name), std::move(t));
      continue;
    }
    const uint64_t rank = r.u64();
    if (rank > static_cast<uint64_t>(kMaxTensorRank)) throw std::runtime_error("a drawn case's rank is too large");
    Shape shape(rank);
    for (int64_t& d : shape) d = r.i64();
    check_shape_limits(shape);
    Tensor t(static_cast<DType>(dtype), shape);
    const std::string_view data = r.bytes(t.nbytes());
    std::memcpy(t.data(), data.data(), data.size());
    c.inputs.emplace(std::move(name), std::move(t));
  }
  if (!r.done()) throw std::runtime_error("a drawn case has bytes after its end");
  return c;
}

GenerationPool::GenerationPool(int processes, int64_t lookahead, std::optional<int64_t> end,
                               std::function<Drawn(int64_t local)> draw, double draw_seconds)
    : lookahead_(std::max<int64_t>(lookahead, 1)), draw_seconds_(draw_seconds), end_(end), children_(static_cast<size_t>(std::max(processes, 0))) {
  // Every process first, then the readers: a process forked after a reader thread started would
  // copy one more thread's state.
  const pid_t parent = getpid();
  for (Child& child : children_) {
    int fds[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
      failure_ = std::string("socketpair: ") + std::strerror(errno);
      continue;
    }
    const pid_t pid = fork();
    if (pid < 0) {
      failure_ = std::string("fork: ") + std::strerror(errno);
      close(fds[0]);
      close(fds[1]);
      continue;
    }
    if (pid == 0) {
      close(fds[0]);
      serve(fds[1], parent, draw);
    }
    close(fds[1]);
    child.pid = pid;
    child.fd = fds[0];
    child.alive = true;
  }
  for (Child& child : children_)
    if (child.alive) child.reader = std::thread([this, &child] { read_answers(child); });
}

void GenerationPool::serve(int fd, pid_t parent, const std::function<Drawn(int64_t)>& draw) {
  // The copy ends with its campaign: a parent that dies leaves no process drawing for nobody.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(0);
  // Only the socket stays open: the campaign's other descriptors (workers' sockets, devices, the
  // corpus) stay the campaign's, and a worker sees its input end when the campaign closes it.
  for (int other = 3; other < fd; ++other) close(other);
  if (close_range(static_cast<unsigned>(fd) + 1, ~0U, 0) != 0)
    for (long other = fd + 1, most = sysconf(_SC_OPEN_MAX); other < most; ++other) close(static_cast<int>(other));
  // Requests come in groups (a take tops a process up with several at once): each read takes all
  // that have arrived. Each answer goes out as it is drawn, so that a draw that hangs holds back no
  // other case.
  std::vector<int64_t> requests(kServeGroup);
  for (;;) {
    size_t have = 0;  // bytes of `requests`
    char* at = reinterpret_cast<char*>(requests.data());
    do {
      const ssize_t r = ::read(fd, at + have, requests.size() * sizeof(int64_t) - have);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) _exit(0);
      have += static_cast<size_t>(r);
    } while (have % sizeof(int64_t) != 0);
    for (size_t i = 0; i < have / sizeof(int64_t); ++i) {
      const std::string frame = frame_of(requests[i], draw(requests[i]));
      if (!write_all(fd, frame.data(), frame.size())) _exit(0);
    }
  }
}

void GenerationPool::read_answers(Child& child) {
  std::string why;  // empty: the process ended (its status says how)
  std::vector<char> in;  // bytes read and not yet taken apart, [begin, end): [u64 length][body], ...
  size_t begin = 0, end = 0;
  std::vector<std::pair<int64_t, Drawn>> got;
  const auto length_at_begin = [&] {  // of the frame at `begin`, whose length has arrived
    uint64_t length = 0;
    std::memcpy(&length, in.data() + begin, sizeof length);
    return length;
  };
  for (;;) {
    // As much as has arrived (room for at least the rest of a frame begun), then every whole frame
    // of it under one lock.
    size_t want = kReadChunkBytes;
    const uint64_t length = end - begin >= sizeof(uint64_t) ? length_at_begin() : 0;
    if (length > 0 && length <= kMaxFrameBytes) want = std::max<size_t>(want, sizeof length + length - (end - begin));
    if (end == begin && in.size() > 4 * kReadChunkBytes) {
      in = std::vector<char>();  // a large frame's room is not kept for the rest of the run
      begin = end = 0;
    }
    if (in.size() - end < want) {
      if (end > begin) std::memmove(in.data(), in.data() + begin, end - begin);
      end -= begin, begin = 0;
      try {
        if (in.size() - end < want) in.resize(end + want);
      } catch (const std::exception& e) {  // a refused allocation: this process's case is lost, not the campaign
        why = "sent a frame of " + std::to_string(length) + " bytes that could not be held (" + e.what() + ")";
        break;
      }
    }
    ssize_t r;
    do r = ::read(child.fd, in.data() + end, in.size() - end);
    while (r < 0 && errno == EINTR);
    if (r <= 0) break;
    end += static_cast<size_t>(r);
    got.clear();
    try {
      while (end - begin >= sizeof(uint64_t)) {
        const uint64_t size = length_at_begin();
        if (size < sizeof(int64_t) + 1 || size > kMaxFrameBytes) throw std::runtime_error("a frame of " + std::to_string(size) + " bytes");
        if (end - begin - sizeof size < size) break;
        Reader frame(std::string_view(in.data() + begin + sizeof size, size));
        begin += sizeof size + size;
        if (begin == end) begin = end = 0;
        Drawn d;
        const int64_t local = frame.i64();
        const bool has_case = frame.u8() != 0;
        const std::string_view rest = frame.bytes(size - sizeof(int64_t) - 1);
        if (has_case) d.c = decode_case(rest);
        else d.error = std::string(rest);
        got.emplace_back(local, std::move(d));
      }
    } catch (const std::exception& e) {
      why = std::string("sent bytes that are not a case (") + e.what() + ")";
    }
    const std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [local, d] : got) {
      if (child.waiting.empty() || child.waiting.front() != local) {
        why = "answered case " + std::to_string(local) + " out of turn";
        break;
      }
      child.waiting.pop_front();
      child.since = Clock::now();
      if (d.c) {
        const size_t bytes = tensor_bytes(*d.c);
        answer_bytes_ += bytes;
        drawn_bytes_ += bytes;
      }
      ++drawn_;
      if (const auto w = awaited_.find(local); w != awaited_.end()) w->second->notify_one();
      answers_.emplace(local, std::move(d));
    }
    if (!why.empty()) break;
    flush(child);  // it read the requests for these: room for more
  }
  const std::lock_guard<std::mutex> lock(mutex_);
  child_ended(child, why);
}

void GenerationPool::child_ended(Child& child, const std::string& why) {
  child.alive = false;
  kill(child.pid, SIGKILL);  // not reaped yet: the pid is still the child's
  int status = 0;
  while (waitpid(child.pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (closing_) return;
  std::deque<int64_t> waiting = std::move(child.waiting);
  child.waiting.clear();
  child.outbox.clear();
  if (!waiting.empty()) {
    // The process draws in the order sent: the first index waiting is the one it was drawing.
    const std::string how = !child.killed_because.empty() ? child.killed_because
                            : !why.empty()                ? why
                                                          : describe_status(status);
    answers_.emplace(waiting.front(), Drawn{std::nullopt, "the process drawing it " + how, true});
    waiting.pop_front();
  }
  for (const int64_t local : waiting)
    if (!send(local)) unserved_.insert(local);
  flush_all();
  for (const auto& [local, cv] : awaited_) cv->notify_one();
}

bool GenerationPool::send(int64_t local) {
  Child* best = nullptr;
  for (Child& c : children_)
    if (c.alive && (!best || c.waiting.size() < best->waiting.size())) best = &c;
  if (!best) return false;
  if (best->waiting.empty()) best->since = Clock::now();
  best->waiting.push_back(local);
  best->outbox.append(reinterpret_cast<const char*>(&local), sizeof local);
  return true;
}

void GenerationPool::flush_all() {
  for (Child& c : children_)
    if (c.alive && !c.outbox.empty()) flush(c);
}

void GenerationPool::flush(Child& child) {
  while (!child.outbox.empty()) {
    const ssize_t w = ::send(child.fd, child.outbox.data(), child.outbox.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0 && errno == EINTR) continue;
    // No room now (or no buffer for it: ENOBUFS, ENOMEM): sent when it answers.
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS || errno == ENOMEM)) return;
    if (w <= 0) {
      // Its reader sees the end, reaps it and moves its waiting indices.
      shutdown(child.fd, SHUT_RDWR);
      return;
    }
    child.outbox.erase(0, static_cast<size_t>(w));
  }
}

void GenerationPool::send_ahead(int64_t through) {
  if (end_) through = std::min(through, *end_ - 1);
  size_t in_flight = 0;
  for (const Child& c : children_) in_flight += c.waiting.size();
  for (; next_to_send_ <= through; ++next_to_send_, ++in_flight) {
    const size_t mean = drawn_ ? drawn_bytes_ / drawn_ : 0;
    if (answer_bytes_ + in_flight * mean > kPoolWaitingBytes) return;
    if (!send(next_to_send_)) unserved_.insert(next_to_send_);
  }
}

void GenerationPool::kill_stuck() {
  const Clock::time_point now = Clock::now();
  for (Child& c : children_)
    if (c.alive && c.killed_because.empty() && !c.waiting.empty() &&
        std::chrono::duration<double>(now - c.since).count() > draw_seconds_) {
      char seconds[32];
      std::snprintf(seconds, sizeof seconds, "%g", draw_seconds_);
      c.killed_because = std::string("drew it for more than ") + seconds + " s and was killed";
      kill(c.pid, SIGKILL);  // its reader reaps it
    }
}

std::optional<Drawn> GenerationPool::take(int64_t local) {
  std::unique_lock<std::mutex> lock(mutex_);
  // Up to `local` whatever the bytes waiting (another thread may take an index below it later),
  // then ahead of it within the bound; each process's new requests in one write.
  // Topped up once half the lookahead is taken, so that each process gets its requests in groups.
  for (; next_to_send_ <= local; ++next_to_send_)
    if (!send(next_to_send_)) unserved_.insert(next_to_send_);
  if (next_to_send_ <= local + (lookahead_ + 1) / 2) send_ahead(local + lookahead_);
  flush_all();
  const auto here = [&] { return answers_.count(local) || unserved_.count(local); };
  if (!here()) {
    // Woken by the answer to this index alone (or a process's end), not by every answer.
    std::condition_variable answered;
    awaited_.emplace(local, &answered);
    struct Forget {  // the entry goes with `answered`, however the wait ends
      std::map<int64_t, std::condition_variable*>& awaited;
      int64_t local;
      ~Forget() { awaited.erase(local); }
    } forget{awaited_, local};
    // Requests a process had no room for go out here too, not only as answers come.
    while (!answered.wait_for(lock, std::chrono::seconds(1), here)) {
      flush_all();
      kill_stuck();
    }
  }
  if (unserved_.erase(local)) return std::nullopt;
  auto it = answers_.find(local);
  Drawn d = std::move(it->second);
  answers_.erase(it);
  if (d.c) answer_bytes_ -= tensor_bytes(*d.c);
  return d;
}

int GenerationPool::alive() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  int n = 0;
  for (const Child& c : children_) n += c.alive;
  return n;
}

GenerationPool::~GenerationPool() {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    closing_ = true;
    // Cases drawn ahead and never taken are not waited for.
    for (Child& c : children_)
      if (c.fd >= 0) shutdown(c.fd, SHUT_RDWR);
  }
  for (Child& c : children_) {
    if (c.reader.joinable()) c.reader.join();
    if (c.fd >= 0) close(c.fd);
  }
}

}  // namespace bitparity::campaign
