//! Statistics shared by the SQL functions and jobs: pure functions over
//! plain values, each the one implementation of a definition in
//! `docs/metrics.md`.

pub mod ab;
pub mod bleu;
pub mod bootstrap;
pub mod kl;

/// Sample standard deviation (`n - 1` in the denominator, SQL's
/// `stddev_samp`) of the values; `None` with fewer than two. One pass
/// (Welford's update), so a request's values need not be collected.
pub fn sample_std_dev(values: impl IntoIterator<Item = f64>) -> Option<f64> {
    let (mut n, mut mean, mut m2) = (0u64, 0.0, 0.0);
    for x in values {
        n += 1;
        let delta = x - mean;
        mean += delta / n as f64;
        m2 += delta * (x - mean);
    }
    (n >= 2).then(|| (m2 / (n - 1) as f64).sqrt())
}

/// Exact quantile, linear interpolation between closest ranks (Hyndman-Fan
/// type 7, the SQL function `quantile_cont`, numpy's default) of values
/// already sorted ascending: `h = p (n - 1)`,
/// `x[floor h] + (h - floor h) (x[floor h + 1] - x[floor h])`. NaN when empty.
pub fn quantile_sorted(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let h = p * (sorted.len() - 1) as f64;
    let lo = h.floor() as usize;
    match sorted.get(lo + 1) {
        Some(&next) => sorted[lo] + (h - h.floor()) * (next - sorted[lo]),
        None => sorted[lo],
    }
}

#[cfg(test)]
mod tests {
    use super::sample_std_dev;

    #[test]
    fn sample_std_dev_by_hand() {
        // ITLs 10, 20, 30: mean 20, squares 100 + 0 + 100 over n - 1 = 2 -> 100.
        assert_eq!(sample_std_dev([10.0, 20.0, 30.0]), Some(10.0));
        assert_eq!(sample_std_dev([10.0, 30.0]), Some(200f64.sqrt()));
        assert_eq!(sample_std_dev([5.0]), None);
        assert_eq!(sample_std_dev([]), None);
        // Large offsets lose nothing: deviations -6, -3, 3, 6 -> 90 / 3 = 30.
        let shifted = [4.0, 7.0, 13.0, 16.0].map(|x| 1e9 + x);
        assert!((sample_std_dev(shifted).unwrap() - 30f64.sqrt()).abs() < 1e-9);
    }
}
