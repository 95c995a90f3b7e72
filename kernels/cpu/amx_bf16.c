/*
 * amx_bf16.c — the encoders' F16 matmul on AMX-BF16 tiles (amx_bf16.h:
 * arithmetic, layouts, batch invariance).
 *
 * The tile instructions are written as inline assembly (the assembler
 * knows them; no compiler flag is needed, and the code runs only after
 * llm_amx_bf16_usable).  Every tile is 16 rows x 64 bytes: the
 * accumulators tmm0..tmm3 (16 tokens x 16 fp32 weight rows), the
 * activation tiles tmm4, tmm5 (16 tokens x 32 bfloat16) and the weight
 * tiles tmm6, tmm7 (16 column pairs x 16 rows, VNNI), all loaded from
 * contiguous 1 KiB tiles.  The main loop runs
 * 2 token tiles x 2 row blocks (4 accumulators); a last odd token tile or
 * row block runs alone, with the same three products per column block in
 * the same order, so each output's arithmetic is the same.
 */
#include "amx_bf16.h"
#include "quant.h"

#include <stdio.h>
#include <string.h>

#if defined(__x86_64__)

#include <immintrin.h>
#include <cpuid.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

static pthread_once_t usable_once = PTHREAD_ONCE_INIT;
static bool usable;
static char usable_why[160];

static uint64_t
read_xcr0(void)
{
	uint32_t	lo,
				hi;

	__asm__ volatile ("xgetbv" : "=a" (lo), "=d" (hi) : "c" (0));
	return ((uint64_t) hi << 32) | lo;
}

static void
probe(void)
{
	unsigned	a,
				b,
				c,
				d;

	if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & (1u << 24)) || !(d & (1u << 22)))
	{
		snprintf(usable_why, sizeof(usable_why), "the CPU has no AMX-TILE/AMX-BF16");
		return;
	}
	if (!__builtin_cpu_supports("avx512f"))
	{
		snprintf(usable_why, sizeof(usable_why), "the CPU has no AVX512F");
		return;
	}
	if (!__get_cpuid_count(1, 0, &a, &b, &c, &d) || !(c & (1u << 27)) ||
		(read_xcr0() & (3u << 17)) != (3u << 17))
	{
		snprintf(usable_why, sizeof(usable_why), "the OS does not enable the AMX tile state (XCR0)");
		return;
	}
	if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) != 0)
	{
		snprintf(usable_why, sizeof(usable_why), "the kernel refused the AMX tile data (arch_prctl)");
		return;
	}
	usable = true;
}

bool
llm_amx_bf16_usable(char *why, size_t whylen)
{
	pthread_once(&usable_once, probe);
	if (!usable && why != NULL && whylen > 0)
		snprintf(why, whylen, "%s", usable_why);
	return usable;
}

/* ------------------------------------------------------------------------
 * Splits
 * ------------------------------------------------------------------------ */

/* fp32 -> bfloat16, round to nearest even (the vector split's integer steps, one lane) */
static inline uint16_t
bf16_rne(float f)
{
	uint32_t	u = f32_bits(f);

	return (uint16_t) ((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

static inline float
bf16_f32(uint16_t h)
{
	return bits_f32((uint32_t) h << 16);
}

void
llm_amx_split_f16(uint16_t h, uint16_t *hi, uint16_t *lo)
{
	float		w = llm_fp16_to_fp32(h);

	*hi = bf16_rne(w);
	*lo = bf16_rne(w - bf16_f32(*hi));
}

size_t
llm_amx_packed_bytes(int64_t n_rows, int64_t n_cols)
{
	int64_t		nrb = (n_rows + LLM_AMX_TILE_ROWS - 1) / LLM_AMX_TILE_ROWS;

	return (size_t) nrb * (size_t) (llm_amx_kp(n_cols) / LLM_AMX_TILE_K) * 2 * 1024;
}

void
llm_amx_pack_f16(const uint16_t *w, size_t row_bytes, int64_t n_rows, int64_t n_cols, uint16_t *dst)
{
	int64_t		nrb = (n_rows + LLM_AMX_TILE_ROWS - 1) / LLM_AMX_TILE_ROWS;
	int64_t		nkb = llm_amx_kp(n_cols) / LLM_AMX_TILE_K;

	for (int64_t rb = 0; rb < nrb; rb++)
		for (int64_t kb = 0; kb < nkb; kb++)
		{
			uint16_t   *hi = dst + (rb * nkb + kb) * 1024;
			uint16_t   *lo = hi + 512;

			for (int p = 0; p < LLM_AMX_TILE_K / 2; p++)
				for (int c = 0; c < LLM_AMX_TILE_ROWS; c++)
					for (int e = 0; e < 2; e++)
					{
						int64_t		r = rb * LLM_AMX_TILE_ROWS + c,
									k = kb * LLM_AMX_TILE_K + 2 * p + e;
						uint16_t	h = 0,
									l = 0;

						if (r < n_rows && k < n_cols)
							llm_amx_split_f16(((const uint16_t *) ((const char *) w + (size_t) r * row_bytes))[k],
											  &h, &l);
						hi[p * 32 + 2 * c + e] = h;
						lo[p * 32 + 2 * c + e] = l;
					}
		}
}

#define TGT_V __attribute__((target("avx512f")))

static inline __attribute__((always_inline)) TGT_V __m256i
bf16_rne16(__m512 x)
{
	__m512i		u = _mm512_castps_si512(x);
	__m512i		lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));

	u = _mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff)));
	return _mm512_cvtepi32_epi16(_mm512_srli_epi32(u, 16));
}

/* Where row r of token tile tt, column block kb of the split activations starts (its hi; lo 512 after). */
static inline size_t
act_at(int64_t nkb, int tt, int64_t kb, int r)
{
	return ((size_t) ((int64_t) tt * nkb + kb) * 2) * 512 + (size_t) r * LLM_AMX_TILE_K;
}

size_t
llm_amx_act_bytes(int n, int64_t n_cols)
{
	return (size_t) llm_amx_np(n) * (size_t) llm_amx_kp(n_cols) * 2 * sizeof(uint16_t);
}

TGT_V void
llm_amx_split_rows(const float *x, int64_t n_cols, int t0, int t1, uint16_t *act)
{
	const int64_t nkb = llm_amx_kp(n_cols) / LLM_AMX_TILE_K;

	for (int t = t0; t < t1; t++)
	{
		const float *xr = x + (size_t) t * n_cols;

		for (int64_t kb = 0; kb < nkb; kb++)
		{
			uint16_t   *h = act + act_at(nkb, t / LLM_AMX_TILE_ROWS, kb, t % LLM_AMX_TILE_ROWS),
					   *l = h + 512;
			int64_t		k0 = kb * LLM_AMX_TILE_K;

			if (k0 + LLM_AMX_TILE_K <= n_cols)
				for (int i = 0; i < LLM_AMX_TILE_K; i += 16)
				{
					__m512		v = _mm512_loadu_ps(xr + k0 + i);
					__m256i		vh = bf16_rne16(v);
					__m512		back = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(vh), 16));

					_mm256_storeu_si256((__m256i *) (h + i), vh);
					_mm256_storeu_si256((__m256i *) (l + i), bf16_rne16(_mm512_sub_ps(v, back)));
				}
			else
				for (int i = 0; i < LLM_AMX_TILE_K; i++)
				{
					if (k0 + i < n_cols)
					{
						h[i] = bf16_rne(xr[k0 + i]);
						l[i] = bf16_rne(xr[k0 + i] - bf16_f32(h[i]));
					}
					else
						h[i] = l[i] = 0;
				}
		}
	}
}

void
llm_amx_zero_rows(int64_t n_cols, int t0, int t1, uint16_t *act)
{
	const int64_t nkb = llm_amx_kp(n_cols) / LLM_AMX_TILE_K;

	for (int t = t0; t < t1; t++)
		for (int64_t kb = 0; kb < nkb; kb++)
		{
			uint16_t   *h = act + act_at(nkb, t / LLM_AMX_TILE_ROWS, kb, t % LLM_AMX_TILE_ROWS);

			memset(h, 0, LLM_AMX_TILE_K * sizeof(uint16_t));
			memset(h + 512, 0, LLM_AMX_TILE_K * sizeof(uint16_t));
		}
}

/* ------------------------------------------------------------------------
 * Tiles
 * ------------------------------------------------------------------------ */

typedef struct __attribute__((packed, aligned(64))) amx_cfg
{
	uint8_t		palette;
	uint8_t		start_row;
	uint8_t		reserved[14];
	uint16_t	colsb[16];
	uint8_t		rows[16];
} amx_cfg;

#define TLOAD(t, base, stride) \
	__asm__ volatile ("tileloadd (%0,%1,1), %%tmm" #t :: "r" (base), "r" ((long) (stride)) : "memory")
#define TSTORE(t, base, stride) \
	__asm__ volatile ("tilestored %%tmm" #t ", (%0,%1,1)" :: "r" (base), "r" ((long) (stride)) : "memory")
#define TZERO(t) __asm__ volatile ("tilezero %%tmm" #t ::: "memory")
/* tmm c += tmm a (activations) . tmm b (weights, VNNI) */
#define TDP(c, a, b) __asm__ volatile ("tdpbf16ps %%tmm" #b ", %%tmm" #a ", %%tmm" #c ::: "memory")

/*
 * Accumulator tmm<c> (token tile starting at row t0, row block rb) to y:
 * straight into y when the whole tile is valid, else through a buffer.
 */
#define STORE_C(c, t0, rb) \
	do { \
		int64_t		r0_ = (rb) * LLM_AMX_TILE_ROWS; \
		if ((t0) + LLM_AMX_TILE_ROWS <= n && r0_ + LLM_AMX_TILE_ROWS <= n_rows) \
			TSTORE(c, y + (size_t) (t0) * y_stride + r0_, y_stride * sizeof(float)); \
		else \
		{ \
			TSTORE(c, buf, LLM_AMX_TILE_ROWS * sizeof(float)); \
			for (int t_ = 0; t_ < LLM_AMX_TILE_ROWS && (t0) + t_ < n; t_++) \
				for (int r_ = 0; r_ < LLM_AMX_TILE_ROWS && r0_ + r_ < n_rows; r_++) \
					y[(size_t) ((t0) + t_) * y_stride + r0_ + r_] = buf[t_ * LLM_AMX_TILE_ROWS + r_]; \
		} \
	} while (0)

/*
 * Tokens are taken in super-blocks whose split activations stay in L2
 * (AMX_SUPER_BYTES, half of a 2 MiB L2: at K 1536, 460 tokens, one core,
 * 1 MiB ran the kernel in 1.01-1.05 ms against 1.20 with 384 KiB and 1.56
 * unblocked) while every row block of the call meets them; a row
 * block's tiles (2 KiB per column block) and a token tile's are each
 * contiguous, so the loads of a column block loop are sequential streams.
 */
#ifndef AMX_SUPER_BYTES
#define AMX_SUPER_BYTES (1024 * 1024)
#endif

void
llm_amx_gemm(const uint16_t *packed, int64_t n_rows, int64_t n_cols, int64_t rb0, int64_t rb1,
			 const uint16_t *act, int n, float *y, size_t y_stride)
{
	const int64_t kp = llm_amx_kp(n_cols);
	const int64_t nkb = kp / LLM_AMX_TILE_K;
	const int	ntt = llm_amx_np(n) / LLM_AMX_TILE_ROWS;
	const size_t tile_stride = (size_t) nkb * 1024;	/* elements from one token tile (or row block) to the next */
	int			super = (int) (AMX_SUPER_BYTES / (tile_stride * sizeof(uint16_t)));
	float		buf[LLM_AMX_TILE_ROWS * LLM_AMX_TILE_ROWS] __attribute__((aligned(64)));
	amx_cfg		cfg;

	super = super < 2 ? 2 : super - super % 2;
	memset(&cfg, 0, sizeof(cfg));
	cfg.palette = 1;
	for (int i = 0; i < 8; i++)
	{
		cfg.rows[i] = LLM_AMX_TILE_ROWS;
		cfg.colsb[i] = 64;
	}
	__asm__ volatile ("ldtilecfg %0" :: "m" (cfg) : "memory");

	for (int s0 = 0; s0 < ntt; s0 += super)
	{
		const int	s1 = s0 + super < ntt ? s0 + super : ntt;

		for (int64_t rb = rb0; rb < rb1; rb += 2)
		{
			const uint16_t *w0 = packed + rb * tile_stride;

			if (rb + 1 < rb1)
			{
				const uint16_t *w1 = w0 + tile_stride;
				int			tt = s0;

				for (; tt + 2 <= s1; tt += 2)
				{
					const uint16_t *a0 = act + (size_t) tt * tile_stride,
							   *a1 = a0 + tile_stride;

					TZERO(0);
					TZERO(1);
					TZERO(2);
					TZERO(3);
					for (int64_t kb = 0; kb < nkb; kb++)
					{
						const uint16_t *b0 = w0 + kb * 1024,
								   *b1 = w1 + kb * 1024,
								   *h0 = a0 + kb * 1024,
								   *h1 = a1 + kb * 1024;

						TLOAD(4, h0, 64);
						TLOAD(5, h1, 64);
						TLOAD(6, b0, 64);
						TLOAD(7, b1, 64);
						TDP(0, 4, 6);
						TDP(1, 4, 7);
						TDP(2, 5, 6);
						TDP(3, 5, 7);
						TLOAD(6, b0 + 512, 64);
						TLOAD(7, b1 + 512, 64);
						TDP(0, 4, 6);
						TDP(1, 4, 7);
						TDP(2, 5, 6);
						TDP(3, 5, 7);
						TLOAD(4, h0 + 512, 64);
						TLOAD(5, h1 + 512, 64);
						TLOAD(6, b0, 64);
						TLOAD(7, b1, 64);
						TDP(0, 4, 6);
						TDP(1, 4, 7);
						TDP(2, 5, 6);
						TDP(3, 5, 7);
					}
					STORE_C(0, tt * LLM_AMX_TILE_ROWS, rb);
					STORE_C(1, tt * LLM_AMX_TILE_ROWS, rb + 1);
					STORE_C(2, (tt + 1) * LLM_AMX_TILE_ROWS, rb);
					STORE_C(3, (tt + 1) * LLM_AMX_TILE_ROWS, rb + 1);
				}
				if (tt < s1)
				{
					const uint16_t *a0 = act + (size_t) tt * tile_stride;

					TZERO(0);
					TZERO(1);
					for (int64_t kb = 0; kb < nkb; kb++)
					{
						const uint16_t *b0 = w0 + kb * 1024,
								   *b1 = w1 + kb * 1024,
								   *h0 = a0 + kb * 1024;

						TLOAD(4, h0, 64);
						TLOAD(6, b0, 64);
						TLOAD(7, b1, 64);
						TDP(0, 4, 6);
						TDP(1, 4, 7);
						TLOAD(6, b0 + 512, 64);
						TLOAD(7, b1 + 512, 64);
						TDP(0, 4, 6);
						TDP(1, 4, 7);
						TLOAD(4, h0 + 512, 64);
						TLOAD(6, b0, 64);
						TLOAD(7, b1, 64);
						TDP(0, 4, 6);
						TDP(1, 4, 7);
					}
					STORE_C(0, tt * LLM_AMX_TILE_ROWS, rb);
					STORE_C(1, tt * LLM_AMX_TILE_ROWS, rb + 1);
				}
			}
			else
			{
				for (int tt = s0; tt < s1; tt++)
				{
					const uint16_t *a0 = act + (size_t) tt * tile_stride;

					TZERO(0);
					for (int64_t kb = 0; kb < nkb; kb++)
					{
						const uint16_t *b0 = w0 + kb * 1024,
								   *h0 = a0 + kb * 1024;

						TLOAD(4, h0, 64);
						TLOAD(6, b0, 64);
						TDP(0, 4, 6);
						TLOAD(6, b0 + 512, 64);
						TDP(0, 4, 6);
						TLOAD(4, h0 + 512, 64);
						TLOAD(6, b0, 64);
						TDP(0, 4, 6);
					}
					STORE_C(0, tt * LLM_AMX_TILE_ROWS, rb);
				}
			}
		}
	}
	__asm__ volatile ("tilerelease" ::: "memory");
}

#else							/* not x86-64: never usable */

bool
llm_amx_bf16_usable(char *why, size_t whylen)
{
	if (why != NULL && whylen > 0)
		snprintf(why, whylen, "not an x86-64 CPU");
	return false;
}

size_t
llm_amx_packed_bytes(int64_t n_rows, int64_t n_cols)
{
	return 0;
}

void
llm_amx_pack_f16(const uint16_t *w, size_t row_bytes, int64_t n_rows, int64_t n_cols, uint16_t *dst)
{
}

void
llm_amx_split_f16(uint16_t h, uint16_t *hi, uint16_t *lo)
{
	*hi = *lo = 0;
}

size_t
llm_amx_act_bytes(int n, int64_t n_cols)
{
	return 0;
}

void
llm_amx_split_rows(const float *x, int64_t n_cols, int t0, int t1, uint16_t *act)
{
}

void
llm_amx_zero_rows(int64_t n_cols, int t0, int t1, uint16_t *act)
{
}

void
llm_amx_gemm(const uint16_t *packed, int64_t n_rows, int64_t n_cols, int64_t rb0, int64_t rb1,
			 const uint16_t *act, int n, float *y, size_t y_stride)
{
}

#endif
