/*
 * spm.h — the SentencePiece BPE encoder (tokenizer.ggml.model = "llama").
 * Built on the vocabulary (vocab.h); used only by the front door
 * (tokenizer.c).  Read-only after llm_tokenizer_create.
 */
#ifndef LLM_TEXT_SPM_H
#define LLM_TEXT_SPM_H

#include "vocab.h"

/*
 * SentencePiece setup, after the vocabulary and token types are loaded:
 * reads tokenizer.ggml.scores and tokenizer.ggml.add_space_prefix, finds the
 * byte-fallback tokens.  false + err when scores are missing or mistyped or a
 * byte has no fallback token.
 */
bool		tok_spm_setup(llm_tokenizer *t, const gguf_file *f, char *err, size_t errlen);

/* Bytes a SentencePiece token stands for, written to out (at most n bytes); returns the count (tok_decode_fn). */
uint64_t	tok_spm_decode_text(const llm_tokenizer *t, int32_t id, const char *p, size_t n, char *out);

/* Free the SentencePiece fields of t (scores). */
void		tok_spm_free(llm_tokenizer *t);

/*
 * Encode one fragment of valid UTF-8 text (no USER_DEFINED token inside it)
 * and emit its ids; prefix_space adds the leading space of add_space_prefix.
 * false on allocation failure.
 */
bool		tok_spm_encode(const llm_tokenizer *t, const char *text, size_t len, bool prefix_space,
						   emitter *e);

#endif
