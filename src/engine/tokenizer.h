/*
 * tokenizer.h — byte-level BPE tokenizer built from GGUF metadata.
 *
 * Follows llama.cpp's llama-vocab.cpp behaviour for tokenizer.ggml.model =
 * "gpt2": vocabulary (tokenizer.ggml.tokens), token types
 * (tokenizer.ggml.token_type), merge ranks (tokenizer.ggml.merges), and the
 * pre-tokenizer regexes chosen by tokenizer.ggml.pre (PCRE2).  User text is
 * always tokenized as plain text: special/control tokens are never matched
 * inside it; only the chat template (chat_template.h) emits special ids.
 */
#ifndef LLM_TOKENIZER_H
#define LLM_TOKENIZER_H

#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>

#include "gguf.h"

typedef struct llm_tokenizer llm_tokenizer;

/* Build from an open GGUF file; NULL + message on unsupported/malformed metadata. */
llm_tokenizer *llm_tokenizer_create(const gguf_file *f, char *err, size_t errlen);
void		llm_tokenizer_destroy(llm_tokenizer *t);

int32_t		llm_tokenizer_n_vocab(const llm_tokenizer *t);
int32_t		llm_tokenizer_bos(const llm_tokenizer *t);	/* -1 if none */
int32_t		llm_tokenizer_eos(const llm_tokenizer *t);
/* Id of a special token by its exact text ("<|im_end|>"), or -1. */
int32_t		llm_tokenizer_special_id(const llm_tokenizer *t, const char *text);
/* True for ids generation must stop at: EOS, EOT, <|im_end|>, <end_of_turn>, ... */
bool		llm_tokenizer_is_eog(const llm_tokenizer *t, int32_t id);

/*
 * Tokenize len bytes of UTF-8 text as plain text (no BOS added, special
 * tokens not parsed).  Writes at most cap ids to out and returns the total
 * number of tokens (may exceed cap: call again with a larger buffer), or -1
 * with err set (invalid UTF-8).
 */
int64_t		llm_tokenize(const llm_tokenizer *t, const char *text, size_t len,
						 int32_t *out, int64_t cap, char *err, size_t errlen);

/*
 * Bytes of token id as it appears in text (byte-level decoded; special tokens
 * give their text).  Returns the byte count (may exceed cap) or -1 for an
 * invalid id.
 */
int			llm_token_to_bytes(const llm_tokenizer *t, int32_t id, char *out, int cap);

/*
 * Incremental detokenizer: feed ids one at a time, get back only complete
 * UTF-8 characters; bytes of a partial character are held until completed.
 * Invalid sequences (a token run that can never form valid UTF-8) are emitted
 * as U+FFFD so output is always valid UTF-8.
 */
typedef struct llm_detok
{
	char		pending[8];
	int			n_pending;
} llm_detok;

void		llm_detok_init(llm_detok *d);
/* Appends decoded text of id to out (cap bytes); returns bytes written or -1 if cap too small / bad id. */
int			llm_detok_push(const llm_tokenizer *t, llm_detok *d, int32_t id, char *out, int cap);
/* Flushes held bytes (as U+FFFD) at end of stream; returns bytes written. */
int			llm_detok_flush(llm_detok *d, char *out, int cap);

#endif
