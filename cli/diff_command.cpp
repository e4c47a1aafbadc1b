// `bitparity diff`: one case through two backends; verdict, message and arbitration.
#include <cmath>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/util.h"
#include "corpus/differential.h"

namespace bitparity::cli {
namespace {

struct DiffFlags {
  std::string case_file, a, b;
  bool strict_nan = false;
};

std::string number_text(const nlohmann::json& j) { return j.is_string() ? j.get<std::string>() : j.dump(); }

void print_arbitration(const OpInfo& op, const Case& c, const corpus::BackendPair& pair, const corpus::DiffResult& r) {
  const nlohmann::json arb = corpus::arbitration_json(op, c, pair, r);
  if (arb.is_null()) {
    std::cout << "Arbitration: no oracle for this output\n";
    return;
  }
  const std::string closer = arb["closer"].get<std::string>();
  std::cout << "Arbitration (oracle true value " << number_text(arb["truth"]) << "): " << pair.a << " is "
            << number_text(arb["a_ulps"]) << " ulp away, " << pair.b << " is " << number_text(arb["b_ulps"])
            << " ulp away; " << (closer == "tie" ? "neither is closer" : closer + " is closer") << "\n";
}

int diff(const Registry& registry, const DiffFlags& flags) {
  const Case c = load_case(flags.case_file, registry);
  const corpus::BackendPair pair{flags.a, flags.b};
  const corpus::DiffResult r = corpus::diff_case(registry, c, pair, CompareOptions{flags.strict_nan});
  std::cout << r.message << "\n";
  switch (r.verdict) {
    case corpus::DiffVerdict::kAgree:
      return kExitOk;
    case corpus::DiffVerdict::kSkip:
      std::cerr << "error: the input is outside what a side models (" << r.kind << "); nothing was compared\n";
      return kExitError;
    case corpus::DiffVerdict::kFinding:
      if (r.comparison && r.comparison->first_difference() && r.comparison->first_difference()->first)
        print_arbitration(*registry.op(c.op), c, pair, r);
      return kExitDifferent;
  }
  return kExitError;
}

}  // namespace

Command add_diff(CLI::App& root, const Registry& registry) {
  auto flags = std::make_shared<DiffFlags>();
  CLI::App* app = root.add_subcommand(
      "diff",
      "Run one case through two backends and compare bit for bit: shapes first, then bits in the output "
      "dtype (all NaNs equal unless --strict-nan; +0 and -0 differ). For the first mismatch, says which side "
      "is closer to the op's oracle. Exit 0 identical, 1 different, 2 error.");
  app->add_option("--case", flags->case_file, "case file (bitparity-case/1 JSON, or .safetensors: `bitparity case`)")
      ->required();
  app->add_option("A", flags->a, "first backend, KIND:CONTRACT")->required();
  app->add_option("B", flags->b, "second backend, KIND:CONTRACT")->required();
  app->add_flag("--strict-nan", flags->strict_nan, "compare NaN payloads and signs bit for bit");
  app->footer(
      "Examples:\n  bitparity diff --case case.json cuda:CONTRACT ref:CONTRACT\n"
      "  bitparity diff --case case.json ref:CONTRACT_A ref:CONTRACT_B   (names: bitparity list)");
  return {app, [&registry, flags] { return diff(registry, *flags); }};
}

}  // namespace bitparity::cli
