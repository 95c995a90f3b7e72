/*
 * grammar_numeric.c — decimal numbers within bounds as grammar trees
 * (grammar_impl.h): the digit-range construction.
 *
 * Integers [a, b] of one digit count d are split on their first digit:
 * a0 followed by [a1..] to 9..9, the digits strictly between a0 and b0
 * followed by any d-1 digits, and b0 followed by 0..0 to [b1..] (prefix
 * runs of 0s / 9s fold into the middle), recursively: O(d^2) nodes, exact.
 * Different digit counts are separate ranges.  A signed range is its
 * negative part ("-" and the mirrored magnitudes) or its non-negative part.
 * Numbers with a fraction follow from the integer part I and whether the
 * fraction F is zero: for an integral bound L, I.F >= L iff I >= L, and
 * I.F > L iff I > L or (I = L and F is not zero), and similarly above.
 */
#include "grammar_impl.h"

#include <string.h>

typedef __int128 i128;

static int
n_digits(uint64_t v)
{
	int			d = 1;

	while (v >= 10)
	{
		v /= 10;
		d++;
	}
	return d;
}

static gnode *
digits(gctx *c, char lo, char hi)
{
	return g_byte_range(c, (uint8_t) lo, (uint8_t) hi);
}

static bool
all_of(const char *s, int n, char ch)
{
	for (int i = 0; i < n; i++)
		if (s[i] != ch)
			return false;
	return true;
}

/* Digit strings a..b of equal length n (a <= b), leading zeros allowed at this level. */
static gnode *
same_length(gctx *c, const char *a, const char *b, int n)
{
	gnode_list	alts = {0};
	char		nines[20],
				zeros[20];
	char		mid_lo,
				mid_hi;

	if (n == 1)
		return digits(c, a[0], b[0]);
	if (a[0] == b[0])
		return g_cat2(c, g_bytes(c, a, 1), same_length(c, a + 1, b + 1, n - 1));
	memset(nines, '9', sizeof(nines));
	memset(zeros, '0', sizeof(zeros));
	mid_lo = a[0] + 1;
	mid_hi = b[0] - 1;
	if (all_of(a + 1, n - 1, '0'))
		mid_lo = a[0];
	else if (!gnode_list_push(c, &alts, g_cat2(c, g_bytes(c, a, 1), same_length(c, a + 1, nines, n - 1))))
		return NULL;
	if (all_of(b + 1, n - 1, '9'))
		mid_hi = b[0];
	if (mid_lo <= mid_hi &&
		!gnode_list_push(c, &alts, g_cat2(c, digits(c, mid_lo, mid_hi),
										  g_repeat(c, digits(c, '0', '9'), n - 1, n - 1))))
		return NULL;
	if (mid_hi != b[0] &&
		!gnode_list_push(c, &alts, g_cat2(c, g_bytes(c, b, 1), same_length(c, zeros, b + 1, n - 1))))
		return NULL;
	return g_alt(c, alts.v, alts.n);
}

static uint64_t
pow10_u(int d)
{
	uint64_t	v = 1;

	while (d-- > 0)
		v *= 10;
	return v;
}

gnode *
g_uint_range(gctx *c, uint64_t lo, uint64_t hi)
{
	gnode_list	alts = {0};
	int			dl,
				dh;

	if (lo > hi)
		return g_alt(c, NULL, 0);
	dl = n_digits(lo);
	dh = n_digits(hi);
	for (int d = dl; d <= dh; d++)
	{
		uint64_t	a = d == dl ? lo : pow10_u(d - 1);
		uint64_t	b = (d == dh) ? hi : pow10_u(d) - 1;
		char		as[21],
					bs[21];

		for (int i = d - 1; i >= 0; i--)
		{
			as[i] = (char) ('0' + a % 10);
			bs[i] = (char) ('0' + b % 10);
			a /= 10;
			b /= 10;
		}
		if (!gnode_list_push(c, &alts, same_length(c, as, bs, d)))
			return NULL;
	}
	return g_alt(c, alts.v, alts.n);
}

/* Integers >= lo without an upper bound. */
static gnode *
uint_at_least(gctx *c, uint64_t lo)
{
	int			d = n_digits(lo);

	/* lo .. 9..9 (d digits), then any longer number */
	return g_alt2(c, g_uint_range(c, lo, pow10_u(d) - 1),
				  g_cat3(c, digits(c, '1', '9'), g_repeat(c, digits(c, '0', '9'), d, d),
						 g_repeat(c, digits(c, '0', '9'), 0, -1)));
}

gnode *
g_int_range(gctx *c, int64_t lo, int64_t hi)
{
	gnode_list	alts = {0};

	if (lo > hi)
		return g_alt(c, NULL, 0);
	if (lo < 0)
	{
		int64_t		nh = hi < -1 ? hi : -1;
		/* magnitudes -nh .. -lo, computed without overflow at INT64_MIN */
		uint64_t	mlo = (uint64_t) (-(nh + 1)) + 1,
					mhi = (uint64_t) (-(lo + 1)) + 1;

		if (!gnode_list_push(c, &alts, g_cat2(c, g_lit(c, "-"), g_uint_range(c, mlo, mhi))))
			return NULL;
	}
	if (hi >= 0 &&
		!gnode_list_push(c, &alts, g_uint_range(c, (uint64_t) (lo > 0 ? lo : 0), (uint64_t) hi)))
		return NULL;
	return g_alt(c, alts.v, alts.n);
}

/* ---------- numbers with a fraction ---------- */

static gnode *
frac_any(gctx *c)
{
	return g_repeat(c, g_cat2(c, g_lit(c, "."), g_repeat(c, digits(c, '0', '9'), 1, -1)), 0, 1);
}

static gnode *
frac_zero(gctx *c)
{
	return g_repeat(c, g_cat2(c, g_lit(c, "."), g_repeat(c, g_lit(c, "0"), 1, -1)), 0, 1);
}

static gnode *
frac_nonzero(gctx *c)
{
	gnode	   *any = g_repeat(c, digits(c, '0', '9'), 0, -1);

	return g_cat3(c, g_lit(c, "."), any, g_cat2(c, digits(c, '1', '9'), g_repeat(c, digits(c, '0', '9'), 0, -1)));
}

/*
 * Non-negative y = I.F with y >= L (y > L when l_excl; no bound when
 * !has_l) and y <= H (y < H when h_excl; none when !has_h).
 */
static gnode *
nonneg_side(gctx *c, bool has_l, i128 L, bool l_excl, bool has_h, i128 H, bool h_excl)
{
	gnode_list	alts = {0};
	i128		low_any,
				high_any;

	if (!has_l || L < 0)
	{
		has_l = true;
		L = 0;
		l_excl = false;
	}
	if (has_h && (H < 0 || (H == 0 && h_excl)))
		return g_alt(c, NULL, 0);
	low_any = l_excl ? L + 1 : L;
	high_any = has_h ? H - 1 : -1;
	/* integer part in [low_any, high_any], any fraction */
	if (!has_h)
	{
		if (!gnode_list_push(c, &alts, g_cat2(c, uint_at_least(c, (uint64_t) low_any), frac_any(c))))
			return NULL;
	}
	else if (low_any <= high_any &&
			 !gnode_list_push(c, &alts, g_cat2(c, g_uint_range(c, (uint64_t) low_any, (uint64_t) high_any),
											   frac_any(c))))
		return NULL;
	/* I = L with a non-zero fraction (just above an exclusive lower bound) */
	if (l_excl && (!has_h || L < H) &&
		!gnode_list_push(c, &alts, g_cat2(c, g_uint_range(c, (uint64_t) L, (uint64_t) L), frac_nonzero(c))))
		return NULL;
	/* I = H with a zero fraction (an inclusive upper bound itself) */
	if (has_h && !h_excl && (l_excl ? H > L : H >= L) &&
		!gnode_list_push(c, &alts, g_cat2(c, g_uint_range(c, (uint64_t) H, (uint64_t) H), frac_zero(c))))
		return NULL;
	return g_alt(c, alts.v, alts.n);
}

gnode *
g_number_range(gctx *c, bool has_lo, int64_t lo, bool lo_excl, bool has_hi, int64_t hi, bool hi_excl)
{
	gnode_list	alts = {0};

	/* negative x = -y, y > 0: x >= lo iff y <= -lo, x <= hi iff y >= -hi */
	{
		bool		yl_excl = true;
		i128		yl = 0;
		gnode	   *neg;

		if (has_hi && hi < 0)
		{
			/* the bound from hi is stronger than y > 0 */
			yl = -(i128) hi;
			yl_excl = hi_excl;
		}
		neg = nonneg_side(c, true, yl, yl_excl, has_lo, -(i128) lo, lo_excl);
		if (!gnode_list_push(c, &alts, g_cat2(c, g_lit(c, "-"), neg)))
			return NULL;
	}
	if (!gnode_list_push(c, &alts, nonneg_side(c, has_lo, lo, lo_excl, has_hi, hi, hi_excl)))
		return NULL;
	return g_alt(c, alts.v, alts.n);
}
