#include "campaign/generation_pool.h"

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

bool read_all(int fd, void* data, size_t n) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t r = ::read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
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

std::string status_text(int status) {
  if (WIFSIGNALED(status)) return "was killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
                                  (strsignal(WTERMSIG(status)) ? strsignal(WTERMSIG(status)) : "?") + ")";
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  return "ended (status " + std::to_string(status) + ")";
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
  for (;;) {
    int64_t local = 0;
    if (!read_all(fd, &local, sizeof local)) _exit(0);
    const std::string frame = frame_of(local, draw(local));
    if (!write_all(fd, frame.data(), frame.size())) _exit(0);
  }
}

void GenerationPool::read_answers(Child& child) {
  std::string why;  // empty: the process ended (its status says how)
  for (;;) {
    uint64_t length = 0;
    if (!read_all(child.fd, &length, sizeof length)) break;
    Drawn d;
    int64_t local = -1;
    try {
      if (length < sizeof(int64_t) + 1 || length > kMaxFrameBytes) throw std::runtime_error("a frame of " + std::to_string(length) + " bytes");
      std::string body(length, '\0');
      if (!read_all(child.fd, body.data(), body.size())) break;
      Reader r(body);
      local = r.i64();
      const bool has_case = r.u8() != 0;
      const std::string_view rest = r.bytes(body.size() - sizeof(int64_t) - 1);
      if (has_case) d.c = decode_case(rest);
      else d.error = std::string(rest);
    } catch (const std::exception& e) {
      why = std::string("sent bytes that are not a case (") + e.what() + ")";
      break;
    }
    const std::lock_guard<std::mutex> lock(mutex_);
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
    answers_.emplace(local, std::move(d));
    flush(child);  // it read a request to draw this one: room for more
    answered_.notify_all();
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
                                                          : status_text(status);
    answers_.emplace(waiting.front(), Drawn{std::nullopt, "the process drawing it " + how, true});
    waiting.pop_front();
  }
  for (const int64_t local : waiting)
    if (!send(local)) unserved_.insert(local);
  answered_.notify_all();
}

bool GenerationPool::send(int64_t local) {
  Child* best = nullptr;
  for (Child& c : children_)
    if (c.alive && (!best || c.waiting.size() < best->waiting.size())) best = &c;
  if (!best) return false;
  if (best->waiting.empty()) best->since = Clock::now();
  best->waiting.push_back(local);
  best->outbox.append(reinterpret_cast<const char*>(&local), sizeof local);
  flush(*best);
  return true;
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
  // then ahead of it within the bound.
  for (; next_to_send_ <= local; ++next_to_send_)
    if (!send(next_to_send_)) unserved_.insert(next_to_send_);
  send_ahead(local + lookahead_);
  while (!answered_.wait_for(lock, std::chrono::seconds(1), [&] { return answers_.count(local) || unserved_.count(local); }))
    kill_stuck();
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
