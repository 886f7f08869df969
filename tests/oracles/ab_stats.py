#!/usr/bin/env python3
"""Oracle fixtures for tokscope's A/B statistics (crates/tokscope-core/src/stats/ab.rs).

Expected values come from SciPy, statsmodels and mpmath, never from the Rust
code under test. Run from the repository root:

    pip install scipy numpy statsmodels mpmath
    python3 tests/oracles/ab_stats.py

Writes tests/data/oracles/ab_stats.json (read by
crates/tokscope-core/tests/ab_stats_oracle.rs). Non-finite floats are written
as the strings "inf", "-inf" and "nan" (JSON has no literal for them).
Everything is seeded: rerunning gives a byte-identical file for the same
library versions (recorded in "generated_by").
"""

import json
import math
import sys
from pathlib import Path

import mpmath
import numpy as np
import scipy
import statsmodels
from scipy import special, stats
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.proportion import (
    confint_proportions_2indep,
    proportion_confint,
    proportions_ztest,
)

OUT = Path(__file__).resolve().parents[1] / "data" / "oracles"
Z95 = 1.959963984540054
VERSIONS = {
    "python": sys.version.split()[0],
    "numpy": np.__version__,
    "scipy": scipy.__version__,
    "statsmodels": statsmodels.__version__,
    "mpmath": mpmath.__version__,
}


def num(x):
    """A float for JSON: finite values as numbers, the rest as strings."""
    x = float(x)
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def dump(name, obj):
    OUT.mkdir(parents=True, exist_ok=True)
    obj = {"generated_by": VERSIONS, **obj}
    with open(OUT / name, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=1, ensure_ascii=False, allow_nan=False)
        f.write("\n")


# ---------------------------------------------------------------- A/B tests


def proportion_case(name, xa, na, xb, nb):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        wa = proportion_confint(xa, na, alpha=0.05, method="wilson")
        wb = proportion_confint(xb, nb, alpha=0.05, method="wilson")
        nc = confint_proportions_2indep(xa, na, xb, nb, method="newcomb", compare="diff", alpha=0.05)
        z, p = proportions_ztest([xa, xb], [na, nb])
    # Independent re-derivation of the z-test with SciPy's normal SF, so the
    # fixture does not hinge on one library alone.
    pool = (xa + xb) / (na + nb)
    se = math.sqrt(pool * (1 - pool) * (1 / na + 1 / nb))
    if se > 0:
        z2 = (xa / na - xb / nb) / se
        p2 = 2 * stats.norm.sf(abs(z2))
        assert math.isclose(z, z2, rel_tol=1e-12, abs_tol=1e-300), (name, z, z2)
        assert math.isclose(p, p2, rel_tol=1e-12, abs_tol=1e-300), (name, p, p2)
    return {
        "name": name,
        "a": [xa, na],
        "b": [xb, nb],
        "wilson_a": [num(wa[0]), num(wa[1])],
        "wilson_b": [num(wb[0]), num(wb[1])],
        "diff": num(xa / na - xb / nb),
        "newcombe": [num(nc[0]), num(nc[1])],
        "z": num(z),
        "p_value": num(p),
    }


def proportion_cases():
    hand = [
        ("wilson_8_of_10", 8, 10, 5, 10),
        ("newcombe_12_vs_0_of_100", 12, 100, 0, 100),
        ("newcombe_paper_56_70_vs_48_80", 56, 70, 48, 80),
        ("newcombe_paper_9_10_vs_3_10", 9, 10, 3, 10),
        ("newcombe_paper_6_7_vs_2_7", 6, 7, 2, 7),
        ("newcombe_paper_5_56_vs_0_29", 5, 56, 0, 29),
        ("newcombe_paper_0_10_vs_0_20", 0, 10, 0, 20),
        ("newcombe_paper_10_10_vs_0_20", 10, 10, 0, 20),
        ("both_all_success", 7, 7, 3, 3),
        ("one_trial_each_diff", 1, 1, 0, 1),
        ("one_trial_each_same", 1, 1, 1, 1),
        ("tiny_unequal", 1, 2, 2, 5),
        ("equal_rates", 30, 100, 60, 200),
        ("large_n_small_diff", 50_500, 1_000_000, 50_000, 1_000_000),
        ("large_n_huge_diff", 900_000, 1_000_000, 100_000, 1_000_000),
        ("rare_events", 3, 10_000, 11, 10_000),
        ("all_vs_none", 40, 40, 0, 40),
    ]
    cases = [proportion_case(*h) for h in hand]
    rng = np.random.default_rng(20240501)
    for i in range(16):
        na = int(rng.integers(1, 400))
        nb = int(rng.integers(1, 400))
        xa = int(rng.integers(0, na + 1))
        xb = int(rng.integers(0, nb + 1))
        cases.append(proportion_case(f"random_{i}", xa, na, xb, nb))
    # Pooled proportion 0 or 1: statsmodels returns NaN (0/0); documented
    # as the crate's behaviour too.
    for name, xa, na, xb, nb in [("both_zero", 0, 10, 0, 15), ("both_one", 4, 4, 9, 9)]:
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            z, p = proportions_ztest([xa, xb], [na, nb])
        assert math.isnan(z) and math.isnan(p)
    return cases


def mwu_case(name, x, y):
    x = [float(v) for v in x]
    y = [float(v) for v in y]
    res = stats.mannwhitneyu(x, y, alternative="two-sided", method="asymptotic", use_continuity=True)
    return {"name": name, "x": x, "y": y, "u": num(res.statistic), "p_value": num(res.pvalue)}


def mwu_cases():
    hand = [
        ("textbook_no_ties", [19, 22, 16, 29, 24], [20, 11, 17, 12]),
        ("one_vs_one_different", [1], [2]),
        ("one_vs_one_equal", [3], [3]),
        ("one_vs_three", [5], [1, 2, 3]),
        ("all_equal", [4, 4, 4], [4, 4, 4, 4]),
        ("all_equal_single", [7], [7, 7]),
        ("complete_separation", [1, 2, 3, 4, 5, 6], [7, 8, 9, 10, 11, 12]),
        ("heavy_ties", [1, 1, 1, 2, 2, 3], [1, 2, 2, 2, 3, 3, 3]),
        ("two_values_only", [0, 0, 0, 1], [0, 1, 1, 1, 1]),
        ("identical_samples", [1, 2, 3, 4], [1, 2, 3, 4]),
        ("negative_and_fractional", [-1.5, -0.25, 0.0, 2.75], [-3.0, -0.25, 0.5]),
        ("far_tail_separation", list(range(60)), list(range(100, 160))),
        ("very_far_tail_separation", list(range(400)), list(range(1000, 1400))),
    ]
    cases = [mwu_case(*h) for h in hand]
    rng = np.random.default_rng(7)
    for i in range(10):
        nx = int(rng.integers(2, 40))
        ny = int(rng.integers(2, 40))
        x = rng.integers(0, 6, nx)  # small support: many ties
        y = rng.integers(0, 7, ny)
        cases.append(mwu_case(f"random_ties_{i}", x.tolist(), y.tolist()))
    for i in range(8):
        nx = int(rng.integers(1, 200))
        ny = int(rng.integers(1, 200))
        x = np.round(rng.lognormal(3.0, 0.5, nx), 3)  # latency-like, rounded
        y = np.round(rng.lognormal(3.1, 0.5, ny), 3)
        cases.append(mwu_case(f"random_latency_{i}", x.tolist(), y.tolist()))
    x = rng.normal(0.0, 1.0, 500)
    y = rng.normal(0.3, 1.0, 300)
    cases.append(mwu_case("large_shifted", x.tolist(), y.tolist()))
    return cases


def holm_cases():
    raw = [
        ("textbook", [0.01, 0.04, 0.03, 0.005]),
        ("single", [0.2]),
        ("single_tiny", [1e-300]),
        ("ties", [0.02, 0.02, 0.02, 0.5]),
        ("capped_at_one", [0.4, 0.6, 0.9]),
        ("monotone_enforced", [0.001, 0.0105, 0.011, 0.5, 0.04]),
        ("with_missing", [0.03, None, 0.01, float("nan"), 0.2]),
        ("all_missing", [None, float("nan")]),
        ("empty", []),
        ("zeros_and_ones", [0.0, 1.0, 0.0, 0.5]),
    ]
    rng = np.random.default_rng(99)
    for i in range(4):
        m = int(rng.integers(2, 30))
        p = rng.uniform(0, 0.2, m) ** 2
        raw.append((f"random_{i}", p.tolist()))
    cases = []
    for name, p in raw:
        valid = [i for i, v in enumerate(p) if v is not None and not math.isnan(v)]
        adjusted = [None] * len(p)
        if valid:
            adj = multipletests([p[i] for i in valid], method="holm")[1]
            for i, v in zip(valid, adj):
                adjusted[i] = float(v)
        cases.append({
            "name": name,
            "p": [None if v is None else num(v) for v in p],
            "adjusted": adjusted,
        })
    return cases


def normal_cases():
    mpmath.mp.dps = 60
    zs = [0.0, 1e-300, 1e-10, 0.1, -0.1, 0.5, 0.6744897501960817, 0.67448975, 0.7, 1.0, -1.0,
          1.2815515655446004, 1.6448536269514722, 1.959963984540054, -1.959963984540054, 2.5,
          3.0, 4.0, 5.0, 5.656854249492381, 5.7, -5.7, 6.0, 7.5, 8.0, 8.3, 10.0, 12.5, 15.0,
          20.0, 25.0, 30.0, 35.0, 37.0, 37.5, 38.0, 38.5, 40.0, -40.0, 1e10]
    out = []
    for z in zs:
        truth_sf = mpmath.ncdf(-mpmath.mpf(z))
        truth_cdf = mpmath.ncdf(mpmath.mpf(z))
        out.append({
            "z": z,
            "scipy_sf": num(special.ndtr(-z)),
            "scipy_cdf": num(special.ndtr(z)),
            "mpmath_sf": num(float(truth_sf)),
            "mpmath_cdf": num(float(truth_cdf)),
        })
    return out


def bootstrap_cases():
    rng = np.random.default_rng(314)
    cases = []
    n_resamples = 50_000

    # Every comparison reports arm B against arm A: B - A, and B / A for the cost ratio.
    def median_diff(x, y, axis):
        return np.median(y, axis=axis) - np.median(x, axis=axis)

    medians = [
        ("latency_odd", rng.lognormal(5.0, 0.4, 201), rng.lognormal(5.1, 0.4, 151)),
        ("latency_even", rng.lognormal(4.0, 0.6, 120), rng.lognormal(4.0, 0.6, 180)),
        ("normal_unequal", rng.normal(100, 15, 90), rng.normal(92, 25, 300)),
    ]
    for name, a, b in medians:
        a = np.round(a, 4)
        b = np.round(b, 4)
        res = stats.bootstrap((a, b), median_diff, n_resamples=n_resamples, method="percentile",
                              confidence_level=0.95, vectorized=True, rng=np.random.default_rng(1))
        cases.append({
            "kind": "median_difference",
            "name": name,
            "a": a.tolist(),
            "b": b.tolist(),
            "estimate": num(np.median(b) - np.median(a)),
            "scipy_lo": num(res.confidence_interval.low),
            "scipy_hi": num(res.confidence_interval.high),
            "scipy_resamples": n_resamples,
        })

    ratios = [
        ("cost_similar", 150, 170, 2.5e-6, 2.6e-6),
        ("cost_cheaper_b", 220, 90, 3.0e-6, 1.5e-6),
        ("cost_small_arms", 25, 30, 1.0e-6, 1.2e-6),
    ]
    for name, na, nb, rate_a, rate_b in ratios:
        tok_a = rng.integers(50, 4000, na).astype(float)
        tok_b = rng.integers(50, 4000, nb).astype(float)
        # Per-request cost with noise around the arm's rate (mix of input and output prices).
        cost_a = np.round(tok_a * rate_a * rng.uniform(0.5, 1.5, na), 10)
        cost_b = np.round(tok_b * rate_b * rng.uniform(0.5, 1.5, nb), 10)

        def ratio(ia, ib, axis, tok_a=tok_a, tok_b=tok_b, cost_a=cost_a, cost_b=cost_b):
            ia = ia.astype(int)
            ib = ib.astype(int)
            per_1k_a = 1000 * cost_a[ia].sum(axis=axis) / tok_a[ia].sum(axis=axis)
            per_1k_b = 1000 * cost_b[ib].sum(axis=axis) / tok_b[ib].sum(axis=axis)
            return per_1k_b / per_1k_a

        res = stats.bootstrap((np.arange(na), np.arange(nb)), ratio, n_resamples=n_resamples,
                              method="percentile", confidence_level=0.95, vectorized=True,
                              rng=np.random.default_rng(2))
        estimate = (1000 * cost_b.sum() / tok_b.sum()) / (1000 * cost_a.sum() / tok_a.sum())
        cases.append({
            "kind": "cost_ratio",
            "name": name,
            "a_tokens": tok_a.astype(int).tolist(),
            "a_cost_usd": cost_a.tolist(),
            "b_tokens": tok_b.astype(int).tolist(),
            "b_cost_usd": cost_b.tolist(),
            "estimate": num(estimate),
            "scipy_lo": num(res.confidence_interval.low),
            "scipy_hi": num(res.confidence_interval.high),
            "scipy_resamples": n_resamples,
        })

    # P95 (type 7, numpy's "linear") and sample standard deviations (ddof=1) of two arms.
    rng = np.random.default_rng(271)

    def p95_diff(x, y, axis):
        return np.quantile(y, 0.95, axis=axis, method="linear") - np.quantile(x, 0.95, axis=axis, method="linear")

    def std_diff(x, y, axis):
        return np.std(y, ddof=1, axis=axis) - np.std(x, ddof=1, axis=axis)

    for kind, statistic, samples in [
        ("quantile_difference", p95_diff, [
            ("latency_p95", rng.lognormal(6.0, 0.5, 400), rng.lognormal(6.1, 0.5, 350)),
            ("ttft_p95_small", rng.lognormal(4.0, 0.8, 60), rng.lognormal(4.2, 0.8, 45)),
        ]),
        ("std_dev_difference", std_diff, [
            ("tail_jitter", rng.normal(800, 60, 250), rng.normal(820, 90, 300)),
            ("tail_jitter_skewed", rng.lognormal(5.0, 0.6, 150), rng.lognormal(5.0, 0.4, 180)),
        ]),
    ]:
        for name, a, b in samples:
            a = np.round(a, 4)
            b = np.round(b, 4)
            res = stats.bootstrap((a, b), statistic, n_resamples=n_resamples, method="percentile",
                                  confidence_level=0.95, vectorized=True, rng=np.random.default_rng(4))
            cases.append({
                "kind": kind,
                "name": name,
                "a": a.tolist(),
                "b": b.tolist(),
                "estimate": num(statistic(a, b, axis=-1)),
                "scipy_lo": num(res.confidence_interval.low),
                "scipy_hi": num(res.confidence_interval.high),
                "scipy_resamples": n_resamples,
            })
    return cases


def sample_ratio_cases():
    # Pearson's chi-square of the arm sizes against the intended split (SciPy's
    # chisquare), and the Wilson interval of arm B's share (statsmodels).
    out = []
    for name, na, nb, share_b in [
        ("even_split_held", 5_012, 4_988, 0.5),
        ("even_split_broken", 5_200, 4_800, 0.5),
        ("ten_percent_treatment", 9_000, 1_000, 0.1),
        ("ten_percent_short", 9_100, 900, 0.1),
        ("small", 7, 3, 0.5),
        ("one_arm_empty", 40, 0, 0.5),
        ("huge_mismatch", 1_000_000, 900_000, 0.5),
    ]:
        n = na + nb
        chi2, p = stats.chisquare([na, nb], f_exp=[n * (1 - share_b), n * share_b])
        lo, hi = proportion_confint(nb, n, alpha=0.05, method="wilson")
        out.append({"name": name, "n_a": na, "n_b": nb, "share_b": share_b, "chi_square": num(chi2),
                    "p_value": num(p), "wilson": [num(lo), num(hi)]})
    return out


def median_cases():
    # numpy's median (mean of the two middle values) equals the type-7
    # 0.5-quantile up to one rounding; the fixture holds both to show it.
    rng = np.random.default_rng(5)
    out = []
    for values in [[3.0], [1.0, 2.0], [5.0, 1.0, 3.0], [4.0, 1.0, 3.0, 2.0], [2.0, 2.0, 2.0],
                   [-1.5, 10.25, 0.125, 7.0, 7.0, 3.5]]:
        out.append({"values": values, "median": float(np.median(values)),
                    "quantile_type7": float(np.quantile(values, 0.5, method="linear"))})
    for _ in range(6):
        v = np.round(rng.normal(0, 100, int(rng.integers(1, 60))), 3).tolist()
        out.append({"values": v, "median": float(np.median(v)),
                    "quantile_type7": float(np.quantile(v, 0.5, method="linear"))})
    return out


# Arms too large to store: the fixture holds the formula, which the Rust test
# evaluates with the same integer arithmetic and the same float operations in
# the same order, so both sides see identical values.
def formula_arm(n, offset, rate):
    i = np.arange(n, dtype=np.int64)
    tokens = 50 + (i * 7919 + offset) % 3950
    factor = 0.5 + ((i * 104729 + offset) % 1000) / 1000.0
    cost = tokens.astype(float) * rate * factor
    return tokens, cost


def large_cost_ratio_cases():
    cases = []
    for name, na, nb, off_a, off_b, rate_a, rate_b, resamples in [
        ("cost_large_arms", 30_000, 25_000, 11, 5_003, 2.0e-6, 2.1e-6, 10_000),
    ]:
        tok_a, cost_a = formula_arm(na, off_a, rate_a)
        tok_b, cost_b = formula_arm(nb, off_b, rate_b)

        def ratio(ia, ib, axis):
            ia = ia.astype(int)
            ib = ib.astype(int)
            per_1k_a = 1000 * cost_a[ia].sum(axis=axis) / tok_a[ia].sum(axis=axis)
            per_1k_b = 1000 * cost_b[ib].sum(axis=axis) / tok_b[ib].sum(axis=axis)
            return per_1k_b / per_1k_a

        res = stats.bootstrap((np.arange(na), np.arange(nb)), ratio, n_resamples=resamples,
                              method="percentile", confidence_level=0.95, vectorized=True,
                              batch=250, rng=np.random.default_rng(3))
        estimate = (1000 * cost_b.sum() / tok_b.sum()) / (1000 * cost_a.sum() / tok_a.sum())
        cases.append({
            "name": name,
            "arm_formula": "tokens_i = 50 + (i * 7919 + offset) % 3950; "
                           "cost_i = tokens_i * rate * (0.5 + ((i * 104729 + offset) % 1000) / 1000)",
            "a": {"n": na, "offset": off_a, "rate": rate_a},
            "b": {"n": nb, "offset": off_b, "rate": rate_b},
            "estimate": num(estimate),
            "scipy_lo": num(res.confidence_interval.low),
            "scipy_hi": num(res.confidence_interval.high),
            "scipy_resamples": resamples,
        })
    return cases


def large_std_dev_cases():
    # Arms above EXACT_RESAMPLING_MAX: the values are the formula arm's costs
    # (in microdollars, so they read like milliseconds); SciPy resamples value by value.
    cases = []
    for name, na, nb, off_a, off_b, rate_a, rate_b, resamples in [
        ("std_dev_large_arms", 30_000, 25_000, 11, 5_003, 0.5, 0.55, 10_000),
    ]:
        _, a = formula_arm(na, off_a, rate_a)
        _, b = formula_arm(nb, off_b, rate_b)

        def std_diff(x, y, axis):
            return np.std(y, ddof=1, axis=axis) - np.std(x, ddof=1, axis=axis)

        res = stats.bootstrap((a, b), std_diff, n_resamples=resamples, method="percentile",
                              confidence_level=0.95, vectorized=True, batch=250,
                              rng=np.random.default_rng(6))
        cases.append({
            "name": name,
            "arm_formula": "values_i = tokens_i * rate * (0.5 + ((i * 104729 + offset) % 1000) / 1000), "
                           "tokens_i = 50 + (i * 7919 + offset) % 3950",
            "a": {"n": na, "offset": off_a, "rate": rate_a},
            "b": {"n": nb, "offset": off_b, "rate": rate_b},
            "estimate": num(std_diff(a, b, axis=-1)),
            "scipy_lo": num(res.confidence_interval.low),
            "scipy_hi": num(res.confidence_interval.high),
            "scipy_resamples": resamples,
        })
    return cases


def main():
    ab = {
        "proportions": proportion_cases(),
        "mann_whitney": mwu_cases(),
        "holm": holm_cases(),
        "normal": normal_cases(),
        "bootstrap": bootstrap_cases(),
        "bootstrap_large": large_cost_ratio_cases(),
        "std_dev_large": large_std_dev_cases(),
        "sample_ratio": sample_ratio_cases(),
        "median": median_cases(),
    }
    dump("ab_stats.json", ab)
    n_ab = sum(len(ab[k]) for k in ("proportions", "mann_whitney", "holm", "bootstrap", "bootstrap_large",
                                     "std_dev_large", "sample_ratio"))
    print(f"ab_stats.json: {n_ab} A/B cases (+{len(ab['normal'])} normal, {len(ab['median'])} median)")


if __name__ == "__main__":
    main()
