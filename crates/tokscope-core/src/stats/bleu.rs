//! Sentence-level BLEU, one implementation with two tokenizations and
//! smoothings: over text it equals sacreBLEU's `sentence_bleu(hyp, [ref])`
//! with its defaults (13a tokenizer, `exp` smoothing, effective order; the
//! `bleu4` SQL function), and over token ids it is the mediation metric
//! `bleu4` (add-one smoothing above unigrams). Definitions: docs/metrics.md.

use std::collections::HashMap;
use std::hash::Hash;

/// Highest n-gram order: BLEU-4 everywhere.
const MAX_ORDER: usize = 4;

/// How an n-gram order with no match is scored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Smoothing {
    /// sacreBLEU's sentence-BLEU default: `smooth_method='exp'` (Chen & Cherry
    /// 2014 method 3, NIST mteval) with effective order. The k-th order with
    /// no match (k = 1, 2, ...) gets precision `1 / (2^k * total_n)`; orders
    /// with no candidate n-gram at all are left out of the geometric mean
    /// (effective order); no matched unigram scores 0.
    Exp,
    /// Add-one smoothing for n >= 2 (Lin & Och 2004), as tokscope's mediation
    /// BLEU-4: `p_n = (matched_n + 1) / (total_n + 1)` for n >= 2, unigrams
    /// unsmoothed; always all four orders; an empty candidate scores 0.
    AddOneAboveUnigrams,
}

/// Clipped n-gram matches and candidate n-gram totals for n = 1..=4.
struct NgramStats {
    matched: [usize; MAX_ORDER],
    total: [usize; MAX_ORDER],
}

fn ngram_counts<T: Eq + Hash>(tokens: &[T], n: usize) -> HashMap<&[T], usize> {
    let mut counts = HashMap::new();
    // `windows` panics on 0 and yields nothing when n > len, which is what we want.
    for gram in tokens.windows(n) {
        *counts.entry(gram).or_insert(0) += 1;
    }
    counts
}

fn ngram_stats<T: Eq + Hash>(candidate: &[T], reference: &[T]) -> NgramStats {
    let mut stats = NgramStats { matched: [0; MAX_ORDER], total: [0; MAX_ORDER] };
    for n in 1..=MAX_ORDER {
        let cand = ngram_counts(candidate, n);
        let refs = ngram_counts(reference, n);
        stats.total[n - 1] = cand.values().sum();
        stats.matched[n - 1] = cand.iter().map(|(gram, &c)| c.min(refs.get(gram).copied().unwrap_or(0))).sum();
    }
    stats
}

/// BLEU of `candidate` against one `reference`, over tokens of any type, in
/// `[0, 1]`: the geometric mean of clipped n-gram precisions (n = 1..=4,
/// smoothed as `smoothing` says) times the brevity penalty `exp(1 - r/c)` when
/// the candidate length `c` is below the reference length `r` (and 0 when
/// `c = 0`).
///
/// ```
/// use tokscope_core::stats::bleu::{bleu_from_tokens, Smoothing};
/// // tokscope's mediation example: p = 4/5, 4/5, 3/4, 2/3 with add-one.
/// let b = bleu_from_tokens(&[1, 2, 3, 4, 5], &[1, 2, 3, 4, 6], Smoothing::AddOneAboveUnigrams);
/// assert!((b - (0.8f64 * 0.8 * 0.75 * (2.0 / 3.0)).powf(0.25)).abs() < 1e-12);
/// ```
pub fn bleu_from_tokens<T: Eq + Hash>(candidate: &[T], reference: &[T], smoothing: Smoothing) -> f64 {
    let stats = ngram_stats(candidate, reference);
    let (c, r) = (candidate.len() as f64, reference.len() as f64);
    match smoothing {
        Smoothing::Exp => exp_smoothed(&stats, c, r),
        Smoothing::AddOneAboveUnigrams => add_one_smoothed(&stats, c, r),
    }
}

/// sacreBLEU's `BLEU.compute_bleu` for one segment with `smooth_method='exp'`
/// and `effective_order=True`. It works in percent like sacreBLEU, so the
/// floating-point steps (and so the last bits) are the same, then divides by 100.
fn exp_smoothed(stats: &NgramStats, c: f64, r: f64) -> f64 {
    // No matched n-gram of any order (so no matched unigram): 0, whatever the
    // penalty (sacreBLEU's early return, issue #141).
    if stats.matched.iter().all(|&m| m == 0) {
        return 0.0;
    }
    let brevity = if c < r { (1.0 - r / c).exp() } else { 1.0 };
    let mut log_sum = 0.0;
    let mut effective_order = 0;
    let mut unmatched_factor = 1.0;
    for n in 0..MAX_ORDER {
        let total = stats.total[n] as f64;
        if stats.total[n] == 0 {
            break;
        }
        effective_order = n + 1;
        let precision = if stats.matched[n] == 0 {
            unmatched_factor *= 2.0;
            100.0 / (unmatched_factor * total)
        } else {
            100.0 * stats.matched[n] as f64 / total
        };
        log_sum += precision.ln();
    }
    brevity * (log_sum / effective_order as f64).exp() / 100.0
}

/// tokscope's `mediation::bleu::bleu4`, step for step.
fn add_one_smoothed(stats: &NgramStats, c: f64, r: f64) -> f64 {
    if c == 0.0 {
        return 0.0;
    }
    let mut log_sum = 0.0;
    for n in 0..MAX_ORDER {
        let (matched, total) = (stats.matched[n] as f64, stats.total[n] as f64);
        let (num, den) = if n == 0 { (matched, total) } else { (matched + 1.0, total + 1.0) };
        if num == 0.0 {
            return 0.0;
        }
        log_sum += (num / den).ln() / MAX_ORDER as f64;
    }
    let brevity = if c < r { (1.0 - r / c).exp() } else { 1.0 };
    brevity * log_sum.exp()
}

/// Sentence BLEU in `[0, 1]`, equal to sacreBLEU's
/// `sentence_bleu(hypothesis, [reference]).score / 100` with its defaults:
/// both strings right-stripped and tokenized by [`tokenize_13a`] (case kept),
/// then [`bleu_from_tokens`] with [`Smoothing::Exp`].
/// An empty hypothesis or reference scores 0.
///
/// Like sacreBLEU's, the score is computed from percentages, so a perfect
/// match can come out a few ulps above 1 (sacreBLEU: 100.00000000000004 for
/// the example below); it is not clamped, to stay bit-identical.
///
/// ```
/// use tokscope_core::stats::bleu::sentence_bleu;
/// assert_eq!(sentence_bleu("The cat sat on the mat.", "The cat sat on the mat."), 1.0000000000000004);
/// assert_eq!(sentence_bleu("", "The cat sat on the mat."), 0.0);
/// ```
pub fn sentence_bleu(hypothesis: &str, reference: &str) -> f64 {
    bleu_from_tokens(&tokenize_13a(hypothesis), &tokenize_13a(reference), Smoothing::Exp)
}

/// Python's `str.isspace()`, which `str.split()` and `str.rstrip()` use:
/// Unicode White_Space plus the four information separators U+001C..U+001F.
fn is_python_space(c: char) -> bool {
    matches!(
        c,
        '\t'..='\r'
            | '\u{1c}'..='\u{20}'
            | '\u{85}'
            | '\u{a0}'
            | '\u{1680}'
            | '\u{2000}'..='\u{200a}'
            | '\u{2028}'
            | '\u{2029}'
            | '\u{202f}'
            | '\u{205f}'
            | '\u{3000}'
    )
}

/// The ASCII symbols that mteval-v13a always splits off:
/// `{ | } ~`, `[ \ ] ^ _` and backquote, space `! " # $ % &`, `( ) * +`,
/// `: ; < = > ? @` and `/`. Not `'`, `-`, `.` or `,`, handled by the pair rules.
fn is_13a_symbol(c: char) -> bool {
    matches!(c, '{'..='~' | '['..='`' | ' '..='&' | '('..='+' | ':'..='@' | '/')
}

/// One left-to-right pass of a two-character rewrite rule, with the semantics of
/// Python's `re.sub` for a pattern of two single-character classes: matches do
/// not overlap, and after a match the scan resumes after its second character.
fn rewrite_pairs(
    text: &[char],
    first: impl Fn(char) -> bool,
    second: impl Fn(char) -> bool,
    replacement: impl Fn(char, char, &mut Vec<char>),
) -> Vec<char> {
    let mut out = Vec::with_capacity(text.len() + text.len() / 2);
    let mut i = 0;
    while i < text.len() {
        match text.get(i + 1) {
            Some(&next) if first(text[i]) && second(next) => {
                replacement(text[i], next, &mut out);
                i += 2;
            }
            _ => {
                out.push(text[i]);
                i += 1;
            }
        }
    }
    out
}

/// sacreBLEU's `13a` tokenizer (mteval-v13a, used by WMT), applied after
/// sacreBLEU's right strip of the line:
/// 1. remove `<skipped>`, join `-` + newline, turn newlines into spaces;
/// 2. if the line has `&`: unescape `&quot;`, `&amp;`, `&lt;`, `&gt;` in that
///    order (one pass each, so `&amp;lt;` becomes `<`);
/// 3. pad with a space on each side, then split off the ASCII symbols
///    ``{ | } ~ [ \ ] ^ _ ` ! " # $ % & ( ) * + : ; < = > ? @ /``;
///    split `.` and `,` from a preceding non-digit and from a following
///    non-digit (so `1,234.56` stays whole); split `-` after a digit;
/// 4. split on whitespace (Python's definition).
///
/// ```
/// use tokscope_core::stats::bleu::tokenize_13a;
/// assert_eq!(tokenize_13a("It costs $1,234.56 (net)."), ["It", "costs", "$", "1,234.56", "(", "net", ")", "."]);
/// ```
pub fn tokenize_13a(line: &str) -> Vec<String> {
    let line = line.trim_end_matches(is_python_space);
    let mut line = line.replace("<skipped>", "").replace("-\n", "").replace('\n', " ");
    if line.contains('&') {
        line = line.replace("&quot;", "\"").replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">");
    }

    let mut text = Vec::with_capacity(line.len() * 2 + 2);
    for c in std::iter::once(' ').chain(line.chars()).chain(std::iter::once(' ')) {
        if is_13a_symbol(c) {
            text.extend([' ', c, ' ']);
        } else {
            text.push(c);
        }
    }
    let not_digit = |c: char| !c.is_ascii_digit();
    let period_or_comma = |c: char| c == '.' || c == ',';
    // "([^0-9])([\.,])" -> "\1 \2 "
    let text = rewrite_pairs(&text, not_digit, period_or_comma, |a, b, out| out.extend([a, ' ', b, ' ']));
    // "([\.,])([^0-9])" -> " \1 \2"
    let text = rewrite_pairs(&text, period_or_comma, not_digit, |a, b, out| out.extend([' ', a, ' ', b]));
    // "([0-9])(-)" -> "\1 \2 "
    let text = rewrite_pairs(&text, |c| c.is_ascii_digit(), |c| c == '-', |a, b, out| out.extend([a, ' ', b, ' ']));

    text.split(|&c| is_python_space(c)).filter(|token| !token.is_empty()).map(|token| token.iter().collect()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The add-one BLEU-4 over token ids written out on its own (the mediation
    /// metric's formula, step by step), so the shared core is checked against
    /// an independent implementation bit for bit.
    fn project_bleu4(candidate: &[u32], reference: &[u32]) -> f64 {
        if candidate.is_empty() {
            return 0.0;
        }
        let mut log_sum = 0.0;
        for n in 1..=4 {
            let cand = project_ngrams(candidate, n);
            let refs = project_ngrams(reference, n);
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

    fn project_ngrams(ids: &[u32], n: usize) -> HashMap<&[u32], usize> {
        let mut counts = HashMap::new();
        if ids.len() >= n {
            for w in ids.windows(n) {
                *counts.entry(w).or_insert(0) += 1;
            }
        }
        counts
    }

    fn add_one(c: &[u32], r: &[u32]) -> f64 {
        bleu_from_tokens(c, r, Smoothing::AddOneAboveUnigrams)
    }

    #[test]
    fn add_one_reproduces_mediation_bleu4_documented_cases() {
        // The cases of src/mediation/bleu.rs's own tests.
        assert!((add_one(&[5, 6, 7], &[5, 6, 7]) - 1.0).abs() < 1e-12);
        assert_eq!(add_one(&[], &[1, 2]), 0.0);
        assert_eq!(add_one(&[9, 9], &[1, 2]), 0.0);
        let expected = (0.8f64 * 0.8 * 0.75 * (2.0 / 3.0)).powf(0.25);
        assert!((add_one(&[1, 2, 3, 4, 5], &[1, 2, 3, 4, 6]) - expected).abs() < 1e-12);
        // Shorter candidate: p1 = 1, p2 = 3/3, p3 = 2/2, p4 = 1/1; penalty exp(1 - 4/2).
        assert!((add_one(&[1, 2], &[1, 2, 3, 4]) - (1.0f64 - 2.0).exp()).abs() < 1e-12);
    }

    #[test]
    fn add_one_equals_mediation_bleu4_bit_for_bit() {
        let cases: [(&[u32], &[u32]); 8] = [
            (&[1, 2, 3, 4, 5], &[1, 2, 3, 4, 6]),
            (&[1, 2], &[1, 2, 3, 4]),
            (&[7], &[7]),
            (&[7], &[]),
            (&[3, 3, 3, 3, 3], &[3, 3, 1]),
            (&[1, 2, 1, 2, 1, 2], &[2, 1, 2, 1]),
            (&[4, 5, 6, 7, 8, 9, 10, 11, 12], &[4, 5, 6, 0, 8, 9, 10, 11, 12, 13]),
            (&[10, 20, 30, 40], &[40, 30, 20, 10]),
        ];
        for (c, r) in cases {
            assert_eq!(add_one(c, r).to_bits(), project_bleu4(c, r).to_bits(), "{c:?} vs {r:?}");
        }
    }

    #[test]
    fn exp_smoothing_hand_computed() {
        // 7 tokens each; matches 6/7, 4/6, 2/5, 1/4; no penalty.
        let b = sentence_bleu("The cat sat on the mat.", "The cat is on the mat.");
        let expected = (6.0f64 / 7.0 * (4.0 / 6.0) * (2.0 / 5.0) * (1.0 / 4.0)).powf(0.25);
        assert!((b - expected).abs() < 1e-14, "{b} vs {expected}");
        // p1 = 1/2; no bigram matches: first unmatched order gets 1 / (2 * 1);
        // no trigrams, so the effective order is 2: sqrt(0.5 * 0.5).
        assert!((sentence_bleu("the cat", "the dog") - 0.5).abs() < 1e-15);
        // One-word candidate: effective order 1, penalty exp(1 - 7/1).
        assert!((sentence_bleu("cat", "The cat sat on the mat.") - (-6.0f64).exp()).abs() < 1e-17);
        assert_eq!(sentence_bleu("cat", "dog"), 0.0);
        assert_eq!(sentence_bleu("cat", ""), 0.0);
        assert_eq!(sentence_bleu("", ""), 0.0);
    }

    #[test]
    fn exp_smoothing_halves_again_for_each_unmatched_order() {
        // Candidate a b c d vs reference a x y z w: p1 = 1/4, then orders 2, 3, 4
        // unmatched: 1/(2*3), 1/(4*2), 1/(8*1); c < r: penalty exp(1 - 5/4).
        let b = bleu_from_tokens(&["a", "b", "c", "d"], &["a", "x", "y", "z", "w"], Smoothing::Exp);
        let expected = (-0.25f64).exp() * (0.25f64 / 6.0 / 8.0 / 8.0).powf(0.25);
        assert!((b - expected).abs() < 1e-15, "{b} vs {expected}");
    }

    #[test]
    fn tokenizer_13a_splits_like_mteval() {
        assert_eq!(tokenize_13a("Hello, world!"), ["Hello", ",", "world", "!"]);
        assert_eq!(tokenize_13a("pi is 3.14, e is 2.72."), ["pi", "is", "3.14", ",", "e", "is", "2.72", "."]);
        assert_eq!(tokenize_13a("state-of-the-art"), ["state-of-the-art"]);
        assert_eq!(tokenize_13a("10-20"), ["10", "-", "20"]);
        assert_eq!(tokenize_13a("don't"), ["don't"]);
        assert_eq!(tokenize_13a("AT&amp;T &amp;lt;"), ["AT", "&", "T", "<"]);
        assert_eq!(tokenize_13a("hyphen-\nated <skipped>x"), ["hyphenated", "x"]);
        assert_eq!(tokenize_13a("x\u{1c}y\u{a0}z  \t"), ["x", "y", "z"]);
        assert_eq!(tokenize_13a(""), Vec::<String>::new());
    }
}
