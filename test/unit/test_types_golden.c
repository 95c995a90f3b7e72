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
 *   exact     every prompt's 32 tokens identical (Q5_1);
 *   near-tie  each prompt either identical or diverging first where the
 *             oracle's top-2 margin is below DIVERGE_MAX_MARGIN, and at
 *             least NEAR_TIE_MIN_MATCH of them identical (the other mixes:
 *             llama.cpp repacks Q2_K, Q4_K and IQ4_NL rows at load and
 *             reduces them in another order; why the Q3_K, Q5_K and IQ4_XS
 *             mixes diverge too, at near-ties, is open: their dot products
 *             match llama.cpp's ggml_vec_dot_* bit for bit).
 * Measured (AVX-512 VNNI host): identical Q5_1 20/20, Q2_K 4, Q3_K_S 13,
 * Q3_K_M 12, Q5_K_M 6, IQ4_NL 11, IQ4_XS 17, Q4_K_M 8 of 20; every
 * divergence at an oracle margin below 0.07.
 *
 * The models are not committed (llama-quantize, part of the oracle, makes
 * them; scripts/check-weight-types.sh makes them and runs this test, their
 * sha256 checked against models.tsv).  A mix whose model file is absent is
 * reported as a SKIP naming that script.
 *
 * Env: LLM_TYPES_MODELS (default build/types-models), LLM_GOLDEN_DIR
 *      (default test/golden), LLM_TEST_THREADS.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "golden_test_util.h"
#include "unit.h"

#define DIVERGE_MAX_MARGIN	0.10	/* oracle top-2 margin at a tolerated divergence */
#define NEAR_TIE_MIN_MATCH	0.15	/* near-tie mixes: fraction of prompts identical to the oracle */

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
		CHECK(n_match == n, "%s (exact): %d/%d greedy continuations identical to llama.cpp", mix, n_match, n);
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
