/*
 * test_prompt_size.c — a prompt that cannot fit the context is refused
 * from its size, before it is tokenized (engine.c, prompt_size_fits): the
 * bound llm_tokenizer_max_token_bytes holds for the vocabulary and for
 * real texts (never fewer tokens than bytes / bound), a prompt of
 * n_ctx x bound bytes is refused with PROMPT_TOO_LONG naming its bytes, and
 * one byte less still goes to the tokenizer (then refused by its count).
 */
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "engine/request.h"
#include "engine/text/tokenizer.h"
#include "model_path_test_util.h"
#include "unit.h"

static void
run(const char *model_path)
{
	llm_engine_config c;
	llm_engine *e;
	const llm_tokenizer *tok;
	char		err[512];
	int32_t		bound;
	const int	n_ctx = 64;
	static const char *const texts[] = {
		"Hello world", "                                ", "----------------------------------------",
		"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "日本語のテキスト",
		"\xe2\x96\x81\xe2\x96\x81 literal space markers", "0123456789012345678901234567890123456789",
	};

	printf("# %s\n", model_path);
	llm_engine_config_defaults(&c);
	c.model_path = model_path;
	c.n_threads = 1;
	c.n_ctx = n_ctx;
	c.kv_cache_bytes = 8 << 20;
	e = llm_engine_create(&c, err, sizeof(err));
	CHECK(e != NULL, "engine: %s", err);
	if (e == NULL)
		return;
	tok = llm_engine_tokenizer(e);
	bound = llm_tokenizer_max_token_bytes(tok);
	printf("# longest vocabulary string: %d bytes\n", bound);
	CHECK(bound >= 1 && bound < 4096, "a plausible bound: %d", bound);

	/* every token's text is at most the bound */
	{
		int32_t		worst = 0;

		for (int32_t id = 0; id < llm_tokenizer_n_vocab(tok); id++)
		{
			char	   *text = NULL;
			int64_t		n = llm_engine_detokenize(e, &id, 1, &text, err, sizeof(err));

			if (n > worst)
				worst = (int32_t) n;
			free(text);
		}
		CHECK(worst <= bound, "decoded tokens at most %d bytes (longest %d)", bound, worst);
	}
	/* a text of len bytes has at least len / bound tokens, for runs of one character too */
	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++)
	{
		for (int reps = 1; reps <= 64; reps *= 4)
		{
			size_t		one = strlen(texts[i]);
			char	   *buf = malloc(one * reps + 1);
			int32_t    *ids = NULL;
			int64_t		n;

			for (int r = 0; r < reps; r++)
				memcpy(buf + r * one, texts[i], one);
			buf[one * reps] = '\0';
			n = llm_engine_tokenize(e, buf, one * reps, &ids, err, sizeof(err));
			CHECK(n >= (int64_t) (one * reps / (size_t) bound),
				  "text %zu x %d: %lld tokens >= %zu bytes / %d", i, reps, (long long) n, one * reps, bound);
			free(ids);
			free(buf);
		}
	}
	/* n_ctx x bound bytes: refused from the size; one byte less: tokenized, refused by the count */
	{
		size_t		len = (size_t) n_ctx * (size_t) bound;
		char	   *big = malloc(len + 1);
		llm_request r;
		llm_status	st;

		memset(big, 'x', len);
		big[len] = '\0';
		llm_request_init(&r);
		r.prompt_kind = LLM_PROMPT_RAW;
		r.prompt = big;
		r.prompt_len = len;
		st = llm_engine_submit(e, 1, &r, NULL, err, sizeof(err));
		CHECK(st == LLM_ERR_PROMPT_TOO_LONG && strstr(err, " bytes does not fit") != NULL,
			  "n_ctx x bound bytes refused from the size: %s", err);
		r.prompt_kind = LLM_PROMPT_TEXT;
		r.system = big;
		r.system_len = len / 2;
		r.prompt_len = len - len / 2;
		st = llm_engine_submit(e, 2, &r, NULL, err, sizeof(err));
		CHECK(st == LLM_ERR_PROMPT_TOO_LONG && strstr(err, " bytes does not fit") != NULL,
			  "system + prompt counted together: %s", err);
		r.prompt_kind = LLM_PROMPT_RAW;
		r.system = NULL;
		r.system_len = 0;
		r.prompt_len = len - 1;
		st = llm_engine_submit(e, 3, &r, NULL, err, sizeof(err));
		CHECK(st == LLM_ERR_PROMPT_TOO_LONG && strstr(err, " tokens does not fit") != NULL,
			  "one byte less is tokenized and refused by its count: %s", err);
		free(big);
	}
	llm_engine_destroy(e);
}

int
main(void)
{
	const char *smol = getenv("LLM_TEST_MODEL");
	char		buf[4096];
	const char *gemma = gemma_path(buf, sizeof(buf));

	run(smol != NULL ? smol : "models/SmolLM2-135M-Instruct.Q4_1.gguf");
	if (access(gemma, R_OK) == 0)
		run(gemma);
	else
		SKIP("no Gemma 3 model at %s (make model MODEL=gemma3-270m)", gemma);
	return unit_done();
}
