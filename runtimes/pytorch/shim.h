// shim.h: the C API over libtorch that the cgo package calls. Every function
// catches every C++ exception; errors come back as strings the caller frees
// with pt_free_string. Nothing here keeps a pointer it was given after it
// returns.
#ifndef INFERBID_PYTORCH_SHIM_H
#define INFERBID_PYTORCH_SHIM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// Element types; the values equal runtimes.DType.
enum {
  PT_DOUBLE = 1,
  PT_FLOAT = 2,
  PT_INT8 = 3,
  PT_INT16 = 4,
  PT_INT32 = 5,
  PT_INT64 = 6,
  PT_BOOL = 7,
  PT_UINT8 = 8,
  PT_HALF = 12,
};

// Error kinds of pt_forward.
enum {
  PT_OK = 0,
  PT_ERR_INPUT = 1,      // an input could not be made into a tensor
  PT_ERR_EXECUTION = 2,  // forward() threw
  PT_ERR_OUTPUT = 3,     // forward() returned something that is not a tensor or a flat tuple of tensors
};

typedef struct pt_model pt_model;

// An input tensor: the caller's memory, read (copied) during pt_forward only.
typedef struct {
  int32_t dtype;
  int32_t ndim;
  const int64_t* shape;
  const void* data;
} pt_input;

// An output tensor: memory owned by the pt_outputs that holds it.
typedef struct {
  int32_t dtype;
  int32_t ndim;
  const int64_t* shape;
  const void* data;
  int64_t numel;
} pt_output;

typedef struct {
  int32_t n;
  pt_output* tensors;
  void* priv;  // keeps the tensors alive
} pt_outputs;

// pt_set_threads sets the intra-op (at::set_num_threads) and inter-op
// (at::set_num_interop_threads) pool sizes; 0 leaves one unchanged. Inter-op
// can be set once per process: a second, different value is an error.
// Returns NULL or an error.
char* pt_set_threads(int32_t intraop, int32_t interop);

// pt_load loads a TorchScript module from bytes, puts it in eval mode,
// freezes it and validates it (no attributes left after freezing, no
// side-effect nodes in forward). Returns NULL and sets *out, or an error.
char* pt_load(const void* data, size_t len, pt_model** out);

// pt_load_fd is pt_load from an open file of len bytes, read with pread:
// the file is never held in memory whole. fd stays the caller's.
char* pt_load_fd(int fd, size_t len, pt_model** out);

// pt_num_inputs is the number of tensors forward() takes, or -1 when the
// schema does not fix it (default values, varargs).
int32_t pt_num_inputs(const pt_model* m);
// pt_input_name is the name of forward()'s i-th argument (owned by m).
const char* pt_input_name(const pt_model* m, int32_t i);

// pt_forward runs forward() on n inputs. On success returns NULL and fills
// out (free it with pt_free_outputs); on failure returns an error and sets
// *kind to one of PT_ERR_*.
char* pt_forward(pt_model* m, const pt_input* inputs, int32_t n, pt_outputs* out, int32_t* kind);

// pt_has_initial_state reports whether the module exports initial_state().
int32_t pt_has_initial_state(const pt_model* m);
// pt_initial_state runs initial_state() as pt_forward runs forward().
char* pt_initial_state(pt_model* m, pt_outputs* out, int32_t* kind);

void pt_free_outputs(pt_outputs* out);
void pt_free_model(pt_model* m);
void pt_free_string(char* s);

#ifdef __cplusplus
}
#endif

#endif
