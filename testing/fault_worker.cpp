// A deliberately faulting exec worker over the toy registry (testing/toy_op.h): it serves the
// `ref` implementations, except that a case whose input x holds the value 3.0 makes it fail the
// way a GPU worker fails. The exec and campaign tests run it to prove that a crashed or stuck
// worker is restarted, that nothing is lost and that the case that killed it is recorded, shrunk.
//
//   fault_worker MODE     MODE: none, crash (SIGSEGV), abort, hang (sleeps forever),
//                         garbage (answers a line that is not JSON), exit (exit status 3),
//                         hazard (answers, then at the end of its input reports a race the way
//                         compute-sanitizer does and exits with its --error-exitcode, 86),
//                         library_hazard (the same, with the tool's banner and host backtraces,
//                         the race inside a kernel that cuBLAS launched), mixed_hazard (that
//                         report and one inside a kernel of its own)
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <string>
#include <unistd.h>

#include "peers/exec/serve.h"
#include "testing/sanitizer_log.h"
#include "testing/toy_op.h"

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "none";
  const bitparity::Registry registry = bitparity::testing::make_fake_registry();
  bool hazard = false;
  const auto before_case = [&mode, &hazard](const bitparity::Case& c, const std::string&) {
    const bitparity::Tensor* x = c.input("x");
    bool three = false;
    for (int64_t i = 0; x && i < x->numel(); ++i) three = three || x->f32(i) == 3.0f;
    if (!three || mode == "none") return;
    if (mode == "hazard" || mode == "library_hazard" || mode == "mixed_hazard") {
      hazard = true;
      return;
    }
    std::cerr << "fault_worker: planted " << mode << " on a case holding 3.0" << std::endl;
    if (mode == "crash") raise(SIGSEGV);
    if (mode == "abort") std::abort();
    if (mode == "hang")
      for (;;) pause();
    if (mode == "garbage") std::cout << "this is not an answer" << std::endl;
    if (mode == "exit") std::exit(3);
  };
  const int status = bitparity::peers::serve_worker(registry, "ref", std::cin, std::cout, before_case);
  if (!hazard) return status;
  if (mode != "hazard") {  // as racecheck writes them with host backtraces (CUDA 13)
    namespace t = bitparity::testing;
    std::cerr << t::kSanitizerBanner << t::racecheck_report(t::kCublasKernel, t::kCublasLaunch);
    if (mode == "mixed_hazard") std::cerr << t::racecheck_report("void planted_reduce<4>(float*)", t::kOwnLaunch);
    std::cerr << t::racecheck_summary(mode == "mixed_hazard" ? 2 : 1) << std::flush;
    return 86;
  }
  // As compute-sanitizer's racecheck writes a report (CUDA 13), then its summary.
  std::cerr << "========= Error: Potential RAW hazard detected at __shared__ 0x580 in block (0,0,0) :\n"
               "=========     Write Thread (96,0,0) at planted_reduce+0xd0\n"
               "=========     Read Thread (32,0,0) at planted_reduce+0x100\n"
               "=========     Current Value : 0\n"
               "========= \n"
               "========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)"
            << std::endl;
  return 86;
}
