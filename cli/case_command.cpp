// `bitparity case import|export`: cases, results and corpus entries between bitparity-case/1 JSON
// and .safetensors (core/safetensors_case.h), so that tensors dumped from PyTorch or Paddle replay
// here and a minimized case loads back in Python.
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/util.h"
#include "core/case_json.h"
#include "core/error.h"
#include "core/safe_file.h"
#include "core/safetensors_case.h"

namespace bitparity::cli {
namespace {

using nlohmann::json;

struct ImportFlags {
  std::string file, out, op, direction;
  std::vector<std::string> attrs;  // NAME=VALUE
};

struct ExportFlags {
  std::string file, out;
};

CaseOverrides overrides_of(const ImportFlags& flags) {
  CaseOverrides overrides;
  if (!flags.op.empty()) overrides.op = flags.op;
  if (!flags.direction.empty()) overrides.direction = flags.direction;
  for (const std::string& attr : flags.attrs) {
    const size_t eq = attr.find('=');  // the flag's check guarantees one after a name
    overrides.attrs.emplace_back(attr.substr(0, eq), attr.substr(eq + 1));
  }
  return overrides;
}

// The document in the file's normal form (case_to_json), with what it carries besides the case:
// a result's outputs, a corpus entry's finding, provenance and pins.
int import_case(const Registry& registry, const ImportFlags& flags) {
  if (!flags.out.empty()) check_output_file(flags.out, /*create_folders=*/true);  // before the work
  const Safetensors file = read_safetensors(flags.file);
  json doc;
  try {
    doc = case_document_from_safetensors(file, registry, overrides_of(flags));
    doc.update(case_to_json(case_from_json(doc, registry)));
  } catch (const ParseError& e) {
    throw ParseError("", flags.file + ": " + e.what());
  }
  const std::string text = doc.dump(2) + "\n";
  // Hex doubles a tensor's bytes: a .safetensors file within the limits can make a JSON document
  // past the limit every reader holds files to. Written, it could not be read back.
  if (text.size() > kMaxDocumentBytes)
    throw ParseError("", flags.file + ": as bitparity-case/1 JSON it would take " + std::to_string(text.size()) +
                             " bytes, past the " + std::to_string(kMaxDocumentBytes) +
                             "-byte limit on the documents bitparity reads; run, diff and replay read the "
                             ".safetensors file itself");
  write_output(flags.out, text);
  return kExitOk;
}

int export_case(const Registry& registry, const ExportFlags& flags) {
  check_output_file(flags.out, /*create_folders=*/true);
  const json doc = read_case_document(flags.file, registry);
  Safetensors file;
  try {
    file = safetensors_from_case_document(doc, registry);
  } catch (const ParseError& e) {
    throw ParseError("", flags.file + ": " + e.what());
  }
  write_output(flags.out, safetensors_to_bytes(file));
  std::cout << "wrote " << flags.out << ": " << file.metadata.at("op") << " " << file.metadata.at("direction") << ", "
            << file.tensors.size() << (file.tensors.size() == 1 ? " tensor\n" : " tensors\n");
  return kExitOk;
}

CLI::App* add_import(CLI::App& parent, ImportFlags& flags) {
  CLI::App* app = parent.add_subcommand(
      "import",
      "Read a .safetensors file (BF16, F16, F32, F64, F8_E4M3, F8_E5M2, BOOL, I32, I64 tensors) as a case: its "
      "tensors are the inputs (\"outputs.NAME\" a result's outputs), its __metadata__ names the op, the direction "
      "and the attributes (keys op, direction, attrs: a JSON object in text), and the flags name or replace them. "
      "The case is validated like any case file; a malformed file or case is an error naming the file (exit 2).");
  app->add_option("file", flags.file, ".safetensors file (from safetensors' save_file, or `bitparity case export`)")
      ->required();
  app->add_option("--op", flags.op, "the op (see `bitparity list`), over the metadata's");
  app->add_option("--direction", flags.direction, "fwd or bwd, over the metadata's")->check(CLI::IsMember({"fwd", "bwd"}));
  app->add_option("--attr", flags.attrs,
                  "NAME=VALUE, an attribute over the metadata's (repeatable): 7.0, -0.0, nan, inf, true, 2, sigmoid; "
                  "null removes it")
      ->check(CLI::Validator(
          [](const std::string& text) {
            const size_t eq = text.find('=');
            return eq == std::string::npos || eq == 0 ? std::string("expected NAME=VALUE, got " + text) : std::string();
          },
          "NAME=VALUE"));
  app->add_option("--out", flags.out, "case file to write (bitparity-case/1 JSON; default: stdout); written atomically");
  app->footer(
      "Examples:\n  bitparity case import dump.safetensors --op OP --direction bwd --attr NAME=7.0 --out case.json\n"
      "  bitparity case import minimized.safetensors --out case.json   (op and direction from its metadata)");
  return app;
}

CLI::App* add_export(CLI::App& parent, ExportFlags& flags) {
  CLI::App* app = parent.add_subcommand(
      "export",
      "Write a case, a result (`bitparity run --out`) or a corpus entry as a .safetensors file: the inputs under "
      "their names, a result's outputs as \"outputs.NAME\", bit for bit; format, op, direction and attrs (JSON "
      "text), and an entry's finding, provenance and pins, in its __metadata__. Python reads it with "
      "safetensors' load_file; `bitparity case import` gives the case back.");
  app->add_option("file", flags.file, "case, result or corpus entry (bitparity-case/1 JSON, or .safetensors)")
      ->required();
  app->add_option("--out", flags.out, ".safetensors file to write; written atomically")->required();
  app->footer(
      "Examples:\n  bitparity case export corpus/OP/3f9a0c1d2e3f4a5b.json --out case.safetensors\n"
      "  bitparity case export result.json --out result.safetensors");
  return app;
}

}  // namespace

Command add_case(CLI::App& root, const Registry& registry) {
  auto import_flags = std::make_shared<ImportFlags>();
  auto export_flags = std::make_shared<ExportFlags>();
  CLI::App* app = root.add_subcommand(
      "case", "Move cases between bitparity-case/1 JSON and .safetensors (PyTorch's and Paddle's tensor files).");
  app->require_subcommand(1);
  CLI::App* import_app = add_import(*app, *import_flags);
  add_export(*app, *export_flags);
  app->footer(
      "Examples:\n  bitparity case import dump.safetensors --op OP --direction bwd --out case.json\n"
      "  bitparity case export case.json --out case.safetensors\n"
      "run, diff and replay also read a .safetensors case directly.");
  return {app, [&registry, import_flags, export_flags, import_app] {
            return import_app->parsed() ? import_case(registry, *import_flags) : export_case(registry, *export_flags);
          }};
}

}  // namespace bitparity::cli
