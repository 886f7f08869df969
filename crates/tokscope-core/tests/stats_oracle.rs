//! The statistics against independent references, from fixtures written by
//! `tests/oracle/bleu_kl.py`: sentence BLEU against sacreBLEU 2.x (13a tokens
//! exactly, scores within 1e-12), the token-id BLEU against the mediation
//! formula re-derived in Python, and KL divergence against
//! `scipy.stats.entropy(p, q, base=2)`.

use serde_json::Value;
use tokscope_core::stats::bleu::{bleu_from_tokens, sentence_bleu, tokenize_13a, Smoothing};
use tokscope_core::stats::kl::{kl_divergence_bits, KlError, ZERO_Q_EPSILON};

const BLEU: &str = include_str!("oracle/bleu.json");
const KL: &str = include_str!("oracle/kl.json");

fn fixture(text: &str) -> Value {
    serde_json::from_str(text).expect("fixture is valid JSON")
}

/// A float as the fixture writes it: a number, or "inf" / "-inf" / "nan".
fn num(v: &Value) -> f64 {
    match v {
        Value::Number(n) => n.as_f64().expect("number fits f64"),
        Value::String(s) if s == "inf" => f64::INFINITY,
        Value::String(s) if s == "-inf" => f64::NEG_INFINITY,
        Value::String(s) if s == "nan" => f64::NAN,
        other => panic!("not a float: {other}"),
    }
}

fn nums(v: &Value) -> Vec<f64> {
    v.as_array().expect("array").iter().map(num).collect()
}

fn text(v: &Value) -> &str {
    v.as_str().expect("string")
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array().expect("array").iter().map(|t| text(t).to_string()).collect()
}

#[test]
fn tokenize_13a_matches_sacrebleu() {
    let all = fixture(BLEU);
    for c in all["sentence_bleu"].as_array().expect("cases") {
        assert_eq!(tokenize_13a(text(&c["hyp"])), strings(&c["hyp_tokens"]), "hyp {:?}", text(&c["hyp"]));
        assert_eq!(tokenize_13a(text(&c["ref"])), strings(&c["ref_tokens"]), "ref {:?}", text(&c["ref"]));
    }
}

#[test]
fn sentence_bleu_matches_sacrebleu_on_72_pairs() {
    // Pairs include an empty hypothesis, an empty reference, both empty,
    // one-word sentences and punctuation-heavy ones (see bleu_kl.py).
    let all = fixture(BLEU);
    let cases = all["sentence_bleu"].as_array().expect("cases");
    assert!(cases.len() >= 50);
    let kinds =
        |pred: &dyn Fn(&str, &str) -> bool| cases.iter().filter(|c| pred(text(&c["hyp"]), text(&c["ref"]))).count();
    assert!(kinds(&|h, _| h.is_empty()) >= 2 && kinds(&|_, r| r.is_empty()) >= 2);
    assert!(kinds(&|h, _| !h.is_empty() && !h.contains(' ')) >= 3);
    for c in cases {
        let (hyp, reference) = (text(&c["hyp"]), text(&c["ref"]));
        let score = sentence_bleu(hyp, reference);
        let expected = num(&c["score"]);
        assert!((score - expected).abs() <= 1e-12, "{hyp:?} vs {reference:?}: {score} vs sacreBLEU {expected}");
    }
}

#[test]
fn add_one_bleu_matches_the_mediation_formula() {
    let all = fixture(BLEU);
    for c in all["lin_och_token_ids"].as_array().expect("cases") {
        let ids = |k: &str| -> Vec<u32> {
            c[k].as_array().expect("ids").iter().map(|v| v.as_u64().expect("id") as u32).collect()
        };
        let (cand, reference) = (ids("cand"), ids("ref"));
        let score = bleu_from_tokens(&cand, &reference, Smoothing::AddOneAboveUnigrams);
        assert!((score - num(&c["score"])).abs() <= 1e-12, "{cand:?} vs {reference:?}: {score}");
    }
}

#[test]
fn kl_epsilon_is_the_documented_one() {
    assert_eq!(num(&fixture(KL)["epsilon"]), ZERO_Q_EPSILON);
}

#[test]
fn kl_matches_scipy_and_the_epsilon_rule() {
    // Relative 1e-12 (absolute 1e-15 near 0). Where SciPy is finite the
    // expected value is SciPy's; where it is infinite (q = 0 < p) it is the
    // epsilon rule computed with NumPy.
    let all = fixture(KL);
    let mut compared_with_scipy = 0;
    for c in all["cases"].as_array().expect("cases") {
        if !c["error"].is_null() {
            continue;
        }
        let name = text(&c["name"]);
        let d = kl_divergence_bits(&nums(&c["p"]), &nums(&c["q"]), c["normalize"].as_bool().expect("bool"))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let scipy = num(&c["scipy"]);
        let expected = if scipy.is_finite() {
            compared_with_scipy += 1;
            scipy
        } else {
            num(&c["expected"])
        };
        assert!((d - expected).abs() <= 1e-15 + 1e-12 * expected.abs(), "{name}: {d} vs {expected}");
    }
    assert!(compared_with_scipy >= 30);
}

#[test]
fn kl_invalid_inputs_give_the_documented_error() {
    let all = fixture(KL);
    for c in all["cases"].as_array().expect("cases") {
        let Some(kind) = c["error"].as_str() else { continue };
        let name = text(&c["name"]);
        let err = kl_divergence_bits(&nums(&c["p"]), &nums(&c["q"]), c["normalize"].as_bool().expect("bool"))
            .expect_err(name);
        let matches = match kind {
            "length_mismatch" => matches!(err, KlError::LengthMismatch { .. }),
            "empty" => err == KlError::Empty,
            "invalid_entry" => matches!(err, KlError::InvalidEntry { .. }),
            "not_normalized" => matches!(err, KlError::NotNormalized { .. }),
            "zero_sum" => matches!(err, KlError::ZeroSum { .. }),
            other => panic!("unknown error kind {other}"),
        };
        assert!(matches, "{name}: expected {kind}, got {err:?}");
    }
}
