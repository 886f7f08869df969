//! Sentence-level BLEU-4 over token ids, to compare a perturbed greedy output
//! with the clean one.

use std::collections::HashMap;

/// BLEU-4 of `candidate` against one `reference` (Papineni et al. 2002):
/// geometric mean of clipped n-gram precisions n = 1..4 times the brevity
/// penalty `exp(1 - r/c)` when `c < r`. Precisions for n >= 2 get add-one
/// smoothing (Lin & Och 2004), because outputs are short and one missing
/// 4-gram would otherwise zero the score. An empty candidate scores 0; a
/// candidate equal to the reference scores 1.
pub fn bleu4(candidate: &[u32], reference: &[u32]) -> f64 {
    if candidate.is_empty() {
        return 0.0;
    }
    let mut log_sum = 0.0;
    for n in 1..=4 {
        let cand = ngrams(candidate, n);
        let refs = ngrams(reference, n);
        let total: usize = cand.values().sum();
        let matched: usize = cand.iter().map(|(g, &c)| c.min(*refs.get(g).unwrap_or(&0))).sum();
        let (num, den) =
            if n == 1 { (matched as f64, total as f64) } else { (matched as f64 + 1.0, total as f64 + 1.0) };
        if num == 0.0 {
            return 0.0;
        }
        log_sum += (num / den).ln() / 4.0;
    }
    let (c, r) = (candidate.len() as f64, reference.len() as f64);
    let brevity = if c < r { (1.0 - r / c).exp() } else { 1.0 };
    brevity * log_sum.exp()
}

fn ngrams(ids: &[u32], n: usize) -> HashMap<&[u32], usize> {
    let mut counts = HashMap::new();
    if ids.len() >= n {
        for w in ids.windows(n) {
            *counts.entry(w).or_insert(0) += 1;
        }
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identical_is_one_empty_is_zero() {
        assert!((bleu4(&[5, 6, 7], &[5, 6, 7]) - 1.0).abs() < 1e-12);
        assert_eq!(bleu4(&[], &[1, 2]), 0.0);
        assert_eq!(bleu4(&[9, 9], &[1, 2]), 0.0);
    }

    #[test]
    fn hand_computed_case() {
        // p1 = 4/5, p2 = (3+1)/(4+1), p3 = (2+1)/(3+1), p4 = (1+1)/(2+1); c = r, no penalty.
        let expected = (0.8f64 * 0.8 * 0.75 * (2.0 / 3.0)).powf(0.25);
        assert!((bleu4(&[1, 2, 3, 4, 5], &[1, 2, 3, 4, 6]) - expected).abs() < 1e-12);
        // Shorter candidate: p1 = 1, p2 = 3/3, p3 = 2/2, p4 = 1/1; penalty exp(1 - 4/2).
        let short = bleu4(&[1, 2], &[1, 2, 3, 4]);
        assert!((short - (1.0f64 - 2.0).exp()).abs() < 1e-12);
    }
}
