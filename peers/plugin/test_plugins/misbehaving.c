/* Plug-ins that break the ABI or misbehave in one way each, for the loader's tests: one source,
 * built once per variant with -DVARIANT_<NAME>. Each serves fanout_grad under glm45 on host memory
 * and, where it computes at all, returns g_router as d_hidden: the sum when the other two
 * gradients are +0, which is the case the tests give it, so that what they see is the one fault. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "bitparity/plugin.h"

/* Each variant uses only some of what follows. */
#define MAYBE_UNUSED __attribute__((unused))

MAYBE_UNUSED static const bitparity_tensor* input(const bitparity_call* call, const char* name) {
  for (int64_t i = 0; i < call->num_inputs; ++i)
    if (strcmp(call->inputs[i].name, name) == 0) return &call->inputs[i];
  return NULL;
}

/* Copies g_router into d_hidden of `rank` dims `shape`, leaving the last `skip` elements unwritten. */
MAYBE_UNUSED static bitparity_status copy_router(const bitparity_call* call, bitparity_error* error, int32_t rank,
                                    const int64_t* shape, int64_t skip) {
  const bitparity_tensor* router = input(call, "g_router");
  void* out = NULL;
  if (call->allocate_output(call, "d_hidden", router->dtype, rank, shape, &out) != 0) {
    snprintf(error->message, sizeof error->message, "cannot allocate d_hidden");
    return BITPARITY_ERROR;
  }
  const uint64_t keep = router->nbytes > (uint64_t)skip * 4 ? router->nbytes - (uint64_t)skip * 4 : 0;
  if (out && keep) memcpy(out, router->data, keep);
  return BITPARITY_OK;
}

MAYBE_UNUSED static bitparity_status compute(const bitparity_call* call, bitparity_error* error) {
  const bitparity_tensor* router = input(call, "g_router");
#if defined(VARIANT_ERRORS)
  (void)router;
  snprintf(error->message, sizeof error->message, "launch failed: the device is busy");
  return BITPARITY_ERROR;
#elif defined(VARIANT_REJECTS)
  (void)router;
  snprintf(error->error_class, sizeof error->error_class, "dtype");
  snprintf(error->message, sizeof error->message, "g_router: this kernel serves no dtype at all");
  return BITPARITY_REJECT;
#elif defined(VARIANT_BAD_CLASS)
  (void)router;
  snprintf(error->error_class, sizeof error->error_class, "dtype|\033[2J");
  snprintf(error->message, sizeof error->message, "g_router:\033[2J no\nway");
  return BITPARITY_REJECT;
#elif defined(VARIANT_OTHER_OUTPUT)
  /* Allocates an output that the op does not have: the host refuses it. */
  void* out = NULL;
  if (call->allocate_output(call, "d_hid\033[2Jden", router->dtype, router->rank, router->shape, &out) != 0) {
    snprintf(error->message, sizeof error->message, "cannot allocate d_hidden");
    return BITPARITY_ERROR;
  }
  return BITPARITY_OK;
#elif defined(VARIANT_BAD_STATUS)
  (void)router;
  (void)error;
  return (bitparity_status)7;
#elif defined(VARIANT_LONG_MESSAGE)
  (void)router;
  /* Fills both buffers to the last byte without a NUL: the host must cut them itself. */
  memset(error->error_class, 'c', sizeof error->error_class);
  memset(error->message, 'm', sizeof error->message);
  return BITPARITY_REJECT;
#elif defined(VARIANT_OVERSIZE)
  (void)router;
  const int64_t huge[2] = {1 << 20, 1 << 20};
  void* out = NULL;
  if (call->allocate_output(call, "d_hidden", BITPARITY_FP32, 2, huge, &out) != 0) {
    snprintf(error->message, sizeof error->message, "cannot allocate d_hidden");
    return BITPARITY_ERROR;
  }
  return BITPARITY_OK;
#elif defined(VARIANT_TWICE)
  void* out = NULL;
  call->allocate_output(call, "d_hidden", router->dtype, router->rank, router->shape, &out);
  if (call->allocate_output(call, "d_hidden", router->dtype, router->rank, router->shape, &out) != 0) {
    /* Ignores the refusal: the host must not take the result. */
  }
  (void)error;
  return BITPARITY_OK;
#elif defined(VARIANT_FLAT)
  /* d_hidden as [T * H]: a shape finding, which the host must not reshape away. */
  int64_t flat = 1;
  for (int32_t d = 0; d < router->rank; ++d) flat *= router->shape[d];
  return copy_router(call, error, 1, &flat, 0);
#elif defined(VARIANT_FORGETS)
  /* Leaves the last fp32-sized element unwritten: it keeps the host's poison. */
  return copy_router(call, error, router->rank, router->shape, 1);
#else
  return copy_router(call, error, router->rank, router->shape, 0);
#endif
}

static const bitparity_impl kImpls[] = {
#if defined(VARIANT_UNKNOWN_OP)
    {"no_such_op", "glm45"},
#elif defined(VARIANT_UNKNOWN_CONTRACT)
    {"fanout_grad", "no_such_contract"},
#elif defined(VARIANT_LISTED_TWICE)
    {"fanout_grad", "glm45"},
    {"fanout_grad", "glm45"},
#else
    {"fanout_grad", "glm45"},
#endif
};

MAYBE_UNUSED static const bitparity_plugin kPlugin = {
#if defined(VARIANT_FUTURE_ABI)
    BITPARITY_PLUGIN_ABI_VERSION + 1,
#else
    BITPARITY_PLUGIN_ABI_VERSION,
#endif
#if defined(VARIANT_BAD_NAME)
    "Bad-Name",
#elif defined(VARIANT_TAKEN_NAME)
    "ref",
#else
    PLUGIN_KIND,
#endif
    "a misbehaving test plug-in",
#if defined(VARIANT_BAD_MEMORY)
    5,
#else
    BITPARITY_MEMORY_HOST,
#endif
    kImpls,
    sizeof kImpls / sizeof kImpls[0],
#if defined(VARIANT_NULL_COMPUTE)
    NULL,
#else
    compute,
#endif
};

#if defined(VARIANT_NO_ENTRY)
__attribute__((visibility("default"))) const bitparity_plugin* bitparity_plugin_v0(uint32_t host_abi_version) {
  (void)host_abi_version;
  return &kPlugin;
}
#else
__attribute__((visibility("default"))) const bitparity_plugin* bitparity_plugin_v1(uint32_t host_abi_version) {
  (void)host_abi_version;
#if defined(VARIANT_NULL_ENTRY)
  return NULL;
#else
  return &kPlugin;
#endif
}
#endif
