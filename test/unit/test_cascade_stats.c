/*
 * test_cascade_stats.c — the model cascade's threshold (pg/batch/cascade_stats.h)
 * over the stored scores of both models on the 2,000 held rows
 * (test/golden/cascade/held_scores.csv, written by
 * scripts/oracle/cascade_scores.sh with SmolLM2-135M as the small model and
 * Gemma 3 270M as the large one; docs/CASCADES.md).
 *
 * Each set is checked over 100 fixed seeds: the sample is drawn, the
 * threshold learnt, and the cascade's answers over all 2,000 rows compared
 * with the large model's: the targets must hold in at least 90 of the 100.
 * Sets:
 *   held       the stored scores as they are: llm_classify's
 *              complaint/praise/question, and the yes/no question "is it
 *              praise?" answered from them (the small model's probability
 *              of praise as its probability of yes; yes from the large
 *              model when praise is its label)
 *   adversarial the small model's scores paired with other rows (a seeded
 *              permutation): its confidence says nothing about the large
 *              model's answer; the targets hold by sending rows to the
 *              large model
 *   borderline the large model's answers with a small model wrong on 7% of
 *              rows whatever its confidence: the bound keeps the targets,
 *              a point estimate (the same rule without the bound, taking
 *              the loosest candidate whose sample estimate meets the
 *              targets) misses them in more than 10 of 100 samples, so the
 *              check can fail
 *   easy       the large model's answers with a small model that agrees
 *              with them where it is confident (derived from the stored
 *              large scores, see easy_small): at least half the large
 *              model's calls saved
 *
 * llm_classify's per-label recall bound (llm_cascade_class_recall) is
 * checked against exact Clopper-Pearson bounds
 * (test/golden/cascade/cp_bounds.csv, written by
 * scripts/oracle/cascade_cp_bounds.py) on hand-made samples, and for its
 * coverage over the same 100 seeds: on the held and the classify
 * borderline set (the large model's labels, the small model's flipped to
 * another label on a seeded 7% of rows whatever its confidence) each
 * label's recall over all 2,000 rows, as the cascade answers them, must be
 * at or above its bound in at least 90 of 100 samples, and the point
 * estimate in its place must fall under the recall in more than 10.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg/batch/cascade_stats.c"
#include "unit.h"

#define HELD_PATH	"test/golden/cascade/held_scores.csv"
#define CP_PATH		"test/golden/cascade/cp_bounds.csv"
#define MAX_ROWS	4096
#define N_LABELS	3
#define N_SEEDS		100

typedef struct held
{
	int64_t		n;
	double		small_cls[MAX_ROWS][N_LABELS];
	double		large_cls[MAX_ROWS][N_LABELS];
} held;

static held H;

static bool
load_held(void)
{
	FILE	   *f = fopen(HELD_PATH, "r");
	char		line[1024];

	if (f == NULL)
		return false;
	H.n = 0;
	while (fgets(line, sizeof(line), f) != NULL && H.n < MAX_ROWS)
	{
		long		id;
		char		kind[32];
		double	   *c = H.small_cls[H.n],
				   *l = H.large_cls[H.n];

		if (line[0] == 'i')		/* header */
			continue;
		if (sscanf(line, "%ld,%31[^,],%lf,%lf,%lf,%lf,%lf,%lf", &id, kind,
				   &c[0], &c[1], &c[2], &l[0], &l[1], &l[2]) != 8)
			break;
		H.n++;
	}
	fclose(f);
	return H.n == 2000;
}

static int
argmax3(const double *p)
{
	int			b = 0;

	for (int i = 1; i < N_LABELS; i++)
		if (p[i] > p[b])
			b = i;
	return b;
}

/* A yes/no cascade's answers over all rows, against the large model's. */
typedef struct filter_run
{
	double		precision,
				recall;
	int64_t		n_large;
} filter_run;

static filter_run
run_filter(const double *small, const bool *truth, int64_t n, uint64_t seed, const llm_cascade_params *p0,
		   llm_cascade_decision *d)
{
	static int64_t work_i[MAX_ROWS],
				sample[MAX_ROWS];
	static bool large_on_sample[MAX_ROWS],
				sampled[MAX_ROWS];
	static double work_d[MAX_ROWS];
	llm_cascade_params p = *p0;
	int64_t		k,
				tp = 0,
				fp = 0,
				fn = 0;
	filter_run	r;

	p.seed = seed;
	k = llm_cascade_sample_size(n, &p);
	llm_cascade_sample(n, k, seed, work_i, sample);
	memset(sampled, 0, sizeof(sampled));
	for (int64_t s = 0; s < k; s++)
	{
		large_on_sample[s] = truth[sample[s]];
		sampled[sample[s]] = true;
	}
	llm_cascade_filter_threshold(small, n, sample, large_on_sample, k, &p, work_d, d);
	for (int64_t i = 0; i < n; i++)
	{
		bool		small_keeps = !sampled[i] && llm_cascade_keeps_small(d, fmax(small[i], 1 - small[i]));
		bool		ans = small_keeps ? small[i] > 0.5 : truth[i];

		tp += ans && truth[i];
		fp += ans && !truth[i];
		fn += !ans && truth[i];
	}
	r.precision = tp + fp > 0 ? (double) tp / (double) (tp + fp) : 1.0;
	r.recall = tp + fn > 0 ? (double) tp / (double) (tp + fn) : 1.0;
	r.n_large = d->n_large;
	return r;
}

/* Over N_SEEDS seeds: how many meet both targets; mean large-model calls. */
static int
filter_seeds(const char *name, const double *small, const bool *truth, int64_t n,
			 const llm_cascade_params *p, double *mean_large)
{
	int			ok = 0;
	double		sum = 0,
				min_p = 1,
				min_r = 1;

	for (uint64_t seed = 1; seed <= N_SEEDS; seed++)
	{
		llm_cascade_decision d;
		filter_run	r = run_filter(small, truth, n, seed, p, &d);

		ok += r.precision >= p->precision_target && r.recall >= p->recall_target;
		sum += (double) r.n_large;
		min_p = fmin(min_p, r.precision);
		min_r = fmin(min_r, r.recall);
	}
	*mean_large = sum / N_SEEDS;
	printf("# %s: targets held in %d/%d samples; large-model calls %.1f of %lld (%.1f%% saved); "
		   "worst precision %.3f recall %.3f\n",
		   name, ok, N_SEEDS, *mean_large, (long long) n, 100.0 * (1 - *mean_large / (double) n), min_p, min_r);
	return ok;
}

/*
 * Per label over the seeds: samples whose recall bound holds (the recall
 * over all rows, as the cascade answers them, >= lower); whose point
 * estimate would (>= estimate); where the bound is not exact (so the first
 * count says something); the smallest bound.
 */
typedef struct recall_cover
{
	int			bound_held[N_LABELS];
	int			estimate_held[N_LABELS];
	int			not_exact[N_LABELS];
	double		min_lower[N_LABELS];
} recall_cover;

/* classification: accuracy over all rows; each label's recall against its bound into *cov */
static int
classify_seeds(const char *name, const double (*small)[N_LABELS], const int *truth, int64_t n,
			   const llm_cascade_params *p0, double *mean_large, recall_cover *cov)
{
	static int64_t work_i[MAX_ROWS],
				sample[MAX_ROWS];
	static int	large_on_sample[MAX_ROWS],
				small_label[MAX_ROWS];
	static bool sampled[MAX_ROWS];
	static double conf[MAX_ROWS],
				work_d[MAX_ROWS];
	int			ok = 0;
	double		sum = 0,
				min_acc = 1,
				rec_min[N_LABELS] = {1, 1, 1};

	memset(cov, 0, sizeof(*cov));
	for (int c = 0; c < N_LABELS; c++)
		cov->min_lower[c] = 1;
	for (int64_t i = 0; i < n; i++)
	{
		small_label[i] = argmax3(small[i]);
		conf[i] = small[i][small_label[i]];
	}
	for (uint64_t seed = 1; seed <= N_SEEDS; seed++)
	{
		llm_cascade_params p = *p0;
		llm_cascade_decision d;
		llm_cascade_label_recall lr[N_LABELS];
		int64_t		k,
					right = 0,
					cls_n[N_LABELS] = {0},
					cls_right[N_LABELS] = {0};
		double		acc;

		p.seed = seed;
		k = llm_cascade_sample_size(n, &p);
		llm_cascade_sample(n, k, seed, work_i, sample);
		memset(sampled, 0, sizeof(sampled));
		for (int64_t s = 0; s < k; s++)
		{
			large_on_sample[s] = truth[sample[s]];
			sampled[sample[s]] = true;
		}
		llm_cascade_classify_threshold(conf, small_label, n, sample, large_on_sample, k, &p, work_d, &d);
		for (int64_t i = 0; i < n; i++)
		{
			int			ans = !sampled[i] && llm_cascade_keeps_small(&d, conf[i]) ? small_label[i] : truth[i];

			right += ans == truth[i];
			cls_n[truth[i]]++;
			cls_right[truth[i]] += ans == truth[i];
		}
		acc = (double) right / (double) n;
		ok += acc >= p.accuracy_target;
		min_acc = fmin(min_acc, acc);
		sum += (double) d.n_large;
		llm_cascade_class_recall(conf, small_label, n, sample, large_on_sample, k, &d, &p, N_LABELS, lr);
		for (int c = 0; c < N_LABELS; c++)
		{
			double		rec = cls_n[c] > 0 ? (double) cls_right[c] / (double) cls_n[c] : 1.0;

			rec_min[c] = fmin(rec_min[c], rec);
			cov->bound_held[c] += rec >= lr[c].lower;
			cov->estimate_held[c] += rec >= lr[c].estimate;
			cov->not_exact[c] += !lr[c].exact;
			cov->min_lower[c] = fmin(cov->min_lower[c], lr[c].lower);
		}
	}
	*mean_large = sum / N_SEEDS;
	printf("# %s: accuracy target held in %d/%d samples; large-model calls %.1f of %lld (%.1f%% saved); "
		   "worst accuracy %.3f; worst per-class recall complaint %.3f praise %.3f question %.3f\n",
		   name, ok, N_SEEDS, *mean_large, (long long) n, 100.0 * (1 - *mean_large / (double) n), min_acc,
		   rec_min[0], rec_min[1], rec_min[2]);
	printf("# %s: per-label recall >= its bound in complaint %d praise %d question %d of %d samples "
		   "(the point estimate: %d %d %d; bound not exact in %d %d %d; smallest bound %.3f %.3f %.3f)\n",
		   name, cov->bound_held[0], cov->bound_held[1], cov->bound_held[2], N_SEEDS,
		   cov->estimate_held[0], cov->estimate_held[1], cov->estimate_held[2],
		   cov->not_exact[0], cov->not_exact[1], cov->not_exact[2],
		   cov->min_lower[0], cov->min_lower[1], cov->min_lower[2]);
	return ok;
}

/* a seeded permutation of [0, n) */
static void
permutation(int64_t n, uint64_t seed, int64_t *perm)
{
	static int64_t work[MAX_ROWS];

	llm_cascade_sample(n, n, seed, work, perm);
	/* llm_cascade_sample sorts its output: take the shuffled scratch instead */
	memcpy(perm, work, sizeof(int64_t) * (size_t) n);
}

/*
 * The easy set's small model: the large model's answer, with a confidence
 * that is high (0.9 .. 1) on 85% of rows, where it is right, and low
 * (0.5 .. 0.6, a coin's answer) on the rest; which rows are which is
 * seeded.  A small model informative where it is sure.
 */
static void
easy_small(const bool *truth, int64_t n, double *small)
{
	uint64_t	s = 777;

	for (int64_t i = 0; i < n; i++)
	{
		double		u = (double) (splitmix64(&s) >> 11) / 9007199254740992.0,
					v = (double) (splitmix64(&s) >> 11) / 9007199254740992.0;

		if (u < 0.85)
			small[i] = truth[i] ? 0.9 + 0.1 * v : 0.1 * v;
		else
			small[i] = (splitmix64(&s) & 1) ? 0.5 + 0.1 * v : 0.5 - 0.1 * v;
	}
}

/*
 * The borderline set's small model: the large model's answer flipped on a
 * seeded 7% of rows, with a confidence drawn from (0.5, 1) independently of
 * whether it is right.
 */
static void
borderline_small(const bool *truth, int64_t n, double *small)
{
	uint64_t	s = 4242;

	for (int64_t i = 0; i < n; i++)
	{
		double		u = (double) (splitmix64(&s) >> 11) / 9007199254740992.0,
					v = (double) (splitmix64(&s) >> 11) / 9007199254740992.0;
		bool		ans = u < 0.07 ? !truth[i] : truth[i];
		double		conf = 0.5 + 0.5 * v;

		small[i] = ans ? conf : 1.0 - conf;
	}
}

/*
 * The classify borderline set's small model: the large model's label, or
 * on a seeded 7% of rows another label, with a confidence drawn from
 * (0.4, 1) independently of whether it is right (the other labels share
 * the rest).
 */
static void
borderline_small_cls(const int *truth, int64_t n, double (*small)[N_LABELS])
{
	uint64_t	s = 4343;

	for (int64_t i = 0; i < n; i++)
	{
		double		u = (double) (splitmix64(&s) >> 11) / 9007199254740992.0,
					v = (double) (splitmix64(&s) >> 11) / 9007199254740992.0;
		int			ans = u < 0.07 ? (truth[i] + 1 + (int) (splitmix64(&s) & 1)) % N_LABELS : truth[i];
		double		conf = 0.4 + 0.6 * v;

		for (int c = 0; c < N_LABELS; c++)
			small[i][c] = c == ans ? conf : (1.0 - conf) / (N_LABELS - 1);
	}
}

/* Exact Clopper-Pearson bounds, as the oracle wrote them */
#define MAX_CP		64
static struct
{
	int64_t		errors,
				trials;
	double		alpha,
				upper;
}			CP[MAX_CP];
static int	n_cp;

static bool
load_cp(void)
{
	FILE	   *f = fopen(CP_PATH, "r");
	char		line[256];

	if (f == NULL)
		return false;
	n_cp = 0;
	while (fgets(line, sizeof(line), f) != NULL && n_cp < MAX_CP)
	{
		long long	x,
					t;

		if (line[0] == 'e')		/* header */
			continue;
		if (sscanf(line, "%lld,%lld,%lf,%lf", &x, &t, &CP[n_cp].alpha, &CP[n_cp].upper) != 4)
			break;
		CP[n_cp].errors = x;
		CP[n_cp].trials = t;
		n_cp++;
	}
	fclose(f);
	return n_cp > 0;
}

/* the oracle's upper bound for (errors, trials, alpha); NAN when it has none */
static double
golden_upper(int64_t errors, int64_t trials, double alpha)
{
	for (int i = 0; i < n_cp; i++)
		if (CP[i].errors == errors && CP[i].trials == trials && fabs(CP[i].alpha - alpha) < 1e-12)
			return CP[i].upper;
	return NAN;
}

/*
 * The rule without its bound: the loosest candidate whose sample estimates
 * of precision and recall meet the targets, no fixed sequence.  How many of
 * N_SEEDS samples then meet the targets over all rows.
 */
static int
point_estimate_seeds(const char *name, const double *small, const bool *truth, int64_t n,
					 const llm_cascade_params *p)
{
	static int64_t work_i[MAX_ROWS],
				sample[MAX_ROWS];
	static double work_d[MAX_ROWS];
	static bool sampled[MAX_ROWS];
	int			ok = 0;

	for (int64_t i = 0; i < n; i++)
		work_d[i] = fmax(small[i], 1 - small[i]);
	qsort(work_d, (size_t) n, sizeof(double), cmp_desc);
	for (uint64_t seed = 1; seed <= N_SEEDS; seed++)
	{
		int64_t		k = llm_cascade_sample_size(n, p),
					tp = 0,
					fp = 0,
					fn = 0;
		double		t = LLM_CASCADE_ALL_LARGE;

		llm_cascade_sample(n, k, seed, work_i, sample);
		memset(sampled, 0, sizeof(sampled));
		for (int64_t s = 0; s < k; s++)
			sampled[sample[s]] = true;
		for (int j = 1; j <= p->n_candidates; j++)
		{
			double		c = candidate(work_d, n, j, p->n_candidates);
			int64_t		stp = 0,
						sfp = 0,
						sfn = 0;

			for (int64_t s = 0; s < k; s++)
			{
				int64_t		i = sample[s];
				bool		ans = fmax(small[i], 1 - small[i]) >= c ? small[i] > 0.5 : truth[i];

				stp += ans && truth[i];
				sfp += ans && !truth[i];
				sfn += !ans && truth[i];
			}
			if (stp > 0 && (double) stp / (double) (stp + sfp) >= p->precision_target &&
				(double) stp / (double) (stp + sfn) >= p->recall_target)
				t = c;
		}
		for (int64_t i = 0; i < n; i++)
		{
			bool		ans = !sampled[i] && fmax(small[i], 1 - small[i]) >= t ? small[i] > 0.5 : truth[i];

			tp += ans && truth[i];
			fp += ans && !truth[i];
			fn += !ans && truth[i];
		}
		ok += (double) tp / (double) (tp + fp) >= p->precision_target &&
			(double) tp / (double) (tp + fn) >= p->recall_target;
	}
	printf("# %s: targets held in %d/%d samples\n", name, ok, N_SEEDS);
	return ok;
}

int
main(void)
{
	static bool truth[MAX_ROWS];
	static int	truth_cls[MAX_ROWS];
	static double small_yes[MAX_ROWS],
				adv[MAX_ROWS],
				adv_cls[MAX_ROWS][N_LABELS],
				easy[MAX_ROWS],
				work_d[MAX_ROWS];
	static int64_t perm[MAX_ROWS],
				work_i[MAX_ROWS],
				sample[MAX_ROWS];
	llm_cascade_params p;
	double		mean_large;
	recall_cover cov;

	llm_cascade_params_defaults(&p);

	/* Clopper-Pearson: 0 of n has the closed form; 5 of 100 at 5% is 0.102253 (bisection over the exact binomial sum in Python integers) */
	CHECK(fabs(llm_cascade_cp_upper(0, 100, 0.05) - (1 - pow(0.05, 0.01))) < 1e-12, "cp_upper(0, 100)");
	CHECK(fabs(llm_cascade_cp_upper(5, 100, 0.05) - 0.1022534) < 1e-6, "cp_upper(5, 100, 0.05) = %.4f",
		  llm_cascade_cp_upper(5, 100, 0.05));
	CHECK(fabs(binom_cdf(5, 100, llm_cascade_cp_upper(5, 100, 0.05)) - 0.05) < 1e-9, "CDF at the bound is alpha");
	CHECK(llm_cascade_cp_upper(3, 0, 0.05) == 1.0, "no trials: bound 1");

	/* sample sizes: 20% with at least 100 rows, none when that is over half the rows */
	CHECK(llm_cascade_sample_size(2000, &p) == 400, "2,000 rows sample 400");
	CHECK(llm_cascade_sample_size(300, &p) == 100, "300 rows sample 100");
	CHECK(llm_cascade_sample_size(199, &p) == 0, "199 rows: too few, all large");

	/* the sample: k distinct ascending indexes, the same for the same seed */
	{
		static int64_t s2[MAX_ROWS];
		bool		fine = true;
		int			same = 1;

		llm_cascade_sample(2000, 400, 42, work_i, sample);
		for (int i = 1; i < 400; i++)
			fine &= sample[i] > sample[i - 1];
		fine &= sample[0] >= 0 && sample[399] < 2000;
		CHECK(fine, "sample indexes distinct, ascending, in range");
		llm_cascade_sample(2000, 400, 42, work_i, s2);
		for (int i = 0; i < 400; i++)
			same &= s2[i] == sample[i];
		CHECK(same, "same seed, same sample");
		llm_cascade_sample(2000, 400, 43, work_i, s2);
		same = 1;
		for (int i = 0; i < 400; i++)
			same &= s2[i] == sample[i];
		CHECK(!same, "another seed, another sample");
	}

	/* too few rows: everything to the large model */
	{
		llm_cascade_decision d;
		double		small[150];
		bool		ly[1] = {false};

		for (int i = 0; i < 150; i++)
			small[i] = 0.01;
		llm_cascade_filter_threshold(small, 150, sample, ly, 0, &p, work_d, &d);
		CHECK(d.outcome == LLM_CASCADE_TOO_FEW_ROWS && d.n_large == 150 && d.n_small == 0,
			  "no sample: all 150 rows to the large model");
	}

	/* Clopper-Pearson against the oracle's exact bounds, edges included */
	if (!load_cp())
		CHECK(0, "%s", CP_PATH);
	else
	{
		int			bad = 0;
		double		worst = 0;

		for (int i = 0; i < n_cp; i++)
		{
			double		e = fabs(llm_cascade_cp_upper(CP[i].errors, CP[i].trials, CP[i].alpha) - CP[i].upper);

			worst = fmax(worst, e);
			if (!(e < 1e-9))
			{
				bad++;
				printf("# cp_upper(%lld, %lld, %g) = %.12f, exact %.12f\n", (long long) CP[i].errors,
					   (long long) CP[i].trials, CP[i].alpha,
					   llm_cascade_cp_upper(CP[i].errors, CP[i].trials, CP[i].alpha), CP[i].upper);
			}
		}
		CHECK(n_cp >= 25 && bad == 0, "cp_upper = the exact bound on all %d golden cases (worst error %.1e)",
			  n_cp, worst);
	}

	/*
	 * Per-label recall on hand-made rows: 8 rows, 0..3 sampled, threshold
	 * 0.8.  Sampled: label 0 rows 0 (kept, right) and 1 (kept, small says 1:
	 * missed); label 1 rows 2 (under the threshold: large, right) and 3
	 * (kept, small says 2: missed); label 2 none.  Unsampled rows 4..7
	 * decide whether a label can be missed at all.
	 */
	{
		double		conf[8] = {0.9, 0.9, 0.7, 0.95, 0.85, 0.9, 0.5, 0.6};
		int			small_l[8] = {0, 1, 1, 2, 0, 2, 1, 1},
					large_l[4] = {0, 0, 1, 1};
		int64_t		smp[4] = {0, 1, 2, 3};
		llm_cascade_decision d = {.threshold = 0.8};
		llm_cascade_label_recall lr[3];
		double		lb = 1 - golden_upper(1, 2, 0.05 / 20);

		/* kept unsampled rows say 0 and 2: every label can be missed; the bound at delta / M = 0.0025 */
		llm_cascade_class_recall(conf, small_l, 8, smp, large_l, 4, &d, &p, 3, lr);
		CHECK(lr[0].rows == 2 && lr[0].missed == 1 && lr[0].estimate == 0.5 &&
			  lr[1].rows == 2 && lr[1].missed == 1 && lr[1].estimate == 0.5 &&
			  lr[2].rows == 0 && lr[2].estimate == -1.0,
			  "per-label recall on the sample: %.2f of %lld, %.2f of %lld, %.2f of %lld",
			  lr[0].estimate, (long long) lr[0].rows, lr[1].estimate, (long long) lr[1].rows,
			  lr[2].estimate, (long long) lr[2].rows);
		CHECK(!lr[0].exact && !lr[1].exact && !lr[2].exact &&
			  fabs(lr[0].lower - lb) < 1e-9 && fabs(lr[1].lower - lb) < 1e-9 && lr[2].lower == 0.0,
			  "1 of 2 missed: lower bound %.6f = 1 - exact CP(1, 2, 0.05 / 20) %.6f; none sampled: 0",
			  lr[0].lower, lb);

		/* only label 1 left to the small model (rows 4, 5 under the threshold): label 1 cannot be missed */
		conf[4] = conf[5] = 0.5;
		conf[7] = 0.99;
		llm_cascade_class_recall(conf, small_l, 8, smp, large_l, 4, &d, &p, 3, lr);
		CHECK(lr[1].exact && lr[1].lower == 1.0 && !lr[0].exact && fabs(lr[0].lower - lb) < 1e-9 &&
			  !lr[2].exact && lr[2].lower == 0.0,
			  "every kept row says label 1: its recall is 1 (bound 1), the others keep their bound");

		/* every row to the large model: every recall is 1 */
		d.threshold = LLM_CASCADE_ALL_LARGE;
		llm_cascade_class_recall(conf, small_l, 8, smp, large_l, 4, &d, &p, 3, lr);
		CHECK(lr[0].exact && lr[1].exact && lr[2].exact && lr[0].lower == 1.0 && lr[2].lower == 1.0 &&
			  lr[0].estimate == 1.0, "no small answer kept: every label exact, bound 1");
	}

	/* the union over the candidates: 3 of 34 missed at delta 0.05 is CP at 0.0025 with 20 candidates, 0.05 with 1 */
	{
		static double conf[40];
		static int	small_l[40],
					large_l[34];
		static int64_t smp[34];
		llm_cascade_decision d = {.threshold = 0.5};
		llm_cascade_params p1 = p;
		llm_cascade_label_recall lr[2];
		double		lb20 = 1 - golden_upper(3, 34, 0.0025),
					lb1 = 1 - golden_upper(3, 34, 0.05);

		for (int i = 0; i < 40; i++)
		{
			conf[i] = 0.9;
			small_l[i] = i < 34 ? (i < 3 ? 1 : 0) : i % 2;
			if (i < 34)
			{
				smp[i] = i;
				large_l[i] = 0;
			}
		}
		llm_cascade_class_recall(conf, small_l, 40, smp, large_l, 34, &d, &p, 2, lr);
		CHECK(lr[0].rows == 34 && lr[0].missed == 3 && fabs(lr[0].lower - lb20) < 1e-9,
			  "3 of 34 missed, 20 candidates: bound %.6f = 1 - CP(3, 34, 0.0025) %.6f", lr[0].lower, lb20);
		p1.n_candidates = 1;
		llm_cascade_class_recall(conf, small_l, 40, smp, large_l, 34, &d, &p1, 2, lr);
		CHECK(fabs(lr[0].lower - lb1) < 1e-9 && lb1 > lb20,
			  "... one candidate: bound %.6f = 1 - CP(3, 34, 0.05) %.6f", lr[0].lower, lb1);
	}

	if (!load_held())
	{
		CHECK(0, "%s: 2,000 rows", HELD_PATH);
		return unit_done();
	}

	for (int64_t i = 0; i < H.n; i++)
	{
		truth_cls[i] = argmax3(H.large_cls[i]);
		truth[i] = truth_cls[i] == 1;
		small_yes[i] = H.small_cls[i][1];

	}
	{
		int64_t		agree = 0,
					cls_n[N_LABELS] = {0};

		for (int64_t i = 0; i < H.n; i++)
		{
			agree += argmax3(H.small_cls[i]) == truth_cls[i];
			cls_n[truth_cls[i]]++;
		}
		printf("# held set: %lld rows; the large model's labels: complaint %lld, praise %lld, question %lld; "
			   "the small model agrees on %lld\n", (long long) H.n, (long long) cls_n[0], (long long) cls_n[1],
			   (long long) cls_n[2], (long long) agree);
	}

	/* held scores, as stored */
	CHECK(filter_seeds("yes/no held", small_yes, truth, H.n, &p, &mean_large) >= 90,
		  "yes/no, held scores: precision and recall >= 0.95 in >= 90 of 100 samples");
	CHECK(classify_seeds("llm_classify held", (const double (*)[N_LABELS]) H.small_cls, truth_cls, H.n, &p,
						 &mean_large, &cov) >= 90,
		  "llm_classify, held scores: accuracy >= 0.95 in >= 90 of 100 samples");
	CHECK(cov.bound_held[0] >= 90 && cov.bound_held[1] >= 90 && cov.bound_held[2] >= 90,
		  "llm_classify, held scores: each label's recall >= its bound in >= 90 of 100 samples (%d %d %d)",
		  cov.bound_held[0], cov.bound_held[1], cov.bound_held[2]);

	/* adversarial: small scores of other rows */
	permutation(H.n, 99, perm);
	for (int64_t i = 0; i < H.n; i++)
	{
		adv[i] = small_yes[perm[i]];
		memcpy(adv_cls[i], H.small_cls[perm[i]], sizeof(adv_cls[i]));
	}
	CHECK(filter_seeds("yes/no adversarial", adv, truth, H.n, &p, &mean_large) >= 90,
		  "yes/no, adversarial: targets hold in >= 90 of 100 samples");
	CHECK(mean_large >= 0.9 * (double) H.n, "yes/no, adversarial: it falls back (%.0f of %lld rows large)",
		  mean_large, (long long) H.n);
	CHECK(classify_seeds("llm_classify adversarial", (const double (*)[N_LABELS]) adv_cls, truth_cls, H.n, &p,
						 &mean_large, &cov) >= 90,
		  "llm_classify, adversarial: accuracy holds in >= 90 of 100 samples");
	CHECK(mean_large >= 0.9 * (double) H.n, "llm_classify, adversarial: it falls back (%.0f of %lld rows large)",
		  mean_large, (long long) H.n);

	/* borderline: the bound keeps the targets, a point estimate does not */
	borderline_small(truth, H.n, easy);
	CHECK(filter_seeds("yes/no borderline", easy, truth, H.n, &p, &mean_large) >= 90,
		  "yes/no, borderline: targets hold in >= 90 of 100 samples");
	CHECK(point_estimate_seeds("yes/no borderline, point estimate", easy, truth, H.n, &p) < 90,
		  "yes/no, borderline: without the bound the targets fail in more than 10 of 100 samples");
	borderline_small_cls(truth_cls, H.n, adv_cls);
	CHECK(classify_seeds("llm_classify borderline", (const double (*)[N_LABELS]) adv_cls, truth_cls, H.n, &p,
						 &mean_large, &cov) >= 90,
		  "llm_classify, borderline: accuracy >= 0.95 in >= 90 of 100 samples");
	CHECK(cov.bound_held[0] >= 90 && cov.bound_held[1] >= 90 && cov.bound_held[2] >= 90 &&
		  cov.not_exact[0] >= 90 && cov.not_exact[1] >= 90 && cov.not_exact[2] >= 90,
		  "llm_classify, borderline: each label's recall >= its bound in >= 90 of 100 samples (%d %d %d)",
		  cov.bound_held[0], cov.bound_held[1], cov.bound_held[2]);
	CHECK(cov.estimate_held[1] < 90 && cov.estimate_held[2] < 90,
		  "llm_classify, borderline: the point estimate in the bound's place fails in more than 10 of 100 (%d %d %d)",
		  cov.estimate_held[0], cov.estimate_held[1], cov.estimate_held[2]);

	/* easy: a small model right where it is confident */
	easy_small(truth, H.n, easy);
	CHECK(filter_seeds("yes/no easy", easy, truth, H.n, &p, &mean_large) >= 90,
		  "yes/no, easy: targets hold in >= 90 of 100 samples");
	CHECK(mean_large <= 0.5 * (double) H.n, "yes/no, easy: at least half the large-model calls saved");

	return unit_done();
}
