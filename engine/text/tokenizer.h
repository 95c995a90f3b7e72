/*
 * tokenizer.h — the model's tokenizer, built from GGUF metadata.
 *
 * Follows llama.cpp's llama-vocab.cpp for three tokenizer.ggml.model values:
 *  - "gpt2", byte-level BPE (SmolLM2, Llama 3, Qwen2): vocabulary
 *    (tokenizer.ggml.tokens), token types (tokenizer.ggml.token_type), merge
 *    ranks (tokenizer.ggml.merges) and the pre-tokenizer regexes chosen by
 *    tokenizer.ggml.pre (PCRE2);
 *  - "llama", SentencePiece BPE (Gemma, Llama 2, Mistral): tokens merged by
 *    tokenizer.ggml.scores, "▁" for spaces, <0xNN> byte-fallback tokens,
 *    tokenizer.ggml.add_space_prefix, no pre-tokenizer;
 *  - "bert", WordPiece (BERT, BGE and other embedding models): words split
 *    at whitespace and punctuation, each cut into the longest vocabulary
 *    pieces, [UNK] for a word that cannot be; [CLS] / [SEP] around the text
 *    with llm_tokenize_special.
 * User text is always tokenized as plain text: CONTROL (and UNKNOWN) tokens
 * are never matched inside it, so only the chat template (chat_template.h)
 * emits them (WordPiece's [UNK] excepted: an unknown word gives it, as in
 * llama.cpp).  USER_DEFINED tokens (Gemma: runs of spaces, tabs, newlines,
 * HTML tags) are text pieces: they are split out of the text first, as
 * llama.cpp does.  No BOS is added by llm_tokenize: a raw prompt starts with
 * llm_tokenizer_bos() when llm_tokenizer_add_bos() says so.
 *
 * A tokenizer is immutable after creation and may be shared between threads.
 */
#ifndef LLM_TOKENIZER_H
#define LLM_TOKENIZER_H

#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>

#include "engine/gguf/gguf.h"

typedef struct llm_tokenizer llm_tokenizer;

/* Build from an open GGUF file; NULL + message on unsupported/malformed metadata. */
llm_tokenizer *llm_tokenizer_create(const gguf_file *f, char *err, size_t errlen);
void		llm_tokenizer_destroy(llm_tokenizer *t);

int32_t		llm_tokenizer_n_vocab(const llm_tokenizer *t);
int32_t		llm_tokenizer_bos(const llm_tokenizer *t);	/* -1 if none */
/*
 * The most bytes of text one token can stand for: the longest vocabulary
 * string.  A bound, never an estimate: the byte-level encoding (a byte is
 * 1 or 2 bytes of its string), SentencePiece's space marker (3 bytes for a
 * space) and byte fallback (<0xNN>) only lengthen a token's string beside
 * the text it covers, and no byte of the text is dropped.  So len bytes of
 * text are at least len / this many tokens, known before tokenizing.
 * 0 for WordPiece, where no such bound exists (one [UNK] stands for a whole
 * unknown word; whitespace and control characters give no token).
 */
int32_t		llm_tokenizer_max_token_bytes(const llm_tokenizer *t);
int32_t		llm_tokenizer_eos(const llm_tokenizer *t);
/*
 * Whether a prompt given as raw text starts with llm_tokenizer_bos(), as
 * llama.cpp's tokenization with add_special does: tokenizer.ggml.add_bos_token
 * when the GGUF has it, else true for SentencePiece and for the Llama-3
 * pre-tokenizers, false for other BPE ones.  Never true without a BOS id.
 * SmolLM2: false; Gemma 3: true (BOS 2).
 */
bool		llm_tokenizer_add_bos(const llm_tokenizer *t);
/* Id of a special (CONTROL or USER_DEFINED) token by its exact text ("<|im_end|>"), or -1. */
int32_t		llm_tokenizer_special_id(const llm_tokenizer *t, const char *text);
/* True for CONTROL / UNKNOWN ids (<bos>, <|im_start|>, <start_of_turn>): llm_tokenize never produces them. */
bool		llm_tokenizer_is_control(const llm_tokenizer *t, int32_t id);
/* True for ids generation must stop at: EOS, EOT, <|im_end|>, <end_of_turn>, ... */
bool		llm_tokenizer_is_eog(const llm_tokenizer *t, int32_t id);

/*
 * Tokenize len bytes of UTF-8 text as plain text (no BOS added, special
 * tokens not parsed).  Writes at most cap ids to out and returns the total
 * number of tokens (may exceed cap: call again with a larger buffer), or -1
 * with err set (invalid UTF-8).  Decoding the ids gives text back exactly,
 * except for SentencePiece: a literal U+2581 reads back as a space, and with
 * add_space_prefix (not Gemma's) the text gains a leading space.
 */
int64_t		llm_tokenize(const llm_tokenizer *t, const char *text, size_t len,
						 int32_t *out, int64_t cap, char *err, size_t errlen);

/*
 * As llm_tokenize, with the special tokens llama.cpp's add_special adds:
 * BOS first when llm_tokenizer_add_bos, EOS last when
 * tokenizer.ggml.add_eos_token, SEP last when tokenizer.ggml.add_sep_token;
 * WordPiece always gets [CLS] first and [SEP] last (an embedding model's
 * input).  Same return and cap contract as llm_tokenize.
 */
int64_t		llm_tokenize_special(const llm_tokenizer *t, const char *text, size_t len,
								 int32_t *out, int64_t cap, char *err, size_t errlen);

/*
 * Bytes of token id as it appears in text (byte-level decoded, or ▁ turned
 * into spaces and <0xNN> into byte NN; special tokens give their text).  Returns the byte count (may exceed cap) or -1 for an
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
