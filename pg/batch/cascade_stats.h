/*
 * cascade_stats.h — the threshold of a model cascade (docs/CASCADES.md).
 *
 * PostgreSQL-free (plain C, libm): the LLM Batch node calls it once per
 * statement, the unit test test_cascade_stats over stored scores.  No
 * allocation except where stated; no global state; thread-safe.
 *
 * A cascade answers n rows of one call (llm_filter or llm_classify) with a
 * small and a large model.  The small model scores every row; its
 * confidence conf[i] is max(p, 1 - p) for a yes/no answer (p = the
 * probability of yes, llm_filter's softmax over Yes/yes/No/no) and the
 * largest label probability for a classification.  A uniform random sample
 * of k rows (llm_cascade_sample, seeded) also goes to the large model.
 * From the sample, llm_cascade_filter_threshold / _classify_threshold learn
 * a threshold t: every row with conf >= t keeps the small model's answer,
 * every other row (and every sampled row) takes the large model's.
 *
 * Guarantee (taken against the large model's answers over the n rows, as in
 * SUPG and BARGAIN): with probability at least 1 - delta over the sample,
 *   llm_filter:   precision >= precision_target and recall >= recall_target
 *   llm_classify: accuracy  >= accuracy_target
 * of the cascade's answers.  How: candidate thresholds t_1 > t_2 > ... >
 * t_M (the confidences at which the 1/M, 2/M, ... most confident rows are
 * kept), fixed before the sample's answers are seen, are tested in that
 * order (fixed-sequence testing, family-wise error <= delta); at t_j the
 * null "a target fails" is rejected when one-sided Clopper-Pearson bounds
 * at delta/2 (filter: the miss rate among the sample's positives, the
 * false-yes rate among the sample's rows the cascade answers yes; classify:
 * the error rate among the sample, at delta) meet the targets.  The first
 * candidate not rejected stops the sequence; t is the last rejected one, or
 * LLM_CASCADE_ALL_LARGE (every row to the large model) when none is.  A
 * target that cannot fail at t_j (no kept row answers no, so nothing is
 * missed; no kept row answers yes, so nothing is a false yes) needs no
 * sample rows.  Answering sampled rows with the large model only removes
 * errors, so the bound holds for the cascade as run.  Binomial bounds on a
 * sample drawn without replacement are conservative.  llm_classify's
 * per-label recall is reported, not targeted, with a lower bound at
 * 1 - delta per label (llm_cascade_class_recall).
 */
#ifndef LLM_CASCADE_STATS_H
#define LLM_CASCADE_STATS_H

#include <stdbool.h>
#include <stdint.h>

/* A threshold above every confidence: all rows to the large model. */
#define LLM_CASCADE_ALL_LARGE	2.0

typedef struct llm_cascade_params
{
	double		precision_target;	/* llm_filter, in (0, 1]; default 0.95 */
	double		recall_target;	/* llm_filter, in (0, 1]; default 0.95 */
	double		accuracy_target;	/* llm_classify, in (0, 1]; default 0.95 */
	double		delta;			/* failure probability, in (0, 1); default 0.05 */
	double		sample_fraction;	/* of the rows, in (0, 1]; default 0.2 */
	int			min_sample;		/* at least this many sampled rows; default 100 */
	int			n_candidates;	/* M, candidate thresholds; default 20 */
	uint64_t	seed;			/* the sample's seed */
} llm_cascade_params;

/* Why the threshold is what it is */
typedef enum llm_cascade_outcome
{
	LLM_CASCADE_LEARNT,			/* t from the sample (may still be ALL_LARGE) */
	LLM_CASCADE_TOO_FEW_ROWS	/* the sample would be over half the rows: all large */
} llm_cascade_outcome;

typedef struct llm_cascade_decision
{
	llm_cascade_outcome outcome;
	double		threshold;		/* conf >= threshold keeps the small answer */
	int			level;			/* candidates rejected (0..M): kept fraction ~ level/M */
	int64_t		n_small;		/* rows (not sampled) answered by the small model */
	int64_t		n_large;		/* rows answered by the large model, sample included */
	double		bound[2];		/* at the threshold: filter {precision, recall} lower
								 * bounds; classify {accuracy lower bound, 0} */
} llm_cascade_decision;

void		llm_cascade_params_defaults(llm_cascade_params *p);

/*
 * The sample size for n rows: max(min_sample, ceil(sample_fraction * n)),
 * or 0 when that is over n / 2 (too few rows: all to the large model).
 */
int64_t		llm_cascade_sample_size(int64_t n, const llm_cascade_params *p);

/*
 * k distinct row indexes of [0, n), uniformly drawn with seed (partial
 * Fisher-Yates over splitmix64), ascending, into out[0..k).  work: n
 * int64_t of scratch.  The same (n, k, seed) gives the same sample on every
 * platform.
 */
void		llm_cascade_sample(int64_t n, int64_t k, uint64_t seed, int64_t *work, int64_t *out);

/*
 * One-sided Clopper-Pearson upper bound on a binomial rate: the p at which
 * P(Bin(trials, p) <= errors) = alpha; 1 when trials == 0.
 */
double		llm_cascade_cp_upper(int64_t errors, int64_t trials, double alpha);

/*
 * llm_filter: p_small[0..n) the small model's probability of yes;
 * sample[0..k) ascending row indexes (llm_cascade_sample), large_yes[0..k)
 * the large model's answers on them.  Fills *d; work: n doubles of scratch.
 */
void		llm_cascade_filter_threshold(const double *p_small, int64_t n,
										 const int64_t *sample, const bool *large_yes, int64_t k,
										 const llm_cascade_params *p, double *work,
										 llm_cascade_decision *d);

/*
 * llm_classify: conf[0..n) the small model's largest label probability,
 * small_label[0..n) its label index; large_label[0..k) the large model's
 * labels on the sample.  Fills *d; work: n doubles of scratch.
 */
void		llm_cascade_classify_threshold(const double *conf, const int *small_label, int64_t n,
										   const int64_t *sample, const int *large_label, int64_t k,
										   const llm_cascade_params *p, double *work,
										   llm_cascade_decision *d);

/* llm_classify: one label's recall under a decision (llm_cascade_class_recall) */
typedef struct llm_cascade_label_recall
{
	int64_t		rows;			/* sampled rows the large model gives the label */
	int64_t		missed;			/* of them, those d's rule labels otherwise */
	double		estimate;		/* (rows - missed) / rows; -1 when rows == 0 */
	double		lower;			/* the lower confidence bound below, in [0, 1] */
	bool		exact;			/* no row d leaves to the small model can miss the
								 * label: lower = 1, the recall is 1 */
} llm_cascade_label_recall;

/*
 * llm_classify's per-label recall under d (what EXPLAIN ANALYZE reports).
 * conf[0..n), small_label[0..n) as for _classify_threshold; sample[0..k)
 * its rows, large_label[0..k) the large model's labels on them (out of
 * [0, n_labels), e.g. -1 for a failed call: left out).  For each label c
 * of 0..n_labels-1, out[c]:
 *
 *   estimate  the share of the sampled rows the large model labels c that
 *             d's rule labels c too (the small model's label where
 *             conf >= d->threshold, else the large model's);
 *   lower     a bound with P(R_c >= lower) >= 1 - p->delta over the
 *             sample, where R_c is the recall of c of the statement's
 *             answers: among the n rows the large model would label c, the
 *             share the cascade as run (sampled rows answered by the large
 *             model) labels c.
 *
 * lower is 1 when no unsampled row with conf >= d->threshold has a small
 * label other than c (then R_c = 1, no sample needed); else the
 * one-sided Clopper-Pearson bound 1 - llm_cascade_cp_upper(missed, rows,
 * p->delta / p->n_candidates).  Why that holds at the learnt threshold:
 * R_c is at least the rule's recall over all n rows (the sample's rows are
 * answered by the large model, which only removes misses); the threshold
 * is one of the M candidates, fixed before the sample's answers are seen,
 * and chosen with the sample, so the bound is taken at delta / M for each
 * candidate and holds for all M at once (union bound); given rows, the
 * sampled rows labelled c are a uniform sample of the rows labelled c (the
 * sample is uniform), and the binomial bound is conservative for a sample
 * drawn without replacement.  Each label's statement holds at 1 - delta;
 * all n_labels at once at 1 - n_labels * delta.
 */
void		llm_cascade_class_recall(const double *conf, const int *small_label, int64_t n,
									 const int64_t *sample, const int *large_label, int64_t k,
									 const llm_cascade_decision *d, const llm_cascade_params *p,
									 int n_labels, llm_cascade_label_recall *out);

/* Whether row i (conf) keeps the small model's answer under d (not for sampled rows). */
static inline bool
llm_cascade_keeps_small(const llm_cascade_decision *d, double conf)
{
	return conf >= d->threshold;
}

#endif							/* LLM_CASCADE_STATS_H */
