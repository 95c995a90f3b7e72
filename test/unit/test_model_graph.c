/*
 * test_model_graph.c — the table loader (model_tensors.c) and the graph
 * builder's options (model_graph.c) on the real model file
 * (LLM_TEST_MODEL, SmolLM2 written as llama) loaded with variants of the
 * llama tables (llm_model_load_as), on the CPU backend.
 *
 * Loader: an optional row whose tensor is absent loads as absent (logits
 * bit-identical to llama's); a missing required tensor, a misshapen one, a
 * refused one present and a missing required key fail with their messages.
 * Graph options:
 *  - attention logit soft-capping (here with a cap of 1e4 that changes
 *    scores by under 1e-6 relative) on the cached path (attention_softcap)
 *    gives llama's logits within a Q8_0 cache's distance from an F16
 *    cache, while bidirectional attention (the step-local path) exceeds
 *    twice that; a soft-capped prompt computed in two chunks gives the
 *    rows of the whole prompt bit for bit;
 *  - causal: a row's logits do not depend on later tokens (bit for bit);
 *    bidirectional: the first row's logits change with the last token;
 *  - a layer without RoPE, partial rotary dims and LayerNorm each change
 *    the logits (the option reaches the graph) and stay finite;
 *  - a step that does not hold a whole sequence is refused on the
 *    step-local (bidirectional) path with a message; a backend without an
 *    op the graph needs is refused at load.
 */
#include "unit.h"
#include "kernels/backend.h"
#include "engine/gguf/gguf.h"
#include "engine/model/model.h"
#include "engine/model/model_arch.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum
{
	LEN = 6,
	BLOCK = 16,
	N_BLOCKS = 8
};

static const int32_t prompt_a[LEN] = {1, 504, 3458, 282, 253, 1345};
static const int32_t prompt_b[LEN] = {1, 504, 3458, 282, 253, 9023};	/* differs in the last token */

static const gguf_file *file;
static llm_backend *backend;
static int	n_vocab;

/*
 * One step of the whole prompt from position 0 (kv_before 0), or of its
 * last LEN - kv_before tokens after kv_before cached ones; logits of every
 * row of the step.
 */
static int
run(llm_model *m, const int32_t *toks, int kv_before, float *logits, char *err, size_t errlen)
{
	int32_t		pos[LEN],
				slot[LEN],
				rows[LEN],
				sstart[2] = {0, LEN - kv_before},
				kvlen[1] = {LEN},
				bt[N_BLOCKS];
	llm_step_desc d;

	for (int j = 0; j < N_BLOCKS; j++)
		bt[j] = j;
	for (int t = 0; t < LEN - kv_before; t++)
	{
		pos[t] = kv_before + t;
		slot[t] = pos[t];
		rows[t] = t;
	}
	memset(&d, 0, sizeof(d));
	d.n_tokens = LEN - kv_before;
	d.n_seqs = 1;
	d.token_ids = toks + kv_before;
	d.positions = pos;
	d.slots = slot;
	d.seq_start = sstart;
	d.seq_kv_len = kvlen;
	d.block_tables = bt;
	d.max_blocks_per_seq = N_BLOCKS;
	d.out_rows = rows;
	d.n_out = LEN - kv_before;
	return llm_model_forward(m, &d, logits, err, errlen);
}

/* Load f as arch and run the whole prompt; NULL + err on any failure. */
static float *
logits_of(const llm_arch *arch, const int32_t *toks, char *err, size_t errlen)
{
	llm_model  *m = llm_model_load_as(file, backend, arch, err, errlen);
	float	   *lg;

	if (m == NULL)
		return NULL;
	lg = malloc((size_t) LEN * n_vocab * sizeof(float));
	if (lg == NULL || run(m, toks, 0, lg, err, errlen) != 0)
	{
		free(lg);
		lg = NULL;
	}
	llm_model_free(m);
	return lg;
}

static double q8_yardstick;

static double
mean_abs_diff(const float *a, const float *b, size_t n)
{
	double		s = 0.0;

	for (size_t i = 0; i < n; i++)
		s += fabs((double) a[i] - b[i]);
	return s / (double) n;
}

/* Mean |logit difference| of llama with a Q8_0 KV cache against ref (F16 cache); -1 on failure. */
static double
q8_cache_diff(const float *ref)
{
	char		err[512];
	llm_backend *b = llm_backend_cpu_create(0, err, sizeof(err));
	llm_model  *m = b ? llm_model_load(file, b, err, sizeof(err)) : NULL;
	float	   *lg = malloc((size_t) LEN * n_vocab * sizeof(float));
	double		d = -1.0;

	if (m && lg)
	{
		const llm_model_config *c = llm_model_get_config(m);
		llm_kv_geometry g = {c->n_layers, c->n_kv_heads, c->head_dim, BLOCK, N_BLOCKS, LLM_KV_Q8_0, NULL, 0, 0};

		if (b->ops->kv_init(b, &g) == 0 && run(m, prompt_a, 0, lg, err, sizeof(err)) == 0)
			d = mean_abs_diff(lg, ref, (size_t) LEN * n_vocab);
	}
	free(lg);
	llm_model_free(m);
	if (b)
		b->ops->destroy(b);
	return d;
}

static bool
all_finite(const float *x, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!isfinite(x[i]))
			return false;
	return true;
}

/* ---- variant tables ---- */

static llm_hparam_spec hp_softcap[32];
static llm_tensor_spec t_extra[32];

/* llama's hyper-parameter rows plus one. */
static int
hparams_plus(const llm_hparam_spec *extra)
{
	int			n = llm_arch_llama.n_hparams;

	memcpy(hp_softcap, llm_arch_llama.hparams, (size_t) n * sizeof(llm_hparam_spec));
	hp_softcap[n] = *extra;
	return n + 1;
}

/* llama's tensor rows plus one. */
static int
tensors_plus(const llm_tensor_spec *extra)
{
	int			n = llm_arch_llama.n_tensors;

	memcpy(t_extra, llm_arch_llama.tensors, (size_t) n * sizeof(llm_tensor_spec));
	t_extra[n] = *extra;
	return n + 1;
}

static int
layer0_without_rope(llm_model *m, const gguf_file *f, char *err, size_t errlen)
{
	m->layer_cfg[0].rope_mode = LLM_ROPE_NONE;
	return 0;
}

static void
test_loader(const float *ref)
{
	char		err[512];
	llm_arch	a = llm_arch_llama;
	float	   *lg;

	{
		const llm_tensor_spec opt = LLM_T_LAYER_VECTOR("blk.%d.attn_q_norm.weight", LLM_T_OPTIONAL, LLM_D_HEAD, q_norm);

		a.tensors = t_extra;
		a.n_tensors = tensors_plus(&opt);
		lg = logits_of(&a, prompt_a, err, sizeof(err));
		CHECK(lg != NULL && memcmp(lg, ref, (size_t) LEN * n_vocab * sizeof(float)) == 0,
			  "an optional row whose tensor is absent: loads, logits bit-identical to llama's%s%s",
			  lg ? "" : ": ", lg ? "" : err);
		free(lg);
	}
	{
		const llm_tensor_spec req = LLM_T_LAYER_VECTOR("blk.%d.attn_q_norm.weight", LLM_T_REQUIRED, LLM_D_HEAD, q_norm);

		a.n_tensors = tensors_plus(&req);
		lg = logits_of(&a, prompt_a, err, sizeof(err));
		CHECK(lg == NULL && strcmp(err, "tensor blk.0.attn_q_norm.weight missing from GGUF file") == 0,
			  "a required row whose tensor is absent: %s", err);
		free(lg);
	}
	{
		const llm_tensor_spec bad = LLM_T_LAYER_MATRIX("blk.%d.ffn_up.weight", LLM_T_REQUIRED, LLM_D_DIM, LLM_D_DIM, w_up);

		a.n_tensors = tensors_plus(&bad);
		lg = logits_of(&a, prompt_a, err, sizeof(err));
		CHECK(lg == NULL && strstr(err, "tensor blk.0.ffn_up.weight has shape [576, 1536, 1, 1], expected [576, 576]"),
			  "a misshapen tensor: %s", err);
		free(lg);
	}
	{
		const llm_tensor_spec refused = LLM_T_LAYER_REFUSED("blk.%d.ffn_down.weight");

		a.n_tensors = tensors_plus(&refused);
		a.name = "refusing";
		lg = logits_of(&a, prompt_a, err, sizeof(err));
		CHECK(lg == NULL && strcmp(err, "tensor blk.0.ffn_down.weight is not supported by the refusing graph") == 0,
			  "a refused tensor present: %s", err);
		free(lg);
	}
	{
		const llm_hparam_spec req = LLM_HP("no_such_key", LLM_HP_INT, true, sliding_window, 0);

		a = llm_arch_llama;
		a.hparams = hp_softcap;
		a.n_hparams = hparams_plus(&req);
		lg = logits_of(&a, prompt_a, err, sizeof(err));
		CHECK(lg == NULL && strcmp(err, "GGUF metadata key llama.no_such_key missing or not an integer") == 0,
			  "a required key missing: %s", err);
		free(lg);
	}
}

static void
test_options(const float *ref)
{
	const size_t n = (size_t) LEN * n_vocab;
	const llm_hparam_spec cap = LLM_HP("attn_logit_softcapping", LLM_HP_FLOAT, false, attn_logit_softcap, 1e4f);
	char		err[512];
	llm_arch	local = llm_arch_llama,
				a;
	float	   *la,
			   *lb,
			   *lg;

	local.hparams = hp_softcap;
	local.n_hparams = hparams_plus(&cap);
	local.name = "llama-local";

	/*
	 * The step-local path against the cached one: the cached path rounds
	 * q, K, V and the probabilities to fp16, which moves these logits by
	 * about as much as a Q8_0 cache moves them from an F16 one; the
	 * step-local path must stay within that yardstick, and a real change
	 * of the graph (bidirectional attention) must not.
	 */
	la = logits_of(&local, prompt_a, err, sizeof(err));
	if (CHECK(la != NULL, "soft-capped attention (cached path) runs%s%s", la ? "" : ": ", la ? "" : err))
	{
		double		d_local = mean_abs_diff(la, ref, n);

		a = local;
		a.graph.bidirectional = true;
		lg = logits_of(&a, prompt_a, err, sizeof(err));
		CHECK(q8_yardstick > 0.0 && d_local <= q8_yardstick,
			  "soft-capped: logits within the cache rounding of llama's (mean |diff| %.4f, "
			  "Q8_0 vs F16 cache %.4f)", d_local, q8_yardstick);
		CHECK(lg && mean_abs_diff(lg, ref, n) > 2.0 * q8_yardstick,
			  "the yardstick tells graphs apart: bidirectional mean |diff| %.4f", lg ? mean_abs_diff(lg, ref, n) : 0.0);
		free(lg);
	}
	/* causal: the rows before the last ignore it */
	lb = logits_of(&local, prompt_b, err, sizeof(err));
	CHECK(la && lb && memcmp(la, lb, (size_t) (LEN - 1) * n_vocab * sizeof(float)) == 0 &&
		  memcmp(la + (size_t) (LEN - 1) * n_vocab, lb + (size_t) (LEN - 1) * n_vocab, n_vocab * sizeof(float)) != 0,
		  "causal: rows before a changed last token bit-identical, the last row differs");
	free(lb);

	/* bidirectional: the first row sees the last token */
	a = local;
	a.graph.bidirectional = true;
	lg = logits_of(&a, prompt_a, err, sizeof(err));
	lb = logits_of(&a, prompt_b, err, sizeof(err));
	CHECK(lg && lb && all_finite(lg, n) && memcmp(lg, lb, n_vocab * sizeof(float)) != 0,
		  "bidirectional: the first row's logits change with the last token");
	CHECK(lg && la && memcmp(lg, la, n_vocab * sizeof(float)) != 0,
		  "bidirectional: the first row differs from the causal one");
	free(lg);
	free(lb);

	/* a layer without RoPE */
	a = local;
	a.config = layer0_without_rope;
	lg = logits_of(&a, prompt_a, err, sizeof(err));
	CHECK(lg && la && all_finite(lg, n) && memcmp(lg + n_vocab, la + n_vocab, n_vocab * sizeof(float)) != 0,
		  "layer 0 without RoPE: finite logits, the second row's differ");
	/* the first row is at position 0, where every rotation is the identity */
	CHECK(lg && la && memcmp(lg, la, n_vocab * sizeof(float)) == 0,
		  "layer 0 without RoPE: the first row (position 0) unchanged");
	free(lg);

	/* partial rotary dims (rope.dimension_count default 32 of 64) */
	{
		llm_hparam_spec hp[32];
		int			nh = llm_arch_llama.n_hparams;

		memcpy(hp, llm_arch_llama.hparams, (size_t) nh * sizeof(llm_hparam_spec));
		for (int i = 0; i < nh; i++)
			if (strcmp(hp[i].key, "rope.dimension_count") == 0)
			{
				hp[i].key = "rope.no_such_count";
				hp[i].def = 32;
			}
		a = llm_arch_llama;
		a.hparams = hp;
		a.graph.partial_rotary = true;
		lg = logits_of(&a, prompt_a, err, sizeof(err));
		CHECK(lg && la && all_finite(lg, n) && memcmp(lg + n_vocab, la + n_vocab, n_vocab * sizeof(float)) != 0,
			  "partial rotary (32 of 64 dims): finite logits, the second row's differ%s%s", lg ? "" : ": ", lg ? "" : err);
		free(lg);
		a.graph.partial_rotary = false;
		lg = logits_of(&a, prompt_a, err, sizeof(err));
		CHECK(lg == NULL && strstr(err, "unsupported head geometry (key_length 64, value_length 64, rope dims 32)"),
			  "partial rotary refused without the option: %s", err);
		free(lg);
	}

	/* LayerNorm */
	a = llm_arch_llama;
	a.graph.norm = LLM_NORM_LAYER;
	lg = logits_of(&a, prompt_a, err, sizeof(err));
	CHECK(lg && all_finite(lg, n) && memcmp(lg, ref, n * sizeof(float)) != 0,
		  "LayerNorm: finite logits that differ from RMSNorm's%s%s", lg ? "" : ": ", lg ? "" : err);
	free(lg);
	{
		llm_backend_ops ops = *backend->ops;
		const llm_backend_ops *saved = backend->ops;

		ops.layernorm = NULL;
		backend->ops = &ops;
		lg = logits_of(&a, prompt_a, err, sizeof(err));
		backend->ops = saved;
		CHECK(lg == NULL && strstr(err, "has no layernorm op"), "a backend without layernorm refused: %s", err);
		free(lg);
	}

	/* the step-local path refuses a sequence not given whole */
	{
		llm_model  *m;

		a = local;
		a.graph.bidirectional = true;
		m = llm_model_load_as(file, backend, &a, err, sizeof(err));
		lg = malloc(n * sizeof(float));
		CHECK(m && lg && run(m, prompt_a, 2, lg, err, sizeof(err)) == -1 && strstr(err, "must be given whole") &&
			  strstr(err, "bidirectional attention"),
			  "step-local path: a chunk after cached keys refused: %s", err);
		llm_model_free(m);
		free(lg);
	}
	/* soft-capped attention over the cache: a chunk after cached keys gives the whole prompt's rows */
	{
		llm_model  *m = llm_model_load_as(file, backend, &local, err, sizeof(err));
		float	   *whole = malloc(n * sizeof(float));

		lg = malloc(n * sizeof(float));
		CHECK(m && lg && whole && run(m, prompt_a, 0, whole, err, sizeof(err)) == 0 &&
			  run(m, prompt_a, 2, lg, err, sizeof(err)) == 0 &&
			  memcmp(lg, whole + 2 * (size_t) n_vocab, (size_t) (LEN - 2) * n_vocab * sizeof(float)) == 0,
			  "soft-capped attention: rows of a chunk after 2 cached keys bit-identical to the whole prompt's%s%s",
			  m ? "" : ": ", m ? "" : err);
		{
			llm_backend_ops ops = *backend->ops;
			const llm_backend_ops *saved = backend->ops;
			llm_model  *m2;

			ops.attention_softcap = NULL;
			backend->ops = &ops;
			m2 = llm_model_load_as(file, backend, &local, err, sizeof(err));
			backend->ops = saved;
			CHECK(m2 == NULL && strstr(err, "has no attention_softcap op"),
				  "a backend without attention_softcap refused: %s", err);
			llm_model_free(m2);
		}
		llm_model_free(m);
		free(whole);
		free(lg);
	}
	free(la);
}

int
main(void)
{
	const char *path = getenv("LLM_TEST_MODEL");
	char		err[512];
	gguf_file  *f;
	llm_model  *m;
	float	   *ref;

	if (path == NULL || path[0] == '\0')
		path = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
	if (access(path, R_OK) != 0)
	{
		CHECK(0, "model %s not found (set LLM_TEST_MODEL)", path);
		return unit_done();
	}
	f = gguf_open(path, err, sizeof(err));
	if (!CHECK(f != NULL, "open %s%s%s", path, f ? "" : ": ", f ? "" : err))
		return unit_done();
	backend = llm_backend_cpu_create(0, err, sizeof(err));
	if (!CHECK(backend != NULL, "CPU backend%s%s", backend ? "" : ": ", backend ? "" : err))
		return unit_done();
	file = f;
	m = llm_model_load(f, backend, err, sizeof(err));
	if (CHECK(m != NULL, "model loads%s%s", m ? "" : ": ", m ? "" : err))
	{
		const llm_model_config *c = llm_model_get_config(m);
		llm_kv_geometry g = {c->n_layers, c->n_kv_heads, c->head_dim, BLOCK, N_BLOCKS, LLM_KV_F16, NULL, 0, 0};

		n_vocab = c->n_vocab;
		ref = malloc((size_t) LEN * n_vocab * sizeof(float));
		if (CHECK(c->dim == 576 && c->head_dim == 64 && c->ffn_dim == 1536,
				  "the SmolLM2-135M geometry the messages below name") &&
			CHECK(backend->ops->kv_init(backend, &g) == 0 && ref && run(m, prompt_a, 0, ref, err, sizeof(err)) == 0,
				  "llama's logits of a %d-token prompt", LEN))
		{
			q8_yardstick = q8_cache_diff(ref);
			test_loader(ref);
			test_options(ref);
		}
		free(ref);
		llm_model_free(m);
	}
	backend->ops->destroy(backend);
	gguf_close(f);
	return unit_done();
}
