/*
 * prompt.c — prompts to token ids, the one place: plain text through the
 * tokenizer, messages through the chat template, raw text with special
 * tokens parsed; token ids back to text.  Reads only the engine's
 * read-only tokenizer, chat template and end_of_turn, so the tokenizer
 * thread runs it too.
 */
#define _GNU_SOURCE
#include "engine_internal.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>

#include "backend_loader.h"
#include "kernels/cpu/backend_cpu.h"
#include "engine/grammar/json_min.h"
#include "kernels/quant_types.h"
#include "engine/text/vocab_file.h"

/* ---------- prompts to token ids ---------- */

int64_t
llm_engine_tokenize(const llm_engine *e, const char *text, size_t len, int32_t **ids_out,
					char *err, size_t errlen)
{
	return llm_tokenize_alloc(e->tok, text, len, ids_out, err, errlen);
}

/* What a request passes the chat template besides its messages. */
static llm_chat_options
chat_options(const llm_request *req)
{
	llm_chat_options o = LLM_CHAT_OPTIONS_DEFAULT;

	o.add_generation_prompt = !req->no_generation_prompt;
	o.tools_json = req->tools;
	o.tools_len = req->tools_len;
	o.enable_thinking = req->thinking == 0 ? -1 : req->thinking > 0 ? 1 : 0;
	return o;
}

/* A TEXT prompt's messages: the system message (if any), then the user's. */
static int
text_messages(const llm_request *req, llm_chat_message msgs[2])
{
	int			n = 0;

	if (req->system != NULL)
	{
		msgs[n].role = "system";
		msgs[n].content = req->system;
		msgs[n].content_len = req->system_len;
		n++;
	}
	msgs[n].role = "user";
	msgs[n].content = req->prompt;
	msgs[n].content_len = req->prompt_len;
	return n + 1;
}

/* Render messages with the chat template into a malloc'd id array. */
static int64_t
render_chat(const llm_engine *e, const llm_chat_message *msgs, int n_msgs, const llm_chat_options *o,
			int32_t **ids_out, char *err, size_t errlen)
{
	return llm_chat_apply_alloc(&e->chat, e->tok, msgs, n_msgs, o, ids_out, err, errlen);
}

/*
 * A raw prompt's ids: its text tokenized, after the BOS when the model's
 * tokenizer wants one (llm_tokenizer_add_bos: Gemma yes, SmolLM2 no), as
 * llama.cpp's tokenization with add_special gives a prompt.  Only here: text
 * tokenized for llm_tokenize() or as a scoring continuation stays BOS-free.
 */
static int64_t
raw_prompt_ids(const llm_engine *e, const char *text, size_t len, int32_t **ids_out, char *err, size_t errlen)
{
	int64_t		n = llm_engine_tokenize(e, text, len, ids_out, err, errlen);
	int32_t    *more;

	if (n < 0 || !llm_tokenizer_add_bos(e->tok))
		return n;
	more = realloc(*ids_out, (size_t) (n + 1) * sizeof(int32_t));
	if (more == NULL)
	{
		free(*ids_out);
		*ids_out = NULL;
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	memmove(more + 1, more, (size_t) n * sizeof(int32_t));
	more[0] = llm_tokenizer_bos(e->tok);
	*ids_out = more;
	return n + 1;
}

/*
 * An EMBED request's raw prompt: its text with the special tokens
 * llama.cpp's add_special adds (llm_tokenize_special: BERT's [CLS] text
 * [SEP], a decoder's BOS), which is what the embedding model was trained
 * on and what sentence-transformers and llama-embedding feed it.
 */
static int64_t
embed_prompt_ids(const llm_engine *e, const char *text, size_t len, int32_t **ids_out, char *err, size_t errlen)
{
	int64_t		cap = (int64_t) len + 8;
	int32_t    *ids = malloc((size_t) cap * sizeof(int32_t));
	int64_t		n;

	*ids_out = NULL;
	if (ids == NULL)
	{
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	n = llm_tokenize_special(e->tok, text, len, ids, cap, err, errlen);
	if (n > cap)
	{
		int32_t    *more = realloc(ids, (size_t) n * sizeof(int32_t));

		if (more == NULL)
		{
			free(ids);
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		ids = more;
		n = llm_tokenize_special(e->tok, text, len, ids, n, err, errlen);
	}
	if (n < 0)
	{
		free(ids);
		return -1;
	}
	*ids_out = ids;
	return n;
}

/* The prompt of a validated req as token ids (malloc'd); -1 + err. */
int64_t
engine_prompt_ids(const llm_engine *e, const llm_request *req, int32_t **ids, char *err, size_t errlen)
{
	/*
	 * An embedding model has no chat: a text is tokenized as it is embedded
	 * (what llm_count_tokens counts; a generation request is refused at
	 * submission, naming the model's kind rather than its template).
	 */
	if (e->mc->no_output && req->prompt_kind == LLM_PROMPT_TEXT)
		return embed_prompt_ids(e, req->prompt, req->prompt_len, ids, err, errlen);
	if (e->mc->no_output && req->prompt_kind == LLM_PROMPT_MESSAGES)
	{
		*ids = NULL;
		snprintf(err, errlen, "the model is an embedding model (%s): it has no chat, it only embeds", e->mc->arch);
		return -1;
	}
	switch (req->prompt_kind)
	{
		case LLM_PROMPT_RAW:
			if (req->mode == LLM_MODE_EMBED || e->mc->no_output)
				return embed_prompt_ids(e, req->prompt, req->prompt_len, ids, err, errlen);
			return raw_prompt_ids(e, req->prompt, req->prompt_len, ids, err, errlen);
		case LLM_PROMPT_TEXT:
			{
				llm_chat_message msgs[2];
				int			n = text_messages(req, msgs);
				llm_chat_options o = chat_options(req);

				return render_chat(e, msgs, n, &o, ids, err, errlen);
			}
		case LLM_PROMPT_MESSAGES:
			{
				llm_chat_options o = chat_options(req);

				return render_chat(e, req->messages, req->n_messages, &o, ids, err, errlen);
			}
		case LLM_PROMPT_TOKENS:
			*ids = malloc((size_t) req->n_tokens * sizeof(int32_t));
			if (*ids == NULL)
			{
				snprintf(err, errlen, "out of memory");
				return -1;
			}
			memcpy(*ids, req->tokens, (size_t) req->n_tokens * sizeof(int32_t));
			return req->n_tokens;
	}
	*ids = NULL;
	snprintf(err, errlen, "unknown prompt kind");
	return -1;
}

int64_t
llm_engine_prompt_ids(const llm_engine *e, const llm_request *req, int32_t **ids,
					  char *err, size_t errlen)
{
	int64_t		n;

	*ids = NULL;
	if (llm_request_validate(req, err, errlen) != LLM_OK)
		return -1;
	err[0] = '\0';
	n = engine_prompt_ids(e, req, ids, err, errlen);
	if (n < 0 && err[0] == '\0')
		snprintf(err, errlen, "could not tokenize the prompt");
	return n;
}

int64_t
llm_engine_detokenize(const llm_engine *e, const int32_t *ids, int32_t n, char **text_out,
					  char *err, size_t errlen)
{
	int32_t		nvocab = llm_tokenizer_n_vocab(e->tok);
	size_t		cap = 256,
				len = 0;
	char	   *text = malloc(cap);
	llm_detok	dt;
	char		buf[256];
	int			w;

	*text_out = NULL;
	if (text == NULL)
	{
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	llm_detok_init(&dt);
	for (int32_t i = 0; i <= n; i++)
	{
		if (i < n)
		{
			if (ids[i] < 0 || ids[i] >= nvocab ||
				(w = llm_detok_push(e->tok, &dt, ids[i], buf, sizeof(buf))) < 0)
			{
				snprintf(err, errlen, "token id %d is out of range (vocabulary size %d)", ids[i], nvocab);
				free(text);
				return -1;
			}
		}
		else
			w = llm_detok_flush(&dt, buf, sizeof(buf));
		if (len + (size_t) w + 1 > cap)
		{
			char	   *more;

			while (len + (size_t) w + 1 > cap)
				cap *= 2;
			more = realloc(text, cap);
			if (more == NULL)
			{
				free(text);
				snprintf(err, errlen, "out of memory");
				return -1;
			}
			text = more;
		}
		memcpy(text + len, buf, (size_t) w);
		len += (size_t) w;
	}
	text[len] = '\0';
	*text_out = text;
	return (int64_t) len;
}

int64_t
llm_engine_render(const llm_engine *e, const llm_request *req, char **text, size_t *len,
				  char *err, size_t errlen)
{
	llm_chat_message two[2];
	const llm_chat_message *msgs = req->messages;
	int			n = req->n_messages;
	llm_chat_options o = chat_options(req);
	int32_t    *ids = NULL;
	int64_t		k;

	*text = NULL;
	*len = 0;
	if (llm_request_validate(req, err, errlen) != LLM_OK)
		return -1;
	if (req->prompt_kind == LLM_PROMPT_TEXT)
	{
		n = text_messages(req, two);
		msgs = two;
	}
	else if (req->prompt_kind != LLM_PROMPT_MESSAGES)
	{
		snprintf(err, errlen, "only a text or messages prompt is rendered with the chat template");
		return -1;
	}
	err[0] = '\0';
	if (e->mc->no_output)
	{
		/* no chat: the text as it is embedded (the messages form is refused there) */
		k = engine_prompt_ids(e, req, &ids, err, errlen);
		free(ids);
		if (k < 0)
			return -1;
		*text = malloc(req->prompt_len + 1);
		if (*text == NULL)
		{
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		memcpy(*text, req->prompt, req->prompt_len);
		(*text)[req->prompt_len] = '\0';
		*len = req->prompt_len;
		return k;
	}
	k = render_chat(e, msgs, n, &o, &ids, err, errlen);
	free(ids);
	if (k < 0)
		return -1;
	if (llm_chat_render_text(&e->chat, e->tok, msgs, n, &o, text, len, err, errlen) != 0)
		return -1;
	return k;
}
