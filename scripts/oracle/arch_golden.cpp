/*
 * arch_golden.cpp — llama.cpp's logits and greedy tokens for the synthetic
 * architecture models (tools/make_synth_gguf.py arch), the goldens of
 * test/unit/test_arch_golden.c.
 *
 * Prompts are token ids (the models' vocabularies are cut, and the ids
 * test the graph, not a tokenizer).  Each prompt is decoded in ONE
 * llama_decode call (flash attention off, f16 KV cache, n_ctx N_CTX, one
 * sequence), then GEN tokens greedily one llama_decode each, the argmax
 * of the raw logits taken here (lowest index among equals).  Written: the
 * logits of the prompt's last position and of every generated step, as
 * IEEE binary16 (nearest even) rows.
 *
 * Usage: arch_golden MODEL.gguf OUT_PREFIX ID:t,t,t ...
 *   OUT_PREFIX.tsv   "# " header lines, then per prompt: id, prompt ids,
 *                    greedy ids (comma-separated)
 *   OUT_PREFIX.f16   per prompt, GEN + 1 rows of n_vocab binary16 values
 */
#include "llama.h"
#include "ggml.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

static const int	GEN = 16;
static const int	N_CTX = 4096;
static const int	N_THREADS = 2;

static void
put_row(FILE *f, const float *x, int n)
{
	std::vector<ggml_fp16_t> h((size_t) n);

	ggml_fp32_to_fp16_row(x, h.data(), n);
	fwrite(h.data(), sizeof(ggml_fp16_t), (size_t) n, f);
}

static int
argmax(const float *x, int n)
{
	int			best = 0;

	for (int i = 1; i < n; i++)
		if (x[i] > x[best])
			best = i;
	return best;
}

static std::string
join(const std::vector<llama_token> &v)
{
	std::string s;

	for (size_t i = 0; i < v.size(); i++)
		s += (i ? "," : "") + std::to_string(v[i]);
	return s;
}

int
main(int argc, char **argv)
{
	if (argc < 4)
	{
		fprintf(stderr, "usage: arch_golden MODEL.gguf OUT_PREFIX ID:t,t,... ...\n");
		return 2;
	}
	llama_backend_init();
	llama_model_params mp = llama_model_default_params();
	llama_model *model = llama_model_load_from_file(argv[1], mp);

	if (!model)
	{
		fprintf(stderr, "arch_golden: cannot load %s\n", argv[1]);
		return 1;
	}
	const int	n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
	llama_context_params cp = llama_context_default_params();

	cp.n_ctx = N_CTX;
	cp.n_batch = 512;
	cp.n_ubatch = 512;
	cp.n_seq_max = 1;
	cp.n_threads = N_THREADS;
	cp.n_threads_batch = N_THREADS;
	cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
	cp.no_perf = true;
	llama_context *ctx = llama_init_from_model(model, cp);

	if (!ctx)
	{
		fprintf(stderr, "arch_golden: llama_init_from_model failed\n");
		return 1;
	}
	std::string prefix = argv[2];
	FILE	   *tsv = fopen((prefix + ".tsv").c_str(), "w");
	FILE	   *bin = fopen((prefix + ".f16").c_str(), "wb");

	if (!tsv || !bin)
	{
		fprintf(stderr, "arch_golden: cannot write %s.*\n", prefix.c_str());
		return 1;
	}
	fprintf(tsv, "# llama.cpp arch_golden: n_vocab %d, n_ctx %d, gen %d, flash_attn off, kv f16, "
			"n_threads %d, one decode per prompt\n", n_vocab, N_CTX, GEN, N_THREADS);
	fprintf(tsv, "# system: %s\n", llama_print_system_info());
	for (int a = 3; a < argc; a++)
	{
		std::string arg = argv[a];
		size_t		colon = arg.find(':');
		std::vector<llama_token> toks,
					gen;

		if (colon == std::string::npos)
		{
			fprintf(stderr, "arch_golden: bad prompt %s\n", arg.c_str());
			return 2;
		}
		for (size_t p = colon + 1; p < arg.size();)
		{
			size_t		e = arg.find(',', p);

			if (e == std::string::npos)
				e = arg.size();
			toks.push_back(atoi(arg.substr(p, e - p).c_str()));
			p = e + 1;
		}
		llama_memory_clear(llama_get_memory(ctx), true);
		if (llama_decode(ctx, llama_batch_get_one(toks.data(), (int32_t) toks.size())) != 0)
		{
			fprintf(stderr, "arch_golden: prefill failed\n");
			return 1;
		}
		for (int g = 0; g < GEN; g++)
		{
			const float *lg = llama_get_logits_ith(ctx, -1);
			llama_token t = argmax(lg, n_vocab);

			put_row(bin, lg, n_vocab);
			gen.push_back(t);
			if (llama_decode(ctx, llama_batch_get_one(&t, 1)) != 0)
			{
				fprintf(stderr, "arch_golden: decode failed\n");
				return 1;
			}
		}
		put_row(bin, llama_get_logits_ith(ctx, -1), n_vocab);
		fprintf(tsv, "%s\t%s\t%s\n", arg.substr(0, colon).c_str(), join(toks).c_str(), join(gen).c_str());
	}
	fclose(tsv);
	fclose(bin);
	llama_free(ctx);
	llama_model_free(model);
	llama_backend_free();
	return 0;
}
