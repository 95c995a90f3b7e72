/*
 * jinja.h — a Jinja subset interpreter for chat templates.
 *
 * Renders a model's tokenizer.chat_template the way HF transformers does
 * (jinja2 with trim_blocks, lstrip_blocks, loop controls, the generation
 * block, its tojson, raise_exception and strftime_now; keep_trailing_newline
 * off; undefined names render as nothing; lists and dicts immutable).  The
 * subset is the one the corpus of real templates uses: statements if / for
 * (loop.*, else, filtered) / set (names, namespace attributes, tuples, block
 * set) / macro / call / filter blocks / break / continue / generation, and
 * the expressions, filters, tests (filters.c) and methods (methods.c) listed there.
 *
 * Lifecycle: jinja_compile parses a template once into an AST (immutable,
 * may be shared between threads); every jinja_render gets a jinja_ctx of
 * its own (an arena: all values made for it live until jinja_ctx_free).
 * One ctx is used by one thread at a time.
 *
 * Provenance: every string value knows, byte by byte, whether it came from
 * the template itself (its literal text and string constants) or from a
 * variable the caller marked trusted (bos_token, eos_token, ...), or from
 * data (message contents, names, tools).  The output keeps that mask, so the
 * caller can let only trusted bytes become special tokens.
 *
 * Limits: a template is data from a model file or a setting, so a render
 * is bounded whatever it says: at most JINJA_MAX_STEPS statements and
 * expressions run, and at most JINJA_MAX_BYTES held by its ctx (values and
 * output; freed only with the ctx).  Past either the render fails
 * (JINJA_LIMIT) with a message naming the limit.  Real templates take a few
 * thousand steps per message.
 *
 * Errors: compile errors name the construct and line:column; render errors
 * say JINJA_RAISED when the template called raise_exception(msg) (err holds
 * msg exactly) and JINJA_FAILED otherwise.  PostgreSQL-free.
 */
#ifndef LLM_JINJA_H
#define LLM_JINJA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define JINJA_MAX_STEPS	20000000
#define JINJA_MAX_BYTES	((size_t) 512 << 20)

typedef struct jinja_template jinja_template;
typedef struct jinja_ctx jinja_ctx;
typedef struct jv jinja_value;	/* owned by a ctx */

typedef enum jinja_status
{
	JINJA_OK = 0,
	JINJA_RAISED = 1,			/* raise_exception(msg) */
	JINJA_FAILED = 2,			/* any other render error (type error, undefined attribute, ...) */
	JINJA_LIMIT = 3				/* JINJA_MAX_STEPS or JINJA_MAX_BYTES reached */
} jinja_status;

/* Parse src (len bytes, UTF-8).  NULL + err "line:col: ..." on a construct outside the subset. */
jinja_template *jinja_compile(const char *src, size_t len, char *err, size_t errlen);
void		jinja_free(jinja_template *t);

/* A render context: variables, the clock strftime_now reads, the output. */
jinja_ctx  *jinja_ctx_create(void);
void		jinja_ctx_free(jinja_ctx *c);
/* strftime_now's time (local time of the caller's choosing); default: time(NULL) at render. */
void		jinja_ctx_set_time(jinja_ctx *c, const struct tm *tm);

/* Values (owned by c; NULL only on allocation failure, which the render then reports). */
jinja_value *jinja_none(jinja_ctx *c);
jinja_value *jinja_bool(jinja_ctx *c, bool b);
jinja_value *jinja_int(jinja_ctx *c, int64_t i);
jinja_value *jinja_float(jinja_ctx *c, double d);
/* A string, copied; trusted: whether its bytes may become special tokens. */
jinja_value *jinja_string(jinja_ctx *c, const char *s, size_t len, bool trusted);
jinja_value *jinja_list(jinja_ctx *c);
int			jinja_list_push(jinja_ctx *c, jinja_value *list, const jinja_value *item);
jinja_value *jinja_dict(jinja_ctx *c);
int			jinja_dict_set(jinja_ctx *c, jinja_value *dict, const char *key, const jinja_value *val);
/* JSON text (RFC 8259) as a value, strings untrusted; NULL + err when it is not JSON. */
jinja_value *jinja_from_json(jinja_ctx *c, const char *json, size_t len, char *err, size_t errlen);
/* A global variable of the render. */
int			jinja_set(jinja_ctx *c, const char *name, const jinja_value *v);

/*
 * The rendered text: len bytes (NUL-terminated) and trusted[i] for every
 * byte (1: template text or a trusted variable).  Owned by c, valid until
 * the next render with c or jinja_ctx_free.
 */
typedef struct jinja_output
{
	const char *text;
	const uint8_t *trusted;
	size_t		len;
} jinja_output;

jinja_status jinja_render(const jinja_template *t, jinja_ctx *c, jinja_output *out,
						  char *err, size_t errlen);

#endif
