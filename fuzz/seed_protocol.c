/*
 * seed_protocol.c — writes the protocol target's seed corpus: one message
 * of every kind (SUBMIT with each prompt kind and mode, TOKENIZE,
 * DETOKENIZE, ABORT, TEXT, DONE with scores, ERROR, TOKENS), encoded by
 * the real encoder (channel/protocol.c) into fuzz/corpus/protocol/.
 * Built and run by `make fuzz-seeds`; deterministic.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "channel/protocol.h"

static int	failed;

static void
put(const char *name, const llm_wire_msg *m)
{
	size_t		n = llm_wire_encode(m, NULL, 0);
	unsigned char *buf = malloc(n ? n : 1);
	char		path[256];
	FILE	   *f;

	if (n == 0 || llm_wire_encode(m, buf, n) != n)
	{
		fprintf(stderr, "seed_protocol: %s does not encode\n", name);
		failed = 1;
		free(buf);
		return;
	}
	snprintf(path, sizeof(path), "fuzz/corpus/protocol/%s", name);
	f = fopen(path, "wb");
	if (f == NULL || fwrite(buf, 1, n, f) != n || fclose(f) != 0)
	{
		fprintf(stderr, "seed_protocol: cannot write %s\n", path);
		failed = 1;
	}
	free(buf);
}

int
main(void)
{
	static const char *const stops[] = {"\n\n", "END"};
	static const llm_chat_message msgs[] = {{"system", "Be brief.", 9}, {"user", "Hi", 2}, {"assistant", "Hello", 5}};
	static const char *const conts[] = {"yes", "no"};
	static const size_t cont_lens[] = {3, 2};
	static const int32_t ids[] = {1, 2, 3, 49151, 190};
	static const double scores[] = {-1.5, -0.25};
	llm_wire_msg m;

	memset(&m, 0, sizeof(m));
	m.kind = LLM_WIRE_SUBMIT;
	m.id = 42;
	llm_request_init(&m.request);
	m.request.prompt = "What is 2+2?";
	m.request.prompt_len = strlen(m.request.prompt);
	put("submit_text_defaults", &m);
	m.request.system = "You are terse.";
	m.request.system_len = strlen(m.request.system);
	m.request.params.max_tokens = 17;
	m.request.params.temperature = 0.7;
	m.request.params.top_p = 0.9;
	m.request.params.top_k = 40;
	m.request.params.min_p = 0.05;
	m.request.params.repetition_penalty = 1.1;
	m.request.params.has_seed = true;
	m.request.params.seed = 7;
	m.request.params.n_stop = 2;
	m.request.params.stop = stops;
	m.request.params.cache_salt = 16384;
	put("submit_text_options", &m);
	m.request.system = NULL;
	m.request.system_len = 0;
	m.request.prompt_kind = LLM_PROMPT_RAW;
	put("submit_raw", &m);
	m.request.prompt = NULL;
	m.request.prompt_len = 0;
	m.request.prompt_kind = LLM_PROMPT_MESSAGES;
	m.request.messages = msgs;
	m.request.n_messages = 3;
	put("submit_messages", &m);
	m.request.messages = NULL;
	m.request.n_messages = 0;
	m.request.prompt_kind = LLM_PROMPT_TOKENS;
	m.request.tokens = ids;
	m.request.n_tokens = 5;
	m.request.mode = LLM_MODE_SCORE;
	m.request.continuations = conts;
	m.request.continuation_lens = cont_lens;
	m.request.n_continuations = 2;
	m.request.continuation_eot = true;
	put("submit_score_tokens", &m);
	m.request.mode = LLM_MODE_EMBED;
	m.request.continuations = NULL;
	m.request.continuation_lens = NULL;
	m.request.n_continuations = 0;
	m.request.continuation_eot = false;
	m.request.pooling = LLM_POOLING_LAST;
	put("submit_embed_tokens", &m);

	memset(&m, 0, sizeof(m));
	m.id = 43;
	m.kind = LLM_WIRE_TOKENIZE;
	m.text = "Hello, world";
	m.text_len = strlen(m.text);
	put("tokenize", &m);
	m.text = NULL;
	m.text_len = 0;
	m.kind = LLM_WIRE_DETOKENIZE;
	m.ids = ids;
	m.n_ids = 5;
	put("detokenize", &m);
	m.kind = LLM_WIRE_TOKENS;
	put("tokens", &m);
	m.ids = NULL;
	m.n_ids = 0;
	m.kind = LLM_WIRE_ABORT;
	put("abort", &m);
	m.kind = LLM_WIRE_TEXT;
	m.text = "a\0b delta";
	m.text_len = 9;
	put("text", &m);
	m.kind = LLM_WIRE_ERROR;
	m.text = "prompt too long";
	m.text_len = strlen(m.text);
	m.sqlstate = 0x1234;
	put("error", &m);
	m.text = NULL;
	m.text_len = 0;
	m.sqlstate = 0;
	m.kind = LLM_WIRE_DONE;
	m.finish_reason = LLM_FINISH_LENGTH;
	m.usage.prompt_tokens = 39;
	m.usage.cached_tokens = 32;
	m.usage.completion_tokens = 5;
	m.usage.ttft_ms = 12.5;
	m.usage.total_ms = 40.25;
	m.scores = scores;
	m.n_scores = 2;
	put("done_scores", &m);
	{
		static const float vec[6] = {0.5f, -1.25f, 3.0e-8f, -0.0f, 1.0e30f, 42.0f};

		m.kind = LLM_WIRE_VECTOR;
		m.finish_reason = LLM_FINISH_NONE;
		m.scores = NULL;
		m.n_scores = 0;
		m.usage.completion_tokens = 0;
		m.vector = vec;
		m.n_vector = 6;
		put("vector", &m);
	}
	return failed;
}
