// Planted bugs: test-only backends, each a copy of one reference contract with one deliberate
// mistake of a kind that has cost alignment work before (a rounding left out, a reduction in the
// wrong order, a clamp gated wrongly, a shape without keepdim). A campaign that pits one against
// the reference contract it imitates must find it and shrink it; planted_bugs_test.cpp checks
// that, so that a change to the generators, the classes or the shrinker that blinds the suite to
// one of these classes fails a test instead of passing in silence.
//
// Each bug is its own backend kind, "planted_<name>", implementing one op under the name of the
// contract it imitates, so the pair is "planted_<name>:C vs ref:C".
#pragma once

#include <string>
#include <vector>

#include "core/registry.h"

namespace bitparity::testing {

struct PlantedBug {
  std::string name;      // "swiglu_single_rounding": the backend kind is "planted_" + name
  std::string op;        // the op it breaks
  std::string contract;  // the reference contract it imitates
  std::string rule;      // what it gets wrong, in the spec's terms
  // The rows a minimal case needs: 1 or 2 for most; more where the mistake only shows once the
  // op's order depends on the row count (rule 7 changes its lane plan past 16 rows).
  int max_shrunk_rows = 2;
  Impl impl;             // built over the reference implementations of `registry`
  // Cases the self-test's campaign runs (from its fixed seed): fewer for ops whose cases are large.
  int64_t campaign_cases = 250;
};

// The planted bugs over the ops of `registry` (the builtin registry's references).
std::vector<PlantedBug> planted_bugs(const Registry& registry);

// `registry` plus one backend kind per planted bug.
Registry with_planted_bugs(const Registry& registry);

}  // namespace bitparity::testing
