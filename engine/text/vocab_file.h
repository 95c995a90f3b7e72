/*
 * vocab_file.h — a model file's text side alone: the GGUF's metadata, its
 * tokenizer and its chat template, without weights.  What a vocabulary-only
 * GGUF (tokenizer keys, no tensors) can give, and what a full model gives
 * without loading its weights: `llm-cli tokenize` and the tokenizer tests
 * use it.  Generation (llm_engine_create) still requires the weights.
 *
 * Opened once and read-only after: the tokenizer and template may be used
 * from many threads; close once, after every user is done.
 */
#ifndef LLM_TEXT_VOCAB_FILE_H
#define LLM_TEXT_VOCAB_FILE_H

#include "engine/gguf/gguf.h"
#include "tokenizer.h"
#include "chat_template.h"

typedef struct llm_vocab_file
{
	gguf_file  *gguf;			/* the mapped file (its tensors, if any, are not read) */
	llm_tokenizer *tok;
	llm_chat_template chat;
} llm_vocab_file;

/*
 * Open path and build its tokenizer and chat template: chat_template NULL or
 * "auto" takes the file's own (tokenizer.chat_template), else a family name
 * (llm_chat_family_parse: "none", "chatml", "gemma").  NULL + err for a file
 * gguf_open refuses, a tokenizer llm_tokenizer_create refuses, an unknown
 * family name or a template whose markers the vocabulary lacks.
 */
llm_vocab_file *llm_vocab_file_open(const char *path, const char *chat_template, char *err, size_t errlen);
void		llm_vocab_file_close(llm_vocab_file *v);

/*
 * len bytes of text as plain text (llm_tokenize), into a malloc'd array
 * *ids_out the caller frees; the count, or -1 + err.
 */
int64_t		llm_tokenize_alloc(const llm_tokenizer *t, const char *text, size_t len, int32_t **ids_out,
							   char *err, size_t errlen);

/* n_msgs messages rendered by the chat template (llm_chat_apply) into a malloc'd array; the count or -1 + err. */
int64_t		llm_chat_apply_alloc(const llm_chat_template *ct, const llm_tokenizer *t,
								 const llm_chat_message *msgs, int n_msgs, int32_t **ids_out,
								 char *err, size_t errlen);

#endif
