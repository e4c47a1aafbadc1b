// The CUDA runtime as bitparity uses it (device discovery, errors turned into exceptions) and the
// kernels' arithmetic shortcuts checked on every fp32 input. Part of cuda_vs_ref_test; every test
// skips with the reason where no CUDA device exists.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <exception>
#include <optional>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include "core/compare.h"
#include "core/error.h"
#include "core/outcome.h"
#include "core/registry.h"
#include "gpu/common/device_tensor.h"
#include "gpu/common/kernel_record.h"
#include "gpu/expert_mlp_kernels.h"
#include "gpu/register.h"
#include "gpu/runtime.h"
#include "gpu/tests/fast_math_check.h"
#include "gpu/tests/first_rows.h"

namespace bitparity::gpu {
namespace {

// --- the kernels' arithmetic shortcuts, on every fp32 input ----------------------------------------

std::string hex_examples(const testing_support::ExhaustiveResult& r) {
  std::ostringstream os;
  for (uint32_t x : r.examples) os << " 0x" << std::hex << x;
  return os.str();
}

// sigmoid_silu_fast is what the kernels run; it must give sigmoid_silu's bits wherever it claims
// to, and claim it everywhere but the classes its comment excludes (counted here independently).
// Outside silu_fast's and sigmoid_silu_fast's domain: x = +-0, and |x| >= 2^124 with the
// infinities and NaN (biased exponents 251 to 255), both signs.
constexpr uint64_t kOutsideSiluDomain = 2 + (2 * uint64_t{255 - 251 + 1} << 23);

TEST(FastMath, SigmoidSiluShortcutEqualsIeeeDivisionInItsDomain) {
  if (const auto why = unavailable_reason()) GTEST_SKIP() << *why;
  const testing_support::ExhaustiveResult r = testing_support::check_fast_sigmoid_silu();
  EXPECT_EQ(r.mismatches, 0u) << "inputs (fp32 bits) where the shortcut differs:" << hex_examples(r);
  EXPECT_EQ(r.inputs - r.in_domain, kOutsideSiluDomain);
}

TEST(FastMath, SiluShortcutEqualsIeeeDivisionInItsDomain) {
  if (const auto why = unavailable_reason()) GTEST_SKIP() << *why;
  const testing_support::ExhaustiveResult r = testing_support::check_fast_silu();
  EXPECT_EQ(r.mismatches, 0u) << "inputs (fp32 bits) where the shortcut differs:" << hex_examples(r);
  EXPECT_EQ(r.inputs - r.in_domain, kOutsideSiluDomain);
}

// No band is left out: where 1/den is subnormal (x in about [-88.7, -87.3]) sigmoid_fast is exact
// too, and those inputs are in its domain, so that the test above covers them.
TEST(FastMath, SigmoidShortcutEqualsIeeeDivisionInItsDomain) {
  if (const auto why = unavailable_reason()) GTEST_SKIP() << *why;
  const testing_support::ExhaustiveResult r = testing_support::check_fast_sigmoid();
  EXPECT_EQ(r.mismatches, 0u) << "inputs (fp32 bits) where the shortcut differs:" << hex_examples(r);
  const uint64_t nan = 2 * ((uint64_t{1} << 23) - 1);
  EXPECT_EQ(r.inputs - r.in_domain, nan);
}

TEST(FastMath, OneInstructionBf16RoundingEqualsFloat2Bfloat16Rn) {
  if (const auto why = unavailable_reason()) GTEST_SKIP() << *why;
  const testing_support::ExhaustiveResult r = testing_support::check_bf16_rounding();
  EXPECT_EQ(r.in_domain, r.inputs);  // every fp32 input was tried
  EXPECT_EQ(r.mismatches, 0u) << "inputs (fp32 bits) rounded differently:" << hex_examples(r);
}

// --- the runtime ---------------------------------------------------------------------------------

TEST(CudaRuntime, SkipsWithAReasonOrDescribesTheDevice) {
  if (const auto why = unavailable_reason()) {
    EXPECT_NE(why->find("no CUDA device"), std::string::npos) << *why;
    GTEST_SKIP() << *why;
  }
  std::cout << "device: " << device_description() << "\n";
  EXPECT_EQ(device_description().find("no CUDA device"), std::string::npos);
}

TEST(CudaRuntime, ErrorsBecomeExceptionsWithMessages) {
  if (const auto why = unavailable_reason()) GTEST_SKIP() << *why;
  set_checked_launches(true);
  try {
    DeviceBuffer huge(size_t{1} << 62);
    FAIL() << "a 4 EiB allocation succeeded";
  } catch (const CudaError& e) {
    EXPECT_NE(std::string(e.what()).find("cudaMalloc"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cudaErrorMemoryAllocation"), std::string::npos) << e.what();
  }
  // The failed allocation is reported once: the next launch of every kernel (on one row of its
  // op's first reference input) does not inherit it.
  int launched = 0;
  for (const KernelRecord& k : kernel_records()) {
    const OpInfo* op = harness_registry().op(k.op);
    ASSERT_NE(op, nullptr) << k.op;
    for (const auto& [direction, inputs] : op->inputs)
      for (const ReferenceInput& input : op->reference_inputs(direction)) {
        if (input.bench_only || !(input.contracts.empty() || std::count(input.contracts.begin(), input.contracts.end(), k.contract)))
          continue;
        const Case c = bitparity::testing_support::first_rows(*op, input.make(), 1);
        EXPECT_NO_THROW(run_impl(harness_registry(), "cuda:" + k.contract, c)) << k.op << " " << k.contract;
        ++launched;
        break;
      }
  }
  EXPECT_GT(launched, 0);
}

// Every buffer starts on a 256-byte boundary, pooled or not: the kernels' vector paths and the
// cuBLASLt and tensor-map paths take an aligned base for granted.
TEST(CudaRuntime, EveryBufferStartsOnA256ByteBoundary) {
  if (const auto why = unavailable_reason()) GTEST_SKIP() << *why;
  for (BufferMode mode : {BufferMode::kPooled, BufferMode::kSeparate}) {
    set_buffer_mode(mode);
    std::vector<DeviceBuffer> held;
    for (size_t bytes : {size_t{1}, size_t{2}, size_t{3}, size_t{17}, size_t{255}, size_t{257}, size_t{4097},
                         size_t{65537}, size_t{1} << 20, (size_t{1} << 20) + 1}) {
      held.emplace_back(bytes);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(held.back().get()) % 256, 0u)
          << bytes << " bytes, " << (mode == BufferMode::kPooled ? "pooled" : "separate");
    }
  }
  set_buffer_mode(BufferMode::kPooled);
}

Tensor counting(DType dtype, Shape shape, uint8_t start) {
  Tensor t(dtype, std::move(shape));
  auto* bytes = static_cast<uint8_t*>(t.data());
  for (size_t i = 0; i < t.nbytes(); ++i) bytes[i] = static_cast<uint8_t>(start + i * 7);
  return t;
}

std::vector<uint8_t> bytes_of(const DeviceTensor& d) {
  std::vector<uint8_t> out(d.nbytes());
  d.buffer.download(out.data(), out.size());
  return out;
}

// launch_moves, against the same moves made on the host: copies with zero tails and zero fills at
// aligned and unaligned sources and destinations (the vector and the byte paths), transposes with
// and without zero-padded columns at sizes on and off the 32 x 32 tile, moves with nothing to write
// between them, all in one launch; the bytes around each destination are untouched.
TEST(ExpertMlpMoves, OneLaunchMovesWhatTheHostMoves) {
  if (const auto why = unavailable_reason()) GTEST_SKIP() << *why;
  constexpr size_t kSlot = 1 << 16;  // each move's source and destination range in the buffers
  std::vector<Move> moves;
  struct Expect { size_t at; std::vector<uint8_t> bytes; };
  std::vector<Expect> expect;
  std::vector<uint8_t> src_host(kMaxMoves * kSlot), dst_host(kMaxMoves * kSlot, 0xA5);
  for (size_t i = 0; i < src_host.size(); ++i) src_host[i] = static_cast<uint8_t>(i * 131 + (i >> 8));
  DeviceBuffer src(src_host.size()), dst(dst_host.size());
  src.upload(src_host.data(), src_host.size());
  dst.upload(dst_host.data(), dst_host.size());
  auto* s0 = static_cast<uint8_t*>(src.get());
  auto* d0 = static_cast<uint8_t*>(dst.get());
  // Copies: (source offset, destination offset, source bytes, destination bytes).
  const size_t copies[][4] = {{0, 0, 4096, 4096}, {0, 0, 100, 4100}, {3, 0, 33, 50},  {0, 5, 64, 80},
                              {0, 0, 0, 0},       {7, 9, 1000, 1003}, {16, 32, 0, 77}, {0, 1, 0, 4096},
                              {2, 2, 3000, 40000}};
  for (const auto& c : copies) {
    const size_t slot = moves.size() * kSlot;
    Move m;
    m.src = c[2] ? s0 + slot + c[0] : nullptr;
    m.dst = d0 + slot + c[1];
    m.src_bytes = c[2];
    m.dst_bytes = c[3];
    moves.push_back(m);
    std::vector<uint8_t> want(c[3], 0);
    std::copy_n(src_host.begin() + static_cast<std::ptrdiff_t>(slot + c[0]), c[2], want.begin());
    expect.push_back({slot + c[1], want});
  }
  // Transposes: (rows, cols, ld) of 16-bit elements; cols 0 writes nothing.
  const int64_t transposes[][3] = {{1, 1, 1}, {5, 3, 32}, {32, 32, 32}, {0, 0, 0}, {33, 65, 40}, {17, 100, 17}, {64, 7, 96}};
  for (const auto& t : transposes) {
    const size_t slot = moves.size() * kSlot;
    Move m;
    m.kind = Move::kTranspose;
    m.src = s0 + slot;
    m.dst = d0 + slot;
    m.rows = t[0];
    m.cols = t[1];
    m.ld = t[2];
    moves.push_back(m);
    std::vector<uint8_t> want(static_cast<size_t>(t[1] * t[2]) * 2, 0);
    for (int64_t r = 0; r < t[0]; ++r)
      for (int64_t c = 0; c < t[1]; ++c)
        std::memcpy(&want[static_cast<size_t>(c * t[2] + r) * 2], &src_host[slot + static_cast<size_t>(r * t[1] + c) * 2], 2);
    expect.push_back({slot, want});
  }
  ASSERT_LE(moves.size(), kMaxMoves);
  launch_moves(moves, nullptr);
  std::vector<uint8_t> got(dst_host.size());
  dst.download(got.data(), got.size());
  std::vector<uint8_t> want = dst_host;
  for (const Expect& e : expect) std::copy(e.bytes.begin(), e.bytes.end(), want.begin() + static_cast<std::ptrdiff_t>(e.at));
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i]) {
      ADD_FAILURE() << "byte " << i << " of move " << i / kSlot << " (offset " << i % kSlot << "): got "
                    << int{got[i]} << ", expected " << int{want[i]};
      break;
    }
  EXPECT_THROW(launch_moves(std::vector<Move>(kMaxMoves + 1), nullptr), std::invalid_argument);
  Move past;
  past.src_bytes = 2;
  past.dst_bytes = 1;
  EXPECT_THROW(launch_moves({past}, nullptr), std::invalid_argument);
  Move narrow;
  narrow.kind = Move::kTranspose;
  narrow.rows = 4;
  narrow.cols = 4;
  narrow.ld = 3;
  EXPECT_THROW(launch_moves({narrow}, nullptr), std::invalid_argument);
}

// Moves past kMaxBlocksPerMove (the blocks of a move take several 4 KB ranges or tiles each): a
// copy of 9 MiB with a zero tail and a transpose of 2,209 tiles, in one launch.
TEST(ExpertMlpMoves, MovesLargerThanTheirBlocksStrideOverThem) {
  if (const auto why = unavailable_reason()) GTEST_SKIP() << *why;
  constexpr size_t kCopySrc = (size_t{9} << 20) - 1000, kCopyDst = size_t{9} << 20;
  constexpr int64_t kRows = 1500, kCols = 1490, kLd = 1504;  // 47 x 47 tiles
  const size_t transpose_src = static_cast<size_t>(kRows * kCols) * 2, transpose_dst = static_cast<size_t>(kCols * kLd) * 2;
  std::vector<uint8_t> src_host(kCopySrc + transpose_src);
  for (size_t i = 0; i < src_host.size(); ++i) src_host[i] = static_cast<uint8_t>(i * 37 + (i >> 12));
  DeviceBuffer src(src_host.size()), dst(kCopyDst + transpose_dst);
  src.upload(src_host.data(), src_host.size());
  dst.fill_bytes(0x5A);
  Move copy;
  copy.src = src.get();
  copy.dst = dst.get();
  copy.src_bytes = kCopySrc;
  copy.dst_bytes = kCopyDst;
  Move transpose;
  transpose.kind = Move::kTranspose;
  transpose.src = static_cast<uint8_t*>(src.get()) + kCopySrc;
  transpose.dst = static_cast<uint8_t*>(dst.get()) + kCopyDst;
  transpose.rows = kRows;
  transpose.cols = kCols;
  transpose.ld = kLd;
  launch_moves({copy, transpose}, nullptr);
  std::vector<uint8_t> got(dst.bytes());
  dst.download(got.data(), got.size());
  std::vector<uint8_t> want(got.size(), 0);
  std::copy_n(src_host.begin(), kCopySrc, want.begin());
  const uint8_t* s16 = src_host.data() + kCopySrc;
  for (int64_t r = 0; r < kRows; ++r)
    for (int64_t c = 0; c < kCols; ++c)
      std::memcpy(&want[kCopyDst + static_cast<size_t>(c * kLd + r) * 2], s16 + static_cast<size_t>(r * kCols + c) * 2, 2);
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i]) {
      ADD_FAILURE() << "byte " << i << (i < kCopyDst ? " of the copy" : " of the transpose") << ": got " << int{got[i]}
                    << ", expected " << int{want[i]};
      break;
    }
}

// A small case's tensors share the thread's arena, each on its own 256-byte-aligned range that no
// other overlaps; the inputs arrive with their bytes, the outputs poisoned, and download_outputs
// gives back what a kernel wrote. A case made while the arena is held, a case over
// kSharedCaseBytes, or any case in the separate mode, gets a buffer a tensor.
TEST(CudaRuntime, CaseTensorsShareOneAllocationOnlyForSmallCases) {
  if (const auto why = unavailable_reason()) GTEST_SKIP() << *why;
  set_buffer_mode(BufferMode::kPooled);
  const TensorMap inputs = {{"a", counting(DType::kBF16, {3, 5}, 1)},
                            {"b", counting(DType::kFP32, {7}, 9)},
                            {"empty", Tensor(DType::kFP32, {0, 4})},
                            {"ids", counting(DType::kI64, {2}, 4)}};
  const OutputMetas metas = {{"out", {{3, 5}, DType::kBF16}}, {"none", {{0}, DType::kFP32}}, {"sum", {{1}, DType::kFP32}}};
  const CaseTensors small(inputs, metas);
  ASSERT_TRUE(small.shared());
  std::vector<std::pair<uintptr_t, uintptr_t>> ranges;
  for (const DeviceTensorMap* map : {&small.inputs(), &small.outputs()})
    for (const auto& [name, d] : *map) {
      if (d.nbytes() == 0) {
        EXPECT_EQ(d.data(), nullptr) << name;
        continue;
      }
      const auto begin = reinterpret_cast<uintptr_t>(d.data());
      EXPECT_EQ(begin % 256, 0u) << name;
      ranges.emplace_back(begin, begin + d.nbytes());
    }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) EXPECT_LE(ranges[i - 1].second, ranges[i].first) << "tensors overlap";
  for (const auto& [name, t] : inputs) {
    const std::vector<uint8_t> got = bytes_of(small.inputs().at(name));
    ASSERT_EQ(got.size(), t.nbytes()) << name;
    EXPECT_EQ(std::memcmp(got.data(), t.data(), t.nbytes()), 0) << name;
  }
  // What a kernel would write: the output "sum" overwritten on the device, "out" left poisoned.
  const float written = -2.5f;
  const DeviceTensor& sum_tensor = small.outputs().at("sum");
  DeviceBuffer::view(sum_tensor.data(), sum_tensor.nbytes()).upload(&written, sizeof written);
  const TensorMap out = small.download_outputs();
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out.at("sum").shape(), Shape({1}));
  float sum = 0;
  std::memcpy(&sum, out.at("sum").data(), sizeof sum);
  EXPECT_EQ(sum, written);
  EXPECT_EQ(out.at("none").numel(), 0);
  const auto* poisoned = static_cast<const uint8_t*>(out.at("out").data());
  EXPECT_EQ(std::count(poisoned, poisoned + out.at("out").nbytes(), kPoisonByte),
            static_cast<std::ptrdiff_t>(out.at("out").nbytes()));

  {
    const CaseTensors nested(inputs, metas);  // while `small` holds the arena
    EXPECT_FALSE(nested.shared());
    EXPECT_EQ(bytes_of(nested.inputs().at("a")), bytes_of(small.inputs().at("a")));
    const TensorMap nested_out = nested.download_outputs();
    const auto* fill = static_cast<const uint8_t*>(nested_out.at("out").data());
    EXPECT_EQ(std::count(fill, fill + nested_out.at("out").nbytes(), kPoisonByte),
              static_cast<std::ptrdiff_t>(nested_out.at("out").nbytes()));
  }
  const TensorMap large_inputs = {{"x", Tensor(DType::kFP32, {int64_t(CaseTensors::kSharedCaseBytes / 4 + 1)})}};
  EXPECT_FALSE(CaseTensors(large_inputs, metas).shared());
  set_buffer_mode(BufferMode::kSeparate);
  const CaseTensors separate(inputs, metas);
  EXPECT_FALSE(separate.shared());
  EXPECT_EQ(bytes_of(separate.inputs().at("b")), bytes_of(small.inputs().at("b")));
  set_buffer_mode(BufferMode::kPooled);
}

// --- several small cases in one round trip (run_batch) ---------------------------------------------

// A batch's cases lie one after another, each as it lies alone (its inputs, then its outputs, each
// tensor on its own 256-byte-aligned range), with at least kGuardBytes of poison between one case's
// last tensor and the next case's first; each input arrives with its bytes and each output
// poisoned, for small outputs and for outputs over 64 KiB in all; what a kernel writes into one
// case's output comes back in that case's map only.
TEST(CaseBatches, AStagedBatchLaysOutEachCaseApart) {
  if (const auto why = unavailable_reason()) GTEST_SKIP() << *why;
  set_buffer_mode(BufferMode::kPooled);
  for (const int64_t out_elements : {int64_t{5}, int64_t{20000}}) {  // 3 x 80 KB of outputs
    std::vector<TensorMap> inputs;
    std::vector<OutputMetas> metas;
    for (uint8_t i = 0; i < 3; ++i) {
      inputs.push_back({{"a", counting(DType::kBF16, {int64_t{3} + i, 5}, static_cast<uint8_t>(1 + 40 * i))},
                        {"empty", Tensor(DType::kFP32, {0, 4})},
                        {"ids", counting(DType::kI64, {2}, static_cast<uint8_t>(4 + i))}});
      metas.push_back({{"out", {{out_elements}, DType::kFP32}}, {"none", {{0}, DType::kFP32}}});
    }
    std::vector<CaseBatchItem> items;
    for (size_t i = 0; i < 3; ++i) items.push_back({&inputs[i], &metas[i]});
    const CaseBatchTensors batch(items);
    ASSERT_TRUE(batch.staged());
    ASSERT_EQ(batch.size(), 3u);
    std::vector<std::pair<uintptr_t, uintptr_t>> cases;  // each case's first byte and one past its last
    for (size_t i = 0; i < 3; ++i) {
      uintptr_t begin = UINTPTR_MAX, end = 0, last_input_end = 0, first_output = UINTPTR_MAX;
      for (const bool is_input : {true, false})
        for (const auto& [name, d] : is_input ? batch.inputs(i) : batch.outputs(i)) {
          if (d.nbytes() == 0) {
            EXPECT_EQ(d.data(), nullptr) << name;
            continue;
          }
          const auto b = reinterpret_cast<uintptr_t>(d.data());
          EXPECT_EQ(b % 256, 0u) << "case " << i << " " << name;
          begin = std::min(begin, b);
          end = std::max(end, b + d.nbytes());
          if (is_input) last_input_end = std::max(last_input_end, b + d.nbytes());
          else first_output = std::min(first_output, b);
        }
      EXPECT_LE(last_input_end, first_output) << "case " << i << ": an output lies among its inputs";
      cases.emplace_back(begin, end);
      for (const auto& [name, t] : inputs[i]) {
        const std::vector<uint8_t> got = bytes_of(batch.inputs(i).at(name));
        ASSERT_EQ(got.size(), t.nbytes()) << name;
        EXPECT_EQ(std::memcmp(got.data(), t.data(), t.nbytes()), 0) << "case " << i << " " << name;
      }
    }
    for (size_t i = 1; i < 3; ++i) {
      ASSERT_LE(cases[i - 1].second + CaseBatchTensors::kGuardBytes, cases[i].first) << "cases " << i - 1 << " and " << i;
      std::vector<uint8_t> gap(cases[i].first - cases[i - 1].second);
      DeviceBuffer::view(reinterpret_cast<void*>(cases[i - 1].second), gap.size()).download(gap.data(), gap.size());
      EXPECT_EQ(std::count(gap.begin(), gap.end(), kPoisonByte), static_cast<std::ptrdiff_t>(gap.size()))
          << "the bytes between cases " << i - 1 << " and " << i << " are not all poison";
    }
    const float written = -2.5f;
    const DeviceTensor& middle = batch.outputs(1).at("out");
    DeviceBuffer::view(middle.data(), sizeof written).upload(&written, sizeof written);
    const std::vector<TensorMap> out = batch.download_outputs();
    ASSERT_EQ(out.size(), 3u);
    for (size_t i = 0; i < 3; ++i) {
      ASSERT_EQ(out[i].size(), 2u);
      const Tensor& t = out[i].at("out");
      ASSERT_EQ(t.shape(), Shape({out_elements}));
      EXPECT_EQ(out[i].at("none").numel(), 0);
      const auto* bytes = static_cast<const uint8_t*>(t.data());
      const size_t skip = i == 1 ? sizeof written : 0;
      if (i == 1) {
        float got = 0;
        std::memcpy(&got, bytes, sizeof got);
        EXPECT_EQ(got, written);
      }
      EXPECT_EQ(std::count(bytes + skip, bytes + t.nbytes(), kPoisonByte), static_cast<std::ptrdiff_t>(t.nbytes() - skip))
          << "case " << i << "'s output, " << out_elements << " elements";
    }
  }
}

// Staged together only where the whole batch fits the arena, the arena is free and buffers are
// pooled; otherwise the batch holds nothing (its cases then run one at a time).
TEST(CaseBatches, ABatchIsStagedTogetherOnlyWhereItFits) {
  if (const auto why = unavailable_reason()) GTEST_SKIP() << *why;
  set_buffer_mode(BufferMode::kPooled);
  const TensorMap small = {{"x", counting(DType::kFP32, {64}, 3)}};
  const OutputMetas metas = {{"y", {{64}, DType::kFP32}}};
  // Each case under the bound, the batch over it.
  const TensorMap half = {{"x", Tensor(DType::kFP32, {int64_t(CaseTensors::kSharedCaseBytes / 8)})}};
  EXPECT_TRUE(CaseBatchTensors({{&half, &metas}}).staged());
  const CaseBatchTensors too_large({{&half, &metas}, {&half, &metas}, {&small, &metas}});
  EXPECT_FALSE(too_large.staged());
  EXPECT_EQ(too_large.size(), 0u);
  EXPECT_TRUE(too_large.download_outputs().empty());
  EXPECT_FALSE(CaseBatchTensors({}).staged());
  {
    const CaseTensors holder(small, metas);
    ASSERT_TRUE(holder.shared());
    EXPECT_FALSE(CaseBatchTensors({{&small, &metas}}).staged()) << "staged while a case holds the arena";
  }
  {
    const CaseBatchTensors fits({{&small, &metas}, {&small, &metas}});
    EXPECT_TRUE(fits.staged());
    EXPECT_FALSE(CaseTensors(small, metas).shared()) << "a case took the arena while a batch holds it";
  }
  EXPECT_TRUE(CaseBatchTensors({{&small, &metas}, {&small, &metas}}).staged()) << "the arena was not given back";
  set_buffer_mode(BufferMode::kSeparate);
  EXPECT_FALSE(CaseBatchTensors({{&small, &metas}}).staged());
  set_buffer_mode(BufferMode::kPooled);
}

// An error's kind and text: a rejection with its class, a CUDA error with its code, any other
// exception.
std::string error_text(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const RejectError& e) {
    return "rejected (" + e.error_class() + "): " + e.what();
  } catch (const CudaError& e) {
    return "CUDA error " + std::to_string(e.code()) + ": " + e.what();
  } catch (const std::exception& e) {
    return std::string("error: ") + e.what();
  } catch (...) {
    return "a non-standard exception";
  }
}

// What one case gives: its outputs' bytes, or its error's message.
struct Result {
  std::optional<TensorMap> outputs;
  std::string error;
};

std::string result_difference(const Result& got, const Result& alone) {
  if (!got.outputs && !alone.outputs) return got.error == alone.error ? "" : "errors differ: " + got.error + " / " + alone.error;
  if (!got.outputs) return "fails (" + got.error + "), alone it computes";
  if (!alone.outputs) return "computes, alone it fails (" + alone.error + ")";
  const Comparison cmp = compare_outputs(*got.outputs, *alone.outputs, {.strict_nan = true});
  return cmp.verdict == Verdict::kIdentical ? "" : format_comparison(cmp, "batched", "in the batch", "alone");
}

// result_difference for a case whose bits depend on the order of arrival: the same error, or
// outputs of the same names and shapes.
std::string shape_difference(const Result& got, const Result& alone) {
  if (!got.outputs || !alone.outputs) return result_difference(got, alone);
  const Comparison cmp = compare_outputs(*got.outputs, *alone.outputs, {.strict_nan = true});
  return cmp.verdict == Verdict::kShapeMismatch ? format_comparison(cmp, "batched", "in the batch", "alone") : "";
}

// The bytes of a case's inputs.
size_t total_input_bytes(const Case& c) {
  size_t bytes = 0;
  for (const auto& [name, t] : c.inputs) bytes += t.nbytes();
  return bytes;
}

// Small generated cases of a direction (RapidCheck sizes 0 to 30), for an order-of-arrival contract
// with enough of one addend an output among them, and one of the op's error inputs for the
// contract, where it has one, in the middle.
std::vector<Case> batch_cases(const OpInfo& op, Direction d, const std::string& contract, size_t count) {
  std::vector<Case> cases;
  for (int j = 0; cases.size() < count && j < 50 * static_cast<int>(count); ++j) {
    try {
      cases.push_back(op.generate(d)(rc::Random(uint64_t{0xba7c4} + static_cast<uint64_t>(j)), (j * 7) % 31).value());
    } catch (const std::exception&) {
      // a draw the generator gives up on
    }
  }
  // An order-of-arrival contract's batch needs cases it can hold to their bits: at least
  // kOneAddendCases that validate accepts with one addend an output (arrival_order_free), drawn on.
  constexpr int kOneAddendCases = 3;
  const ContractInfo* info = op.contract(contract);
  if (info && info->order_of_arrival) {
    const auto one_addend = [&](const Case& c) {
      try {
        op.validate(c, *info);
      } catch (const std::exception&) {
        return false;
      }
      return !arrival_order_matters(*info, c);
    };
    int found = static_cast<int>(std::count_if(cases.begin(), cases.end(), one_addend));
    for (int j = 0; found < kOneAddendCases && j < 2000; ++j) {
      try {
        Case c = op.generate(d)(rc::Random(uint64_t{0x0ad7e} + static_cast<uint64_t>(j)), (j * 7) % 31).value();
        if (!one_addend(c)) continue;
        cases.push_back(std::move(c));
        ++found;
      } catch (const std::exception&) {
        // a draw the generator gives up on
      }
    }
  }
  if (op.error_inputs)
    for (const ErrorInput& e : op.error_inputs(d))
      if (e.c.direction == d && (e.contracts.empty() || std::count(e.contracts.begin(), e.contracts.end(), contract))) {
        cases.insert(cases.begin() + static_cast<std::ptrdiff_t>(cases.size() / 2), e.c);
        break;
      }
  return cases;
}

// The bytes a batch of `cases` takes in the thread's arena: those validate accepts, as
// CaseBatchTensors counts them.
size_t batch_bytes(const OpInfo& op, const ContractInfo& contract, const std::vector<Case>& cases) {
  std::vector<OutputMetas> metas;
  metas.reserve(cases.size());
  std::vector<CaseBatchItem> items;
  for (const Case& c : cases) {
    try {
      metas.push_back(op.validate(c, contract));
    } catch (const std::exception&) {
      continue;  // not staged
    }
    items.push_back({&c.inputs, &metas.back()});
  }
  return CaseBatchTensors::staged_bytes(items);
}

// Every kernel record's batch gives each case what its run alone gives (the same bytes, or the
// same error), staged together (the elementwise SwiGLU kernels' cases then in batched launches) and
// case by case. Launches are unchecked here, as in a campaign:
// a checked launch synchronizes after every case and would hide a case that reads or writes
// another's memory while that one's kernels run. An order-of-arrival contract's case is held to its
// bits alone where it has one addend an output (ContractInfo::arrival_order_free), and elsewhere to
// its error or its outputs' shapes: two runs alone may already differ there.
TEST(CaseBatches, EachCaseGetsWhatItGetsAlone) {
  if (const auto why = unavailable_reason()) GTEST_SKIP() << *why;
  set_buffer_mode(BufferMode::kPooled);
  struct RestoreChecked {
    bool was = checked_launches();
    ~RestoreChecked() { set_checked_launches(was); }
  } restore;
  set_checked_launches(false);
  int batches = 0, pooled_batches = 0, staged_batches = 0, compared = 0, errors = 0;
  int64_t collected = 0, launches = 0;
  int arrival_batches_held = 0;  // order-of-arrival batches with a case held to its bits
  for (const KernelRecord& k : kernel_records()) {
    const OpInfo* op = harness_registry().op(k.op);
    ASSERT_NE(op, nullptr) << k.op;
    const ContractInfo* contract = op->contract(k.contract);
    ASSERT_NE(contract, nullptr) << k.op << " " << k.contract;
    const Impl alone_impl = kernel_impl(k, op->validate);
    for (const auto& [direction, specs] : op->inputs) {
      std::vector<Case> cases = batch_cases(*op, direction, k.contract, 12);
      // The largest cases left out until the batch fits the arena (a large vocabulary's gradient
      // alone may fill it), so that every record's batch is staged together; an order-of-arrival
      // contract's cases of one addend an output are kept (the only ones held to their bits).
      const auto trimmable = [&](const Case& c) { return arrival_order_matters(*contract, c) || !contract->order_of_arrival; };
      while (cases.size() > 2 && batch_bytes(*op, *contract, cases) > CaseTensors::kSharedCaseBytes) {
        auto largest = cases.end();
        for (auto it = cases.begin(); it != cases.end(); ++it)
          if (trimmable(*it) && (largest == cases.end() || total_input_bytes(*it) > total_input_bytes(*largest)))
            largest = it;
        if (largest == cases.end()) break;
        cases.erase(largest);
      }
      std::vector<const Case*> pointers;
      std::vector<Result> alone;
      for (const Case& c : cases) {
        pointers.push_back(&c);
        Result r;
        try {
          r.outputs = alone_impl(c, *contract);
        } catch (...) {
          r.error = error_text(std::current_exception());
        }
        alone.push_back(std::move(r));
      }
      std::vector<bool> arrival_matters;
      for (const Case& c : cases) arrival_matters.push_back(arrival_order_matters(*contract, c));
      for (const BufferMode mode : {BufferMode::kPooled, BufferMode::kSeparate}) {
        set_buffer_mode(mode);
        BatchRunInfo info;
        const std::vector<BatchOutcome> outcomes = run_batch(k, op->validate, *contract, pointers, kIlpDefault, &info);
        set_buffer_mode(BufferMode::kPooled);
        const bool staged = info.staged;
        const std::string where = k.op + "_" + std::string(direction_name(direction)) + " " + k.contract +
                                  (mode == BufferMode::kPooled ? ", staged together" : ", case by case");
        const bool fits = batch_bytes(*op, *contract, cases) <= CaseTensors::kSharedCaseBytes;
        EXPECT_EQ(staged, mode == BufferMode::kPooled && fits) << where;
        staged_batches += staged ? 1 : 0;
        pooled_batches += mode == BufferMode::kPooled ? 1 : 0;
        // A direction the record lists (KernelRecord::collect_launches) runs a staged batch's cases
        // in batched launches (unless BITPARITY_BATCHED_LAUNCHES=0 turns them off); no other
        // direction's launches are collected, and nothing is case by case.
        if (staged && k.collects(direction) && batched_launches()) {
          EXPECT_GE(info.collected, 1) << where;
          collected += info.collected;
          launches += info.batched_launches;
        } else {
          EXPECT_EQ(info.collected, 0) << where;
        }
        ASSERT_EQ(outcomes.size(), cases.size()) << where;
        ++batches;
        int held_to_bits = 0;
        for (size_t i = 0; i < cases.size(); ++i) {
          Result got;
          if (outcomes[i].error) got.error = error_text(outcomes[i].error);
          else got.outputs = outcomes[i].outputs;
          const std::string difference =
              arrival_matters[i] ? shape_difference(got, alone[i]) : result_difference(got, alone[i]);
          EXPECT_TRUE(difference.empty()) << where << ", case " << i << " (" << describe(Outcome{alone[i].outputs, "", alone[i].error})
                                          << "): " << difference;
          ++compared;
          errors += got.outputs ? 0 : 1;
          held_to_bits += got.outputs && !arrival_matters[i] ? 1 : 0;
        }
        if (contract->order_of_arrival) {
          EXPECT_GE(held_to_bits, 1) << where << ": no computed case of one addend an output to hold to its bits";
          arrival_batches_held += held_to_bits > 0 ? 1 : 0;
        }
      }
    }
  }
  EXPECT_GT(batches, 0);
  EXPECT_GE(10 * staged_batches, 9 * pooled_batches) << "more than one record's batch in ten was too large to stage";
  EXPECT_GT(compared - errors, batches) << "too few cases computed to tell anything";
  EXPECT_GT(errors, 0) << "no error input reached a batch";
  RecordProperty("batches", batches);
  RecordProperty("staged_batches", staged_batches);
  RecordProperty("order_of_arrival_batches_held_to_bits", arrival_batches_held);
  RecordProperty("cases", compared);
  if (batched_launches()) {
    EXPECT_LT(launches, collected) << "no batched launch ran more than one case";
  }
  RecordProperty("collected_launches", static_cast<int>(collected));
  RecordProperty("batched_launches", static_cast<int>(launches));
}

// A launch's workspace is a range of the thread's buffer on the thread's stream, the same memory
// again once every range is released; a second one held at once is the next range of it (once the
// buffer has grown to hold both), another stream's or one under separate buffers is memory of its
// own, and none overlaps a workspace still held.
TEST(CudaRuntime, LaunchWorkspacesAreRangesOfTheThreadsBuffer) {
  if (const auto why = unavailable_reason()) GTEST_SKIP() << *why;
  set_buffer_mode(BufferMode::kPooled);
  const auto overlap = [](const DeviceBuffer& a, const DeviceBuffer& b) {
    const auto a0 = reinterpret_cast<uintptr_t>(a.get()), b0 = reinterpret_cast<uintptr_t>(b.get());
    return a0 < b0 + b.bytes() && b0 < a0 + a.bytes();
  };
  {
    // Two held at once, so that the buffer grows to hold both at the next take after they are
    // released (it grows only while nothing is held).
    const auto a = launch_workspace(1000, thread_stream());
    const auto b = launch_workspace(1000, thread_stream());
    EXPECT_FALSE(overlap(*a, *b));
  }
  const void* first = nullptr;
  {
    const auto held = launch_workspace(1000, thread_stream());
    ASSERT_NE(held->get(), nullptr);
    EXPECT_EQ(held->bytes(), 1000u);
    first = held->get();
    const auto second = launch_workspace(1000, thread_stream());
    EXPECT_EQ(second->get(), static_cast<const char*>(first) + aligned_bytes(1000));  // the next range
    const auto other_stream = launch_workspace(1000, nullptr);
    EXPECT_FALSE(overlap(*held, *other_stream));
    EXPECT_FALSE(overlap(*second, *other_stream));
    const uint32_t word = 0x12345678u;
    held->upload(&word, sizeof word);
    uint32_t back = 0;
    held->download(&back, sizeof back);
    EXPECT_EQ(back, word);
  }
  EXPECT_EQ(launch_workspace(1000, thread_stream())->get(), first);  // released: the same memory again
  EXPECT_EQ(launch_workspace(0, thread_stream())->get(), nullptr);
  set_buffer_mode(BufferMode::kSeparate);
  {
    const auto held = launch_workspace(1000, thread_stream());
    EXPECT_NE(held->get(), first);
  }
  set_buffer_mode(BufferMode::kPooled);
}

// BITPARITY_CUDA_SCHEDULE's text (runtime.h): each setting by its name, the unset and empty
// variable as auto, and anything else an error naming the variable. No device needed.
TEST(CudaSchedule, TheVariableNamesEachSettingAndRejectsOtherText) {
  EXPECT_EQ(schedule_from_text(nullptr), Schedule::kAuto);
  EXPECT_EQ(schedule_from_text(""), Schedule::kAuto);
  EXPECT_EQ(schedule_from_text("auto"), Schedule::kAuto);
  EXPECT_EQ(schedule_from_text("spin"), Schedule::kSpin);
  EXPECT_EQ(schedule_from_text("yield"), Schedule::kYield);
  EXPECT_EQ(schedule_from_text("blocking"), Schedule::kBlocking);
  for (const char* bad : {"Blocking", "block", "spin ", "1"}) {
    try {
      schedule_from_text(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("BITPARITY_CUDA_SCHEDULE="), std::string::npos) << e.what();
    }
  }
}

// Each schedule set on the device is the one it then reports, and a synchronization under each
// still waits for the work (a buffer's bytes round-trip); the device's own schedule is restored.
TEST(CudaSchedule, EachSettingTakesEffectOnTheDevice) {
  if (const auto why = unavailable_reason()) GTEST_SKIP() << *why;
  const Schedule before = device_schedule();
  for (const Schedule s : {Schedule::kSpin, Schedule::kYield, Schedule::kBlocking, Schedule::kAuto}) {
    set_device_schedule(s);
    EXPECT_EQ(device_schedule(), s) << static_cast<int>(s);
    DeviceBuffer b(sizeof(uint32_t));
    const uint32_t word = 0xCAFE0000u + static_cast<uint32_t>(s);
    b.upload(&word, sizeof word);
    uint32_t back = 0;
    b.download(&back, sizeof back);
    EXPECT_EQ(back, word);
  }
  set_device_schedule(before);
}

}  // namespace
}  // namespace bitparity::gpu
