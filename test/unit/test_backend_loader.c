/*
 * test_backend_loader.c — device selection without a GPU.
 *
 * Checks: the NVIDIA probe on made-up directory trees (a GPU node or a
 * driver GPU entry counts, nvidiactl / nvidia-uvm alone do not); on a
 * machine without a device, "auto" gives the CPU backend, says why, and
 * leaves no CUDA library mapped in the process, even with LLM_CUDA_LIB
 * pointing at a built build/llm_cuda.so (so opening it would succeed and map
 * the CUDA runtime and cuBLAS).
 */
#define _GNU_SOURCE
#include "unit.h"
#include "engine/backend_loader.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char root[] = "/tmp/llm_probe.XXXXXX";

static void
touch(const char *rel)
{
	char		path[512];
	FILE	   *f;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	f = fopen(path, "w");
	if (f)
		fclose(f);
}

static void
mkdirs(const char *rel)
{
	char		path[512];

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	for (char *p = path + strlen(root) + 1; *p; p++)
		if (*p == '/')
		{
			*p = '\0';
			mkdir(path, 0700);
			*p = '/';
		}
	mkdir(path, 0700);
}

static void
test_probe(void)
{
	char		why[512] = "";

	if (!CHECK(mkdtemp(root) != NULL, "temporary root"))
		return;
	CHECK(!llm_backend_nvidia_present(root, why, sizeof(why)) && strstr(why, "no NVIDIA device") != NULL,
		  "empty tree: no device (%s)", why);
	mkdirs("dev");
	touch("dev/nvidiactl");
	touch("dev/nvidia-uvm");
	touch("dev/nvidia-modeset");
	CHECK(!llm_backend_nvidia_present(root, NULL, 0), "nvidiactl, nvidia-uvm, nvidia-modeset alone: no device");
	mkdirs("proc/driver/nvidia/gpus");
	CHECK(!llm_backend_nvidia_present(root, NULL, 0), "empty proc/driver/nvidia/gpus: no device");
	mkdirs("proc/driver/nvidia/gpus/0000:01:00.0");
	CHECK(llm_backend_nvidia_present(root, NULL, 0), "an entry in proc/driver/nvidia/gpus: device");
	rmdir(strcat(strcpy(why, root), "/proc/driver/nvidia/gpus/0000:01:00.0"));
	CHECK(!llm_backend_nvidia_present(root, NULL, 0), "entry removed: no device");
	touch("dev/nvidia0");
	CHECK(llm_backend_nvidia_present(root, NULL, 0), "dev/nvidia0: device");
}

static int
remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

/* Lines of /proc/self/maps naming a CUDA library or the backend's shared object. */
static int
cuda_mappings(char *first, size_t cap)
{
	FILE	   *f = fopen("/proc/self/maps", "r");
	char		line[1024];
	int			n = 0;

	first[0] = '\0';
	if (f == NULL)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (strstr(line, "libcudart") || strstr(line, "libcublas") || strstr(line, "libcuda.so")
			|| strstr(line, "llm_cuda.so"))
		{
			if (n++ == 0)
				snprintf(first, cap, "%.*s", (int) strcspn(line, "\n"), line);
		}
	fclose(f);
	return n;
}

static void
test_auto_without_device(void)
{
	char		err[512] = "",
				first[1024];
	const char *reason;
	llm_backend *b;
	int			n;

	if (llm_backend_nvidia_present(NULL, NULL, 0))
	{
		SKIP("auto without a device: this machine has an NVIDIA device");
		SKIP("auto without a device: fallback reason");
		SKIP("auto without a device: no CUDA library mapped");
		return;
	}
	unsetenv("LLM_DEVICE");
	/* make a forgotten probe visible: the library would then load */
	if (access("build/llm_cuda.so", R_OK) == 0)
		setenv("LLM_CUDA_LIB", "build/llm_cuda.so", 1);
	else
		printf("# build/llm_cuda.so not built: the mapping check below cannot see a loaded library\n");
	b = llm_backend_open("auto", 1, err, sizeof(err));
	CHECK(b != NULL && strcmp(b->ops->name, "cpu") == 0, "auto without a device: the CPU backend (%s)",
		  b ? b->ops->name : err);
	reason = llm_backend_fallback_reason();
	CHECK(strstr(reason, "no NVIDIA device") != NULL, "fallback reason: %s", reason);
	n = cuda_mappings(first, sizeof(first));
	CHECK(n == 0, "no CUDA library mapped (%d mappings%s%s)", n, n > 0 ? ", first: " : "", first);
	if (b)
		b->ops->destroy(b);
}

int
main(void)
{
	test_probe();
	nftw(root, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
	test_auto_without_device();
	return unit_done();
}
