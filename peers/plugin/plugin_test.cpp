// plug-in backends end to end, on host memory (no GPU): the C test plug-ins of test_plugins/ loaded
// into the builtin registry, compared with the reference bit for bit, found out by a campaign where
// one of them is wrong, and every way a library can break the ABI refused with a message naming it.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include "campaign/campaign.h"
#include "core/error.h"
#include "corpus/differential.h"
#include "corpus/entry.h"
#include "corpus/replay.h"
#include "peers/plugin/plugin_backend.h"

namespace bitparity::peers {
namespace {

namespace fs = std::filesystem;
using corpus::diff_case;
using corpus::DiffResult;
using corpus::run_side;

fs::path plugin_file(const std::string& name) { return fs::path(BITPARITY_PLUGIN_DIR) / (name + ".so"); }

Registry with_plugin(const std::string& name) {
  Registry registry = harness_registry();
  add_plugin_backend(registry, plugin_file(name));
  return registry;
}

std::string load_error(const std::string& name) {
  Registry registry = harness_registry();
  try {
    add_plugin_backend(registry, plugin_file(name));
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

// g_router as given, g_dispatcher and g_shared +0: the glm45 sum is g_router itself (for values
// that are not -0), so a misbehaving plug-in that returns g_router is right but for its fault.
Case router_only_case(int64_t T, int64_t H) {
  Case c;
  c.op = "fanout_grad";
  c.direction = Direction::kForward;
  Tensor router(DType::kBF16, {T, H});
  for (int64_t i = 0; i < router.numel(); ++i) router.set_f32(i, 0.25f * static_cast<float>(i + 1));
  c.inputs["g_router"] = router;
  c.inputs["g_dispatcher"] = Tensor(DType::kBF16, {T, H});
  c.inputs["g_shared"] = Tensor(DType::kBF16, {T, H});
  return c;
}

campaign::CampaignOptions options_for(const std::string& a, const std::string& b, int64_t cases) {
  campaign::CampaignOptions o;
  o.budget_seconds = 120;
  o.max_cases = cases;
  o.seed = 11;
  o.ops = {"fanout_grad"};
  o.pairs = {corpus::parse_pair(a + "," + b)};
  return o;
}

TEST(Plugin, LoadsAsABackendKindWithItsPairs) {
  Registry registry = harness_registry();
  const PluginInfo info = add_plugin_backend(registry, plugin_file("hostfan"));
  EXPECT_EQ(info.kind, "hostfan");
  EXPECT_FALSE(info.device_memory);
  EXPECT_EQ(info.impls.size(), 2u);
  ASSERT_NE(registry.backend("hostfan"), nullptr);
  EXPECT_NE(registry.backend("hostfan")->doc.find("hostfan.so"), std::string::npos);
  EXPECT_NE(registry.impl("fanout_grad", "hostfan:glm45"), nullptr);
  EXPECT_NE(registry.impl("fanout_grad", "hostfan:dsv4"), nullptr);
  EXPECT_EQ(registry.impl("swiglu", "hostfan:glm45"), nullptr);
}

// Every generated case of both contracts, bit for bit against the reference; the integer-free
// random values make the two contracts' orders differ on some of them, so agreement means each
// contract's order was the one computed.
TEST(Plugin, HostPluginEqualsTheReferenceOnGeneratedCases) {
  const Registry registry = with_plugin("hostfan");
  const OpInfo* op = registry.op("fanout_grad");
  ASSERT_NE(op, nullptr);
  int64_t nonzero = 0, orders_differ = 0;
  for (int i = 0; i < 300; ++i) {
    const Case c = op->generate(Direction::kForward)(rc::Random(1000 + i), i % 50).value();
    for (const char* contract : {"glm45", "dsv4"}) {
      Outcome ref = run_side(registry, std::string("ref:") + contract, c);
      Outcome mine = run_side(registry, std::string("hostfan:") + contract, c);
      ASSERT_EQ(ref.reject_class, mine.reject_class) << mine.message;
      if (!ref.outputs) continue;
      ASSERT_TRUE(mine.outputs);
      const Comparison cmp = compare_outputs(*ref.outputs, *mine.outputs);
      ASSERT_EQ(cmp.verdict, Verdict::kIdentical) << "case " << i << " under " << contract;
      const Tensor& d = ref.outputs->at("d_hidden");
      for (int64_t e = 0; e < d.numel(); ++e) nonzero += d.bits(e) != 0;
    }
    const Outcome glm = run_side(registry, "ref:glm45", c), dsv = run_side(registry, "ref:dsv4", c);
    if (glm.outputs && dsv.outputs && compare_outputs(*glm.outputs, *dsv.outputs).verdict != Verdict::kIdentical)
      ++orders_differ;
  }
  EXPECT_GT(nonzero, 0);
  EXPECT_GT(orders_differ, 0) << "no generated case tells the two orders apart: the test proves nothing";
}

TEST(Plugin, CampaignOfACorrectPluginFindsNothing) {
  const Registry registry = with_plugin("hostfan");
  const reports::Report report = campaign::run_campaign(registry, options_for("hostfan:glm45", "ref:glm45", 200));
  ASSERT_EQ(report.counts.size(), 1u);
  EXPECT_GT(report.counts[0].agreements, 150);
  EXPECT_TRUE(report.findings.empty()) << report.findings[0].message;
}

// The planted plug-in adds the shared branch last under glm45: a campaign finds it, shrinks it to
// one row, and the entry replays as still failing while the plug-in is wrong.
TEST(Plugin, CampaignFindsAndShrinksAPlantedOrderBug) {
  const Registry registry = with_plugin("hostfan_planted");
  const fs::path corpus = fs::temp_directory_path() / ("bitparity_plugin_test_" + std::to_string(::getpid()));
  fs::remove_all(corpus);
  campaign::CampaignOptions o = options_for("hostfan_planted:glm45", "ref:glm45", 400);
  o.corpus_dir = corpus;
  const reports::Report report = campaign::run_campaign(registry, o);
  ASSERT_FALSE(report.findings.empty());
  const reports::FindingRecord& f = report.findings[0];
  EXPECT_EQ(f.kind, "bit_mismatch");
  EXPECT_EQ(f.output, "d_hidden");
  EXPECT_TRUE(reports::is_failure(f));
  const corpus::Entry entry = corpus::load_entry(f.file, registry);
  EXPECT_LE(entry.c.inputs.at("g_router").dim(0), 1) << "not shrunk to one row";
  EXPECT_LE(entry.c.inputs.at("g_router").numel(), 2);
  EXPECT_NE(corpus::replay_entry(registry, entry).summary.find("still reproduces"), std::string::npos)
      << corpus::replay_entry(registry, entry).summary;
  fs::remove_all(corpus);
}

TEST(Plugin, InputsAreCopiesAndOutputsKeepThePoisonWhereUnwritten) {
  const Registry registry = with_plugin("forgets");
  const Case c = router_only_case(2, 3);
  const DiffResult r = diff_case(registry, c, {"ref:glm45", "forgets:glm45"});
  ASSERT_EQ(r.kind, "bit_mismatch") << r.message;
  ASSERT_TRUE(r.comparison);
  const OutputComparison* first = r.comparison->first_difference();
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->mismatches, 2);  // the last fp32-sized element: two bf16 elements, 0x5a5a each
  ASSERT_TRUE(first->first);
  EXPECT_EQ(first->first->index, 4);
  EXPECT_EQ(first->first->b_bits, 0x5a5au);
}

TEST(Plugin, ItsOwnOutputShapeIsAShapeFindingNotReshaped) {
  const Registry registry = with_plugin("flat");
  const DiffResult r = diff_case(registry, router_only_case(2, 3), {"flat:glm45", "ref:glm45"});
  EXPECT_EQ(r.kind, "shape_mismatch") << r.message;
  EXPECT_NE(r.message.find("[6]"), std::string::npos) << r.message;
}

TEST(Plugin, AResultAfterARefusedAllocationIsNotTaken) {
  const Registry registry = with_plugin("twice");  // allocates d_hidden twice, ignores the refusal
  const Outcome o = run_side(registry, "twice:glm45", router_only_case(2, 3));
  EXPECT_EQ(o.reject_class, corpus::kBackendError) << "a result after a refused allocation was taken";
  EXPECT_NE(o.message.find("allocated twice"), std::string::npos) << o.message;
}

TEST(Plugin, ErrorsRejectionsAndUnknownStatusesAreReportedAsSuch) {
  const Case c = router_only_case(1, 4);
  {
    const Registry registry = with_plugin("errors");
    const Outcome o = run_side(registry, "errors:glm45", c);
    EXPECT_EQ(o.reject_class, corpus::kBackendError);
    EXPECT_NE(o.message.find("plug-in errors: launch failed: the device is busy"), std::string::npos) << o.message;
    EXPECT_EQ(diff_case(registry, c, {"errors:glm45", "ref:glm45"}).kind, corpus::kBackendError);
  }
  {
    const Registry registry = with_plugin("rejects");
    const Outcome o = run_side(registry, "rejects:glm45", c);
    EXPECT_EQ(o.reject_class, "dtype");
    EXPECT_NE(o.message.find("g_router"), std::string::npos) << o.message;
    EXPECT_EQ(diff_case(registry, c, {"rejects:glm45", "ref:glm45"}).kind, corpus::kErrorMismatch);
  }
  {
    // A class that is no name (a '|', an escape) would break findings' signatures: a backend error,
    // whose message shows no raw control character.
    const Registry registry = with_plugin("bad_class");
    const Outcome o = run_side(registry, "bad_class:glm45", c);
    EXPECT_EQ(o.reject_class, corpus::kBackendError);
    EXPECT_NE(o.message.find("which is not a name of at most 64 characters"), std::string::npos) << o.message;
    EXPECT_NE(o.message.find("g_router:?[2J no way"), std::string::npos) << o.message;
    EXPECT_EQ(o.message.find('\x1b'), std::string::npos) << o.message;
  }
  {
    // An output the op lacks is refused at allocation; the plug-in's error carries the refusal.
    const Registry registry = with_plugin("other_output");
    const Outcome o = run_side(registry, "other_output:glm45", c);
    EXPECT_EQ(o.reject_class, corpus::kBackendError);
    EXPECT_NE(o.message.find("the op has no output of that name"), std::string::npos) << o.message;
    EXPECT_EQ(o.message.find('\x1b'), std::string::npos) << o.message;
  }
  {
    const Registry registry = with_plugin("bad_status");
    const Outcome o = run_side(registry, "bad_status:glm45", c);
    EXPECT_EQ(o.reject_class, corpus::kBackendError);
    EXPECT_NE(o.message.find("status 7"), std::string::npos) << o.message;
  }
  {
    const Registry registry = with_plugin("long_message");  // buffers filled without a NUL
    const Outcome o = run_side(registry, "long_message:glm45", c);
    EXPECT_EQ(o.reject_class, std::string(31, 'c'));
    EXPECT_EQ(o.message, "plug-in long_message: " + std::string(1023, 'm'));
  }
  {
    const Registry registry = with_plugin("oversize");
    const Outcome o = run_side(registry, "oversize:glm45", c);
    EXPECT_EQ(o.reject_class, corpus::kBackendError);
    EXPECT_NE(o.message.find("[1048576, 1048576]"), std::string::npos) << o.message;
  }
}

TEST(Plugin, TheRegistryValidatesBeforeThePluginSeesACase) {
  const Registry registry = with_plugin("hostfan");
  Case c = router_only_case(2, 3);
  c.inputs["g_shared"] = Tensor(DType::kBF16, {2, 4});
  EXPECT_THROW(run_impl(registry, "hostfan:glm45", c), RejectError);
}

struct BrokenPlugin {
  std::string name, message;
};

class BrokenPlugins : public ::testing::TestWithParam<BrokenPlugin> {};

TEST_P(BrokenPlugins, AreRefusedWithAMessageNamingTheFault) {
  const std::string message = load_error(GetParam().name);
  EXPECT_NE(message.find(GetParam().message), std::string::npos) << message;
  EXPECT_NE(message.find(GetParam().name + ".so"), std::string::npos) << "the file is not named: " << message;
}

INSTANTIATE_TEST_SUITE_P(
    Abi, BrokenPlugins,
    ::testing::Values(BrokenPlugin{"unknown_op", "no op \"no_such_op\""},
                      BrokenPlugin{"unknown_contract", "fanout_grad has no contract \"no_such_contract\""},
                      BrokenPlugin{"listed_twice", "listed twice"},
                      BrokenPlugin{"future_abi", "built for plug-in ABI 2; this bitparity speaks ABI 1"},
                      BrokenPlugin{"bad_name", "must match [a-z][a-z0-9_]*"},
                      BrokenPlugin{"taken_name", "backend kind \"ref\" exists already"},
                      BrokenPlugin{"bad_memory", "memory is 5"},
                      BrokenPlugin{"null_compute", "compute is NULL"},
                      BrokenPlugin{"no_entry", "has no entry point bitparity_plugin_v1"},
                      BrokenPlugin{"null_entry", "returned NULL"}),
    [](const auto& info) { return info.param.name; });

TEST(Plugin, FilesThatAreNotPluginsAreRefused) {
  Registry registry = harness_registry();
  auto message = [&](const fs::path& path) {
    try {
      add_plugin_backend(registry, path);
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(message("/no/such/plugin.so").find("no such file"), std::string::npos);
  const fs::path text = fs::temp_directory_path() / ("bitparity_not_a_plugin_" + std::to_string(::getpid()) + ".so");
  { std::ofstream(text) << "not an ELF file\n"; }
  EXPECT_NE(message(text).find("cannot be opened"), std::string::npos) << message(text);
  fs::remove(text);
  EXPECT_NE(message(fs::temp_directory_path()).find("no such file"), std::string::npos);
}

TEST(Plugin, LoadingTheSamePluginTwiceIsRefused) {
  Registry registry = harness_registry();
  add_plugin_backend(registry, plugin_file("hostfan"));
  try {
    add_plugin_backend(registry, plugin_file("hostfan"));
    FAIL() << "loaded twice";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("exists already"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace bitparity::peers
