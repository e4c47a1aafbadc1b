// Cases, results and corpus entries through .safetensors: the round trip for every op of the
// builtin registry, the metadata and the command line's overrides, and errors worded as a JSON
// case's.
#include "core/safetensors_case.h"

#include <cmath>

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include "core/case_json.h"
#include "core/error.h"
#include "ops/builtin.h"

namespace bitparity {
namespace {

using nlohmann::json;

constexpr int kCasesPerDirection = 40;
constexpr int kMaxSize = 100;  // RapidCheck sizes 0..100, as a property run uses
constexpr uint64_t kSeed = 0x5afe'7e50;

const Registry& registry() { return builtin_registry(); }

// The document a file holds once written and read back as bytes.
json through_bytes(const json& doc) {
  const Safetensors file = safetensors_from_case_document(doc, registry());
  const std::string bytes = safetensors_to_bytes(file);
  const Safetensors back = safetensors_from_bytes(bytes);
  EXPECT_EQ(back, file);
  return case_document_from_safetensors(back, registry());
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ParseError& e) {
    return e.what();
  }
  return "(accepted)";
}

// Every op and direction of the registry, its generated cases (every edge class: empty tensors,
// NaN payloads, -0, subnormals, NaN and -0 attributes) back bit for bit.
TEST(SafetensorsCaseTest, EveryOpsGeneratedCasesRoundTripBitForBit) {
  int64_t cases = 0, elements = 0;
  for (const OpInfo& op : registry().ops()) {
    for (const auto& [direction, specs] : op.inputs) {
      const rc::Gen<Case> generator = op.generate(direction);
      rc::Random random(kSeed + static_cast<uint64_t>(direction));
      for (int i = 0; i < kCasesPerDirection; ++i) {
        const Case c = generator(random.split(), i % (kMaxSize + 1)).value();
        const json original = case_to_json(c);
        const json back = through_bytes(original);
        ASSERT_EQ(case_to_json(case_from_json(back, registry())).dump(), original.dump())
            << op.name << " " << direction_name(direction) << " case " << i;
        ++cases;
        for (const auto& [name, t] : c.inputs) elements += t.numel();
      }
    }
  }
  EXPECT_GE(cases, static_cast<int64_t>(registry().ops().size()) * kCasesPerDirection);
  EXPECT_GT(elements, cases);  // not a round trip of empty tensors only
}

json swiglu_case() {
  return json::parse(R"({"format": "bitparity-case/1", "op": "swiglu", "direction": "bwd", "attrs": {"clamp": 7.0},
    "inputs": {"y": {"dtype": "bf16", "shape": [1, 4], "hex": "3f80c0000001ffc1"},
               "g": {"dtype": "bf16", "shape": [1, 2], "hex": "80003f80"}}})");
}

TEST(SafetensorsCaseTest, ACaseFileHoldsItsInputsAndItsFieldsAsMetadata) {
  const Safetensors file = safetensors_from_case_document(swiglu_case(), registry());
  EXPECT_EQ(file.metadata, (std::map<std::string, std::string>{
                               {"format", "bitparity-case/1"}, {"op", "swiglu"}, {"direction", "bwd"}, {"attrs", "{\"clamp\":7.0}"}}));
  ASSERT_EQ(file.tensors.size(), 2u);
  EXPECT_EQ(file.tensors.at("y").bits(3), 0xffc1u);
  EXPECT_EQ(file.tensors.at("g").bits(0), 0x8000u);
}

TEST(SafetensorsCaseTest, NonFiniteAndNegativeZeroAttributesRoundTrip) {
  for (double clamp : {std::nan(""), double(INFINITY), double(-INFINITY), -0.0, 1e-300}) {
    json doc = swiglu_case();
    doc["attrs"]["clamp"] = attr_to_json(clamp);
    const Case back = case_from_json(through_bytes(doc), registry());
    EXPECT_EQ(f64_bits(*back.float_attr("clamp")), f64_bits(clamp)) << clamp;
  }
}

TEST(SafetensorsCaseTest, AResultKeepsItsOutputsAndAnEntryItsFinding) {
  json doc = swiglu_case();
  const Case c = case_from_json(doc, registry());
  doc["outputs"] = tensors_to_json(run_impl(registry(), "ref:megatron_eager", c));
  doc["pins"] = "divergence";
  doc["finding"] = {{"kind", "bit_mismatch"}, {"pair", {"ref:megatron_eager", "ref:megatron_unfused"}}};
  doc["provenance"] = {{"seed", 18446744073709551615ull}, {"shard", "0/1"}};
  doc["note"] = {{"why", "a NaN payload"}};
  const Safetensors file = safetensors_from_case_document(doc, registry());
  EXPECT_TRUE(file.tensors.count("outputs.d_y")) << "outputs are named outputs.NAME";
  EXPECT_EQ(file.metadata.at("pins"), "divergence");
  EXPECT_EQ(through_bytes(doc), doc);
}

// A file dumped from PyTorch: tensors and PyTorch's own metadata tag, the case named on the
// command line.
Safetensors pytorch_dump() {
  Safetensors file;
  file.metadata["format"] = "pt";
  Tensor y(DType::kBF16, {1, 4}), g(DType::kBF16, {1, 2});
  y.set_bits(0, 0x3f80);
  g.set_bits(1, 0x0001);
  file.tensors.emplace("y", y);
  file.tensors.emplace("g", g);
  return file;
}

TEST(SafetensorsCaseTest, TheCommandLineNamesWhatTheMetadataLacks) {
  CaseOverrides overrides{"swiglu", "bwd", {{"clamp", "nan"}}};
  const Case c = case_from_json(case_document_from_safetensors(pytorch_dump(), registry(), overrides), registry());
  EXPECT_EQ(c.op, "swiglu");
  EXPECT_EQ(c.direction, Direction::kBackward);
  EXPECT_TRUE(std::isnan(*c.float_attr("clamp")));
  EXPECT_EQ(c.inputs.at("g").bits(1), 1u);

  const std::string missing_op = message_of([] { case_document_from_safetensors(pytorch_dump(), registry()); });
  EXPECT_EQ(missing_op, "op: missing: the file's __metadata__ has no \"op\" and none was given (--op)");
  const std::string missing_direction =
      message_of([] { case_document_from_safetensors(pytorch_dump(), registry(), {"swiglu", {}, {}}); });
  EXPECT_NE(missing_direction.find("direction: missing"), std::string::npos) << missing_direction;
}

TEST(SafetensorsCaseTest, TheCommandLineOverridesTheMetadata) {
  Safetensors file = safetensors_from_case_document(swiglu_case(), registry());
  CaseOverrides overrides{{}, {}, {{"clamp", "-0.0"}}};
  Case c = case_from_json(case_document_from_safetensors(file, registry(), overrides), registry());
  EXPECT_EQ(f64_bits(*c.float_attr("clamp")), f64_bits(-0.0));
  overrides.attrs = {{"clamp", "null"}};  // Python's None: no clamp
  c = case_from_json(case_document_from_safetensors(file, registry(), overrides), registry());
  EXPECT_FALSE(c.float_attr("clamp").has_value());
  overrides = CaseOverrides{"swiglu_scale", {}, {}};
  EXPECT_NE(message_of([&] { case_from_json(case_document_from_safetensors(file, registry(), overrides), registry()); })
                .find("inputs.scale: missing required input of swiglu_scale bwd"),
            std::string::npos);
}

TEST(SafetensorsCaseTest, AttributesTypedOnTheCommandLineReadAsTheirType) {
  Safetensors file;
  file.tensors.emplace("logits", Tensor(DType::kFP32, {2, 4}));
  CaseOverrides overrides{"router_topk", "fwd", {{"k", "2"}, {"score", "sqrt_softplus"}, {"scaling", "2.5"}}};
  const Case c = case_from_json(case_document_from_safetensors(file, registry(), overrides), registry());
  EXPECT_EQ(std::get<int64_t>(c.attrs.at("k")), 2);
  EXPECT_EQ(std::get<std::string>(c.attrs.at("score")), "sqrt_softplus");
  EXPECT_EQ(std::get<double>(c.attrs.at("scaling")), 2.5);
  // A string attribute keeps text that is also JSON; another type refuses text that is not its own.
  overrides.attrs = {{"k", "2"}, {"score", "true"}};
  EXPECT_EQ(std::get<std::string>(
                case_from_json(case_document_from_safetensors(file, registry(), overrides), registry()).attrs.at("score")),
            "true");
  overrides.attrs = {{"k", "two"}};
  EXPECT_EQ(message_of([&] { case_from_json(case_document_from_safetensors(file, registry(), overrides), registry()); }),
            "attrs.k: expected an integer, got string");
}

// Validation is the JSON case's: the same document, the same message.
TEST(SafetensorsCaseTest, ErrorsReadAsAJsonCasesDo) {
  Safetensors file = safetensors_from_case_document(swiglu_case(), registry());
  file.tensors.emplace("h", Tensor(DType::kBF16, {1, 2}));
  json as_json = swiglu_case();
  as_json["inputs"]["h"] = tensor_to_json(Tensor(DType::kBF16, {1, 2}));
  const std::string from_file =
      message_of([&] { case_from_json(case_document_from_safetensors(file, registry()), registry()); });
  EXPECT_EQ(from_file, message_of([&] { case_from_json(as_json, registry()); }));
  EXPECT_EQ(from_file, "inputs.h: unexpected input of swiglu bwd (expected: y, bias?, g)");

  file = safetensors_from_case_document(swiglu_case(), registry());
  file.metadata["op"] = "swiglu2";
  EXPECT_EQ(message_of([&] { case_from_json(case_document_from_safetensors(file, registry()), registry()); }),
            "op: unknown op \"swiglu2\" (see `bitparity list`)");
}

TEST(SafetensorsCaseTest, MalformedMetadataIsNamed) {
  auto message_for = [](const std::string& key, const std::string& value) {
    Safetensors file = safetensors_from_case_document(swiglu_case(), registry());
    file.metadata[key] = value;
    return message_of([&] { case_from_json(case_document_from_safetensors(file, registry()), registry()); });
  };
  EXPECT_EQ(message_for("format", "bitparity-case/2"),
            "__metadata__.format: expected \"bitparity-case/1\", got \"bitparity-case/2\"");
  EXPECT_EQ(message_for("format", "pt"), "(accepted)");  // another tool's tag
  EXPECT_NE(message_for("attrs", "{\"clamp\": ").find("__metadata__.attrs: its text is not valid JSON"),
            std::string::npos);
  EXPECT_EQ(message_for("attrs", "[7.0]"),
            "__metadata__.attrs: expected a JSON object of attributes in text ({\"clamp\": 7.0}), got array");
  EXPECT_EQ(message_for("attrs", "{\"clamp\": true}"), "attrs.clamp: expected a number or one of \"nan\", \"inf\", \"-inf\"; got boolean");
  EXPECT_EQ(message_for("direction", "backward"), "direction: expected \"fwd\" or \"bwd\", got \"backward\"");
  EXPECT_NE(message_for("provenance", "{\"seed\": -1}").find("provenance.seed"), std::string::npos);
  EXPECT_NE(message_for("finding", "{").find("__metadata__.finding"), std::string::npos);
  EXPECT_EQ(message_for("framework", "pt"), "(accepted)");  // keys bitparity does not use are left alone
}

TEST(SafetensorsCaseTest, AnInvalidDocumentIsNotExported) {
  json doc = swiglu_case();
  doc["inputs"].erase("g");
  EXPECT_EQ(message_of([&] { safetensors_from_case_document(doc, registry()); }),
            "inputs.g: missing required input of swiglu bwd");
  doc = swiglu_case();
  doc["pins"] = 3;
  EXPECT_EQ(message_of([&] { safetensors_from_case_document(doc, registry()); }), "pins: expected a string, got integer");
}

}  // namespace
}  // namespace bitparity
