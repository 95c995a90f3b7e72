/*
 * quant_more_avx512.c — quant_more_dot.inc compiled for the avx512vnni
 * implementation's instruction sets (AVX2, FMA, F16C, AVX512F/VL/VNNI:
 * what dispatch.c checks before handing it out).  Same source and no
 * floating-point contraction: bit-identical to the scalar compilation.
 */
#include "quant_more.h"

#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#pragma GCC target("avx2,fma,f16c,avx512f,avx512vl,avx512vnni")
#define MORE_TABLE llm_qkernels_more_avx512
#define MORE_TABLE_X8 llm_qkernels_more_x8_avx512
#define MORE_IMPL "avx512vnni"
#include "quant_more_dot.inc"
#endif
