/*
 * backend_cuda.h — the CUDA compute backend (kernels/backend.h), built as its
 * own shared object build/llm_cuda.so so that the engine, the CLI and the
 * PostgreSQL extension never link against CUDA: the engine dlopen()s the
 * library when llm.device asks for it (engine/backend_loader.c), and only
 * in the process that owns the GPU (a CUDA context does not survive fork()).
 *
 * The library exports exactly these C symbols.
 *
 * Status: compiled and linked with nvcc 13.0 for sm_90 (+ compute_90 PTX) on a
 * machine WITHOUT a GPU; the kernels have not yet run on a device.  See
 * docs/GPU.md for what has and has not been verified.
 */
#ifndef LLM_BACKEND_CUDA_H
#define LLM_BACKEND_CUDA_H

#include <stddef.h>
#include "kernels/backend.h"

#ifdef __cplusplus
extern "C"
{
#endif

/* Flags of llm_backend_cuda_create_ex. */
#define LLM_CUDA_DETERMINISTIC	0x1	/* batch-invariant kernels only, no cuBLAS */

/*
 * Create a CUDA backend on device number `device` (cudaSetDevice order).
 * Deterministic mode is on when the environment has LLM_DETERMINISTIC=1 (or
 * LLM_CUDA_DETERMINISTIC=1).  Returns NULL and writes a message to err when
 * there is no usable device, the driver is too old, or any CUDA/cuBLAS call
 * fails; never aborts.
 */
llm_backend *llm_backend_cuda_create(int device, char *err, size_t errlen);

/* As llm_backend_cuda_create with explicit LLM_CUDA_* flags (the environment is still honoured). */
llm_backend *llm_backend_cuda_create_ex(int device, unsigned flags, char *err, size_t errlen);

typedef llm_backend *(*llm_backend_cuda_create_fn) (int device, char *err, size_t errlen);
typedef llm_backend *(*llm_backend_cuda_create_ex_fn) (int device, unsigned flags, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
