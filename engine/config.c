/*
 * config.c — the engine's one configuration (llm_engine_config):
 * its defaults, its check, the resolution of its 0 = auto values once the
 * model and backend are known, and equality.  Nothing else in the engine
 * picks a default.
 */
#define _GNU_SOURCE
#include "engine_internal.h"

#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define DEFAULT_BLOCK_SIZE			16
#define DEFAULT_MAX_BATCHED_TOKENS	512
#define DEFAULT_MAX_RUNNING			64
#define AUTO_KV_CAP_BYTES			((int64_t) 1 << 30)
#define DEFAULT_PREFILL_CAP_DECODES	16
#define DEFAULT_SPEC_TOKENS			4
#define DEFAULT_SPEC_MAX_BATCH		1
#define DEFAULT_BATCH_PREFILL_TOKENS	128
#define DEFAULT_BATCH_STEP_MS		100
#define DEFAULT_INTERACTIVE_STEP_SLOWDOWN	25
/* the KV cache may take at most this fraction of the physical memory */
#define KV_MAX_MEMORY_SHARE			0.5

void
llm_engine_config_defaults(llm_engine_config *c)
{
	memset(c, 0, sizeof(*c));
	c->model_path = NULL;
	c->device = "auto";
	c->n_threads = 0;			/* auto */
	c->n_ctx = 0;				/* auto */
	c->block_size = DEFAULT_BLOCK_SIZE;
	c->kv_cache_bytes = 0;		/* auto */
	c->max_batched_tokens = DEFAULT_MAX_BATCHED_TOKENS;
	c->max_running = DEFAULT_MAX_RUNNING;
	c->prefix_caching = true;
	c->reserved_interactive = -1;	/* auto */
	c->interactive_step_tokens = -1;	/* from the step-time model */
	c->prefill_cap = 0;
	c->prefill_cap_decodes = DEFAULT_PREFILL_CAP_DECODES;
	c->spec_tokens = DEFAULT_SPEC_TOKENS;
	c->spec_max_batch = DEFAULT_SPEC_MAX_BATCH;
	c->chat_template = "auto";
	c->kv_cache_dtype = "f16";
	c->batch_prefill_tokens = DEFAULT_BATCH_PREFILL_TOKENS;
	c->batch_step_ms = DEFAULT_BATCH_STEP_MS;
	c->interactive_step_slowdown = DEFAULT_INTERACTIVE_STEP_SLOWDOWN;
}

static bool
str_equal(const char *a, const char *b)
{
	return strcmp(a ? a : "", b ? b : "") == 0;
}

bool
llm_engine_config_equal(const llm_engine_config *a, const llm_engine_config *b)
{
	return str_equal(a->model_path, b->model_path) &&
		str_equal(a->device ? a->device : "auto", b->device ? b->device : "auto") &&
		a->n_threads == b->n_threads &&
		a->n_ctx == b->n_ctx &&
		a->block_size == b->block_size &&
		a->kv_cache_bytes == b->kv_cache_bytes &&
		a->max_batched_tokens == b->max_batched_tokens &&
		a->max_running == b->max_running &&
		a->prefix_caching == b->prefix_caching &&
		a->reserved_interactive == b->reserved_interactive &&
		a->interactive_step_tokens == b->interactive_step_tokens &&
		a->prefill_cap == b->prefill_cap &&
		a->prefill_cap_decodes == b->prefill_cap_decodes &&
		a->spec_tokens == b->spec_tokens &&
		a->spec_max_batch == b->spec_max_batch &&
		str_equal(a->chat_template ? a->chat_template : "auto", b->chat_template ? b->chat_template : "auto") &&
		engine_config_kv_dtype(a) == engine_config_kv_dtype(b) &&
		a->shared_threads == b->shared_threads &&
		a->batch_prefill_tokens == b->batch_prefill_tokens &&
		a->kv_keep_windowed == b->kv_keep_windowed &&
		a->batch_step_ms == b->batch_step_ms &&
		a->interactive_step_slowdown == b->interactive_step_slowdown;
}

int
engine_config_kv_dtype(const llm_engine_config *c)
{
	if (c->kv_cache_dtype == NULL || strcmp(c->kv_cache_dtype, "f16") == 0)
		return LLM_KV_F16;
	if (strcmp(c->kv_cache_dtype, "q8_0") == 0)
		return LLM_KV_Q8_0;
	return -1;
}

/* err and the offset of the field at fault; -1 */
#define BAD(f, ...) \
	do { \
		*field = offsetof(llm_engine_config, f); \
		snprintf(err, errlen, __VA_ARGS__); \
		return -1; \
	} while (0)

int
engine_config_check(const llm_engine_config *c, size_t *field, char *err, size_t errlen)
{
	if (c->model_path == NULL || c->model_path[0] == '\0')
		BAD(model_path, "no model file given");
	if (c->n_threads < 0)
		BAD(n_threads, "n_threads must be >= 0 (0 = all online CPUs), not %d", c->n_threads);
	if (c->n_ctx < 0 || (c->n_ctx > 0 && c->n_ctx < LLM_MIN_N_CTX))
		BAD(n_ctx, "n_ctx must be 0 (the model's context length) or at least %d, not %d",
			LLM_MIN_N_CTX, c->n_ctx);
	if (c->block_size < 1)
		BAD(block_size, "block_size must be at least 1, not %d", c->block_size);
	if (c->kv_cache_bytes < 0)
		BAD(kv_cache_bytes, "kv_cache_bytes must be >= 0 (0 = automatic), not %lld",
			(long long) c->kv_cache_bytes);
	if (c->max_batched_tokens < 1)
		BAD(max_batched_tokens, "max_batched_tokens must be at least 1, not %d", c->max_batched_tokens);
	if (c->max_running < 1)
		BAD(max_running, "max_running must be at least 1, not %d", c->max_running);
	if (c->reserved_interactive < -1)
		BAD(reserved_interactive, "reserved_interactive must be >= 0 (-1 = automatic), not %d",
			c->reserved_interactive);
	if (c->interactive_step_tokens < -1)
		BAD(interactive_step_tokens,
			"interactive_step_tokens must be >= -1 (-1 = automatic, 0 = no cap), not %d",
			c->interactive_step_tokens);
	if (c->prefill_cap < 0)
		BAD(prefill_cap, "prefill_cap must be >= 0 (0 = no cap), not %d", c->prefill_cap);
	if (c->prefill_cap_decodes < 1)
		BAD(prefill_cap_decodes, "prefill_cap_decodes must be at least 1, not %d", c->prefill_cap_decodes);
	if (c->spec_tokens < 0 || c->spec_tokens > LLM_SPEC_MAX_TOKENS)
		BAD(spec_tokens, "spec_tokens must be in [0, %d] (0 = off), not %d", LLM_SPEC_MAX_TOKENS,
			c->spec_tokens);
	if (c->spec_max_batch < 1)
		BAD(spec_max_batch, "spec_max_batch must be at least 1, not %d", c->spec_max_batch);
	if (c->chat_template != NULL && strcmp(c->chat_template, "auto") != 0 &&
		!llm_chat_family_parse(c->chat_template, &(llm_chat_family) {0}))
		BAD(chat_template, "chat_template must be auto, none, chatml or gemma, not \"%s\"", c->chat_template);
	if (engine_config_kv_dtype(c) < 0)
		BAD(kv_cache_dtype, "kv_cache_dtype must be \"f16\" or \"q8_0\", not \"%s\"", c->kv_cache_dtype);
	if (c->batch_prefill_tokens < 0)
		BAD(batch_prefill_tokens, "batch_prefill_tokens must be >= 0 (0 = no cap), not %d",
			c->batch_prefill_tokens);
	if (c->batch_step_ms < 0)
		BAD(batch_step_ms, "batch_step_ms must be >= 0 (0 = no cap), not %d", c->batch_step_ms);
	if (c->interactive_step_slowdown < 0)
		BAD(interactive_step_slowdown, "interactive_step_slowdown must be >= 0 (percent), not %d",
			c->interactive_step_slowdown);
	return 0;
}

/* Physical memory of the machine in bytes; 0 if unknown. */
static int64_t
physical_memory_bytes(void)
{
	long		pages = sysconf(_SC_PHYS_PAGES);
	long		page = sysconf(_SC_PAGE_SIZE);

	return pages > 0 && page > 0 ? (int64_t) pages * page : 0;
}

int
llm_engine_check_kv_budget(int64_t bytes, char *err, size_t errlen)
{
	int64_t		phys = physical_memory_bytes();

	if (phys > 0 && (double) bytes > KV_MAX_MEMORY_SHARE * (double) phys)
	{
		snprintf(err, errlen, "a KV cache of %lld MB is more than half of the physical memory (%lld MB)",
				 (long long) (bytes >> 20), (long long) (phys >> 20));
		return -1;
	}
	return 0;
}

int
engine_online_cpus(void)
{
	cpu_set_t	set;
	long		n;

	if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
		return CPU_COUNT(&set);
	n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (int) n : 1;
}

int
engine_config_resolve(llm_engine_config *c, const llm_model_config *mc, const llm_backend *b,
					  size_t block_bytes, size_t *field, char *err, size_t errlen)
{
	bool		auto_ctx = c->n_ctx == 0;

	int64_t		n_blocks;

	if (c->device == NULL || strcmp(c->device, "auto") == 0)
		c->device = b->ops->name;
	/* automatic: one slot per 16, at least one; batch requests always keep one */
	if (c->reserved_interactive < 0)
		c->reserved_interactive = c->max_running >= 2 ? (c->max_running / 16 > 1 ? c->max_running / 16 : 1) : 0;
	if (c->reserved_interactive > c->max_running - 1)
		c->reserved_interactive = c->max_running - 1;
	/* what the backend runs: all CPUs for 0, 1 on a GPU */
	c->n_threads = b->n_threads;
	if (c->n_ctx == 0)
		c->n_ctx = mc->n_ctx_train;
	if (c->n_ctx < LLM_MIN_N_CTX)
		BAD(n_ctx, "context length %d%s is less than %d", c->n_ctx,
			auto_ctx ? " (the model's)" : "", LLM_MIN_N_CTX);
	if (c->kv_cache_bytes == 0)
	{
		int64_t		want = (int64_t) c->max_running * c->n_ctx / c->block_size * (int64_t) block_bytes;

		c->kv_cache_bytes = want < AUTO_KV_CAP_BYTES ? want : AUTO_KV_CAP_BYTES;
	}
	if (llm_engine_check_kv_budget(c->kv_cache_bytes, err, errlen) != 0)
	{
		*field = offsetof(llm_engine_config, kv_cache_bytes);
		return -1;
	}
	n_blocks = c->kv_cache_bytes / (int64_t) block_bytes;
	if (n_blocks < 2)
		BAD(kv_cache_bytes, "KV cache budget of %lld bytes holds fewer than 2 blocks of %zu bytes",
			(long long) c->kv_cache_bytes, block_bytes);
	if (n_blocks > INT32_MAX)
		BAD(kv_cache_bytes, "KV cache budget of %lld bytes holds more than %d blocks",
			(long long) c->kv_cache_bytes, INT32_MAX);
	/* whole blocks: the resolved budget is what the pool holds */
	c->kv_cache_bytes = n_blocks * (int64_t) block_bytes;
	return 0;
}
