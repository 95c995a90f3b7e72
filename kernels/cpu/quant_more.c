/*
 * quant_more.c — the kernels of quant_more.h's types: the scalar
 * compilation of quant_more_dot.inc, and the lookup that joins each
 * compilation's table to the activation quantizer of its implementation.
 * Depends on quant.c (scalar activations) and quant_avx2.c (AVX2 / VNNI
 * activations); the tables of quant_more_avx2.c and quant_more_avx512.c.
 */
#include "quant_more.h"
#include "quant_x86.h"
#include "dispatch.h"

#include <pthread.h>
#include <string.h>

#define MORE_TABLE llm_qkernels_more_scalar
#define MORE_TABLE_X8 llm_qkernels_more_x8_scalar
#define MORE_IMPL "scalar"
#include "quant_more_dot.inc"

#define N_MORE 6
#define N_IMPL 3				/* LLM_IMPL_SCALAR, AVX2, AVX512VNNI */

static llm_qkernel tables[N_IMPL][N_MORE];
#define N_X8 2
static llm_qkernel tables_x8[N_IMPL][N_X8];	/* Q2_K, IQ4_NL of rows % 8 == 0 */
static bool table_ok[N_IMPL];
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

/* The type whose kernel quantizes t's activations (llama.cpp's vec_dot_type pairing). */
static uint32_t
act_peer(uint32_t t)
{
	switch (t)
	{
		case LLM_TYPE_Q5_1:
			return LLM_TYPE_Q4_1;	/* Q8_1 */
		case LLM_TYPE_IQ4_NL:
			return LLM_TYPE_Q8_0;	/* Q8_0 */
		default:
			return LLM_TYPE_Q4_K;	/* Q8_K */
	}
}

static const llm_qkernel *
peer_kernel(uint32_t t, int impl)
{
	if (impl == LLM_IMPL_SCALAR)
		return llm_qkernel_scalar_get(t);
	return llm_qkernel_avx2_get(t, impl == LLM_IMPL_AVX512VNNI);
}

static void
build_tables(void)
{
	const llm_qkernel *src[N_IMPL] = {llm_qkernels_more_scalar,
#if defined(__x86_64__) || defined(__i386__)
		llm_qkernels_more_avx2, llm_qkernels_more_avx512
#else
		NULL, NULL
#endif
	};
	const llm_qkernel *src_x8[N_IMPL] = {llm_qkernels_more_x8_scalar,
#if defined(__x86_64__) || defined(__i386__)
		llm_qkernels_more_x8_avx2, llm_qkernels_more_x8_avx512
#else
		NULL, NULL
#endif
	};

	for (int impl = 0; impl < N_IMPL; impl++)
	{
		if (src[impl] == NULL)
			continue;
		table_ok[impl] = true;
		for (int i = 0; i < N_MORE; i++)
		{
			const llm_qkernel *p = peer_kernel(act_peer(src[impl][i].weight_type), impl);

			tables[impl][i] = src[impl][i];
			if (p == NULL)
			{
				table_ok[impl] = false;
				continue;
			}
			tables[impl][i].act_type = p->act_type;
			tables[impl][i].act_row_bytes = p->act_row_bytes;
			tables[impl][i].quantize_act = p->quantize_act;
			for (int x = 0; x < N_X8; x++)
				if (src[impl][i].weight_type == src_x8[impl][x].weight_type)
				{
					tables_x8[impl][x] = src_x8[impl][x];
					tables_x8[impl][x].act_type = p->act_type;
					tables_x8[impl][x].act_row_bytes = p->act_row_bytes;
					tables_x8[impl][x].quantize_act = p->quantize_act;
				}
		}
	}
}

const llm_qkernel *
llm_qkernel_more_get(uint32_t t, int impl)
{
	if (impl < 0 || impl >= N_IMPL)
		return NULL;
	pthread_once(&tables_once, build_tables);
	if (!table_ok[impl])
		return NULL;
	for (int i = 0; i < N_MORE; i++)
		if (tables[impl][i].weight_type == t)
			return &tables[impl][i];
	return NULL;
}

const llm_qkernel *
llm_qkernel_more_rows8(const llm_qkernel *base)
{
	pthread_once(&tables_once, build_tables);
	for (int impl = 0; impl < N_IMPL; impl++)
		for (int i = 0; table_ok[impl] && i < N_MORE; i++)
			for (int x = 0; base == &tables[impl][i] && x < N_X8; x++)
				if (tables_x8[impl][x].weight_type == base->weight_type)
					return &tables_x8[impl][x];
	return base;
}
