#include "corpus/reproducer.h"

#include <cstdlib>
#include <exception>

#include "core/case_json.h"
#include "corpus/entry.h"
#include "corpus/replay.h"

namespace bitparity::corpus {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

}  // namespace

std::string reproducer_signature(const Case& c, const std::string& kind, const std::optional<BackendPair>& pair) {
  return "reproducer|" + case_title(c) + "|" + (pair ? pair->name() : std::string("-")) + "|" + kind;
}

fs::path failure_dir(const fs::path& dir) {
  if (!dir.empty()) return dir;
  const char* variable = std::getenv(std::string(kFailureDirVariable).c_str());
  if (variable && *variable) return fs::path(variable);
  return fs::path(kDefaultFailureDir);
}

json reproducer_document(const Case& c, const std::string& kind, const std::optional<BackendPair>& pair,
                         const std::string& message) {
  json doc = case_to_json(c);
  json finding = {{"kind", kind}, {"message", message}};
  if (pair) finding["pair"] = {pair->a, pair->b};
  if (pair && is_differential_kind(kind)) {
    // The fields a corpus entry has, so that replay checks the pair like any open entry.
    finding["output"] = "";
    finding["signature"] = reproducer_signature(c, kind, pair);
    finding["strict_nan"] = false;
    doc["pins"] = kPinOpen;
  }
  doc["finding"] = std::move(finding);
  return doc;
}

fs::path reproducer_path(const Case& c, const std::string& kind, const std::optional<BackendPair>& pair,
                         const fs::path& dir) {
  return failure_dir(dir) / (content_name(c, reproducer_signature(c, kind, pair)) + ".json");
}

std::string write_reproducer(const Case& c, const std::string& kind, const std::optional<BackendPair>& pair,
                             const std::string& message, fs::path dir) {
  fs::path path;
  try {
    path = reproducer_path(c, kind, pair, dir);
    write_file_atomically(path, reproducer_document(c, kind, pair, message).dump(2, ' ', false, json::error_handler_t::replace) + "\n");
    return reproduce_line(path);
  } catch (const std::exception& e) {
    std::string case_text;
    try {
      case_text = case_to_json(c).dump();
    } catch (const std::exception&) {
      case_text = "(the case cannot be written as JSON)";
    }
    return "Could not write a reproducer to " + (path.empty() ? failure_dir(dir).string() : path.string()) + ": " +
           e.what() + "\nThe case: " + case_text;
  }
}

}  // namespace bitparity::corpus
