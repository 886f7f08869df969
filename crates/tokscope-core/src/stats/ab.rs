//! Statistics for comparing two arms of an A/B experiment (two models, two
//! versions of one model behind one gateway): intervals and tests for rates,
//! the Mann-Whitney test and bootstrap intervals for medians and other
//! quantiles, a bootstrap interval for the difference of standard deviations
//! and for the ratio of costs, Holm's correction across bins, and the
//! sample-ratio-mismatch test of the arms' sizes. Every interval is 95% and
//! every p-value two-sided; the definitions (written out in
//! `docs/metrics.md`, "ab") match SciPy and statsmodels, which the oracle
//! fixtures in `tests/data/oracles/ab_stats.json` check.
//!
//! Direction: arm A is the control, arm B the treatment, and every
//! comparison of arms reports B against A (`b - a`, and `b / a` for the cost
//! ratio), as experimentation tools do. The two-sample building blocks
//! ([`newcombe_difference_interval`], [`two_proportion_z_test`],
//! [`mann_whitney_u`]) keep the order of their arguments, as statsmodels and
//! SciPy do: `first - second`.

use std::fmt;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Beta, Distribution, StandardNormal};
use rayon::slice::ParallelSliceMut;

use super::quantile_sorted;

/// The 97.5% point of the standard normal, the `z` of every 95% interval here
/// (`scipy.stats.norm.isf(0.025)`).
pub const Z_95: f64 = 1.959963984540054;

/// An arm with more requests than this has its cost-ratio resamples drawn
/// from their normal limit instead of request by request (see
/// [`bootstrap_cost_ratio`]).
pub const EXACT_RESAMPLING_MAX: usize = 10_000;

/// Why an A/B statistic cannot be computed from its input.
#[derive(Debug, Clone, PartialEq)]
pub enum AbError {
    /// An arm has no observations: no rate, rank or median exists.
    EmptyArm,
    /// A proportion with more successes than trials.
    SuccessesExceedTrials {
        /// Successes given.
        successes: u64,
        /// Trials given.
        trials: u64,
    },
    /// A sample value or cost is NaN or infinite.
    NonFiniteValue,
    /// A request's cost is negative.
    NegativeCost,
    /// A p-value outside `[0, 1]` was given to [`holm_adjust`].
    PValueOutOfRange(f64),
    /// The cost ratio does not exist: an arm has no tokens, or arm A costs
    /// nothing (or every bootstrap resample hit such a case).
    UndefinedRatio,
    /// A bootstrap was asked for zero resamples.
    NoResamples,
    /// An arm has one observation: it has no sample standard deviation.
    SingleValue,
    /// A quantile's probability outside `[0, 1]`.
    ProbabilityOutOfRange(f64),
    /// An intended share of arm B outside `(0, 1)`.
    SplitOutOfRange(f64),
}

impl fmt::Display for AbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AbError::EmptyArm => write!(f, "an arm has no observations"),
            AbError::SuccessesExceedTrials { successes, trials } => {
                write!(f, "{successes} successes out of only {trials} trials")
            }
            AbError::NonFiniteValue => write!(f, "a value is NaN or infinite"),
            AbError::NegativeCost => write!(f, "a request has a negative cost"),
            AbError::PValueOutOfRange(p) => write!(f, "p-value {p} is outside [0, 1]"),
            AbError::UndefinedRatio => {
                write!(f, "cost ratio undefined: an arm has no tokens or arm A costs nothing")
            }
            AbError::NoResamples => write!(f, "a bootstrap needs at least one resample"),
            AbError::SingleValue => write!(f, "an arm has one observation: no standard deviation"),
            AbError::ProbabilityOutOfRange(p) => write!(f, "quantile probability {p} is outside [0, 1]"),
            AbError::SplitOutOfRange(s) => write!(f, "intended share of arm B {s} is outside (0, 1)"),
        }
    }
}

impl std::error::Error for AbError {}

/// A two-sided confidence interval `[lo, hi]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Interval {
    /// Lower bound.
    pub lo: f64,
    /// Upper bound.
    pub hi: f64,
}

// ------------------------------------------------------------------ normal

// W. J. Cody's rational Chebyshev approximations for the normal distribution
// (ACM TOMS Algorithm 715, ANORM; the algorithm behind R's pnorm), with
// coefficients from the paper. They give the smaller tail directly with
// relative error near machine precision instead of forming 1 - cdf, and work on
// z itself rather than z/sqrt(2), so no rounding of the argument is amplified
// in the far tail. The digits are kept as published (more than an f64 holds).
#[allow(clippy::excessive_precision)]
const ANORM_A: [f64; 5] = [
    2.2352520354606839287,
    161.02823106855587881,
    1067.6894854603709582,
    18154.981253343561249,
    0.065682337918207449113,
];
#[allow(clippy::excessive_precision)]
const ANORM_B: [f64; 4] = [47.20258190468824187, 976.09855173777669322, 10260.932208618978205, 45507.789335026729956];
#[allow(clippy::excessive_precision)]
const ANORM_C: [f64; 9] = [
    0.39894151208813466764,
    8.8831497943883759412,
    93.506656132177855979,
    597.27027639480026226,
    2494.5375852903726711,
    6848.1904505362823326,
    11602.651437647350124,
    9842.7148383839780218,
    1.0765576773720192317e-8,
];
#[allow(clippy::excessive_precision)]
const ANORM_D: [f64; 8] = [
    22.266688044328115691,
    235.38790178262499861,
    1519.377599407554805,
    6485.558298266760755,
    18615.571640885098091,
    34900.952721145977266,
    38912.003286093271411,
    19685.429676859990727,
];
#[allow(clippy::excessive_precision)]
const ANORM_P: [f64; 6] = [
    0.21589853405795699,
    0.1274011611602473639,
    0.022235277870649807,
    0.001421619193227893466,
    2.9112874951168792e-5,
    0.02307344176494017303,
];
#[allow(clippy::excessive_precision)]
const ANORM_Q: [f64; 5] =
    [1.28426009614491121, 0.468238212480865118, 0.0659881378689285515, 0.00378239633202758244, 7.29751555083966205e-5];
#[allow(clippy::excessive_precision)]
const FRAC_1_SQRT_2PI: f64 = 0.398942280401432677939946059934;

/// `exp(-y^2 / 2)` with `y^2` split into an exactly representable part
/// (`y` truncated to 1/16) and a small remainder, so the rounding of `y * y`
/// does not cost relative accuracy when the result is tiny.
fn exp_minus_half_square(y: f64) -> f64 {
    let y16 = (y * 16.0).trunc() / 16.0;
    let rest = (y - y16) * (y + y16);
    (-y16 * y16 * 0.5).exp() * (-rest * 0.5).exp()
}

/// `(P[Z <= z], P[Z > z])` for a standard normal `Z`.
fn normal_tails(z: f64) -> (f64, f64) {
    if z.is_nan() {
        return (f64::NAN, f64::NAN);
    }
    let y = z.abs();
    if y <= 0.67448975 {
        // Near the centre both tails are close to 1/2: cdf = 1/2 + z * R(z^2).
        let (mut num, mut den) = (0.0, 0.0);
        if y > f64::EPSILON * 0.5 {
            let zsq = z * z;
            num = ANORM_A[4] * zsq;
            den = zsq;
            for i in 0..3 {
                num = (num + ANORM_A[i]) * zsq;
                den = (den + ANORM_B[i]) * zsq;
            }
        }
        let t = z * (num + ANORM_A[3]) / (den + ANORM_B[3]);
        return (0.5 + t, 0.5 - t);
    }
    let smaller_tail = if y <= 32f64.sqrt() {
        let mut num = ANORM_C[8] * y;
        let mut den = y;
        for i in 0..7 {
            num = (num + ANORM_C[i]) * y;
            den = (den + ANORM_D[i]) * y;
        }
        exp_minus_half_square(y) * ((num + ANORM_C[7]) / (den + ANORM_D[7]))
    } else if y < 40.0 {
        // Asymptotic form in 1/z^2. Past |z| = 40 the tail is below the
        // smallest subnormal double (and y * y could overflow), so it is 0.
        let w = 1.0 / (z * z);
        let mut num = ANORM_P[5] * w;
        let mut den = w;
        for i in 0..4 {
            num = (num + ANORM_P[i]) * w;
            den = (den + ANORM_Q[i]) * w;
        }
        let r = w * (num + ANORM_P[4]) / (den + ANORM_Q[4]);
        exp_minus_half_square(y) * ((FRAC_1_SQRT_2PI - r) / y)
    } else {
        0.0
    };
    if z > 0.0 {
        (1.0 - smaller_tail, smaller_tail)
    } else {
        (smaller_tail, 1.0 - smaller_tail)
    }
}

/// Standard normal CDF `P[Z <= z]`, with relative error near machine precision
/// in both tails (Cody's algorithm); NaN for NaN.
///
/// ```
/// use tokscope_core::stats::ab::normal_cdf;
/// assert!((normal_cdf(-1.959963984540054) - 0.025).abs() < 1e-16);
/// ```
pub fn normal_cdf(z: f64) -> f64 {
    normal_tails(z).0
}

/// Standard normal survival function `P[Z > z] = normal_cdf(-z)`, computed
/// directly so that upper-tail p-values keep their relative accuracy (for
/// example `normal_sf(10.0)` is 7.62e-24, not `1 - 1`).
pub fn normal_sf(z: f64) -> f64 {
    normal_tails(z).1
}

// ------------------------------------------------------------- proportions

/// `successes` out of `trials` (requests that stopped at EOS, that were
/// silently truncated, ...), with `trials >= 1` and `successes <= trials`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Proportion {
    successes: u64,
    trials: u64,
}

/// A two-proportion z-test: the statistic and its two-sided p-value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ZTest {
    /// The statistic.
    pub z: f64,
    /// Two-sided p-value.
    pub p_value: f64,
}

impl Proportion {
    /// Errors: `EmptyArm` when `trials == 0` (an empty arm has no rate),
    /// `SuccessesExceedTrials` when `successes > trials`.
    pub fn new(successes: u64, trials: u64) -> Result<Self, AbError> {
        if trials == 0 {
            return Err(AbError::EmptyArm);
        }
        if successes > trials {
            return Err(AbError::SuccessesExceedTrials { successes, trials });
        }
        Ok(Proportion { successes, trials })
    }

    /// The successes.
    pub fn successes(&self) -> u64 {
        self.successes
    }

    /// The trials.
    pub fn trials(&self) -> u64 {
        self.trials
    }

    /// The observed rate `successes / trials`.
    pub fn rate(&self) -> f64 {
        self.successes as f64 / self.trials as f64
    }

    /// Wilson score interval (95%): with `p = x/n`, `z = Z_95`,
    /// `centre = (p + z^2/(2n)) / (1 + z^2/n)`,
    /// `half = z * sqrt(p(1-p)/n + z^2/(4n^2)) / (1 + z^2/n)`,
    /// `[centre - half, centre + half]`. It never leaves `[0, 1]`; `lo` is
    /// exactly 0 when `x = 0` and `hi` exactly 1 when `x = n` (the formula
    /// gives those values up to rounding).
    ///
    /// ```
    /// use tokscope_core::stats::ab::Proportion;
    /// let ci = Proportion::new(8, 10)?.wilson_interval();
    /// assert!((ci.lo - 0.49016247153664183).abs() < 1e-15);
    /// assert!((ci.hi - 0.9433178485456247).abs() < 1e-15);
    /// # Ok::<(), tokscope_core::stats::ab::AbError>(())
    /// ```
    pub fn wilson_interval(&self) -> Interval {
        let n = self.trials as f64;
        let p = self.rate();
        let z2 = Z_95 * Z_95;
        let denom = 1.0 + z2 / n;
        let centre = (p + z2 / (2.0 * n)) / denom;
        let half = Z_95 * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / denom;
        let lo = if self.successes == 0 { 0.0 } else { (centre - half).clamp(0.0, 1.0) };
        let hi = if self.successes == self.trials { 1.0 } else { (centre + half).clamp(0.0, 1.0) };
        Interval { lo, hi }
    }
}

/// Newcombe's hybrid score interval (95%) for `p_a - p_b` of two independent
/// proportions (Newcombe 1998, method 10), built from the arms' Wilson
/// intervals `[l_a, u_a]`, `[l_b, u_b]`:
/// `lo = d - sqrt((p_a - l_a)^2 + (u_b - p_b)^2)`,
/// `hi = d + sqrt((u_a - p_a)^2 + (p_b - l_b)^2)`, `d = p_a - p_b`.
/// Unlike the Wald interval it stays inside `[-1, 1]` and is sensible at rates
/// of 0 or 1 and at small `n`.
///
/// ```
/// use tokscope_core::stats::ab::{newcombe_difference_interval, Proportion};
/// // Newcombe (1998), Table II: 56/70 vs 48/80 gives 0.0524 to 0.3339.
/// let ci = newcombe_difference_interval(Proportion::new(56, 70)?, Proportion::new(48, 80)?);
/// assert!((ci.lo - 0.0524).abs() < 5e-5 && (ci.hi - 0.3339).abs() < 5e-5);
/// # Ok::<(), tokscope_core::stats::ab::AbError>(())
/// ```
pub fn newcombe_difference_interval(a: Proportion, b: Proportion) -> Interval {
    let (pa, pb) = (a.rate(), b.rate());
    let (wa, wb) = (a.wilson_interval(), b.wilson_interval());
    let d = pa - pb;
    Interval {
        lo: d - ((pa - wa.lo).powi(2) + (wb.hi - pb).powi(2)).sqrt(),
        hi: d + ((wa.hi - pa).powi(2) + (pb - wb.lo).powi(2)).sqrt(),
    }
}

/// Two-proportion z-test of `p_a = p_b` with the pooled standard error:
/// `pool = (x_a + x_b) / (n_a + n_b)`,
/// `z = (p_a - p_b) / sqrt(pool (1 - pool) (1/n_a + 1/n_b))`,
/// `p_value = 2 * normal_sf(|z|)`; equal to statsmodels'
/// `proportions_ztest([x_a, x_b], [n_a, n_b])`.
///
/// When `pool` is 0 or 1 (both arms all failures, or all successes) the
/// standard error is 0 and `z` and `p_value` are NaN, as in statsmodels (0/0):
/// the arms carry no evidence either way. [`holm_adjust`] leaves NaN out.
pub fn two_proportion_z_test(a: Proportion, b: Proportion) -> ZTest {
    let (na, nb) = (a.trials as f64, b.trials as f64);
    let pool = (a.successes + b.successes) as f64 / (na + nb);
    let se = (pool * (1.0 - pool) * (1.0 / na + 1.0 / nb)).sqrt();
    if se == 0.0 {
        return ZTest { z: f64::NAN, p_value: f64::NAN };
    }
    let z = (a.rate() - b.rate()) / se;
    ZTest { z, p_value: 2.0 * normal_sf(z.abs()) }
}

// ----------------------------------------------------------- Mann-Whitney

/// A Mann-Whitney U test: `U` of the first sample and the two-sided p-value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MannWhitney {
    /// SciPy's statistic: `U` of the first sample.
    pub u: f64,
    /// Two-sided p-value.
    pub p_value: f64,
}

/// Mann-Whitney U test of samples `a` and `b`, normal approximation with tie
/// and continuity corrections, equal to SciPy's
/// `mannwhitneyu(a, b, alternative='two-sided', method='asymptotic', use_continuity=True)`.
///
/// Ranks are average ranks of the pooled sample; `u = R_a - n_a(n_a+1)/2`
/// (SciPy's statistic, for the first sample); with `U = max(u, n_a n_b - u)`,
/// `N = n_a + n_b`, tie groups of sizes `t`:
/// `s = sqrt(n_a n_b / 12 * ((N + 1) - sum(t^3 - t) / (N (N - 1))))`,
/// `z = (U - n_a n_b / 2 - 0.5) / s`, `p_value = min(1, 2 * normal_sf(z))`.
///
/// All values equal (`s = 0`): `p_value = 1`, as SciPy (its `z` is -inf).
/// Errors: `EmptyArm` when a sample is empty (SciPy returns NaN),
/// `NonFiniteValue` for NaN or infinite values.
pub fn mann_whitney_u(a: &[f64], b: &[f64]) -> Result<MannWhitney, AbError> {
    let (a, b) = (sorted_finite(a)?, sorted_finite(b)?);
    mann_whitney_u_sorted(&a, &b)
}

/// Sorted copy of a sample; errors for an empty sample or a non-finite value.
fn sorted_finite(values: &[f64]) -> Result<Vec<f64>, AbError> {
    if values.is_empty() {
        return Err(AbError::EmptyArm);
    }
    if values.iter().any(|v| !v.is_finite()) {
        return Err(AbError::NonFiniteValue);
    }
    let mut v = values.to_vec();
    sort_large(&mut v, f64::total_cmp);
    Ok(v)
}

/// Below this many values a sort stays on the calling thread.
const PARALLEL_SORT_MIN: usize = 1 << 16;

/// Sorts in parallel (rayon) when the slice is large: an arm of a big
/// experiment holds millions of values, sorted once per comparison.
fn sort_large<T: Send>(v: &mut [T], cmp: impl Fn(&T, &T) -> std::cmp::Ordering + Sync) {
    if v.len() >= PARALLEL_SORT_MIN {
        v.par_sort_unstable_by(cmp);
    } else {
        v.sort_unstable_by(cmp);
    }
}

/// [`mann_whitney_u`] of two samples already sorted ascending, finite and
/// non-empty: the pooled ranks come from merging them, in linear time.
fn mann_whitney_u_sorted(a: &[f64], b: &[f64]) -> Result<MannWhitney, AbError> {
    if a.is_empty() || b.is_empty() {
        return Err(AbError::EmptyArm);
    }
    // Ranks are multiples of 1/2, so the rank sum is exact in f64 up to 2^52.
    let (mut i, mut j, mut rank_sum_a, mut tie_term) = (0, 0, 0.0, 0.0);
    while i < a.len() || j < b.len() {
        let v = match (a.get(i), b.get(j)) {
            (Some(&x), Some(&y)) => x.min(y),
            (Some(&x), None) => x,
            (None, Some(&y)) => y,
            (None, None) => break,
        };
        let (start_a, start_b) = (i, j);
        while a.get(i) == Some(&v) {
            i += 1;
        }
        while b.get(j) == Some(&v) {
            j += 1;
        }
        let (in_a, t) = ((i - start_a) as f64, (i - start_a + j - start_b) as f64);
        // The tie group holds the 1-based ranks start+1 ..= start+t; they share their average.
        let start = (start_a + start_b) as f64;
        rank_sum_a += in_a * (start + (t + 1.0) / 2.0);
        tie_term += t * t * t - t;
    }
    let (na, nb) = (a.len() as f64, b.len() as f64);
    let n = na + nb;
    let u_a = rank_sum_a - na * (na + 1.0) / 2.0;
    let u = u_a.max(na * nb - u_a);
    let s = (na * nb / 12.0 * ((n + 1.0) - tie_term / (n * (n - 1.0)))).sqrt();
    if s == 0.0 || s.is_nan() {
        return Ok(MannWhitney { u: u_a, p_value: 1.0 });
    }
    // The continuity correction always subtracts: U >= n_a n_b / 2 here.
    let z = (u - na * nb / 2.0 - 0.5) / s;
    Ok(MannWhitney { u: u_a, p_value: (2.0 * normal_sf(z)).min(1.0) })
}

// ---------------------------------------------------------------- medians

/// Median as the type-7 0.5-quantile: the middle value, or the midpoint of
/// the two middle values. `None` when empty or when a value is NaN.
pub fn median(values: &[f64]) -> Option<f64> {
    if values.is_empty() || values.iter().any(|v| v.is_nan()) {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_unstable_by(f64::total_cmp);
    Some(quantile_sorted(&v, 0.5))
}

// ---------------------------------------------------------------- bootstrap

/// Resampling settings for the percentile bootstrap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BootstrapConfig {
    /// Number of resamples `B`.
    pub resamples: usize,
    /// Seed of rand 0.9's `StdRng::seed_from_u64`.
    pub seed: u64,
}

impl Default for BootstrapConfig {
    /// `B = 1000`, seed 0: the defaults of every tokscope bootstrap.
    fn default() -> Self {
        BootstrapConfig { resamples: 1000, seed: 0 }
    }
}

/// A point estimate with its 95% percentile bootstrap interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BootstrapInterval {
    /// The statistic on the observed arms.
    pub estimate: f64,
    /// Lower bound.
    pub lo: f64,
    /// Upper bound.
    pub hi: f64,
    /// Resamples whose statistic existed (all of them, except for a cost
    /// ratio when a resample drew only zero-token or zero-cost requests).
    pub resamples_used: usize,
}

/// The 2.5th and 97.5th type-7 percentiles of the resample statistics.
fn percentile_interval(estimate: f64, mut stats: Vec<f64>) -> Result<BootstrapInterval, AbError> {
    if stats.is_empty() {
        return Err(AbError::UndefinedRatio);
    }
    stats.sort_unstable_by(f64::total_cmp);
    Ok(BootstrapInterval {
        estimate,
        lo: quantile_sorted(&stats, 0.025),
        hi: quantile_sorted(&stats, 0.975),
        resamples_used: stats.len(),
    })
}

/// Draws the type-7 `p`-quantile of a bootstrap resample of one sorted arm
/// in constant time, from the order statistics of uniforms.
///
/// A resample of `n` draws with replacement is `x[floor(n U_i)]` for `n`
/// uniforms `U_i`; `floor(n u)` does not decrease with `u`, so the
/// resample's `k`-th smallest value (0-based) is `x[floor(n U_(k))]`, and
/// `U_(k)` follows Beta(k + 1, n - k). The type-7 quantile interpolates the
/// order statistics `k = floor(h)` and `k + 1`, `h = p (n - 1)`, with weight
/// `h - k`; when that weight is not 0 the next order statistic is the
/// smallest of the `n - k - 1` uniforms above `U_(k)`:
/// `U_(k) + (1 - U_(k)) (1 - V^(1 / (n - k - 1)))`, `V` uniform. The
/// resample's quantile therefore has exactly the distribution of the quantile
/// of `n` values drawn one by one, at a cost that does not grow with `n`.
struct ResampledQuantile<'x> {
    sorted: &'x [f64],
    /// 0-based index of the lower order statistic (`floor(p (n - 1))`).
    k: usize,
    /// Weight of the next order statistic (`p (n - 1) - k`); 0 when the
    /// quantile is an order statistic (the median of an odd sample).
    weight: f64,
    lower: Beta<f64>,
}

impl<'x> ResampledQuantile<'x> {
    /// `sorted` is non-empty; `p` in `[0, 1]`.
    fn new(sorted: &'x [f64], p: f64) -> Self {
        let n = sorted.len();
        let h = p * (n - 1) as f64;
        let k = (h.floor() as usize).min(n - 1);
        // Both shape parameters are >= 1 for any n >= 1: the constructor cannot fail.
        let lower = Beta::new((k + 1) as f64, (n - k) as f64).unwrap_or_else(|_| unreachable!("shapes >= 1"));
        ResampledQuantile { sorted, k, weight: h - h.floor(), lower }
    }

    fn at(&self, u: f64) -> f64 {
        let n = self.sorted.len();
        self.sorted[((n as f64 * u) as usize).min(n - 1)]
    }

    fn sample(&self, rng: &mut StdRng) -> f64 {
        let n = self.sorted.len();
        let u = self.lower.sample(rng);
        let lower = self.at(u);
        // A weight above 0 means h < n - 1, so at least one uniform lies above U_(k).
        if self.weight == 0.0 {
            return lower;
        }
        let above = (n - self.k - 1) as f64;
        let v: f64 = rng.random();
        let next = u + (1.0 - u) * (1.0 - (1.0 - v).powf(1.0 / above));
        lower + self.weight * (self.at(next) - lower)
    }
}

/// `quantile_p(b) - quantile_p(a)` of two sorted, non-empty arms with its
/// percentile bootstrap interval: each of the `B` resamples draws arm A's
/// resample quantile, then arm B's ([`ResampledQuantile`]), from one
/// `StdRng::seed_from_u64(seed)`.
fn quantile_difference(a: &[f64], b: &[f64], p: f64, config: BootstrapConfig) -> Result<BootstrapInterval, AbError> {
    if config.resamples == 0 {
        return Err(AbError::NoResamples);
    }
    let (draw_a, draw_b) = (ResampledQuantile::new(a, p), ResampledQuantile::new(b, p));
    let mut rng = StdRng::seed_from_u64(config.seed);
    let stats = (0..config.resamples)
        .map(|_| {
            let qa = draw_a.sample(&mut rng);
            draw_b.sample(&mut rng) - qa
        })
        .collect();
    percentile_interval(quantile_sorted(b, p) - quantile_sorted(a, p), stats)
}

/// Medians of two arms compared: the values, their difference with a 95%
/// percentile bootstrap interval, and the Mann-Whitney p-value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MedianComparison {
    /// Type-7 median of arm A.
    pub median_a: f64,
    /// Type-7 median of arm B.
    pub median_b: f64,
    /// `median_b - median_a` and its bootstrap interval.
    pub difference: BootstrapInterval,
    /// [`mann_whitney_u`] of A against B (the p-value is symmetric).
    pub mann_whitney: MannWhitney,
}

/// `median(b) - median(a)` with a 95% percentile bootstrap interval, and the
/// Mann-Whitney test of the two samples (both arms sorted once).
///
/// Bootstrap: `B` resamples; each draws arm A's resample median, then arm B's,
/// with [`ResampledQuantile`]'s order-statistic method from one
/// `StdRng::seed_from_u64(seed)` (A: one Beta draw, plus one uniform when
/// `n_a` is even; then B likewise); the statistic is B's minus A's, and
/// `[lo, hi]` are the type-7 2.5% and 97.5% quantiles of the `B` statistics.
/// This is the same distribution as resampling `n_a` and `n_b` values one by
/// one (the oracle tests compare it with SciPy's `bootstrap`), in `O(B)` after
/// the sort instead of `O(B (n_a + n_b))`.
///
/// Errors: `EmptyArm`, `NonFiniteValue`, `NoResamples`.
pub fn compare_medians(a: &[f64], b: &[f64], config: BootstrapConfig) -> Result<MedianComparison, AbError> {
    let (a, b) = (sorted_finite(a)?, sorted_finite(b)?);
    Ok(MedianComparison {
        median_a: quantile_sorted(&a, 0.5),
        median_b: quantile_sorted(&b, 0.5),
        difference: quantile_difference(&a, &b, 0.5, config)?,
        mann_whitney: mann_whitney_u_sorted(&a, &b)?,
    })
}

/// `median(b) - median(a)` with its 95% percentile bootstrap interval (see
/// [`compare_medians`]).
pub fn bootstrap_median_difference(
    a: &[f64],
    b: &[f64],
    config: BootstrapConfig,
) -> Result<BootstrapInterval, AbError> {
    compare_medians(a, b, config).map(|c| c.difference)
}

/// One quantile of two arms compared: the values and their difference with a
/// 95% percentile bootstrap interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QuantileComparison {
    /// Type-7 quantile of arm A.
    pub quantile_a: f64,
    /// Type-7 quantile of arm B.
    pub quantile_b: f64,
    /// `quantile_b - quantile_a` and its bootstrap interval.
    pub difference: BootstrapInterval,
}

/// `quantile_p(b) - quantile_p(a)` (type 7, `p` in `[0, 1]`: 0.95 for a P95)
/// with a 95% percentile bootstrap interval drawn as [`compare_medians`]
/// draws the median's (for `p = 0.5` the intervals are the same). No test
/// goes with it: the Mann-Whitney test compares whole distributions, not one
/// of their quantiles.
///
/// Errors: `EmptyArm`, `NonFiniteValue`, `NoResamples`, `ProbabilityOutOfRange`.
pub fn compare_quantiles(a: &[f64], b: &[f64], p: f64, config: BootstrapConfig) -> Result<QuantileComparison, AbError> {
    if !(0.0..=1.0).contains(&p) {
        return Err(AbError::ProbabilityOutOfRange(p));
    }
    let (a, b) = (sorted_finite(a)?, sorted_finite(b)?);
    Ok(QuantileComparison {
        quantile_a: quantile_sorted(&a, p),
        quantile_b: quantile_sorted(&b, p),
        difference: quantile_difference(&a, &b, p, config)?,
    })
}

/// Draws the sums of a pair of values, `(sum x, sum y)`, over one arm's
/// bootstrap resample: a request's cost and tokens, or a value's deviation
/// from its arm's mean and its square.
enum ResampledSums {
    /// Value by value: `n` indices `random_range(0..n)`.
    Exact(Vec<(f64, f64)>),
    /// The normal limit of the resample sums, `N(n mean, n cov)` with the
    /// arm's mean and (population) covariance of `(x, y)`, drawn as
    /// `n mean + sqrt(n) L (z1, z2)` with `L` the Cholesky factor of `cov`
    /// and `z1`, `z2` standard normals.
    Normal { n: f64, mean: (f64, f64), l11: f64, l21: f64, l22: f64 },
}

impl ResampledSums {
    /// Exact up to [`EXACT_RESAMPLING_MAX`] pairs, the normal limit above.
    fn new(pairs: Vec<(f64, f64)>) -> Self {
        if pairs.len() <= EXACT_RESAMPLING_MAX {
            return ResampledSums::Exact(pairs);
        }
        let n = pairs.len() as f64;
        let mean = pairs.iter().fold((0.0, 0.0), |(x, y), p| (x + p.0 / n, y + p.1 / n));
        let (mut var_x, mut var_y, mut cov) = (0.0, 0.0, 0.0);
        for p in &pairs {
            let (dx, dy) = (p.0 - mean.0, p.1 - mean.1);
            var_x += dx * dx / n;
            var_y += dy * dy / n;
            cov += dx * dy / n;
        }
        let l11 = var_x.sqrt();
        let l21 = if l11 > 0.0 { cov / l11 } else { 0.0 };
        let l22 = (var_y - l21 * l21).max(0.0).sqrt();
        ResampledSums::Normal { n, mean, l11, l21, l22 }
    }

    fn sample(&self, rng: &mut StdRng) -> (f64, f64) {
        match self {
            ResampledSums::Exact(pairs) => {
                let n = pairs.len();
                (0..n).fold((0.0, 0.0), |(x, y), _| {
                    let p = pairs[rng.random_range(0..n)];
                    (x + p.0, y + p.1)
                })
            }
            &ResampledSums::Normal { n, mean, l11, l21, l22 } => {
                let (z1, z2): (f64, f64) = (StandardNormal.sample(rng), StandardNormal.sample(rng));
                let root = n.sqrt();
                (n * mean.0 + root * l11 * z1, n * mean.1 + root * (l21 * z1 + l22 * z2))
            }
        }
    }
}

/// Standard deviations of two arms compared: the values and their difference
/// with a 95% percentile bootstrap interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StdDevComparison {
    /// Sample standard deviation (`n - 1`) of arm A.
    pub std_dev_a: f64,
    /// Sample standard deviation of arm B.
    pub std_dev_b: f64,
    /// `std_dev_b - std_dev_a` and its bootstrap interval.
    pub difference: BootstrapInterval,
}

/// `s(b) - s(a)`, `s` the sample standard deviation (`n - 1` in the
/// denominator, SQL's `stddev_samp`), with a 95% percentile bootstrap
/// interval. Each arm is sorted (so the result does not depend on the order
/// of its values) and taken as deviations `d` from its mean; a resample's
/// standard deviation comes from its sums `S1 = sum d`, `S2 = sum d^2`:
/// `sqrt(max(0, S2 - S1^2 / n) / (n - 1))` (the same value for any shift of
/// the data, and free of the cancellation raw squares would suffer). Each of
/// `B` resamples draws arm A's sums, then arm B's, from one
/// `StdRng::seed_from_u64(seed)`: value by value up to
/// [`EXACT_RESAMPLING_MAX`] values, from their normal limit above, as the
/// cost ratio does ([`bootstrap_cost_ratio`]). No test goes with it.
///
/// Errors: `EmptyArm`, `SingleValue` (an arm of one value), `NonFiniteValue`,
/// `NoResamples`.
pub fn compare_std_devs(a: &[f64], b: &[f64], config: BootstrapConfig) -> Result<StdDevComparison, AbError> {
    let (a, b) = (sorted_finite(a)?, sorted_finite(b)?);
    if a.len() < 2 || b.len() < 2 {
        return Err(AbError::SingleValue);
    }
    if config.resamples == 0 {
        return Err(AbError::NoResamples);
    }
    let deviations = |arm: &[f64]| -> Vec<(f64, f64)> {
        let mean = arm.iter().sum::<f64>() / arm.len() as f64;
        arm.iter().map(|x| (x - mean, (x - mean) * (x - mean))).collect()
    };
    let std_dev = |n: usize, (s1, s2): (f64, f64)| ((s2 - s1 * s1 / n as f64).max(0.0) / (n - 1) as f64).sqrt();
    let (da, db) = (deviations(&a), deviations(&b));
    let sums = |d: &[(f64, f64)]| d.iter().fold((0.0, 0.0), |(x, y), p| (x + p.0, y + p.1));
    let (std_dev_a, std_dev_b) = (std_dev(a.len(), sums(&da)), std_dev(b.len(), sums(&db)));
    let (draw_a, draw_b) = (ResampledSums::new(da), ResampledSums::new(db));
    let mut rng = StdRng::seed_from_u64(config.seed);
    let stats = (0..config.resamples)
        .map(|_| {
            let sa = std_dev(a.len(), draw_a.sample(&mut rng));
            std_dev(b.len(), draw_b.sample(&mut rng)) - sa
        })
        .collect();
    Ok(StdDevComparison { std_dev_a, std_dev_b, difference: percentile_interval(std_dev_b - std_dev_a, stats)? })
}

/// One request of an arm, for [`bootstrap_cost_ratio`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RequestCost {
    /// `prompt_tokens + completion_tokens`.
    pub tokens: u64,
    /// The request's `cost_usd`.
    pub cost_usd: f64,
}

/// `1000 * sum(cost_usd) / sum(tokens)` over requests: `cost_per_1k_tokens`
/// (docs/metrics.md, "cost").
pub fn cost_per_1k(arm: &[RequestCost]) -> f64 {
    let (cost, tokens) = arm.iter().fold((0.0, 0.0), |(c, t), r| (c + r.cost_usd, t + r.tokens as f64));
    1000.0 * cost / tokens
}

/// A copy of an arm's requests in `(cost_usd, tokens)` order.
pub fn sorted_requests(arm: &[RequestCost]) -> Vec<RequestCost> {
    let mut v = arm.to_vec();
    sort_large(&mut v, |x, y| x.cost_usd.total_cmp(&y.cost_usd).then(x.tokens.cmp(&y.tokens)));
    v
}

/// Ratio of the arms' cost per 1K tokens,
/// `(1000 sum_B cost / sum_B tokens) / (1000 sum_A cost / sum_A tokens)`,
/// with a 95% percentile bootstrap interval. Each arm's requests are first
/// sorted by `(cost_usd, tokens)`, so that neither the sums' rounding nor the
/// resamples depend on the order the requests arrive in. Each of `B` resamples
/// draws arm A's sums, then arm B's, from one `StdRng::seed_from_u64(seed)`: requests
/// are resampled whole (their tokens with their cost), each arm independently,
/// `n` draws `random_range(0..n)`; an arm of more than
/// [`EXACT_RESAMPLING_MAX`] requests draws its two sums from their normal
/// limit instead ([`ResampledSums::Normal`]; docs/metrics.md says why that is
/// within the Monte Carlo error). A resample whose ratio does not exist (no
/// tokens, or no cost in A, or a negative sum) is skipped and not counted in
/// `resamples_used`.
///
/// Errors: `EmptyArm`; `NonFiniteValue` or `NegativeCost` for a bad cost;
/// `UndefinedRatio` when the observed ratio does not exist; `NoResamples`.
pub fn bootstrap_cost_ratio(
    a: &[RequestCost],
    b: &[RequestCost],
    config: BootstrapConfig,
) -> Result<BootstrapInterval, AbError> {
    if a.is_empty() || b.is_empty() {
        return Err(AbError::EmptyArm);
    }
    for r in a.iter().chain(b) {
        if !r.cost_usd.is_finite() {
            return Err(AbError::NonFiniteValue);
        }
        if r.cost_usd < 0.0 {
            return Err(AbError::NegativeCost);
        }
    }
    if config.resamples == 0 {
        return Err(AbError::NoResamples);
    }
    let (a, b) = (sorted_requests(a), sorted_requests(b));
    let (per_1k_a, per_1k_b) = (cost_per_1k(&a), cost_per_1k(&b));
    if !(per_1k_a.is_finite() && per_1k_b.is_finite() && per_1k_a > 0.0) {
        return Err(AbError::UndefinedRatio);
    }
    let estimate = per_1k_b / per_1k_a;
    let pairs =
        |arm: &[RequestCost]| -> Vec<(f64, f64)> { arm.iter().map(|r| (r.cost_usd, r.tokens as f64)).collect() };
    let (sums_a, sums_b) = (ResampledSums::new(pairs(&a)), ResampledSums::new(pairs(&b)));
    let mut rng = StdRng::seed_from_u64(config.seed);
    let stats = (0..config.resamples)
        .filter_map(|_| {
            let (cost_a, tokens_a) = sums_a.sample(&mut rng);
            let (cost_b, tokens_b) = sums_b.sample(&mut rng);
            let ratio = (cost_b / tokens_b) / (cost_a / tokens_a);
            (cost_b >= 0.0 && tokens_b > 0.0 && cost_a > 0.0 && tokens_a > 0.0 && ratio.is_finite()).then_some(ratio)
        })
        .collect();
    percentile_interval(estimate, stats)
}

// -------------------------------------------------------- sample ratio

/// The sample-ratio-mismatch test of an experiment's arm sizes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SampleRatio {
    /// Arm B's observed share of the requests, `n_b / (n_a + n_b)`.
    pub share_b: f64,
    /// The Wilson interval (95%) of that share.
    pub share_b_interval: Interval,
    /// Pearson's chi-square statistic of the counts against the intended split.
    pub chi_square: f64,
    /// Its p-value (1 degree of freedom).
    pub p_value: f64,
}

/// Pearson's chi-square goodness-of-fit test of the arm sizes against the
/// intended split, `expected_share_b` of the requests to arm B: with
/// `N = n_a + n_b`, `e_a = N (1 - s)`, `e_b = N s`,
/// `chi2 = (n_a - e_a)^2 / e_a + (n_b - e_b)^2 / e_b`, and with one degree of
/// freedom `p = P[chi2_1 > chi2] = 2 P[Z > sqrt(chi2)]`; equal to SciPy's
/// `chisquare([n_a, n_b], [e_a, e_b])`. A small p-value says the split is not
/// the one intended (a sample ratio mismatch): assignment or logging dropped
/// requests of one arm, and the comparison of the arms may be biased.
///
/// ```
/// use tokscope_core::stats::ab::sample_ratio_test;
/// // 5,200 vs 4,800 against 50/50: chi2 = 2 * 200^2 / 5,000 = 16.
/// let t = sample_ratio_test(5200, 4800, 0.5)?;
/// assert!((t.chi_square - 16.0).abs() < 1e-12 && t.p_value < 1e-4);
/// # Ok::<(), tokscope_core::stats::ab::AbError>(())
/// ```
///
/// Errors: `EmptyArm` when both arms are empty, `SplitOutOfRange` unless
/// `0 < expected_share_b < 1`.
pub fn sample_ratio_test(n_a: u64, n_b: u64, expected_share_b: f64) -> Result<SampleRatio, AbError> {
    if !(expected_share_b > 0.0 && expected_share_b < 1.0) {
        return Err(AbError::SplitOutOfRange(expected_share_b));
    }
    let share = Proportion::new(n_b, n_a + n_b)?;
    let n = (n_a + n_b) as f64;
    let (e_a, e_b) = (n * (1.0 - expected_share_b), n * expected_share_b);
    let chi_square = (n_a as f64 - e_a).powi(2) / e_a + (n_b as f64 - e_b).powi(2) / e_b;
    Ok(SampleRatio {
        share_b: share.rate(),
        share_b_interval: share.wilson_interval(),
        chi_square,
        p_value: (2.0 * normal_sf(chi_square.sqrt())).min(1.0),
    })
}

// --------------------------------------------------------------------- Holm

/// Holm's step-down adjustment of p-values from one family of comparisons.
/// With the `m` present p-values sorted ascending `p_(1) <= ... <= p_(m)`:
/// `adj_(i) = min(1, max_{j <= i} (m - j + 1) p_(j))`, returned in the input
/// order. `None` and NaN entries are left out (they do not count in `m`) and
/// come back as `None`. Equal to statsmodels' `multipletests(p, method='holm')`
/// on the present values.
///
/// ```
/// use tokscope_core::stats::ab::holm_adjust;
/// let adj = holm_adjust(&[Some(0.01), None, Some(0.04), Some(0.03)])?;
/// assert_eq!(adj, vec![Some(0.03), None, Some(0.06), Some(0.06)]);
/// # Ok::<(), tokscope_core::stats::ab::AbError>(())
/// ```
///
/// Errors: `PValueOutOfRange` for a value below 0 or above 1.
pub fn holm_adjust(p_values: &[Option<f64>]) -> Result<Vec<Option<f64>>, AbError> {
    let mut present: Vec<(usize, f64)> = Vec::new();
    for (i, p) in p_values.iter().enumerate() {
        match *p {
            Some(p) if p.is_nan() => {}
            Some(p) if !(0.0..=1.0).contains(&p) => return Err(AbError::PValueOutOfRange(p)),
            Some(p) => present.push((i, p)),
            None => {}
        }
    }
    // A stable sort keeps tied p-values in input order; ties get the same
    // adjusted value either way, because of the running maximum.
    present.sort_by(|x, y| x.1.total_cmp(&y.1));
    let m = present.len();
    let mut adjusted = vec![None; p_values.len()];
    let mut running_max: f64 = 0.0;
    for (rank, &(i, p)) in present.iter().enumerate() {
        running_max = running_max.max(((m - rank) as f64 * p).min(1.0));
        adjusted[i] = Some(running_max);
    }
    Ok(adjusted)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(actual: f64, expected: f64, tol: f64) -> bool {
        (actual - expected).abs() <= tol
    }

    #[test]
    fn wilson_8_of_10_matches_hand_computation() {
        // p = 0.8, z^2 = 3.841458820694124, denom = 1.3841458820694124,
        // centre = 0.9920729410347062 / denom = 0.7167401600411335,
        // half = z * sqrt(0.016 + 0.009603647051735310) / denom = 0.2265776885044912.
        let ci = Proportion::new(8, 10).unwrap().wilson_interval();
        assert!(close(ci.lo, 0.49016247153664183, 1e-15), "{ci:?}");
        assert!(close(ci.hi, 0.9433178485456247, 1e-15), "{ci:?}");
    }

    #[test]
    fn wilson_is_exact_at_zero_and_all_successes() {
        let none = Proportion::new(0, 100).unwrap().wilson_interval();
        assert_eq!(none.lo, 0.0);
        // z^2 / (n + z^2) = 3.841458820694124 / 103.841458820694124.
        assert!(close(none.hi, 0.03699349820698569, 1e-16));
        let all = Proportion::new(10, 10).unwrap().wilson_interval();
        assert_eq!(all.hi, 1.0);
        assert!(close(all.lo, 0.7224672001371106, 1e-15));
    }

    #[test]
    fn newcombe_12_of_100_vs_0_of_100() {
        // Wilson 12/100 = [0.06999406437019488, 0.19812099426711421],
        // Wilson 0/100 = [0, 0.03699349820698569];
        // lo = 0.12 - sqrt(0.05000593562980512^2 + 0.03699349820698569^2),
        // hi = 0.12 + sqrt(0.07812099426711421^2 + 0) = Wilson upper of arm A.
        let ci = newcombe_difference_interval(Proportion::new(12, 100).unwrap(), Proportion::new(0, 100).unwrap());
        assert!(close(ci.lo, 0.05779780946138258, 1e-15), "{ci:?}");
        assert!(close(ci.hi, 0.19812099426711421, 1e-15), "{ci:?}");
    }

    #[test]
    fn newcombe_reproduces_the_papers_table() {
        // Newcombe (1998), Stat. Med. 17:873, Table II, method 10, 4 decimals.
        let cases = [
            ((56, 70), (48, 80), 0.0524, 0.3339),
            ((9, 10), (3, 10), 0.1705, 0.8090),
            ((6, 7), (2, 7), 0.0582, 0.8062),
            ((5, 56), (0, 29), -0.0381, 0.1926),
            ((0, 10), (0, 20), -0.1611, 0.2775),
            ((10, 10), (0, 20), 0.6791, 1.0000),
        ];
        for ((xa, na), (xb, nb), lo, hi) in cases {
            let a = Proportion::new(xa, na).unwrap();
            let b = Proportion::new(xb, nb).unwrap();
            let ci = newcombe_difference_interval(a, b);
            assert!(close(ci.lo, lo, 5e-5) && close(ci.hi, hi, 5e-5), "{xa}/{na} vs {xb}/{nb}: {ci:?}");
        }
    }

    #[test]
    fn empty_arm_and_impossible_counts_are_errors() {
        assert_eq!(Proportion::new(0, 0), Err(AbError::EmptyArm));
        assert_eq!(Proportion::new(3, 2), Err(AbError::SuccessesExceedTrials { successes: 3, trials: 2 }));
    }

    #[test]
    fn z_test_8_of_10_vs_5_of_10() {
        // pool = 0.65, se = sqrt(0.65 * 0.35 * 0.2) = 0.21330729007701543,
        // z = 0.3 / se; p = 2 * sf(z) (statsmodels: 0.15959894244264872).
        let t = two_proportion_z_test(Proportion::new(8, 10).unwrap(), Proportion::new(5, 10).unwrap());
        assert!(close(t.z, 1.4064216928154865, 1e-14), "{t:?}");
        assert!(close(t.p_value, 0.15959894244264872, 1e-15), "{t:?}");
    }

    #[test]
    fn z_test_without_variance_is_nan() {
        let zeros = two_proportion_z_test(Proportion::new(0, 10).unwrap(), Proportion::new(0, 15).unwrap());
        assert!(zeros.z.is_nan() && zeros.p_value.is_nan());
        let ones = two_proportion_z_test(Proportion::new(4, 4).unwrap(), Proportion::new(9, 9).unwrap());
        assert!(ones.z.is_nan() && ones.p_value.is_nan());
    }

    #[test]
    fn normal_tails_at_known_points() {
        assert_eq!(normal_cdf(0.0), 0.5);
        assert_eq!(normal_sf(0.0), 0.5);
        // mpmath: ncdf(-1.959963984540054) = 0.025000000000000012...
        assert!(close(normal_sf(Z_95), 0.025000000000000012, 1e-17));
        // mpmath: ncdf(-10) = 7.619853024160525e-24.
        assert!(close(normal_sf(10.0) / 7.619853024160525e-24, 1.0, 1e-15));
        assert_eq!(normal_sf(40.0), 0.0);
        assert_eq!(normal_cdf(f64::INFINITY), 1.0);
        assert_eq!(normal_sf(f64::NEG_INFINITY), 1.0);
        assert!(normal_sf(f64::NAN).is_nan());
    }

    #[test]
    fn mann_whitney_textbook_case() {
        // Pooled ranks: 11:1 12:2 16:3 17:4 19:5 20:6 22:7 24:8 29:9.
        // R_a = 3+5+7+8+9 = 32, u = 32 - 15 = 17, U = max(17, 3) = 17,
        // s = sqrt(20/12 * 10) = 4.08248290463863, z = 6.5 / s = 1.5921683328090657.
        let r = mann_whitney_u(&[19.0, 22.0, 16.0, 29.0, 24.0], &[20.0, 11.0, 17.0, 12.0]).unwrap();
        assert_eq!(r.u, 17.0);
        assert!(close(r.p_value, 0.11134688653314041, 1e-15), "{r:?}");
    }

    #[test]
    fn mann_whitney_ties_share_their_average_rank() {
        // Pooled 1 1 | 2 2 2 | 3 with a = [1, 2, 3], b = [1, 2, 2]: ranks 1.5 1.5 | 4 4 4 | 6.
        // R_a = 1.5 + 4 + 6 = 11.5, u = 11.5 - 6 = 5.5; U = max(5.5, 3.5) = 5.5;
        // ties: (8 - 2) + (27 - 3) = 30; s = sqrt(9/12 * (7 - 30/30)) = sqrt(4.5);
        // z = (5.5 - 4.5 - 0.5) / sqrt(4.5) = 0.23570226039551584; p = 2 sf(z).
        let r = mann_whitney_u(&[1.0, 2.0, 3.0], &[1.0, 2.0, 2.0]).unwrap();
        assert_eq!(r.u, 5.5);
        assert!(close(r.p_value, 2.0 * normal_sf(0.23570226039551584), 1e-15), "{r:?}");
    }

    #[test]
    fn mann_whitney_all_equal_has_p_one() {
        let r = mann_whitney_u(&[4.0, 4.0, 4.0], &[4.0, 4.0, 4.0, 4.0]).unwrap();
        assert_eq!(r, MannWhitney { u: 6.0, p_value: 1.0 });
    }

    #[test]
    fn mann_whitney_rejects_empty_and_nan() {
        assert_eq!(mann_whitney_u(&[], &[1.0]), Err(AbError::EmptyArm));
        assert_eq!(mann_whitney_u(&[f64::NAN], &[1.0]), Err(AbError::NonFiniteValue));
    }

    #[test]
    fn median_is_type_7() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[7.0]), Some(7.0));
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[1.0, f64::NAN]), None);
        assert!(quantile_sorted(&[], 0.5).is_nan());
        assert!(close(quantile_sorted(&[0.0, 1.0, 2.0, 3.0, 4.0], 0.975), 3.9, 1e-12));
    }

    #[test]
    fn resampled_median_has_the_exact_bootstrap_distribution() {
        // For odd n the bootstrap median is x[j] (0-based) or less exactly when
        // at least k + 1 = (n + 1) / 2 of the n draws land on x[0..=j]:
        // P = P[Binomial(n, (j + 1) / n) >= k + 1], computed here from the
        // binomial terms, independently of the sampler.
        let x = [10.0, 20.0, 30.0, 40.0, 50.0];
        let (n, k) = (5u32, 2u32);
        let binom = |m: u32, r: u32| -> f64 { (0..r).fold(1.0, |acc, i| acc * (m - i) as f64 / (i + 1) as f64) };
        let sampler = ResampledQuantile::new(&x, 0.5);
        let mut rng = StdRng::seed_from_u64(11);
        let draws: Vec<f64> = (0..200_000).map(|_| sampler.sample(&mut rng)).collect();
        for j in 0..5u32 {
            let p = (j + 1) as f64 / n as f64;
            let exact: f64 = (k + 1..=n).map(|r| binom(n, r) * p.powi(r as i32) * (1.0 - p).powi((n - r) as i32)).sum();
            let seen = draws.iter().filter(|&&d| d <= x[j as usize]).count() as f64 / draws.len() as f64;
            // 200,000 draws: standard error below 0.0012.
            assert!(close(seen, exact, 0.005), "P[median* <= x[{j}]]: {seen} vs exact {exact}");
        }
    }

    /// The sampler's distribution of the resample `p`-quantile of `x` against
    /// the plain resampling it stands for, at each of `cuts` (100,000 draws each).
    fn assert_like_resampling_one_by_one(x: &[f64], p: f64, seed: u64, cuts: &[f64]) {
        let sampler = ResampledQuantile::new(x, p);
        let mut rng = StdRng::seed_from_u64(seed);
        let fast: Vec<f64> = (0..100_000).map(|_| sampler.sample(&mut rng)).collect();
        let slow: Vec<f64> = (0..100_000)
            .map(|_| {
                let mut r: Vec<f64> = (0..x.len()).map(|_| x[rng.random_range(0..x.len())]).collect();
                r.sort_unstable_by(f64::total_cmp);
                quantile_sorted(&r, p)
            })
            .collect();
        for cut in cuts {
            let share = |v: &[f64]| v.iter().filter(|&&d| d <= *cut).count() as f64 / v.len() as f64;
            assert!(close(share(&fast), share(&slow), 0.008), "P[quantile_{p}* <= {cut}]");
        }
    }

    #[test]
    fn resampled_median_of_even_n_matches_resampling_one_by_one() {
        // Even n: the median averages two order statistics.
        assert_like_resampling_one_by_one(
            &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0],
            0.5,
            5,
            &[1.5, 3.0, 5.0, 6.0, 10.0, 12.0, 20.0],
        );
    }

    #[test]
    fn resampled_p95_matches_resampling_one_by_one() {
        // n = 7: h = 0.95 * 6 = 5.7, so the P95 interpolates the 6th and 7th
        // order statistics with weight 0.7.
        let x = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0];
        let sampler = ResampledQuantile::new(&x, 0.95);
        assert_eq!(sampler.k, 5);
        assert!(close(sampler.weight, 0.7, 1e-12));
        assert_like_resampling_one_by_one(&x, 0.95, 8, &[4.0, 10.0, 16.0, 25.0, 32.0, 50.0, 63.0]);
    }

    #[test]
    fn compare_quantiles_by_hand() {
        // A = 1..=5: P95 at h = 3.8, 4 + 0.8 * 1 = 4.8; B = 10, 20: h = 0.95, 10 + 0.95 * 10 = 19.5.
        let c = compare_quantiles(&[5.0, 1.0, 4.0, 2.0, 3.0], &[20.0, 10.0], 0.95, BootstrapConfig::default()).unwrap();
        assert!(close(c.quantile_a, 4.8, 1e-12) && close(c.quantile_b, 19.5, 1e-12), "{c:?}");
        assert!(close(c.difference.estimate, 14.7, 1e-12));
        assert!(c.difference.lo <= c.difference.estimate && c.difference.estimate <= c.difference.hi);
        // At p = 0.5 the interval is compare_medians' own.
        let (a, b) = ([1.0, 4.0, 2.0, 8.0, 5.0, 7.0], [3.0, 1.0, 0.5, 2.0]);
        let cfg = BootstrapConfig { resamples: 300, seed: 4 };
        assert_eq!(
            compare_quantiles(&a, &b, 0.5, cfg).unwrap().difference,
            compare_medians(&a, &b, cfg).unwrap().difference
        );
        assert_eq!(compare_quantiles(&a, &b, 1.5, cfg), Err(AbError::ProbabilityOutOfRange(1.5)));
        assert_eq!(compare_quantiles(&[], &b, 0.95, cfg), Err(AbError::EmptyArm));
    }

    #[test]
    fn compare_std_devs_by_hand() {
        // A = 10, 20, 30: s = 10. B = 1, 3: mean 2, s = sqrt(2). B - A = sqrt(2) - 10.
        let c = compare_std_devs(&[30.0, 10.0, 20.0], &[1.0, 3.0], BootstrapConfig::default()).unwrap();
        assert!(close(c.std_dev_a, 10.0, 1e-12) && close(c.std_dev_b, 2f64.sqrt(), 1e-12), "{c:?}");
        assert!(close(c.difference.estimate, 2f64.sqrt() - 10.0, 1e-12));
        // A resample of B draws 1 or 3 twice each way: s* is 0 (half the time) or sqrt(2);
        // of A, at most 20 (10, 30, 30 or similar), never negative.
        assert!(c.difference.lo >= -20.0 && c.difference.hi <= 2f64.sqrt(), "{c:?}");
        // Constant arms: zero width.
        let flat = compare_std_devs(&[5.0, 5.0], &[7.0, 7.0, 7.0], BootstrapConfig::default()).unwrap();
        assert_eq!((flat.difference.lo, flat.difference.estimate, flat.difference.hi), (0.0, 0.0, 0.0));
        assert_eq!(compare_std_devs(&[1.0], &[1.0, 2.0], BootstrapConfig::default()), Err(AbError::SingleValue));
        assert_eq!(compare_std_devs(&[], &[1.0, 2.0], BootstrapConfig::default()), Err(AbError::EmptyArm));
    }

    #[test]
    fn std_dev_of_shifted_values_loses_nothing() {
        // Deviations -6, -3, 3, 6 around 1e9: s^2 = 90 / 3 = 30; B the same values: difference 0.
        let a = [4.0, 7.0, 13.0, 16.0].map(|x| 1e9 + x);
        let c = compare_std_devs(&a, &[4.0, 7.0, 13.0, 16.0], BootstrapConfig { resamples: 50, seed: 1 }).unwrap();
        assert!(close(c.std_dev_a, 30f64.sqrt(), 1e-9) && close(c.difference.estimate, 0.0, 1e-9), "{c:?}");
    }

    #[test]
    fn sample_ratio_by_hand() {
        // 60 vs 40 against 50/50: e = 50 each, chi2 = (100 + 100) / 50 = 4, p = 2 P[Z > 2].
        let t = sample_ratio_test(60, 40, 0.5).unwrap();
        assert!(close(t.chi_square, 4.0, 1e-12) && close(t.p_value, 2.0 * normal_sf(2.0), 1e-15), "{t:?}");
        assert_eq!(t.share_b, 0.4);
        assert_eq!(t.share_b_interval, Proportion::new(40, 100).unwrap().wilson_interval());
        // 90 vs 10 against a 10% treatment: exactly as intended.
        let t = sample_ratio_test(90, 10, 0.1).unwrap();
        assert_eq!((t.chi_square, t.p_value), (0.0, 1.0));
        assert_eq!(sample_ratio_test(0, 0, 0.5), Err(AbError::EmptyArm));
        assert_eq!(sample_ratio_test(5, 5, 1.0), Err(AbError::SplitOutOfRange(1.0)));
    }

    #[test]
    fn bootstrap_is_reproducible_from_its_seed() {
        let a = [1.0, 4.0, 2.0, 8.0, 5.0, 7.0];
        let b = [3.0, 1.0, 0.5, 2.0];
        let cfg = BootstrapConfig { resamples: 500, seed: 42 };
        let first = bootstrap_median_difference(&a, &b, cfg).unwrap();
        assert_eq!(first, bootstrap_median_difference(&a, &b, cfg).unwrap());
        let other = bootstrap_median_difference(&a, &b, BootstrapConfig { seed: 43, ..cfg }).unwrap();
        assert_ne!((first.lo, first.hi), (other.lo, other.hi));
        // median(b) - median(a) = 1.5 - 4.5.
        assert_eq!(first.estimate, -3.0);
        assert!(first.lo <= first.estimate && first.estimate <= first.hi);
        assert_eq!(compare_medians(&a, &[], cfg), Err(AbError::EmptyArm));
        assert_eq!(compare_medians(&a, &b, BootstrapConfig { resamples: 0, seed: 0 }), Err(AbError::NoResamples));
    }

    #[test]
    fn bootstrap_cost_ratio_with_flat_rates_is_exact() {
        // Arm A pays 0.5 USD per token, arm B 0.25: every resample's ratio B / A is
        // (1000 * 0.25 T / T) / (1000 * 0.5 S / S) = 250 / 500 = 0.5 exactly.
        let a: Vec<RequestCost> =
            [10, 30, 7].iter().map(|&t| RequestCost { tokens: t, cost_usd: 0.5 * t as f64 }).collect();
        let b: Vec<RequestCost> =
            [4, 12].iter().map(|&t| RequestCost { tokens: t, cost_usd: 0.25 * t as f64 }).collect();
        let r = bootstrap_cost_ratio(&a, &b, BootstrapConfig { resamples: 200, seed: 9 }).unwrap();
        assert_eq!(r, BootstrapInterval { estimate: 0.5, lo: 0.5, hi: 0.5, resamples_used: 200 });
    }

    #[test]
    fn bootstrap_cost_ratio_skips_resamples_without_tokens() {
        // A's second request has no tokens; resamples that draw it twice have
        // no ratio. P = 1/4 each, so about 250 of 1000 are skipped.
        let a = [RequestCost { tokens: 100, cost_usd: 0.01 }, RequestCost { tokens: 0, cost_usd: 0.0 }];
        let b = [RequestCost { tokens: 100, cost_usd: 0.02 }];
        let r = bootstrap_cost_ratio(&a, &b, BootstrapConfig::default()).unwrap();
        assert_eq!(r.estimate, 2.0);
        assert!((650..=850).contains(&r.resamples_used), "{r:?}");
        assert_eq!((r.lo, r.hi), (2.0, 2.0));
    }

    #[test]
    fn bootstrap_cost_ratio_does_not_depend_on_row_order() {
        let a: Vec<RequestCost> =
            (1..40).map(|i| RequestCost { tokens: 100 + i * 7 % 13, cost_usd: 0.001 * (i % 5) as f64 }).collect();
        let b: Vec<RequestCost> = (1..30).map(|i| RequestCost { tokens: 90 + i, cost_usd: 0.002 }).collect();
        let (mut ra, mut rb) = (a.clone(), b.clone());
        ra.reverse();
        rb.rotate_left(7);
        let cfg = BootstrapConfig::default();
        assert_eq!(bootstrap_cost_ratio(&a, &b, cfg), bootstrap_cost_ratio(&ra, &rb, cfg));
    }

    #[test]
    fn bootstrap_cost_ratio_errors() {
        let ok = [RequestCost { tokens: 10, cost_usd: 0.1 }];
        let free = [RequestCost { tokens: 10, cost_usd: 0.0 }];
        let no_tokens = [RequestCost { tokens: 0, cost_usd: 0.1 }];
        let cfg = BootstrapConfig::default();
        assert_eq!(bootstrap_cost_ratio(&[], &ok, cfg), Err(AbError::EmptyArm));
        assert_eq!(bootstrap_cost_ratio(&free, &ok, cfg), Err(AbError::UndefinedRatio));
        assert_eq!(bootstrap_cost_ratio(&ok, &free, cfg).map(|r| r.estimate), Ok(0.0), "B may cost nothing");
        assert_eq!(bootstrap_cost_ratio(&no_tokens, &ok, cfg), Err(AbError::UndefinedRatio));
        assert_eq!(bootstrap_cost_ratio(&ok, &no_tokens, cfg), Err(AbError::UndefinedRatio));
        let negative = [RequestCost { tokens: 10, cost_usd: -0.1 }];
        assert_eq!(bootstrap_cost_ratio(&negative, &ok, cfg), Err(AbError::NegativeCost));
        let nan = [RequestCost { tokens: 10, cost_usd: f64::NAN }];
        assert_eq!(bootstrap_cost_ratio(&nan, &ok, cfg), Err(AbError::NonFiniteValue));
        let none = BootstrapConfig { resamples: 0, seed: 0 };
        assert_eq!(bootstrap_cost_ratio(&ok, &ok, none), Err(AbError::NoResamples));
    }

    #[test]
    fn holm_textbook_case() {
        // Sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1 = 0.02, 0.03, 0.06, 0.04,
        // then the running maximum makes the last one 0.06.
        let adj = holm_adjust(&[Some(0.01), Some(0.04), Some(0.03), Some(0.005)]).unwrap();
        assert_eq!(adj, vec![Some(0.03), Some(0.06), Some(0.06), Some(0.02)]);
    }

    #[test]
    fn holm_leaves_out_missing_and_caps_at_one() {
        let adj = holm_adjust(&[Some(0.4), None, Some(f64::NAN), Some(0.6)]).unwrap();
        assert_eq!(adj, vec![Some(0.8), None, None, Some(0.8)]);
        assert_eq!(holm_adjust(&[Some(0.9), Some(0.7)]).unwrap(), vec![Some(1.0), Some(1.0)]);
        assert_eq!(holm_adjust(&[]).unwrap(), vec![]);
        assert_eq!(holm_adjust(&[Some(1.5)]), Err(AbError::PValueOutOfRange(1.5)));
    }
}
