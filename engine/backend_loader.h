/*
 * backend_loader.h — choose and create the compute backend for a device name
 * (llm.device / llm_engine_config.device): "cpu", "cuda", "cuda:N" or "auto".
 *
 * The CUDA backend is a separate shared object (build/llm_cuda.so, see
 * kernels/cuda/backend_cuda.h) loaded with dlopen() only when asked for, so
 * that nothing links against CUDA and a process that never uses the GPU never
 * creates a CUDA context (which would not survive fork()).
 */
#ifndef LLM_BACKEND_LOADER_H
#define LLM_BACKEND_LOADER_H

#include <stdbool.h>
#include <stddef.h>
#include "kernels/backend.h"

/*
 * Create the backend for device (NULL = "auto"):
 *   "cpu"           the CPU backend with n_threads threads (<= 0: all CPUs);
 *   "cuda", "cuda:N" the CUDA backend on GPU N (default 0); NULL + err when
 *                   the library cannot be loaded or the device cannot be used;
 *   "auto"          CUDA when the machine shows an NVIDIA device
 *                   (llm_backend_nvidia_present) and the library loads and
 *                   initialises, else the CPU backend (the reason CUDA was
 *                   skipped: llm_backend_fallback_reason).  Without a device
 *                   the CUDA library is never opened, so a CPU-only process
 *                   maps neither the CUDA runtime nor cuBLAS.
 * With "auto" the environment variable LLM_DEVICE, when set, replaces the
 * choice (so drivers without a device option, such as llm-cli, can pick one).
 * The CUDA library is looked for at $LLM_CUDA_LIB, then as llm_cuda.so next
 * to the running executable, next to the shared object holding this code
 * (the extension), and finally through the dynamic loader's search path.
 * Errors: unknown device names, load/initialisation failures (message in err).
 */
llm_backend *llm_backend_open(const char *device, int n_threads, char *err, size_t errlen);

/*
 * As llm_backend_open; deterministic = true asks the CUDA backend for its
 * batch-invariant mode (llm.deterministic; the CPU backend always is).  The
 * environment variable LLM_DETERMINISTIC=1 has the same effect on CUDA.
 */
llm_backend *llm_backend_open_ex(const char *device, int n_threads, bool deterministic,
								 char *err, size_t errlen);

/*
 * As llm_backend_open_ex; shared_threads = true gives a CPU backend the
 * process's shared pool of n_threads compute threads
 * (llm_backend_cpu_create_shared): for engines one thread drives in turn.
 */
llm_backend *llm_backend_open_opts(const char *device, int n_threads, bool deterministic,
								   bool shared_threads, char *err, size_t errlen);

/*
 * Whether the machine under root (NULL or "" = "/") shows an NVIDIA GPU: a
 * node root/dev/nvidia<N> or an entry in root/proc/driver/nvidia/gpus
 * (nvidiactl and nvidia-uvm alone do not count: the driver may be installed
 * without a GPU).  Reads directories only; loads nothing.  When false and
 * why is not NULL, why (cap bytes) says what was looked at.
 */
bool		llm_backend_nvidia_present(const char *root, char *why, size_t cap);

/* Why the last "auto" open fell back to the CPU ("" if it did not). */
const char *llm_backend_fallback_reason(void);

#endif
