/*
 * backend_loader.c — device selection and the dlopen() of the CUDA backend
 * (see backend_loader.h).
 *
 * The library handle is kept open for the life of the process once a CUDA
 * backend has been created from it: the backend's code and its CUDA context
 * live there.  Loading happens in the calling process only (the background
 * worker, never the postmaster).
 */
#define _GNU_SOURCE
#include "backend_loader.h"

#include <dirent.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CUDA_LIB_NAME "llm_cuda.so"
#define CUDA_CREATE_SYM "llm_backend_cuda_create_ex"
#define CUDA_DETERMINISTIC_FLAG 0x1		/* LLM_CUDA_DETERMINISTIC of backend_cuda.h */

typedef llm_backend *(*cuda_create_ex_fn) (int device, unsigned flags, char *err, size_t errlen);

static void *cuda_lib;			/* kept open once a backend came from it */
static char fallback_reason[512];

const char *
llm_backend_fallback_reason(void)
{
	return fallback_reason;
}

/* Directory part of path into out (no trailing slash); false if none. */
static bool
dir_of(const char *path, char *out, size_t cap)
{
	const char *slash = strrchr(path, '/');
	size_t		n;

	if (slash == NULL)
		return false;
	n = (size_t) (slash - path);
	if (n == 0)
		n = 1;					/* "/" */
	if (n >= cap)
		return false;
	memcpy(out, path, n);
	out[n] = '\0';
	return true;
}

/* Append "; " + text to a message buffer. */
static void
note(char *buf, size_t cap, const char *fmt, const char *a, const char *b)
{
	size_t		len = strlen(buf);

	if (len + 3 >= cap)
		return;
	if (len > 0)
	{
		strcpy(buf + len, "; ");
		len += 2;
	}
	snprintf(buf + len, cap - len, fmt, a, b);
}

/* dlopen() path; on failure add why to tried. */
static void *
try_open(const char *path, bool must_exist, char *tried, size_t cap)
{
	void	   *h;

	if (must_exist && access(path, F_OK) != 0)
	{
		note(tried, cap, "%s%s: not found", path, "");
		return NULL;
	}
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (h == NULL)
	{
		const char *e = dlerror();

		note(tried, cap, "%s: %s", path, e ? e : "dlopen failed");
	}
	return h;
}

/* Find and open llm_cuda.so (see the search order in the header). */
static void *
open_cuda_lib(char *err, size_t errlen)
{
	char		tried[1024] = "";
	char		dir[PATH_MAX],
				path[PATH_MAX + 32];
	const char *env = getenv("LLM_CUDA_LIB");
	void	   *h;

	if (cuda_lib)
		return cuda_lib;
	if (env && *env)
	{
		h = try_open(env, false, tried, sizeof(tried));
		if (h == NULL)
			snprintf(err, errlen, "cannot load the CUDA backend from LLM_CUDA_LIB: %s", tried);
		return h;
	}
	{
		char		exe[PATH_MAX];
		ssize_t		n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

		if (n > 0)
		{
			exe[n] = '\0';
			if (dir_of(exe, dir, sizeof(dir)))
			{
				snprintf(path, sizeof(path), "%s/%s", dir, CUDA_LIB_NAME);
				if ((h = try_open(path, true, tried, sizeof(tried))) != NULL)
					return h;
			}
		}
	}
	{
		Dl_info		info;

		if (dladdr((void *) &llm_backend_open, &info) && info.dli_fname &&
			dir_of(info.dli_fname, dir, sizeof(dir)))
		{
			snprintf(path, sizeof(path), "%s/%s", dir, CUDA_LIB_NAME);
			if (strstr(tried, path) == NULL && (h = try_open(path, true, tried, sizeof(tried))) != NULL)
				return h;
		}
	}
	if ((h = try_open(CUDA_LIB_NAME, false, tried, sizeof(tried))) != NULL)
		return h;
	snprintf(err, errlen, "cannot load the CUDA backend (%s; set LLM_CUDA_LIB to its path): %s",
			 CUDA_LIB_NAME, tried);
	return NULL;
}

static llm_backend *
open_cuda(int device, unsigned flags, char *err, size_t errlen)
{
	void	   *h = open_cuda_lib(err, errlen);
	cuda_create_ex_fn create;
	llm_backend *b;
	char		msg[512];

	if (h == NULL)
		return NULL;
	*(void **) (&create) = dlsym(h, CUDA_CREATE_SYM);
	if (create == NULL)
	{
		snprintf(err, errlen, "the CUDA backend library has no symbol %s", CUDA_CREATE_SYM);
		if (h != cuda_lib)
			dlclose(h);
		return NULL;
	}
	msg[0] = '\0';
	b = create(device, flags, msg, sizeof(msg));
	if (b == NULL)
	{
		snprintf(err, errlen, "%s", msg[0] ? msg : "CUDA backend initialisation failed");
		/* keep the library: unloading a library that started the CUDA runtime is not safe */
		cuda_lib = h;
		return NULL;
	}
	cuda_lib = h;
	return b;
}

/* True for a name of the form nvidia<digits> (a GPU's node, not nvidiactl or nvidia-uvm). */
static bool
is_gpu_node(const char *name)
{
	const char *p = name + 6;

	if (strncmp(name, "nvidia", 6) != 0 || *p == '\0')
		return false;
	for (; *p; p++)
		if (*p < '0' || *p > '9')
			return false;
	return true;
}

/* Whether directory path has an entry accepted by want (NULL: any entry but . and ..). */
static bool
dir_has(const char *path, bool (*want) (const char *))
{
	DIR		   *d = opendir(path);
	struct dirent *e;
	bool		found = false;

	if (d == NULL)
		return false;
	while (!found && (e = readdir(d)) != NULL)
	{
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		found = want == NULL || want(e->d_name);
	}
	closedir(d);
	return found;
}

bool
llm_backend_nvidia_present(const char *root, char *why, size_t cap)
{
	char		dev[PATH_MAX],
				gpus[PATH_MAX];

	if (root == NULL || root[0] == '\0')
		root = "";
	snprintf(dev, sizeof(dev), "%s/dev", root);
	snprintf(gpus, sizeof(gpus), "%s/proc/driver/nvidia/gpus", root);
	if (dir_has(dev, is_gpu_node) || dir_has(gpus, NULL))
		return true;
	if (why != NULL && cap > 0)
		snprintf(why, cap, "no NVIDIA device (no %s/nvidia<N>, nothing in %s): CUDA backend not loaded",
				 dev, gpus);
	return false;
}

/* Parse "cuda" / "cuda:N"; -1 if device is not a CUDA name. */
static int
cuda_device_number(const char *device)
{
	char	   *end;
	long		n;

	if (strcmp(device, "cuda") == 0)
		return 0;
	if (strncmp(device, "cuda:", 5) != 0 || device[5] == '\0')
		return -1;
	n = strtol(device + 5, &end, 10);
	if (*end != '\0' || n < 0 || n > 1024)
		return -1;
	return (int) n;
}

static llm_backend *
cpu_backend(int n_threads, bool shared_threads, char *err, size_t errlen)
{
	return shared_threads ? llm_backend_cpu_create_shared(n_threads, err, errlen)
		: llm_backend_cpu_create(n_threads, err, errlen);
}

/* As llm_backend_open; deterministic selects the CUDA backend's batch-invariant mode. */
llm_backend *
llm_backend_open_ex(const char *device, int n_threads, bool deterministic, char *err, size_t errlen)
{
	return llm_backend_open_opts(device, n_threads, deterministic, false, err, errlen);
}

llm_backend *
llm_backend_open_opts(const char *device, int n_threads, bool deterministic, bool shared_threads,
					  char *err, size_t errlen)
{
	const char *env = getenv("LLM_DEVICE");
	unsigned	flags = deterministic ? CUDA_DETERMINISTIC_FLAG : 0;
	int			dev;

	fallback_reason[0] = '\0';
	if (device == NULL || device[0] == '\0')
		device = "auto";
	if (strcmp(device, "auto") == 0 && env != NULL && env[0] != '\0')
		device = env;
	if (strcmp(device, "cpu") == 0)
		return cpu_backend(n_threads, shared_threads, err, errlen);
	if ((dev = cuda_device_number(device)) >= 0)
		return open_cuda(dev, flags, err, errlen);
	if (strcmp(device, "auto") == 0)
	{
		llm_backend *b;

		/* without a device, loading the library would only map the CUDA runtime and cuBLAS */
		if (!llm_backend_nvidia_present(NULL, fallback_reason, sizeof(fallback_reason)))
			return llm_backend_cpu_create(n_threads, err, errlen);
		b = open_cuda(0, flags, fallback_reason, sizeof(fallback_reason));

		if (b != NULL)
			return b;
		return cpu_backend(n_threads, shared_threads, err, errlen);
	}
	snprintf(err, errlen, "unknown device \"%s\" (expected cpu, cuda, cuda:N or auto)", device);
	return NULL;
}

llm_backend *
llm_backend_open(const char *device, int n_threads, char *err, size_t errlen)
{
	return llm_backend_open_ex(device, n_threads, false, err, errlen);
}
