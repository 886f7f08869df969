//! Sentence-level BLEU-4 over token ids, to compare a perturbed greedy output
//! with the clean one: the shared BLEU core
//! ([`tokscope_core::stats::bleu`]) with add-one smoothing above unigrams.

use tokscope_core::stats::bleu::{bleu_from_tokens, Smoothing};

/// BLEU-4 of `candidate` against one `reference` (Papineni et al. 2002):
/// geometric mean of clipped n-gram precisions n = 1..4 times the brevity
/// penalty `exp(1 - r/c)` when `c < r`. Precisions for n >= 2 get add-one
/// smoothing (Lin & Och 2004), because outputs are short and one missing
/// 4-gram would otherwise zero the score. An empty candidate scores 0; a
/// candidate equal to the reference scores 1.
pub fn bleu4(candidate: &[u32], reference: &[u32]) -> f64 {
    bleu_from_tokens(candidate, reference, Smoothing::AddOneAboveUnigrams)
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
