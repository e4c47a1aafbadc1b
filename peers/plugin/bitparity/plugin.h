/* bitparity/plugin.h: the C ABI of `plugin:` backends (version 1).
 *
 * A plug-in is a shared library with compiled kernels of its own (a framework's fused SwiGLU, a
 * permute kernel, ...). `bitparity --plugin PATH.so` opens it with dlopen, calls its one entry
 * point, and adds a backend kind named by the plug-in: every (op, contract) it lists becomes
 * NAME:CONTRACT in `list`, `run`, `diff`, `replay` and campaigns, compared bit for bit with the
 * reference of that contract and with every other backend.
 *
 *   const bitparity_plugin* bitparity_plugin_v1(uint32_t host_abi_version);
 *
 * returns a description that stays valid until the library is closed (a static object), or NULL
 * when the plug-in cannot serve this host (it may print why on stderr). The host passes its own
 * BITPARITY_PLUGIN_ABI_VERSION; the description states the version the plug-in was built with, and
 * the host refuses a plug-in whose version it does not speak.
 *
 * Calls. For each case, bitparity checks the input against the op's contract first (the same
 * validation every backend gets: `bitparity list` names the inputs and their shapes) and calls
 * `compute`. The plug-in allocates each output it returns through `call->allocate_output`, with the
 * shape and dtype it computes: `call->expected_outputs` lists what the contract gives for the case
 * (a plug-in that returns another shape, say d_scale as [rows] where the contract says [rows, 1], is
 * a shape finding, never reshaped). Every byte of a fresh output is 0x5a, so an element the
 * plug-in forgets to write shows as a mismatch. With memory BITPARITY_MEMORY_CUDA every tensor's
 * data is device memory of the current CUDA device and `stream` is the cudaStream_t to enqueue on
 * (bitparity synchronizes it after the call); with BITPARITY_MEMORY_HOST it is host memory and
 * `stream` is NULL. Tensors are row-major and contiguous; an empty tensor's data is NULL. Each
 * element is the dtype's bit pattern in the machine's byte order (bf16 is the upper half of an
 * fp32). A plug-in implements every direction of an op it lists (`bitparity list` shows them).
 *
 * Results. `compute` returns BITPARITY_OK after writing every output element; BITPARITY_REJECT for
 * an input that its contract refuses, with `error->error_class` one of "shape", "dtype", "attr"
 * (what two backends must agree on; a class that does not match [a-z][a-z0-9_]*, or names one of
 * bitparity's own outcomes such as "device_fault", is reported as a `backend_error`) and a message
 * naming the field; BITPARITY_ERROR for anything
 * else (a launch that failed, memory it could not get), reported as a `backend_error` finding.
 * Strings written into `error` are cut to their buffers and always read as NUL-terminated.
 * `compute` may be called from one thread at a time; it must not keep pointers past its return.
 *
 * A plug-in runs inside the bitparity process: a crash ends the process. To keep a campaign alive
 * across faults, serve the plug-in from a worker process, which the campaign restarts:
 *   bitparity --exec mine="bitparity --plugin ./libmine.so worker --kind mine" campaign ...
 */
#ifndef BITPARITY_PLUGIN_H_
#define BITPARITY_PLUGIN_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define BITPARITY_PLUGIN_ABI_VERSION 1u
#define BITPARITY_PLUGIN_ENTRY "bitparity_plugin_v1"

/* Element types, as the case format names them. */
typedef enum bitparity_dtype {
  BITPARITY_BF16 = 0,     /* "bf16" */
  BITPARITY_FP16 = 1,     /* "fp16" */
  BITPARITY_FP32 = 2,     /* "fp32" */
  BITPARITY_FP64 = 3,     /* "fp64" */
  BITPARITY_FP8_E4M3 = 4, /* "fp8_e4m3" */
  BITPARITY_FP8_E5M2 = 5, /* "fp8_e5m2" */
  BITPARITY_BOOL = 6,     /* "bool": one byte, 0 or 1 */
  BITPARITY_I32 = 7,      /* "i32" */
  BITPARITY_I64 = 8       /* "i64" */
} bitparity_dtype;

/* Where a plug-in's tensors live. */
typedef enum bitparity_memory {
  BITPARITY_MEMORY_HOST = 0, /* host pointers: no GPU needed */
  BITPARITY_MEMORY_CUDA = 1  /* device pointers on the current CUDA device */
} bitparity_memory;

typedef enum bitparity_status {
  BITPARITY_OK = 0,
  BITPARITY_REJECT = 1, /* the contract refuses the input: error_class and message say why */
  BITPARITY_ERROR = 2   /* the computation failed: message says why */
} bitparity_status;

typedef struct bitparity_tensor {
  const char* name;     /* the op's input or output name: "y", "scale", "d_scale" */
  int32_t dtype;        /* a bitparity_dtype */
  int32_t rank;         /* 0 .. 8 */
  const int64_t* shape; /* rank dims */
  void* data;           /* row-major, contiguous; inputs are read-only */
  uint64_t nbytes;      /* product of the dims times the element size */
} bitparity_tensor;

typedef enum bitparity_attr_type {
  BITPARITY_ATTR_FLOAT = 0,
  BITPARITY_ATTR_INT = 1,
  BITPARITY_ATTR_BOOL = 2,
  BITPARITY_ATTR_STRING = 3
} bitparity_attr_type;

/* An attribute the case gives (an absent attribute, Python's None, is not listed). */
typedef struct bitparity_attr {
  const char* name;
  int32_t type;         /* a bitparity_attr_type: which one of the fields below holds the value */
  double float_value;   /* NaN, +-Inf and -0.0 travel as they are */
  int64_t int_value;
  int32_t bool_value;   /* 0 or 1 */
  const char* string_value;
} bitparity_attr;

typedef struct bitparity_call bitparity_call;

struct bitparity_call {
  const char* op;        /* "swiglu_scale" */
  const char* direction; /* "fwd" or "bwd" */
  const char* contract;  /* "paddle_fused" */
  const bitparity_attr* attrs;
  int64_t num_attrs;
  const bitparity_tensor* inputs;           /* the inputs the case gives, in name order */
  int64_t num_inputs;
  const bitparity_tensor* expected_outputs; /* the contract's outputs for this case (data NULL) */
  int64_t num_expected_outputs;
  void* stream;                             /* a cudaStream_t for BITPARITY_MEMORY_CUDA, else NULL */
  /* Allocates output `name` (each name once) in the plug-in's memory, every byte 0x5a, and sets
   * *data (NULL for an empty tensor). Returns 0, or nonzero when it cannot (a name that is none of
   * the op's outputs in the call's direction, a name given twice, an unknown dtype, a rank above 8, more than
   * 2^26 elements, no memory left): then return BITPARITY_ERROR. */
  int32_t (*allocate_output)(const bitparity_call* call, const char* name, int32_t dtype, int32_t rank,
                             const int64_t* shape, void** data);
  void* host; /* bitparity's own state for allocate_output; the plug-in leaves it alone */
};

typedef struct bitparity_error {
  char error_class[32]; /* a rejection's class: "shape", "dtype", "attr" */
  char message[1024];
} bitparity_error;

/* One contract of one op that the plug-in computes. */
typedef struct bitparity_impl {
  const char* op;
  const char* contract;
} bitparity_impl;

typedef struct bitparity_plugin {
  uint32_t abi_version; /* BITPARITY_PLUGIN_ABI_VERSION of the header the plug-in was built with */
  const char* name;     /* the backend kind: [a-z][a-z0-9_]*, at most 64 characters */
  const char* doc;      /* one line for `bitparity list`: whose kernels, which version */
  int32_t memory;       /* a bitparity_memory */
  const bitparity_impl* impls;
  int64_t num_impls;
  bitparity_status (*compute)(const bitparity_call* call, bitparity_error* error);
} bitparity_plugin;

typedef const bitparity_plugin* (*bitparity_plugin_entry)(uint32_t host_abi_version);

#ifdef __cplusplus
}
#endif

#endif /* BITPARITY_PLUGIN_H_ */
