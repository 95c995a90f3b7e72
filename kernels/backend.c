/*
 * backend.c — the backend-neutral helpers declared in backend.h: what the
 * engine computes about a backend's memory before it has one (the KV cache
 * budget), the same for every backend.  Depends on quant_types.c only.
 */
#include "backend.h"
#include "quant_types.h"

/*
 * Bytes of one cached row of head_dim values: fp16 values, or head_dim / 32
 * q8_0 blocks (the GGUF type table's block sizes); 0 for another type or a
 * q8_0 row whose head_dim is not a multiple of 32.
 */
static size_t
kv_row_bytes(int kv_dtype, int head_dim)
{
	if (kv_dtype == LLM_KV_F16)
		return llm_type_row_bytes(LLM_TYPE_F16, head_dim);
	if (kv_dtype == LLM_KV_Q8_0)
		return llm_type_row_bytes(LLM_TYPE_Q8_0, head_dim);
	return 0;
}

size_t
llm_kv_block_bytes(const llm_kv_geometry *g)
{
	size_t		row;

	if (g == NULL || g->n_layers <= 0 || g->n_kv_heads <= 0 || g->head_dim <= 0 || g->block_size <= 0)
		return 0;
	row = kv_row_bytes(g->kv_dtype, g->head_dim);
	if (row == 0)
		return 0;
	return (size_t) g->n_layers * 2 * (size_t) g->block_size * (size_t) g->n_kv_heads * row;
}
