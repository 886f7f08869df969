"""SciPy's percentile bootstrap as the reference for the 95% intervals of the
`ab` and `mediation` jobs (definitions: docs/metrics.md, "ab" and "Mediation").
Imported by the Python oracles of tests/query/ab.rs and tests/model/mediation.rs.

A job draws its own seeded resamples, so its endpoints cannot equal SciPy's: both
are Monte Carlo estimates of the same quantiles of one bootstrap distribution G
(every resample of each arm drawn value by value, with replacement). The job's
endpoint at level p (0.025, 0.975) is the type-7 p-quantile of its R resample
statistics, so its level in G, G(endpoint), varies around p with standard
deviation sqrt(p (1 - p) / R); SciPy's empirical CDF G_s of S resamples estimates
G at any point with standard deviation sqrt(G (1 - G) / S). For a correct
endpoint, then, G_s(endpoint) - p is about N(0, sigma^2) with
sigma^2 = p (1 - p) (1/R + 1/S), whatever G's shape, and `check_interval` accepts
it within K = 5 sigma: a false alarm once in 1.7 million endpoints (both sides are
seeded, so a run that passes passes every time). Measuring in levels rather than
values keeps the tolerance right for lumpy distributions (the mean of two values
has three atoms): an endpoint on an atom passes when the atom's jump
[G_s(x-), G_s(x)] comes within K sigma of p. An endpoint taken at another level
fails once the levels differ by more than K sigma: 0.011 for R = S = 10,000, so
the 5% point given for the 2.5% point fails.
"""

import math

import numpy as np
from scipy import stats

K = 5.0
LEVELS = (0.025, 0.975)


def distribution(samples, statistic, resamples, seed):
    """SciPy's sorted bootstrap distribution of `statistic` over independent
    resamples of each sample (`scipy.stats.bootstrap`, method='percentile')."""
    samples = tuple(np.asarray(s, dtype=float) for s in samples)
    # Resample in batches of about 2 million values, so memory stays small.
    batch = max(1, 2_000_000 // sum(len(s) for s in samples))
    res = stats.bootstrap(samples, statistic, n_resamples=resamples, method="percentile",
                          confidence_level=0.95, vectorized=True, batch=batch,
                          rng=np.random.default_rng(seed))
    dist = np.sort(res.bootstrap_distribution)
    # The percentile interval is these quantiles of the distribution (SciPy's own endpoints).
    lo, hi = np.quantile(dist, LEVELS)
    assert math.isclose(lo, res.confidence_interval.low, rel_tol=1e-9, abs_tol=1e-12)
    assert math.isclose(hi, res.confidence_interval.high, rel_tol=1e-9, abs_tol=1e-12)
    return dist


def check_interval(what, ours, dist, resamples):
    """Asserts that the job's interval `ours` = (lo, hi), from `resamples` resamples,
    holds SciPy's 2.5% and 97.5% points of `dist` within K sigma (module doc).
    Returns the larger of the two distances in sigmas."""
    n = len(dist)
    # Rounding apart (a median's midpoint, a mean's sum in another order), the job's
    # endpoint on an atom is that atom.
    eps = 1e-9 * max(abs(dist[0]), abs(dist[-1]), 1e-300)
    worst = 0.0
    for level, x in zip(LEVELS, ours):
        assert x is not None and math.isfinite(x), (what, ours)
        below = np.searchsorted(dist, x - eps, side="left") / n
        upto = np.searchsorted(dist, x + eps, side="right") / n
        sigma = math.sqrt(level * (1 - level) * (1 / resamples + 1 / n))
        off = max(below - level, level - upto, 0.0) / sigma
        assert off <= K, (
            f"{what}: endpoint {x} sits at levels [{below}, {upto}] of SciPy's bootstrap "
            f"distribution, {off:.1f} sigma from {level} (interval {ours}, SciPy's "
            f"{tuple(np.quantile(dist, LEVELS))})"
        )
        worst = max(worst, off)
    return worst


def check(what, ours, samples, statistic, resamples, scipy_resamples, seed):
    """`distribution` then `check_interval`."""
    return check_interval(what, ours, distribution(samples, statistic, scipy_resamples, seed), resamples)


# The statistics of docs/metrics.md, as SciPy's vectorized `statistic(*samples, axis)`;
# every two-arm statistic is arm B's against arm A's.


def quantile_difference(p):
    """B's type-7 p-quantile minus A's (numpy's 'linear')."""
    def statistic(a, b, axis):
        return np.quantile(b, p, axis=axis, method="linear") - np.quantile(a, p, axis=axis, method="linear")
    return statistic


def std_dev_difference(a, b, axis):
    """B's sample standard deviation (n - 1) minus A's."""
    return np.std(b, ddof=1, axis=axis) - np.std(a, ddof=1, axis=axis)


def mean(x, axis):
    return np.mean(x, axis=axis)


def cost_ratio(cost_a, tokens_a, cost_b, tokens_b):
    """`check`'s samples and statistic for the ratio B / A of the arms'
    `1000 * sum(cost) / sum(tokens)`, resampling whole requests: SciPy resamples
    each arm's request indices."""
    cost_a, tokens_a, cost_b, tokens_b = (np.asarray(v, dtype=float) for v in (cost_a, tokens_a, cost_b, tokens_b))

    def statistic(ia, ib, axis):
        ia, ib = ia.astype(int), ib.astype(int)
        per_1k_a = 1000 * cost_a[ia].sum(axis=axis) / tokens_a[ia].sum(axis=axis)
        per_1k_b = 1000 * cost_b[ib].sum(axis=axis) / tokens_b[ib].sum(axis=axis)
        return per_1k_b / per_1k_a

    return (np.arange(len(cost_a)), np.arange(len(cost_b))), statistic
