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

#define AUTO_KV_CAP_BYTES			((int64_t) 1 << 30)
/* the KV cache may take at most this fraction of the physical memory */
#define KV_MAX_MEMORY_SHARE			0.5

/* config_list.h's rows at run time */
#define OPTION_NAME(x) #x,
#define ROW_OPTIONS(f, guc, cli, options, ...) static const char *const f##_options[] = {options(OPTION_NAME) NULL};
#define ROW_NONE(...)
LLM_ENGINE_SETTINGS(ROW_NONE, ROW_NONE, ROW_NONE, ROW_OPTIONS)

#define ROW_INT(f, guc_, cli_, def_, min_, max_, unit_, per_model_, range_, short_, long_) \
	{.field = #f, .offset = offsetof(llm_engine_config, f), .kind = LLM_SETTING_INT, .guc = guc_, .cli = cli_, \
	 .def = def_, .min = min_, .max = max_, .unit = LLM_SETTING_UNIT_##unit_, .scale = LLM_SETTING_SCALE_##unit_, \
	 .per_model = per_model_, .range = range_, .short_desc = short_, .long_desc = long_},
#define ROW_BOOL(f, guc_, cli_, def_, per_model_, short_, long_) \
	{.field = #f, .offset = offsetof(llm_engine_config, f), .kind = LLM_SETTING_BOOL, .guc = guc_, .cli = cli_, \
	 .def = def_, .min = 0, .max = 1, .scale = 1, .per_model = per_model_, .short_desc = short_, .long_desc = long_},
#define ROW_STR(f, guc_, cli_, short_, long_) \
	{.field = #f, .offset = offsetof(llm_engine_config, f), .kind = LLM_SETTING_STR, .guc = guc_, .cli = cli_, \
	 .scale = 1, .short_desc = short_, .long_desc = long_},
#define ROW_ENUM(f, guc_, cli_, options_, strict_, per_model_, range_, short_, long_) \
	{.field = #f, .offset = offsetof(llm_engine_config, f), .kind = LLM_SETTING_ENUM, .guc = guc_, .cli = cli_, \
	 .scale = 1, .options = f##_options, .strict = strict_, .per_model = per_model_, .range = range_, \
	 .short_desc = short_, .long_desc = long_},

const llm_setting llm_settings[LLM_N_SETTINGS] = {
	LLM_ENGINE_SETTINGS(ROW_INT, ROW_BOOL, ROW_STR, ROW_ENUM)
};

const llm_setting *
llm_setting_at(size_t offset)
{
	for (int i = 0; i < LLM_N_SETTINGS; i++)
		if (llm_settings[i].offset == offset)
			return &llm_settings[i];
	return NULL;
}

int64_t
llm_setting_get_int(const llm_engine_config *c, const llm_setting *s)
{
	const char *f = (const char *) c + s->offset;

	return s->unit == LLM_SETTING_UNIT_MB ? *(const int64_t *) f : *(const int *) f;
}

void
llm_setting_set_int(llm_engine_config *c, const llm_setting *s, int64_t v)
{
	char	   *f = (char *) c + s->offset;

	if (s->unit == LLM_SETTING_UNIT_MB)
		*(int64_t *) f = v;
	else
		*(int *) f = (int) v;
}

/* A STR or ENUM row's value, NULL read as the default ("" for STR, the first option for ENUM). */
static const char *
setting_str(const llm_engine_config *c, const llm_setting *s)
{
	const char *v = *(const char *const *) ((const char *) c + s->offset);

	return v != NULL ? v : s->kind == LLM_SETTING_ENUM ? s->options[0] : "";
}

void
llm_engine_config_defaults(llm_engine_config *c)
{
	memset(c, 0, sizeof(*c));
	for (int i = 0; i < LLM_N_SETTINGS; i++)
	{
		const llm_setting *s = &llm_settings[i];
		char	   *f = (char *) c + s->offset;

		switch (s->kind)
		{
			case LLM_SETTING_INT:
				llm_setting_set_int(c, s, s->def * s->scale);
				break;
			case LLM_SETTING_BOOL:
				*(bool *) f = s->def != 0;
				break;
			case LLM_SETTING_STR:
				*(const char **) f = NULL;
				break;
			case LLM_SETTING_ENUM:
				*(const char **) f = s->options[0];
				break;
		}
	}
}

bool
llm_engine_config_equal(const llm_engine_config *a, const llm_engine_config *b)
{
	for (int i = 0; i < LLM_N_SETTINGS; i++)
	{
		const llm_setting *s = &llm_settings[i];

		switch (s->kind)
		{
			case LLM_SETTING_INT:
				if (llm_setting_get_int(a, s) != llm_setting_get_int(b, s))
					return false;
				break;
			case LLM_SETTING_BOOL:
				if (*(const bool *) ((const char *) a + s->offset) != *(const bool *) ((const char *) b + s->offset))
					return false;
				break;
			case LLM_SETTING_STR:
			case LLM_SETTING_ENUM:
				if (strcmp(setting_str(a, s), setting_str(b, s)) != 0)
					return false;
				break;
		}
	}
	return true;
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

/* Whether a range text prints the maximum too (its second %lld). */
static bool
range_names_max(const char *range)
{
	const char *first = strstr(range, "%lld");

	return first != NULL && strstr(first + 1, "%lld") != NULL;
}

/* "<field> must be <range>, not <v>" (or "at most <max>" above a range that does not name it); -1 */
static int
out_of_range(const llm_setting *s, int64_t v, size_t *field, char *err, size_t errlen)
{
	long long	lo = (long long) (s->min * s->scale);
	long long	hi = (long long) (s->max * s->scale);
	size_t		n;

	*field = s->offset;
	n = (size_t) snprintf(err, errlen, "%s must be ", s->field);
	if (n >= errlen)
		return -1;
	if (v > hi && !range_names_max(s->range))
		n += (size_t) snprintf(err + n, errlen - n, "at most %lld", hi);
	else
		n += (size_t) snprintf(err + n, errlen - n, s->range, lo, hi);
	if (n < errlen)
		snprintf(err + n, errlen - n, ", not %lld", (long long) v);
	return -1;
}

/* Whether name is one of options (NULL-terminated). */
static bool
is_option(const char *const *options, const char *name)
{
	for (; *options != NULL; options++)
		if (strcmp(*options, name) == 0)
			return true;
	return false;
}

int
engine_config_check(const llm_engine_config *c, size_t *field, char *err, size_t errlen)
{
	if (c->model_path == NULL || c->model_path[0] == '\0')
		BAD(model_path, "no model file given");
	for (int i = 0; i < LLM_N_SETTINGS; i++)
	{
		const llm_setting *s = &llm_settings[i];

		if (s->kind == LLM_SETTING_INT)
		{
			int64_t		v = llm_setting_get_int(c, s);

			if (v < s->min * s->scale || v > s->max * s->scale)
				return out_of_range(s, v, field, err, errlen);
		}
		else if (s->kind == LLM_SETTING_ENUM && s->strict)
		{
			const char *v = *(const char *const *) ((const char *) c + s->offset);

			if (v != NULL && !is_option(s->options, v))
			{
				*field = s->offset;
				snprintf(err, errlen, "%s must be %s, not \"%s\"", s->field, s->range, v);
				return -1;
			}
		}
	}
	/* chat_template: a family name, or a template (text or path) the load compiles */
	if (c->chat_template != NULL && llm_chat_source_of(c->chat_template) == LLM_CHAT_SOURCE_NAME &&
		!is_option(llm_setting_at(offsetof(llm_engine_config, chat_template))->options, c->chat_template))
		BAD(chat_template, "chat_template must be %s, not \"%s\"",
			llm_setting_at(offsetof(llm_engine_config, chat_template))->range, c->chat_template);
	/* a context between 0 (the model's) and one that holds a chat turn has no use */
	if (c->n_ctx > 0 && c->n_ctx < LLM_MIN_N_CTX)
		return out_of_range(llm_setting_at(offsetof(llm_engine_config, n_ctx)), c->n_ctx, field, err, errlen);
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
