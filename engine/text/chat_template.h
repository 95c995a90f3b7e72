/*
 * chat_template.h — apply the model's chat template to messages, producing
 * token ids (special tokens emitted as ids, message text tokenized as plain
 * text so control-token injection is impossible).
 *
 * Template family is detected from tokenizer.chat_template in the GGUF:
 * ChatML (<|im_start|>role\n...<|im_end|>\n, SmolLM2/Qwen) and Gemma
 * (<start_of_turn>user\n...<end_of_turn>\n).  SmolLM2's template inserts
 * its default system message when the first message is not a system one.
 * A GGUF without tokenizer.chat_template (a base model such as Gemma 3 270M)
 * gets LLM_CHAT_NONE: the family is never guessed from the architecture or
 * the vocabulary, so a base model is never silently given a template.  A
 * family can be chosen explicitly instead (llm_chat_template_init_family).
 */
#ifndef LLM_CHAT_TEMPLATE_H
#define LLM_CHAT_TEMPLATE_H

#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>
#include "engine/gguf/gguf.h"
#include "tokenizer.h"

typedef enum llm_chat_family
{
	LLM_CHAT_NONE = 0,			/* no template: raw prompts only */
	LLM_CHAT_CHATML,
	LLM_CHAT_GEMMA
} llm_chat_family;

/* llm_chat_apply's error for LLM_CHAT_NONE (the SQL layer may match on it). */
#define LLM_CHAT_NONE_ERROR "the model has no chat template; use raw => true or configure a chat template"

typedef struct llm_chat_message
{
	const char *role;			/* "system", "user", "assistant" */
	const char *content;		/* UTF-8 */
	size_t		content_len;
} llm_chat_message;

typedef struct llm_chat_template
{
	llm_chat_family family;
	char	   *default_system;	/* malloc'd, or NULL: system text the template adds when none given */
} llm_chat_template;

/*
 * Detect the family from tokenizer.chat_template (NONE when absent or of
 * another family; returns 0).  -1 + err when the template's marker tokens
 * are not special tokens of the vocabulary, or on allocation failure.
 */
int			llm_chat_template_init(llm_chat_template *ct, const gguf_file *f, const llm_tokenizer *t,
								   char *err, size_t errlen);

/*
 * Use family whatever the GGUF says (a configured template).  NONE gives a
 * template that refuses to render.  default_system is NULL: an explicit
 * ChatML family inserts no system turn of its own.  -1 + err when the
 * family's marker tokens are not special tokens of t's vocabulary.
 */
int			llm_chat_template_init_family(llm_chat_template *ct, llm_chat_family family,
										  const llm_tokenizer *t, char *err, size_t errlen);

/* "none", "chatml", "gemma" <-> family; llm_chat_family_parse returns false for another name. */
bool		llm_chat_family_parse(const char *name, llm_chat_family *out);
const char *llm_chat_family_name(llm_chat_family family);

void		llm_chat_template_free(llm_chat_template *ct);

/*
 * Render msgs (n) followed by the assistant generation prompt into token ids.
 * Returns the total token count (may exceed cap, as llm_tokenize) or -1 + err
 * (unknown role, invalid UTF-8, model has no template: LLM_CHAT_NONE_ERROR).
 */
int64_t		llm_chat_apply(const llm_chat_template *ct, const llm_tokenizer *t,
						   const llm_chat_message *msgs, int n,
						   int32_t *out, int64_t cap, char *err, size_t errlen);

#endif
