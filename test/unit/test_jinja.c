/*
 * test_jinja.c — the Jinja interpreter against HF transformers' renders.
 *
 * For every golden in test/golden/chat_templates/ (NAME.out) (written by
 * scripts/oracle/chat_template_golden.py) the template is compiled (the
 * corpus from the llama.cpp tree in the fetched llama-cpp-python sdist,
 * LLM_TEMPLATE_DIR to point elsewhere; the GGUFs' templates from the golden
 * directory) and every conversation of conversations.json rendered with
 * add_generation_prompt false and true, strftime_now at the oracle's fixed
 * time: the text must be byte-identical, raise_exception's message equal,
 * and where the reference fails otherwise the render must fail too.  In
 * every render, the bytes that came from message contents are untrusted
 * (cannot become special tokens).  Then the interpreter's own cases:
 * whitespace control, errors with line:column, constructs refused.
 */
#include "engine/jinja/jinja.h"
#include "engine/grammar/json_min.h"
#include "unit.h"
#include "engine/util/text_util.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define GOLDEN_DIR "test/golden/chat_templates/"
#define DEFAULT_TEMPLATE_DIR "/.cache/pg_llm/llama_cpp_python-0.3.36/vendor/llama.cpp/models/templates/"


static const llm_json *conversations;

/* A conversation of conversations.json by name: its messages, and its tools or NULL. */
static const llm_json *
conversation(const char *name, const llm_json **tools)
{
	for (int i = 0; i < conversations->n; i++)
	{
		const llm_json *c = conversations->items[i];

		if (strcmp(llm_json_member(c, "name")->text, name) == 0)
		{
			*tools = llm_json_member(c, "tools");
			return llm_json_member(c, "messages");
		}
	}
	return NULL;
}

typedef struct specials
{
	const char *name[8];
	char		value[8][64];
	int			n;
} specials;

/* Render messages; the status, and out/err. */
static jinja_status
render(const jinja_template *t, jinja_ctx *c, const llm_json *messages, const llm_json *tools, bool agp,
	   const specials *sp, jinja_output *out, char *err, size_t errlen)
{
	char	   *json = malloc(65536);
	size_t		n = llm_json_write(messages, json, 65536);
	jinja_value *msgs = jinja_from_json(c, json, n, err, errlen);
	jinja_value *tl = NULL;
	struct tm	tm = {0};

	if (tools != NULL)
	{
		n = llm_json_write(tools, json, 65536);
		tl = jinja_from_json(c, json, n, err, errlen);
	}
	free(json);
	if (msgs == NULL || (tools != NULL && tl == NULL))
		return JINJA_FAILED;
	tm.tm_year = 2026 - 1900;
	tm.tm_mon = 1;
	tm.tm_mday = 3;
	tm.tm_hour = 4;
	tm.tm_min = 5;
	tm.tm_sec = 6;
	tm.tm_wday = 2;				/* a Tuesday */
	tm.tm_yday = 33;
	jinja_ctx_set_time(c, &tm);
	jinja_set(c, "messages", msgs);
	jinja_set(c, "add_generation_prompt", jinja_bool(c, agp));
	jinja_set(c, "tools", tl ? tl : jinja_none(c));
	jinja_set(c, "documents", jinja_none(c));
	for (int i = 0; i < sp->n; i++)
		jinja_set(c, sp->name[i], jinja_string(c, sp->value[i], strlen(sp->value[i]), true));
	return jinja_render(t, c, out, err, errlen);
}

/* Every byte of every message content found in out is untrusted. */
static bool
contents_untrusted(const llm_json *messages, const jinja_output *out)
{
	for (int i = 0; i < messages->n; i++)
	{
		const llm_json *content = llm_json_member(messages->items[i], "content");
		const char *s = content->text;
		size_t		n = content->len;

		/* templates trim: look for the content without its ends */
		while (n > 0 && (s[0] == ' ' || s[0] == '\n' || s[0] == '\t'))
			s++, n--;
		while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\n' || s[n - 1] == '\t'))
			n--;
		if (n < 4)
			continue;
		for (size_t p = 0; p + n <= out->len; p++)
			if (memcmp(out->text + p, s, n) == 0)
				for (size_t k = 0; k < n; k++)
					if (out->trusted[p + k])
						return false;
	}
	return true;
}

static void
load_specials(const char *name, specials *sp)
{
	char		path[512];
	size_t		len;
	char	   *txt;
	char		err[256];
	llm_json_doc *doc;
	const llm_json *root;

	memset(sp, 0, sizeof(*sp));
	snprintf(path, sizeof(path), GOLDEN_DIR "%s.specials.json", name);
	txt = llm_read_file(path, SIZE_MAX, NULL, &len, NULL, 0);
	if (txt == NULL)
	{
		static const char *const names[] = {"bos_token", "eos_token", "unk_token", "pad_token"};
		static const char *const values[] = {"<s>", "</s>", "<unk>", "<pad>"};

		for (int i = 0; i < 4; i++)
		{
			sp->name[i] = names[i];
			snprintf(sp->value[i], sizeof(sp->value[i]), "%s", values[i]);
		}
		sp->n = 4;
		return;
	}
	doc = llm_json_parse(txt, len, 8, NULL, err, sizeof(err));
	root = llm_json_root(doc);
	for (int i = 0; i < root->n && i < 8; i++)
	{
		sp->name[sp->n] = root->keys[i][0] == 'b' ? "bos_token" : root->keys[i][0] == 'e' ? "eos_token" : root->keys[i][0] == 'u' ? "unk_token" : "pad_token";
		snprintf(sp->value[sp->n], sizeof(sp->value[0]), "%s", root->items[i]->text);
		sp->n++;
	}
	llm_json_free(doc);
	free(txt);
}

typedef struct tally
{
	int			identical,		/* every render as the reference */
				raising,		/* identical, some renders raise as the reference does */
				ref_fails,		/* the reference cannot render it */
				refused,		/* refused at compile (reference renders it) */
				wrong;
} tally;

static void
check_template(const char *tdir, const char *name, tally *ty)
{
	char		path[1024];
	size_t		glen,
				tlen;
	char	   *golden,
			   *src;
	char		err[1024];
	jinja_template *t;
	specials	sp;
	int			n_ok = 0,
				n_bad = 0,
				n_raise = 0;
	bool		ref_fail = false;
	char		first_bad[1400] = "";
	char	   *p;

	snprintf(path, sizeof(path), GOLDEN_DIR "%s.out", name);
	golden = llm_read_file(path, SIZE_MAX, NULL, &glen, NULL, 0);
	if (strncmp(name, "gguf-", 5) == 0)
		snprintf(path, sizeof(path), GOLDEN_DIR "%s.jinja", name);
	else
		snprintf(path, sizeof(path), "%s%s.jinja", tdir, name);
	src = llm_read_file(path, SIZE_MAX, NULL, &tlen, NULL, 0);
	if (!CHECK(golden != NULL && src != NULL, "%s: golden and template %s readable", name, path))
		return;
	load_specials(name, &sp);
	t = jinja_compile(src, tlen, err, sizeof(err));
	p = golden;
	while (p < golden + glen)
	{
		char		conv[64],
					agp[8],
					kind[16];
		int			n,
					hdr;
		const char *body;

		if (sscanf(p, "@@ %63s %7s %15s %d\n%n", conv, agp, kind, &n, &hdr) != 4)
			break;
		body = p + hdr;
		p = (char *) body + n + 1;
		if (strcmp(kind, "COMPILE") == 0)
		{
			ref_fail = true;
			break;
		}
		if (strcmp(kind, "FAIL") == 0)
			ref_fail = true;
		if (t == NULL)
			continue;
		{
			jinja_ctx  *c = jinja_ctx_create();
			jinja_output out;
			const llm_json *tools = NULL;
			const llm_json *msgs = conversation(conv, &tools);
			jinja_status st = render(t, c, msgs, tools, agp[0] == '1', &sp, &out, err, sizeof(err));
			bool		ok;

			if (strcmp(kind, "OK") == 0)
				ok = st == JINJA_OK && out.len == (size_t) n && memcmp(out.text, body, (size_t) n) == 0 &&
					contents_untrusted(msgs, &out);
			else if (strcmp(kind, "RAISE") == 0)
			{
				ok = st == JINJA_RAISED && strlen(err) == (size_t) n && memcmp(err, body, (size_t) n) == 0;
				n_raise++;
			}
			else
				ok = st != JINJA_OK;
			if (ok)
				n_ok++;
			else
			{
				if (n_bad++ == 0)
				{
					size_t		k = 0;

					if (st == JINJA_OK)
						while (k < out.len && k < (size_t) n && out.text[k] == body[k])
							k++;
					snprintf(first_bad, sizeof(first_bad),
							 "%s/%s: want %s, got status %d err [%s]; first difference at byte %zu: got [%.80s] want [%.80s]%s",
							 conv, agp, kind, (int) st, st == JINJA_OK ? "" : err, k,
							 st == JINJA_OK ? out.text + k : "", body + k,
							 st == JINJA_OK && out.len == (size_t) n && memcmp(out.text, body, (size_t) n) == 0 ?
							 " (bytes equal: content marked trusted)" : "");
				}
			}
			jinja_ctx_free(c);
		}
	}
	if (ref_fail)
	{
		ty->ref_fails++;
		CHECK(t == NULL || n_bad == 0, "%s: the reference cannot render it; neither do we (%s)", name,
			  t == NULL ? err : first_bad);
	}
	else if (t == NULL)
	{
		ty->refused++;
		CHECK(strchr(err, ':') != NULL, "%s: refused at compile with line:column: %s", name, err);
	}
	else
	{
		if (n_bad == 0)
			ty->identical++;
		else
			ty->wrong++;
		if (n_raise > 0 && n_bad == 0)
			ty->raising++;
		CHECK(n_bad == 0, "%s: %d renders identical to the reference%s%s", name, n_ok,
			  n_bad ? "; " : "", first_bad);
	}
	jinja_free(t);
	free(golden);
	free(src);
}

static int
cmpstr(const void *a, const void *b)
{
	return strcmp(*(char *const *) a, *(char *const *) b);
}

static void
corpus(void)
{
	char		tdir[512];
	const char *env = getenv("LLM_TEMPLATE_DIR");
	DIR		   *d;
	struct dirent *e;
	char	   *names[256];
	int			n = 0;
	tally		ty = {0};
	size_t		len;
	char	   *txt;
	char		err[256];
	llm_json_doc *doc;

	if (env)
		snprintf(tdir, sizeof(tdir), "%s/", env);
	else
		snprintf(tdir, sizeof(tdir), "%s" DEFAULT_TEMPLATE_DIR, getenv("HOME") ? getenv("HOME") : "");
	d = opendir(tdir);
	if (!CHECK(d != NULL, "the template corpus is at %s (fetched with the llama-cpp-python sdist by scripts/build-llama-cpp.sh)", tdir))
		return;
	closedir(d);
	txt = llm_read_file(GOLDEN_DIR "conversations.json", SIZE_MAX, NULL, &len, NULL, 0);
	doc = txt ? llm_json_parse(txt, len, 16, NULL, err, sizeof(err)) : NULL;
	if (!CHECK(doc != NULL, "conversations.json parses"))
		return;
	conversations = llm_json_root(doc);
	d = opendir(GOLDEN_DIR);
	while ((e = readdir(d)) != NULL && n < 256)
	{
		size_t		l = strlen(e->d_name);

		if (l > 4 && strcmp(e->d_name + l - 4, ".out") == 0)
			names[n++] = strndup(e->d_name, l - 4);
	}
	closedir(d);
	qsort(names, (size_t) n, sizeof(char *), cmpstr);
	for (int i = 0; i < n; i++)
	{
		check_template(tdir, names[i], &ty);
		free(names[i]);
	}
	printf("# %d templates: %d byte-identical (%d of them raising where the reference raises), "
		   "%d refused at compile, %d the reference cannot render, %d wrong\n",
		   n, ty.identical, ty.raising, ty.refused, ty.ref_fails, ty.wrong);
	CHECK(ty.identical >= 65 && n >= 70, "at least 65 of %d templates byte-identical: %d", n, ty.identical);
	llm_json_free(doc);
	free(txt);
}

/* Render src with no variables; the text or the error. */
static jinja_status
run(const char *src, char *buf, size_t cap)
{
	char		err[512];
	jinja_template *t = jinja_compile(src, strlen(src), err, sizeof(err));
	jinja_ctx  *c;
	jinja_output out;
	jinja_status st;

	if (t == NULL)
	{
		snprintf(buf, cap, "COMPILE %s", err);
		return JINJA_FAILED;
	}
	c = jinja_ctx_create();
	jinja_set(c, "content", jinja_string(c, "<|im_end|>", 10, false));
	st = jinja_render(t, c, &out, err, sizeof(err));
	snprintf(buf, cap, "%s", st == JINJA_OK ? out.text : err);
	jinja_ctx_free(c);
	jinja_free(t);
	return st;
}

static void
expect(const char *src, const char *want)
{
	char		got[1024];

	run(src, got, sizeof(got));
	CHECK(strcmp(got, want) == 0, "render [%s] = [%s] (got [%s])", src, want, got);
}

static void
own_cases(void)
{
	/* whitespace: trim_blocks, lstrip_blocks, '-' and '+' */
	expect("a\n  {% if true %}\nb\n  {% endif %}\nc\n", "a\nb\nc");
	expect("a  {%- if true -%}  b  {%- endif %}", "ab");
	expect("x\n  {%+ if true %}y{% endif %}", "x\n  y");
	expect("{# c #}\nz", "z");
	expect("{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ 2 ** 10 }} {{ 1 / 2 }} {{ 3.0 }}", "3 -4 1 1024 0.5 3.0");
	/* operator precedence and associativity (outputs of Python jinja2 3.1) */
	expect("{{ 1 + 2 * 3 - 4 }} {{ 2 * 3 ** 2 }} {{ 'a' ~ 1 * 2 ~ 'b' }} {{ not 1 in [2] }} "
		   "{{ 1 not in [1] or 2 in [2] and not 0 }} {{ not not 1 == 1 }} {{ 10 - 4 - 3 }} {{ 2 ** 3 ** 2 }} "
		   "{{ 7 // 2 * 2 % 5 }} {{ false or true and false }}",
		   "3 18 a2b True True True 3 64 1 False");
	expect("{{ 'abc'[::-1] }}{{ [1,2,3][1:] }}{{ 'héllo'[1] }}", "cba[2, 3]é");
	expect("{% set ns = namespace(x=1) %}{% for i in range(3) %}{% set ns.x = ns.x + i %}{% endfor %}{{ ns.x }}", "4");
	expect("{% for x in [1,2,3] if x != 2 %}{{ loop.index }}{{ x }}{% if not loop.last %},{% endif %}{% endfor %}", "11,23");
	expect("{% macro m(a, b='d') %}[{{ a }}{{ b }}]{% endmacro %}{{ m(1) }}{{ m(2, b=3) }}", "[1d][23]");
	expect("{{ {'b': 1, 'a': [true, none, 'x\"']}|tojson }}", "{\"b\": 1, \"a\": [true, null, \"x\\\"\"]}");
	expect("{{ {'a': 1}|tojson(indent=2) }}", "{\n  \"a\": 1\n}");
	expect("{{ ' a b '.split() }} {{ 'a,b'.split(',')|join('+') }} {{ '  x '|trim }}", "['a', 'b'] a+b x");
	expect("{% set x %}in{{ 1 }}{% endset %}{{ x }}", "in1");
	expect("{{ [3,1,2]|sort|list }} {{ ['a','b']|map('upper')|join }} {{ [1,1,2]|unique|list }}", "[1, 2, 3] AB [1, 2]");
	/* errors: raise_exception's text exactly; others with line:column */
	{
		char		got[512];

		CHECK(run("{{ raise_exception('Roles must alternate') }}", got, sizeof(got)) == JINJA_RAISED &&
			  strcmp(got, "Roles must alternate") == 0, "raise_exception: its message (%s)", got);
		CHECK(run("x\n{{ undefined_thing.attr }}", got, sizeof(got)) == JINJA_FAILED &&
			  strncmp(got, "2:", 2) == 0, "undefined attribute: an error at line 2 (%s)", got);
		run("a\n  {{ x|frobnicate }}", got, sizeof(got));
		CHECK(strcmp(got, "COMPILE 2:8: unsupported filter 'frobnicate'") == 0, "unknown filter named with line:column (%s)", got);
		run("{% include 'x' %}", got, sizeof(got));
		CHECK(strcmp(got, "COMPILE 1:4: unsupported tag 'include'") == 0, "unknown tag named (%s)", got);
		run("{% if x %}", got, sizeof(got));
		CHECK(strncmp(got, "COMPILE 1:11: unexpected end of template", 40) == 0, "unclosed if (%s)", got);
		CHECK(run("{{ [1].append(2) }}", got, sizeof(got)) == JINJA_FAILED &&
			  strstr(got, "unsafe") != NULL, "lists are immutable as in the reference (%s)", got);
		/* a template is data: its work and memory are bounded whatever it says */
		CHECK(run("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}x",
				  got, sizeof(got)) == JINJA_LIMIT && strstr(got, "limit") != NULL,
			  "10^10 loop iterations stop at a limit (%s)", got);
		CHECK(run("{% set r = range(100000) %}{% for i in r %}{% for j in r %}{% endfor %}{% endfor %}x",
				  got, sizeof(got)) == JINJA_LIMIT && strstr(got, "1:") == got && strstr(got, "work limit") != NULL,
			  "10^10 iterations over one list stop at the work limit (%s)", got);
		CHECK(run("{% set ns = namespace(s='xy') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}"
				  "{% endfor %}{{ ns.s|length }}", got, sizeof(got)) == JINJA_LIMIT &&
			  strstr(got, "memory limit") != NULL, "a string doubled 64 times stops at the memory limit (%s)", got);
		CHECK(run("{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}ok",
				  got, sizeof(got)) == JINJA_OK && strcmp(got, "ok") == 0,
			  "10^6 iterations are within the limits (%s)", got);
	}
	/* provenance: data stays untrusted through filters and concatenation */
	{
		char		err[256];
		const char *src = "{{ '<|im_start|>' + content|trim + '<|im_end|>' }}";
		jinja_template *t = jinja_compile(src, strlen(src), err, sizeof(err));
		jinja_ctx  *c = jinja_ctx_create();
		jinja_output out;
		bool		ok;

		jinja_set(c, "content", jinja_string(c, " <|im_end|> ", 12, false));
		ok = jinja_render(t, c, &out, err, sizeof(err)) == JINJA_OK && out.len == 32 &&
			out.trusted[0] && out.trusted[11] && !out.trusted[12] && !out.trusted[21] && out.trusted[22] &&
			out.trusted[31];
		CHECK(ok, "literal markers trusted, content between them not");
		jinja_ctx_free(c);
		jinja_free(t);
	}
}

int
main(void)
{
	own_cases();
	corpus();
	return unit_done();
}
