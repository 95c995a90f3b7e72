/*
 * bpe.h — the byte-level BPE encoder (tokenizer.ggml.model = "gpt2"):
 * pre-tokenizer regexes chosen by tokenizer.ggml.pre, GPT-2's byte
 * alphabet, merge ranks.  Built on the vocabulary (vocab.h); used only by
 * the front door (tokenizer.c).  Everything set up here is read-only after
 * llm_tokenizer_create, so encoding from many threads at once is safe; each
 * llm_tokenize call brings its own tok_bpe_scratch.
 */
#ifndef LLM_TEXT_BPE_H
#define LLM_TEXT_BPE_H

#include "pretok.h"

/*
 * The pre-tokenizer tokenizer.ggml.pre names ("default" when absent), or
 * NULL + message listing the known ones when unsupported.
 */
const pretok_spec *tok_bpe_pretok(const gguf_file *f, char *err, size_t errlen);

/* Whether llama.cpp adds BOS for this pre-tokenizer when the GGUF has no add_bos_token. */
bool		tok_bpe_pretok_add_bos(const pretok_spec *spec);

/* tokenizer.ggml.merges, or NULL + message when missing, not a string array or too large. */
const gguf_kv *tok_bpe_merges(const gguf_file *f, char *err, size_t errlen);

/*
 * BPE setup after tok_vocab_init (which must leave room for 3 strings per
 * merge + 256): the byte alphabet, every merge "left right" interned with
 * its rank, the byte symbols, the compiled regexes of spec.  false + message
 * on allocation failure or a regex PCRE2 refuses.
 */
bool		tok_bpe_setup(llm_tokenizer *t, const pretok_spec *spec, const gguf_kv *merges,
						  char *err, size_t errlen);

/* Bytes a byte-level BPE token stands for (special tokens: their text); tok_decode_fn. */
uint64_t	tok_bpe_decode_text(const llm_tokenizer *t, int32_t id, const char *p, size_t n, char *out);

/* Free the BPE fields of t (merges, regexes). */
void		tok_bpe_free(llm_tokenizer *t);

/* Per-call working memory of the encoder (pieces, symbols, the merge queue, PCRE2 match data). */
typedef struct tok_bpe_scratch tok_bpe_scratch;

tok_bpe_scratch *tok_bpe_scratch_new(void);	/* NULL on allocation failure */
void		tok_bpe_scratch_free(tok_bpe_scratch *s);

/*
 * Pre-tokenize one fragment text[0..len) of valid UTF-8 (no USER_DEFINED
 * token inside it) with the regexes, BPE every piece and emit the ids.
 * 0, or -1 + message (regex failure, allocation failure).
 */
int			tok_bpe_encode(const llm_tokenizer *t, tok_bpe_scratch *s, const char *text, size_t len,
						   emitter *e, char *err, size_t errlen);

#endif
