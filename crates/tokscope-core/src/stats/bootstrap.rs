//! The mean of a set of values with a seeded 95% percentile-bootstrap
//! interval: the summary the `mediation` job gives each effect
//! (`bootstrap_mean_ci` in SQL). Formulas: `docs/metrics.md`, "Mediation".

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::quantile_sorted;

/// Default number of bootstrap resamples.
pub const DEFAULT_RESAMPLES: usize = 1000;
/// Default bootstrap seed, so a report is reproducible unless asked otherwise.
pub const DEFAULT_SEED: u64 = 0;

/// Mean and percentile bootstrap interval of a set of values.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    /// Number of values (prompts).
    pub n: usize,
    /// Their mean.
    pub mean: f64,
    /// Lower bound of the 95% percentile-bootstrap interval.
    pub ci_lo: f64,
    /// Upper bound.
    pub ci_hi: f64,
}

/// Arithmetic mean; NaN for no values.
pub fn mean(values: &[f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    values.iter().sum::<f64>() / values.len() as f64
}

/// Mean with a 95% percentile bootstrap CI: `resamples` times, draw
/// `n` values with replacement (seeded `StdRng`), take the mean; the interval
/// is the 2.5th and 97.5th percentiles of those means (linear interpolation
/// between order statistics). One value, or identical values, give a zero-width
/// interval; no values give NaN.
pub fn summarize(values: &[f64], resamples: usize, seed: u64) -> Summary {
    let n = values.len();
    let m = mean(values);
    if n == 0 || resamples == 0 {
        return Summary { n, mean: m, ci_lo: f64::NAN, ci_hi: f64::NAN };
    }
    let mut rng = StdRng::seed_from_u64(seed);
    let mut means: Vec<f64> =
        (0..resamples).map(|_| (0..n).map(|_| values[rng.random_range(0..n)]).sum::<f64>() / n as f64).collect();
    means.sort_by(f64::total_cmp);
    Summary { n, mean: m, ci_lo: quantile_sorted(&means, 0.025), ci_hi: quantile_sorted(&means, 0.975) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_of_three_known_total_effects() {
        assert!((mean(&[0.1, 0.2, 0.6]) - 0.3).abs() < 1e-12);
        assert!(mean(&[]).is_nan());
    }

    #[test]
    fn bootstrap_interval_brackets_the_mean_within_the_range() {
        let values = [0.1, 0.2, 0.6, 0.35, -0.05, 0.4];
        let s = summarize(&values, 1000, 7);
        assert_eq!(s.n, 6);
        assert!(s.ci_lo <= s.mean && s.mean <= s.ci_hi, "{s:?}");
        assert!(s.ci_lo >= -0.05 && s.ci_hi <= 0.6, "{s:?}");
        assert!(s.ci_hi > s.ci_lo);
        // Seeded: the same seed gives the same interval.
        assert_eq!(summarize(&values, 1000, 7), s);
    }

    #[test]
    fn identical_values_give_a_zero_width_interval() {
        let s = summarize(&[0.25, 0.25, 0.25], 1000, 1);
        assert_eq!((s.mean, s.ci_lo, s.ci_hi), (0.25, 0.25, 0.25));
        let one = summarize(&[0.5], 10, 1);
        assert_eq!((one.ci_lo, one.ci_hi), (0.5, 0.5));
    }

    #[test]
    fn percentile_interpolates_like_numpy() {
        let v = [0.0, 1.0, 2.0, 3.0, 4.0];
        assert!((quantile_sorted(&v, 0.025) - 0.1).abs() < 1e-12);
        assert!((quantile_sorted(&v, 0.975) - 3.9).abs() < 1e-12);
    }
}
