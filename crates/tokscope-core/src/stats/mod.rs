//! Statistics shared by the SQL functions and jobs: pure functions over
//! plain values, each the one implementation of a definition in
//! `docs/metrics.md`.

pub mod ab;
pub mod bleu;
pub mod bootstrap;
pub mod kl;

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
