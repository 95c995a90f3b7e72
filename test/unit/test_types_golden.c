/*
 * test_types_golden.c — each weight type end to end against llama.cpp:
 * greedy continuations of a small synthetic llama model (tiny-256 of
 * tools/make_synth_gguf.py) quantized by llama.cpp's llama-quantize into
 * the mixes of test/golden/types/models.tsv (Q5_1, Q2_K, Q3_K_S, Q3_K_M,
 * Q5_K_M, IQ4_NL, IQ4_XS, Q4_K_M), against the goldens llama.cpp wrote on
 * the same files (scripts/oracle/make_types_golden.sh).
 *
 * Checks per mix: the engine loads the model; every prompt of
 * <mix>/greedy.tsv runs alone, and all prompts run as one batch give their
 * solo tokens (the tile path).  models.tsv's third column says how close
 * to llama.cpp a mix must be:
 *   exact     every prompt's 32 tokens identical, and the last-position
 *             logits of <mix>/logits.tsv's prompts bit-identical to the
 *             oracle's (every mix: the engine follows llama.cpp's
 *             ggml_vec_dot_* for one-token steps, its tiled K-quant matmul
 *             for the rows of prompts of 8 tokens or more, its repacked
 *             Q4_K, Q2_K and IQ4_NL GEMV/GEMM, and its last layer's batch
 *             of output rows; quant.h "Row forms");
 *   near-tie  each prompt either identical or diverging first where the
 *             oracle's top-2 margin is below DIVERGE_MAX_MARGIN, and at
 *             least NEAR_TIE_MIN_MATCH of them identical (for a mix whose
 *             arithmetic the engine does not follow; none today).
 * Measured (AVX-512 VNNI host): every mix 20/20 identical, both logits
 * rows bit-identical.
 *
 * The models are not committed (llama-quantize, part of the oracle, makes
 * them; scripts/check-weight-types.sh makes them and runs this test, their
 * sha256 checked against models.tsv).  A mix whose model file is absent is
 * reported as a SKIP naming that script.
 *
 * Env: LLM_TYPES_MODELS (default build/types-models), LLM_GOLDEN_DIR
 *      (default test/golden), LLM_TEST_THREADS.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "engine/text/tokenizer.h"
#include "golden_test_util.h"
#include "unit.h"

#define DIVERGE_MAX_MARGIN	0.10	/* oracle top-2 margin at a tolerated divergence */
#define NEAR_TIE_MIN_MATCH	0.15	/* near-tie mixes: fraction of prompts identical to the oracle */

/*
 * The exact tier's logits check: each prompt of <mix>/logits.tsv (columns
 * prompt_id, kind, text_hex, prompt_ids, top5_ids, file) through
 * llm_engine_debug_prompt_logits, its last-position logits compared bit
 * for bit with the oracle's float32 row <mix>/logits/<file>.
 */
static void
check_logits_exact(llm_engine *e, const char *mix, const char *gdir)
{
	static char line[1 << 16];
	char		path[1024],
				err[256];
	int32_t		n_vocab = llm_tokenizer_n_vocab(llm_engine_tokenizer(e));
	float	   *want = malloc(n_vocab * sizeof(float)),
			   *got = malloc(n_vocab * sizeof(float));
	FILE	   *f;
	int			n = 0;

	snprintf(path, sizeof path, "%s/types/%s/logits.tsv", gdir, mix);
	f = fopen(path, "r");
	if (!CHECK(f != NULL, "%s: %s opens", mix, path))
		goto out;
	while (fgets(line, sizeof line, f))
	{
		char	   *col[8];
		int_list	ids = {0};
		FILE	   *lf;
		bool		read_ok;
		int			n_diff = 0;

		if (line[0] == '#' || line[0] == '\n' || split_tabs(line, col, 8) < 6)
			continue;
		n++;
		parse_ints(col[3], &ids);
		snprintf(path, sizeof path, "%s/types/%s/logits/%s", gdir, mix, col[5]);
		lf = fopen(path, "rb");
		read_ok = lf != NULL && fread(want, sizeof(float), n_vocab, lf) == (size_t) n_vocab && fgetc(lf) == EOF;
		if (lf)
			fclose(lf);
		if (CHECK(read_ok, "%s logits %s: %d floats in %s", mix, col[0], n_vocab, path) &&
			CHECK(llm_engine_debug_prompt_logits(e, ids.v, ids.n, got, err, sizeof err) == LLM_OK,
				  "%s logits %s: prompt of %d tokens ran %s", mix, col[0], ids.n, err))
		{
			for (int i = 0; i < n_vocab; i++)
				n_diff += memcmp(&want[i], &got[i], sizeof(float)) != 0;
			CHECK(n_diff == 0, "%s (exact) logits %s: %d of %d last-position logits bit-identical to llama.cpp",
				  mix, col[0], n_vocab - n_diff, n_vocab);
		}
		free(ids.v);
	}
	fclose(f);
	CHECK(n >= 2, "%s: %d logits prompts in logits.tsv", mix, n);
out:
	free(want);
	free(got);
}

static void
check_mix(const char *mix, const char *model, const char *gdir, bool exact)
{
	char		path[1024],
				err[512];
	greedy_case *cases = NULL;
	int			n,
				n_match = 0,
				n_div = 0,
				n_batch_same = 0;
	llm_engine_config cfg;
	llm_engine *e;
	run_result *solo,
			   *batch;
	const char *threads = getenv("LLM_TEST_THREADS");

	snprintf(path, sizeof path, "%s/types/%s/greedy.tsv", gdir, mix);
	n = load_greedy(path, &cases);
	if (!CHECK(n >= 10, "%s: loaded %d greedy cases from %s", mix, n, path))
		return;
	llm_engine_config_defaults(&cfg);
	cfg.model_path = model;
	if (threads && *threads)
		cfg.n_threads = atoi(threads);
	if (cfg.max_running < n)
		cfg.max_running = n;
	e = llm_engine_create(&cfg, err, sizeof err);
	if (!CHECK(e != NULL, "%s: engine created from %s%s%s", mix, model, e ? "" : ": ", e ? "" : err))
	{
		free_greedy(cases, n);
		return;
	}
	solo = calloc(n, sizeof *solo);
	batch = calloc(n, sizeof *batch);
	for (int i = 0; i < n; i++)
	{
		greedy_diff d;

		if (!add(e, 1000 + i, &cases[i].prompt, &solo[i]) || !run_to_completion(e, err, sizeof err) ||
			solo[i].status != LLM_OK)
		{
			CHECK(0, "%s greedy %s: engine failed: %s %s", mix, cases[i].id, solo[i].error, err);
			continue;
		}
		d = greedy_compare(&cases[i], &solo[i]);
		if (d.same)
			n_match++;
		else
		{
			n_div++;
			printf("# %s: ", mix);
			greedy_check_divergence(&cases[i], &solo[i], &d, DIVERGE_MAX_MARGIN);
		}
	}
	printf("# %s: %d/%d identical to llama.cpp, %d divergences\n", mix, n_match, n, n_div);
	if (exact)
	{
		CHECK(n_match == n, "%s (exact): %d/%d greedy continuations identical to llama.cpp", mix, n_match, n);
		check_logits_exact(e, mix, gdir);
	}
	else
		CHECK(n_match >= NEAR_TIE_MIN_MATCH * n, "%s (near-tie): %d/%d greedy continuations identical to "
			  "llama.cpp (>= %.0f%%)", mix, n_match, n, 100 * NEAR_TIE_MIN_MATCH);
	for (int i = 0; i < n; i++)
		add(e, 5000 + i, &cases[i].prompt, &batch[i]);
	CHECK(run_to_completion(e, err, sizeof err), "%s: batch of %d ran", mix, n);
	for (int i = 0; i < n; i++)
		n_batch_same += same_tokens(&batch[i], &solo[i]);
	CHECK(n_batch_same == n, "%s: batch invariance: %d/%d requests identical to their solo run",
		  mix, n_batch_same, n);
	llm_engine_destroy(e);
	free(solo);
	free(batch);
	free_greedy(cases, n);
}

int
main(void)
{
	const char *mdir = getenv("LLM_TYPES_MODELS");
	const char *gdir = getenv("LLM_GOLDEN_DIR");
	char		path[1024],
				line[512];
	FILE	   *f;
	int			n_mix = 0;

	if (!mdir || !*mdir)
		mdir = "build/types-models";
	if (!gdir || !*gdir)
		gdir = "test/golden";
	snprintf(path, sizeof path, "%s/types/models.tsv", gdir);
	f = fopen(path, "r");
	if (!CHECK(f != NULL, "%s opens", path))
		return unit_done();
	while (fgets(line, sizeof line, f))
	{
		char	   *mix = strtok(line, "\t\n"),
				   *tier,
					model[1024];
		FILE	   *m;

		if (mix == NULL || mix[0] == '#')
			continue;
		strtok(NULL, "\t\n");	/* sha256 */
		tier = strtok(NULL, "\t\n");
		n_mix++;
		if (!CHECK(tier && (strcmp(tier, "exact") == 0 || strcmp(tier, "near-tie") == 0),
				   "%s: models.tsv names its tier (%s)", mix, tier ? tier : "none"))
			continue;
		snprintf(model, sizeof model, "%s/%s.gguf", mdir, mix);
		if ((m = fopen(model, "rb")) == NULL)
		{
			SKIP("%s: no model %s (scripts/check-weight-types.sh makes it with llama-quantize)", mix, model);
			continue;
		}
		fclose(m);
		check_mix(mix, model, gdir, strcmp(tier, "exact") == 0);
	}
	fclose(f);
	CHECK(n_mix >= 8, "%d mixes listed in %s", n_mix, path);
	return unit_done();
}
