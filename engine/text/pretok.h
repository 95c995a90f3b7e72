/*
 * pretok.h — byte-level BPE pre-tokenizers (tokenizer.ggml.pre): one table
 * row per name, each with llama.cpp's regex list verbatim
 * (src/llama-vocab.cpp, llm_tokenizer_bpe), and the way each regex is run
 * so that the pieces are llama.cpp's (src/unicode.cpp,
 * unicode_regex_split):
 *
 *  - PRETOK_RX_UCP: the regexes llama.cpp runs through a hand-written
 *    splitter (GPT-2's, Llama 3's, Qwen2's, Qwen3.5's) run as an equivalent
 *    PCRE2 pattern in UTF + UCP mode, \s spelled out as llama.cpp's
 *    White_Space set;
 *  - PRETOK_RX_COLLAPSED: a regex with Unicode categories (\p{L}, \p{N},
 *    \p{P}, \p{M}, \p{S}, \p{Lu} ...) runs, as in llama.cpp, over the text
 *    "collapsed" to one byte per code point (ASCII as is, other White_Space
 *    0x0B, letters 0xD2, numbers 0xD1, punctuation 0xD3, marks 0xD4,
 *    symbols 0xD5, anything else 0xD0), the regex's categories rewritten to
 *    those bytes plus their ASCII members; PCRE2 in byte mode.  (So every
 *    \p{L*} subcategory means any letter, as in llama.cpp.)
 *  - PRETOK_RX_WIDE: any other regex runs over the code points, non-ASCII
 *    White_Space replaced by 0x0B, \s meaning ASCII whitespace; PCRE2 in
 *    UTF mode without UCP, $ at the end only (std::regex's ECMAScript).
 *
 * Code point classes come from llama.cpp's tables (unicode_data.h); the
 * UCP patterns use PCRE2's.  Tables are constant; used by bpe.c only.
 */
#ifndef LLM_TEXT_PRETOK_H
#define LLM_TEXT_PRETOK_H

#include "vocab.h"

typedef enum pretok_rx_mode
{
	PRETOK_RX_UCP = 0,
	PRETOK_RX_COLLAPSED,
	PRETOK_RX_WIDE
} pretok_rx_mode;

/* One pre-tokenizer: llama.cpp's regex list for its name and its defaults. */
typedef struct pretok_spec
{
	const char *name;			/* tokenizer.ggml.pre value */
	const char *regex[MAX_REGEXES];	/* llama.cpp's, applied in order; NULL-terminated */
	bool		ignore_merges;	/* a whole piece that is a token is that token */
	bool		add_bos;		/* llama.cpp's default when the GGUF has no add_bos_token */
} pretok_spec;

/* The row for name, or NULL. */
const pretok_spec *tok_pretok_find(const char *name, size_t len);

/* The known names, comma-separated, into buf (cap bytes, NUL-terminated). */
void		tok_pretok_names(char *buf, size_t cap);

/*
 * Compile spec's regexes into t->regex / t->regex_mode (the mode of each
 * chosen as above).  false + message when PCRE2 refuses one.
 */
bool		tok_pretok_compile(llm_tokenizer *t, const pretok_spec *spec, char *err, size_t errlen);

/*
 * The subject a regex of mode (COLLAPSED or WIDE) runs on, for valid UTF-8
 * text[0..len): written to subj (room for len bytes), with map[k] = the
 * offset in text of subject byte k for every k that starts a code point,
 * and map[subject length] = len.  Returns the subject length.
 */
size_t		tok_pretok_subject(pretok_rx_mode mode, const char *text, size_t len, char *subj, uint32_t *map);

#endif
