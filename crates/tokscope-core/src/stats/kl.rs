//! Kullback-Leibler divergence, in bits, between two discrete distributions
//! over the same outcomes (two models' next-token distributions over the same
//! candidate tokens, two arms' histograms over the same bins).

use std::fmt;

/// What a zero in `q` is replaced by where `p` is positive, so that the
/// divergence stays finite (SciPy returns infinity there). Each such outcome
/// then adds `p_i * log2(p_i / 1e-12)`, at most about 39.9 bits per unit of mass:
/// large enough to dominate any real disagreement, small enough to average.
pub const ZERO_Q_EPSILON: f64 = 1e-12;

/// How far from 1 a sum may be when the caller says the input is already a
/// distribution (`normalize = false`).
pub const SUM_TOLERANCE: f64 = 1e-6;

/// Which argument an error is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The first distribution.
    P,
    /// The second distribution.
    Q,
}

impl fmt::Display for Side {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Side::P => "p",
            Side::Q => "q",
        })
    }
}

/// Why a KL divergence cannot be computed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum KlError {
    /// `p` and `q` have different lengths.
    #[error("p has {p} entries but q has {q}")]
    LengthMismatch { p: usize, q: usize },
    /// `p` and `q` are empty.
    #[error("p and q are empty")]
    Empty,
    /// An entry is negative, NaN or infinite.
    #[error("{side}[{index}] = {value} is not a finite non-negative number")]
    InvalidEntry { side: Side, index: usize, value: f64 },
    /// With `normalize = false`, a sum is off 1 by more than [`SUM_TOLERANCE`].
    #[error("{side} sums to {sum}, not 1 within 1e-6 (pass normalize = true to rescale)")]
    NotNormalized { side: Side, sum: f64 },
    /// With `normalize = true`, all entries are 0: there is nothing to normalize.
    #[error("{side} is all zeros")]
    ZeroSum { side: Side },
}

fn checked_sum(values: &[f64], side: Side, normalize: bool) -> Result<f64, KlError> {
    if let Some((index, &value)) = values.iter().enumerate().find(|(_, v)| !v.is_finite() || **v < 0.0) {
        return Err(KlError::InvalidEntry { side, index, value });
    }
    let sum: f64 = values.iter().sum();
    if normalize && sum == 0.0 {
        return Err(KlError::ZeroSum { side });
    }
    if !normalize && (sum - 1.0).abs() > SUM_TOLERANCE {
        return Err(KlError::NotNormalized { side, sum });
    }
    Ok(sum)
}

/// `KL(p || q) = sum_i p_i * log2(p_i / q_i)` in bits.
///
/// - Both are divided by their sums first. With `normalize = false` each sum
///   must already be within [`SUM_TOLERANCE`] of 1, and the division only
///   removes rounding; with `normalize = true` any non-negative weights (for
///   example counts) are accepted.
/// - Terms with `p_i = 0` contribute 0 (the limit of `x log x`).
/// - Where `q_i = 0` exactly and `p_i > 0`, `q_i` is taken as
///   [`ZERO_Q_EPSILON`] (1e-12, no renormalization), so the result is finite.
///   Tiny positive `q_i` are used as they are.
/// - Rounding never makes the result negative: it is at least 0.
///
/// Equal to `scipy.stats.entropy(p, q, base=2)` whenever `q` has no zero
/// where `p` is positive.
///
/// ```
/// use tokscope_core::stats::kl::kl_divergence_bits;
/// // Fair coin against a 90/10 coin: 0.5 log2(5/9) + 0.5 log2(5) = log2(5/3).
/// let d = kl_divergence_bits(&[0.5, 0.5], &[0.9, 0.1], false)?;
/// assert!((d - (5.0f64 / 3.0).log2()).abs() < 1e-15);
/// # Ok::<(), tokscope_core::stats::kl::KlError>(())
/// ```
///
/// Errors: [`KlError`] for different lengths, empty input, a negative or
/// non-finite entry, a sum off 1 (without `normalize`), or an all-zero input
/// (with `normalize`).
pub fn kl_divergence_bits(p: &[f64], q: &[f64], normalize: bool) -> Result<f64, KlError> {
    if p.len() != q.len() {
        return Err(KlError::LengthMismatch { p: p.len(), q: q.len() });
    }
    if p.is_empty() {
        return Err(KlError::Empty);
    }
    let sum_p = checked_sum(p, Side::P, normalize)?;
    let sum_q = checked_sum(q, Side::Q, normalize)?;
    let nats: f64 = p
        .iter()
        .zip(q)
        .map(|(&pi, &qi)| {
            let (pi, qi) = (pi / sum_p, qi / sum_q);
            if pi == 0.0 {
                0.0
            } else {
                let qi = if qi == 0.0 { ZERO_Q_EPSILON } else { qi };
                pi * (pi / qi).ln()
            }
        })
        .sum();
    Ok((nats / std::f64::consts::LN_2).max(0.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identical_distributions_are_zero_bits_apart() {
        assert_eq!(kl_divergence_bits(&[0.2, 0.3, 0.5], &[0.2, 0.3, 0.5], false), Ok(0.0));
    }

    #[test]
    fn one_hot_against_uniform_is_log2_k() {
        // 1 * log2(1 / 0.25) = 2 bits; the zero entries of p add nothing.
        let d = kl_divergence_bits(&[1.0, 0.0, 0.0, 0.0], &[0.25; 4], false).unwrap();
        assert_eq!(d, 2.0);
    }

    #[test]
    fn zero_in_q_uses_the_epsilon() {
        // 0.5 log2(0.5 / 1) + 0.5 log2(0.5 / 1e-12) = -0.5 + 0.5 * 38.86313713864835.
        let d = kl_divergence_bits(&[0.5, 0.5], &[1.0, 0.0], false).unwrap();
        assert!((d - 18.931568569324174).abs() < 1e-13, "{d}");
    }

    #[test]
    fn counts_are_normalized_on_request() {
        // p = (0.25, 0.75), q = (0.5, 0.5): 0.25 log2(0.5) + 0.75 log2(1.5).
        let d = kl_divergence_bits(&[1.0, 3.0], &[5.0, 5.0], true).unwrap();
        assert!((d - (-0.25 + 0.75 * 1.5f64.log2())).abs() < 1e-15, "{d}");
        assert_eq!(
            kl_divergence_bits(&[1.0, 3.0], &[5.0, 5.0], false),
            Err(KlError::NotNormalized { side: Side::P, sum: 4.0 })
        );
    }

    #[test]
    fn invalid_input_is_an_error() {
        assert_eq!(kl_divergence_bits(&[1.0], &[0.5, 0.5], false), Err(KlError::LengthMismatch { p: 1, q: 2 }));
        assert_eq!(kl_divergence_bits(&[], &[], true), Err(KlError::Empty));
        assert_eq!(
            kl_divergence_bits(&[1.5, -0.5], &[0.5, 0.5], false),
            Err(KlError::InvalidEntry { side: Side::P, index: 1, value: -0.5 })
        );
        assert!(matches!(
            kl_divergence_bits(&[0.5, 0.5], &[f64::NAN, 0.5], true),
            Err(KlError::InvalidEntry { side: Side::Q, index: 0, .. })
        ));
        assert_eq!(kl_divergence_bits(&[0.0, 0.0], &[0.5, 0.5], true), Err(KlError::ZeroSum { side: Side::P }));
    }
}
