/*
 * test_attn_rows_block.c — the encoders' blocked attention
 * (kernels/cpu/attn_rows_block.c), the twin the faster encoder arithmetic
 * runs:
 * - against a double-precision softmax attention on sequences of 1, 15,
 *   16, 17, 40, 115 and 256 rows, head sizes 16, 32 and 64, with and
 *   without grouped KV heads: every output within 1e-6 (the inputs are
 *   in [-1, 1], so outputs are at most 1 and scores at most head_dim /
 *   sqrt(head_dim));
 * - each query computed alone (a block of one) gives the bits of the call
 *   over the whole sequence (blocks of 16, the last one partial).
 * Counted as skipped where the CPU lacks AVX512F.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/elementwise.h"
#include "unit.h"

static uint32_t rng = 7;

static float
frand(void)
{
	rng = rng * 1664525u + 1013904223u;
	return (float) ((rng >> 8) & 0xffffff) / (float) 0x1000000 * 2.0f - 1.0f;
}

int
main(void)
{
	static const int lens[] = {1, 15, 16, 17, 40, 115, 256};
	static const int hds[] = {16, 32, 64};

	if (!__builtin_cpu_supports("avx512f"))
	{
		SKIP("blocked attention: this CPU lacks AVX512F");
		return unit_done();
	}
	for (size_t li = 0; li < sizeof(lens) / sizeof(lens[0]); li++)
		for (size_t hi = 0; hi < sizeof(hds) / sizeof(hds[0]); hi++)
			for (int gqa = 0; gqa < 2; gqa++)
			{
				const int	L = lens[li],
							hd = hds[hi],
							nh = 4,
							nkv = gqa ? 2 : 4;
				const float scale = 1.0f / sqrtf((float) hd);
				float	   *q = malloc(sizeof(float) * L * nh * hd),
						   *k = malloc(sizeof(float) * L * nkv * hd),
						   *v = malloc(sizeof(float) * L * nkv * hd),
						   *out = malloc(sizeof(float) * L * nh * hd),
						   *one = malloc(sizeof(float) * L * nh * hd),
						   *sc = malloc(sizeof(float) * llm_attention_rows_block_scratch(L, hd));
				double		worst = 0,
						   *p = malloc(sizeof(double) * L);
				int			differ = 0;

				for (int i = 0; i < L * nh * hd; i++)
					q[i] = frand();
				for (int i = 0; i < L * nkv * hd; i++)
				{
					k[i] = frand();
					v[i] = frand();
				}
				for (int h = 0; h < nh; h++)
				{
					llm_attention_rows_block_avx512(q, k, v, out, 0, L, 0, L, h, nh, nkv, hd, scale, sc);
					for (int t = 0; t < L; t++)
						llm_attention_rows_block_avx512(q, k, v, one, 0, L, t, t + 1, h, nh, nkv, hd, scale, sc);
				}
				differ += memcmp(out, one, sizeof(float) * L * nh * hd) != 0;
				for (int t = 0; t < L; t++)
					for (int h = 0; h < nh; h++)
					{
						const int	g = h / (nh / nkv);
						double		mx = -INFINITY,
									sum = 0;

						for (int u = 0; u < L; u++)
						{
							double		s = 0;

							for (int d = 0; d < hd; d++)
								s += (double) q[((size_t) t * nh + h) * hd + d] * k[((size_t) u * nkv + g) * hd + d];
							p[u] = s * scale;
							if (p[u] > mx)
								mx = p[u];
						}
						for (int u = 0; u < L; u++)
						{
							p[u] = exp(p[u] - mx);
							sum += p[u];
						}
						for (int d = 0; d < hd; d++)
						{
							double		o = 0,
										e;

							for (int u = 0; u < L; u++)
								o += p[u] * v[((size_t) u * nkv + g) * hd + d];
							e = fabs(o / sum - out[((size_t) t * nh + h) * hd + d]);
							if (e > worst)
								worst = e;
						}
					}
				CHECK(worst <= 1e-6, "%d rows, head_dim %d, %d KV heads of 4: within 1e-6 of double (worst %.2g)",
					  L, hd, nkv, worst);
				CHECK(differ == 0, "%d rows, head_dim %d, %d KV heads: each query alone gives the whole call's bits",
					  L, hd, nkv);
				free(q);
				free(k);
				free(v);
				free(out);
				free(one);
				free(sc);
				free(p);
			}
	return unit_done();
}
