/*
 * vocab_file.c — a GGUF's tokenizer and chat template without its weights
 * (vocab_file.h), and the grow-and-retry wrappers of llm_tokenize and
 * llm_chat_apply that hand back malloc'd id arrays.
 */
#include "vocab_file.h"
#include "engine/util/text_util.h"

#include <stdlib.h>
#include <string.h>

llm_vocab_file *
llm_vocab_file_open(const char *path, const char *chat_template, char *err, size_t errlen)
{
	llm_vocab_file *v = calloc(1, sizeof(*v));
	llm_chat_family fam = LLM_CHAT_NONE;
	bool		auto_template = chat_template == NULL || strcmp(chat_template, "auto") == 0;

	if (v == NULL)
	{
		llm_set_err(err, errlen, "out of memory");
		return NULL;
	}
	if (!auto_template && !llm_chat_family_parse(chat_template, &fam))
	{
		llm_set_err(err, errlen, "unknown chat template \"%s\" (known: auto, none, chatml, gemma)", chat_template);
		free(v);
		return NULL;
	}
	v->gguf = gguf_open(path, err, errlen);
	if (v->gguf == NULL)
		goto fail;
	v->tok = llm_tokenizer_create(v->gguf, err, errlen);
	if (v->tok == NULL)
		goto fail;
	if ((auto_template ? llm_chat_template_init(&v->chat, v->gguf, v->tok, err, errlen) :
		 llm_chat_template_init_family(&v->chat, fam, v->tok, err, errlen)) != 0)
		goto fail;
	return v;

fail:
	llm_tokenizer_destroy(v->tok);
	if (v->gguf)
		gguf_close(v->gguf);
	free(v);
	return NULL;
}

void
llm_vocab_file_close(llm_vocab_file *v)
{
	if (v == NULL)
		return;
	llm_chat_template_free(&v->chat);
	llm_tokenizer_destroy(v->tok);
	gguf_close(v->gguf);
	free(v);
}

int64_t
llm_tokenize_alloc(const llm_tokenizer *t, const char *text, size_t len, int32_t **ids_out,
				   char *err, size_t errlen)
{
	int64_t		cap = (int64_t) len + 8;
	int32_t    *ids = malloc((size_t) cap * sizeof(int32_t));
	int64_t		n;

	*ids_out = NULL;
	if (ids == NULL)
	{
		llm_set_err(err, errlen, "out of memory");
		return -1;
	}
	n = llm_tokenize(t, text, len, ids, cap, err, errlen);
	if (n > cap)
	{
		int32_t    *more = realloc(ids, (size_t) n * sizeof(int32_t));

		if (more == NULL)
		{
			free(ids);
			llm_set_err(err, errlen, "out of memory");
			return -1;
		}
		ids = more;
		n = llm_tokenize(t, text, len, ids, n, err, errlen);
	}
	if (n < 0)
	{
		free(ids);
		return -1;
	}
	*ids_out = ids;
	return n;
}

int64_t
llm_chat_apply_alloc(const llm_chat_template *ct, const llm_tokenizer *t, const llm_chat_message *msgs,
					 int n_msgs, int32_t **ids_out, char *err, size_t errlen)
{
	size_t		text_bytes = 0;
	int64_t		cap;
	int32_t    *ids;
	int64_t		n;

	*ids_out = NULL;
	for (int i = 0; i < n_msgs; i++)
		text_bytes += msgs[i].content_len;
	cap = (int64_t) text_bytes + 16 * (n_msgs + 2) + 256;
	ids = malloc((size_t) cap * sizeof(int32_t));
	if (ids == NULL)
	{
		llm_set_err(err, errlen, "out of memory");
		return -1;
	}
	n = llm_chat_apply(ct, t, msgs, n_msgs, ids, cap, err, errlen);
	if (n > cap)
	{
		int32_t    *more = realloc(ids, (size_t) n * sizeof(int32_t));

		if (more == NULL)
		{
			free(ids);
			llm_set_err(err, errlen, "out of memory");
			return -1;
		}
		ids = more;
		n = llm_chat_apply(ct, t, msgs, n_msgs, ids, n, err, errlen);
	}
	if (n < 0)
	{
		free(ids);
		return -1;
	}
	*ids_out = ids;
	return n;
}
