// The exec protocol end to end: a worker process (testing/fault_worker.cpp, the toy registry's
// reference served by serve_worker) as a backend kind, its faults as DeviceFault, and a campaign
// that survives a worker that crashes or hangs and records the case that killed it, shrunk.
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <optional>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "campaign/campaign.h"
#include "core/case_json.h"
#include "core/error.h"
#include "core/json_strict.h"
#include "corpus/differential.h"
#include "corpus/entry.h"
#include "corpus/replay.h"
#include "peers/exec/exec_backend.h"
#include "peers/exec/serve.h"
#include "testing/fault_campaign.h"
#include "testing/sanitizer_log.h"
#include "testing/toy_op.h"

namespace bitparity::peers {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

WorkerOptions fault_worker(const std::string& mode, double request_seconds = 20) {
  WorkerOptions o;
  o.name = "faulty";
  o.argv = {BITPARITY_FAULT_WORKER, mode};
  o.request_seconds = request_seconds;
  return o;
}

WorkerOptions shell_worker(const std::string& script) {
  WorkerOptions o;
  o.name = "sh";
  o.argv = {"/bin/sh", "-c", script};
  o.start_seconds = 5;
  o.request_seconds = 5;
  return o;
}

bool same_bits(const TensorMap& a, const TensorMap& b) { return a == b; }  // dtype, shape and bytes

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(ExecSpec, ParsesNameAndCommand) {
  EXPECT_EQ(parse_exec_spec("torch=python3 w.py --x=1"), std::make_pair(std::string("torch"), std::string("python3 w.py --x=1")));
  EXPECT_THROW(parse_exec_spec("torch"), ParseError);
  EXPECT_THROW(parse_exec_spec("=cmd"), ParseError);
  EXPECT_THROW(parse_exec_spec("torch="), ParseError);
  EXPECT_THROW(parse_exec_spec("Torch=cmd"), ParseError);
  EXPECT_THROW(parse_exec_spec("a:b=cmd"), ParseError);
}

// The worker computes what the in-process reference computes, bit for bit, and passes its
// rejections through with their class.
TEST(ExecBackend, AnswersEqualTheInProcessImplementation) {
  Registry r = testing::make_fake_registry();
  add_exec_backend(r, "mirror", fault_worker("none"));
  ASSERT_NE(r.impl("toy", "mirror:strict"), nullptr);
  ASSERT_NE(r.impl("toy", "mirror:sloppy"), nullptr);
  for (const Case& c : {testing::toy_case(2, 3, {1, -2, 0.5f, 3, -0.0f, 7}), testing::toy_case(1, 1, {65504}, 0.5)}) {
    for (const char* contract : {"strict", "sloppy", "exact"}) {
      const TensorMap local = run_impl(r, std::string("ref:") + contract, c);
      const TensorMap remote = run_impl(r, std::string("mirror:") + contract, c);
      EXPECT_TRUE(same_bits(local, remote)) << contract;
    }
  }
}

// A worker that takes batches gives each implementation a batch path, and a batch of cases through
// it gives each case what it gets alone, a rejection included; a batch whose worker
// crashes throws (the campaign then runs its cases alone), and the next batch gets a fresh worker.
TEST(ExecBackend, ABatchGivesEachCaseItsAnswerAlone) {
  Registry r = testing::make_fake_registry();
  const auto worker = add_exec_backend(r, "mirror", fault_worker("crash"));
  ASSERT_NE(r.batch_impl("toy", "mirror:strict"), nullptr) << "no batch path from a worker that takes batches";
  // A case the contract rejects (strict takes no zero rows) among them.
  const std::vector<Case> cases = {testing::toy_case(2, 3, {1, -2, 0.5f, 4, -0.0f, 7}), testing::toy_case(1, 1, {65504}, 0.5),
                                   testing::toy_case(0, 2, {}), testing::toy_case(3, 1, {-1, 8, 9})};
  std::vector<const Case*> pointers;
  for (const Case& c : cases) pointers.push_back(&c);
  const std::vector<BatchOutcome> outcomes = run_batch_impl(r, "mirror:strict", pointers);
  ASSERT_EQ(outcomes.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const Outcome alone = corpus::run_side(r, "ref:strict", cases[i]);
    const Outcome batched = corpus::side_outcome(outcomes[i]);
    EXPECT_EQ(batched.outputs, alone.outputs) << "case " << i;
    EXPECT_EQ(batched.reject_class, alone.reject_class) << "case " << i;
  }
  EXPECT_EQ(worker->starts(), 1) << "the batch took more than one worker";
  std::vector<const Case*> with_three = pointers;
  const Case three = testing::toy_case(1, 2, {1, 3});
  with_three.insert(with_three.begin() + 1, &three);
  EXPECT_THROW(run_batch_impl(r, "mirror:strict", with_three), DeviceFault);
  EXPECT_EQ(run_batch_impl(r, "mirror:strict", pointers).size(), cases.size());
  EXPECT_EQ(worker->starts(), 2);
}

TEST(ExecBackend, CrashIsADeviceFaultAndTheNextCaseGetsAFreshWorker) {
  for (const char* mode : {"crash", "abort", "exit", "garbage"}) {
    SCOPED_TRACE(mode);
    Registry r = testing::make_fake_registry();
    const auto worker = add_exec_backend(r, "faulty", fault_worker(mode));
    const Case bad = testing::toy_case(1, 2, {1, 3});
    const Case good = testing::toy_case(1, 2, {1, 2});
    try {
      run_impl(r, "faulty:strict", bad);
      ADD_FAILURE() << "no fault";
    } catch (const DeviceFault& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("worker faulty"), std::string::npos) << m;
      if (std::string(mode) == "crash") {
        EXPECT_NE(m.find("signal 11"), std::string::npos) << m;
      }
      if (std::string(mode) == "exit") {
        EXPECT_NE(m.find("exited with status 3"), std::string::npos) << m;
      }
      if (std::string(mode) == "garbage") {
        EXPECT_NE(m.find("broke the protocol"), std::string::npos) << m;
      } else {
        EXPECT_NE(m.find("planted"), std::string::npos) << "the worker's stderr is not in the message: " << m;
      }
    }
    EXPECT_TRUE(same_bits(run_impl(r, "faulty:strict", good), run_impl(r, "ref:strict", good)));
    EXPECT_EQ(worker->starts(), 2);
  }
}

TEST(ExecBackend, HangIsADeviceFaultAfterTheTimeout) {
  Registry r = testing::make_fake_registry();
  const auto worker = add_exec_backend(r, "faulty", fault_worker("hang", 1.0));
  const auto t0 = std::chrono::steady_clock::now();
  const std::string m = message_of([&] { run_impl(r, "faulty:strict", testing::toy_case(1, 1, {3})); });
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_NE(m.find("within the timeout"), std::string::npos) << m;
  EXPECT_NE(m.find("was still running and was killed"), std::string::npos) << m;
  EXPECT_GE(waited, 0.9);
  EXPECT_LT(waited, 10.0);
  EXPECT_NO_THROW(run_impl(r, "faulty:strict", testing::toy_case(1, 1, {2})));
  EXPECT_EQ(worker->starts(), 2);
}

// A worker judged by its exit status (hazard_exit_status, as `--sanitizer` runs compute-sanitizer):
// one case a worker; the hazard status after an answer is a SanitizerHazard carrying the checker's
// report, 0 returns the answer, any other status is a DeviceFault; the next case gets a fresh worker.
TEST(ExecBackend, AHazardExitStatusAfterTheAnswerIsASanitizerHazard) {
  Registry r = testing::make_fake_registry();
  WorkerOptions o = fault_worker("hazard");
  o.hazard_exit_status = 86;
  const auto worker = add_exec_backend(r, "racecheck", o);
  const Case good = testing::toy_case(1, 2, {1, 2});
  EXPECT_TRUE(same_bits(run_impl(r, "racecheck:strict", good), run_impl(r, "ref:strict", good)));
  EXPECT_EQ(worker->starts(), 1);
  try {
    run_impl(r, "racecheck:strict", testing::toy_case(1, 2, {1, 3}));
    ADD_FAILURE() << "no hazard";
  } catch (const SanitizerHazard& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("exited with status 86 (the hazard status)"), std::string::npos) << m;
    EXPECT_NE(m.find("Potential RAW hazard detected at __shared__"), std::string::npos) << m;
    EXPECT_EQ(m.find("RACECHECK SUMMARY"), std::string::npos) << "the summary is not the report: " << m;
  }
  EXPECT_TRUE(same_bits(run_impl(r, "racecheck:strict", good), run_impl(r, "ref:strict", good)));
  EXPECT_EQ(worker->starts(), 3) << "one case a worker";
  // Through run_side, the hazard is its own kind; another exit status is a device fault.
  EXPECT_EQ(corpus::run_side(r, "racecheck:strict", testing::toy_case(1, 1, {3})).reject_class, "sanitizer_hazard");
  WorkerOptions exits = fault_worker("exit");
  exits.hazard_exit_status = 86;
  add_exec_backend(r, "memcheck", exits);
  const Outcome crashed = corpus::run_side(r, "memcheck:strict", testing::toy_case(1, 1, {3}));
  EXPECT_EQ(crashed.reject_class, "device_fault") << crashed.message;
}

using testing::kCublasKernel;
using testing::kSanitizerBanner;
using testing::racecheck_analysis;
using testing::racecheck_report;
using testing::racecheck_summary;

// A racecheck log counts as the library's alone only where every printed report's kernel was
// launched from a closed library and nothing was left out of the log.
TEST(SanitizerLog, RacecheckReportsInsideALibrarysKernelsAreTold) {
  const std::string theirs = racecheck_report(kCublasKernel, testing::kCublasLaunch);
  const std::string ours = racecheck_report(
      "void bitparity::gpu::fused_backward_bulk_kernel<512, 4>(bitparity::gpu::CrossEntropy)", testing::kOwnLaunch);
  const std::vector<SanitizerReport> both = sanitizer_reports(kSanitizerBanner + theirs + ours + racecheck_summary(2));
  ASSERT_EQ(both.size(), 2u);
  EXPECT_EQ(both[0].kernel, kCublasKernel);
  EXPECT_EQ(both[0].library, "libcublasLt.so.13");
  EXPECT_EQ(both[1].kernel, "void bitparity::gpu::fused_backward_bulk_kernel<512, 4>(bitparity::gpu::CrossEntropy)");
  EXPECT_EQ(both[1].library, "");
  EXPECT_TRUE(racecheck_library_only(kSanitizerBanner + theirs + theirs + racecheck_summary(2), 1000));
  EXPECT_FALSE(racecheck_library_only(kSanitizerBanner + theirs + ours + racecheck_summary(2), 1000))
      << "ours beside the library's";
  EXPECT_FALSE(racecheck_library_only(kSanitizerBanner + ours + racecheck_summary(1), 1000));
  EXPECT_FALSE(racecheck_library_only(theirs + racecheck_summary(1), 1000)) << "the log's start was cut off";
  EXPECT_FALSE(racecheck_library_only(kSanitizerBanner + theirs + racecheck_summary(1000), 1000))
      << "reports left unprinted";
  EXPECT_FALSE(racecheck_library_only(kSanitizerBanner + theirs, 1000)) << "no summary";
  EXPECT_FALSE(racecheck_library_only(kSanitizerBanner + racecheck_summary(0), 1000)) << "no hazard";
  // A report without a host backtrace (--show-backtrace device) names no library: judged.
  const std::string device_only =
      "========= Error: Potential RAW hazard detected at __shared__ 0x580 in block (0,0,0) :\n"
      "=========     Write Thread (96,0,0) at planted_reduce+0xd0\n";
  EXPECT_EQ(sanitizer_reports(device_only).at(0).kernel, "planted_reduce");
  EXPECT_FALSE(racecheck_library_only(kSanitizerBanner + device_only + racecheck_summary(1), 1000));
  // An analysis report (no backtrace) is the library's where its kernel's hazard reports all are.
  const std::string analysis = racecheck_analysis(kCublasKernel);
  const std::vector<SanitizerReport> summed = sanitizer_reports(kSanitizerBanner + theirs + analysis + racecheck_summary(2));
  ASSERT_EQ(summed.size(), 2u);
  EXPECT_EQ(summed[1].kernel, kCublasKernel);
  EXPECT_EQ(summed[1].library, "libcublasLt.so.13");
  EXPECT_TRUE(racecheck_library_only(kSanitizerBanner + analysis + theirs + racecheck_summary(2), 1000))
      << "the analysis report before the hazard report";
  EXPECT_FALSE(racecheck_library_only(kSanitizerBanner + analysis + racecheck_summary(1), 1000))
      << "no backtraced report of the kernel";
  EXPECT_FALSE(racecheck_library_only(kSanitizerBanner + theirs + racecheck_analysis("planted_reduce") +
                                          racecheck_summary(2), 1000))
      << "another kernel's analysis beside the library's hazard";
  // Each judged log says why, for the finding's message.
  const auto because = [](const std::string& log) { return racecheck_judged_because(log, 1000); };
  EXPECT_EQ(because(kSanitizerBanner + theirs + theirs + racecheck_summary(2)), "");
  EXPECT_NE(because(kSanitizerBanner + theirs + ours + racecheck_summary(2))
                .find("a report in void bitparity::gpu::fused_backward_bulk_kernel<512, 4>"),
            std::string::npos);
  EXPECT_NE(because(theirs + racecheck_summary(1)).find("banner"), std::string::npos);
  EXPECT_NE(because(kSanitizerBanner + theirs + racecheck_summary(1000)).find("counts 1000 hazards, at the print limit"),
            std::string::npos);
  EXPECT_NE(because(kSanitizerBanner + theirs).find("no RACECHECK SUMMARY"), std::string::npos);
  EXPECT_NE(because(kSanitizerBanner + racecheck_summary(0)).find("counts 0 hazards"), std::string::npos);
  EXPECT_NE(because(kSanitizerBanner + device_only + racecheck_summary(1)).find("a report in planted_reduce"),
            std::string::npos);
}

// A log compute-sanitizer 13 wrote on an H100 for gemm's cublas contract (M 64, K 1408, N 4096):
// two of its 512 WAR hazard reports inside cuBLAS's nvjet kernel, each with its host backtrace, then
// the analysis report that sums them up without one, then the summary. The log is the library's.
TEST(SanitizerLog, ARecordedCublasLogWithItsAnalysisReportIsTheLibrarys) {
  std::ifstream in(std::string(BITPARITY_EXEC_TESTDATA) + "/racecheck_cublas_h100.log");
  ASSERT_TRUE(in) << "peers/exec/testdata/racecheck_cublas_h100.log";
  const std::string log((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::vector<SanitizerReport> reports = sanitizer_reports(log);
  ASSERT_EQ(reports.size(), 3u);
  for (const SanitizerReport& r : reports) {
    EXPECT_EQ(r.kernel, kCublasKernel);
    EXPECT_EQ(r.library, "libcublasLt.so.13");
  }
  EXPECT_EQ(racecheck_judged_because(log, 1000), "");
  // The analysis report alone (its hazard reports cut out) names no launcher: judged.
  const size_t analysis = log.find("========= Error: Race reported between");
  ASSERT_NE(analysis, std::string::npos);
  const std::string alone = std::string(kSanitizerBanner) + log.substr(analysis);
  EXPECT_NE(racecheck_judged_because(alone, 1000).find("a report in " + std::string(kCublasKernel)), std::string::npos);
}

// A sanitized worker whose checker reports only inside cuBLAS's kernels: its answer stands and the
// kernel is named; with a report of its own beside them, or where the option is off, a hazard.
TEST(ExecBackend, LibraryOnlyRacecheckReportsLeaveTheAnswer) {
  Registry r = testing::make_fake_registry();
  const Case flagged = testing::toy_case(1, 2, {1, 3});
  WorkerOptions library = fault_worker("library_hazard");
  library.hazard_exit_status = 86;
  library.library_hazards_not_judged = true;
  const auto worker = add_exec_backend(r, "racecheck", library);
  EXPECT_TRUE(same_bits(run_impl(r, "racecheck:strict", flagged), run_impl(r, "ref:strict", flagged)));
  ASSERT_EQ(worker->library_hazards().size(), 1u);
  EXPECT_EQ(worker->library_hazards()[0], std::string(kCublasKernel) + " (libcublasLt.so.13)");
  WorkerOptions mixed = fault_worker("mixed_hazard");
  mixed.hazard_exit_status = 86;
  mixed.library_hazards_not_judged = true;
  add_exec_backend(r, "mixed", mixed);
  const Outcome judged_mixed = corpus::run_side(r, "mixed:strict", flagged);
  EXPECT_EQ(judged_mixed.reject_class, "sanitizer_hazard");
  EXPECT_NE(judged_mixed.message.find("(judged as a hazard: a report in "), std::string::npos) << judged_mixed.message;
  library.library_hazards_not_judged = false;
  add_exec_backend(r, "judged", library);
  EXPECT_EQ(corpus::run_side(r, "judged:strict", flagged).reject_class, "sanitizer_hazard");
  // As `--sanitizer racecheck` starts them; memcheck judges every report.
  EXPECT_TRUE(sanitized_worker("compute-sanitizer", "racecheck", {"w"}, 1).library_hazards_not_judged);
  EXPECT_FALSE(sanitized_worker("compute-sanitizer", "memcheck", {"w"}, 1).library_hazards_not_judged);
}

TEST(ExecBackend, BadWorkersAreClearErrorsAtRegistration) {
  const auto error_of = [](const std::string& script) {
    Registry r = testing::make_fake_registry();
    return message_of([&] { add_exec_backend(r, "w", shell_worker(script)); });
  };
  EXPECT_NE(error_of("exit 4").find("exited with status 4"), std::string::npos);
  EXPECT_NE(error_of("echo not json; cat").find("hello"), std::string::npos);
  EXPECT_NE(error_of("echo '{\"format\": \"other/1\", \"implements\": {}}'; cat").find("bitparity-worker/1"),
            std::string::npos);
  EXPECT_NE(error_of("echo '{\"format\": \"bitparity-worker/1\", \"implements\": {\"nope\": [\"strict\"]}}'; cat")
                .find("no op \"nope\""),
            std::string::npos);
  EXPECT_NE(error_of("echo '{\"format\": \"bitparity-worker/1\", \"implements\": {\"toy\": [\"nope\"]}}'; cat")
                .find("no contract"),
            std::string::npos);
  EXPECT_NE(error_of("echo '{\"format\": \"bitparity-worker/1\", \"implements\": {\"toy\": [\"strict\", \"strict\"]}}'; cat")
                .find("names strict twice"),
            std::string::npos);
  EXPECT_NE(error_of("sleep 30").find("hello"), std::string::npos);
  Registry r = testing::make_fake_registry();
  WorkerOptions missing;
  missing.argv = {"/nonexistent/bitparity-worker"};
  const std::string m = message_of([&] { add_exec_backend(r, "w", missing); });
  EXPECT_NE(m.find("cannot run /nonexistent/bitparity-worker"), std::string::npos) << m;
  EXPECT_NE(message_of([&] { add_exec_backend(r, "ref", fault_worker("none")); }).find("exists already"),
            std::string::npos);
}

// An answer of the wrong id, or a reject without a class: out of protocol, a DeviceFault.
TEST(ExecBackend, AnswersOutOfProtocolAreDeviceFaults) {
  Registry r = testing::make_fake_registry();
  add_exec_backend(r, "w",
                   shell_worker("echo '{\"format\": \"bitparity-worker/1\", \"implements\": {\"toy\": [\"strict\"]}}';"
                                "while read line; do echo '{\"id\": 999, \"outputs\": {}}'; done"));
  const std::string m = message_of([&] { run_impl(r, "w:strict", testing::toy_case(1, 1, {1})); });
  EXPECT_NE(m.find("broke the protocol"), std::string::npos) << m;
  EXPECT_NE(m.find("id"), std::string::npos) << m;
}

// An answer may hold only the op's outputs: a name the op lacks (here with an escape character)
// would become a finding, and a corpus entry whose signature no reader of the corpus accepts; so
// would a rejection class that is no name (a '|' or a control character). Single and batch
// answers alike are protocol breaks then; the same answers with the op's own output name and a
// plain class are read. A worker's message reaches the user without its control characters.
TEST(ExecBackend, AnswersThatNoCorpusEntryCouldHoldBreakTheProtocol) {
  // A worker that answers every request, single or batch (of one case), with `answer`.
  const auto worker = [](const std::string& answer) {
    std::string script = R"(printf '%s\n' '{"format": "bitparity-worker/1", "batch": true, "implements": {"toy": ["strict"]}}'
while read -r line; do
  id=$(printf '%s' "$line" | sed 's/.*"id":\([0-9]*\).*/\1/')
  answer='ANSWER'
  case "$line" in
    *'"batch"'*) printf '{"id": %s, "results": [{%s}]}\n' "$id" "$answer" ;;
    *) printf '{"id": %s, %s}\n' "$id" "$answer" ;;
  esac
done)";
    script.replace(script.find("ANSWER"), 6, answer);
    return shell_worker(script);
  };
  const auto outputs = [](const std::string& name) {
    return "\"outputs\": {\"" + name + "\": {\"dtype\": \"bf16\", \"shape\": [1, 1], \"hex\": \"3f80\"}}";
  };
  const auto reject = [](const std::string& error_class) {
    return "\"reject\": {\"class\": \"" + error_class + "\", \"message\": \"no\\u001b[2J\\nway\"}";
  };
  const Case c = testing::toy_case(1, 1, {1});
  {
    Registry r = testing::make_fake_registry();
    add_exec_backend(r, "w", worker(outputs("y")));
    EXPECT_EQ(run_impl(r, "w:strict", c).count("y"), 1u);
    const std::vector<BatchOutcome> batch = run_batch_impl(r, "w:strict", {&c});
    ASSERT_EQ(batch.size(), 1u);
    EXPECT_FALSE(batch[0].error);
    EXPECT_EQ(batch[0].outputs.count("y"), 1u);
  }
  {
    Registry r = testing::make_fake_registry();
    add_exec_backend(r, "w", worker(reject("shape")));
    try {
      run_impl(r, "w:strict", c);
      ADD_FAILURE() << "a rejection was read as outputs";
    } catch (const RejectError& e) {
      EXPECT_EQ(e.error_class(), "shape");
      EXPECT_EQ(std::string(e.what()), "no?[2J way");
    }
  }
  for (const auto& [answer, says] : {std::pair<std::string, std::string>{outputs("y\\u001b[2J"), "has no output"},
                                     {outputs("z"), "has no output"},
                                     {reject("shape|x"), "reject.class"},
                                     {reject("device_fault"), "reject.class"},
                                     {reject(std::string(65, 'a')), "reject.class"},
                                     {reject("sh\\u0007ape"), "reject.class"},
                                     {reject(""), "reject.class"}}) {
    Registry r = testing::make_fake_registry();
    add_exec_backend(r, "w", worker(answer));
    const std::string single = message_of([&] { run_impl(r, "w:strict", c); });
    EXPECT_NE(single.find("broke the protocol"), std::string::npos) << answer << ": " << single;
    EXPECT_NE(single.find(says), std::string::npos) << answer << ": " << single;
    EXPECT_EQ(single.find_first_of("\x07\x1b"), std::string::npos) << answer << ": the message carries a raw control character";
    const std::string batch = message_of([&] { run_batch_impl(r, "w:strict", {&c}); });
    EXPECT_NE(batch.find("broke the protocol"), std::string::npos) << answer << ": " << batch;
    EXPECT_NE(batch.find(says), std::string::npos) << answer << ": " << batch;
  }
}

// A worker's messages reach corpus entries, which are UTF-8 JSON: a long rejection message cut in
// the middle of a character, and a crash whose stderr holds bytes that are no UTF-8, give messages
// that a JSON document can hold (a dump of one threw, and stopped the campaign).
TEST(ExecBackend, AWorkersMessagesStayUTF8) {
  std::string accents;
  for (int i = 0; i < 10; ++i) accents += "\xc3\xa9";  // e acute
  const std::string message = std::string(4095, 'a') + accents;
  Registry r = testing::make_fake_registry();
  add_exec_backend(r, "w",
                   shell_worker("echo '{\"format\": \"bitparity-worker/1\", \"implements\": {\"toy\": [\"strict\"]}}';"
                                "read line; echo '{\"id\": 1, \"reject\": {\"class\": \"shape\", \"message\": \"" +
                                message + "\"}}'; read line; printf 'bad \\377 byte\\n' >&2; exit 3"));
  const Case c = testing::toy_case(1, 1, {1});
  std::string rejected;
  try {
    run_impl(r, "w:strict", c);
  } catch (const RejectError& e) {
    rejected = e.what();
  }
  EXPECT_EQ(rejected.substr(0, 4095), std::string(4095, 'a'));
  EXPECT_EQ(rejected.substr(4095), "...") << "the cut keeps no half of a character";
  const std::string fault = message_of([&] { run_impl(r, "w:strict", c); });
  EXPECT_NE(fault.find("bad ? byte"), std::string::npos) << fault;
  for (const std::string& text : {rejected, fault}) EXPECT_NO_THROW((void)json(text).dump()) << text;
}

// A worker that keeps writing without ending its line is held to the timeout like a silent one.
// With the whole buffer searched again after every read, a reader fed a line of about 400 MiB fell
// behind the writer, never saw EAGAIN and so never looked at the clock; now each byte is searched
// once and the clock is read after every read. This test guards the timeout with a line of at most
// 128 MiB, which the old reader also ended in time: it does not reproduce that hang, which needs
// hundreds of megabytes.
TEST(ExecBackend, ALineThatNeverEndsIsADeviceFaultAtTheTimeout) {
  Registry r = testing::make_fake_registry();
  WorkerOptions o = shell_worker("echo '{\"format\": \"bitparity-worker/1\", \"implements\": {\"toy\": [\"strict\"]}}';"
                                 "read line; exec cat /dev/zero");
  o.request_seconds = 1;
  o.max_line_bytes = size_t{128} << 20;
  add_exec_backend(r, "w", o);
  const auto t0 = std::chrono::steady_clock::now();
  const std::string m = message_of([&] { run_impl(r, "w:strict", testing::toy_case(1, 1, {1})); });
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_TRUE(m.find("within the timeout") != std::string::npos || m.find("longer than") != std::string::npos) << m;
  EXPECT_LT(waited, 8.0);
}

// A worker (or a child it left behind) that floods stderr without end does not keep bitparity from
// its deadline either: stderr is drained a budget at a time. (The old unbounded drain also passed
// this test: it guards the timeout, it did not catch a failure.)
TEST(ExecBackend, AStderrFloodDoesNotOutlastTheTimeout) {
  Registry r = testing::make_fake_registry();
  WorkerOptions o = shell_worker("echo '{\"format\": \"bitparity-worker/1\", \"implements\": {\"toy\": [\"strict\"]}}';"
                                 "read line; exec cat /dev/zero >&2");
  o.request_seconds = 1;
  add_exec_backend(r, "w", o);
  const auto t0 = std::chrono::steady_clock::now();
  const std::string m = message_of([&] { run_impl(r, "w:strict", testing::toy_case(1, 1, {1})); });
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_NE(m.find("within the timeout"), std::string::npos) << m;
  EXPECT_LT(waited, 8.0);
}

TEST(ServeWorker, AnswersRequestsRejectionsAndItsOwnProtocolErrors) {
  const Registry r = testing::make_fake_registry();
  json ok = case_to_json(testing::toy_case(1, 2, {1, 2}));
  ok["id"] = 5;
  ok["contract"] = "strict";
  json bad_contract = ok;
  bad_contract["id"] = 6;
  bad_contract["contract"] = "nope";
  std::istringstream in(ok.dump() + "\n" + bad_contract.dump() + "\nnot json\n");
  std::ostringstream out;
  EXPECT_EQ(serve_worker(r, "ref", in, out), 0);
  std::istringstream lines(out.str());
  std::string hello, a1, a2, a3;
  std::getline(lines, hello);
  std::getline(lines, a1);
  std::getline(lines, a2);
  std::getline(lines, a3);
  const json h = json::parse(hello);
  EXPECT_EQ(h["format"], "bitparity-worker/1");
  EXPECT_EQ(h["implements"]["toy"], json({"exact", "flat", "sloppy", "strict"}));
  const json j1 = json::parse(a1);
  EXPECT_EQ(j1["id"], 5);
  EXPECT_TRUE(same_bits(tensors_from_json(j1["outputs"], "outputs"), run_impl(r, "ref:strict", testing::toy_case(1, 2, {1, 2}))));
  const json j2 = json::parse(a2);
  EXPECT_EQ(j2["id"], 6);
  EXPECT_NE(j2["error"].get<std::string>().find("nope"), std::string::npos) << j2.dump();
  const json j3 = json::parse(a3);
  EXPECT_EQ(j3["id"], 0);
  EXPECT_TRUE(j3.contains("error"));
  EXPECT_THROW(serve_worker(r, "nokind", in, out), std::runtime_error);
}

// A batch request: the hello offers it, and each case of the batch gets the answer it gets alone
// (outputs, its rejection, its backend error), in order; a batch with an element that is not a case
// gets one "error" answer; a fatal error inside a batch ends the worker without an answer.
TEST(ServeWorker, AnswersABatchCaseByCase) {
  Registry r = testing::make_fake_registry();
  r.add_backend({"boom", "throws on 2.0", nullptr});
  const Impl strict = *r.impl("toy", "ref:strict");
  r.add_impl("toy", "boom", "strict", [strict](const Case& c, const ContractInfo& info) -> TensorMap {
    if (c.input("x")->f32(0) == 2.0f) throw std::runtime_error("recoverable");
    if (c.input("x")->f32(0) == 3.0f) throw std::runtime_error("sticky: illegal address");
    return strict(c, info);
  });
  Case rank3 = testing::toy_case(1, 2, {1.0f, 2.0f});
  rank3.inputs["x"] = rank3.inputs["x"].reshaped({1, 1, 2});
  const std::vector<Case> cases = {testing::toy_case(1, 2, {1, 5}), rank3, testing::toy_case(1, 1, {2}),
                                   testing::toy_case(2, 1, {4, -1})};
  const auto batch = [](const std::vector<Case>& list, int id) {
    json request = {{"id", id}, {"contract", "strict"}, {"batch", json::array()}};
    for (const Case& c : list) request["batch"].push_back(case_to_json(c));
    return request.dump() + "\n";
  };
  json not_a_case = json::parse(batch({cases[0]}, 8));
  not_a_case["batch"].push_back(7);
  const IsFatal sticky = [](const std::exception& e) { return std::string(e.what()).rfind("sticky", 0) == 0; };
  std::istringstream in(batch(cases, 7) + not_a_case.dump() + "\n" + batch({cases[0], testing::toy_case(1, 1, {3})}, 9) +
                        batch({cases[0]}, 10));
  std::ostringstream out;
  EXPECT_EQ(serve_worker(r, "boom", in, out, {}, sticky), kWorkerExitFatal);
  std::istringstream lines(out.str());
  std::string hello, a1, a2, a3;
  std::getline(lines, hello);
  EXPECT_EQ(json::parse(hello)["batch"], true);
  std::getline(lines, a1);
  const json j1 = json::parse(a1);
  EXPECT_EQ(j1["id"], 7);
  ASSERT_EQ(j1["results"].size(), cases.size()) << a1;
  for (size_t i = 0; i < cases.size(); ++i) {
    std::istringstream one([&] {
      json request = case_to_json(cases[i]);
      request["id"] = 1;
      request["contract"] = "strict";
      return request.dump() + "\n";
    }());
    std::ostringstream alone;
    serve_worker(r, "boom", one, alone, {}, sticky);
    std::istringstream alone_lines(alone.str());
    std::string alone_hello, alone_answer;
    std::getline(alone_lines, alone_hello);
    std::getline(alone_lines, alone_answer);
    json expected = json::parse(alone_answer);
    expected.erase("id");
    EXPECT_EQ(j1["results"][i], expected) << "case " << i;
  }
  EXPECT_TRUE(j1["results"][0].contains("outputs"));
  EXPECT_EQ(j1["results"][1]["reject"]["class"], "shape");
  EXPECT_EQ(j1["results"][2]["error"], "recoverable");
  std::getline(lines, a2);
  const json j2 = json::parse(a2);
  EXPECT_EQ(j2["id"], 8);
  EXPECT_NE(j2.value("error", "").find("batch"), std::string::npos) << a2;
  EXPECT_FALSE(std::getline(lines, a3)) << "answered a batch with a fatal error in it: " << a3;
}

// An implementation's error that leaves the process unusable (a sticky CUDA fault) ends the
// worker without an answer; any other error is an "error" answer and the worker serves on.
TEST(ServeWorker, AFatalErrorEndsTheWorkerWithoutAnAnswer) {
  Registry r = testing::make_fake_registry();
  r.add_backend({"boom", "throws", nullptr});
  r.add_impl("toy", "boom", "exact", [](const Case& c, const ContractInfo&) -> TensorMap {
    throw std::runtime_error(c.input("x")->f32(0) == 3.0f ? "sticky: illegal address" : "recoverable");
  });
  const auto request = [](float v, int id) {
    json j = case_to_json(testing::toy_case(1, 1, {v}));
    j["id"] = id;
    j["contract"] = "exact";
    return j.dump() + "\n";
  };
  const IsFatal sticky = [](const std::exception& e) { return std::string(e.what()).rfind("sticky", 0) == 0; };
  std::istringstream in(request(1, 1) + request(3, 2) + request(1, 3));
  std::ostringstream out;
  EXPECT_EQ(serve_worker(r, "boom", in, out, {}, sticky), kWorkerExitFatal);
  std::istringstream lines(out.str());
  std::string hello, a1, a2;
  std::getline(lines, hello);
  std::getline(lines, a1);
  EXPECT_EQ(json::parse(a1)["error"], "recoverable");
  EXPECT_FALSE(std::getline(lines, a2)) << "answered after the fatal error: " << a2;
}

// A campaign whose worker crashes (or hangs) on every case holding 3.0 finishes its cases, loses
// none, and records the case that killed the worker as a device_fault entry, shrunk (in fresh
// workers) to the 3.0's column, which replays as still faulting.
TEST(ExecCampaign, SurvivesAFaultingWorkerAndRecordsTheCase) {
  for (const char* mode : {"crash", "hang"}) {
    SCOPED_TRACE(mode);
    Registry r = testing::make_fake_registry();
    const auto worker = add_exec_backend(r, "faulty", fault_worker(mode, 0.5));
    // Each hang costs the timeout.
    campaign::CampaignOptions o = testing::toy_fault_campaign("faulty", "exec_campaign_" + std::string(mode), 150, 11,
                                                              std::string(mode) == "hang" ? 40 : 500);
    const fs::path dir = o.corpus_dir;
    const reports::Report report = campaign::run_campaign(r, o);
    ASSERT_EQ(report.counts.size(), 1u);
    const reports::PairCounts& counts = report.counts.at(0);
    EXPECT_EQ(counts.cases, 150) << "cases were lost";
    ASSERT_GT(counts.mismatches.count("device_fault"), 0u);
    EXPECT_GT(counts.agreements, 0);
    EXPECT_TRUE(counts.skips.empty());
    ASSERT_FALSE(report.findings.empty());
    for (const reports::FindingRecord& f : report.findings) {
      EXPECT_EQ(f.kind, "device_fault");
      EXPECT_EQ(f.output, "fault:a");
      const corpus::Entry entry = corpus::load_entry(f.file, r);
      bool three = false;
      const Tensor& x = *entry.c.input("x");
      for (int64_t i = 0; i < x.numel(); ++i) three = three || x.f32(i) == 3.0f;
      EXPECT_TRUE(three) << f.file;
      if (std::string(mode) == "crash") {
        EXPECT_EQ(x.dim(1), 1) << f.file << ": not shrunk to the 3.0's column";
      }
      const corpus::ReplayResult replayed = corpus::replay_entry(r, entry);
      EXPECT_EQ(replayed.status, corpus::ReplayStatus::kPass) << replayed.summary;
    }
    EXPECT_GT(worker->starts(), 1);
    fs::remove_all(dir);
  }
}

// --batch with a worker that takes batches: a batch whose worker crashes runs its cases alone, so
// that the crash is recorded against the case that caused it; the report is that of --batch 1.
TEST(ExecCampaign, ABatchThatKillsTheWorkerGivesTheReportOfOne) {
  std::optional<reports::Report> first;
  for (const int batch : {1, 16}) {
    SCOPED_TRACE(batch);
    Registry r = testing::make_fake_registry();
    add_exec_backend(r, "faulty", fault_worker("crash"));
    auto calls = std::make_shared<std::atomic<int>>(0), faulted = std::make_shared<std::atomic<int>>(0);
    const BatchImpl inner = *r.batch_impl("toy", "faulty:strict");
    r.add_batch_impl("toy", "faulty", "strict", [inner, calls, faulted](const std::vector<const Case*>& cases, const ContractInfo& info) {
      ++*calls;
      try {
        return inner(cases, info);
      } catch (const DeviceFault&) {
        ++*faulted;
        throw;
      }
    });
    campaign::CampaignOptions o = testing::toy_fault_campaign("faulty", "exec_batch_" + std::to_string(batch), 120, 11, 200);
    o.batch = batch;
    o.jobs = 2;
    reports::Report report = campaign::run_campaign(r, o);
    fs::remove_all(o.corpus_dir);
    for (reports::FindingRecord& f : report.findings) f.file.clear();  // the corpus folders differ
    report.run = {};
    ASSERT_EQ(report.counts.size(), 1u);
    EXPECT_EQ(report.counts[0].cases, 120);
    EXPECT_GT(report.counts[0].mismatches.count("device_fault"), 0u);
    if (batch == 1) {
      EXPECT_EQ(calls->load(), 0);
      first = report;
      continue;
    }
    EXPECT_GT(calls->load(), 0) << "the batch path never ran";
    EXPECT_GT(faulted->load(), 0) << "no batch met the crash";
    EXPECT_EQ(report.counts, first->counts);
    EXPECT_EQ(report.coverage, first->coverage);
    EXPECT_EQ(report.findings, first->findings);
  }
}

// A campaign with a sanitized kind: the cases on which the checker reports become sanitizer_hazard
// entries, shrunk (one fresh worker a call) to the 3.0's column, with the checker's report, and
// they replay as still hazardous; no case is lost.
TEST(ExecCampaign, RecordsSanitizerHazardsShrunk) {
  Registry r = testing::make_fake_registry();
  WorkerOptions o = fault_worker("hazard");
  o.hazard_exit_status = 86;
  add_exec_backend(r, "racecheck", o);
  const campaign::CampaignOptions c = testing::toy_fault_campaign("racecheck", "exec_hazard", 60, 11, 300);
  const fs::path dir = c.corpus_dir;
  const reports::Report report = campaign::run_campaign(r, c);
  ASSERT_EQ(report.counts.size(), 1u);
  const reports::PairCounts& counts = report.counts.at(0);
  EXPECT_EQ(counts.cases, 60) << "cases were lost";
  EXPECT_GT(counts.agreements, 0);
  ASSERT_GT(counts.mismatches.count("sanitizer_hazard"), 0u);
  ASSERT_FALSE(report.findings.empty());
  for (const reports::FindingRecord& f : report.findings) {
    EXPECT_EQ(f.kind, "sanitizer_hazard");
    EXPECT_EQ(f.output, "hazard:a");
    const corpus::Entry entry = corpus::load_entry(f.file, r);
    const Tensor& x = *entry.c.input("x");
    bool three = false;
    for (int64_t i = 0; i < x.numel(); ++i) three = three || x.f32(i) == 3.0f;
    EXPECT_TRUE(three) << f.file;
    EXPECT_EQ(x.dim(1), 1) << f.file << ": not shrunk to the 3.0's column";
    std::ifstream file(f.file);
    const std::string message = json::parse(file)["finding"].value("message", "");
    EXPECT_NE(message.find("hazard detected"), std::string::npos) << message;
    const corpus::ReplayResult replayed = corpus::replay_entry(r, entry);
    EXPECT_EQ(replayed.status, corpus::ReplayStatus::kPass) << replayed.summary;
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace bitparity::peers
