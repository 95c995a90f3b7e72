#!/usr/bin/env python3
"""Golden one-sided Clopper-Pearson bounds for the model cascade's statistics.

    python3 scripts/oracle/cascade_cp_bounds.py > test/golden/cascade/cp_bounds.csv

pg/batch/cascade_stats.c's llm_cascade_cp_upper(errors, trials, alpha) is the
p at which P(Bin(trials, p) <= errors) = alpha, i.e. the (1 - alpha) quantile
of Beta(errors + 1, trials - errors); 1 when errors >= trials or trials == 0.
A recall's lower bound is 1 - that (test_cascade_stats.c reads this file).

Computed here by bisection on mpmath's regularized incomplete beta at 40
digits (130 halvings), and cross-checked against scipy.stats.beta.ppf where
scipy is installed (the two must agree to 1e-10).  Needs the PyPI package
mpmath (scipy optional); never run by the tests.

Cases: the edges (no errors, all errors, no trials, one trial, five trials),
the alphas the node uses (delta 0.05 and 0.2, alone and over the 20
candidate thresholds: 0.0025, 0.01), the sample sizes of the held set (400
rows, about 130 of a label) and a large one (10,000).
Each line: errors,trials,alpha,upper (%.17g).
"""
import mpmath as mp

mp.mp.dps = 40

CASES = [
    (0, 0, 0.05), (3, 0, 0.05),
    (0, 1, 0.05), (1, 1, 0.05), (0, 1, 0.0025),
    (0, 2, 0.0025), (1, 2, 0.0025), (2, 2, 0.0025),
    (0, 4, 0.01), (1, 4, 0.01),
    (0, 5, 0.05), (1, 5, 0.05), (2, 5, 0.05), (4, 5, 0.05), (5, 5, 0.05),
    (0, 5, 0.0025), (2, 5, 0.0025),
    (3, 34, 0.05), (3, 34, 0.0025),
    (5, 100, 0.05), (0, 100, 0.0025), (50, 100, 0.5),
    (9, 130, 0.05), (9, 130, 0.0025),
    (12, 400, 0.05), (12, 400, 0.0025), (399, 400, 0.0025),
    (500, 10000, 0.05), (25, 10000, 0.0025),
]


def upper(x, n, alpha):
    if n <= 0 or x >= n:
        return mp.mpf(1)
    alpha = mp.mpf(alpha)
    lo, hi = mp.mpf(x) / n, mp.mpf(1)
    for _ in range(130):
        mid = (lo + hi) / 2
        # P(Bin(n, p) <= x) = 1 - I_p(x + 1, n - x)
        if 1 - mp.betainc(x + 1, n - x, 0, mid, regularized=True) > alpha:
            lo = mid
        else:
            hi = mid
    return hi


def main():
    try:
        from scipy.stats import beta
    except ImportError:
        beta = None
    print("errors,trials,alpha,upper")
    for x, n, a in CASES:
        u = upper(x, n, a)
        if beta is not None and 0 < n and x < n:
            s = beta.ppf(1 - a, x + 1, n - x)
            assert abs(float(u) - s) < 1e-10, (x, n, a, float(u), s)
        print("%d,%d,%s,%.17g" % (x, n, repr(a), float(u)))


if __name__ == "__main__":
    main()
