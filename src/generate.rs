//! Synthetic access logs for demos, tests and benchmarks: several models,
//! log-normal prompt lengths reaching past 128K, EOS markers, silent
//! truncations, length stops, optional per-token data, and optionally
//! experiment arms (a `variant` per request, and an arm that silently
//! truncates a share of its long-prompt responses). Deterministic for a given
//! seed; arms are drawn from their own generator, so a log with arms is the
//! same traffic as the log without them, labelled.

use std::io::Write;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, LogNormal};
use serde_json::json;

use crate::error::{Error, Result};

tokscope_core::named_enum! {
    /// Formats the generator can write (named as the ingest formats that read them).
    pub enum GenFormat as "generator format" {
        /// tokscope's canonical full-token log.
        Canonical = "canonical",
        /// OpenAI Chat Completions responses in a gateway envelope.
        OpenaiChat = "openai_chat",
        /// Anthropic Messages responses in a gateway envelope.
        Anthropic = "anthropic",
    }
}

/// Generator settings.
#[derive(Debug, Clone)]
pub struct GenOptions {
    /// Number of requests (lines).
    pub requests: usize,
    /// Output format.
    pub format: GenFormat,
    /// Random seed.
    pub seed: u64,
    /// Emit per-token logprobs and emission times (canonical and OpenAI).
    pub token_data: bool,
    /// Approximate characters of output text per request (controls line size).
    pub output_chars: usize,
    /// Spread the requests evenly over this many days from 2024-06-01 (UTC);
    /// `None`: one request every second on average.
    pub days: Option<u32>,
    /// Experiment arms, each request in one of them with equal probability
    /// (logged as `variant`); none: no `variant` field.
    pub arms: Vec<String>,
    /// An arm that silently truncates a share of its long-prompt responses.
    pub arm_truncation: Option<ArmTruncation>,
    /// Log who each request ran for (`team`, `user_id`, `tags`, `provider`),
    /// drawn from a generator of its own: the rest of the log is unchanged.
    pub attribution: bool,
}

/// Extra silent truncations in one arm: each of its responses to a prompt of
/// at least `min_prompt_tokens` is, with probability `share`, cut without its
/// EOS marker (canonical format).
#[derive(Debug, Clone, PartialEq)]
pub struct ArmTruncation {
    /// The arm.
    pub arm: String,
    /// Probability in [0, 1].
    pub share: f64,
    /// Prompts shorter than this are left alone.
    pub min_prompt_tokens: i64,
}

impl ArmTruncation {
    /// Parses `ARM:SHARE:MIN_PROMPT_TOKENS` (K = 1024), e.g. `candidate:0.12:16K`.
    pub fn parse(spec: &str) -> Result<Self> {
        let bad = || {
            config_err!("--arm-truncation expects ARM:SHARE:MIN_PROMPT_TOKENS such as candidate:0.12:16K, got {spec:?}")
        };
        let mut parts = spec.split(':');
        let (Some(arm), Some(share), Some(min), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
            return Err(bad());
        };
        let share: f64 = share.trim().parse().map_err(|_| bad())?;
        let min = min.trim();
        let min_prompt_tokens = match min.strip_suffix(['K', 'k']) {
            Some(n) => n.parse::<i64>().map(|n| n * 1024),
            None => min.parse::<i64>(),
        }
        .map_err(|_| bad())?;
        if arm.trim().is_empty() || !(0.0..=1.0).contains(&share) || min_prompt_tokens < 0 {
            return Err(bad());
        }
        Ok(ArmTruncation { arm: arm.trim().to_string(), share, min_prompt_tokens })
    }
}

impl Default for GenOptions {
    fn default() -> Self {
        Self {
            requests: 1000,
            format: GenFormat::Canonical,
            seed: 42,
            token_data: false,
            output_chars: 600,
            days: None,
            arms: Vec::new(),
            arm_truncation: None,
            attribution: false,
        }
    }
}

/// Seed offset of the generator that draws arms, so that adding arms leaves
/// the rest of the log unchanged.
const ARM_SEED_OFFSET: u64 = 0x5eed_a4b5;

/// Seed offset of the generator that draws attribution.
const ATTRIBUTION_SEED_OFFSET: u64 = 0x5eed_a771;

/// Teams, the first ones busier (a request's team is the smaller of two draws).
const TEAMS: [&str; 12] = [
    "search", "chat", "ads", "support", "billing", "infra", "growth", "mobile", "data", "legal", "security", "research",
];

/// Tags a request may carry (none, one or two).
const TAGS: [&str; 5] = ["feature:search", "feature:chat", "feature:summarize", "env:prod", "env:staging"];

/// The provider serving each of [`MODELS`].
const PROVIDERS: [&str; 4] = ["vllm", "vllm", "deepseek", "mistral"];

/// `line` with a team, user, tags and provider drawn from `rng`.
fn attribute(line: &mut serde_json::Value, rng: &mut StdRng, model_index: usize) {
    let team = rng.random_range(0..TEAMS.len()).min(rng.random_range(0..TEAMS.len()));
    line["team"] = json!(TEAMS[team]);
    line["user_id"] = json!(format!("user-{:04}", rng.random_range(0..500)));
    let tags: Vec<&str> = (0..rng.random_range(0..3)).map(|_| TAGS[rng.random_range(0..TAGS.len())]).collect();
    line["tags"] = json!(tags);
    line["provider"] = json!(PROVIDERS[model_index]);
}

const MODELS: [(&str, &str); 4] = [
    ("llama-3.1-8b-instruct", "<|eot_id|>"),
    ("qwen2.5-72b-instruct", "<|im_end|>"),
    ("deepseek-v3", "<｜end▁of▁sentence｜>"),
    ("mistral-7b-instruct", "</s>"),
];

const WORDS: [&str; 24] = [
    "the", "model", "token", "answer", "because", "request", "latency", "context", "window", "cache", "output",
    "prompt", "value", "system", "user", "result", "is", "of", "and", "to", "a", "in", "we", "data",
];

fn text(rng: &mut StdRng, chars: usize) -> String {
    let mut s = String::with_capacity(chars + 16);
    while s.len() < chars {
        if !s.is_empty() {
            s.push(' ');
        }
        s.push_str(WORDS[rng.random_range(0..WORDS.len())]);
    }
    s
}

/// Writes `opts.requests` lines to `out`.
pub fn generate(opts: &GenOptions, out: &mut dyn Write) -> Result<()> {
    if let Some(t) = &opts.arm_truncation {
        if !opts.arms.contains(&t.arm) {
            return Err(config_err!("--arm-truncation names arm {:?}, which is not one of --arms", t.arm));
        }
        if opts.format != GenFormat::Canonical {
            return Err(config_err!(
                "--arm-truncation needs the canonical format (it removes EOS markers from raw output)"
            ));
        }
    }
    let mut rng = StdRng::seed_from_u64(opts.seed);
    let mut arm_rng = StdRng::seed_from_u64(opts.seed.wrapping_add(ARM_SEED_OFFSET));
    let mut attribution_rng = StdRng::seed_from_u64(opts.seed.wrapping_add(ATTRIBUTION_SEED_OFFSET));
    // Median prompt ~1.1K tokens; the tail passes 128K a few times per 10K requests.
    let prompt_dist = LogNormal::new(7.0, 1.6).map_err(|e| config_err!("{e}"))?;
    let start_ms: i64 = 1_717_200_000_000; // 2024-06-01T00:00:00Z
    let mut ts_ms = start_ms;
    // Mean gap between requests: 1 s, or what spreads them over `days`.
    let gap_ms: i64 = match opts.days {
        Some(days) => (i64::from(days) * 86_400_000 / opts.requests.max(1) as i64).max(1),
        None => 1_000,
    };
    for i in 0..opts.requests {
        ts_ms += rng.random_range(0..2 * gap_ms);
        let model_index = rng.random_range(0..MODELS.len());
        let (model, marker) = MODELS[model_index];
        let prompt_tokens = (prompt_dist.sample(&mut rng) as i64).clamp(1, 200_000);
        let max_tokens: i64 = [256, 512, 1024, 4096][rng.random_range(0..4)];
        let roll: f64 = rng.random();
        // 75% proper EOS, 12% length stop at the cap, 13% silent truncation.
        let (mut kind, mut completion_tokens) = if roll < 0.75 {
            ("eos", rng.random_range(1..max_tokens))
        } else if roll < 0.87 {
            ("length", max_tokens)
        } else {
            ("trunc", rng.random_range(1..max_tokens))
        };
        let arm = (!opts.arms.is_empty()).then(|| opts.arms[arm_rng.random_range(0..opts.arms.len())].as_str());
        let cut: f64 = arm_rng.random();
        if let (Some(arm), Some(t)) = (arm, &opts.arm_truncation) {
            if arm == t.arm && prompt_tokens >= t.min_prompt_tokens && cut < t.share {
                // Cut below the cap, without a marker: a silent truncation.
                kind = "trunc";
                completion_tokens = completion_tokens.min(max_tokens - 1).max(1);
            }
        }
        let cached_tokens = if rng.random_bool(0.3) { rng.random_range(0..=prompt_tokens) } else { 0 };
        let ttft_ms = 20.0 + prompt_tokens as f64 * 0.05 * rng.random_range(0.8..1.2);
        let tpot = rng.random_range(8.0..40.0);
        let latency_ms = ttft_ms + tpot * (completion_tokens - 1) as f64;
        let mut output = text(&mut rng, opts.output_chars);
        if kind == "eos" {
            output.push_str(marker);
        }
        let finish = if kind == "length" { "length" } else { "stop" };
        let prompt = text(&mut rng, 120);
        let ts = chrono::DateTime::from_timestamp_millis(ts_ms).map(|d| d.to_rfc3339()).unwrap_or_default();
        let n_tok = completion_tokens.min(64) as usize;
        let mut line = match opts.format {
            GenFormat::Canonical => {
                let mut v = json!({
                    "ts": ts, "request_id": format!("req-{i:08}"), "session_id": format!("s-{}", i / 4),
                    "model": model, "status": 200, "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion_tokens, "cached_tokens": cached_tokens,
                    "max_tokens": max_tokens, "ttft_ms": (ttft_ms * 1000.0).round() / 1000.0,
                    "latency_ms": (latency_ms * 1000.0).round() / 1000.0, "finish_reason": finish,
                    "prompt": prompt, "model_output": output, "region": "eu-west-1",
                });
                if opts.token_data {
                    let (lps, times) = token_data(&mut rng, n_tok, ttft_ms, tpot);
                    v["logprobs"] = lps;
                    v["token_times_ms"] = times;
                }
                v
            }
            GenFormat::OpenaiChat => {
                let mut choice = json!({"index": 0, "message": {"role": "assistant", "content": output.trim_end_matches(marker)}, "finish_reason": finish});
                if opts.token_data {
                    choice["logprobs"] = json!({"content": token_data(&mut rng, n_tok, ttft_ms, tpot).0});
                }
                json!({
                    "ts": ts, "latency_ms": latency_ms, "ttft_ms": ttft_ms,
                    "request": {"model": model, "max_tokens": max_tokens, "messages": [{"role": "user", "content": prompt}]},
                    "response": {"id": format!("chatcmpl-{i}"), "object": "chat.completion", "created": ts_ms / 1000,
                        "model": model, "choices": [choice],
                        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                            "total_tokens": prompt_tokens + completion_tokens,
                            "prompt_tokens_details": {"cached_tokens": cached_tokens}}}
                })
            }
            GenFormat::Anthropic => {
                let write = (prompt_tokens - cached_tokens) / 3;
                json!({
                    "ts": ts, "latency_ms": latency_ms, "ttft_ms": ttft_ms,
                    "request": {"model": model, "max_tokens": max_tokens},
                    "response": {"id": format!("msg_{i}"), "type": "message", "role": "assistant", "model": model,
                        "content": [{"type": "text", "text": output.trim_end_matches(marker)}],
                        "stop_reason": if kind == "length" { "max_tokens" } else { "end_turn" },
                        "usage": {"input_tokens": prompt_tokens - cached_tokens - write, "output_tokens": completion_tokens,
                            "cache_read_input_tokens": cached_tokens, "cache_creation_input_tokens": write}}
                })
            }
        };
        if let Some(arm) = arm {
            line["variant"] = json!(arm);
        }
        if opts.attribution {
            attribute(&mut line, &mut attribution_rng, model_index);
        }
        serde_json::to_writer(&mut *out, &line).map_err(|source| Error::Json { path: "generate".into(), source })?;
        out.write_all(b"\n").map_err(|e| Error::io("generate output", e))?;
    }
    Ok(())
}

fn token_data(rng: &mut StdRng, n: usize, ttft_ms: f64, tpot: f64) -> (serde_json::Value, serde_json::Value) {
    let mut lps = Vec::with_capacity(n);
    let mut times = Vec::with_capacity(n);
    let mut t = ttft_ms;
    for i in 0..n {
        let lp: f64 = -rng.random_range(0.0..3.0f64).powi(2) / 3.0;
        let alt: f64 = lp - rng.random_range(0.1..4.0);
        let word = WORDS[rng.random_range(0..WORDS.len())];
        lps.push(json!({"token": word, "logprob": lp, "top_logprobs": [{"token": word, "logprob": lp}, {"token": "alt", "logprob": alt}]}));
        if i > 0 {
            t += tpot * rng.random_range(0.5..1.5);
        }
        times.push(json!((t * 1000.0).round() / 1000.0));
    }
    (json!(lps), json!(times))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(opts: &GenOptions) -> Vec<serde_json::Value> {
        let mut out = Vec::new();
        generate(opts, &mut out).unwrap();
        out.split(|b| *b == b'\n').filter(|l| !l.is_empty()).map(|l| serde_json::from_slice(l).unwrap()).collect()
    }

    #[test]
    fn attribution_adds_its_four_keys_and_changes_nothing_else() {
        let plain = GenOptions { requests: 200, ..GenOptions::default() };
        let attributed = GenOptions { attribution: true, ..plain.clone() };
        let teams: std::collections::BTreeSet<String> = lines(&attributed)
            .into_iter()
            .zip(lines(&plain))
            .map(|(mut with, without)| {
                let team = with["team"].as_str().unwrap().to_string();
                assert!(with["user_id"].as_str().unwrap().starts_with("user-"));
                assert!(with["tags"].as_array().unwrap().len() <= 2);
                let provider = with["provider"].as_str().unwrap();
                let model = with["model"].as_str().unwrap();
                assert_eq!(provider, PROVIDERS[MODELS.iter().position(|(m, _)| *m == model).unwrap()]);
                let object = with.as_object_mut().unwrap();
                for key in ["team", "user_id", "tags", "provider"] {
                    object.remove(key);
                }
                assert_eq!(with, without);
                team
            })
            .collect();
        assert!(teams.len() > 6, "{teams:?}");
    }
}
