/*
 * cascade_stats.c — the threshold of a model cascade (cascade_stats.h).
 *
 * PostgreSQL-free: built into llm.so with the node and included by
 * test/unit/test_cascade_stats.c.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cascade_stats.h"

void
llm_cascade_params_defaults(llm_cascade_params *p)
{
	p->precision_target = 0.95;
	p->recall_target = 0.95;
	p->accuracy_target = 0.95;
	p->delta = 0.05;
	p->sample_fraction = 0.2;
	p->min_sample = 100;
	p->n_candidates = 20;
	p->seed = 0;
}

int64_t
llm_cascade_sample_size(int64_t n, const llm_cascade_params *p)
{
	int64_t		k = (int64_t) ceil(p->sample_fraction * (double) n);

	if (k < p->min_sample)
		k = p->min_sample;
	if (k < 1 || 2 * k > n)
		return 0;
	return k;
}

static uint64_t
splitmix64(uint64_t *s)
{
	uint64_t	z = (*s += 0x9E3779B97F4A7C15ULL);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

/* uniform in [0, bound) without modulo bias */
static uint64_t
uniform_below(uint64_t *s, uint64_t bound)
{
	uint64_t	limit = UINT64_MAX - UINT64_MAX % bound,
				x;

	do
		x = splitmix64(s);
	while (x >= limit);
	return x % bound;
}

static int
cmp_int64(const void *a, const void *b)
{
	int64_t		x = *(const int64_t *) a,
				y = *(const int64_t *) b;

	return (x > y) - (x < y);
}

void
llm_cascade_sample(int64_t n, int64_t k, uint64_t seed, int64_t *work, int64_t *out)
{
	uint64_t	s = seed;

	for (int64_t i = 0; i < n; i++)
		work[i] = i;
	for (int64_t i = 0; i < k; i++)
	{
		int64_t		j = i + (int64_t) uniform_below(&s, (uint64_t) (n - i));
		int64_t		t = work[i];

		work[i] = work[j];
		work[j] = t;
		out[i] = work[i];
	}
	qsort(out, (size_t) k, sizeof(int64_t), cmp_int64);
}

/* P(Bin(n, p) <= x), summed in log space from the mode's side */
static double
binom_cdf(int64_t x, int64_t n, double p)
{
	double		sum = 0.0,
				lp,
				lq;

	if (x >= n || p <= 0.0)
		return 1.0;
	if (p >= 1.0)
		return 0.0;
	lp = log(p);
	lq = log1p(-p);
	for (int64_t i = 0; i <= x; i++)
		sum += exp(lgamma((double) n + 1) - lgamma((double) i + 1) - lgamma((double) (n - i) + 1)
				   + (double) i * lp + (double) (n - i) * lq);
	return sum > 1.0 ? 1.0 : sum;
}

double
llm_cascade_cp_upper(int64_t errors, int64_t trials, double alpha)
{
	double		lo,
				hi;

	if (trials <= 0 || errors >= trials)
		return 1.0;
	if (errors == 0)
		return 1.0 - pow(alpha, 1.0 / (double) trials);
	/* the CDF falls in p: bisect for CDF(p) = alpha */
	lo = (double) errors / (double) trials;
	hi = 1.0;
	for (int it = 0; it < 60; it++)
	{
		double		mid = 0.5 * (lo + hi);

		if (binom_cdf(errors, trials, mid) > alpha)
			lo = mid;
		else
			hi = mid;
	}
	return hi;
}

static int
cmp_desc(const void *a, const void *b)
{
	double		x = *(const double *) a,
				y = *(const double *) b;

	return (x < y) - (x > y);
}

/* candidate j of M (1-based): the confidence of the ceil(j n / M)-th most confident row */
static double
candidate(const double *sorted_desc, int64_t n, int j, int m)
{
	int64_t		idx = (int64_t) ceil((double) j * (double) n / (double) m) - 1;

	if (idx < 0)
		idx = 0;
	if (idx >= n)
		idx = n - 1;
	return sorted_desc[idx];
}

static void
decision_init(llm_cascade_decision *d, int64_t n, int64_t k)
{
	memset(d, 0, sizeof(*d));
	d->outcome = k > 0 ? LLM_CASCADE_LEARNT : LLM_CASCADE_TOO_FEW_ROWS;
	d->threshold = LLM_CASCADE_ALL_LARGE;
	d->n_large = n;
	d->bound[0] = 1.0;
	d->bound[1] = k > 0 ? 1.0 : 0.0;
}

/* rows not sampled that keep the small answer at t */
static void
count_routes(const double *conf, int64_t n, const int64_t *sample, int64_t k, double t,
			 llm_cascade_decision *d)
{
	int64_t		small = 0,
				s = 0;

	for (int64_t i = 0; i < n; i++)
	{
		bool		sampled = s < k && sample[s] == i;

		if (sampled)
			s++;
		else if (conf[i] >= t)
			small++;
	}
	d->n_small = small;
	d->n_large = n - small;
}

void
llm_cascade_filter_threshold(const double *p_small, int64_t n,
							 const int64_t *sample, const bool *large_yes, int64_t k,
							 const llm_cascade_params *p, double *work,
							 llm_cascade_decision *d)
{
	double		alpha = p->delta / 2.0;

	decision_init(d, n, k);
	if (k <= 0 || n <= 0)
		return;
	for (int64_t i = 0; i < n; i++)
		work[i] = fmax(p_small[i], 1.0 - p_small[i]);
	qsort(work, (size_t) n, sizeof(double), cmp_desc);

	for (int j = 1; j <= p->n_candidates; j++)
	{
		double		t = candidate(work, n, j, p->n_candidates);
		bool		kept_no = false,
					kept_yes = false;
		int64_t		pos = 0,
					miss = 0,
					pred = 0,
					false_yes = 0;
		double		prec_lb,
					rec_lb;

		for (int64_t i = 0; i < n && !(kept_no && kept_yes); i++)
			if (fmax(p_small[i], 1.0 - p_small[i]) >= t)
			{
				if (p_small[i] > 0.5)
					kept_yes = true;
				else
					kept_no = true;
			}
		for (int64_t s = 0; s < k; s++)
		{
			double		ps = p_small[sample[s]];
			bool		kept = fmax(ps, 1.0 - ps) >= t;
			bool		says_yes = kept ? ps > 0.5 : large_yes[s];

			if (large_yes[s])
			{
				pos++;
				if (!says_yes)
					miss++;
			}
			if (says_yes)
			{
				pred++;
				if (!large_yes[s])
					false_yes++;
			}
		}
		rec_lb = kept_no ? 1.0 - llm_cascade_cp_upper(miss, pos, alpha) : 1.0;
		prec_lb = kept_yes ? 1.0 - llm_cascade_cp_upper(false_yes, pred, alpha) : 1.0;
		if (rec_lb < p->recall_target || prec_lb < p->precision_target)
			break;
		d->threshold = t;
		d->level = j;
		d->bound[0] = prec_lb;
		d->bound[1] = rec_lb;
	}
	for (int64_t i = 0; i < n; i++)
		work[i] = fmax(p_small[i], 1.0 - p_small[i]);
	count_routes(work, n, sample, k, d->threshold, d);
}

void
llm_cascade_classify_threshold(const double *conf, const int *small_label, int64_t n,
							   const int64_t *sample, const int *large_label, int64_t k,
							   const llm_cascade_params *p, double *work,
							   llm_cascade_decision *d)
{
	decision_init(d, n, k);
	d->bound[1] = 0.0;
	if (k <= 0 || n <= 0)
		return;
	memcpy(work, conf, sizeof(double) * (size_t) n);
	qsort(work, (size_t) n, sizeof(double), cmp_desc);

	for (int j = 1; j <= p->n_candidates; j++)
	{
		double		t = candidate(work, n, j, p->n_candidates);
		int64_t		errors = 0;
		double		acc_lb;

		for (int64_t s = 0; s < k; s++)
			if (conf[sample[s]] >= t && small_label[sample[s]] != large_label[s])
				errors++;
		acc_lb = 1.0 - llm_cascade_cp_upper(errors, k, p->delta);
		if (acc_lb < p->accuracy_target)
			break;
		d->threshold = t;
		d->level = j;
		d->bound[0] = acc_lb;
	}
	count_routes(conf, n, sample, k, d->threshold, d);
}

void
llm_cascade_class_recall(const double *conf, const int *small_label, int64_t n,
						 const int64_t *sample, const int *large_label, int64_t k,
						 const llm_cascade_decision *d, const llm_cascade_params *p,
						 int n_labels, llm_cascade_label_recall *out)
{
	double		alpha = p->delta / (double) (p->n_candidates > 0 ? p->n_candidates : 1);
	int			kept_label = -1;	/* the small label of every kept row; -2: several */

	/* the labels the rows left to the small model give */
	for (int64_t i = 0, s = 0; i < n && kept_label != -2; i++)
	{
		if (s < k && sample[s] == i)
		{
			s++;
			continue;
		}
		if (!llm_cascade_keeps_small(d, conf[i]))
			continue;
		if (kept_label == -1)
			kept_label = small_label[i];
		else if (small_label[i] != kept_label)
			kept_label = -2;
	}
	for (int c = 0; c < n_labels; c++)
	{
		llm_cascade_label_recall *r = &out[c];

		r->rows = 0;
		r->missed = 0;
		for (int64_t s = 0; s < k; s++)
		{
			int64_t		i = sample[s];
			int			ans;

			if (large_label[s] != c)
				continue;
			ans = llm_cascade_keeps_small(d, conf[i]) ? small_label[i] : large_label[s];
			r->rows++;
			r->missed += ans != c;
		}
		r->estimate = r->rows > 0 ? (double) (r->rows - r->missed) / (double) r->rows : -1.0;
		r->exact = kept_label == -1 || kept_label == c;
		r->lower = r->exact ? 1.0 : 1.0 - llm_cascade_cp_upper(r->missed, r->rows, alpha);
	}
}
