/*
 * tokenizer_internal.h — the tokenizer's state, shared by its two encoders:
 * byte-level BPE (tokenizer.c, tokenizer.ggml.model = "gpt2") and
 * SentencePiece BPE (tokenizer_spm.c, tokenizer.ggml.model = "llama").
 * Not part of the engine's interface: only tokenizer*.c include it.
 *
 * Vocabulary strings are interned: string id i < n_vocab is token i (a
 * lookup sees the LAST of duplicate texts, as llama.cpp's token_to_id);
 * byte-level BPE adds ids >= n_vocab for merge sides that are not tokens.
 * Everything is built once by llm_tokenizer_create and read-only after, so
 * one tokenizer may be used by many threads at once.
 */
#ifndef LLM_TOKENIZER_INTERNAL_H
#define LLM_TOKENIZER_INTERNAL_H

#include "tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

/* tokenizer.ggml.token_type values (llama.cpp llama_token_type) */
#define TOKTYPE_NORMAL			1
#define TOKTYPE_UNKNOWN			2
#define TOKTYPE_CONTROL			3
#define TOKTYPE_USER_DEFINED	4
#define TOKTYPE_UNUSED			5
#define TOKTYPE_BYTE			6

#define MAX_REGEXES		4
#define MAX_EOG			16

typedef enum tok_kind
{
	TOK_BPE = 1,				/* "gpt2": GPT-2 byte alphabet, merge ranks, regexes */
	TOK_SPM						/* "llama": ▁ for spaces, merges by score, <0xNN> bytes */
} tok_kind;

/* Open-addressing hash set of interned strings: slot = string id + 1, 0 = empty. */
typedef struct str_table
{
	uint32_t   *slots;
	uint32_t	mask;
} str_table;

/* Open-addressing map (left id, right id) -> merge rank and merged string id. */
typedef struct merge_entry
{
	uint64_t	key;			/* (left << 32 | right) + 1; 0 = empty slot */
	int32_t		rank;
	int32_t		result;
} merge_entry;

struct llm_tokenizer
{
	tok_kind	kind;
	int32_t		n_vocab;
	int32_t		n_strings;		/* vocabulary + extra strings from merges */
	int32_t		cap_strings;
	/* interned string i: arena bytes [str_off[i], str_off[i] + str_len[i]) */
	uint64_t   *str_off;
	uint32_t   *str_len;
	uint32_t   *str_hash;
	char	   *arena;
	uint64_t	arena_len;
	uint64_t	arena_cap;
	str_table	strings;

	uint8_t    *tok_type;		/* n_vocab */
	/* bytes each token stands for (byte-decoded): dec_arena [dec_off[i], dec_off[i+1]) */
	uint64_t   *dec_off;
	char	   *dec_arena;
	int32_t		max_token_bytes;	/* longest vocabulary string (llm_tokenizer_max_token_bytes) */

	/*
	 * USER_DEFINED tokens, longest text first (then lowest id): split out of
	 * text before encoding, as llama.cpp's tokenizer_st_partition does even
	 * without special-token parsing.
	 */
	int32_t    *udef;
	int32_t		n_udef;

	/* byte-level BPE */
	merge_entry *merges;
	uint64_t	merges_mask;
	char		byte_enc[256][3];	/* UTF-8 of the code point byte b maps to */
	uint8_t		byte_enc_len[256];
	int32_t		byte_sym[256];	/* string id of byte_enc[b], or -1 */
	int32_t		raw_byte_tok[256];	/* vocab id of the 1-byte string "b", or -1 */
	int16_t		cp_byte[512];	/* inverse map for code points < 512, -1 if none */
	pcre2_code *regex[MAX_REGEXES];
	int			n_regex;
	bool		ignore_merges;

	/* SentencePiece BPE */
	float	   *score;			/* n_vocab: tokenizer.ggml.scores */
	int32_t		spm_byte_tok[256];	/* byte-fallback token of byte b: <0xNN>, else the 1-byte token */
	bool		add_space_prefix;	/* a space before text that starts a fragment */

	int32_t		bos;
	int32_t		eos;
	bool		add_bos;
	int32_t		eog[MAX_EOG];
	int			n_eog;
};

/* Output ids: count all, store the first cap (llm_tokenize's contract). */
typedef struct emitter
{
	int32_t    *out;
	int64_t		cap;
	int64_t		n;
} emitter;

static inline void
emit(emitter *e, int32_t id)
{
	if (e->n < e->cap)
		e->out[e->n] = id;
	e->n++;
}

/* Id of interned string p[0..n) (a vocabulary id when < n_vocab), or -1. */
int32_t		tok_str_lookup(const llm_tokenizer *t, const char *p, size_t n);

/*
 * SentencePiece setup, after the vocabulary and token types are loaded:
 * reads tokenizer.ggml.scores and tokenizer.ggml.add_space_prefix, finds the
 * byte-fallback tokens.  false + err when scores are missing or mistyped or a
 * byte has no fallback token.
 */
bool		tok_spm_setup(llm_tokenizer *t, const gguf_file *f, char *err, size_t errlen);

/* Bytes a SentencePiece token stands for, written to out (at most n bytes); returns the count. */
uint64_t	tok_spm_decode_text(const llm_tokenizer *t, int32_t id, const char *p, size_t n, char *out);

/*
 * Encode one fragment of valid UTF-8 text (no USER_DEFINED token inside it)
 * and emit its ids; prefix_space adds the leading space of add_space_prefix.
 * false on allocation failure.
 */
bool		tok_spm_encode(const llm_tokenizer *t, const char *text, size_t len, bool prefix_space,
						   emitter *e);

#endif
