/*
 * test_tokenizer_vocab.c — every tokenizer model and pre-tokenizer against
 * llama.cpp's own reference pairs, from vocabulary-only GGUF files.
 *
 * 1. The sdist's battery: for each of the 14 vocabularies with test pairs
 *    (models/ggml-vocab-NAME.gguf{,.inp,.out} of the llama.cpp tree vendored
 *    in llama-cpp-python 0.3.36; $LLM_VOCAB_DIR, default
 *    ${LLM_ORACLE_CACHE:-~/.cache/pg_llm}/llama_cpp_python-0.3.36/vendor/
 *    llama.cpp/models, fetched by `scripts/build-llama-cpp.sh --fetch`), every
 *    input of the .inp file (separated by "\n__ggml_vocab_test__\n") gives
 *    exactly the ids of its .out line, tokenized as llama.cpp's
 *    test-tokenizer-0 does (no BOS, special tokens not parsed).  A missing
 *    file is a failure, never a skip.
 * 2. Pre-tokenizers without a vocabulary of their own: test/golden/
 *    tokenizer_pre/PRE.tsv (scripts/oracle/make_pretok_golden.py: a sdist
 *    vocabulary relabelled with tokenizer.ggml.pre = PRE, tokenized by
 *    llama.cpp); and WordPiece's normalizer switches, bert-bge.NAME.tsv
 *    (bert-bge with tokenizer.ggml.normalizer.* keys added).
 * 3. An unknown tokenizer model or pre-tokenizer is refused with a message
 *    naming the known ones; WordPiece's [CLS] ... [SEP] framing.
 * 4. Vocabulary-only loading: llm_vocab_file_open builds the tokenizer and
 *    the chat template of a file without tensors; the engine still refuses
 *    such a file (no weights).
 */
#define _GNU_SOURCE				/* memmem */
#include "unit.h"
#include "engine/gguf/gguf.h"
#include "engine/engine.h"
#include "engine/text/tokenizer.h"
#include "engine/text/vocab_file.h"
#include "tokenizer_test_util.h"
#include "engine/util/text_util.h"

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_IDS (1 << 16)

static int32_t got[MAX_IDS];
static int32_t want[MAX_IDS];

static const char *const battery[] = {
	"llama-bpe", "qwen2", "qwen35", "phi-3", "llama-spm", "deepseek-llm", "deepseek-coder",
	"command-r", "gpt-2", "starcoder", "falcon", "mpt", "refact", "bert-bge",
};


static void
vocab_dir(char *out, size_t cap)
{
	const char *d = getenv("LLM_VOCAB_DIR");
	const char *cache = getenv("LLM_ORACLE_CACHE");
	const char *home = getenv("HOME");

	if (d != NULL && d[0] != '\0')
		snprintf(out, cap, "%s", d);
	else if (cache != NULL && cache[0] != '\0')
		snprintf(out, cap, "%s/llama_cpp_python-0.3.36/vendor/llama.cpp/models", cache);
	else
		snprintf(out, cap, "%s/.cache/pg_llm/llama_cpp_python-0.3.36/vendor/llama.cpp/models", home ? home : "");
}

/* The tokenizer of a vocabulary-only file, through llm_vocab_file_open. */
static llm_tokenizer *
open_tok(const char *path, llm_vocab_file **vp, char *err, size_t errlen)
{
	*vp = llm_vocab_file_open(path, "auto", err, errlen);
	return *vp ? (*vp)->tok : NULL;
}

/* Compare ids of text[0..len) with the expected ids; prints the first difference. */
static bool
same_ids(const llm_tokenizer *t, const char *label, const char *text, size_t len, const int32_t *exp, int n_exp)
{
	char		err[256];
	int64_t		n = llm_tokenize(t, text, len, got, MAX_IDS, err, sizeof(err));

	if (n == n_exp && memcmp(got, exp, sizeof(int32_t) * (size_t) n) == 0)
		return true;
	printf("# %s: input of %zu bytes \"%.*s\": ", label, len, (int) (len > 60 ? 60 : len), text);
	if (n < 0)
		printf("error %s\n", err);
	else
	{
		printf("got");
		for (int64_t i = 0; i < n && i < 24; i++)
			printf(" %d", got[i]);
		printf(" | want");
		for (int i = 0; i < n_exp && i < 24; i++)
			printf(" %d", exp[i]);
		printf("\n");
	}
	return false;
}

static void
run_battery(const char *dir, const char *name, int *total_pairs, int *total_ok)
{
	char		path[4200],
				pin[4300],
				pout[4300],
				err[512];
	llm_vocab_file *f = NULL;
	llm_tokenizer *t;
	char	   *inp,
			   *outs;
	size_t		inp_len,
				out_len;
	static const char sep[] = "\n__ggml_vocab_test__\n";
	size_t		seplen = sizeof(sep) - 1;
	int			pairs = 0,
				ok = 0;
	char	   *line;
	size_t		pos = 0;

	snprintf(path, sizeof(path), "%s/ggml-vocab-%s.gguf", dir, name);
	snprintf(pin, sizeof(pin), "%s.inp", path);
	snprintf(pout, sizeof(pout), "%s.out", path);
	inp = llm_read_file(pin, SIZE_MAX, NULL, &inp_len, NULL, 0);
	outs = llm_read_file(pout, SIZE_MAX, NULL, &out_len, NULL, 0);
	t = open_tok(path, &f, err, sizeof(err));
	if (!CHECK(t != NULL && inp != NULL && outs != NULL, "%s: vocabulary-only GGUF opens, .inp/.out read (%s)",
			   name, t == NULL ? err : inp == NULL ? pin : outs == NULL ? pout : "ok"))
	{
		free(inp);
		free(outs);
		llm_vocab_file_close(f);
		return;
	}
	line = outs;
	while (pos < inp_len)
	{
		char	   *next = memmem(inp + pos, inp_len - pos, sep, seplen);
		size_t		end = next ? (size_t) (next - inp) : inp_len;
		char	   *nl = line ? strchr(line, '\n') : NULL;
		int			n_exp;

		if (line == NULL || *line == '\0')
		{
			printf("# %s: more inputs than .out lines\n", name);
			pairs++;
			break;
		}
		if (nl)
			*nl = '\0';
		n_exp = parse_ids(line, want, MAX_IDS);
		pairs++;
		if (same_ids(t, name, inp + pos, end - pos, want, n_exp))
			ok++;
		line = nl ? nl + 1 : NULL;
		if (next == NULL)
			break;
		pos = end + seplen;
	}
	if (line != NULL && *line != '\0')
	{
		printf("# %s: more .out lines than inputs\n", name);
		pairs++;
	}
	CHECK(pairs > 0 && ok == pairs, "%s: %d/%d reference pairs give llama.cpp's ids", name, ok, pairs);
	*total_pairs += pairs;
	*total_ok += ok;
	free(inp);
	free(outs);
	llm_vocab_file_close(f);
}

/*
 * data (a GGUF of len bytes) with the string value of tokenizer.ggml.pre
 * replaced by pre, as scripts/oracle/make_pretok_golden.py relabels it:
 * a malloc'd copy (length in *out_len), or NULL when the key is not there
 * exactly once.
 */
static char *
relabel(const char *data, size_t len, const char *pre, size_t *out_len)
{
	static const char key[] = "tokenizer.ggml.pre";
	char		needle[8 + sizeof(key) - 1 + 4];
	uint64_t	klen = sizeof(key) - 1,
				vlen,
				plen = strlen(pre);
	uint32_t	vt = 8;			/* GGUF_VT_STRING */
	const char *at,
			   *again;
	size_t		v;
	char	   *out;

	memcpy(needle, &klen, 8);	/* GGUF is little-endian, as this host */
	memcpy(needle + 8, key, klen);
	memcpy(needle + 8 + klen, &vt, 4);
	at = memmem(data, len, needle, sizeof(needle));
	if (at == NULL)
		return NULL;
	again = memmem(at + 1, len - (size_t) (at + 1 - data), needle, sizeof(needle));
	if (again != NULL)
		return NULL;
	v = (size_t) (at - data) + sizeof(needle);
	memcpy(&vlen, data + v, 8);
	if (v + 8 + vlen > len)
		return NULL;
	*out_len = len - vlen + plen;
	out = malloc(*out_len);
	if (out == NULL)
		return NULL;
	memcpy(out, data, v);
	memcpy(out + v, &plen, 8);
	memcpy(out + v + 8, pre, plen);
	memcpy(out + v + 8 + plen, data + v + 8 + vlen, len - v - 8 - vlen);
	return out;
}

/*
 * data with a bool KV key = value inserted before the first KV (the
 * header's count raised, 32 zero bytes appended for the data section's
 * alignment), as scripts/oracle/make_pretok_golden.py adds it; malloc'd.
 */
static char *
add_bool(char *data, size_t len, const char *key, bool value, size_t *out_len)
{
	uint64_t	n_kv,
				klen = strlen(key);
	uint32_t	vt = 7;			/* GGUF_VT_BOOL */
	size_t		kvlen = 8 + klen + 4 + 1;
	char	   *out;

	if (len < 24)
		return NULL;
	*out_len = len + kvlen + 32;
	out = calloc(1, *out_len);
	if (out == NULL)
		return NULL;
	memcpy(&n_kv, data + 16, 8);
	n_kv++;
	memcpy(out, data, 16);
	memcpy(out + 16, &n_kv, 8);
	memcpy(out + 24, &klen, 8);
	memcpy(out + 32, key, klen);
	memcpy(out + 32 + klen, &vt, 4);
	out[36 + klen] = value ? 1 : 0;
	memcpy(out + 24 + kvlen, data + 24, len - 24);
	return out;
}

/* test/golden/tokenizer_pre/PRE.tsv: the pre-tokenizer PRE on its base vocabulary, against llama.cpp. */
static void
run_relabelled(const char *dir, const char *tsv_dir, const char *file)
{
	char		pre[128],
				path[4400],
				base[128],
				what[512] = "",
				err[1024];
	size_t		n = strlen(file) - 4,
				tsv_len,
				vocab_len,
				buf_len;
	char	   *tsv,
			   *vocab = NULL,
			   *buf = NULL,
			   *line,
			   *next;
	gguf_file  *f = NULL;
	llm_tokenizer *t = NULL;
	int			pairs = 0,
				ok = 0;
	char		text[1 << 16];

	if (n >= sizeof(pre))
		return;
	memcpy(pre, file, n);
	pre[n] = '\0';
	snprintf(path, sizeof(path), "%s/%s", tsv_dir, file);
	tsv = llm_read_file(path, SIZE_MAX, NULL, &tsv_len, NULL, 0);
	if (tsv == NULL || sscanf(tsv, "# base: %127s", base) != 1)
	{
		CHECK(0, "%s: golden %s readable, with its base vocabulary", pre, path);
		free(tsv);
		return;
	}
	snprintf(path, sizeof(path), "%s/ggml-vocab-%s.gguf", dir, base);
	vocab = llm_read_file(path, SIZE_MAX, NULL, &vocab_len, NULL, 0);
	buf_len = vocab_len;
	/* "# bool: KEY=0|1" lines: keys added to the base vocabulary; none: its pre-tokenizer relabelled */
	for (line = strchr(tsv, '\n') + 1; vocab && line && strncmp(line, "# bool: ", 8) == 0;
		 line = strchr(line, '\n') + 1)
	{
		char		key[128];
		int			v;
		char	   *more;

		if (sscanf(line, "# bool: %127[^=]=%d", key, &v) != 2 ||
			(more = add_bool(buf ? buf : vocab, buf_len, key, v != 0, &buf_len)) == NULL)
		{
			buf_len = 0;
			break;
		}
		free(buf);
		buf = more;
		snprintf(what + strlen(what), sizeof(what) - strlen(what), "%s%s=%d", what[0] ? ", " : "", key, v);
	}
	if (vocab && buf == NULL && buf_len == vocab_len)
	{
		buf = relabel(vocab, vocab_len, pre, &buf_len);
		snprintf(what, sizeof(what), "tokenizer.ggml.pre=%s", pre);
	}
	if (buf)
		f = gguf_open_buffer(buf, buf_len, err, sizeof(err));
	if (f)
		t = llm_tokenizer_create(f, err, sizeof(err));
	if (!CHECK(t != NULL, "%s: %s with %s builds (%s)", pre, base, what,
			   t ? "ok" : vocab == NULL ? path : buf == NULL ? "relabel failed" : err))
		goto done;
	for (line = strchr(tsv, '\n') + 1; line && *line; line = next)
	{
		char	   *tab = strchr(line, '\t');
		long		len;
		int			n_exp;

		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		if (tab == NULL || line[0] == '#')
			continue;
		len = unhex(line, (size_t) (tab - line), text);
		n_exp = parse_ids(tab + 1, want, MAX_IDS);
		pairs++;
		if (len >= 0 && same_ids(t, pre, text, (size_t) len, want, n_exp))
			ok++;
	}
	CHECK(pairs > 0 && ok == pairs, "%s (%s's vocabulary, %s): %d/%d strings give llama.cpp's ids", pre, base,
		  what, ok, pairs);
done:
	llm_tokenizer_destroy(t);
	if (f)
		gguf_close(f);
	free(buf);
	free(vocab);
	free(tsv);
}

static int
name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *) a, *(char *const *) b);
}

/* Every golden of test/golden/tokenizer_pre, in name order. */
static void
relabelled_battery(const char *dir)
{
	const char *tsv_dir = "test/golden/tokenizer_pre";
	DIR		   *d = opendir(tsv_dir);
	struct dirent *de;
	char	   *names[256];
	int			n = 0;

	if (!CHECK(d != NULL, "%s exists (run from the repository root)", tsv_dir))
		return;
	while ((de = readdir(d)) != NULL && n < 256)
	{
		size_t		l = strlen(de->d_name);

		if (l > 4 && strcmp(de->d_name + l - 4, ".tsv") == 0)
			names[n++] = strdup(de->d_name);
	}
	closedir(d);
	qsort(names, (size_t) n, sizeof(char *), name_cmp);
	CHECK(n > 0, "%d relabelled pre-tokenizer goldens", n);
	for (int i = 0; i < n; i++)
	{
		run_relabelled(dir, tsv_dir, names[i]);
		free(names[i]);
	}
}

/* WordPiece: [CLS] text [SEP] with llm_tokenize_special, [UNK] for an unknown word. */
static void
wordpiece_specials(const char *dir)
{
	char		path[4200],
				err[512];
	llm_vocab_file *f;
	llm_tokenizer *t;
	int64_t		n,
				m;
	int32_t		plain[64];

	snprintf(path, sizeof(path), "%s/ggml-vocab-bert-bge.gguf", dir);
	t = open_tok(path, &f, err, sizeof(err));
	if (!CHECK(t != NULL, "bert-bge opens (%s)", t ? "ok" : err))
		return;
	n = llm_tokenize_special(t, "Hello world", 11, got, MAX_IDS, err, sizeof(err));
	m = llm_tokenize(t, "Hello world", 11, plain, 64, err, sizeof(err));
	CHECK(n == m + 2 && got[0] == 101 && got[n - 1] == 102 && memcmp(got + 1, plain, sizeof(int32_t) * (size_t) m) == 0,
		  "WordPiece add_special: [CLS]=101 + %lld ids + [SEP]=102 (got %lld ids)", (long long) m, (long long) n);
	n = llm_tokenize_special(t, "Hello world", 11, got, 2, err, sizeof(err));
	CHECK(n == m + 2 && got[0] == 101, "llm_tokenize_special with a short buffer counts all %lld ids", (long long) n);
	/* a word of a script the vocabulary lacks (Old Italic) is one [UNK] */
	n = llm_tokenize(t, "a \xf0\x90\x8c\x80\xf0\x90\x8c\x81 b", 12, got, MAX_IDS, err, sizeof(err));
	CHECK(n == 3 && got[1] == 100, "an unknown word gives one [UNK] (100): %lld ids, middle %d", (long long) n,
		  n >= 2 ? got[1] : -1);
	CHECK(llm_tokenizer_max_token_bytes(t) == 0, "WordPiece has no bytes-per-token bound (0)");
	llm_vocab_file_close(f);
}

/* A file without tensors: its tokenizer and chat template, but no engine. */
static void
vocab_only(const char *dir)
{
	char		path[4200],
				err[512];
	llm_vocab_file *v;
	llm_engine_config c;
	llm_engine *e;
	llm_chat_message msg = {"user", "Hi", 2};
	int32_t    *ids = NULL;
	int64_t		n;

	/* Qwen2's vocabulary carries its own (ChatML-shaped) Jinja template */
	snprintf(path, sizeof(path), "%s/ggml-vocab-qwen2.gguf", dir);
	v = llm_vocab_file_open(path, NULL, err, sizeof(err));
	if (!CHECK(v != NULL && gguf_n_tensors(v->gguf) == 0, "vocabulary-only qwen2 opens without tensors (%s)",
			   v ? "ok" : err))
		return;
	CHECK(v->chat.family == LLM_CHAT_JINJA, "its chat template is read from the file (family %s)",
		  llm_chat_family_name(v->chat.family));
	n = llm_chat_apply_alloc(&v->chat, v->tok, &msg, 1, NULL, &ids, err, sizeof(err));
	CHECK(n > 4 && ids[n - 3] == llm_tokenizer_special_id(v->tok, "<|im_start|>"),
		  "a chat renders from the vocabulary alone (%lld ids)", (long long) n);
	free(ids);
	llm_vocab_file_close(v);

	v = llm_vocab_file_open(path, "gemma", err, sizeof(err));
	CHECK(v == NULL && strstr(err, "start_of_turn") != NULL,
		  "a configured template the vocabulary cannot render is refused: %s", v ? "(opened)" : err);
	llm_vocab_file_close(v);

	/* an architecture the engine knows, so what it misses is the weights */
	snprintf(path, sizeof(path), "%s/ggml-vocab-llama-bpe.gguf", dir);
	llm_engine_config_defaults(&c);
	c.model_path = path;
	c.n_threads = 1;
	e = llm_engine_create(&c, err, sizeof(err));
	CHECK(e == NULL && strstr(err, "token_embd") != NULL,
		  "the engine still requires weights: %s", e ? "(created)" : err);
	if (e)
		llm_engine_destroy(e);
}

int
main(void)
{
	char		dir[4096];
	int			pairs = 0,
				ok = 0;

	vocab_dir(dir, sizeof(dir));
	printf("# vocabularies from %s\n", dir);
	for (size_t i = 0; i < sizeof(battery) / sizeof(battery[0]); i++)
		run_battery(dir, battery[i], &pairs, &ok);
	printf("# sdist battery: %d/%d pairs identical\n", ok, pairs);
	relabelled_battery(dir);
	wordpiece_specials(dir);
	vocab_only(dir);
	return unit_done();
}
