/*
 * golden.cpp — writes pg_llm's oracle golden files with llama.cpp.
 *
 * llama.cpp (the version vendored in llama-cpp-python 0.3.36) is the
 * reference for tokens and logits.  This program uses only its public C API
 * (include/llama.h): it tokenizes ChatML-rendered (or raw) prompts with
 * add_special = true (BOS when the model adds one) and parse_special = true,
 * runs each prompt in ONE llama_decode call, and then decodes greedily one
 * token at a time, taking the argmax of the raw logits itself (no
 * llama_sampler), so the goldens do not depend on sampler details.
 *
 * Usage:
 *   golden MODEL.gguf PROMPTS.tsv OUTDIR          write OUTDIR/greedy.tsv,
 *                                                 OUTDIR/logits.tsv, OUTDIR/logits/
 *                                                 (full rows as float32 .f32 files)
 *   golden MODEL.gguf PROMPTS.tsv OUTDIR --f16-logits
 *                                                 the same with compact rows: .f16
 *                                                 files (IEEE binary16, nearest even)
 *                                                 plus exact top-64 and statistics
 *                                                 in logits.tsv (large vocabularies)
 *   golden MODEL.gguf PROMPTS.tsv --noise         print how much the last-position
 *                                                 logits move between legitimate
 *                                                 llama.cpp execution paths (one
 *                                                 batched prefill vs token-by-token,
 *                                                 flash attention off vs on)
 *
 * PROMPTS.tsv format: see test/golden/prompts.tsv.  Output formats: see
 * test/golden/README.md.
 */
#include "llama.h"
#include "ggml.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>
#include <algorithm>

static const int	GEN_TOKENS = 32;		/* greedy tokens per chat prompt */
static const int	N_CTX = 8192;			/* the model's full context */
static const int	N_BATCH = 4096;		/* >= any prompt: one decode, one ubatch */
static const int	N_THREADS = 2;
static const char  *DEFAULT_SYSTEM =
	"You are a helpful AI assistant named SmolLM, trained by Hugging Face";

struct prompt_spec
{
	std::string id;
	std::string kind;			/* chat, raw (greedy); lchat, lraw (logits) */
	std::string system;			/* empty = default system message */
	std::string text;			/* unescaped user text (or raw text) */
};

/* Undo the \n, \t, \\ escapes of prompts.tsv. */
static std::string
unescape(const std::string &s)
{
	std::string out;

	for (size_t i = 0; i < s.size(); i++)
	{
		if (s[i] == '\\' && i + 1 < s.size())
		{
			char		c = s[++i];

			if (c == 'n')
				out += '\n';
			else if (c == 't')
				out += '\t';
			else if (c == '\\')
				out += '\\';
			else
			{
				out += '\\';
				out += c;
			}
		}
		else
			out += s[i];
	}
	return out;
}

static std::vector<prompt_spec>
read_prompts(const char *path)
{
	std::ifstream in(path);
	std::vector<prompt_spec> out;
	std::string line;

	if (!in)
	{
		fprintf(stderr, "golden: cannot open %s\n", path);
		exit(1);
	}
	while (std::getline(in, line))
	{
		if (line.empty() || line[0] == '#')
			continue;

		std::vector<std::string> col;
		size_t		start = 0;

		for (;;)
		{
			size_t		tab = line.find('\t', start);

			col.push_back(line.substr(start, tab == std::string::npos ? std::string::npos : tab - start));
			if (tab == std::string::npos)
				break;
			start = tab + 1;
		}
		if (col.size() != 4)
		{
			fprintf(stderr, "golden: bad prompt line (need 4 tab-separated columns): %s\n", line.c_str());
			exit(1);
		}
		prompt_spec p;

		p.id = col[0];
		p.kind = col[1];
		p.system = col[2] == "-" ? "" : unescape(col[2]);
		p.text = unescape(col[3]);
		if (p.kind != "chat" && p.kind != "raw" && p.kind != "lchat" && p.kind != "lraw")
		{
			fprintf(stderr, "golden: unknown kind '%s' for %s\n", p.kind.c_str(), p.id.c_str());
			exit(1);
		}
		out.push_back(p);
	}
	return out;
}

/*
 * SmolLM2's chat template (tokenizer.chat_template in the GGUF) for one user
 * turn with add_generation_prompt: the default system turn is inserted when
 * the conversation does not start with a system message.
 */
static std::string
render_chatml(const prompt_spec &p)
{
	const std::string sys = p.system.empty() ? DEFAULT_SYSTEM : p.system;

	return "<|im_start|>system\n" + sys + "<|im_end|>\n"
		"<|im_start|>user\n" + p.text + "<|im_end|>\n"
		"<|im_start|>assistant\n";
}

static std::vector<llama_token>
tokenize(const llama_vocab *vocab, const std::string &text)
{
	std::vector<llama_token> toks(text.size() + 16);
	int32_t		n = llama_tokenize(vocab, text.data(), (int32_t) text.size(),
								   toks.data(), (int32_t) toks.size(),
								   /* add_special */ true, /* parse_special */ true);

	if (n < 0)
	{
		toks.resize(-n);
		n = llama_tokenize(vocab, text.data(), (int32_t) text.size(),
						   toks.data(), (int32_t) toks.size(), true, true);
	}
	if (n < 0)
	{
		fprintf(stderr, "golden: tokenization failed\n");
		exit(1);
	}
	toks.resize(n);
	return toks;
}

static std::string
prompt_text(const prompt_spec &p)
{
	return p.kind == "lraw" || p.kind == "raw" ? p.text : render_chatml(p);
}

/* Greedy prompts (greedy.tsv) as opposed to logits prompts (logits/). */
static bool
is_greedy(const prompt_spec &p)
{
	return p.kind == "chat" || p.kind == "raw";
}

/* IEEE binary16 of f, round to nearest even (overflow to infinity, NaN kept). */
static uint16_t
f32_to_f16(float f)
{
	uint32_t	x;

	memcpy(&x, &f, 4);
	uint32_t	sign = (x >> 16) & 0x8000;
	int32_t		e = (int32_t) ((x >> 23) & 0xFF) - 127 + 15;
	uint32_t	m = x & 0x7FFFFF;

	if (((x >> 23) & 0xFF) == 0xFF)
		return (uint16_t) (sign | 0x7C00 | (m ? 0x200 : 0));
	if (e >= 31)
		return (uint16_t) (sign | 0x7C00);
	if (e <= 0)
	{
		if (e < -10)
			return (uint16_t) sign;
		m |= 0x800000;
		uint32_t	shift = (uint32_t) (14 - e);
		uint32_t	half = 1u << (shift - 1);
		uint32_t	r = m >> shift;

		if ((m & ((1u << shift) - 1)) > half || ((m & ((1u << shift) - 1)) == half && (r & 1)))
			r++;
		return (uint16_t) (sign | r);
	}
	uint32_t	r = ((uint32_t) e << 10) | (m >> 13);

	if ((m & 0x1FFF) > 0x1000 || ((m & 0x1FFF) == 0x1000 && (r & 1)))
		r++;					/* may carry into the exponent: still correct */
	return (uint16_t) (sign | r);
}

/* FNV-1a 64 over the row's float32 bytes (little-endian): equal hash = bit-identical row. */
static uint64_t
fnv1a64(const float *v, int n)
{
	const unsigned char *p = (const unsigned char *) v;
	uint64_t	h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < (size_t) n * 4; i++)
	{
		h ^= p[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

/* Index of the largest logit (lowest index on ties) and top1 - top2 margin. */
static int
argmax_margin(const float *logits, int n_vocab, float *margin)
{
	int			best = 0;
	float		v1 = -INFINITY,
				v2 = -INFINITY;

	for (int i = 0; i < n_vocab; i++)
	{
		float		v = logits[i];

		if (v > v1)
		{
			v2 = v1;
			v1 = v;
			best = i;
		}
		else if (v > v2)
			v2 = v;
	}
	*margin = v1 - v2;
	return best;
}

static std::vector<int>
topk(const float *logits, int n_vocab, int k)
{
	std::vector<int> idx(n_vocab);

	for (int i = 0; i < n_vocab; i++)
		idx[i] = i;
	std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
					  [logits] (int a, int b) {
						  return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
					  });
	idx.resize(k);
	return idx;
}

static std::string
hex(const std::string &s)
{
	static const char digits[] = "0123456789abcdef";
	std::string out;

	for (unsigned char c : s)
	{
		out += digits[c >> 4];
		out += digits[c & 15];
	}
	return out;
}

static std::string
join_ids(const std::vector<llama_token> &v)
{
	std::string out;

	for (size_t i = 0; i < v.size(); i++)
	{
		if (i)
			out += ' ';
		out += std::to_string(v[i]);
	}
	return out;
}

static llama_context_params golden_params;	/* of the golden context, for the header */

static llama_context *
make_context(llama_model *model, llama_flash_attn_type fa, int n_ubatch)
{
	llama_context_params cp = llama_context_default_params();

	cp.n_ctx = N_CTX;
	cp.n_batch = N_BATCH;
	cp.n_ubatch = n_ubatch;
	cp.n_seq_max = 1;
	cp.n_threads = N_THREADS;
	cp.n_threads_batch = N_THREADS;
	cp.flash_attn_type = fa;
	cp.no_perf = true;
	/* type_k / type_v left at the default (f16); printed in the header */

	llama_context *ctx = llama_init_from_model(model, cp);

	if (fa == LLAMA_FLASH_ATTN_TYPE_DISABLED)
		golden_params = cp;

	if (!ctx)
	{
		fprintf(stderr, "golden: llama_init_from_model failed\n");
		exit(1);
	}
	return ctx;
}

/* Clear the KV cache, prefill prompt in one decode; returns last-position logits. */
static const float *
prefill(llama_context *ctx, std::vector<llama_token> &toks)
{
	llama_memory_clear(llama_get_memory(ctx), true);
	if (llama_decode(ctx, llama_batch_get_one(toks.data(), (int32_t) toks.size())) != 0)
	{
		fprintf(stderr, "golden: llama_decode(prefill of %zu tokens) failed\n", toks.size());
		exit(1);
	}
	return llama_get_logits_ith(ctx, -1);
}

/* Same, but feeding the prompt one token per decode call. */
static const float *
prefill_token_by_token(llama_context *ctx, std::vector<llama_token> &toks)
{
	llama_memory_clear(llama_get_memory(ctx), true);
	for (size_t i = 0; i < toks.size(); i++)
	{
		if (llama_decode(ctx, llama_batch_get_one(&toks[i], 1)) != 0)
		{
			fprintf(stderr, "golden: llama_decode(token %zu) failed\n", i);
			exit(1);
		}
	}
	return llama_get_logits_ith(ctx, -1);
}

/*
 * Greedy continuation from the prefill's logits: up to GEN_TOKENS argmax
 * tokens, stopping after an end-of-generation token (kept in gen).  margins
 * gets the top1 - top2 logit gap of every step.  Returns true if stopped at eog.
 */
static bool
greedy(llama_context *ctx, const llama_vocab *vocab, const float *logits,
	   std::vector<llama_token> &gen, std::vector<float> &margins)
{
	const int	n_vocab = llama_vocab_n_tokens(vocab);

	gen.clear();
	margins.clear();
	for (int step = 0; step < GEN_TOKENS; step++)
	{
		float		m;
		llama_token next = argmax_margin(logits, n_vocab, &m);

		margins.push_back(m);
		gen.push_back(next);
		if (llama_vocab_is_eog(vocab, next))
			return true;
		if (step + 1 == GEN_TOKENS)
			break;
		if (llama_decode(ctx, llama_batch_get_one(&next, 1)) != 0)
		{
			fprintf(stderr, "golden: decode failed at generation step %d\n", step);
			exit(1);
		}
		logits = llama_get_logits_ith(ctx, -1);
	}
	return false;
}

static void
quiet_log(ggml_log_level level, const char *text, void *user)
{
	(void) user;
	if (level == GGML_LOG_LEVEL_ERROR)
		fputs(text, stderr);
}

static void
write_header(FILE *f, llama_model *model, llama_context *ctx, const llama_vocab *vocab,
			 const std::vector<int> &eog)
{
	char		desc[256];

	llama_model_desc(model, desc, sizeof desc);
	fprintf(f, "# oracle: llama.cpp %s (vendored in llama-cpp-python 0.3.36), CPU backend\n", llama_version());
	fprintf(f, "# model: %s, n_vocab %d\n", desc, llama_vocab_n_tokens(vocab));
	fprintf(f, "# settings: n_ctx %u, n_batch %u, n_ubatch %u, n_threads %d, flash_attn %s, "
			"type_k %s, type_v %s, add_special true, parse_special true\n",
			llama_n_ctx(ctx), llama_n_batch(ctx), llama_n_ubatch(ctx), golden_params.n_threads,
			llama_flash_attn_type_name(golden_params.flash_attn_type),
			ggml_type_name(golden_params.type_k), ggml_type_name(golden_params.type_v));
	fprintf(f, "# system: %s\n", llama_print_system_info());
	fprintf(f, "# eog:");
	for (int t : eog)
		fprintf(f, " %d", t);
	fprintf(f, "\n");
}

int
main(int argc, char **argv)
{
	if (argc != 4 && !(argc == 5 && strcmp(argv[4], "--f16-logits") == 0))
	{
		fprintf(stderr, "usage: golden MODEL.gguf PROMPTS.tsv OUTDIR|--noise [--f16-logits]\n");
		return 2;
	}
	const char *model_path = argv[1];
	std::vector<prompt_spec> prompts = read_prompts(argv[2]);
	const bool	noise = strcmp(argv[3], "--noise") == 0;
	const bool	f16_logits = argc == 5;
	const std::string outdir = argv[3];

	llama_log_set(quiet_log, nullptr);
	llama_backend_init();

	llama_model_params mp = llama_model_default_params();

	mp.n_gpu_layers = 0;
	llama_model *model = llama_model_load_from_file(model_path, mp);

	if (!model)
	{
		fprintf(stderr, "golden: cannot load %s\n", model_path);
		return 1;
	}
	const llama_vocab *vocab = llama_model_get_vocab(model);
	const int	n_vocab = llama_vocab_n_tokens(vocab);
	std::vector<int> eog;

	for (int t = 0; t < n_vocab; t++)
		if (llama_vocab_is_eog(vocab, t))
			eog.push_back(t);

	llama_context *ctx = make_context(model, LLAMA_FLASH_ATTN_TYPE_DISABLED, N_BATCH);

	if (noise)
	{
		/*
		 * Noise floor: how far apart are two correct executions of the same
		 * model?  Compare the golden path with (a) token-by-token prefill
		 * (matrix-vector kernels, KV read back from the f16 cache) and (b)
		 * flash attention.  Reported relative to the std of the logits.
		 */
		llama_context *ctx_fa = make_context(model, LLAMA_FLASH_ATTN_TYPE_ENABLED, N_BATCH);
		std::vector<float> ref(n_vocab);

		printf("# id n_tokens std  tbt:max/std tbt:rms/std  fa:max/std fa:rms/std\n");
		for (auto &p : prompts)
		{
			if (is_greedy(p) && p.id != "g08" && p.id != "g28" && p.id != "g64")
				continue;
			std::vector<llama_token> toks = tokenize(vocab, prompt_text(p));
			const float *l = prefill(ctx, toks);

			std::copy(l, l + n_vocab, ref.begin());
			double		mean = 0, var = 0;

			for (float v : ref)
				mean += v;
			mean /= n_vocab;
			for (float v : ref)
				var += (v - mean) * (v - mean);
			double		sd = sqrt(var / n_vocab);
			const float *alt[2] = {prefill_token_by_token(ctx, toks), nullptr};
			double		mx[2] = {0, 0}, rms[2] = {0, 0};

			for (int i = 0; i < n_vocab; i++)
			{
				double		d = fabs(alt[0][i] - ref[i]);

				mx[0] = std::max(mx[0], d);
				rms[0] += d * d;
			}
			alt[1] = prefill(ctx_fa, toks);
			for (int i = 0; i < n_vocab; i++)
			{
				double		d = fabs(alt[1][i] - ref[i]);

				mx[1] = std::max(mx[1], d);
				rms[1] += d * d;
			}
			printf("%s %zu %.3f  %.5f %.5f  %.5f %.5f\n", p.id.c_str(), toks.size(), sd,
				   mx[0] / sd, sqrt(rms[0] / n_vocab) / sd,
				   mx[1] / sd, sqrt(rms[1] / n_vocab) / sd);
		}
		/*
		 * Greedy divergence between the same two llama.cpp paths: how often
		 * does a correct implementation pick a different token, and at which
		 * oracle margin?
		 */
		int			n_chat = 0, n_div_fa = 0, n_div_tbt = 0;

		printf("# greedy divergences (path, prompt, step, oracle margin at that step)\n");
		for (auto &p : prompts)
		{
			if (!is_greedy(p))
				continue;
			n_chat++;
			std::vector<llama_token> toks = tokenize(vocab, prompt_text(p));
			std::vector<llama_token> g0, g1;
			std::vector<float> m0, m1;

			greedy(ctx, vocab, prefill(ctx, toks), g0, m0);
			for (int path = 0; path < 2; path++)
			{
				llama_context *c = path == 0 ? ctx_fa : ctx;
				const float *l = path == 0 ? prefill(c, toks) : prefill_token_by_token(c, toks);

				greedy(c, vocab, l, g1, m1);
				for (size_t i = 0; i < std::min(g0.size(), g1.size()); i++)
				{
					if (g0[i] != g1[i])
					{
						printf("%s %s %zu %.4f\n", path == 0 ? "fa" : "tbt", p.id.c_str(), i, m0[i]);
						(path == 0 ? n_div_fa : n_div_tbt)++;
						break;
					}
				}
			}
		}
		printf("# %d greedy prompts: %d diverge with flash attention, %d with token-by-token prefill\n",
			   n_chat, n_div_fa, n_div_tbt);
		llama_free(ctx_fa);
		llama_free(ctx);
		llama_model_free(model);
		llama_backend_free();
		return 0;
	}

	std::string greedy_path = outdir + "/greedy.tsv";
	std::string logits_path = outdir + "/logits.tsv";
	FILE	   *fg = fopen(greedy_path.c_str(), "w");
	FILE	   *fl = fopen(logits_path.c_str(), "w");

	if (!fg || !fl)
	{
		fprintf(stderr, "golden: cannot write into %s\n", outdir.c_str());
		return 1;
	}
	write_header(fg, model, ctx, vocab, eog);
	fprintf(fg, "# greedy: %d tokens (argmax of raw logits, lowest id on ties), stop after an eog token (kept as the last generated id)\n",
			GEN_TOKENS);
	fprintf(fg, "# columns: prompt_id, user_prompt_hex, prompt_ids, generated_ids, margins, finish, system_hex ('-' = default)\n");
	write_header(fl, model, ctx, vocab, eog);
	if (!f16_logits)
		fprintf(fl, "# columns: prompt_id, kind (lchat = ChatML-rendered, lraw = raw text), text_hex, prompt_ids, top5_ids, file\n");
	else
	{
		fprintf(fg, "# bos: %d, add_bos %s (prompt_ids start with it when true)\n",
				llama_vocab_bos(vocab), llama_vocab_get_add_bos(vocab) ? "true" : "false");
		fprintf(fl, "# bos: %d, add_bos %s (prompt_ids start with it when true)\n",
				llama_vocab_bos(vocab), llama_vocab_get_add_bos(vocab) ? "true" : "false");
		fprintf(fl, "# columns: prompt_id, kind (lchat = ChatML-rendered, lraw = raw text), text_hex, prompt_ids, top5_ids, file "
				"(%d IEEE binary16, little-endian, nearest even), mean, std (population, of the float32 row), "
				"fnv1a64 of the float32 row's little-endian bytes, top64 as id:value (float32, %%.9g, exact)\n",
				n_vocab);
	}

	int			n_logits = 0;

	for (auto &p : prompts)
	{
		std::vector<llama_token> toks = tokenize(vocab, prompt_text(p));

		if ((int) toks.size() + GEN_TOKENS > N_CTX || (int) toks.size() > N_BATCH)
		{
			fprintf(stderr, "golden: prompt %s too long (%zu tokens)\n", p.id.c_str(), toks.size());
			return 1;
		}
		const float *logits = prefill(ctx, toks);

		if (is_greedy(p))
		{
			std::vector<llama_token> gen;
			std::vector<float> m;
			std::string margins;
			const char *finish = greedy(ctx, vocab, logits, gen, m) ? "stop" : "length";

			for (size_t i = 0; i < m.size(); i++)
			{
				char		buf[32];

				snprintf(buf, sizeof buf, "%s%.4f", i ? " " : "", m[i]);
				margins += buf;
			}
			fprintf(fg, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.id.c_str(), hex(p.text).c_str(),
					join_ids(toks).c_str(), join_ids(gen).c_str(), margins.c_str(), finish,
					p.system.empty() ? "-" : hex(p.system).c_str());
		}
		else
		{
			char		name[64];

			snprintf(name, sizeof name, "logits_%02d.%s", ++n_logits, f16_logits ? "f16" : "f32");
			std::string path = outdir + "/logits/" + name;
			FILE	   *fb = fopen(path.c_str(), "wb");
			size_t		written;

			if (!fb)
			{
				fprintf(stderr, "golden: cannot write %s\n", path.c_str());
				return 1;
			}
			/* little-endian: x86-64 native order */
			if (f16_logits)
			{
				std::vector<uint16_t> half(n_vocab);

				for (int i = 0; i < n_vocab; i++)
					half[i] = f32_to_f16(logits[i]);
				written = fwrite(half.data(), sizeof(uint16_t), n_vocab, fb);
			}
			else
				written = fwrite(logits, sizeof(float), n_vocab, fb);
			if (written != (size_t) n_vocab || fclose(fb) != 0)
			{
				fprintf(stderr, "golden: write error on %s\n", path.c_str());
				return 1;
			}
			std::vector<int> top = topk(logits, n_vocab, 5);
			std::vector<llama_token> topv(top.begin(), top.end());

			fprintf(fl, "%s\t%s\t%s\t%s\t%s\t%s", p.id.c_str(), p.kind.c_str(),
					hex(prompt_text(p)).c_str(), join_ids(toks).c_str(),
					join_ids(topv).c_str(), name);
			if (f16_logits)
			{
				double		mean = 0, var = 0;
				std::string tops;

				for (int i = 0; i < n_vocab; i++)
					mean += logits[i];
				mean /= n_vocab;
				for (int i = 0; i < n_vocab; i++)
					var += (logits[i] - mean) * (logits[i] - mean);
				for (int id : topk(logits, n_vocab, 64))
				{
					char		buf[48];

					snprintf(buf, sizeof buf, "%s%d:%.9g", tops.empty() ? "" : " ", id, logits[id]);
					tops += buf;
				}
				fprintf(fl, "\t%.9g\t%.9g\t%016llx\t%s", mean, sqrt(var / n_vocab),
						(unsigned long long) fnv1a64(logits, n_vocab), tops.c_str());
			}
			fprintf(fl, "\n");
		}
	}
	fclose(fg);
	fclose(fl);
	llama_free(ctx);
	llama_model_free(model);
	llama_backend_free();
	return 0;
}
