/*
 * quant_more_avx2.c — quant_more_dot.inc compiled for AVX2 + FMA + F16C
 * (dispatch.c hands it out only on such CPUs).  Same source and no
 * floating-point contraction: bit-identical to the scalar compilation.
 */
#include "quant_more.h"

#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#pragma GCC target("avx2,fma,f16c")
#define MORE_TABLE llm_qkernels_more_avx2
#define MORE_TABLE_X8 llm_qkernels_more_x8_avx2
#define MORE_IMPL "avx2"
#include "quant_more_dot.inc"
#endif
