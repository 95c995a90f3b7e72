/*
 * test_config_list.c — the engine's settings list (config_list.h) drives
 * its configuration: llm_engine_config_defaults gives every row's default,
 * within the row's bounds, and a configuration of defaults passes the
 * check; llm_engine_config_equal tells apart a change of any row (so a new
 * row is compared on reload without more code); every INT row refuses one
 * below its minimum and one above its maximum, naming its field; the
 * messages are the texts drivers and tests know; a strict ENUM row's
 * options are the names the engine's code that reads it understands; and
 * names, flags and fields are each one row's.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/engine.h"
#include "unit.h"

static llm_engine_config
base(const char *model)
{
	llm_engine_config c;

	llm_engine_config_defaults(&c);
	c.model_path = model;
	return c;
}

static char *
field_of(llm_engine_config *c, const llm_setting *s)
{
	return (char *) c + s->offset;
}

/* check_config of c: its error in err, the field at fault in *field; 0 or -1 */
static int
check(const llm_engine_config *c, size_t *field, char *err, size_t errlen)
{
	err[0] = '\0';
	*field = 12345;
	return llm_engine_check_config(c, NULL, field, err, errlen);
}

/* c refused with exactly the message want, at field */
static void
refused_as(const char *what, const llm_engine_config *c, size_t want_field, const char *want)
{
	char		err[512];
	size_t		field;
	int			rc = check(c, &field, err, sizeof(err));

	CHECK(rc == -1 && field == want_field && strcmp(err, want) == 0,
		  "%s: \"%s\" (want \"%s\")", what, err, want);
}

static void
defaults(void)
{
	llm_engine_config c;

	llm_engine_config_defaults(&c);
	for (int i = 0; i < LLM_N_SETTINGS; i++)
	{
		const llm_setting *s = &llm_settings[i];
		char	   *f = field_of(&c, s);

		switch (s->kind)
		{
			case LLM_SETTING_INT:
				CHECK(llm_setting_get_int(&c, s) == s->def * s->scale && s->min <= s->def && s->def <= s->max,
					  "%s: default %lld within [%lld, %lld]", s->field, (long long) s->def,
					  (long long) s->min, (long long) s->max);
				break;
			case LLM_SETTING_BOOL:
				CHECK(*(bool *) f == (s->def != 0), "%s: default %s", s->field, s->def ? "true" : "false");
				break;
			case LLM_SETTING_STR:
				CHECK(*(const char **) f == NULL, "%s: no default", s->field);
				break;
			case LLM_SETTING_ENUM:
				CHECK(*(const char **) f != NULL && strcmp(*(const char **) f, s->options[0]) == 0,
					  "%s: default %s, the first option", s->field, s->options[0]);
				break;
		}
	}
}

static void
equality(void)
{
	llm_engine_config a,
				b;

	llm_engine_config_defaults(&a);
	b = a;
	CHECK(llm_engine_config_equal(&a, &b), "defaults equal defaults");
	for (int i = 0; i < LLM_N_SETTINGS; i++)
	{
		const llm_setting *s = &llm_settings[i];

		b = a;
		switch (s->kind)
		{
			case LLM_SETTING_INT:
				llm_setting_set_int(&b, s, llm_setting_get_int(&a, s) + 1);
				break;
			case LLM_SETTING_BOOL:
				*(bool *) field_of(&b, s) = !*(bool *) field_of(&a, s);
				break;
			case LLM_SETTING_STR:
			case LLM_SETTING_ENUM:
				*(const char **) field_of(&b, s) = s->kind == LLM_SETTING_ENUM && s->options[1] ? s->options[1] : "x";
				break;
		}
		CHECK(!llm_engine_config_equal(&a, &b) && !llm_engine_config_equal(&b, &a),
			  "%s: a change makes the configurations differ", s->field);
		if (s->kind == LLM_SETTING_STR || s->kind == LLM_SETTING_ENUM)
		{
			b = a;
			*(const char **) field_of(&b, s) = NULL;
			*(const char **) field_of(&a, s) = s->kind == LLM_SETTING_ENUM ? s->options[0] : "";
			CHECK(llm_engine_config_equal(&a, &b), "%s: NULL equals %s", s->field,
				  s->kind == LLM_SETTING_ENUM ? s->options[0] : "\"\"");
			llm_engine_config_defaults(&a);
		}
	}
}

static void
ranges(const char *model)
{
	char		err[512];
	char		want[64];
	size_t		field;

	for (int i = 0; i < LLM_N_SETTINGS; i++)
	{
		const llm_setting *s = &llm_settings[i];
		llm_engine_config c;

		if (s->kind != LLM_SETTING_INT)
			continue;
		snprintf(want, sizeof(want), "%s must be ", s->field);
		c = base(model);
		llm_setting_set_int(&c, s, s->min * s->scale - 1);
		CHECK(check(&c, &field, err, sizeof(err)) == -1 && field == s->offset && strncmp(err, want, strlen(want)) == 0,
			  "%s: %lld refused: %s", s->field, (long long) (s->min * s->scale - 1), err);
		c = base(model);
		llm_setting_set_int(&c, s, s->max * s->scale + 1);
		CHECK(check(&c, &field, err, sizeof(err)) == -1 && field == s->offset && strncmp(err, want, strlen(want)) == 0,
			  "%s: %lld refused: %s", s->field, (long long) (s->max * s->scale + 1), err);
	}
}

/* The messages the engine gave before its checks came from the list, word for word. */
static void
messages(const char *model)
{
	llm_engine_config c;

#define AT(f) offsetof(llm_engine_config, f)
	c = base(NULL);
	refused_as("no model", &c, AT(model_path), "no model file given");
	c = base(model);
	c.n_threads = -1;
	refused_as("threads", &c, AT(n_threads), "n_threads must be >= 0 (0 = all online CPUs), not -1");
	c = base(model);
	c.n_ctx = -1;
	refused_as("negative context", &c, AT(n_ctx),
			   "n_ctx must be 0 (the model's context length) or at least 16, not -1");
	c = base(model);
	c.n_ctx = LLM_MIN_N_CTX - 1;
	refused_as("short context", &c, AT(n_ctx),
			   "n_ctx must be 0 (the model's context length) or at least 16, not 15");
	c = base(model);
	c.block_size = 0;
	refused_as("block size", &c, AT(block_size), "block_size must be at least 1, not 0");
	c = base(model);
	c.kv_cache_bytes = -1;
	refused_as("KV bytes", &c, AT(kv_cache_bytes), "kv_cache_bytes must be >= 0 (0 = automatic), not -1");
	c = base(model);
	c.max_running = 0;
	refused_as("running", &c, AT(max_running), "max_running must be at least 1, not 0");
	c = base(model);
	c.reserved_interactive = -2;
	refused_as("reserved", &c, AT(reserved_interactive),
			   "reserved_interactive must be >= 0 (-1 = automatic), not -2");
	c = base(model);
	c.interactive_step_tokens = -2;
	refused_as("interactive step", &c, AT(interactive_step_tokens),
			   "interactive_step_tokens must be >= -1 (-1 = automatic, 0 = no cap), not -2");
	c = base(model);
	c.prefill_cap = -1;
	refused_as("prefill cap", &c, AT(prefill_cap), "prefill_cap must be >= 0 (0 = no cap), not -1");
	c = base(model);
	c.spec_tokens = LLM_SPEC_MAX_TOKENS + 1;
	refused_as("spec above", &c, AT(spec_tokens), "spec_tokens must be in [0, 16] (0 = off), not 17");
	c = base(model);
	c.spec_tokens = -1;
	refused_as("spec below", &c, AT(spec_tokens), "spec_tokens must be in [0, 16] (0 = off), not -1");
	c = base(model);
	c.batch_step_ms = -1;
	refused_as("step ms", &c, AT(batch_step_ms), "batch_step_ms must be >= 0 (0 = no cap), not -1");
	c = base(model);
	c.interactive_step_slowdown = -1;
	refused_as("slowdown", &c, AT(interactive_step_slowdown),
			   "interactive_step_slowdown must be >= 0 (percent), not -1");
	c = base(model);
	c.chat_template = "llama";
	refused_as("chat template", &c, AT(chat_template),
			   "chat_template must be auto, none, chatml, gemma, a Jinja template or an absolute path to one, "
			   "not \"llama\"");
	c = base(model);
	c.chat_template = "templates/fixed.jinja";
	refused_as("chat template relative path", &c, AT(chat_template),
			   "chat_template must be auto, none, chatml, gemma, a Jinja template or an absolute path to one, "
			   "not \"templates/fixed.jinja\"");
	{
		char		err[512];
		size_t		field;

		/* a template given as text or as an absolute path passes the check; the load compiles it */
		c = base(model);
		c.chat_template = "{% for m in messages %}{{ m.content }}{% endfor %}";
		CHECK(check(&c, &field, err, sizeof(err)) == 0, "an inline chat template passes the check (%s)", err);
		{
			char		path[] = "/tmp/test_config_list_XXXXXX";
			int			fd = mkstemp(path);
			const char *src = "{% for m in messages %}{{ m.content }}\n{% endfor %}";

			CHECK(fd >= 0 && write(fd, src, strlen(src)) == (ssize_t) strlen(src), "write a template file");
			if (fd >= 0)
				close(fd);
			c.chat_template = path;
			CHECK(check(&c, &field, err, sizeof(err)) == 0, "a chat template path passes the check (%s)", err);
			unlink(path);
			CHECK(check(&c, &field, err, sizeof(err)) == -1 && field == AT(chat_template) &&
				  strstr(err, "could not open chat template file") != NULL,
				  "a missing chat template file is the setting's fault (%s)", err);
			/* a FIFO without a writer: refused at once, not waited on (the worker would stall) */
			CHECK(mkfifo(path, 0600) == 0, "make a FIFO");
			CHECK(check(&c, &field, err, sizeof(err)) == -1 && field == AT(chat_template) &&
				  strstr(err, "is not a regular file") != NULL,
				  "a FIFO as the chat template file is refused (%s)", err);
			unlink(path);
		}
		c.chat_template = "{% for m in messages %}{{ m.content }}{% endif %}";
		CHECK(check(&c, &field, err, sizeof(err)) == -1 && field == AT(chat_template) &&
			  strstr(err, "1:42") != NULL,
			  "a template outside the subset is refused with line:column (%s)", err);
	}
	c = base(model);
	c.kv_cache_dtype = "q4_0";
	refused_as("KV type", &c, AT(kv_cache_dtype), "kv_cache_dtype must be \"f16\" or \"q8_0\", not \"q4_0\"");
	/* above a maximum the old checks did not have */
	c = base(model);
	c.block_size = 1025;
	refused_as("block size above", &c, AT(block_size), "block_size must be at most 1024, not 1025");
#undef AT
}

static void
options(const char *model)
{
	const llm_setting *ct = llm_setting_at(offsetof(llm_engine_config, chat_template));
	const llm_setting *kv = llm_setting_at(offsetof(llm_engine_config, kv_cache_dtype));
	char		err[512];
	size_t		field;

	/* every family the chat template code knows is an option, and every option but auto is one */
	for (int fam = LLM_CHAT_NONE; fam <= LLM_CHAT_GEMMA; fam++)
	{
		bool		listed = false;

		for (const char *const *o = ct->options; *o != NULL; o++)
			listed |= strcmp(*o, llm_chat_family_name((llm_chat_family) fam)) == 0;
		CHECK(listed, "chat template family %s is an option", llm_chat_family_name((llm_chat_family) fam));
	}
	for (const char *const *o = ct->options + 1; *o != NULL; o++)
	{
		llm_chat_family fam;

		CHECK(llm_chat_family_parse(*o, &fam), "chat_template option %s is a family", *o);
	}
	/* every KV type option builds (the CPU backend has them all) */
	for (const char *const *o = kv->options; *o != NULL; o++)
	{
		llm_engine_config c = base(model);

		c.kv_cache_dtype = *o;
		c.kv_cache_bytes = 8 << 20;
		c.n_threads = 1;
		CHECK(check(&c, &field, err, sizeof(err)) == 0, "kv_cache_dtype option %s passes: %s", *o, err);
	}
	{
		llm_engine_config c = base(model);

		c.kv_cache_bytes = 8 << 20;
		c.n_threads = 1;
		CHECK(check(&c, &field, err, sizeof(err)) == 0, "the defaults pass the check: %s", err);
	}
}

static void
one_row_each(void)
{
	for (int i = 0; i < LLM_N_SETTINGS; i++)
	{
		const llm_setting *s = &llm_settings[i];
		bool		unique = llm_setting_at(s->offset) == s;

		for (int j = 0; j < i; j++)
		{
			const llm_setting *t = &llm_settings[j];

			unique &= strcmp(s->field, t->field) != 0;
			unique &= s->guc == NULL || t->guc == NULL || strcmp(s->guc, t->guc) != 0;
			unique &= s->cli == NULL || t->cli == NULL || strcmp(s->cli, t->cli) != 0;
		}
		CHECK(unique && (s->guc == NULL || strncmp(s->guc, "llm.", 4) == 0) &&
			  (!s->per_model || (s->guc != NULL && s->kind != LLM_SETTING_STR)) &&
			  (s->kind != LLM_SETTING_INT || s->range != NULL) &&
			  (s->kind != LLM_SETTING_ENUM || !s->strict || s->range != NULL),
			  "%s: its own field, GUC and flag; per-model only with a GUC", s->field);
	}
}

int
main(void)
{
	const char *model = getenv("LLM_TEST_MODEL");

	if (model == NULL)
		model = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
	defaults();
	equality();
	ranges(model);
	messages(model);
	options(model);
	one_row_each();
	return unit_done();
}
