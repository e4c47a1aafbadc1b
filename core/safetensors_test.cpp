// The .safetensors reader and writer against files whose bytes are written here by hand, following
// the format's specification (an 8-byte little-endian length, the JSON header, the buffer), never
// by the writer under test.
#include "core/safetensors.h"

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include <gtest/gtest.h>

#include "core/error.h"
#include "core/json_strict.h"

namespace bitparity {
namespace {

namespace fs = std::filesystem;

// The 8 length bytes, little end first, written out here rather than by the code under test.
std::string le64(uint64_t v) {
  std::string bytes;
  for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  return bytes;
}

std::string file_of(const std::string& header, const std::string& buffer) {
  return le64(header.size()) + header + buffer;
}

// Bytes from hex digit pairs: "c17f" is the two bytes 0xc1, 0x7f.
std::string hex_bytes(const std::string& hex) {
  std::string bytes;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) bytes.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return bytes;
}

std::string message_of(const std::string& bytes) {
  try {
    safetensors_from_bytes(bytes);
  } catch (const ParseError& e) {
    return e.what();
  }
  return "(accepted)";
}

// One tensor per dtype: little-endian element bytes as a file holds them, and the bit patterns they
// must become. Each floating dtype carries a NaN with a payload, -0 and a subnormal.
struct Fixture {
  const char* name;  // the format's dtype name, also the GoogleTest name
  DType dtype;
  Shape shape;
  std::string hex;  // the buffer, byte by byte
  std::vector<uint64_t> bits;
};

void PrintTo(const Fixture& f, std::ostream* os) { *os << f.name; }

const std::vector<Fixture>& fixtures() {
  static const std::vector<Fixture> all = {
      {"BF16", DType::kBF16, {2, 2}, "c17f" "0080" "0100" "803f", {0x7fc1, 0x8000, 0x0001, 0x3f80}},
      {"F16", DType::kFP16, {4}, "017e" "0080" "0100" "003c", {0x7e01, 0x8000, 0x0001, 0x3c00}},
      {"F32", DType::kFP32, {3, 1}, "2301c07f" "00000080" "01000000", {0x7fc00123, 0x80000000, 0x00000001}},
      {"F64", DType::kFP64, {3}, "bc0a00000000f8ff" "0000000000000080" "0100000000000000",
       {0xfff8000000000abcull, 0x8000000000000000ull, 1}},
      {"F8_E4M3", DType::kFP8E4M3, {3}, "7f" "80" "01", {0x7f, 0x80, 0x01}},
      {"F8_E5M2", DType::kFP8E5M2, {3}, "7d" "80" "01", {0x7d, 0x80, 0x01}},
      {"I64", DType::kI64, {2}, "ffffffffffffffff" "efcdab8967452301", {0xffffffffffffffffull, 0x0123456789abcdefull}},
      {"I32", DType::kI32, {2}, "00000080" "07000000", {0x80000000u, 7}},
      {"BOOL", DType::kBool, {1, 3}, "01" "00" "01", {1, 0, 1}},
  };
  return all;
}

std::string shape_json(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

// The header the format's writer would give a single tensor "t": compact JSON, keys in the order
// dtype, shape, data_offsets, padded with spaces to a multiple of 8 bytes.
std::string single_tensor_header(const Fixture& f) {
  const size_t bytes = f.hex.size() / 2;
  std::string header = R"({"t":{"dtype":")" + std::string(f.name) + R"(","shape":)" + shape_json(f.shape) +
                       R"(,"data_offsets":[0,)" + std::to_string(bytes) + "]}}";
  while (header.size() % 8) header += ' ';
  return header;
}

class DTypeFixtureTest : public testing::TestWithParam<Fixture> {};

TEST_P(DTypeFixtureTest, EveryBitSurvivesReadingAndWriting) {
  const Fixture& f = GetParam();
  const std::string bytes = file_of(single_tensor_header(f), hex_bytes(f.hex));
  const Safetensors file = safetensors_from_bytes(bytes);
  ASSERT_EQ(file.tensors.size(), 1u);
  EXPECT_TRUE(file.metadata.empty());
  const Tensor& t = file.tensors.at("t");
  EXPECT_EQ(t.dtype(), f.dtype);
  EXPECT_EQ(t.shape(), f.shape);
  ASSERT_EQ(t.numel(), static_cast<int64_t>(f.bits.size()));
  for (int64_t i = 0; i < t.numel(); ++i) EXPECT_EQ(t.bits(i), f.bits[static_cast<size_t>(i)]) << f.name << "[" << i << "]";
  // The writer gives back the very bytes written by hand.
  EXPECT_EQ(safetensors_to_bytes(file), bytes);
}

INSTANTIATE_TEST_SUITE_P(EachDType, DTypeFixtureTest, testing::ValuesIn(fixtures()),
                         [](const testing::TestParamInfo<Fixture>& info) { return std::string(info.param.name); });

TEST(SafetensorsTest, TheNameOfEachDTypeMapsBothWays) {
  for (const Fixture& f : fixtures()) {
    EXPECT_EQ(safetensors_dtype_name(f.dtype), f.name);
    EXPECT_EQ(parse_safetensors_dtype(f.name), f.dtype);
  }
  for (const char* other : {"U8", "I8", "I16", "U16", "U32", "U64", "F8_E8M0", "C64", "bf16", ""})
    EXPECT_EQ(parse_safetensors_dtype(other), std::nullopt) << other;
}

// The byte arrays of the format's reference implementation's own serialization tests
// (huggingface/safetensors, safetensors/src/tensor.rs: test_serialization, test_empty).
TEST(SafetensorsTest, ReadsAndWritesTheReferenceImplementationsBytes) {
  const std::vector<uint8_t> attn = {
      64,  0,   0,   0,   0,   0,   0,   0,   123, 34,  97,  116, 116, 110, 46,  48,  34,  58,  123, 34,  100,
      116, 121, 112, 101, 34,  58,  34,  70,  51,  50,  34,  44,  34,  115, 104, 97,  112, 101, 34,  58,  91,
      49,  44,  50,  44,  51,  93,  44,  34,  100, 97,  116, 97,  95,  111, 102, 102, 115, 101, 116, 115, 34,
      58,  91,  48,  44,  50,  52,  93,  125, 125, 0,   0,   0,   0,   0,   0,   128, 63,  0,   0,   0,   64,
      0,   0,   64,  64,  0,   0,   128, 64,  0,   0,   160, 64};
  const std::string bytes(attn.begin(), attn.end());
  const Safetensors file = safetensors_from_bytes(bytes);
  const Tensor& t = file.tensors.at("attn.0");
  EXPECT_EQ(t.dtype(), DType::kFP32);
  EXPECT_EQ(t.shape(), (Shape{1, 2, 3}));
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(t.f32(i), static_cast<float>(i));
  EXPECT_EQ(safetensors_to_bytes(file), bytes);

  const std::vector<uint8_t> empty = {8, 0, 0, 0, 0, 0, 0, 0, 123, 125, 32, 32, 32, 32, 32, 32};
  EXPECT_EQ(safetensors_from_bytes(std::string(empty.begin(), empty.end())), Safetensors{});
  EXPECT_EQ(safetensors_to_bytes(Safetensors{}), std::string(empty.begin(), empty.end()));

  const std::vector<uint8_t> framework = {40,  0,   0,   0,   0,   0,   0,  0,  123, 34,  95,  95,  109, 101, 116, 97,
                                          100, 97,  116, 97,  95,  95,  34, 58, 123, 34,  102, 114, 97,  109, 101, 119,
                                          111, 114, 107, 34,  58,  34,  112, 116, 34, 125, 125, 32,  32,  32,  32,  32};
  const Safetensors with_metadata = safetensors_from_bytes(std::string(framework.begin(), framework.end()));
  EXPECT_EQ(with_metadata.metadata, (std::map<std::string, std::string>{{"framework", "pt"}}));
  EXPECT_EQ(safetensors_to_bytes(with_metadata), std::string(framework.begin(), framework.end()));
}

// Another writer may order the header by name, leave the buffer unaligned and skip the padding:
// the format allows all of it.
TEST(SafetensorsTest, ReadsUnalignedTensorsInAnyHeaderOrder) {
  const std::string header =
      R"({"b":{"dtype":"BF16","shape":[2],"data_offsets":[3,7]},"__metadata__":{"op":"swiglu","x":""},)"
      R"("a":{"dtype":"BOOL","shape":[3],"data_offsets":[0,3]},"e":{"shape":[0,4],"dtype":"F32","data_offsets":[7,7]},)"
      R"("s":{"dtype":"I64","shape":[],"data_offsets":[7,15]}})";
  const Safetensors file =
      safetensors_from_bytes(file_of(header, hex_bytes("010100" "0080" "c17f" "0500000000000000")));
  EXPECT_EQ(file.metadata, (std::map<std::string, std::string>{{"op", "swiglu"}, {"x", ""}}));
  ASSERT_EQ(file.tensors.size(), 4u);
  EXPECT_EQ(file.tensors.at("a").bits(1), 1u);
  EXPECT_EQ(file.tensors.at("b").bits(0), 0x8000u);
  EXPECT_EQ(file.tensors.at("b").bits(1), 0x7fc1u);
  EXPECT_EQ(file.tensors.at("e").shape(), (Shape{0, 4}));
  EXPECT_EQ(file.tensors.at("s").shape(), Shape{});  // a scalar: one element
  EXPECT_EQ(file.tensors.at("s").bits(0), 5u);
  // Written again, each tensor starts at a multiple of its element size, and reads back the same.
  const std::string written = safetensors_to_bytes(file);
  EXPECT_EQ(safetensors_from_bytes(written), file);
  const uint64_t header_bytes = static_cast<uint8_t>(written[0]) | (uint64_t{static_cast<uint8_t>(written[1])} << 8);
  EXPECT_EQ(header_bytes % 8, 0u);
  EXPECT_NE(written.find(R"("s":{"dtype":"I64","shape":[],"data_offsets":[0,8]})"), std::string::npos) << written;
  EXPECT_NE(written.find(R"("b":{"dtype":"BF16","shape":[2],"data_offsets":[8,12]})"), std::string::npos) << written;
}

TEST(SafetensorsTest, ATensorNamedLikeTheMetadataIsNotWritten) {
  Safetensors file;
  file.tensors.emplace(std::string(kSafetensorsMetadataKey), Tensor(DType::kBF16, {1}));
  EXPECT_THROW(safetensors_to_bytes(file), std::invalid_argument);
}

// Each way a file can be malformed, with a word of the message it must get.
struct Malformed {
  const char* name;
  std::string bytes;
  std::string expected;  // a part of the message
};

void PrintTo(const Malformed& m, std::ostream* os) { *os << m.name; }

const std::string kValidBF16 = R"({"y":{"dtype":"BF16","shape":[2,2],"data_offsets":[0,8]}})";
const std::string kEightBytes = hex_bytes("803f0040c0004080");

std::string entry(const std::string& name, const std::string& dtype, const std::string& shape, const std::string& offsets) {
  return "\"" + name + R"(":{"dtype":")" + dtype + R"(","shape":)" + shape + R"(,"data_offsets":)" + offsets + "}";
}

std::vector<Malformed> malformed_files() {
  const std::string y = entry("y", "BF16", "[2]", "[0,4]");
  return {
      {"Empty", "", "the file has 0 bytes; a .safetensors file begins with an 8-byte header length"},
      {"ShorterThanTheLength", std::string("\x10\x00\x00", 3), "the file has 3 bytes"},
      {"HeaderLengthPastTheLimit", le64(100'000'001) + "{}", "header length 100000001 is past the limit of 100000000"},
      {"AJsonCase", R"({"format": "bitparity-case/1"})", "the file begins like JSON: a case document, not .safetensors?"},
      {"HeaderLengthPastInt64", le64(std::numeric_limits<uint64_t>::max()) + "{}", "is past the limit"},
      {"HeaderLengthPastTheFile", le64(64) + "{}      ", "header length 64 reaches past the end of the file (8 bytes follow"},
      {"EmptyHeader", le64(0), "does not begin with '{'"},
      {"HeaderNotAnObject", file_of("[1, 2]  ", ""), "does not begin with '{'"},
      {"HeaderWithLeadingSpace", file_of(" {}     ", ""), "does not begin with '{'"},
      {"NotJson", file_of("{\"y\": {", ""), "the header is not valid JSON"},
      {"InvalidUtf8", file_of("{\"\xff\xfe\": {}}", ""), "the header is not valid JSON"},
      {"TwoObjects", file_of("{}{}", ""), "the header is not valid JSON"},
      {"PaddedWithNewlines", file_of("{}\n\n\n\n\n\n", ""), "padded with bytes other than spaces (0x20)"},
      {"PaddedWithNul", file_of(std::string("{}\0\0\0\0\0\0", 8), ""), "the header holds a NUL byte at offset 2"},
      {"NulThenMoreJson", file_of(std::string("{}\0    }", 8), ""), "the header holds a NUL byte at offset 2"},
      {"NulInsideAString", file_of(std::string("{\"a\0\":{}}", 8), ""), "the header holds a NUL byte at offset 3"},
      {"DuplicateTensor", file_of("{" + y + "," + entry("y", "BF16", "[2]", "[4,8]") + "}", kEightBytes),
       "y: duplicate key in the header"},
      {"DuplicateMetadataKey", file_of(R"({"__metadata__":{"op":"a","op":"b"}})", ""), "__metadata__.op: duplicate key"},
      {"DeepHeader", file_of("{\"y\":" + std::string(100, '[') + std::string(100, ']') + "}", ""), "nests deeper than 64"},
      {"EntryNotAnObject", file_of(R"({"y":[0,8]})", ""), "y: expected a tensor entry {dtype, shape, data_offsets}, got array"},
      {"MissingDtype", file_of(R"({"y":{"shape":[2],"data_offsets":[0,4]}})", hex_bytes("00000000")), "y.dtype: missing"},
      {"MissingOffsets", file_of(R"({"y":{"dtype":"BF16","shape":[2]}})", hex_bytes("00000000")), "y.data_offsets: missing"},
      {"UnexpectedEntryField",
       file_of(R"({"y":{"dtype":"BF16","shape":[2],"data_offsets":[0,4],"strides":[1]}})", hex_bytes("00000000")),
       "y.strides: unexpected field in a tensor entry"},
      {"UnknownDtype", file_of("{" + entry("y", "U8", "[4]", "[0,4]") + "}", hex_bytes("00000000")),
       "y.dtype: unknown or unsupported dtype \"U8\" (bitparity reads BF16, F16, F32, F64, F8_E4M3, F8_E5M2, BOOL, I32, I64)"},
      {"LowerCaseDtype", file_of("{" + entry("y", "bf16", "[2]", "[0,4]") + "}", hex_bytes("00000000")),
       "unknown or unsupported dtype \"bf16\""},
      {"DtypeNotAString", file_of(R"({"y":{"dtype":16,"shape":[2],"data_offsets":[0,4]}})", hex_bytes("00000000")),
       "y.dtype: expected a string, got integer"},
      {"NegativeDim", file_of("{" + entry("y", "BF16", "[-2]", "[0,4]") + "}", hex_bytes("00000000")),
       "y.shape[0]: expected a non-negative integer, got -2"},
      {"FloatDim", file_of("{" + entry("y", "BF16", "[2.0]", "[0,4]") + "}", hex_bytes("00000000")),
       "y.shape[0]: expected an integer, got number"},
      {"ShapeNotAnArray", file_of("{" + entry("y", "BF16", "2", "[0,4]") + "}", hex_bytes("00000000")),
       "y.shape: expected an array"},
      {"RankPastTheLimit", file_of("{" + entry("y", "BF16", "[1,1,1,1,1,1,1,1,2]", "[0,4]") + "}", hex_bytes("00000000")),
       "y.shape: a tensor has at most 8 dims; got 9"},
      {"ZeroElementsWithAHugeDim", file_of("{" + entry("y", "BF16", "[4611686018427387904,0]", "[0,0]") + "}", ""),
       "may not exceed 67108864"},
      {"DimPastInt64", file_of("{" + entry("y", "BF16", "[18446744073709551616]", "[0,4]") + "}", ""),
       "y.shape[0]: expected an integer"},
      {"OneOffset", file_of("{" + entry("y", "BF16", "[2]", "[0]") + "}", hex_bytes("00000000")),
       "y.data_offsets: expected [BEGIN, END], two byte offsets; got 1 values"},
      {"NegativeOffset", file_of("{" + entry("y", "BF16", "[2]", "[-4,0]") + "}", hex_bytes("00000000")),
       "y.data_offsets[0]: expected a non-negative integer, got -4"},
      {"OffsetPastInt64", file_of("{" + entry("y", "BF16", "[2]", "[0,9223372036854775808]") + "}", ""),
       "y.data_offsets[1]: integer out of range"},
      {"OffsetsOutOfOrder", file_of("{" + entry("y", "BF16", "[2]", "[4,0]") + "}", hex_bytes("00000000")),
       "y.data_offsets: [4, 0] ends before it begins"},
      {"OffsetsPastTheBuffer", file_of("{" + entry("y", "BF16", "[2]", "[2,6]") + "}", hex_bytes("00000000")),
       "y.data_offsets: [2, 6] reaches past the end of the byte buffer (4 bytes)"},
      {"OffsetsNotDtypeTimesShape", file_of("{" + entry("y", "BF16", "[2,2]", "[0,6]") + "}", hex_bytes("000000000000")),
       "y.data_offsets: [0, 6] holds 6 bytes; BF16 of shape [2, 2] takes 8"},
      {"Overlap", file_of("{" + y + "," + entry("z", "BF16", "[2]", "[2,6]") + "}", hex_bytes("000000000000")),
       "z.data_offsets: [2, 6] overlaps tensor \"y\" at [0, 4]"},
      {"SameRangeTwice", file_of("{" + y + "," + entry("z", "F32", "[1]", "[0,4]") + "}", hex_bytes("00000000")),
       "z.data_offsets: [0, 4] overlaps tensor \"y\" at [0, 4]"},
      {"EmptyTensorInsideAnother", file_of("{" + y + "," + entry("z", "F32", "[0]", "[2,2]") + "}", hex_bytes("00000000")),
       "z.data_offsets: [2, 2] overlaps tensor \"y\""},
      {"Hole", file_of("{" + y + "," + entry("z", "BF16", "[2]", "[6,10]") + "}", hex_bytes("00000000000000000000")),
       "bytes [4, 6) of the byte buffer belong to no tensor (the format allows no holes)"},
      {"HoleAtTheStart", file_of("{" + entry("y", "BF16", "[2]", "[2,6]") + "}", hex_bytes("000000000000")),
       "bytes [0, 2) of the byte buffer belong to no tensor"},
      {"TrailingBytes", file_of("{" + y + "}", hex_bytes("00000000ffffff")),
       "the last 3 bytes of the file belong to no tensor (the format allows nothing after the last tensor's data)"},
      {"BytesWithoutTensors", file_of("{}      ", "junk"), "the last 4 bytes of the file belong to no tensor"},
      {"MetadataNotAnObject", file_of(R"({"__metadata__":"op=swiglu"})", ""), "__metadata__: expected an object of strings, got string"},
      {"MetadataNotAString", file_of(R"({"__metadata__":{"clamp":7.0}})", ""), "__metadata__.clamp: expected a string, got number"},
      {"MetadataNested", file_of(R"({"__metadata__":{"attrs":{"clamp":7.0}}})", ""), "__metadata__.attrs: expected a string, got object"},
      {"BoolNeitherZeroNorOne", file_of("{" + entry("m", "BOOL", "[3]", "[0,3]") + "}", hex_bytes("010200")),
       "m: BOOL element 1 is 2; a bool is 0 or 1"},
  };
}

class MalformedSafetensorsTest : public testing::TestWithParam<Malformed> {};

TEST_P(MalformedSafetensorsTest, IsRejectedWithAClearMessage) {
  const Malformed& m = GetParam();
  const std::string message = message_of(m.bytes);
  EXPECT_NE(message.find(m.expected), std::string::npos) << "expected: " << m.expected << "\ngot: " << message;
}

INSTANTIATE_TEST_SUITE_P(Files, MalformedSafetensorsTest, testing::ValuesIn(malformed_files()),
                         [](const testing::TestParamInfo<Malformed>& info) { return std::string(info.param.name); });

// The same files less their errors are accepted, so each rejection above is for what it names.
TEST(SafetensorsTest, TheMalformedFilesRepairedAreAccepted) {
  const std::string y = entry("y", "BF16", "[2]", "[0,4]");
  for (const std::string& bytes :
       {file_of("{" + y + "," + entry("z", "BF16", "[2]", "[4,8]") + "}", kEightBytes),
        file_of("{" + y + "," + entry("z", "F32", "[0]", "[4,4]") + "}", hex_bytes("00000000")),
        file_of("{" + entry("m", "BOOL", "[3]", "[0,3]") + "}", hex_bytes("010001")),
        file_of("{" + entry("y", "BF16", "[67108864,0]", "[0,0]") + "}", ""),
        file_of(R"({"__metadata__":{"attrs":"{\"clamp\":7.0}"}})", ""), file_of("{}", ""), file_of("{}" + std::string(6, ' '), ""),
        file_of(kValidBF16, kEightBytes)})
    EXPECT_NO_THROW(safetensors_from_bytes(bytes)) << message_of(bytes);
}

TEST(SafetensorsTest, EveryTruncationOfAValidFileIsRejected) {
  const std::string bytes = file_of(R"({"__metadata__":{"op":"swiglu"},)" + kValidBF16.substr(1), kEightBytes);
  ASSERT_NO_THROW(safetensors_from_bytes(bytes));
  for (size_t n = 0; n < bytes.size(); ++n) EXPECT_THROW(safetensors_from_bytes(bytes.substr(0, n)), ParseError) << n;
}

std::string message_of_file(const fs::path& path) {
  try {
    read_safetensors(path);
  } catch (const ParseError& e) {
    return e.what();
  }
  return "(accepted)";
}

class SafetensorsFileTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("bitparity_safetensors_test_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path write(const std::string& name, const std::string& bytes) const {
    std::ofstream(dir_ / name, std::ios::binary) << bytes;
    return dir_ / name;
  }
  fs::path dir_;
};

TEST_F(SafetensorsFileTest, ErrorsNameTheFile) {
  const fs::path path = write("bad.safetensors", file_of("{" + entry("y", "BF16", "[2]", "[0,6]") + "}", "      "));
  try {
    read_safetensors(path);
    FAIL() << "accepted";
  } catch (const ParseError& e) {
    EXPECT_EQ(std::string(e.what()).rfind(path.string() + ": y.data_offsets: [0, 6] holds 6 bytes", 0), 0u) << e.what();
  }
  try {
    read_safetensors(dir_ / "absent.safetensors");
    FAIL() << "accepted";
  } catch (const ParseError& e) {
    EXPECT_NE(std::string(e.what()).find(std::strerror(ENOENT)), std::string::npos) << e.what();
  }
}

TEST_F(SafetensorsFileTest, AWrittenFileReadsBack) {
  Safetensors file;
  file.tensors.emplace("y", Tensor(DType::kBF16, {2}));
  file.tensors.at("y").set_bits(1, 0xff81);  // a negative NaN with a payload
  file.metadata["op"] = "swiglu";
  EXPECT_EQ(read_safetensors(write("out.safetensors", safetensors_to_bytes(file))), file);
  fs::create_directories(dir_ / "folder.safetensors");
  EXPECT_NE(std::string(message_of_file(dir_ / "folder.safetensors")).find("is a folder"), std::string::npos);
}

TEST_F(SafetensorsFileTest, TellsTheFormByNameOrByANulInTheFirstEightBytes) {
  EXPECT_TRUE(looks_like_safetensors(write("a.safetensors", "{\"format\": \"bitparity-case/1\"}")));
  EXPECT_TRUE(looks_like_safetensors(write("dump.bin", file_of(kValidBF16, kEightBytes))));
  EXPECT_FALSE(looks_like_safetensors(write("case.json", "{\"format\": \"bitparity-case/1\"}")));
  EXPECT_FALSE(looks_like_safetensors(write("short.json", "{}")));
  EXPECT_FALSE(looks_like_safetensors(dir_ / "absent.json"));
  EXPECT_FALSE(looks_like_safetensors(dir_));
  // Eight bytes with a NUL but no header's '{' after them: UTF-16 text (an editor's "Unicode" JSON),
  // which the JSON reader names by its byte-order mark, in either byte order, and UTF-32.
  const std::string utf16le("\xff\xfe{\0\"\0f\0o\0r\0m\0a\0t\0\"\0}\0", 22);
  const std::string utf16be("\xfe\xff\0{\0\"\0f\0o\0r\0m\0a\0t\0\"\0}", 22);
  const std::string utf32le("\xff\xfe\0\0{\0\0\0}\0\0\0", 12);
  // A mark and three spaces put a '{' on byte 8.
  EXPECT_FALSE(looks_like_safetensors(write("spaced.json", std::string("\xff\xfe \0 \0 \0{\0}\0", 12))));
  EXPECT_FALSE(looks_like_safetensors(write("utf16le.json", utf16le)));
  EXPECT_FALSE(looks_like_safetensors(write("utf16be.json", utf16be)));
  EXPECT_FALSE(looks_like_safetensors(write("utf32le.json", utf32le)));
  for (const auto& [text, encoding] : {std::pair<std::string, std::string>{utf16le, "UTF-16"}, {utf16be, "UTF-16"},
                                       {utf32le, "UTF-32"}}) {
    std::string message = "(accepted)";
    try {
      parse_json_text(text, "the case");
    } catch (const ParseError& e) {
      message = e.what();
    }
    EXPECT_NE(message.find("the case is " + encoding + " text"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace bitparity
