// Outputs are held to the limits of inputs. A file of a few hundred bytes whose inputs are within
// check_shape_limits can still ask an op for an output of 2^28 elements or more: empty inputs whose
// other dims are large (a map of 16,384 tokens and no experts), or an attribute (num_embeddings).
// Each crafted case under fuzz/hostile_outputs/ must parse, and then be a `shape` rejection naming
// the output under every contract of its op, fast, before anything is allocated or computed. The
// limit must not refuse what the GPU tests run: every reference input they compute on the CPU
// (bench_only ones aside) gives outputs within it.
#include <algorithm>
#include <chrono>
#include <filesystem>

#include <gtest/gtest.h>

#include "core/case_json.h"
#include "core/error.h"
#include "core/registry.h"

namespace bitparity {
namespace {

namespace fs = std::filesystem;

TEST(HostileOutputs, EveryCraftedCaseIsAShapeRejectionNamingTheOutput) {
  const Registry& registry = harness_registry();
  size_t files = 0, runs = 0;
  for (const fs::directory_entry& e : fs::directory_iterator(BITPARITY_HOSTILE_OUTPUTS_DIR)) {
    ++files;
    const Case c = case_from_file(e.path(), registry);  // within the input limits: it parses
    const OpInfo* op = registry.op(c.op);
    ASSERT_NE(op, nullptr) << e.path();
    for (const ContractInfo& contract : op->contracts) {
      const std::string backend = "ref:" + contract.name;
      if (!registry.impl(c.op, backend)) continue;
      ++runs;
      const auto start = std::chrono::steady_clock::now();
      try {
        run_impl(registry, backend, c);
        ADD_FAILURE() << e.path() << " " << backend << ": computed";
      } catch (const RejectError& r) {
        EXPECT_EQ(r.error_class(), "shape") << e.path() << " " << backend << ": " << r.what();
        EXPECT_NE(std::string(r.what()).find("output"), std::string::npos) << r.what();
        EXPECT_NE(std::string(r.what()).find("too large"), std::string::npos) << r.what();
      }
      EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1)) << e.path() << " " << backend;
    }
  }
  EXPECT_GE(files, 4u);
  EXPECT_GE(runs, files);
}

TEST(HostileOutputs, ReferenceInputsGiveOutputsWithinTheLimits) {
  const Registry& registry = harness_registry();
  size_t checked = 0;
  for (const OpInfo& op : registry.ops()) {
    if (!op.reference_inputs || !op.validate) continue;
    for (const auto& [direction, specs] : op.inputs) {
      for (const ReferenceInput& input : op.reference_inputs(direction)) {
        if (input.bench_only) continue;
        const Case c = input.make();
        for (const ContractInfo& contract : op.contracts) {
          if (!input.contracts.empty() &&
              std::find(input.contracts.begin(), input.contracts.end(), contract.name) == input.contracts.end())
            continue;
          OutputMetas metas;
          try {
            metas = op.validate(c, contract);
          } catch (const RejectError&) {
            continue;  // a contract that refuses the input runs nothing on it
          }
          for (const auto& [name, meta] : metas) {
            EXPECT_NO_THROW(check_shape_limits(meta.shape)) << op.name << " " << input.name << " " << contract.name
                                                            << ": output " << name << " " << shape_string(meta.shape);
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 0u);
}

}  // namespace
}  // namespace bitparity
