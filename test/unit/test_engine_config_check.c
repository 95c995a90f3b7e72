/*
 * test_engine_config_check.c — llm_engine_check_config: a configuration
 * checked without loading weights or a KV cache, each failure naming its
 * setting (the llm_engine_config field a driver maps to its own name); the
 * same field from llm_engine_create_ex; and LLM_MIN_N_CTX, the shortest
 * context a configuration may name, holds a chat turn of either template
 * family plus one generated token.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/engine.h"
#include "engine/request.h"
#include "model_path_test_util.h"
#include "unit.h"

#define AT(f) offsetof(llm_engine_config, f)

static llm_engine_config
base(const char *model)
{
	llm_engine_config c;

	llm_engine_config_defaults(&c);
	c.model_path = model;
	c.n_threads = 1;
	c.kv_cache_bytes = 8 << 20;
	return c;
}

/* check_config on c fails at field want, err containing what */
static void
refused(const char *name, const llm_engine_config *c, size_t want, const char *what)
{
	char		err[512] = "";
	size_t		field = 12345;
	int			rc = llm_engine_check_config(c, NULL, &field, err, sizeof(err));

	CHECK(rc == -1 && field == want && strstr(err, what) != NULL,
		  "%s: refused at field %zu (want %zu): %s", name, field, want, err);
}

/* The chat prompt "hi" plus one token fits LLM_MIN_N_CTX under template family fam. */
static void
min_context_fits(const char *model, const char *fam)
{
	llm_engine_config c = base(model);
	llm_engine *e;
	llm_request r;
	int32_t    *ids = NULL;
	int64_t		n;
	char		err[512] = "";

	c.n_ctx = LLM_MIN_N_CTX;
	c.chat_template = fam;
	e = llm_engine_create(&c, err, sizeof(err));
	CHECK(e != NULL, "%s: an engine with a context of %d: %s", fam, LLM_MIN_N_CTX, err);
	if (e == NULL)
		return;
	llm_request_init(&r);
	r.prompt_kind = LLM_PROMPT_TEXT;
	r.prompt = "hi";
	r.prompt_len = 2;
	r.params.max_tokens = 1;
	n = llm_engine_prompt_ids(e, &r, &ids, err, sizeof(err));
	CHECK(n > 0 && n + 1 <= LLM_MIN_N_CTX, "%s: the chat prompt \"hi\" is %lld tokens, + 1 within %d",
		  fam, (long long) n, LLM_MIN_N_CTX);
	{
		llm_status	st = llm_engine_submit(e, 1, &r, NULL, err, sizeof(err));

		CHECK(st == LLM_OK, "%s: and is accepted (%s)", fam, llm_status_name(st));
	}
	free(ids);
	llm_engine_destroy(e);
}

int
main(void)
{
	const char *smol = getenv("LLM_TEST_MODEL");
	char		buf[4096];
	const char *gemma = gemma_path(buf, sizeof(buf));
	llm_engine_config c;
	llm_engine_config resolved;
	size_t		field = 0;
	char		err[512] = "";
	llm_engine *e;

	if (smol == NULL)
		smol = "models/SmolLM2-135M-Instruct.Q4_1.gguf";

	/* a valid configuration: resolved as llm_engine_create resolves it */
	c = base(smol);
	CHECK(llm_engine_check_config(&c, &resolved, &field, err, sizeof(err)) == 0 && field == LLM_CONFIG_NO_FIELD,
		  "valid configuration passes: %s", err);
	e = llm_engine_create(&c, err, sizeof(err));
	CHECK(e != NULL, "and creates: %s", err);
	if (e != NULL)
	{
		llm_engine_config got;

		llm_engine_get_config(e, &got);
		CHECK(resolved.kv_cache_bytes == got.kv_cache_bytes && resolved.n_ctx == got.n_ctx &&
			  strcmp(resolved.device, got.device) == 0,
			  "resolved like the engine: %lld KV bytes, context %d, device %s",
			  (long long) resolved.kv_cache_bytes, resolved.n_ctx, resolved.device);
		CHECK(resolved.model_path == c.model_path, "strings are the caller's");
		llm_engine_destroy(e);
	}

	/* each failure names its setting */
	c = base("/nonexistent/model.gguf");
	refused("missing file", &c, AT(model_path), "/nonexistent/model.gguf");
	c = base(smol);
	c.chat_template = "gemma";
	refused("Gemma template on a ChatML vocabulary", &c, AT(chat_template), "");
	c = base(smol);
	c.kv_cache_bytes = (int64_t) 1 << 40;
	refused("1 TB KV cache", &c, AT(kv_cache_bytes), "more than half of the physical memory");
	c = base(smol);
	c.block_size = 1024;
	c.kv_cache_bytes = 32 << 20;
	refused("one block of KV cache", &c, AT(kv_cache_bytes), "fewer than 2 blocks");
	c = base(smol);
	c.n_ctx = LLM_MIN_N_CTX - 1;
	refused("context below the minimum", &c, AT(n_ctx), "at least");
	c = base(smol);
	c.max_running = 0;
	refused("no running slot", &c, AT(max_running), "max_running");
	c = base(smol);
	c.kv_cache_dtype = "q4_0";
	refused("unknown KV type", &c, AT(kv_cache_dtype), "q4_0");
	if (access("/dev/nvidia0", F_OK) == 0)
		SKIP("a GPU is present: device cuda is valid here");
	else
	{
		c = base(smol);
		c.device = "cuda";
		refused("CUDA without a GPU", &c, AT(device), "");
	}

	/* llm_engine_create_ex names the same field */
	c = base(smol);
	c.chat_template = "gemma";
	field = 0;
	e = llm_engine_create_ex(&c, &field, err, sizeof(err));
	CHECK(e == NULL && field == AT(chat_template), "create_ex: the chat template named: %s", err);
	llm_engine_destroy(e);

	/* the shortest context holds a chat turn and one token */
	min_context_fits(smol, "chatml");
	if (access(gemma, R_OK) == 0)
		min_context_fits(gemma, "gemma");
	else
		SKIP("no Gemma 3 model at %s (make model MODEL=gemma3-270m)", gemma);
	return unit_done();
}
