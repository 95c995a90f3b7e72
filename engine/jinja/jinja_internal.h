/*
 * jinja_internal.h — the Jinja interpreter's shared types: the arena, values
 * (jv), the AST (jnode) and the render state.  Only engine/jinja/ includes it.
 *
 * Values are small structs passed by value; strings, lists and dicts point
 * into the render's arena and are never freed one by one.  A string's mask
 * is NULL when all its bytes share `trust`, else one byte per byte.
 */
#ifndef LLM_JINJA_INTERNAL_H
#define LLM_JINJA_INTERNAL_H

#include "jinja.h"

#include <setjmp.h>
#include <stdarg.h>

/* ---- arena ---- */
typedef struct jarena_block
{
	struct jarena_block *next;
	size_t		used,
				cap;
	char		data[];
} jarena_block;

typedef struct jarena
{
	jarena_block *head;
	size_t		bytes;			/* allocated from malloc, blocks included */
	bool		over;			/* an allocation was refused by JINJA_MAX_BYTES */
} jarena;

/* zeroed; NULL on OOM or when the arena would pass JINJA_MAX_BYTES (then over is set) */
void	   *ja_alloc(jarena *a, size_t n);
void		ja_free(jarena *a);

/* ---- values ---- */
typedef enum jtype
{
	JV_UNDEF = 0, JV_NONE, JV_BOOL, JV_INT, JV_FLOAT, JV_STR, JV_LIST, JV_DICT,
	JV_NS, JV_MACRO, JV_FUNC, JV_LOOP
} jtype;

struct jlist;
struct jdict;
struct jnode;
struct jloop;
struct jfunc;

/*
 * JV_STR: b is jinja2's Markup (the safe filter's result: "+" with a plain
 * string HTML-escapes that string).  JV_LIST: b marks a tuple, i == 1 a
 * generator (what map, select, reject, unique and items give in jinja2:
 * always true, iterated once, no length, not JSON).
 */
typedef struct jv
{
	uint8_t		t;				/* jtype */
	uint8_t		trust;			/* JV_STR with mask NULL: 1 trusted, 0 data */
	bool		b;
	int64_t		i;
	double		f;
	const char *s;				/* JV_STR bytes (n of them); JV_UNDEF: the name, for messages */
	size_t		n;
	const uint8_t *mask;		/* JV_STR: per-byte trust, or NULL */
	union
	{
		struct jlist *l;		/* JV_LIST (tuples too) */
		struct jdict *d;		/* JV_DICT, JV_NS */
		const struct jnode *m;	/* JV_MACRO */
		struct jloop *loop;		/* JV_LOOP */
		struct jfunc *fn;		/* JV_FUNC: a global or a bound method */
	};
} jv;

typedef struct jlist
{
	jv		   *v;
	size_t		n,
				cap;
	bool		consumed;		/* a generator already iterated: empty from now on */
} jlist;

typedef struct jdict
{
	jv		   *k;
	jv		   *v;
	size_t		n,
				cap;
} jdict;

typedef struct jloop
{
	const jlist *items;
	size_t		i;
	int			depth;
} jloop;

typedef struct jfunc
{
	const char *name;
	jv			self;			/* bound method's object (UNDEF for a global) */
} jfunc;

/* ---- AST ---- */
typedef enum jkind
{
	/* statements */
	JN_BODY, JN_TEXT, JN_OUTPUT, JN_IF, JN_FOR, JN_SET, JN_SETBLOCK, JN_MACRO, JN_CALLBLOCK,
	JN_FILTERBLOCK, JN_BREAK, JN_CONTINUE, JN_GENERATION,
	/* expressions */
	JN_CONST, JN_NAME, JN_ATTR, JN_ITEM, JN_SLICE, JN_CALL, JN_FILTER, JN_TEST, JN_BINOP, JN_NOT,
	JN_NEG, JN_POS, JN_AND, JN_OR, JN_COND, JN_LIST, JN_TUPLE, JN_DICT, JN_CMP, JN_KWARG
} jkind;

typedef struct jnode
{
	uint8_t		kind;
	int			op;				/* BINOP/CMP: the operator token */
	int			line,
				col;
	const char *name;			/* NAME, ATTR, FILTER, TEST, MACRO, KWARG, SET target attr */
	jv			value;			/* CONST; TEXT: the literal */
	struct jnode *a,
			   *b,
			   *c;				/* operands / cond, then, else / for: target, iter, filter */
	struct jnode **kids;		/* BODY statements, CALL/FILTER/TEST args, LIST/TUPLE/DICT items */
	int			n_kids;
	struct jnode *body,
			   *else_body;
	bool		negate;			/* TEST: is not */
	bool		recursive;
	bool		unknown;		/* FILTER/TEST outside the subset, inside an if: fails when run */
	bool		soft;			/* (parser) inside an if or inline if */
} jnode;

struct jinja_template
{
	jarena		arena;
	jnode	   *root;
};

/* ---- tokens (lexer.c) ---- */
typedef enum jtok_kind
{
	JT_EOF = 0, JT_DATA, JT_VAR_BEGIN, JT_VAR_END, JT_BLOCK_BEGIN, JT_BLOCK_END,
	JT_NAME, JT_STRING, JT_INT, JT_FLOAT, JT_OP
} jtok_kind;

typedef struct jtok
{
	uint8_t		kind;
	int			line,
				col;
	const char *s;				/* DATA, NAME, STRING (decoded), OP: text; arena-owned */
	size_t		n;
	int64_t		i;
	double		f;
} jtok;

/* Tokenize src with HF's settings; 0, or -1 + err "line:col: ...". */
int			jlex(jarena *a, const char *src, size_t len, jtok **toks, int *n_toks, char *err, size_t errlen);

/* ---- render state ---- */
typedef struct jvar
{
	const char *name;
	jv			v;
} jvar;

typedef struct jframe
{
	struct jframe *parent;
	jvar	   *vars;
	int			n,
				cap;
} jframe;

typedef struct jbuf
{
	char	   *p;
	uint8_t    *mask;
	size_t		len,
				cap;
} jbuf;

struct jinja_ctx
{
	jarena		arena;
	jframe		globals;		/* jinja_set's variables */
	jframe	   *top;			/* during a render: the template's top-level frame (parent: globals) */
	jbuf		out;			/* the render's output, reused between renders */
	struct tm	now;
	bool		now_set;
	/* during a render */
	jmp_buf    *jmp;
	jinja_status status;
	char	   *err;
	size_t		errlen;
	int			depth;
	int			loop_ctl;		/* 1 break, 2 continue */
	uint64_t	steps;			/* statements and expressions run by this render (JINJA_MAX_STEPS) */
};

/* one more step of the render; past JINJA_MAX_STEPS the render fails */
void		jstep_limit(jinja_ctx *c, const jnode *at) __attribute__((noreturn));
#define JSTEP(c, at) do { if (++(c)->steps > JINJA_MAX_STEPS) jstep_limit(c, at); } while (0)

/* errors: longjmp out of the render */
void		jerr_fail(jinja_ctx *c, const jnode *at, const char *fmt, ...) __attribute__((noreturn, format(printf, 3, 4)));
void		jerr_raise(jinja_ctx *c, const char *msg, size_t n) __attribute__((noreturn));

/* values (value.c) */
jv			jv_undef(const char *name);
jv			jv_none(void);
jv			jv_bool(bool b);
jv			jv_int(int64_t i);
jv			jv_float(double f);
jv			jv_str(jinja_ctx *c, const char *s, size_t n, bool trusted);	/* copies */
jv			jv_str_static(const char *s, size_t n, bool trusted);	/* points at s */
jv			jv_newlist(jinja_ctx *c, size_t cap);
void		jl_push(jinja_ctx *c, jlist *l, jv v);
jv			jv_newdict(jinja_ctx *c);
void		jd_set(jinja_ctx *c, jdict *d, jv key, jv val);
const jv   *jd_get(const jdict *d, const char *key, size_t n);
const jv   *jd_getv(const jdict *d, jv key);
bool		jv_truthy(jv v);
bool		jv_equal(jv a, jv b);
int			jv_compare(jinja_ctx *c, const jnode *at, jv a, jv b);	/* <0, 0, >0 */
const char *jv_typename(jv v);
bool		jv_is_str(jv v, const char *lit);
/* str(v) (Python): strings as they are, others their text (untrusted, except constants' digits) */
jv			jv_tostr(jinja_ctx *c, jv v);
/* repr(v) into b (Python's str of containers) */
void		jv_repr(jinja_ctx *c, jbuf *b, jv v);
/* b gets s */
void		jb_put(jinja_ctx *c, jbuf *b, const char *s, size_t n, uint8_t trust);
void		jb_putv(jinja_ctx *c, jbuf *b, jv s);	/* a string value with its mask */
jv			jb_take(jinja_ctx *c, jbuf *b);		/* the buffer as a string value (arena copy) */
void		jb_free(jbuf *b);		/* forget the buffer (its bytes are the arena's) */
jv			jv_concat(jinja_ctx *c, jv a, jv b);
jv			jv_substr(jinja_ctx *c, jv s, size_t off, size_t n);	/* bytes */
/* UTF-8 */
size_t		ju_len(const char *s, size_t n);	/* code points */
size_t		ju_offset(const char *s, size_t n, size_t cp);	/* byte offset of code point cp (n if past) */
/* iteration: the items of v as a list (strings: characters; dicts: keys); undefined: empty */
const jlist *jv_iter(jinja_ctx *c, const jnode *at, jv v);
/* attribute / item lookup as jinja2 does (getattr then getitem, or the reverse) */
jv			jv_getattr(jinja_ctx *c, const jnode *at, jv obj, const char *name);
jv			jv_getitem(jinja_ctx *c, const jnode *at, jv obj, jv key);

/* eval.c */
jv			jeval(jinja_ctx *c, const jnode *n);
void		jexec(jinja_ctx *c, const jnode *n, jbuf *out);
jv			jcall_macro(jinja_ctx *c, const jnode *at, const jnode *macro, const jv *args, int nargs,
						const char **kwnames, const jv *kwvals, int nkw, const jnode *caller);

/* strings.c: argument reading and Python's str operations */
jv			jarg(const jv *args, int nargs, const char **kwn, const jv *kwv, int nkw, int pos,
				 const char *name, jv dflt);
#define ARG(pos, name, dflt) jarg(args, nargs, kwn, kwv, nkw, pos, name, dflt)
jv			jneed_str(jinja_ctx *c, const jnode *at, jv v, const char *what);
bool		jstr_is_ws(unsigned char ch);
jv			jstr_strip(jinja_ctx *c, jv s, jv chars, bool left, bool right);	/* chars NONE: whitespace */
jv			jstr_replace(jinja_ctx *c, jv s, jv old, jv new, int64_t count);	/* count < 0: all */
jv			jstr_split(jinja_ctx *c, jv s, jv sep, int64_t maxsplit);	/* sep NONE: runs of whitespace */
jv			jstr_case(jinja_ctx *c, jv s, int mode);	/* 'u' upper, 'l' lower, 't' title, 'c' capitalize */
jv			jstr_format(jinja_ctx *c, const jnode *at, jv s, const jv *args, int nargs,
						const char **kwn, const jv *kwv, int nkw);

/* filters.c, methods.c */
jv			jfilter(jinja_ctx *c, const jnode *at, const char *name, jv v, const jv *args, int nargs,
					const char **kwnames, const jv *kwvals, int nkw);
bool		jtest(jinja_ctx *c, const jnode *at, const char *name, jv v, const jv *args, int nargs);
jv			jcall_func(jinja_ctx *c, const jnode *at, const jfunc *fn, const jv *args, int nargs,
					   const char **kwnames, const jv *kwvals, int nkw);
/* a method or global function by name as a value, or UNDEF */
jv			jmethod(jinja_ctx *c, jv self, const char *name);
jv			jglobal(jinja_ctx *c, const char *name);
bool		jfilter_known(const char *name);
bool		jtest_known(const char *name);

/* tojson.c */
void		jtojson(jinja_ctx *c, const jnode *at, jbuf *b, jv v, int indent, int level,
					const char *item_sep, const char *key_sep, bool sort_keys, bool ensure_ascii);

#endif
