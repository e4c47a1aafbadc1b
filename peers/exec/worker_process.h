// A long-lived child process spoken to one line at a time: the transport of `exec:` backends
// (README, "Backends in other processes"). The child's standard input and output are one end of a
// socket pair; its standard error is kept, the last few KiB of it, for the messages of faults.
//
// A child that dies, hangs past the timeout, or answers with a line longer than the limit is
// killed (its whole process group) and started again on the next request, and the request that
// met the fault throws DeviceFault: the case may be what killed it (an illegal address on a GPU
// leaves the CUDA context unusable, so the process must go).
#pragma once

#include <chrono>
#include <cstddef>
#include <mutex>
#include <string>
#include <sys/types.h>
#include <utility>
#include <vector>

namespace bitparity::peers {

struct WorkerOptions {
  std::string name;                  // for messages: "torch"
  std::vector<std::string> argv;     // the program and its arguments (execvp)
  // Variables set in the child's environment before it starts (CUDA_VISIBLE_DEVICES=1 for the
  // worker of a node's second GPU); the rest of the environment is this process's.
  std::vector<std::pair<std::string, std::string>> environment;
  double start_seconds = 120;        // until the first line (the hello) arrives
  double request_seconds = 120;      // until a request's answer arrives
  size_t max_line_bytes = size_t{512} << 20;
  size_t stderr_keep_bytes = 8192;
  // Non-zero: the child serves one request (a case, or a batch of them). After its answer bitparity closes the child's input and
  // waits (request_seconds) for it to exit; this exit status (compute-sanitizer's --error-exitcode)
  // makes the request throw SanitizerHazard with the child's report, any other status but 0 is a
  // DeviceFault, and the next request starts a fresh child.
  int hazard_exit_status = 0;
  // With hazard_exit_status: a report of compute-sanitizer's racecheck whose every hazard lies in a
  // kernel that a closed library launched (racecheck_library_only) does not fail the case; the
  // kernels are named once on bitparity's standard error and kept (library_hazards()).
  bool library_hazards_not_judged = false;
};

// One report of compute-sanitizer's racecheck in a worker's log: the kernel it names ("?" where the report
// names none) and the library whose code launched it (the first host frame past the CUDA driver:
// "libcublasLt.so.13"), empty where that frame is not a closed library's (bitparity's own code, or
// no host backtrace). A report without a host backtrace (racecheck's analysis reports, "Race reported
// between ...") takes the library of its kernel's backtraced reports where they all name one.
struct SanitizerReport {
  std::string kernel;
  std::string library;
};

// The reports of a racecheck log ("========= Error: ..." and "Warning: ..." blocks), in order.
std::vector<SanitizerReport> sanitizer_reports(const std::string& log);

// Whether a racecheck log reports hazards and every one of them lies in a closed library's kernel
// (cuBLAS, cuDNN, NCCL, ...): the log is whole (its banner kept), its summary counts hazards below
// `print_limit` (none left unprinted), and each printed report's launching library is known. Such
// reports are about NVIDIA's code, which no change to the kernels under test can fix.
bool racecheck_library_only(const std::string& log, int print_limit);
// Why a racecheck log is not the library's alone (the first condition above it fails), for the
// finding's message; empty where racecheck_library_only holds.
std::string racecheck_judged_because(const std::string& log, int print_limit);

class WorkerProcess {
 public:
  explicit WorkerProcess(WorkerOptions options);
  ~WorkerProcess();
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  // Starts the child if it is not running and returns the first line it wrote (without '\n').
  // A child that cannot start, exits or stays silent past start_seconds: DeviceFault.
  std::string start();
  // Sends `line` (a '\n' is appended) and returns the child's answer line. Starts the child first
  // when it is not running (after a fault). Faults: DeviceFault, the child killed.
  std::string request(const std::string& line);

  // Kills the child; the next request starts a fresh one. For an answer out of protocol, after
  // which the child's next line cannot be trusted.
  void reset();

  int starts() const { return starts_; }  // how many times a child was started
  // "KERNEL (LIBRARY)" of every racecheck report left unjudged (library_hazards_not_judged).
  std::vector<std::string> library_hazards() const;
  const WorkerOptions& options() const { return options_; }
  // The last bytes the current or the last child wrote to its standard error.
  std::string stderr_tail() const { return stderr_tail_; }

 private:
  std::string start_locked();
  void stop();
  // Reads until a whole line is buffered or the deadline passes; drains stderr meanwhile.
  std::string read_line(std::chrono::steady_clock::time_point deadline, const char* waiting_for);
  void write_all(const std::string& bytes, std::chrono::steady_clock::time_point deadline);
  void drain_stderr();
  // hazard_exit_status: closes the child's input, waits for its exit and judges the status.
  void await_exit(std::chrono::steady_clock::time_point deadline);
  [[noreturn]] void fault(const std::string& what);

  WorkerOptions options_;
  mutable std::mutex mutex_;
  pid_t pid_ = -1;
  int io_fd_ = -1;      // our end of the socket pair: the child's stdin and stdout
  int stderr_fd_ = -1;  // the read end of the child's stderr pipe
  std::string buffer_;  // bytes read past the last line
  std::string stderr_tail_;
  std::string hello_;
  int starts_ = 0;
  std::vector<std::string> library_hazards_;
};

// What compute-sanitizer exits with when its tool reported an error (--error-exitcode).
inline constexpr int kSanitizerHazardExitStatus = 86;
// The reports a sanitized worker's tool prints at most (--print-limit).
inline constexpr int kSanitizerPrintLimit = 1000;

// A worker that runs `worker_argv` under `compute_sanitizer --tool TOOL` (memcheck, racecheck,
// synccheck, initcheck), as `bitparity --sanitizer TOOL` starts them: one request a process (a case, or a batch of them), the
// tool's error exit status after the answer a SanitizerHazard (hazard_exit_status), the tool's
// report on the worker's standard error (by default it writes to standard output, the protocol
// channel), device and host backtraces (the host's names the library that launched a kernel),
// racecheck reporting warnings too and leaving hazards inside a closed library's kernels unjudged
// (library_hazards_not_judged), and a device buffer a
// tensor (BITPARITY_CUDA_BUFFERS=separate, gpu/runtime.h) so that memcheck knows each tensor's
// bounds. `seconds` bounds the start and each request.
WorkerOptions sanitized_worker(const std::string& compute_sanitizer, const std::string& tool,
                               const std::vector<std::string>& worker_argv, double seconds);

}  // namespace bitparity::peers
