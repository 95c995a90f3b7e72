/*
 * wordpiece.h — the WordPiece encoder (tokenizer.ggml.model = "bert": BERT,
 * BGE, MiniLM and other encoder-only embedding models).  Built on the
 * vocabulary (vocab.h); used only by the front door (tokenizer.c).
 * Read-only after llm_tokenizer_create.
 *
 * The GGUF stores BERT's vocabulary already converted for llama.cpp: a
 * word-initial piece "abc" as "▁abc", a continuation "##abc" as "abc",
 * bracketed specials ("[CLS]") unchanged.
 */
#ifndef LLM_TEXT_WORDPIECE_H
#define LLM_TEXT_WORDPIECE_H

#include "vocab.h"

/*
 * WordPiece setup after the vocabulary: the match window (longest token
 * text) and the normalizer options tokenizer.ggml.normalizer.lowercase
 * (default true, as llama.cpp) and .strip_accents (default: lowercase).
 * false + err when the vocabulary has no [UNK] token (tokenizer.ggml.
 * unknown_token_id, default 100): every unknown word needs one.
 * Call after tok_vocab_specials (it reads t->unk).
 */
bool		tok_wpm_setup(llm_tokenizer *t, const gguf_file *f, char *err, size_t errlen);

/* Bytes a WordPiece token stands for: "▁" read as a space; specials their text (tok_decode_fn). */
uint64_t	tok_wpm_decode_text(const llm_tokenizer *t, int32_t id, const char *p, size_t n, char *out);

/*
 * Encode one fragment of valid UTF-8 text and emit its ids: split into
 * words at whitespace and around punctuation, ASCII symbols and CJK
 * ideographs (control characters, U+0000 and U+FFFD dropped; lowercased and
 * accents stripped as the normalizer options say), then each word greedily
 * into the longest vocabulary pieces from its start ("▁" + word), or [UNK]
 * for the whole word when some position matches no piece.  false on
 * allocation failure.
 */
bool		tok_wpm_encode(const llm_tokenizer *t, const char *text, size_t len, emitter *e);

#endif
