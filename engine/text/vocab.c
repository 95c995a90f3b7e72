/*
 * vocab.c — the vocabulary from GGUF, below both encoders: interned token
 * texts (an open-addressing table keyed by FNV-1a of the bytes), token
 * types, BOS / EOS / end-of-generation ids, the USER_DEFINED tokens text is
 * split by, and the decoded text of every token.  Behaviour follows
 * llama.cpp's llama_vocab::impl::load (src/llama-vocab.cpp).
 */
#define _GNU_SOURCE				/* qsort_r */
#include "vocab.h"

#include <stdlib.h>
#include <string.h>

/* ---------- interned strings ---------- */

/* The key of a lookup: bytes p[0..n) and their FNV-1a 32 hash. */
typedef struct str_key
{
	const char *p;
	size_t		n;
	uint32_t	h;
} str_key;

static bool
str_eq(const void *ctx, uint32_t id, const void *key)
{
	const llm_tokenizer *t = ctx;
	const str_key *k = key;

	return t->str_hash[id] == k->h && t->str_len[id] == k->n &&
		memcmp(t->arena + t->str_off[id], k->p, k->n) == 0;
}

/* Id of string p[0..n) (vocabulary id when it is a token), or -1. */
int32_t
tok_str_lookup(const llm_tokenizer *t, const char *p, size_t n)
{
	str_key		k = {p, n, llm_fnv1a32(p, n)};

	return (int32_t) llm_hash_index_find(&t->strings, k.h, str_eq, t, &k);
}

/*
 * Add string p[0..n) as id t->n_strings.  With replace, an equal string
 * already present is re-pointed at the new id (llama.cpp's token_to_id keeps
 * the last duplicate); without it the existing id is returned.  -1 on OOM.
 */
int32_t
tok_str_add(llm_tokenizer *t, const char *p, size_t n, bool replace)
{
	str_key		k = {p, n, llm_fnv1a32(p, n)};
	uint32_t   *slot = llm_hash_index_slot(&t->strings, k.h, str_eq, t, &k);
	int32_t		id;

	if (*slot != 0 && !replace)
		return (int32_t) *slot - 1;
	if (t->n_strings >= t->cap_strings)
		return -1;				/* capacity is sized up front */
	if (t->arena_len + n > t->arena_cap)
	{
		uint64_t	cap = t->arena_cap * 2 + n + 1024;
		char	   *a = realloc(t->arena, cap);

		if (a == NULL)
			return -1;
		t->arena = a;
		t->arena_cap = cap;
	}
	id = t->n_strings++;
	memcpy(t->arena + t->arena_len, p, n);
	t->str_off[id] = t->arena_len;
	t->str_len[id] = (uint32_t) n;
	t->str_hash[id] = k.h;
	t->arena_len += n;
	*slot = (uint32_t) id + 1;
	return id;
}

/* ---------- construction ---------- */

bool
tok_vocab_init(llm_tokenizer *t, const gguf_kv *tokens, const gguf_kv *types,
			   uint64_t extra_strings, uint64_t total_text)
{
	uint64_t	n_strings_max = tokens->arr_n + extra_strings;

	t->cap_strings = (int32_t) n_strings_max;
	t->str_off = malloc(sizeof(uint64_t) * n_strings_max);
	t->str_len = malloc(sizeof(uint32_t) * n_strings_max);
	t->str_hash = malloc(sizeof(uint32_t) * n_strings_max);
	if (!llm_hash_index_init(&t->strings, n_strings_max, 1024) ||
		!t->str_off || !t->str_len || !t->str_hash)
		return false;
	t->arena_cap = total_text + 1024;
	t->arena = malloc(t->arena_cap);
	t->tok_type = malloc(tokens->arr_n);
	if (t->arena == NULL || t->tok_type == NULL)
		return false;

	for (uint64_t i = 0; i < tokens->arr_n; i++)
	{
		int64_t		ty = types ? gguf_arr_int(types, i) : TOKTYPE_NORMAL;

		t->tok_type[i] = (ty >= 1 && ty <= 6) ? (uint8_t) ty : TOKTYPE_NORMAL;
		/* ids 0..n_vocab-1 are the tokens themselves; lookups see the last duplicate */
		if (tok_str_add(t, tokens->strs[i].ptr, tokens->strs[i].len, true) != (int32_t) i)
			return false;
	}
	return true;
}

static void
add_eog(llm_tokenizer *t, int32_t id)
{
	if (id < 0 || id >= t->n_vocab || t->n_eog >= MAX_EOG)
		return;
	for (int i = 0; i < t->n_eog; i++)
		if (t->eog[i] == id)
			return;
	t->eog[t->n_eog++] = id;
}

static int32_t
optional_token_id(const gguf_file *f, const char *key, int32_t n_vocab)
{
	int64_t		v;

	if (!gguf_get_int(f, key, &v) || v < 0 || v >= n_vocab)
		return -1;
	return (int32_t) v;
}

/*
 * A special token id from key, else def (llama.cpp's default for the
 * tokenizer model); -1 when neither names a vocabulary id.
 */
static int32_t
special_token_id(const gguf_file *f, const char *key, int32_t n_vocab, int32_t def)
{
	int64_t		v;

	if (gguf_get_int(f, key, &v) && v >= 0 && v < n_vocab)
		return (int32_t) v;
	return def >= 0 && def < n_vocab ? def : -1;
}

/* USER_DEFINED ids in llama.cpp's splitting order: longest text first, then lowest id. */
static int
udef_cmp(const void *a, const void *b, void *arg)
{
	const llm_tokenizer *t = arg;
	int32_t		x = *(const int32_t *) a,
				y = *(const int32_t *) b;
	uint32_t	lx = t->str_len[x],
				ly = t->str_len[y];

	if (lx != ly)
		return lx > ly ? -1 : 1;
	return x < y ? -1 : x > y;
}

/*
 * The USER_DEFINED tokens text is split by.  llama.cpp's order among tokens
 * of equal length is std::sort's (unspecified); it only matters when two of
 * them overlap in the text, which Gemma's (whitespace runs, HTML tags) never
 * do.
 */
static bool
build_udef(llm_tokenizer *t)
{
	int32_t		n = 0;

	for (int32_t i = 0; i < t->n_vocab; i++)
		if (t->tok_type[i] == TOKTYPE_USER_DEFINED && t->str_len[i] > 0)
			n++;
	if (n == 0)
		return true;
	t->udef = malloc(sizeof(int32_t) * (size_t) n);
	if (t->udef == NULL)
		return false;
	for (int32_t i = 0; i < t->n_vocab; i++)
	{
		/* of duplicate texts only the id a lookup returns (the last) is split out */
		if (t->tok_type[i] != TOKTYPE_USER_DEFINED || t->str_len[i] == 0 ||
			tok_str_lookup(t, t->arena + t->str_off[i], t->str_len[i]) != i)
			continue;
		t->udef[t->n_udef++] = i;
	}
	qsort_r(t->udef, (size_t) t->n_udef, sizeof(int32_t), udef_cmp, t);
	return true;
}

bool
tok_vocab_specials(llm_tokenizer *t, const gguf_file *f, bool default_add_bos)
{
	/* llama.cpp's end-of-generation texts (llama_vocab::impl::load, special_eog_ids) */
	static const char *const eog_texts[] = {
		"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
		"<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
		"<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
		"\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence" "\xef\xbd\x9c", "[e~["
	};
	bool		normal_slash_s;
	bool		add_bos;

	/* llama.cpp's defaults when the keys are absent: SentencePiece <s> 1, </s> 2, <unk> 0; BERT [CLS] 101, [UNK] 100, [SEP] 102 */
	t->bos = special_token_id(f, "tokenizer.ggml.bos_token_id", t->n_vocab,
							  t->kind == TOK_SPM ? 1 : t->kind == TOK_WPM ? 101 : -1);
	t->eos = special_token_id(f, "tokenizer.ggml.eos_token_id", t->n_vocab, t->kind == TOK_SPM ? 2 : -1);
	t->unk = special_token_id(f, "tokenizer.ggml.unknown_token_id", t->n_vocab,
							  t->kind == TOK_SPM ? 0 : t->kind == TOK_WPM ? 100 : -1);
	t->sep = special_token_id(f, "tokenizer.ggml.seperator_token_id", t->n_vocab, t->kind == TOK_WPM ? 102 : -1);
	/* llama.cpp: tokenizer.ggml.add_bos_token, else true for SentencePiece and WordPiece and per pre-tokenizer for BPE */
	if (!gguf_get_bool(f, "tokenizer.ggml.add_bos_token", &add_bos))
		add_bos = default_add_bos;
	t->add_bos = add_bos && t->bos >= 0;
	if (!gguf_get_bool(f, "tokenizer.ggml.add_eos_token", &t->add_eos))
		t->add_eos = false;
	t->add_eos = t->add_eos && t->eos >= 0;
	if (!gguf_get_bool(f, "tokenizer.ggml.add_sep_token", &t->add_sep))
		t->add_sep = t->kind == TOK_WPM;
	t->add_sep = t->add_sep && t->sep >= 0;
	add_eog(t, t->eos);
	add_eog(t, optional_token_id(f, "tokenizer.ggml.eot_token_id", t->n_vocab));
	add_eog(t, optional_token_id(f, "tokenizer.ggml.eom_token_id", t->n_vocab));
	/*
	 * As llama.cpp: these texts end generation whatever their type, and count
	 * as control tokens, except "</s>" in a vocabulary that also has
	 * <|tool_response>, where it is a normal token.  (Gemma 3's USER_DEFINED
	 * "</s>" thus ends generation and is not split out of text.)
	 */
	normal_slash_s = tok_str_lookup(t, "<|tool_response>", 16) >= 0;
	for (size_t i = 0; i < sizeof(eog_texts) / sizeof(eog_texts[0]); i++)
	{
		int32_t		id = tok_str_lookup(t, eog_texts[i], strlen(eog_texts[i]));

		if (id < 0 || id >= t->n_vocab)
			continue;
		if (normal_slash_s && strcmp(eog_texts[i], "</s>") == 0)
		{
			t->tok_type[id] = TOKTYPE_NORMAL;
			continue;
		}
		t->tok_type[id] = TOKTYPE_CONTROL;
		add_eog(t, id);
	}
	return build_udef(t);
}

bool
tok_vocab_decode_all(llm_tokenizer *t, tok_decode_fn decode, uint64_t total_text)
{
	uint64_t	dec_len = 0;

	t->dec_off = malloc(sizeof(uint64_t) * ((size_t) t->n_vocab + 1));
	t->dec_arena = malloc(total_text + 1);
	if (t->dec_off == NULL || t->dec_arena == NULL)
		return false;
	for (int32_t i = 0; i < t->n_vocab; i++)
	{
		const char *p = t->arena + t->str_off[i];
		size_t		n = t->str_len[i];

		if (n > (size_t) t->max_token_bytes)
			t->max_token_bytes = (int32_t) n;
		t->dec_off[i] = dec_len;
		dec_len += decode(t, i, p, n, t->dec_arena + dec_len);
	}
	t->dec_off[t->n_vocab] = dec_len;
	return true;
}

void
tok_vocab_free(llm_tokenizer *t)
{
	free(t->str_off);
	free(t->str_len);
	free(t->str_hash);
	free(t->arena);
	llm_hash_index_free(&t->strings);
	free(t->tok_type);
	free(t->dec_off);
	free(t->dec_arena);
	free(t->udef);
}

/* ---------- reading ---------- */

int32_t
llm_tokenizer_n_vocab(const llm_tokenizer *t)
{
	return t->n_vocab;
}

int32_t
llm_tokenizer_max_token_bytes(const llm_tokenizer *t)
{
	return t->max_token_bytes;
}

int32_t
llm_tokenizer_bos(const llm_tokenizer *t)
{
	return t->bos;
}

int32_t
llm_tokenizer_eos(const llm_tokenizer *t)
{
	return t->eos;
}

/* Id of the CONTROL or USER_DEFINED token whose text is exactly text, or -1. */
int32_t
llm_tokenizer_special_id(const llm_tokenizer *t, const char *text)
{
	int32_t		id = tok_str_lookup(t, text, strlen(text));

	if (id < 0 || id >= t->n_vocab)
		return -1;
	if (t->tok_type[id] != TOKTYPE_CONTROL && t->tok_type[id] != TOKTYPE_USER_DEFINED)
		return -1;
	return id;
}

/* EOS, EOT/EOM when the GGUF names them, and the end-of-turn markers present in the vocabulary. */
bool
llm_tokenizer_is_eog(const llm_tokenizer *t, int32_t id)
{
	for (int i = 0; i < t->n_eog; i++)
		if (t->eog[i] == id)
			return true;
	return false;
}

bool
llm_tokenizer_add_bos(const llm_tokenizer *t)
{
	return t->add_bos;
}

/* CONTROL and UNKNOWN ids (after the end-of-generation texts were made CONTROL): never produced from text. */
bool
llm_tokenizer_is_control(const llm_tokenizer *t, int32_t id)
{
	return id >= 0 && id < t->n_vocab &&
		(t->tok_type[id] == TOKTYPE_CONTROL || t->tok_type[id] == TOKTYPE_UNKNOWN);
}
