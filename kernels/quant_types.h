/*
 * quant_types.h — tensor element types of GGUF files and their block layouts.
 *
 * Type ids and block layouts follow the GGUF specification's ggml_type
 * table and ggml's block structs: a quantized row of n elements is
 * n / block_elems blocks of block_bytes bytes each.  Shared by the GGUF
 * loader (validation) and every compute backend.
 */
#ifndef LLM_QUANT_TYPES_H
#define LLM_QUANT_TYPES_H

#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>

typedef enum llm_type
{
	LLM_TYPE_F32 = 0,
	LLM_TYPE_F16 = 1,
	LLM_TYPE_Q4_0 = 2,
	LLM_TYPE_Q4_1 = 3,
	LLM_TYPE_Q5_0 = 6,
	LLM_TYPE_Q5_1 = 7,
	LLM_TYPE_Q8_0 = 8,
	LLM_TYPE_Q8_1 = 9,
	LLM_TYPE_Q2_K = 10,
	LLM_TYPE_Q3_K = 11,
	LLM_TYPE_Q4_K = 12,
	LLM_TYPE_Q5_K = 13,
	LLM_TYPE_Q6_K = 14,
	LLM_TYPE_Q8_K = 15,
	LLM_TYPE_IQ4_NL = 20,
	LLM_TYPE_IQ4_XS = 23,
	LLM_TYPE_BF16 = 30,
	LLM_TYPE_COUNT_ = 40		/* upper bound of ids; not a type */
} llm_type;

typedef struct llm_type_info
{
	const char *name;			/* "Q4_1" etc. */
	int			block_elems;	/* elements per block (1 for F32/F16/BF16) */
	int			block_bytes;	/* bytes per block */
	bool		supported;		/* the CPU backend can compute with it */
} llm_type_info;

/* Traits of type id t, or NULL when t is not a known GGUF tensor type. */
const llm_type_info *llm_type_get(uint32_t t);

/*
 * Bytes of one row of n elements of type t; 0 when t is unknown or n is not a
 * multiple of the block size (callers treat 0 as "invalid").
 */
size_t		llm_type_row_bytes(uint32_t t, int64_t n);

#endif
