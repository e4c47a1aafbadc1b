// The two ways an input goes wrong, each a value with a message a user can act on.
#pragma once

#include <stdexcept>
#include <string>

namespace bitparity {

// A document that is not a valid case: `field` names where ("inputs.y.hex", "attrs.clamp").
class ParseError : public std::runtime_error {
 public:
  ParseError(std::string field, const std::string& message)
      : std::runtime_error(field.empty() ? message : field + ": " + message), field_(std::move(field)) {}
  const std::string& field() const { return field_; }

 private:
  std::string field_;
};

// A well-formed case that an op or a contract refuses (a shape, a dtype or an attribute it does
// not accept). `error_class` is what two backends must agree on: "shape", "dtype", "attr"; and
// "unmodelled" where the reference does not model what the framework does (a layout rule 7 does
// not cover), which harnesses count as a skip, not as a disagreement.
class RejectError : public std::runtime_error {
 public:
  RejectError(std::string error_class, const std::string& message)
      : std::runtime_error(message), error_class_(std::move(error_class)) {}
  const std::string& error_class() const { return error_class_; }

 private:
  std::string error_class_;
};

// A backend's process died, hung or broke its protocol while it computed a case (an illegal
// address on a GPU, a crashed or stuck worker): the case may be what killed it. Harnesses record
// it as a `device_fault` finding, never a skip, and go on with a fresh process.
class DeviceFault : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A worker that answered the case but whose run a checker judged hazardous: compute-sanitizer's
// memcheck, racecheck, synccheck or initcheck found an error on it (the worker serves one case and
// exits with the sanitizer's --error-exitcode). Harnesses record it as a `sanitizer_hazard`
// finding, shrunk in fresh workers like a device fault.
class SanitizerHazard : public DeviceFault {
 public:
  using DeviceFault::DeviceFault;
};

}  // namespace bitparity
