/*
 * tokenizer.c — the vocabulary (tokens, types, special ids, BOS/EOS/EOG,
 * USER_DEFINED splitting, decoding, the incremental detokenizer) and the
 * byte-level BPE encoder (tokenizer.ggml.model = "gpt2"); the SentencePiece
 * encoder ("llama") is tokenizer_spm.c.
 *
 * Behaviour follows llama.cpp (src/llama-vocab.cpp, src/unicode.cpp) so that
 * ids are token-for-token identical for the same GGUF:
 *
 *  0. USER_DEFINED tokens are split out of the text first, longest text
 *     first, each at every leftmost non-overlapping occurrence
 *     (llama_vocab::impl::tokenizer_st_partition with parse_special off);
 *     every remaining fragment is encoded on its own.
 *
 * Byte-level BPE:
 *  1. Pre-tokenization: the regex list selected by tokenizer.ggml.pre is
 *     applied in sequence; each regex splits every piece produced by the
 *     previous one, and the text between matches is kept as a piece of its
 *     own.  A regex never sees past the end of the piece it splits (so a
 *     lookahead at a piece end behaves as at end of text).  Regexes run in
 *     PCRE2 (UTF + UCP, JIT when available).  \s is spelled out as the
 *     Unicode White_Space set ([\t-\r\x{85}\p{Z}]), which is what llama.cpp
 *     uses, instead of relying on the PCRE2 version's idea of \s.
 *  2. Each piece's bytes are mapped to GPT-2's printable byte alphabet
 *     (bytes_to_unicode, Radford et al. 2019, openai/gpt-2 encoder.py); the
 *     piece starts as one symbol per byte and adjacent symbol pairs are merged
 *     lowest merge rank first (leftmost on ties) until no pair has a rank.
 *     Strings are interned, so a merge is a lookup of an (id, id) pair.
 *  3. A final symbol that is not a vocabulary entry falls back to the
 *     single-byte tokens of its encoded text (as llama.cpp does).
 *
 * CONTROL and UNKNOWN tokens are never recognised in text.
 */
#define _GNU_SOURCE				/* memmem */
#include "tokenizer_internal.h"
#include "engine/util/binary_heap.h"
#include "engine/util/text_util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TOKEN_BYTES	(1 << 20)	/* longest vocabulary entry accepted */

/* Unicode White_Space, the set llama.cpp's unicode tables mark as \s. */
#define WS "\\t-\\r\\x{85}\\p{Z}"

/* GPT-2's split regex (also SmolLM's second pass), with \s made explicit. */
#define RE_GPT2 \
	"'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" WS "\\p{L}\\p{N}]+" \
	"|[" WS "]+(?![^" WS "])|[" WS "]+"

/* Llama-3 / Qwen2 regexes as llama.cpp adapts them (case-insensitive contractions spelled out). */
#define RE_LLAMA3_HEAD \
	"'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]" \
	"|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+"
#define RE_LLAMA3_TAIL \
	"| ?[^" WS "\\p{L}\\p{N}]+[\\r\\n]*|[" WS "]*[\\r\\n]+" \
	"|[" WS "]+(?![^" WS "])|[" WS "]+"

typedef struct pretok_spec
{
	const char *name;			/* tokenizer.ggml.pre value */
	bool		ignore_merges;	/* whole piece in vocab => one token */
	const char *regex[MAX_REGEXES];
	bool		add_bos;		/* llama.cpp's default when the GGUF has no add_bos_token */
} pretok_spec;

/* Pre-tokenizer families supported, per llama-vocab.cpp's table. */
static const pretok_spec pretok_specs[] = {
	{"default", false, {"[\\p{P}\\$\\+<=>\\^~\\|]+", RE_GPT2, "\\p{N}+", "[0-9][0-9][0-9]"}, false},
	{"gpt-2", false, {RE_GPT2}, false},
	{"gpt2", false, {RE_GPT2}, false},
	{"phi-2", false, {RE_GPT2}, false},
	{"mpt", false, {RE_GPT2}, false},
	{"olmo", false, {RE_GPT2}, false},
	{"jais", false, {RE_GPT2}, false},
	{"smollm", false, {"\\p{N}", RE_GPT2}, false},
	{"starcoder", false, {"\\p{N}", RE_GPT2}, false},
	{"refact", false, {"\\p{N}", RE_GPT2}, false},
	{"command-r", false, {"\\p{N}", RE_GPT2}, false},
	{"codeshell", false, {"\\p{N}", RE_GPT2}, false},
	{"exaone", false, {"\\p{N}", RE_GPT2}, false},
	{"minerva-7b", false, {"\\p{N}", RE_GPT2}, false},
	{"llama3", true, {RE_LLAMA3_HEAD "|\\p{N}{1,3}" RE_LLAMA3_TAIL}, true},
	{"llama-v3", true, {RE_LLAMA3_HEAD "|\\p{N}{1,3}" RE_LLAMA3_TAIL}, true},
	{"llama-bpe", true, {RE_LLAMA3_HEAD "|\\p{N}{1,3}" RE_LLAMA3_TAIL}, true},
	{"dbrx", false, {RE_LLAMA3_HEAD "|\\p{N}{1,3}" RE_LLAMA3_TAIL}, false},
	{"smaug-bpe", false, {RE_LLAMA3_HEAD "|\\p{N}{1,3}" RE_LLAMA3_TAIL}, false},
	{"qwen2", false, {RE_LLAMA3_HEAD "|\\p{N}" RE_LLAMA3_TAIL}, false},
	{"stablelm2", false, {RE_LLAMA3_HEAD "|\\p{N}" RE_LLAMA3_TAIL}, false},
};

/* FNV-1a, 32 bit. */
static uint32_t
hash_bytes(const char *p, size_t n)
{
	uint32_t	h = 2166136261u;

	for (size_t i = 0; i < n; i++)
	{
		h ^= (uint8_t) p[i];
		h *= 16777619u;
	}
	return h;
}

static inline uint64_t
pair_hash(uint64_t key)
{
	key ^= key >> 31;
	key *= 0x9E3779B97F4A7C15ull;
	key ^= key >> 29;
	return key;
}

/* ---------- UTF-8 ---------- */

/* Length of the sequence a valid UTF-8 lead byte starts, 0 for a non-lead. */
static inline int
utf8_lead_len(uint8_t b)
{
	if (b < 0x80)
		return 1;
	if (b >= 0xC2 && b <= 0xDF)
		return 2;
	if (b >= 0xE0 && b <= 0xEF)
		return 3;
	if (b >= 0xF0 && b <= 0xF4)
		return 4;
	return 0;
}

/*
 * Whether b may be byte number pos (1-based after the lead) of a sequence
 * starting with lead: rejects overlongs, surrogates and > U+10FFFF
 * (Unicode 15, table 3-7 "well-formed UTF-8 byte sequences").
 */
static inline bool
utf8_cont_ok(uint8_t lead, int pos, uint8_t b)
{
	uint8_t		lo = 0x80,
				hi = 0xBF;

	if (pos == 1)
	{
		if (lead == 0xE0)
			lo = 0xA0;
		else if (lead == 0xED)
			hi = 0x9F;
		else if (lead == 0xF0)
			lo = 0x90;
		else if (lead == 0xF4)
			hi = 0x8F;
	}
	return b >= lo && b <= hi;
}
static int
utf8_encode(uint32_t cp, char *out)
{
	if (cp < 0x80)
	{
		out[0] = (char) cp;
		return 1;
	}
	if (cp < 0x800)
	{
		out[0] = (char) (0xC0 | (cp >> 6));
		out[1] = (char) (0x80 | (cp & 0x3F));
		return 2;
	}
	if (cp < 0x10000)
	{
		out[0] = (char) (0xE0 | (cp >> 12));
		out[1] = (char) (0x80 | ((cp >> 6) & 0x3F));
		out[2] = (char) (0x80 | (cp & 0x3F));
		return 3;
	}
	out[0] = (char) (0xF0 | (cp >> 18));
	out[1] = (char) (0x80 | ((cp >> 12) & 0x3F));
	out[2] = (char) (0x80 | ((cp >> 6) & 0x3F));
	out[3] = (char) (0x80 | (cp & 0x3F));
	return 4;
}

/* ---------- interned strings ---------- */

static int32_t
str_find(const llm_tokenizer *t, const char *p, size_t n, uint32_t h)
{
	uint32_t	i = h & t->strings.mask;

	for (;;)
	{
		uint32_t	slot = t->strings.slots[i];

		if (slot == 0)
			return -1;
		slot--;
		if (t->str_hash[slot] == h && t->str_len[slot] == n &&
			memcmp(t->arena + t->str_off[slot], p, n) == 0)
			return (int32_t) slot;
		i = (i + 1) & t->strings.mask;
	}
}

/* Id of string p[0..n) (vocabulary id when it is a token), or -1. */
static int32_t
str_lookup(const llm_tokenizer *t, const char *p, size_t n)
{
	return str_find(t, p, n, hash_bytes(p, n));
}

int32_t
tok_str_lookup(const llm_tokenizer *t, const char *p, size_t n)
{
	return str_lookup(t, p, n);
}

/*
 * Add string p[0..n) as id t->n_strings.  With replace, an equal string
 * already present is re-pointed at the new id (llama.cpp's token_to_id keeps
 * the last duplicate); without it the existing id is returned.  -1 on OOM.
 */
static int32_t
str_add(llm_tokenizer *t, const char *p, size_t n, bool replace)
{
	uint32_t	h = hash_bytes(p, n);
	uint32_t	i = h & t->strings.mask;
	int32_t		id;

	for (;;)
	{
		uint32_t	slot = t->strings.slots[i];

		if (slot == 0)
			break;
		slot--;
		if (t->str_hash[slot] == h && t->str_len[slot] == n &&
			memcmp(t->arena + t->str_off[slot], p, n) == 0)
		{
			if (!replace)
				return (int32_t) slot;
			break;
		}
		i = (i + 1) & t->strings.mask;
	}

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
	t->str_hash[id] = h;
	t->arena_len += n;
	t->strings.slots[i] = (uint32_t) id + 1;
	return id;
}

/* ---------- merges ---------- */

static const merge_entry *
merge_find(const llm_tokenizer *t, int32_t left, int32_t right)
{
	uint64_t	key = (((uint64_t) (uint32_t) left << 32) | (uint32_t) right) + 1;
	uint64_t	i = pair_hash(key) & t->merges_mask;

	for (;;)
	{
		const merge_entry *e = &t->merges[i];

		if (e->key == 0)
			return NULL;
		if (e->key == key)
			return e;
		i = (i + 1) & t->merges_mask;
	}
}

/* Record merge (left, right) -> result at rank; the first (lowest) rank wins. */
static void
merge_add(llm_tokenizer *t, int32_t left, int32_t right, int32_t rank, int32_t result)
{
	uint64_t	key = (((uint64_t) (uint32_t) left << 32) | (uint32_t) right) + 1;
	uint64_t	i = pair_hash(key) & t->merges_mask;

	for (;;)
	{
		merge_entry *e = &t->merges[i];

		if (e->key == key)
			return;
		if (e->key == 0)
		{
			e->key = key;
			e->rank = rank;
			e->result = result;
			return;
		}
		i = (i + 1) & t->merges_mask;
	}
}

/* ---------- construction ---------- */

/*
 * GPT-2 bytes_to_unicode: printable Latin-1 bytes ('!'..'~', U+00A1..U+00AC,
 * U+00AE..U+00FF) map to themselves, the other 68 bytes to U+0100.. in order.
 */
static void
build_byte_alphabet(llm_tokenizer *t)
{
	int			next_cp = 256;

	for (int i = 0; i < 512; i++)
		t->cp_byte[i] = -1;
	for (int b = 0; b < 256; b++)
	{
		bool		printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) ||
			(b >= 0xAE && b <= 0xFF);
		uint32_t	cp = printable ? (uint32_t) b : (uint32_t) next_cp++;

		t->byte_enc_len[b] = (uint8_t) utf8_encode(cp, t->byte_enc[b]);
		t->cp_byte[cp] = (int16_t) b;
	}
}

static bool
size_tables(llm_tokenizer *t, uint64_t n_strings_max, uint64_t n_merges)
{
	uint64_t	slots = 1024;
	uint64_t	mslots = 1024;

	while (slots < n_strings_max * 2)
		slots <<= 1;
	while (mslots < n_merges * 2)
		mslots <<= 1;
	t->cap_strings = (int32_t) n_strings_max;
	t->str_off = malloc(sizeof(uint64_t) * n_strings_max);
	t->str_len = malloc(sizeof(uint32_t) * n_strings_max);
	t->str_hash = malloc(sizeof(uint32_t) * n_strings_max);
	t->strings.slots = calloc(slots, sizeof(uint32_t));
	t->strings.mask = (uint32_t) (slots - 1);
	t->merges = calloc(mslots, sizeof(merge_entry));
	t->merges_mask = mslots - 1;
	return t->str_off && t->str_len && t->str_hash && t->strings.slots && t->merges;
}

/* Byte-decoded text of a normal token: each code point through the inverse byte map. */
static uint64_t
decode_token_text(const llm_tokenizer *t, const char *p, size_t n, char *out)
{
	uint64_t	w = 0;
	size_t		i = 0;

	while (i < n)
	{
		uint8_t		b = (uint8_t) p[i];
		int			len = utf8_lead_len(b);
		uint32_t	cp;

		if (len == 0 || i + len > n)
		{
			out[w++] = (char) b;	/* malformed vocabulary text: pass through */
			i++;
			continue;
		}
		if (len == 1)
			cp = b;
		else if (len == 2)
			cp = ((b & 0x1Fu) << 6) | (p[i + 1] & 0x3F);
		else if (len == 3)
			cp = ((b & 0x0Fu) << 12) | ((p[i + 1] & 0x3Fu) << 6) | (p[i + 2] & 0x3F);
		else
			cp = ((b & 0x07u) << 18) | ((p[i + 1] & 0x3Fu) << 12) |
				((p[i + 2] & 0x3Fu) << 6) | (p[i + 3] & 0x3F);
		if (cp < 512 && t->cp_byte[cp] >= 0)
			out[w++] = (char) t->cp_byte[cp];
		else
		{
			memcpy(out + w, p + i, len);	/* not a byte symbol: keep as text */
			w += len;
		}
		i += len;
	}
	return w;
}

static bool
compile_regexes(llm_tokenizer *t, const pretok_spec *spec, char *err, size_t errlen)
{
	for (int i = 0; i < MAX_REGEXES && spec->regex[i] != NULL; i++)
	{
		int			ec;
		PCRE2_SIZE	eo;
		pcre2_code *re = pcre2_compile((PCRE2_SPTR) spec->regex[i], PCRE2_ZERO_TERMINATED,
									   PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &ec, &eo, NULL);

		if (re == NULL)
		{
			PCRE2_UCHAR msg[256];

			pcre2_get_error_message(ec, msg, sizeof(msg));
			llm_set_err(err, errlen, "tokenizer: cannot compile pre-tokenizer regex %d for '%s' at offset %zu: %s",
					i, spec->name, (size_t) eo, (const char *) msg);
			return false;
		}
		/* JIT is an optimisation only: fall back to the interpreter if unavailable */
		(void) pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
		t->regex[t->n_regex++] = re;
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
			str_lookup(t, t->arena + t->str_off[i], t->str_len[i]) != i)
			continue;
		t->udef[t->n_udef++] = i;
	}
	qsort_r(t->udef, (size_t) t->n_udef, sizeof(int32_t), udef_cmp, t);
	return true;
}

/*
 * Build the tokenizer from GGUF keys tokenizer.ggml.{model, pre, tokens,
 * token_type, merges (gpt2), scores and add_space_prefix (llama),
 * bos_token_id, eos_token_id, eot_token_id, eom_token_id, add_bos_token}.
 * Everything is copied: f may be closed afterwards.  Returns NULL + message
 * for a model other than "gpt2" / "llama", an unknown pre-tokenizer,
 * missing/mistyped arrays, or allocation failure.
 */
llm_tokenizer *
llm_tokenizer_create(const gguf_file *f, char *err, size_t errlen)
{
	gguf_str	model,
				pre;
	const gguf_kv *tokens,
			   *types,
			   *merges = NULL;
	const pretok_spec *spec = NULL;
	llm_tokenizer *t;
	tok_kind	kind;
	uint64_t	n_merges = 0;
	uint64_t	total_text = 0;
	uint64_t	dec_len = 0;
	bool		add_bos;
	/* llama.cpp's end-of-generation texts (llama_vocab::impl::load, special_eog_ids) */
	static const char *const eog_texts[] = {
		"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
		"<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
		"<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
		"\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence" "\xef\xbd\x9c", "[e~["
	};
	bool		normal_slash_s;

	if (!gguf_get_str(f, "tokenizer.ggml.model", &model))
	{
		llm_set_err(err, errlen, "tokenizer: GGUF has no tokenizer.ggml.model");
		return NULL;
	}
	if (gguf_str_eq(model, "gpt2"))
		kind = TOK_BPE;
	else if (gguf_str_eq(model, "llama"))
		kind = TOK_SPM;
	else
	{
		llm_set_err(err, errlen, "tokenizer: unsupported tokenizer.ggml.model '%.*s' (only byte-level BPE \"gpt2\" "
					"and SentencePiece \"llama\")",
				(int) (model.len > 64 ? 64 : model.len), model.ptr);
		return NULL;
	}
	if (kind == TOK_BPE)
	{
		if (!gguf_get_str(f, "tokenizer.ggml.pre", &pre))
		{
			pre.ptr = "default";
			pre.len = 7;
		}
		for (size_t i = 0; i < sizeof(pretok_specs) / sizeof(pretok_specs[0]); i++)
			if (gguf_str_eq(pre, pretok_specs[i].name))
				spec = &pretok_specs[i];
		if (spec == NULL)
		{
			llm_set_err(err, errlen, "tokenizer: unsupported pre-tokenizer tokenizer.ggml.pre = '%.*s'",
					(int) (pre.len > 64 ? 64 : pre.len), pre.ptr);
			return NULL;
		}
	}

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
		merges = gguf_get_arr(f, "tokenizer.ggml.merges", GGUF_VT_STRING);
		if (merges == NULL || merges->strs == NULL || merges->arr_n > (1u << 24))
		{
			llm_set_err(err, errlen, "tokenizer: tokenizer.ggml.merges missing, too large or not a string array");
			return NULL;
		}
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
	if (kind == TOK_BPE)
		build_byte_alphabet(t);
	/* strings: vocabulary + up to three new strings per merge + 256 byte symbols */
	if (!size_tables(t, tokens->arr_n + 3 * n_merges + 256, n_merges))
		goto oom;
	t->arena_cap = total_text + 1024;
	t->arena = malloc(t->arena_cap);
	t->tok_type = malloc(tokens->arr_n);
	if (t->arena == NULL || t->tok_type == NULL)
		goto oom;

	for (uint64_t i = 0; i < tokens->arr_n; i++)
	{
		int64_t		ty = types ? gguf_arr_int(types, i) : TOKTYPE_NORMAL;

		t->tok_type[i] = (ty >= 1 && ty <= 6) ? (uint8_t) ty : TOKTYPE_NORMAL;
		/* ids 0..n_vocab-1 are the tokens themselves; lookups see the last duplicate */
		if (str_add(t, tokens->strs[i].ptr, tokens->strs[i].len, true) != (int32_t) i)
			goto oom;
	}

	/* merges "left right": intern both sides and the merged string */
	for (uint64_t i = 0; i < n_merges; i++)
	{
		gguf_str	m = merges->strs[i];
		const char *sp = m.len > 1 ? memchr(m.ptr + 1, ' ', m.len - 1) : NULL;
		size_t		ll,
					rl;
		int32_t		l,
					r,
					res;
		char		stackbuf[256];
		char	   *joined;

		if (sp == NULL)
			continue;			/* malformed entry: llama.cpp never matches it either */
		ll = (size_t) (sp - m.ptr);
		rl = m.len - ll - 1;
		l = str_add(t, m.ptr, ll, false);
		r = str_add(t, sp + 1, rl, false);
		joined = (ll + rl <= sizeof(stackbuf)) ? stackbuf : malloc(ll + rl);
		if (l < 0 || r < 0 || joined == NULL)
			goto oom;
		memcpy(joined, m.ptr, ll);
		memcpy(joined + ll, sp + 1, rl);
		res = str_add(t, joined, ll + rl, false);
		if (joined != stackbuf)
			free(joined);
		if (res < 0)
			goto oom;
		merge_add(t, l, r, (int32_t) i, res);
	}

	if (kind == TOK_BPE)
	{
		for (int b = 0; b < 256; b++)
		{
			char		c = (char) b;
			int32_t		id = str_lookup(t, &c, 1);

			t->byte_sym[b] = str_lookup(t, t->byte_enc[b], t->byte_enc_len[b]);
			t->raw_byte_tok[b] = (id >= 0 && id < t->n_vocab) ? id : -1;
		}

		if (!compile_regexes(t, spec, err, errlen))
		{
			llm_tokenizer_destroy(t);
			return NULL;
		}
		t->ignore_merges = spec->ignore_merges;
	}
	else if (!tok_spm_setup(t, f, err, errlen))
	{
		llm_tokenizer_destroy(t);
		return NULL;
	}

	t->bos = optional_token_id(f, "tokenizer.ggml.bos_token_id", t->n_vocab);
	t->eos = optional_token_id(f, "tokenizer.ggml.eos_token_id", t->n_vocab);
	if (kind == TOK_SPM)
	{
		/* llama.cpp's SentencePiece defaults when the keys are absent */
		int64_t		v;

		if (!gguf_get_int(f, "tokenizer.ggml.bos_token_id", &v) && t->n_vocab > 1)
			t->bos = 1;
		if (!gguf_get_int(f, "tokenizer.ggml.eos_token_id", &v) && t->n_vocab > 2)
			t->eos = 2;
	}
	/* llama.cpp: tokenizer.ggml.add_bos_token, else true for SentencePiece and per pre-tokenizer for BPE */
	if (!gguf_get_bool(f, "tokenizer.ggml.add_bos_token", &add_bos))
		add_bos = kind == TOK_SPM || spec->add_bos;
	t->add_bos = add_bos && t->bos >= 0;
	add_eog(t, t->eos);
	add_eog(t, optional_token_id(f, "tokenizer.ggml.eot_token_id", t->n_vocab));
	add_eog(t, optional_token_id(f, "tokenizer.ggml.eom_token_id", t->n_vocab));
	/*
	 * As llama.cpp: these texts end generation whatever their type, and count
	 * as control tokens, except "</s>" in a vocabulary that also has
	 * <|tool_response>, where it is a normal token.  (Gemma 3's USER_DEFINED
	 * "</s>" thus ends generation and is not split out of text.)
	 */
	normal_slash_s = str_lookup(t, "<|tool_response>", 16) >= 0;
	for (size_t i = 0; i < sizeof(eog_texts) / sizeof(eog_texts[0]); i++)
	{
		int32_t		id = str_lookup(t, eog_texts[i], strlen(eog_texts[i]));

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
	if (!build_udef(t))
		goto oom;

	/* byte-decoded text of every token, for detokenization */
	t->dec_off = malloc(sizeof(uint64_t) * (tokens->arr_n + 1));
	t->dec_arena = malloc(total_text + 1);
	if (t->dec_off == NULL || t->dec_arena == NULL)
		goto oom;
	for (int32_t i = 0; i < t->n_vocab; i++)
	{
		const char *p = t->arena + t->str_off[i];
		size_t		n = t->str_len[i];

		if (n > (size_t) t->max_token_bytes)
			t->max_token_bytes = (int32_t) n;
		t->dec_off[i] = dec_len;
		if (kind == TOK_SPM)
			dec_len += tok_spm_decode_text(t, i, p, n, t->dec_arena + dec_len);
		else if (t->tok_type[i] == TOKTYPE_CONTROL || t->tok_type[i] == TOKTYPE_USER_DEFINED)
		{
			memcpy(t->dec_arena + dec_len, p, n);
			dec_len += n;
		}
		else
			dec_len += decode_token_text(t, p, n, t->dec_arena + dec_len);
	}
	t->dec_off[t->n_vocab] = dec_len;
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
	for (int i = 0; i < t->n_regex; i++)
		pcre2_code_free(t->regex[i]);
	free(t->str_off);
	free(t->str_len);
	free(t->str_hash);
	free(t->arena);
	free(t->strings.slots);
	free(t->tok_type);
	free(t->dec_off);
	free(t->dec_arena);
	free(t->merges);
	free(t->udef);
	free(t->score);
	free(t);
}

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
	int32_t		id = str_lookup(t, text, strlen(text));

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

/* ---------- encoding ---------- */

typedef struct piece
{
	size_t		start;
	size_t		end;
} piece;

typedef struct bigram
{
	int32_t		rank;
	int32_t		left;
	int32_t		right;
	uint32_t	left_len;		/* symbol lengths when queued: stale if changed */
	uint32_t	right_len;
	int32_t		result;			/* string id of the merged pair */
} bigram;

/* Scratch space for one llm_tokenize call, grown as needed. */
typedef struct scratch
{
	piece	   *pieces[2];
	size_t		n_pieces[2];
	size_t		cap_pieces[2];
	/* per-symbol arrays for the current piece */
	int32_t    *sym_id;
	uint32_t   *sym_start;
	uint32_t   *sym_len;
	int32_t    *sym_prev;
	int32_t    *sym_next;
	size_t		cap_syms;
	bigram	   *heap_items;		/* storage of heap */
	llm_heap	heap;			/* pending merges of the current piece */
	char	   *enc;			/* byte-encoded piece text (ignore_merges lookup) */
	size_t		cap_enc;
	pcre2_match_data *md;
} scratch;

/* The arrays sized by reserve_syms. */
static void
free_syms(scratch *s)
{
	free(s->sym_id);
	free(s->sym_start);
	free(s->sym_len);
	free(s->sym_prev);
	free(s->sym_next);
	free(s->heap_items);
	free(s->enc);
}

static void
scratch_free(scratch *s)
{
	free(s->pieces[0]);
	free(s->pieces[1]);
	free_syms(s);
	if (s->md)
		pcre2_match_data_free(s->md);
}

static bool
push_piece(scratch *s, int which, size_t start, size_t end)
{
	if (s->n_pieces[which] == s->cap_pieces[which])
	{
		size_t		cap = s->cap_pieces[which] ? s->cap_pieces[which] * 2 : 256;
		piece	   *p = realloc(s->pieces[which], cap * sizeof(piece));

		if (p == NULL)
			return false;
		s->pieces[which] = p;
		s->cap_pieces[which] = cap;
	}
	s->pieces[which][s->n_pieces[which]].start = start;
	s->pieces[which][s->n_pieces[which]].end = end;
	s->n_pieces[which]++;
	return true;
}

static bool
reserve_syms(scratch *s, size_t n)
{
	if (n <= s->cap_syms)
		return true;
	free_syms(s);
	s->sym_id = malloc(n * sizeof(int32_t));
	s->sym_start = malloc(n * sizeof(uint32_t));
	s->sym_len = malloc(n * sizeof(uint32_t));
	s->sym_prev = malloc(n * sizeof(int32_t));
	s->sym_next = malloc(n * sizeof(int32_t));
	/* each merge queues at most two new pairs on top of the n - 1 initial ones */
	s->heap_items = malloc((3 * n + 4) * sizeof(bigram));
	s->cap_enc = 2 * n;
	s->enc = malloc(s->cap_enc);
	s->cap_syms = n;
	if (!s->sym_id || !s->sym_start || !s->sym_len || !s->sym_prev || !s->sym_next ||
		!s->heap_items || !s->enc)
	{
		s->cap_syms = 0;
		return false;
	}
	return true;
}

/* Min-heap order of llama.cpp's bigram queue: lower rank first, then leftmost. */
static bool
bigram_before(const void *pa, const void *pb)
{
	const bigram *a = pa;
	const bigram *b = pb;

	return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

static void
queue_pair(const llm_tokenizer *t, scratch *s, int32_t left, int32_t right)
{
	const merge_entry *m;
	bigram		b;

	if (left < 0 || right < 0 || s->sym_id[left] < 0 || s->sym_id[right] < 0)
		return;
	m = merge_find(t, s->sym_id[left], s->sym_id[right]);
	if (m == NULL)
		return;
	b.rank = m->rank;
	b.left = left;
	b.right = right;
	b.left_len = s->sym_len[left];
	b.right_len = s->sym_len[right];
	b.result = m->result;
	llm_heap_push(&s->heap, &b);
}

/* BPE-merge one pre-token piece text[0..n) and emit its ids. */
static bool
bpe_piece(const llm_tokenizer *t, scratch *s, const uint8_t *text, size_t n, emitter *e)
{
	int32_t		first = 0;

	if (n == 0)
		return true;
	if (!reserve_syms(s, n))
		return false;

	if (t->ignore_merges)
	{
		size_t		w = 0;
		int32_t		id;

		for (size_t i = 0; i < n; i++)
		{
			memcpy(s->enc + w, t->byte_enc[text[i]], t->byte_enc_len[text[i]]);
			w += t->byte_enc_len[text[i]];
		}
		id = str_lookup(t, s->enc, w);
		if (id >= 0 && id < t->n_vocab)
		{
			emit(e, id);
			return true;
		}
	}

	/* one symbol per byte: GPT-2 encoding maps each byte to one code point */
	for (size_t i = 0; i < n; i++)
	{
		s->sym_id[i] = t->byte_sym[text[i]];
		s->sym_start[i] = (uint32_t) i;
		s->sym_len[i] = 1;
		s->sym_prev[i] = (int32_t) i - 1;
		s->sym_next[i] = (i + 1 < n) ? (int32_t) i + 1 : -1;
	}
	llm_heap_init(&s->heap, s->heap_items, sizeof(bigram), bigram_before);
	for (size_t i = 1; i < n; i++)
		queue_pair(t, s, (int32_t) i - 1, (int32_t) i);

	while (s->heap.n > 0)
	{
		bigram		b;
		int32_t		l,
					r;

		llm_heap_pop(&s->heap, &b);
		l = b.left;
		r = b.right;

		if (s->sym_len[l] != b.left_len || s->sym_len[r] != b.right_len ||
			s->sym_len[l] == 0 || s->sym_len[r] == 0)
			continue;			/* outdated pair */
		s->sym_id[l] = b.result;
		s->sym_len[l] += s->sym_len[r];
		s->sym_len[r] = 0;
		s->sym_next[l] = s->sym_next[r];
		if (s->sym_next[r] >= 0)
			s->sym_prev[s->sym_next[r]] = l;
		queue_pair(t, s, s->sym_prev[l], l);
		queue_pair(t, s, l, s->sym_next[l]);
	}

	for (int32_t i = first; i >= 0; i = s->sym_next[i])
	{
		int32_t		id = s->sym_id[i];

		if (id >= 0 && id < t->n_vocab)
			emit(e, id);
		else
		{
			/* not a token: single-byte tokens of the encoded text, skipping misses */
			for (uint32_t k = 0; k < s->sym_len[i]; k++)
			{
				uint8_t		b = text[s->sym_start[i] + k];

				for (int j = 0; j < t->byte_enc_len[b]; j++)
				{
					int32_t		bt = t->raw_byte_tok[(uint8_t) t->byte_enc[b][j]];

					if (bt >= 0)
						emit(e, bt);
				}
			}
		}
	}
	return true;
}

/*
 * Split every piece of s->pieces[from] with regex re into s->pieces[to]:
 * matches and the gaps between them each become a piece.  -1 on error.
 */
static int
split_pieces(const llm_tokenizer *t, scratch *s, const pcre2_code *re, const char *text,
			 int from, int to, char *err, size_t errlen)
{
	s->n_pieces[to] = 0;
	for (size_t pi = 0; pi < s->n_pieces[from]; pi++)
	{
		piece		p = s->pieces[from][pi];
		PCRE2_SPTR	subj = (PCRE2_SPTR) (text + p.start);
		size_t		len = p.end - p.start;
		size_t		pos = 0;
		size_t		prev_end = 0;

		while (pos < len)
		{
			int			rc = pcre2_match(re, subj, len, pos, PCRE2_NO_UTF_CHECK, s->md, NULL);
			PCRE2_SIZE *ov;

			if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
				rc = pcre2_match(re, subj, len, pos, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, s->md, NULL);
			if (rc == PCRE2_ERROR_NOMATCH)
				break;
			if (rc < 0)
			{
				PCRE2_UCHAR msg[256];

				pcre2_get_error_message(rc, msg, sizeof(msg));
				llm_set_err(err, errlen, "tokenizer: pre-tokenizer regex failed: %s", (const char *) msg);
				return -1;
			}
			ov = pcre2_get_ovector_pointer(s->md);
			if (ov[1] == ov[0])
			{
				/* empty match: step over one character, leave it in the gap */
				pos = ov[0] + 1;
				while (pos < len && (subj[pos] & 0xC0) == 0x80)
					pos++;
				continue;
			}
			if (ov[0] > prev_end && !push_piece(s, to, p.start + prev_end, p.start + ov[0]))
				goto oom;
			if (!push_piece(s, to, p.start + ov[0], p.start + ov[1]))
				goto oom;
			prev_end = pos = ov[1];
		}
		if (prev_end < len && !push_piece(s, to, p.start + prev_end, p.end))
			goto oom;
	}
	return 0;

oom:
	llm_set_err(err, errlen, "tokenizer: out of memory");
	return -1;
}

/* Pre-tokenize text[0..len) with the regexes and BPE every piece.  0, or -1 + err. */
static int
encode_bpe(const llm_tokenizer *t, scratch *s, const char *text, size_t len, emitter *e,
		   char *err, size_t errlen)
{
	int			cur = 0;

	s->n_pieces[0] = 0;
	if (!push_piece(s, 0, 0, len))
		goto oom;
	for (int r = 0; r < t->n_regex; r++)
	{
		if (split_pieces(t, s, t->regex[r], text, cur, 1 - cur, err, errlen) < 0)
			return -1;
		cur = 1 - cur;
	}
	for (size_t i = 0; i < s->n_pieces[cur]; i++)
	{
		piece		p = s->pieces[cur][i];

		if (!bpe_piece(t, s, (const uint8_t *) text + p.start, p.end - p.start, e))
			goto oom;
	}
	return 0;

oom:
	llm_set_err(err, errlen, "tokenizer: out of memory");
	return -1;
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
 * each piece; SentencePiece: tokenizer_spm.c).  Returns the number of ids
 * (writing at most cap to out), or -1 with err set for ill-formed UTF-8
 * (offset reported) or allocation failure.
 */
int64_t
llm_tokenize(const llm_tokenizer *t, const char *text, size_t len,
			 int32_t *out, int64_t cap, char *err, size_t errlen)
{
	scratch		s;
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

	memset(&s, 0, sizeof(s));
	if (t->n_udef > 0)
	{
		if (!split_user_defined(t, text, len, &frags))
			goto oom;
		fv = frags.v;
		nf = frags.n;
	}
	if (t->kind == TOK_BPE && (s.md = pcre2_match_data_create(4, NULL)) == NULL)
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
			rc = encode_bpe(t, &s, text + fv[i].start, fv[i].end - fv[i].start, &e, err, errlen);
		else if (!tok_spm_encode(t, text + fv[i].start, fv[i].end - fv[i].start,
								 t->add_space_prefix && prev_special, &e))
			goto oom;
		prev_special = false;
	}
	scratch_free(&s);
	free(frags.v);
	return rc == 0 ? e.n : -1;

oom:
	scratch_free(&s);
	free(frags.v);
	llm_set_err(err, errlen, "tokenizer: out of memory");
	return -1;
}

/* ---------- decoding ---------- */

/* Bytes token id stands for: byte-decoded for normal tokens, the text itself for special ones. */
int
llm_token_to_bytes(const llm_tokenizer *t, int32_t id, char *out, int cap)
{
	uint64_t	n;

	if (id < 0 || id >= t->n_vocab)
		return -1;
	n = t->dec_off[id + 1] - t->dec_off[id];
	if (cap > 0)
		memcpy(out, t->dec_arena + t->dec_off[id], n < (uint64_t) cap ? n : (uint64_t) cap);
	return (int) n;
}

void
llm_detok_init(llm_detok *d)
{
	d->n_pending = 0;
}

static const char replacement_char[3] = {(char) 0xEF, (char) 0xBF, (char) 0xBD};	/* U+FFFD */

/*
 * Append the bytes of id to the held partial character and emit every
 * complete character.  An ill-formed sequence becomes one U+FFFD per maximal
 * ill-formed subpart (Unicode "substitution of maximal subparts"); only an
 * incomplete but still valid prefix (at most 3 bytes) is held back.  State is
 * left untouched when -1 is returned.
 */
int
llm_detok_push(const llm_tokenizer *t, llm_detok *d, int32_t id, char *out, int cap)
{
	const uint8_t *src;
	size_t		n;
	uint8_t		pend[4];
	int			np = d->n_pending;
	char		stackbuf[1024];
	char	   *buf;
	size_t		bound,
				w = 0;

	if (id < 0 || id >= t->n_vocab || np < 0 || np > 3)
		return -1;
	src = (const uint8_t *) t->dec_arena + t->dec_off[id];
	n = t->dec_off[id + 1] - t->dec_off[id];
	memcpy(pend, d->pending, np);
	bound = 3 * (n + np) + 4;
	buf = bound <= sizeof(stackbuf) ? stackbuf : malloc(bound);
	if (buf == NULL)
		return -1;

	for (size_t i = 0; i < n; i++)
	{
		uint8_t		b = src[i];

		if (np > 0)
		{
			if (utf8_cont_ok(pend[0], np, b))
			{
				pend[np++] = b;
				if (np == utf8_lead_len(pend[0]))
				{
					memcpy(buf + w, pend, np);
					w += np;
					np = 0;
				}
				continue;
			}
			memcpy(buf + w, replacement_char, 3);
			w += 3;
			np = 0;
			/* b starts afresh below */
		}
		if (b < 0x80)
			buf[w++] = (char) b;
		else if (utf8_lead_len(b) > 0)
			pend[np++] = b;
		else
		{
			memcpy(buf + w, replacement_char, 3);
			w += 3;
		}
	}

	if (w > (size_t) (cap < 0 ? 0 : cap))
	{
		if (buf != stackbuf)
			free(buf);
		return -1;
	}
	memcpy(out, buf, w);
	if (buf != stackbuf)
		free(buf);
	memcpy(d->pending, pend, np);
	d->n_pending = np;
	return (int) w;
}

/* End of stream: a held incomplete character becomes U+FFFD.  -1 if cap < 3 and something is held. */
int
llm_detok_flush(llm_detok *d, char *out, int cap)
{
	if (d->n_pending <= 0)
	{
		d->n_pending = 0;
		return 0;
	}
	if (cap < 3)
		return -1;
	memcpy(out, replacement_char, 3);
	d->n_pending = 0;
	return 3;
}
