// The kernel records of cross_entropy (spec OP-8): each binds gpu/cross_entropy_kernels.h's launcher
// to device tensors under one contract's order. The op's validate has checked the inputs (labels in
// [0, V) or ignore_index) and fixed the output shapes; what is left here is the ignore_index
// attribute, read as the op's spec reads it (PyTorch's -100 when absent).
#include <cstdint>
#include <stdexcept>
#include <variant>
#include <vector>

#include "core/case.h"
#include "gpu/common/device_tensor.h"
#include "gpu/cross_entropy_kernels.h"
#include "gpu/records.h"
#include "ops/training.h"

namespace bitparity::gpu {
namespace {

constexpr int64_t kDefaultIgnoreIndex = -100;  // F.cross_entropy's (the op's spec names the same)

int64_t ignore_index_attr(const Case& c) {
  const auto it = c.attrs.find("ignore_index");
  if (it == c.attrs.end()) return kDefaultIgnoreIndex;
  if (const int64_t* v = std::get_if<int64_t>(&it->second)) return *v;
  throw std::logic_error("cross_entropy: a non-integer ignore_index attribute passed validate");
}

// ops/training.h is read for its constants only (no link to the op specs).
static_assert(kFusedSegments == ops::kFusedSegments && kFusedSegmentLanes == ops::kFusedSegmentLanes,
              "the fused kernels' segments are the fused contract's");
static_assert(fused_segment_span(ops::kFusedBufferedMaxV) == kFusedBufferedMaxSpan &&
                  fused_segment_span(ops::kFusedBufferedMaxV + 1) > kFusedBufferedMaxSpan,
              "ops::kFusedBufferedMaxV is the widest V the fused backward keeps on chip");
static_assert(fused_segment_span(151552) == ops::fused_segment_span(151552) &&
              fused_segment_span(8193) == ops::fused_segment_span(8193));

BoundLaunch bind(const KernelArgs& k, CrossEntropyOrder order) {
  const DeviceTensor& logits = required(k.inputs, "logits");
  CrossEntropy p;
  p.order = order;
  p.backward = k.c.direction == Direction::kBackward;
  p.rows = logits.shape.at(0);
  p.vocab = logits.shape.at(1);
  p.ignore_index = ignore_index_attr(k.c);
  p.logits = logits.data();
  p.labels = required(k.inputs, "labels").data();
  if (p.backward) {
    p.g = required(k.inputs, "g").data();
    p.d_logits = required(k.outputs, "d_logits").data();
  } else {
    p.loss = required(k.outputs, "loss").data();
  }
  p.stream = k.stream;
  p.ilp = k.ilp;
  return [p] { launch_cross_entropy(p); };
}

BoundLaunch bind_eager(const KernelArgs& k) { return bind(k, CrossEntropyOrder::kEager); }
BoundLaunch bind_fused(const KernelArgs& k) { return bind(k, CrossEntropyOrder::kFused); }

}  // namespace

std::vector<KernelRecord> cross_entropy_kernels() {
  // The paths (ops/cross_entropy.cpp's tags): eager's kernel per V (warp, Reg, Smem, ILP and its row
  // shift); fused's segments (one without elements, a partial last step, the backward without
  // on-chip segments above kFusedBufferedMaxV, the backward whose threads load the logits where
  // V % 4 != 0, as the bulk copies need 16-byte rows).
  return {{"cross_entropy", "megatron_eager", bind_eager,
           {"rows=0", "kernel=warp", "kernel=reg", "kernel=smem", "kernel=ilp", "ilp_row_shift"}},
          {"cross_entropy", "fused", bind_fused, {"rows=0", "fused:empty_segment", "fused:partial_step", "fused:unbuffered",
                                                         "fused:scalar_rows"}}};
}

}  // namespace bitparity::gpu
