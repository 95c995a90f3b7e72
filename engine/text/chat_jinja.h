/*
 * chat_jinja.h — the chat template's Jinja path, for chat_template.c only:
 * the vocabulary's control tokens indexed by text, the template rendered
 * with HF's variables, and the rendered text to ids where only template
 * bytes may become control tokens (chat_jinja.c).
 */
#ifndef LLM_CHAT_JINJA_H
#define LLM_CHAT_JINJA_H

#include "chat_template.h"
#include "engine/jinja/jinja.h"

typedef struct chat_specials chat_specials;

/* Every CONTROL/UNKNOWN token of t by its text; NULL on allocation failure. */
chat_specials *chat_specials_build(const llm_tokenizer *t);
void		chat_specials_free(chat_specials *s);

/*
 * text[0..len) to ids: a control token's text wholly in trusted bytes is
 * its id, the stretches between them plain text.  Count everything, store
 * up to cap (llm_tokenize's contract); -1 + err on invalid UTF-8.
 */
int64_t		chat_jinja_tokenize(const chat_specials *s, const llm_tokenizer *t, const char *text,
								const uint8_t *trusted, size_t len, int32_t *out, int64_t cap,
								char *err, size_t errlen);

/* The special-token variables: ids of bos, eos, unk, pad (-1 absent) in tok's vocabulary. */
typedef struct chat_jinja_vars
{
	const llm_tokenizer *tok;
	int32_t		ids[4];
} chat_jinja_vars;

/* Render msgs with o into out (owned by c). */
jinja_status chat_jinja_render(const jinja_template *tmpl, const chat_jinja_vars *v,
							   const llm_chat_message *msgs, int n, const llm_chat_options *o,
							   jinja_ctx *c, jinja_output *out, char *err, size_t errlen);

#endif
