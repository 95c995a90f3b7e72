/* quant_types.c — the table behind quant_types.h (GGUF's ggml_type ids, ggml's block sizes). */
#include "quant_types.h"

static const llm_type_info type_table[LLM_TYPE_COUNT_] = {
	[LLM_TYPE_F32] = {"F32", 1, 4, true},
	[LLM_TYPE_F16] = {"F16", 1, 2, true},
	[LLM_TYPE_Q4_0] = {"Q4_0", 32, 18, true},
	[LLM_TYPE_Q4_1] = {"Q4_1", 32, 20, true},
	[LLM_TYPE_Q5_0] = {"Q5_0", 32, 22, true},
	[LLM_TYPE_Q5_1] = {"Q5_1", 32, 24, true},
	[LLM_TYPE_Q8_0] = {"Q8_0", 32, 34, true},
	[LLM_TYPE_Q8_1] = {"Q8_1", 32, 36, false},
	[LLM_TYPE_Q2_K] = {"Q2_K", 256, 84, true},
	[LLM_TYPE_Q3_K] = {"Q3_K", 256, 110, true},
	[LLM_TYPE_Q4_K] = {"Q4_K", 256, 144, true},
	[LLM_TYPE_Q5_K] = {"Q5_K", 256, 176, true},
	[LLM_TYPE_Q6_K] = {"Q6_K", 256, 210, true},
	[LLM_TYPE_Q8_K] = {"Q8_K", 256, 292, false},
	[LLM_TYPE_IQ4_NL] = {"IQ4_NL", 32, 18, true},
	[LLM_TYPE_IQ4_XS] = {"IQ4_XS", 256, 136, true},
	[LLM_TYPE_BF16] = {"BF16", 1, 2, true},
};

const llm_type_info *
llm_type_get(uint32_t t)
{
	if (t >= LLM_TYPE_COUNT_ || type_table[t].name == NULL)
		return NULL;
	return &type_table[t];
}

size_t
llm_type_row_bytes(uint32_t t, int64_t n)
{
	const llm_type_info *ti = llm_type_get(t);

	if (ti == NULL || n <= 0 || n % ti->block_elems != 0)
		return 0;
	return (size_t) (n / ti->block_elems) * (size_t) ti->block_bytes;
}
