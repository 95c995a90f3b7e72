/*
 * vocab.h — the tokenizer's state and its vocabulary, below the encoders:
 * byte-level BPE (bpe.c, tokenizer.ggml.model = "gpt2"), SentencePiece
 * BPE (spm.c, tokenizer.ggml.model = "llama") and WordPiece (wordpiece.c,
 * tokenizer.ggml.model = "bert").  vocab.c owns the interned strings, token
 * types, special ids and the decoded text of every token; an encoder reads
 * them and owns only its own fields of struct llm_tokenizer.  Includes point
 * one way: tokenizer.c (the front door) -> bpe.h / spm.h / wordpiece.h ->
 * vocab.h; vocab.c includes no encoder.  Not part of the engine's interface:
 * only engine/text/ includes it.
 *
 * Vocabulary strings are interned: string id i < n_vocab is token i (a
 * lookup sees the LAST of duplicate texts, as llama.cpp's token_to_id);
 * byte-level BPE adds ids >= n_vocab for merge sides that are not tokens.
 * Everything is built once by llm_tokenizer_create and read-only after, so
 * one tokenizer may be used by many threads at once.
 */
#ifndef LLM_TEXT_VOCAB_H
#define LLM_TEXT_VOCAB_H

#include "tokenizer.h"
#include "engine/util/hash.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

/* tokenizer.ggml.token_type values (llama.cpp llama_token_type) */
#define TOKTYPE_NORMAL			1
#define TOKTYPE_UNKNOWN			2
#define TOKTYPE_CONTROL			3
#define TOKTYPE_USER_DEFINED	4
#define TOKTYPE_UNUSED			5
#define TOKTYPE_BYTE			6

#define MAX_REGEXES		8		/* pre-tokenizer regexes, plus the NULL ending the list */
#define MAX_EOG			16

typedef enum tok_kind
{
	TOK_BPE = 1,				/* "gpt2": GPT-2 byte alphabet, merge ranks, regexes */
	TOK_SPM,					/* "llama": ▁ for spaces, merges by score, <0xNN> bytes */
	TOK_WPM						/* "bert": WordPiece, longest match per word, [UNK] */
} tok_kind;

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
	llm_hash_index strings;		/* interned strings by FNV-1a 32 of their bytes */

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
	uint8_t		regex_mode[MAX_REGEXES];	/* pretok_rx_mode of each (pretok.h) */
	int			n_regex;
	bool		ignore_merges;

	/* SentencePiece BPE */
	float	   *score;			/* n_vocab: tokenizer.ggml.scores */
	int32_t		spm_byte_tok[256];	/* byte-fallback token of byte b: <0xNN>, else the 1-byte token */
	bool		add_space_prefix;	/* a space before text that starts a fragment */

	/* WordPiece */
	int32_t		wpm_max_len;	/* longest vocabulary text in bytes (the match window) */
	bool		wpm_lowercase;	/* tokenizer.ggml.normalizer.lowercase */
	bool		wpm_strip_accents;	/* tokenizer.ggml.normalizer.strip_accents */

	int32_t		bos;			/* WordPiece: [CLS] */
	int32_t		eos;
	int32_t		unk;			/* -1 if none */
	int32_t		sep;			/* -1 if none; WordPiece: [SEP] */
	bool		add_bos;
	bool		add_eos;		/* llm_tokenize_special appends EOS */
	bool		add_sep;		/* llm_tokenize_special appends SEP */
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
 * Allocate the string table for the n_vocab (already set) tokens plus
 * extra_strings more (an encoder's merge sides), the arena for total_text
 * bytes of token text, and the token types; intern every token text as its
 * id (a lookup sees the last duplicate).  false on allocation failure.
 */
bool		tok_vocab_init(llm_tokenizer *t, const gguf_kv *tokens, const gguf_kv *types,
						   uint64_t extra_strings, uint64_t total_text);

/* Id of interned string p[0..n) (a vocabulary id when < n_vocab), or -1. */
int32_t		tok_str_lookup(const llm_tokenizer *t, const char *p, size_t n);

/*
 * Intern p[0..n) as the next string id.  With replace, an equal string
 * already present is re-pointed at the new id; without it the existing id
 * is returned.  -1 when the capacity given to tok_vocab_init is exhausted or
 * on allocation failure.
 */
int32_t		tok_str_add(llm_tokenizer *t, const char *p, size_t n, bool replace);

/*
 * After the encoder's setup: BOS / EOS (SentencePiece defaults when absent),
 * add_bos (tokenizer.ggml.add_bos_token, else default_add_bos), the
 * end-of-generation ids and texts, and the USER_DEFINED split list.  false
 * on allocation failure.
 */
bool		tok_vocab_specials(llm_tokenizer *t, const gguf_file *f, bool default_add_bos);

/* Bytes token id (text p[0..n)) stands for, written to out (at most n bytes); returns the count. */
typedef uint64_t (*tok_decode_fn) (const llm_tokenizer *t, int32_t id, const char *p, size_t n, char *out);

/*
 * The decoded text of every token through the encoder's decode (read by
 * llm_token_to_bytes and the detokenizer) and max_token_bytes.  total_text
 * bounds the decoded bytes (decoding never lengthens a token's text).  false
 * on allocation failure.
 */
bool		tok_vocab_decode_all(llm_tokenizer *t, tok_decode_fn decode, uint64_t total_text);

/* Free the vocabulary's fields (not the encoders', not t itself). */
void		tok_vocab_free(llm_tokenizer *t);

#endif
