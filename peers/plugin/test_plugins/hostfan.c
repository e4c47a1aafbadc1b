/* A host-memory plug-in written in plain C against bitparity/plugin.h, as a user's would be:
 * fanout_grad (spec OP-11), the sum of the MoE input's three clone gradients, under both of its
 * contracts, in bf16, fp16 and fp32 (each addition in fp32, rounded once to the dtype).
 *
 * Built twice: as `hostfan`, which computes each contract's order, and with
 * HOSTFAN_PLANT_SHARED_LAST as `hostfan_planted`, whose glm45 adds the shared branch last (the
 * dsv4 order): the mistake that one contract pair of this op exists to catch. The tests load both
 * and expect no finding from the first and a minimized bit_mismatch from the second. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "bitparity/plugin.h"

#ifdef HOSTFAN_PLANT_SHARED_LAST
#define HOSTFAN_NAME "hostfan_planted"
#else
#define HOSTFAN_NAME "hostfan"
#endif

static float f32_of_bits(uint32_t bits) {
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

static uint32_t bits_of_f32(float f) {
  uint32_t bits;
  memcpy(&bits, &f, sizeof bits);
  return bits;
}

/* fp32 to bf16, round to nearest even; a NaN stays a NaN (quiet, sign kept). */
static uint16_t bf16_of_f32(float f) {
  const uint32_t bits = bits_of_f32(f);
  if (isnan(f)) return (uint16_t)((bits >> 16) | 0x0040u);
  const uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return (uint16_t)((bits + rounding) >> 16);
}

static float load(int32_t dtype, const void* data, int64_t i) {
  if (dtype == BITPARITY_FP32) return ((const float*)data)[i];
  if (dtype == BITPARITY_BF16) return f32_of_bits((uint32_t)((const uint16_t*)data)[i] << 16);
  return (float)((const _Float16*)data)[i];
}

/* `value` rounded once to the dtype, stored. */
static void store(int32_t dtype, void* data, int64_t i, float value) {
  if (dtype == BITPARITY_FP32)
    ((float*)data)[i] = value;
  else if (dtype == BITPARITY_BF16)
    ((uint16_t*)data)[i] = bf16_of_f32(value);
  else
    ((_Float16*)data)[i] = (_Float16)value;
}

/* An eager add: fp32 arithmetic, the result rounded to the dtype. */
static float add_rounded(int32_t dtype, float a, float b) {
  if (dtype == BITPARITY_FP32) return a + b;
  if (dtype == BITPARITY_BF16) return f32_of_bits((uint32_t)bf16_of_f32(a + b) << 16);
  return (float)(_Float16)(a + b);
}

static const bitparity_tensor* input(const bitparity_call* call, const char* name) {
  for (int64_t i = 0; i < call->num_inputs; ++i)
    if (strcmp(call->inputs[i].name, name) == 0) return &call->inputs[i];
  return NULL;
}

static bitparity_status compute(const bitparity_call* call, bitparity_error* error) {
  const bitparity_tensor* router = input(call, "g_router");
  const bitparity_tensor* dispatcher = input(call, "g_dispatcher");
  const bitparity_tensor* shared = input(call, "g_shared");
  if (!router || !dispatcher || !shared) {
    snprintf(error->error_class, sizeof error->error_class, "shape");
    snprintf(error->message, sizeof error->message, "fanout_grad needs g_router, g_dispatcher and g_shared");
    return BITPARITY_REJECT;
  }
  const int32_t dtype = router->dtype;
  if (dtype != BITPARITY_BF16 && dtype != BITPARITY_FP16 && dtype != BITPARITY_FP32) {
    snprintf(error->error_class, sizeof error->error_class, "dtype");
    snprintf(error->message, sizeof error->message, "g_router must be bf16, fp16 or fp32");
    return BITPARITY_REJECT;
  }
  void* out = NULL;
  if (call->allocate_output(call, "d_hidden", dtype, router->rank, router->shape, &out) != 0) {
    snprintf(error->message, sizeof error->message, "cannot allocate d_hidden");
    return BITPARITY_ERROR;
  }
  int64_t n = 1;
  for (int32_t d = 0; d < router->rank; ++d) n *= router->shape[d];
  int shared_last = strcmp(call->contract, "dsv4") == 0;
#ifdef HOSTFAN_PLANT_SHARED_LAST
  shared_last = 1;
#endif
  for (int64_t i = 0; i < n; ++i) {
    const float r = load(dtype, router->data, i), d = load(dtype, dispatcher->data, i), s = load(dtype, shared->data, i);
    const float sum = shared_last ? add_rounded(dtype, add_rounded(dtype, d, r), s)
                                  : add_rounded(dtype, add_rounded(dtype, d, s), r);
    store(dtype, out, i, sum);
  }
  return BITPARITY_OK;
}

static const bitparity_impl kImpls[] = {{"fanout_grad", "glm45"}, {"fanout_grad", "dsv4"}};

static const bitparity_plugin kPlugin = {
    BITPARITY_PLUGIN_ABI_VERSION,
    HOSTFAN_NAME,
    "fanout_grad in plain C on host memory (bitparity's test plug-in)",
    BITPARITY_MEMORY_HOST,
    kImpls,
    sizeof kImpls / sizeof kImpls[0],
    compute,
};

__attribute__((visibility("default"))) const bitparity_plugin* bitparity_plugin_v1(uint32_t host_abi_version) {
  return host_abi_version == BITPARITY_PLUGIN_ABI_VERSION ? &kPlugin : NULL;
}
