// `bitparity run`: one case through one backend; the result in the case format plus "outputs".
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/util.h"
#include "core/case_json.h"
#include "core/json_strict.h"
#include "core/safe_file.h"

namespace bitparity::cli {
namespace {

struct RunFlags {
  std::string case_file, backend, out;
};

int run(const Registry& registry, const RunFlags& flags) {
  if (!flags.out.empty()) check_output_file(flags.out, /*create_folders=*/true);  // before the work
  const Case c = load_case(flags.case_file, registry);
  const TensorMap outputs = run_impl(registry, flags.backend, c);  // RejectError: main prints it, exit 2
  nlohmann::json result = case_to_json(c);
  result["outputs"] = tensors_to_json(outputs);
  const std::string text = result.dump(2) + "\n";
  write_output(flags.out, text);
  if (text.size() > kMaxDocumentBytes)  // outputs in hex may pass the limit that the inputs kept to
    std::cerr << "warning: the result is " << text.size() << " bytes, more than the " << kMaxDocumentBytes
              << " (256 MiB) that bitparity reads in a JSON document: `run --case` and `case` will refuse it as a case\n";
  return kExitOk;
}

}  // namespace

Command add_run(CLI::App& root, const Registry& registry) {
  auto flags = std::make_shared<RunFlags>();
  CLI::App* app = root.add_subcommand(
      "run",
      "Run one case through one backend and write the case with its \"outputs\" (bitparity-case/1). "
      "A rejected input prints `error (<class>): message` and exits 2.");
  app->add_option("--case", flags->case_file, "case file (bitparity-case/1 JSON, or .safetensors: `bitparity case`)")
      ->required();
  app->add_option("--backend", flags->backend, "KIND:CONTRACT (see `bitparity list`)")->required();
  app->add_option("--out", flags->out, "result file (default: stdout); written atomically");
  app->footer("Example:\n  bitparity run --case case.json --backend ref:CONTRACT --out result.json");
  return {app, [&registry, flags] { return run(registry, *flags); }};
}

}  // namespace bitparity::cli
