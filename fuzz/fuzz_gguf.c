/*
 * fuzz_gguf.c — libFuzzer target: the GGUF reader and what reads a model's
 * metadata first (tokenizer, chat-template detection).
 *
 * Any bytes go to gguf_open_buffer (an exact-size copy, so AddressSanitizer
 * sees a read past the end).  An accepted file must keep every key, string,
 * array element and tensor inside the buffer, find each key and tensor by
 * its name, and have every tensor's bytes readable (all are touched); then
 * the tokenizer is built from it and, when that succeeds, the chat template
 * detected and a short text tokenized and detokenized.  Any violation
 * aborts.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/text/chat_template.h"
#include "engine/gguf/gguf.h"
#include "engine/text/tokenizer.h"

static volatile unsigned sink;

#define INSIDE(p, n) ((const uint8_t *) (p) >= buf && (uint64_t) (n) <= len \
					  && (size_t) ((const uint8_t *) (p) - buf) <= len - (uint64_t) (n))

static void
walk(const gguf_file *f, const uint8_t *buf, size_t len)
{
	unsigned	acc = 0;

	for (uint64_t i = 0; i < gguf_n_kv(f); i++)
	{
		const gguf_kv *kv = gguf_kv_at(f, i);
		char		key[256];
		gguf_str	s;
		int64_t		iv;
		double		dv;
		bool		bv;

		if (!INSIDE(kv->key.ptr, kv->key.len))
			abort();
		if (kv->key.len < sizeof(key) && memchr(kv->key.ptr, '\0', kv->key.len) == NULL)
		{
			memcpy(key, kv->key.ptr, kv->key.len);
			key[kv->key.len] = '\0';
			if (gguf_find_kv(f, key) != kv)
				abort();
			if (gguf_get_str(f, key, &s))
			{
				if (!INSIDE(s.ptr, s.len))
					abort();
				for (uint64_t j = 0; j < s.len; j++)
					acc += (uint8_t) s.ptr[j];
			}
			if (gguf_get_int(f, key, &iv))
				acc += (unsigned) iv;
			if (gguf_get_float(f, key, &dv))
				acc += (unsigned) (dv == dv);
			if (gguf_get_bool(f, key, &bv))
				acc += bv;
		}
		if (kv->type == GGUF_VT_ARRAY && kv->arr_type == GGUF_VT_STRING)
		{
			for (uint64_t j = 0; j < kv->arr_n; j++)
			{
				if (!INSIDE(kv->strs[j].ptr, kv->strs[j].len))
					abort();
				for (uint64_t b = 0; b < kv->strs[j].len; b++)
					acc += (uint8_t) kv->strs[j].ptr[b];
			}
		}
		else if (kv->type == GGUF_VT_ARRAY)
		{
			for (uint64_t j = 0; j < kv->arr_n; j++)
				acc += (unsigned) gguf_arr_int(kv, j) + (unsigned) (gguf_arr_float(kv, j) != 0);
		}
	}
	for (uint64_t i = 0; i < gguf_n_tensors(f); i++)
	{
		const gguf_tensor *t = gguf_tensor_at(f, i);

		if (t->nbytes == 0 || !INSIDE(t->data, t->nbytes) || gguf_find_tensor(f, t->name) != t
			|| t->n_dims == 0 || t->n_dims > GGUF_MAX_DIMS)
			abort();
		for (uint64_t b = 0; b < t->nbytes; b++)
			acc += ((const uint8_t *) t->data)[b];
	}
	sink += acc;
}

static void
vocabulary(const gguf_file *f)
{
	char		err[256];
	llm_tokenizer *t = llm_tokenizer_create(f, err, sizeof(err));
	llm_chat_template ct;
	int32_t		ids[64];
	int64_t		n;

	if (t == NULL)
		return;
	n = llm_tokenize(t, "Hello, world! 123", 17, ids, 64, err, sizeof(err));
	for (int64_t i = 0; i < n && i < 64; i++)
	{
		char		piece[64];

		if (ids[i] < 0 || ids[i] >= llm_tokenizer_n_vocab(t))
			abort();
		sink += (unsigned) llm_token_to_bytes(t, ids[i], piece, sizeof(piece));
	}
	if (llm_chat_template_init(&ct, f, t, err, sizeof(err)) == 0)
	{
		llm_chat_message m = {"user", "Hi", 2};

		sink += (unsigned) llm_chat_apply(&ct, t, &m, 1, ids, 64, err, sizeof(err));
		llm_chat_template_free(&ct);
	}
	llm_tokenizer_destroy(t);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t    *buf = malloc(size ? size : 1);
	char		err[512] = "";
	gguf_file  *f;

	memcpy(buf, data, size);
	f = gguf_open_buffer(buf, size, err, sizeof(err));
	if (f == NULL)
	{
		if (err[0] == '\0')
			abort();			/* a refusal always says why */
	}
	else
	{
		walk(f, buf, size);
		vocabulary(f);
		gguf_close(f);
	}
	free(buf);
	return 0;
}
