/*
 * engine_config.c — the engine's one configuration (llm_engine_config):
 * its defaults, its check, the resolution of its 0 = auto values once the
 * model and backend are known, and equality.  Nothing else in the engine
 * picks a default.
 */
#include "engine_internal.h"

#include <stdio.h>
#include <string.h>

#define DEFAULT_BLOCK_SIZE			16
#define DEFAULT_MAX_BATCHED_TOKENS	512
#define DEFAULT_MAX_RUNNING			64
#define AUTO_KV_CAP_BYTES			((int64_t) 1 << 30)

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
	c->kv_cache_dtype = "f16";
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
		engine_config_kv_dtype(a) == engine_config_kv_dtype(b);
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

int
engine_config_check(const llm_engine_config *c, char *err, size_t errlen)
{
	if (c->model_path == NULL || c->model_path[0] == '\0')
		snprintf(err, errlen, "no model file given");
	else if (c->n_threads < 0)
		snprintf(err, errlen, "n_threads must be >= 0 (0 = all online CPUs), not %d", c->n_threads);
	else if (c->n_ctx < 0)
		snprintf(err, errlen, "n_ctx must be >= 0 (0 = the model's context length), not %d", c->n_ctx);
	else if (c->block_size < 1)
		snprintf(err, errlen, "block_size must be at least 1, not %d", c->block_size);
	else if (c->kv_cache_bytes < 0)
		snprintf(err, errlen, "kv_cache_bytes must be >= 0 (0 = automatic), not %lld",
				 (long long) c->kv_cache_bytes);
	else if (c->max_batched_tokens < 1)
		snprintf(err, errlen, "max_batched_tokens must be at least 1, not %d", c->max_batched_tokens);
	else if (c->max_running < 1)
		snprintf(err, errlen, "max_running must be at least 1, not %d", c->max_running);
	else if (engine_config_kv_dtype(c) < 0)
		snprintf(err, errlen, "kv_cache_dtype must be \"f16\" or \"q8_0\", not \"%s\"", c->kv_cache_dtype);
	else
		return 0;
	return -1;
}

int
engine_config_resolve(llm_engine_config *c, const llm_model_config *mc, const llm_backend *b,
					  size_t block_bytes, char *err, size_t errlen)
{
	int64_t		n_blocks;

	if (c->device == NULL || strcmp(c->device, "auto") == 0)
		c->device = b->ops->name;
	/* what the backend runs: all CPUs for 0, 1 on a GPU */
	c->n_threads = b->n_threads;
	if (c->n_ctx == 0)
		c->n_ctx = mc->n_ctx_train;
	if (c->n_ctx < 2)
	{
		snprintf(err, errlen, "context length %d too small", c->n_ctx);
		return -1;
	}
	if (c->kv_cache_bytes == 0)
	{
		int64_t		want = (int64_t) c->max_running * c->n_ctx / c->block_size * (int64_t) block_bytes;

		c->kv_cache_bytes = want < AUTO_KV_CAP_BYTES ? want : AUTO_KV_CAP_BYTES;
	}
	n_blocks = c->kv_cache_bytes / (int64_t) block_bytes;
	if (n_blocks < 2)
	{
		snprintf(err, errlen, "KV cache budget of %lld bytes holds fewer than 2 blocks of %zu bytes",
				 (long long) c->kv_cache_bytes, block_bytes);
		return -1;
	}
	if (n_blocks > INT32_MAX)
	{
		snprintf(err, errlen, "KV cache budget of %lld bytes holds more than %d blocks",
				 (long long) c->kv_cache_bytes, INT32_MAX);
		return -1;
	}
	/* whole blocks: the resolved budget is what the pool holds */
	c->kv_cache_bytes = n_blocks * (int64_t) block_bytes;
	return 0;
}
