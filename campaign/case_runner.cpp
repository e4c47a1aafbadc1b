#include "campaign/case_runner.h"

#include <stdexcept>

#include "campaign/campaign.h"

namespace bitparity::campaign {

using corpus::BackendPair;
using corpus::DiffResult;

CaseRunner::CaseRunner(const Registry& registry, CompareOptions options, OnUnusable on_unusable)
    : registry_(registry),
      options_(options),
      on_unusable_(std::move(on_unusable)),
      kind_locks_(std::make_unique<std::map<std::string, std::mutex>>()),
      unknown_kind_lock_(std::make_unique<std::mutex>()) {
  for (const BackendKind& kind : registry.backends())
    if (!backend_is_thread_safe(kind.name)) (*kind_locks_)[kind.name];
}

std::unique_lock<std::mutex> CaseRunner::lock_for(const std::string& backend) const {
  const std::string kind = backend.substr(0, backend.find(':'));
  if (backend_is_thread_safe(kind)) return {};
  const auto it = kind_locks_->find(kind);
  return std::unique_lock<std::mutex>(it == kind_locks_->end() ? *unknown_kind_lock_ : it->second);
}

std::optional<Outcome> CaseRunner::run_side(const std::string& backend, const Case& c) const {
  try {
    const std::unique_lock<std::mutex> lock = lock_for(backend);
    return corpus::run_side(registry_, backend, c);
  } catch (const std::exception& e) {
    if (on_unusable_) on_unusable_(backend, e.what());
  }
  return std::nullopt;
}

DiffResult CaseRunner::diff(const Case& c, const BackendPair& pair) const {
  auto side = [&](const std::string& backend) {
    const std::unique_lock<std::mutex> lock = lock_for(backend);
    return corpus::run_side(registry_, backend, c);
  };
  const Outcome a = side(pair.a);
  const Outcome b = side(pair.b);
  return corpus::classify(c, pair, a, b, options_);
}

std::vector<std::optional<DiffResult>> CaseRunner::run_pairs(const Case& c, const std::vector<BackendPair>& pairs) const {
  std::map<std::string, std::optional<Outcome>> once;  // backend -> its outcome on the case
  auto side = [&](const std::string& backend) -> const std::optional<Outcome>& {
    auto it = once.find(backend);
    if (it == once.end()) it = once.emplace(backend, run_side(backend, c)).first;
    return it->second;
  };
  std::vector<std::optional<DiffResult>> results;
  for (const BackendPair& pair : pairs) {
    const std::optional<Outcome>& a = side(pair.a);
    // A self pair runs its backend a second time; every other side runs once per case.
    std::optional<Outcome> again;
    if (pair.twice()) again = run_side(pair.b, c);
    const std::optional<Outcome>& b = pair.twice() ? again : side(pair.b);
    if (!a || !b) results.emplace_back();
    else results.emplace_back(corpus::classify(c, pair, *a, *b, options_));
  }
  return results;
}

}  // namespace bitparity::campaign
