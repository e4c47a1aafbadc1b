#include "campaign/case_runner.h"

#include <algorithm>
#include <stdexcept>

#include "campaign/campaign.h"

namespace bitparity::campaign {

using corpus::BackendPair;
using corpus::DiffResult;

void CaseRunner::Slots::take() {
  std::unique_lock<std::mutex> lock(mutex_);
  freed_.wait(lock, [this] { return free_ > 0; });
  --free_;
}

void CaseRunner::Slots::give() {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    ++free_;
  }
  freed_.notify_one();
}

class CaseRunner::Held {
 public:
  explicit Held(Slots* slots) : slots_(slots) {
    if (slots_) slots_->take();
  }
  ~Held() {
    if (slots_) slots_->give();
  }
  Held(const Held&) = delete;
  Held& operator=(const Held&) = delete;

 private:
  Slots* slots_;
};

CaseRunner::CaseRunner(const Registry& registry, CompareOptions options, OnUnusable on_unusable,
                       OnBatchFailed on_batch_failed)
    : registry_(registry),
      options_(options),
      on_unusable_(std::move(on_unusable)),
      on_batch_failed_(std::move(on_batch_failed)),
      kind_slots_(std::make_unique<std::map<std::string, Slots>>()),
      unknown_kind_slot_(std::make_unique<Slots>(1)) {
  for (const BackendKind& kind : registry.backends())
    if (kind.concurrent_calls != kAnyNumberOfCalls)
      kind_slots_->try_emplace(kind.name, std::max(kind.concurrent_calls, 1));
}

CaseRunner::Held CaseRunner::slot_for(const std::string& backend) const {
  const std::string kind = backend.substr(0, backend.find(':'));
  const auto it = kind_slots_->find(kind);
  if (it != kind_slots_->end()) return Held(&it->second);
  const BackendKind* known = registry_.backend(kind);
  return Held(known && known->concurrent_calls == kAnyNumberOfCalls ? nullptr : unknown_kind_slot_.get());
}

std::optional<Outcome> CaseRunner::run_side(const std::string& backend, const Case& c) const {
  try {
    const Held slot = slot_for(backend);
    return corpus::run_side(registry_, backend, c);
  } catch (const std::exception& e) {
    if (on_unusable_) on_unusable_(backend, e.what());
  }
  return std::nullopt;
}

DiffResult CaseRunner::diff(const Case& c, const BackendPair& pair) const {
  auto side = [&](const std::string& backend) {
    const Held slot = slot_for(backend);
    return corpus::run_side(registry_, backend, c);
  };
  const Outcome a = side(pair.a);
  const Outcome b = side(pair.b);
  return corpus::classify(registry_, c, pair, a, b, options_);
}

bool CaseRunner::batches(const std::string& op, const std::string& backend) const {
  if (!registry_.batch_impl(op, backend)) return false;
  const BackendKind* kind = registry_.backend(backend.substr(0, backend.find(':')));
  return kind && !(kind->unavailable_reason && kind->unavailable_reason().has_value());
}

std::vector<CaseRunner::Ready> CaseRunner::run_batches(const std::vector<const Case*>& cases,
                                                       const std::vector<std::string>& backends) const {
  std::vector<Ready> ready(cases.size());
  if (cases.empty()) return ready;
  for (const std::string& backend : backends) {
    if (!batches(cases.front()->op, backend)) continue;
    std::vector<BatchOutcome> outcomes;
    try {
      const Held slot = slot_for(backend);
      outcomes = run_batch_impl(registry_, backend, cases);
    } catch (const std::exception& e) {
      if (on_batch_failed_) on_batch_failed_(backend, cases.size(), e.what());
      continue;
    } catch (...) {
      if (on_batch_failed_) on_batch_failed_(backend, cases.size(), "an exception that is not a std::exception");
      continue;
    }
    for (size_t i = 0; i < cases.size(); ++i) ready[i].emplace(backend, corpus::side_outcome(std::move(outcomes[i])));
  }
  return ready;
}

std::vector<std::optional<DiffResult>> CaseRunner::run_pairs(const Case& c, const std::vector<BackendPair>& pairs,
                                                             Ready* ready, Ready* again) const {
  std::map<std::string, std::optional<Outcome>> once;  // backend -> its outcome on the case
  if (ready)
    for (auto& [backend, outcome] : *ready) once.emplace(backend, std::move(outcome));
  auto side = [&](const std::string& backend) -> const std::optional<Outcome>& {
    auto it = once.find(backend);
    if (it == once.end()) it = once.emplace(backend, run_side(backend, c)).first;
    return it->second;
  };
  std::vector<std::optional<DiffResult>> results;
  for (const BackendPair& pair : pairs) {
    const std::optional<Outcome>& a = side(pair.a);
    // A self pair runs its backend a second time (here, unless a second batch did); every other
    // side runs once per case.
    std::optional<Outcome> second;
    if (pair.twice() && again && again->count(pair.b)) {
      second = std::move(again->at(pair.b));
      again->erase(pair.b);
    } else if (pair.twice()) {
      second = run_side(pair.b, c);
    }
    const std::optional<Outcome>& b = pair.twice() ? second : side(pair.b);
    if (!a || !b) results.emplace_back();
    else results.emplace_back(corpus::classify(registry_, c, pair, *a, *b, options_));
  }
  return results;
}

}  // namespace bitparity::campaign
