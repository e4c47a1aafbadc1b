#include "peers/exec/worker_process.h"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string_view>

#include "core/error.h"
#include "core/json_strict.h"
#include "core/process_status.h"

namespace bitparity::peers {
namespace {

using Clock = std::chrono::steady_clock;

Clock::time_point deadline_in(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// Milliseconds to the deadline for poll(), at least 0.
int poll_ms(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<long long>(left, 0, 1000));
}

void set_cloexec_nonblock(int fd) {
  fcntl(fd, F_SETFD, fcntl(fd, F_GETFD) | FD_CLOEXEC);
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

}  // namespace

WorkerProcess::WorkerProcess(WorkerOptions options) : options_(std::move(options)) {
  if (options_.argv.empty()) throw std::invalid_argument("worker " + options_.name + ": no command");
}

WorkerProcess::~WorkerProcess() { stop(); }

std::string WorkerProcess::start() {
  std::lock_guard<std::mutex> lock(mutex_);
  return start_locked();
}

std::string WorkerProcess::start_locked() {
  if (pid_ > 0) return hello_;
  int io[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, io) != 0)
    throw std::runtime_error("worker " + options_.name + ": socketpair: " + std::strerror(errno));
  int err[2];
  if (pipe2(err, O_CLOEXEC) != 0) {
    close(io[0]);
    close(io[1]);
    throw std::runtime_error("worker " + options_.name + ": pipe: " + std::strerror(errno));
  }
  std::vector<char*> argv;
  for (const std::string& a : options_.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) {
    for (int fd : {io[0], io[1], err[0], err[1]}) close(fd);
    throw std::runtime_error("worker " + options_.name + ": fork: " + std::strerror(errno));
  }
  if (pid == 0) {
    // The child: its own process group, so that a kill reaches what it starts too (a shell's
    // children); stdin and stdout on the socket, stderr on the pipe.
    setpgid(0, 0);
    dup2(io[1], STDIN_FILENO);
    dup2(io[1], STDOUT_FILENO);
    dup2(err[1], STDERR_FILENO);
    signal(SIGPIPE, SIG_DFL);
    for (const auto& [name, value] : options_.environment) setenv(name.c_str(), value.c_str(), 1);
    execvp(argv[0], argv.data());
    const std::string message = std::string("cannot run ") + argv[0] + ": " + std::strerror(errno) + "\n";
    (void)!write(STDERR_FILENO, message.data(), message.size());
    _exit(127);
  }
  close(io[1]);
  close(err[1]);
  pid_ = pid;
  io_fd_ = io[0];
  stderr_fd_ = err[0];
  set_cloexec_nonblock(io_fd_);
  set_cloexec_nonblock(stderr_fd_);
  buffer_.clear();
  stderr_tail_.clear();
  ++starts_;
  hello_ = read_line(deadline_in(options_.start_seconds), "its first line (the hello)");
  return hello_;
}

std::string WorkerProcess::request(const std::string& line) {
  std::lock_guard<std::mutex> lock(mutex_);
  start_locked();
  const Clock::time_point deadline = deadline_in(options_.request_seconds);
  write_all(line + "\n", deadline);
  std::string answer = read_line(deadline, "an answer");
  if (options_.hazard_exit_status != 0) await_exit(deadline);
  return answer;
}

void WorkerProcess::await_exit(Clock::time_point deadline) {
  shutdown(io_fd_, SHUT_WR);  // end of the child's input: a worker stops after its last case
  int status = 0;
  for (;;) {
    const pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) break;
    if (r < 0 && errno != EINTR) fault(std::string("cannot wait for it (") + std::strerror(errno) + ")");
    if (Clock::now() >= deadline) fault("it did not exit after its answer within the timeout");
    pollfd fds[1] = {{stderr_fd_, POLLIN, 0}};
    poll(fds, 1, std::min(poll_ms(deadline), 20));
    drain_stderr();
  }
  drain_stderr();
  kill(-pid_, SIGKILL);  // whatever the child left in its group
  pid_ = -1;             // reaped: stop() closes the descriptors and kills nothing
  stop();
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return;
  const bool hazard = WIFEXITED(status) && WEXITSTATUS(status) == options_.hazard_exit_status;
  std::optional<std::string> judged_because;  // where library reports may be left unjudged: why these are not
  if (hazard && options_.library_hazards_not_judged)
    judged_because = racecheck_judged_because(stderr_tail_, kSanitizerPrintLimit);
  if (judged_because && judged_because->empty()) {
    // Every report lies in a closed library's kernel: the answer stands; each kernel named once.
    static std::mutex named_mutex;
    static std::set<std::string> named;
    std::set<std::string> kernels;
    for (const SanitizerReport& r : sanitizer_reports(stderr_tail_)) kernels.insert(r.kernel + " (" + r.library + ")");
    std::lock_guard<std::mutex> lock(named_mutex);
    for (const std::string& k : kernels) {
      if (std::find(library_hazards_.begin(), library_hazards_.end(), k) == library_hazards_.end())
        library_hazards_.push_back(k);
      if (named.insert(k).second)
        std::cerr << "bitparity: " << options_.name << ": racecheck reports inside a closed library's kernel, not "
                  << "judged (not bitparity's code; the case's outputs are compared as usual): " << k << "\n";
    }
    return;
  }
  // The checker's own lines ("========= ..."), the banner and the summary aside; else the tail.
  std::string report;
  size_t kept = 0;
  for (size_t start = 0; start < stderr_tail_.size() && kept < 40;) {
    const size_t end = std::min(stderr_tail_.find('\n', start), stderr_tail_.size());
    const std::string row = stderr_tail_.substr(start, end - start);
    start = end + 1;
    if (row.rfind("=========", 0) != 0 || row.find("COMPUTE-SANITIZER") != std::string::npos ||
        row.find(" SUMMARY: ") != std::string::npos)
      continue;
    report += "\n" + row;
    ++kept;
  }
  if (report.empty() && !stderr_tail_.empty()) report = "\n" + stderr_tail_;
  while (!report.empty() && (report.back() == '\n' || report.back() == '\r')) report.pop_back();
  report = printable(report, report.size(), /*keep_line_ends=*/true);  // raw bytes: corpus entries are UTF-8 JSON
  if (judged_because) report += "\n(judged as a hazard: " + *judged_because + ")";
  const std::string message = "worker " + options_.name + ": after its answer it " + describe_status(status) +
                              (hazard ? " (the hazard status): its checker reported on this case:"
                                      : ", not 0 nor the hazard status " +
                                            std::to_string(options_.hazard_exit_status) + "; its stderr:") +
                              report;
  if (hazard) throw SanitizerHazard(message);
  throw DeviceFault(message);
}

void WorkerProcess::reset() {
  std::lock_guard<std::mutex> lock(mutex_);
  stop();
}

void WorkerProcess::write_all(const std::string& bytes, Clock::time_point deadline) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    // MSG_NOSIGNAL: a child that died is an EPIPE here, not a SIGPIPE that ends bitparity.
    const ssize_t n = send(io_fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      fault(std::string("cannot write to it (") + std::strerror(errno) + ")");
    if (Clock::now() >= deadline)
      fault("it did not read the request within " + std::to_string(options_.request_seconds) + " s");
    pollfd fds[2] = {{io_fd_, POLLOUT, 0}, {stderr_fd_, POLLIN, 0}};
    poll(fds, 2, poll_ms(deadline));
    drain_stderr();
  }
}

std::string WorkerProcess::read_line(Clock::time_point deadline, const char* waiting_for) {
  char chunk[65536];
  size_t scanned = 0;  // buffer_[0, scanned) holds no newline: each byte is searched once
  for (;;) {
    const size_t newline = buffer_.find('\n', scanned);
    if (newline != std::string::npos) {
      std::string line = buffer_.substr(0, newline);
      buffer_.erase(0, newline + 1);
      return line;
    }
    scanned = buffer_.size();
    if (buffer_.size() > options_.max_line_bytes)
      fault("its line is longer than " + std::to_string(options_.max_line_bytes) + " bytes");
    const ssize_t n = read(io_fd_, chunk, sizeof chunk);
    if (n > 0) {
      buffer_.append(chunk, static_cast<size_t>(n));
      // A worker that keeps writing without ending its line is held to the deadline like a silent one.
      if (std::memchr(chunk, '\n', static_cast<size_t>(n)) == nullptr && Clock::now() >= deadline)
        fault(std::string(waiting_for) + " did not end within the timeout (its line was still growing)");
      continue;
    }
    if (n == 0) fault(std::string("it closed its output while bitparity waited for ") + waiting_for);
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      fault(std::string("cannot read from it (") + std::strerror(errno) + ")");
    if (Clock::now() >= deadline) fault(std::string(waiting_for) + " did not come within the timeout");
    pollfd fds[2] = {{io_fd_, POLLIN, 0}, {stderr_fd_, POLLIN, 0}};
    poll(fds, 2, poll_ms(deadline));
    drain_stderr();
  }
}

void WorkerProcess::drain_stderr() {
  if (stderr_fd_ < 0) return;
  // At most a budget a call, so that a worker (or a child it left behind) writing stderr without end
  // cannot keep bitparity here: the rest is read at the next call, and a fault's message keeps the tail.
  const size_t budget = std::max(options_.stderr_keep_bytes, size_t{1} << 20);
  char chunk[65536];
  for (size_t taken = 0; taken < budget;) {
    const ssize_t n = read(stderr_fd_, chunk, sizeof chunk);
    if (n <= 0) break;
    taken += static_cast<size_t>(n);
    stderr_tail_.append(chunk, static_cast<size_t>(n));
    if (stderr_tail_.size() > 2 * options_.stderr_keep_bytes)
      stderr_tail_.erase(0, stderr_tail_.size() - options_.stderr_keep_bytes);
  }
  if (stderr_tail_.size() > options_.stderr_keep_bytes)
    stderr_tail_.erase(0, stderr_tail_.size() - options_.stderr_keep_bytes);
}

void WorkerProcess::stop() {
  if (pid_ > 0) {
    kill(-pid_, SIGKILL);  // the group: the child and whatever it started
    kill(pid_, SIGKILL);
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
  for (int* fd : {&io_fd_, &stderr_fd_})
    if (*fd >= 0) close(*fd), *fd = -1;
  pid_ = -1;
}

void WorkerProcess::fault(const std::string& what) {
  // How the child ended, if it did: a crash shows as its signal; a hang as "still running".
  std::string how = "was still running and was killed";
  int status = 0;
  bool hazard = false;
  if (pid_ > 0) {
    // A child that closed its output is usually exiting: 100 ms; 2 s for a checker's summary.
    const int polls = options_.hazard_exit_status != 0 ? 400 : 20;
    for (int i = 0; i < polls; ++i) {
      const pid_t r = waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        how = describe_status(status);
        hazard = options_.hazard_exit_status != 0 && WIFEXITED(status) &&
                 WEXITSTATUS(status) == options_.hazard_exit_status;
        kill(-pid_, SIGKILL);
        pid_ = -1;
        break;
      }
      if (r < 0) break;
      usleep(5000);
    }
  }
  drain_stderr();
  stop();
  std::string message = "worker " + options_.name + ": " + what + "; it " + how;
  if (!stderr_tail_.empty()) {
    std::string tail = stderr_tail_;
    while (!tail.empty() && (tail.back() == '\n' || tail.back() == '\r')) tail.pop_back();
    message += "; its stderr ended with:\n" + printable(tail, tail.size(), /*keep_line_ends=*/true);
  }
  // The checker ended it (memcheck stops a kernel at an invalid access): its report is the finding.
  if (hazard) throw SanitizerHazard(message + "\n(the hazard status: its checker reported on this case)");
  throw DeviceFault(message);
}

namespace {

// Whether `line` is compute-sanitizer's ("========= ..."); its text past the prefix in *text.
bool tool_line(std::string_view line, std::string_view* text) {
  if (line.rfind("=========", 0) != 0) return false;
  line.remove_prefix(9);
  while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
  *text = line;
  return true;
}

bool starts_with_any(std::string_view text, std::initializer_list<std::string_view> prefixes) {
  for (std::string_view p : prefixes)
    if (text.rfind(p, 0) == 0) return true;
  return false;
}

// "libcublasLt.so.13" from "... in libcublasLt.so.13", where the library is a closed one of the
// CUDA ecosystem; empty otherwise. The same libraries as scripts/gpu_check.sh's LIBRARY_FRAME.
std::string closed_library(std::string_view frame) {
  const size_t in = frame.rfind(" in ");
  if (in == std::string_view::npos) return "";
  std::string_view file = frame.substr(in + 4);
  const size_t slash = file.rfind('/');
  if (slash != std::string_view::npos) file.remove_prefix(slash + 1);
  for (std::string_view stem : {"libcublasLt.so", "libcublas.so", "libcudnn", "libnccl.so", "libcufft.so",
                                "libcurand.so", "libcusparse.so", "libcusolver.so"})
    if (file.rfind(stem, 0) == 0) return std::string(file);
  return "";
}

}  // namespace

std::vector<SanitizerReport> sanitizer_reports(const std::string& log) {
  std::vector<SanitizerReport> reports;
  std::vector<bool> backtraced;  // per report: a host frame past the driver was read
  bool in_report = false;
  for (size_t start = 0; start < log.size();) {
    const size_t end = std::min(log.find('\n', start), log.size());
    const std::string_view line(log.data() + start, end - start);
    start = end + 1;
    std::string_view text;
    if (!tool_line(line, &text)) continue;
    if (starts_with_any(text, {"Error:", "ERROR:", "Warning:", "WARNING:"})) {
      reports.push_back({"?", ""});
      backtraced.push_back(false);
      in_report = true;
      // An analysis report names its kernel on this line ("Race reported between Read access at K+0x..").
    }
    if (text.find("SUMMARY:") != std::string_view::npos) {
      in_report = false;
      continue;
    }
    if (!in_report) continue;
    SanitizerReport& r = reports.back();
    // "Read Thread (63,0,0) at KERNEL+0xaf0", memcheck's "at KERNEL+0x70 in file.cu:12"
    const size_t at = text.find("at ");
    const size_t offset = text.rfind("+0x");
    if (r.kernel == "?" && at != std::string_view::npos && (at == 0 || text[at - 1] == ' ') &&
        offset != std::string_view::npos && offset > at + 3 && text.find("Host Frame:") == std::string_view::npos)
      r.kernel = std::string(text.substr(at + 3, offset - at - 3));
    if (!backtraced.back() && text.rfind("Host Frame:", 0) == 0 && text.find("libcuda.so") == std::string_view::npos) {
      backtraced.back() = true;  // the first frame past the driver decides
      r.library = closed_library(text);
    }
  }
  // racecheck's analysis reports ("Error: Race reported between Read access at K+0xaf0 and Write access
  // at K+0x29b0 [N hazards]", printed with --racecheck-report all after K's hazard reports) sum up
  // hazards of kernel K and carry no host backtrace. Such a report takes the library of K's
  // backtraced reports where every one of them names a closed library; a kernel with no backtraced
  // report, or one that bitparity's own code launched, leaves it empty.
  std::map<std::string, std::string> library_of;  // kernel -> a closed library that launched it, "" if not
  for (size_t i = 0; i < reports.size(); ++i) {
    if (!backtraced[i]) continue;
    const auto [it, first] = library_of.emplace(reports[i].kernel, reports[i].library);
    if (!first && reports[i].library.empty()) it->second.clear();
  }
  for (size_t i = 0; i < reports.size(); ++i)
    if (!backtraced[i])
      if (const auto it = library_of.find(reports[i].kernel); it != library_of.end()) reports[i].library = it->second;
  return reports;
}

std::string racecheck_judged_because(const std::string& log, int print_limit) {
  if (log.find("COMPUTE-SANITIZER") == std::string::npos)
    return "the log's start (the tool's banner) was not kept, so not every report can be read";
  const size_t summary = log.rfind("RACECHECK SUMMARY: ");
  if (summary == std::string::npos) return "the log has no RACECHECK SUMMARY line";
  size_t i = summary + 19;
  long long hazards = 0;
  bool digits = false;
  for (; i < log.size() && std::isdigit(static_cast<unsigned char>(log[i])); ++i, digits = true)
    hazards = std::min<long long>(hazards * 10 + (log[i] - '0'), 1LL << 40);
  if (!digits) return "the RACECHECK SUMMARY line counts no hazards";
  if (hazards <= 0) return "the RACECHECK SUMMARY line counts 0 hazards";
  if (hazards >= print_limit)
    return "the summary counts " + std::to_string(hazards) + " hazards, at the print limit (" +
           std::to_string(print_limit) + "): reports past it were not printed, so they cannot be placed";
  const std::vector<SanitizerReport> reports = sanitizer_reports(log);
  if (reports.empty()) return "no report of the log could be read";
  for (const SanitizerReport& r : reports)
    if (r.library.empty())
      return "a report in " + r.kernel + " was not launched from a closed library's code";
  return "";
}

bool racecheck_library_only(const std::string& log, int print_limit) {
  return racecheck_judged_because(log, print_limit).empty();
}

std::vector<std::string> WorkerProcess::library_hazards() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return library_hazards_;
}

WorkerOptions sanitized_worker(const std::string& compute_sanitizer, const std::string& tool,
                               const std::vector<std::string>& worker_argv, double seconds) {
  WorkerOptions options;
  options.name = tool + " (compute-sanitizer)";
  options.argv = {compute_sanitizer, "--tool", tool, "--error-exitcode", std::to_string(kSanitizerHazardExitStatus),
                  "--print-limit", std::to_string(kSanitizerPrintLimit), "--log-file", "/dev/stderr"};
  // The tool's default backtraces, host and device: the host's names the library that launched a kernel.
  if (tool == "racecheck") {
    options.argv.insert(options.argv.end(), {"--racecheck-report", "all"});
    options.library_hazards_not_judged = true;
  }
  options.argv.insert(options.argv.end(), worker_argv.begin(), worker_argv.end());
  options.environment.emplace_back("BITPARITY_CUDA_BUFFERS", "separate");
  options.start_seconds = seconds;
  options.request_seconds = seconds;
  options.stderr_keep_bytes = size_t{8} << 20;  // every report of a case, each with its backtraces
  options.hazard_exit_status = kSanitizerHazardExitStatus;
  return options;
}

}  // namespace bitparity::peers
