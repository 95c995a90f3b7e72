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
	inp = read_file(pin, &inp_len);
	outs = read_file(pout, &out_len);
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

	/* Qwen2's vocabulary carries its ChatML template */
	snprintf(path, sizeof(path), "%s/ggml-vocab-qwen2.gguf", dir);
	v = llm_vocab_file_open(path, NULL, err, sizeof(err));
	if (!CHECK(v != NULL && gguf_n_tensors(v->gguf) == 0, "vocabulary-only qwen2 opens without tensors (%s)",
			   v ? "ok" : err))
		return;
	CHECK(v->chat.family == LLM_CHAT_CHATML, "its chat template is read from the file (family %s)",
		  llm_chat_family_name(v->chat.family));
	n = llm_chat_apply_alloc(&v->chat, v->tok, &msg, 1, &ids, err, sizeof(err));
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
	wordpiece_specials(dir);
	vocab_only(dir);
	return unit_done();
}
