/*
 * json_min.h — a small strict JSON (RFC 8259) reader into a tree, and the
 * compact writer of JSON strings, for the engine's PostgreSQL-free parts
 * (the grammar compiler reads JSON schemas with it).
 *
 * Strict: no comments, no trailing commas, no leading zeros, whitespace only
 * space/tab/LF/CR, strings valid UTF-8 with no raw control characters, \u
 * escapes with properly paired surrogates (a lone surrogate is an error),
 * duplicate keys in one object an error, nesting at most max_depth.  Errors
 * name the byte offset.
 *
 * Ownership: a document owns all its nodes and strings (one arena); nodes are
 * valid until llm_json_free().  Numbers keep their source text (so a caller
 * can read them exactly); strings are decoded to UTF-8 (may contain U+0000,
 * hence the explicit lengths).  Object members keep their source order.
 */
#ifndef LLM_JSON_MIN_H
#define LLM_JSON_MIN_H

#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>

typedef enum llm_json_type
{
	LLM_JSON_NULL = 1,
	LLM_JSON_BOOL,
	LLM_JSON_NUMBER,
	LLM_JSON_STRING,
	LLM_JSON_ARRAY,
	LLM_JSON_OBJECT
} llm_json_type;

typedef struct llm_json llm_json;

struct llm_json
{
	llm_json_type type;
	size_t		offset;			/* byte offset of the value in the source */
	bool		boolean;		/* BOOL */
	const char *text;			/* NUMBER: source text; STRING: decoded UTF-8 (NUL-terminated) */
	size_t		len;			/* of text */
	int32_t		n;				/* ARRAY: items; OBJECT: members */
	llm_json  **items;			/* ARRAY items / OBJECT member values, in source order */
	const char **keys;			/* OBJECT: decoded keys (NUL-terminated), in source order */
	size_t	   *key_lens;
};

typedef struct llm_json_doc llm_json_doc;

/*
 * Parse text[0..len) as one JSON value (surrounding whitespace allowed).
 * NULL + message ("... at offset N") on a syntax error, depth over max_depth
 * (arrays and objects), or allocation failure (*oom set when oom != NULL).
 */
llm_json_doc *llm_json_parse(const char *text, size_t len, int max_depth,
							 bool *oom, char *err, size_t errlen);
void		llm_json_free(llm_json_doc *d);
const llm_json *llm_json_root(const llm_json_doc *d);

/* Member of an object by key (exact bytes), or NULL (also when obj is not an object). */
const llm_json *llm_json_member(const llm_json *obj, const char *key);

/*
 * Compact canonical JSON writing of a string value s[0..n) (valid UTF-8):
 * quotes, `"` -> \", `\` -> \\, U+0008/0C/0A/0D/09 -> \b \f \n \r \t, the
 * other controls below U+0020 -> \u00xx (lowercase hex), everything else
 * raw.  Writes at most cap bytes, returns the full length.
 */
size_t		llm_json_write_string(const char *s, size_t n, char *out, size_t cap);

/*
 * Compact canonical text of a whole value: no whitespace, members in source
 * order, strings as llm_json_write_string, numbers as their source text.
 * Writes at most cap bytes, returns the full length.
 */
size_t		llm_json_write(const llm_json *v, char *out, size_t cap);

#endif
