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
 *    llama.cpp's llama-tokenize).
 * 3. An unknown tokenizer model or pre-tokenizer is refused with a message
 *    naming the known ones; WordPiece's [CLS] ... [SEP] framing.
 */
#define _GNU_SOURCE				/* memmem */
#include "unit.h"
#include "engine/gguf/gguf.h"
#include "engine/text/tokenizer.h"
#include "tokenizer_test_util.h"

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

static char *
read_file(const char *path, size_t *len)
{
	FILE	   *f = fopen(path, "rb");
	char	   *buf;
	long		n;

	if (f == NULL)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc((size_t) n + 1);
	if (buf == NULL || fread(buf, 1, (size_t) n, f) != (size_t) n)
	{
		free(buf);
		fclose(f);
		return NULL;
	}
	buf[n] = '\0';
	fclose(f);
	*len = (size_t) n;
	return buf;
}

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

static llm_tokenizer *
open_tok(const char *path, gguf_file **fp, char *err, size_t errlen)
{
	*fp = gguf_open(path, err, errlen);
	if (*fp == NULL)
		return NULL;
	return llm_tokenizer_create(*fp, err, errlen);
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
				pin[4200],
				pout[4200],
				err[512];
	gguf_file  *f = NULL;
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
	inp = read_file(pin, &inp_len);
	outs = read_file(pout, &out_len);
	t = open_tok(path, &f, err, sizeof(err));
	if (!CHECK(t != NULL && inp != NULL && outs != NULL, "%s: vocabulary-only GGUF opens, .inp/.out read (%s)",
			   name, t == NULL ? err : inp == NULL ? pin : outs == NULL ? pout : "ok"))
	{
		free(inp);
		free(outs);
		llm_tokenizer_destroy(t);
		if (f)
			gguf_close(f);
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
	llm_tokenizer_destroy(t);
	gguf_close(f);
}

/* WordPiece: [CLS] text [SEP] with llm_tokenize_special, [UNK] for an unknown word. */
static void
wordpiece_specials(const char *dir)
{
	char		path[4200],
				err[512];
	gguf_file  *f;
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
	llm_tokenizer_destroy(t);
	gguf_close(f);
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
	wordpiece_specials(dir);
	return unit_done();
}
