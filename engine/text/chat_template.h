/*
 * chat_template.h — apply the model's chat template to messages, producing
 * token ids (special tokens emitted as ids, message text tokenized as plain
 * text so control-token injection is impossible).
 *
 * "auto" renders the GGUF's own tokenizer.chat_template with the Jinja
 * interpreter (engine/jinja, HF transformers' semantics; chat_jinja.c); a
 * template outside the interpreter's subset is refused at load: the model
 * then serves raw prompts only and llm_chat_template_refused() says why.
 * A GGUF without tokenizer.chat_template (a base model such as Gemma 3 270M)
 * gets LLM_CHAT_NONE: the family is never guessed from the architecture or
 * the vocabulary, so a base model is never silently given a template.  A
 * built-in family can be chosen explicitly instead
 * (llm_chat_template_init_family): ChatML (<|im_start|>role\n...<|im_end|>\n)
 * and Gemma (<start_of_turn>user\n...<end_of_turn>\n, llama.cpp's
 * rendering), or a Jinja template given as text (llm_chat_template_init_source).
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
	LLM_CHAT_GEMMA,
	LLM_CHAT_JINJA				/* a Jinja template: the file's own or one given as text */
} llm_chat_family;

/* llm_chat_apply's error for LLM_CHAT_NONE (the SQL layer may match on it). */
#define LLM_CHAT_NONE_ERROR "the model has no chat template; use raw => true or configure a chat template"

typedef struct llm_chat_message
{
	const char *role;			/* "system", "user", "assistant" */
	const char *content;		/* UTF-8 */
	size_t		content_len;
} llm_chat_message;

/* What a render passes the template besides the messages (HF's apply_chat_template arguments). */
typedef struct llm_chat_options
{
	bool		add_generation_prompt;	/* end with the assistant turn's opening (default true) */
	const char *tools_json;		/* JSON array of tool schemas, or NULL (the template sees None) */
	size_t		tools_len;
	int			enable_thinking;	/* -1: not passed (undefined in the template), 0 false, 1 true */
} llm_chat_options;

#define LLM_CHAT_OPTIONS_DEFAULT {true, NULL, 0, -1}

struct jinja_template;
struct chat_specials;

typedef struct llm_chat_template
{
	llm_chat_family family;
	/* JINJA: the compiled template, the control tokens by text, bos/eos/unk/pad ids (-1 absent) */
	struct jinja_template *jinja;
	struct chat_specials *specials;
	int32_t		special_ids[4];
	int32_t		end_of_turn;	/* JINJA: the id closing an assistant turn, -1 unknown */
	char	   *refused;		/* malloc'd: why the file's template was refused (family NONE), or NULL */
} llm_chat_template;

/*
 * The file's own tokenizer.chat_template compiled (JINJA; returns 0).  NONE
 * and 0 when the file has none, or when its template is outside the
 * interpreter's subset (ct->refused names the construct and line:column).
 * -1 + err on allocation failure.
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

/*
 * A Jinja template given as text (len bytes): JINJA, or -1 + err naming
 * the construct the interpreter refuses, with line:column.
 */
int			llm_chat_template_init_source(llm_chat_template *ct, const char *src, size_t len,
										  const gguf_file *f, const llm_tokenizer *t, char *err, size_t errlen);

/*
 * A configured chat_template besides the names auto/none/chatml/gemma:
 * Jinja text (it contains "{{" or "{%") or an absolute path ("/...") to a
 * file holding one.  LLM_CHAT_SOURCE_NAME for anything else (a family name,
 * or a value the configuration refuses).
 */
typedef enum llm_chat_source
{
	LLM_CHAT_SOURCE_NAME,
	LLM_CHAT_SOURCE_TEXT,
	LLM_CHAT_SOURCE_PATH
} llm_chat_source;

llm_chat_source llm_chat_source_of(const char *value);

/*
 * A configured template override: value is Jinja text or an absolute path
 * to a file read now (at most LLM_CHAT_TEMPLATE_FILE_MAX bytes); compiled
 * as llm_chat_template_init_source.  -1 + err (the file's fault, or the
 * construct refused with line:column): the load fails, no model is served
 * with a template other than the one configured.
 */
#define LLM_CHAT_TEMPLATE_FILE_MAX (1 << 20)
int			llm_chat_template_init_override(llm_chat_template *ct, const char *value,
											const gguf_file *f, const llm_tokenizer *t,
											char *err, size_t errlen);

/* Why the file's template was refused (the model serves raw prompts only), or NULL. */
const char *llm_chat_template_refused(const llm_chat_template *ct);

/*
 * The token closing an assistant turn: <|im_end|> (ChatML), <end_of_turn>
 * (Gemma), for a Jinja template the first end-of-generation control token
 * it writes after an assistant's content; -1 when none.
 */
int32_t		llm_chat_end_of_turn(const llm_chat_template *ct, const llm_tokenizer *t);

/*
 * "none", "chatml", "gemma" <-> family ("jinja" is only a name: a Jinja
 * template is configured by its text); llm_chat_family_parse returns false
 * for another name.
 */
bool		llm_chat_family_parse(const char *name, llm_chat_family *out);
const char *llm_chat_family_name(llm_chat_family family);

void		llm_chat_template_free(llm_chat_template *ct);

/*
 * Render msgs (n) followed by the assistant generation prompt into token ids.
 * Returns the total token count (may exceed cap, as llm_tokenize) or -1 + err
 * (unknown role, invalid UTF-8, model has no template: LLM_CHAT_NONE_ERROR,
 * a Jinja template's raise_exception: "chat template: " + its message).
 */
int64_t		llm_chat_apply(const llm_chat_template *ct, const llm_tokenizer *t,
						   const llm_chat_message *msgs, int n,
						   int32_t *out, int64_t cap, char *err, size_t errlen);

/* llm_chat_apply with options (o NULL: LLM_CHAT_OPTIONS_DEFAULT). */
int64_t		llm_chat_apply_ex(const llm_chat_template *ct, const llm_tokenizer *t,
							  const llm_chat_message *msgs, int n, const llm_chat_options *o,
							  int32_t *out, int64_t cap, char *err, size_t errlen);

/*
 * The prompt as text, as the model sees it (HF's apply_chat_template with
 * tokenize=False for a Jinja template; the built-in families' ids as text):
 * *text malloc'd (NUL-terminated, *len bytes), 0; or -1 + err as
 * llm_chat_apply.
 */
int			llm_chat_render_text(const llm_chat_template *ct, const llm_tokenizer *t,
								 const llm_chat_message *msgs, int n, const llm_chat_options *o,
								 char **text, size_t *len, char *err, size_t errlen);

#endif
