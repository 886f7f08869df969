//! `stats::ab` against SciPy, statsmodels and mpmath: the values in
//! `tests/data/oracles/ab_stats.json`, written by `tests/oracles/ab_stats.py`
//! (library versions recorded in the file). Tolerances are stated per test.

use serde_json::Value;
use tokscope_core::stats::ab::{
    bootstrap_cost_ratio, bootstrap_median_difference, compare_medians, compare_quantiles, compare_std_devs,
    holm_adjust, mann_whitney_u, median, newcombe_difference_interval, normal_cdf, normal_sf, sample_ratio_test,
    two_proportion_z_test, BootstrapConfig, Proportion, RequestCost,
};

fn cases(section: &str) -> Vec<Value> {
    let all: Value =
        serde_json::from_str(include_str!("../../../tests/data/oracles/ab_stats.json")).expect("fixture is valid JSON");
    all[section].as_array().expect("section").clone()
}

/// A float as the fixture writes it: a number, or "inf" / "-inf" / "nan"; null reads as NaN.
fn num(v: &Value) -> f64 {
    match v {
        Value::Number(n) => n.as_f64().expect("number fits f64"),
        Value::String(s) if s == "inf" => f64::INFINITY,
        Value::String(s) if s == "-inf" => f64::NEG_INFINITY,
        Value::String(s) if s == "nan" => f64::NAN,
        Value::Null => f64::NAN,
        other => panic!("not a float: {other}"),
    }
}

fn nums(v: &Value) -> Vec<f64> {
    v.as_array().expect("array").iter().map(num).collect()
}

fn int(v: &Value) -> u64 {
    v.as_u64().expect("non-negative integer")
}

fn name(c: &Value) -> &str {
    c["name"].as_str().unwrap_or("?")
}

/// `|actual - expected| <= abs + rel * |expected|`; NaN only equals NaN, infinities only themselves.
fn close(actual: f64, expected: f64, abs: f64, rel: f64) -> bool {
    if expected.is_nan() || actual.is_nan() {
        return expected.is_nan() && actual.is_nan();
    }
    if expected.is_infinite() || actual.is_infinite() {
        return actual == expected;
    }
    (actual - expected).abs() <= abs + rel * expected.abs()
}

fn proportion(pair: &Value) -> Proportion {
    Proportion::new(int(&pair[0]), int(&pair[1])).expect("valid fixture proportion")
}

/// Interval endpoints lie in [-1, 1]: absolute 1e-14.
const INTERVAL_ABS: f64 = 1e-14;

#[test]
fn wilson_matches_statsmodels() {
    let cases = cases("proportions");
    for c in &cases {
        for (arm, key) in [("a", "wilson_a"), ("b", "wilson_b")] {
            let ci = proportion(&c[arm]).wilson_interval();
            let e = nums(&c[key]);
            assert!(
                close(ci.lo, e[0], INTERVAL_ABS, 0.0) && close(ci.hi, e[1], INTERVAL_ABS, 0.0),
                "{} arm {arm}: {ci:?} vs {e:?}",
                name(c)
            );
        }
    }
    assert!(cases.len() >= 30);
}

#[test]
fn newcombe_matches_statsmodels() {
    for c in cases("proportions") {
        let ci = newcombe_difference_interval(proportion(&c["a"]), proportion(&c["b"]));
        let e = nums(&c["newcombe"]);
        assert!(
            close(ci.lo, e[0], INTERVAL_ABS, 0.0) && close(ci.hi, e[1], INTERVAL_ABS, 0.0),
            "{}: {ci:?} vs {e:?}",
            name(&c)
        );
    }
}

#[test]
fn z_test_matches_statsmodels() {
    // z and p: relative 1e-12 (z below 1e3, p above 1e-300 in these cases);
    // NaN (pooled rate 0 or 1) must match NaN.
    for c in cases("proportions") {
        let t = two_proportion_z_test(proportion(&c["a"]), proportion(&c["b"]));
        let (z, p) = (num(&c["z"]), num(&c["p_value"]));
        assert!(close(t.z, z, 0.0, 1e-12), "{}: z {} vs {z}", name(&c), t.z);
        assert!(close(t.p_value, p, 0.0, 1e-12), "{}: p {} vs {p}", name(&c), t.p_value);
    }
}

#[test]
fn mann_whitney_matches_scipy() {
    // U is exact (sums of half-integer ranks). p-value: relative 1e-12, plus
    // 1e-300 absolute for results that underflow in either library.
    let cases = cases("mann_whitney");
    for c in &cases {
        let r = mann_whitney_u(&nums(&c["x"]), &nums(&c["y"])).expect("valid fixture sample");
        let (u, p) = (num(&c["u"]), num(&c["p_value"]));
        assert_eq!(r.u, u, "{}", name(c));
        assert!(close(r.p_value, p, 1e-300, 1e-12), "{}: p {:e} vs {p:e}", name(c), r.p_value);
        // The comparison of medians reports the same test.
        let cmp = compare_medians(&nums(&c["x"]), &nums(&c["y"]), BootstrapConfig { resamples: 10, seed: 0 })
            .expect("valid fixture sample");
        assert_eq!(cmp.mann_whitney, r, "{}", name(c));
    }
    assert!(cases.len() >= 30);
}

#[test]
fn holm_matches_statsmodels() {
    // Same products and running maximum as statsmodels; 1e-15 relative, since
    // the fixture's decimal text may parse one ulp away without serde_json's
    // float_roundtrip.
    let opt = |v: &Value| if v.is_null() { None } else { Some(num(v)) };
    for c in cases("holm") {
        let p: Vec<Option<f64>> = c["p"].as_array().expect("p").iter().map(opt).collect();
        let expected: Vec<Option<f64>> = c["adjusted"].as_array().expect("adjusted").iter().map(opt).collect();
        let actual = holm_adjust(&p).expect("p-values in [0, 1]");
        assert_eq!(actual.len(), expected.len(), "{}", name(&c));
        for (a, e) in actual.iter().zip(&expected) {
            match (a, e) {
                (Some(a), Some(e)) => assert!(close(*a, *e, 0.0, 1e-15), "{}: {a} vs {e}", name(&c)),
                (None, None) => {}
                _ => panic!("{}: {actual:?} vs {expected:?}", name(&c)),
            }
        }
    }
}

#[test]
fn normal_tails_match_mpmath_and_scipy() {
    // mpmath (60 digits): relative 1e-14 where the value is a normal double,
    // 1e-320 absolute for subnormal results (z >= 37.5). SciPy's ndtr loses
    // about z^2 * 1.1e-16 relative in the tail: 1e-12 for |z| <= 10,
    // 1e-12 * z^2 / 100 beyond, and it flushes results below ~1e-308 to 0.
    for c in cases("normal") {
        let z = num(&c["z"]);
        for (actual, expected) in [(normal_sf(z), num(&c["mpmath_sf"])), (normal_cdf(z), num(&c["mpmath_cdf"]))] {
            assert!(close(actual, expected, 1e-320, 1e-14), "z = {z}: {actual:e} vs mpmath {expected:e}");
        }
        let rel = 1e-12 * (z * z / 100.0).max(1.0);
        for (actual, expected) in [(normal_sf(z), num(&c["scipy_sf"])), (normal_cdf(z), num(&c["scipy_cdf"]))] {
            assert!(close(actual, expected, 1e-300, rel), "z = {z}: {actual:e} vs SciPy {expected:e}");
        }
    }
}

#[test]
fn median_matches_numpy() {
    for c in cases("median") {
        let values = nums(&c["values"]);
        let m = median(&values).expect("non-empty");
        assert!(close(m, num(&c["median"]), 1e-300, 1e-15), "{values:?}: {m}");
        assert!(close(m, num(&c["quantile_type7"]), 1e-300, 1e-15), "{values:?}: {m}");
    }
}

/// The bootstrap cannot match SciPy draw for draw (different generators and
/// draw schemes), so the fixture holds SciPy's percentile interval and each of
/// our endpoints must be within 5% of SciPy's interval width (Monte Carlo
/// error of either side: about 1% of the width). Estimates: relative 1e-12.
const BOOTSTRAP: BootstrapConfig = BootstrapConfig { resamples: 10_000, seed: 0 };
const ENDPOINT_SHARE_OF_WIDTH: f64 = 0.05;

fn check_bootstrap(c: &Value, estimate: f64, lo: f64, hi: f64) {
    let (s_lo, s_hi) = (num(&c["scipy_lo"]), num(&c["scipy_hi"]));
    let tol = ENDPOINT_SHARE_OF_WIDTH * (s_hi - s_lo);
    assert!(close(estimate, num(&c["estimate"]), 1e-300, 1e-12), "{}: estimate {estimate}", name(c));
    assert!(
        (lo - s_lo).abs() <= tol && (hi - s_hi).abs() <= tol,
        "{}: [{lo}, {hi}] vs SciPy [{s_lo}, {s_hi}]",
        name(c)
    );
}

#[test]
fn bootstrap_median_difference_agrees_with_scipy() {
    for c in cases("bootstrap").iter().filter(|c| c["kind"] == "median_difference") {
        let r = bootstrap_median_difference(&nums(&c["a"]), &nums(&c["b"]), BOOTSTRAP).expect("valid arms");
        assert_eq!(r.resamples_used, BOOTSTRAP.resamples);
        check_bootstrap(c, r.estimate, r.lo, r.hi);
    }
}

#[test]
fn bootstrap_p95_difference_agrees_with_scipy() {
    for c in cases("bootstrap").iter().filter(|c| c["kind"] == "quantile_difference") {
        let r = compare_quantiles(&nums(&c["a"]), &nums(&c["b"]), 0.95, BOOTSTRAP).expect("valid arms");
        assert_eq!(r.difference.resamples_used, BOOTSTRAP.resamples);
        check_bootstrap(c, r.difference.estimate, r.difference.lo, r.difference.hi);
    }
}

#[test]
fn bootstrap_std_dev_difference_agrees_with_scipy() {
    let small = cases("bootstrap");
    let small = small.iter().filter(|c| c["kind"] == "std_dev_difference");
    for c in small {
        let r = compare_std_devs(&nums(&c["a"]), &nums(&c["b"]), BOOTSTRAP).expect("valid arms");
        check_bootstrap(c, r.difference.estimate, r.difference.lo, r.difference.hi);
    }
    // Arms above EXACT_RESAMPLING_MAX draw their sums from the normal limit.
    for c in cases("std_dev_large") {
        let values = |spec: &Value| -> Vec<f64> { formula_arm(spec).iter().map(|r| r.cost_usd).collect() };
        let (a, b) = (values(&c["a"]), values(&c["b"]));
        assert!(a.len() > tokscope_core::stats::ab::EXACT_RESAMPLING_MAX);
        let r = compare_std_devs(&a, &b, BOOTSTRAP).expect("valid arms");
        check_bootstrap(&c, r.difference.estimate, r.difference.lo, r.difference.hi);
    }
}

#[test]
fn sample_ratio_matches_scipy_chisquare() {
    // chi2: relative 1e-12; p-value: relative 1e-12 (1e-300 absolute where it
    // underflows); the Wilson interval of B's share as statsmodels', 1e-14.
    let cases = cases("sample_ratio");
    for c in &cases {
        let t = sample_ratio_test(int(&c["n_a"]), int(&c["n_b"]), num(&c["share_b"])).expect("valid counts");
        assert!(close(t.chi_square, num(&c["chi_square"]), 1e-300, 1e-12), "{}: chi2 {}", name(c), t.chi_square);
        assert!(close(t.p_value, num(&c["p_value"]), 1e-300, 1e-12), "{}: p {:e}", name(c), t.p_value);
        let w = nums(&c["wilson"]);
        assert!(close(t.share_b_interval.lo, w[0], INTERVAL_ABS, 0.0), "{}", name(c));
        assert!(close(t.share_b_interval.hi, w[1], INTERVAL_ABS, 0.0), "{}", name(c));
    }
    assert!(cases.len() >= 7);
}

#[test]
fn bootstrap_cost_ratio_agrees_with_scipy() {
    let arm = |c: &Value, tokens: &str, cost: &str| -> Vec<RequestCost> {
        c[tokens]
            .as_array()
            .expect("tokens")
            .iter()
            .zip(nums(&c[cost]))
            .map(|(t, cost_usd)| RequestCost { tokens: int(t), cost_usd })
            .collect()
    };
    for c in cases("bootstrap").iter().filter(|c| c["kind"] == "cost_ratio") {
        let r = bootstrap_cost_ratio(&arm(c, "a_tokens", "a_cost_usd"), &arm(c, "b_tokens", "b_cost_usd"), BOOTSTRAP)
            .expect("valid arms");
        check_bootstrap(c, r.estimate, r.lo, r.hi);
    }
}

/// The fixture's formula arm (see tests/oracles/ab_stats.py): the same integer
/// arithmetic and float operations in the same order as numpy.
fn formula_arm(spec: &Value) -> Vec<RequestCost> {
    let (n, offset, rate) = (int(&spec["n"]), int(&spec["offset"]), num(&spec["rate"]));
    (0..n)
        .map(|i| {
            let tokens = 50 + (i * 7919 + offset) % 3950;
            let factor = 0.5 + ((i * 104729 + offset) % 1000) as f64 / 1000.0;
            RequestCost { tokens, cost_usd: tokens as f64 * rate * factor }
        })
        .collect()
}

#[test]
fn bootstrap_cost_ratio_of_large_arms_agrees_with_scipy() {
    // Arms above EXACT_RESAMPLING_MAX draw their resample sums from the normal
    // limit; SciPy resamples request by request (10,000 resamples).
    for c in cases("bootstrap_large") {
        let (a, b) = (formula_arm(&c["a"]), formula_arm(&c["b"]));
        assert!(a.len() > tokscope_core::stats::ab::EXACT_RESAMPLING_MAX);
        let r = bootstrap_cost_ratio(&a, &b, BOOTSTRAP).expect("valid arms");
        assert_eq!(r.resamples_used, BOOTSTRAP.resamples);
        check_bootstrap(&c, r.estimate, r.lo, r.hi);
    }
}
