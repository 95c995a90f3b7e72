/*
 * tokenizer.c — the tokenizer's front door (tokenizer.h): reads the GGUF's
 * tokenizer keys, builds the vocabulary (vocab.c) and the encoder its
 * tokenizer.ggml.model names (byte-level BPE "gpt2": bpe.c; SentencePiece
 * "llama": spm.c; WordPiece "bert": wordpiece.c), and dispatches
 * llm_tokenize to it.  Decoding is detok.c.
 *
 * Behaviour follows llama.cpp (src/llama-vocab.cpp) so that ids are
 * token-for-token identical for the same GGUF.  USER_DEFINED tokens are
 * split out of the text first, longest text first, each at every leftmost
 * non-overlapping occurrence (llama_vocab::impl::tokenizer_st_partition with
 * parse_special off); every remaining fragment is encoded on its own.
 * CONTROL and UNKNOWN tokens are never recognised in text.
 */
#define _GNU_SOURCE				/* memmem */
#include "tokenizer.h"
#include "bpe.h"
#include "spm.h"
#include "wordpiece.h"
#include "engine/util/text_util.h"

#include <stdlib.h>
#include <string.h>

#define MAX_TOKEN_BYTES	(1 << 20)	/* longest vocabulary entry accepted */

/*
 * Build the tokenizer from GGUF keys tokenizer.ggml.{model, pre, tokens,
 * token_type, merges (gpt2), scores and add_space_prefix (llama),
 * normalizer.lowercase and normalizer.strip_accents (bert), bos_token_id,
 * eos_token_id, unknown_token_id, seperator_token_id, eot_token_id,
 * eom_token_id, add_bos_token, add_eos_token, add_sep_token}.
 * Everything is copied: f may be closed afterwards.  Returns NULL + message
 * for a model other than "gpt2" / "llama" / "bert", an unknown pre-tokenizer,
 * missing/mistyped arrays, or allocation failure.
 */
llm_tokenizer *
llm_tokenizer_create(const gguf_file *f, char *err, size_t errlen)
{
	gguf_str	model;
	const gguf_kv *tokens,
			   *types,
			   *merges = NULL;
	const pretok_spec *spec = NULL;
	llm_tokenizer *t;
	tok_kind	kind;
	uint64_t	n_merges = 0;
	uint64_t	total_text = 0;

	if (!gguf_get_str(f, "tokenizer.ggml.model", &model))
	{
		llm_set_err(err, errlen, "tokenizer: GGUF has no tokenizer.ggml.model");
		return NULL;
	}
	if (gguf_str_eq(model, "gpt2"))
		kind = TOK_BPE;
	else if (gguf_str_eq(model, "llama"))
		kind = TOK_SPM;
	else if (gguf_str_eq(model, "bert"))
		kind = TOK_WPM;
	else
	{
		llm_set_err(err, errlen, "tokenizer: unsupported tokenizer.ggml.model '%.*s' (known: \"gpt2\" byte-level "
					"BPE, \"llama\" SentencePiece, \"bert\" WordPiece)",
				(int) (model.len > 64 ? 64 : model.len), model.ptr);
		return NULL;
	}
	if (kind == TOK_BPE && (spec = tok_bpe_pretok(f, err, errlen)) == NULL)
		return NULL;

	tokens = gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_VT_STRING);
	if (tokens == NULL || tokens->arr_n == 0 || tokens->arr_n > (1u << 24) || tokens->strs == NULL)
	{
		llm_set_err(err, errlen, "tokenizer: tokenizer.ggml.tokens missing, empty, too large or not a string array");
		return NULL;
	}
	types = gguf_get_arr(f, "tokenizer.ggml.token_type", GGUF_VT_INT32);
	if (types == NULL)
		types = gguf_get_arr(f, "tokenizer.ggml.token_type", GGUF_VT_UINT32);
	if (types != NULL && types->arr_n != tokens->arr_n)
	{
		llm_set_err(err, errlen, "tokenizer: tokenizer.ggml.token_type has %llu entries for %llu tokens",
				(unsigned long long) types->arr_n, (unsigned long long) tokens->arr_n);
		return NULL;
	}
	if (kind == TOK_BPE)
	{
		if ((merges = tok_bpe_merges(f, err, errlen)) == NULL)
			return NULL;
		n_merges = merges->arr_n;
	}
	for (uint64_t i = 0; i < tokens->arr_n; i++)
	{
		if (tokens->strs[i].len > MAX_TOKEN_BYTES)
		{
			llm_set_err(err, errlen, "tokenizer: token %llu is %llu bytes long (limit %d)",
					(unsigned long long) i, (unsigned long long) tokens->strs[i].len, MAX_TOKEN_BYTES);
			return NULL;
		}
		total_text += tokens->strs[i].len;
	}

	t = calloc(1, sizeof(*t));
	if (t == NULL)
		goto oom;
	t->kind = kind;
	t->n_vocab = (int32_t) tokens->arr_n;
	/* strings: vocabulary + up to three new strings per merge + 256 byte symbols */
	if (!tok_vocab_init(t, tokens, types, 3 * n_merges + 256, total_text))
		goto oom;
	if ((kind == TOK_BPE && !tok_bpe_setup(t, spec, merges, err, errlen)) ||
		(kind == TOK_SPM && !tok_spm_setup(t, f, err, errlen)))
	{
		llm_tokenizer_destroy(t);
		return NULL;
	}
	/* llama.cpp's default BOS: always for SentencePiece and WordPiece ([CLS]), per pre-tokenizer for BPE */
	if (!tok_vocab_specials(t, f, kind != TOK_BPE || tok_bpe_pretok_add_bos(spec)))
		goto oom;
	/* WordPiece reads the [UNK] id tok_vocab_specials found */
	if (kind == TOK_WPM && !tok_wpm_setup(t, f, err, errlen))
	{
		llm_tokenizer_destroy(t);
		return NULL;
	}
	/* byte-decoded text of every token, for detokenization */
	if (!tok_vocab_decode_all(t, kind == TOK_SPM ? tok_spm_decode_text :
							  kind == TOK_WPM ? tok_wpm_decode_text : tok_bpe_decode_text, total_text))
		goto oom;
	/* no bound: one [UNK] stands for a whole unknown word, and whitespace and control characters are dropped */
	if (kind == TOK_WPM)
		t->max_token_bytes = 0;
	return t;

oom:
	llm_set_err(err, errlen, "tokenizer: out of memory building the vocabulary");
	llm_tokenizer_destroy(t);
	return NULL;
}

void
llm_tokenizer_destroy(llm_tokenizer *t)
{
	if (t == NULL)
		return;
	tok_bpe_free(t);
	tok_spm_free(t);
	tok_vocab_free(t);
	free(t);
}

/* A stretch of the text to encode (id < 0), or a USER_DEFINED token split out of it. */
typedef struct fragment
{
	size_t		start;
	size_t		end;
	int32_t		id;
} fragment;

typedef struct frag_list
{
	fragment   *v;
	size_t		n;
	size_t		cap;
} frag_list;

static bool
frag_push(frag_list *l, size_t start, size_t end, int32_t id)
{
	if (l->n == l->cap)
	{
		size_t		cap = l->cap ? l->cap * 2 : 16;
		fragment   *v = realloc(l->v, cap * sizeof(fragment));

		if (v == NULL)
			return false;
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n].start = start;
	l->v[l->n].end = end;
	l->v[l->n].id = id;
	l->n++;
	return true;
}

/*
 * Split text[0..len) by the USER_DEFINED tokens into *out (the caller frees
 * out->v): for each token in t->udef's order, every text fragment is cut at
 * each leftmost non-overlapping occurrence.  false on allocation failure.
 */
static bool
split_user_defined(const llm_tokenizer *t, const char *text, size_t len, frag_list *out)
{
	frag_list	cur = {0},
				next = {0};
	bool		present[256] = {false};

	if (!frag_push(&cur, 0, len, -1))
		return false;
	for (size_t i = 0; i < len; i++)
		present[(uint8_t) text[i]] = true;
	for (int32_t k = 0; k < t->n_udef; k++)
	{
		int32_t		id = t->udef[k];
		const char *ut = t->arena + t->str_off[id];
		size_t		ulen = t->str_len[id];
		bool		hit = false;

		if (ulen > len || !present[(uint8_t) ut[0]])
			continue;
		next.n = 0;
		for (size_t f = 0; f < cur.n; f++)
		{
			fragment	fr = cur.v[f];
			size_t		pos = fr.start;
			const char *m;

			if (fr.id >= 0 || fr.end - fr.start < ulen)
			{
				if (!frag_push(&next, fr.start, fr.end, fr.id))
					goto oom;
				continue;
			}
			while ((m = memmem(text + pos, fr.end - pos, ut, ulen)) != NULL)
			{
				size_t		at = (size_t) (m - text);

				if ((at > pos && !frag_push(&next, pos, at, -1)) || !frag_push(&next, at, at + ulen, id))
					goto oom;
				pos = at + ulen;
				hit = true;
			}
			if (pos < fr.end && !frag_push(&next, pos, fr.end, -1))
				goto oom;
		}
		if (hit)
		{
			frag_list	tmp = cur;

			cur = next;
			next = tmp;
		}
	}
	free(next.v);
	*out = cur;
	return true;

oom:
	free(cur.v);
	free(next.v);
	return false;
}

/*
 * Tokenize text[0..len) as plain UTF-8 text: split out USER_DEFINED tokens,
 * then encode each remaining fragment (byte-level BPE: pre-tokenize and BPE
 * each piece; SentencePiece: spm.c).  Returns the number of ids
 * (writing at most cap to out), or -1 with err set for ill-formed UTF-8
 * (offset reported) or allocation failure.
 */
int64_t
llm_tokenize(const llm_tokenizer *t, const char *text, size_t len,
			 int32_t *out, int64_t cap, char *err, size_t errlen)
{
	tok_bpe_scratch *s = NULL;
	emitter		e = {out, cap < 0 ? 0 : cap, 0};
	size_t		bad;
	frag_list	frags = {0};
	fragment	whole = {0, len, -1};
	const fragment *fv = &whole;
	size_t		nf = 1;
	bool		prev_special = true;
	int			rc = 0;

	if (len == 0)
		return 0;
	if (text == NULL)
	{
		llm_set_err(err, errlen, "tokenizer: NULL text");
		return -1;
	}
	if (len > INT32_MAX)
	{
		llm_set_err(err, errlen, "tokenizer: text of %zu bytes is too long (limit %d)", len, INT32_MAX);
		return -1;
	}
	if (out == NULL)
		e.cap = 0;
	bad = llm_utf8_first_invalid(text, len);
	if (bad < len)
	{
		llm_set_err(err, errlen, "invalid UTF-8 in text at byte offset %zu (byte 0x%02x)",
				bad, (unsigned) (uint8_t) text[bad]);
		return -1;
	}

	if (t->n_udef > 0)
	{
		if (!split_user_defined(t, text, len, &frags))
			goto oom;
		fv = frags.v;
		nf = frags.n;
	}
	if (t->kind == TOK_BPE && (s = tok_bpe_scratch_new()) == NULL)
		goto oom;
	for (size_t i = 0; i < nf && rc == 0; i++)
	{
		if (fv[i].id >= 0)
		{
			emit(&e, fv[i].id);
			prev_special = true;
			continue;
		}
		if (t->kind == TOK_BPE)
			rc = tok_bpe_encode(t, s, text + fv[i].start, fv[i].end - fv[i].start, &e, err, errlen);
		else if (t->kind == TOK_WPM)
		{
			if (!tok_wpm_encode(t, text + fv[i].start, fv[i].end - fv[i].start, &e))
				goto oom;
		}
		else if (!tok_spm_encode(t, text + fv[i].start, fv[i].end - fv[i].start,
								 t->add_space_prefix && prev_special, &e))
			goto oom;
		prev_special = false;
	}
	tok_bpe_scratch_free(s);
	free(frags.v);
	return rc == 0 ? e.n : -1;

oom:
	tok_bpe_scratch_free(s);
	free(frags.v);
	llm_set_err(err, errlen, "tokenizer: out of memory");
	return -1;
}

/*
 * llama.cpp's tokenization with add_special (parse_special off): BOS ([CLS]
 * for WordPiece) when add_bos, the text's ids, EOS when add_eos, SEP ([SEP]
 * for WordPiece) when add_sep.  WordPiece always has both of its own, as
 * llama.cpp adds them whatever the flags.
 */
int64_t
llm_tokenize_special(const llm_tokenizer *t, const char *text, size_t len,
					 int32_t *out, int64_t cap, char *err, size_t errlen)
{
	bool		bos = t->kind == TOK_WPM ? t->bos >= 0 : t->add_bos;
	bool		eos = t->kind != TOK_WPM && t->add_eos;
	bool		sep = t->kind == TOK_WPM ? t->sep >= 0 : t->add_sep;
	int64_t		first = bos ? 1 : 0;
	int64_t		n;

	if (out == NULL || cap < 0)
		cap = 0;
	if (t->kind == TOK_WPM && (t->bos < 0 || t->sep < 0))
	{
		llm_set_err(err, errlen, "tokenizer: WordPiece vocabulary without a [CLS] (bos) or [SEP] token id");
		return -1;
	}
	if (bos && cap > 0)
		out[0] = t->bos;
	n = llm_tokenize(t, text, len, cap > first ? out + first : NULL, cap > first ? cap - first : 0, err, errlen);
	if (n < 0)
		return -1;
	n += first;
	if (eos)
	{
		if (n < cap)
			out[n] = t->eos;
		n++;
	}
	if (sep)
	{
		if (n < cap)
			out[n] = t->sep;
		n++;
	}
	return n;
}
