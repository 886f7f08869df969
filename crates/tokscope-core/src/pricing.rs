//! Model prices for the `cost` job and the `price_usd` UDF: a TOML pricing
//! file (format in `docs/metrics.md#pricing-file`) or LiteLLM's
//! `model_prices_and_context_window.json`, imported directly.
//!
//! Prices are USD per 1M tokens. A model's prices keep their history
//! (`effective_from`), so re-running a job over old logs prices each request
//! at the rates in force when it was served.

use std::collections::HashMap;
use std::path::Path;

use regex::Regex;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Rates in USD per 1M tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rates {
    /// Uncached prompt tokens.
    pub input: f64,
    /// Completion tokens (reasoning included).
    pub output: f64,
    /// Prompt tokens read from a prompt cache.
    pub cached_input: f64,
    /// Prompt tokens written to a prompt cache.
    pub cache_write: f64,
}

/// Rates that replace the base rates for ALL tokens of a request whose prompt
/// exceeds `above_prompt_tokens` (LiteLLM / Langfuse semantics).
#[derive(Debug, Clone, PartialEq)]
pub struct Tier {
    /// The tier applies when `prompt_tokens > above_prompt_tokens`.
    pub above_prompt_tokens: i64,
    /// The tier's rates.
    pub rates: Rates,
}

/// The prices of one model from one date on.
#[derive(Debug, Clone, PartialEq)]
pub struct PriceEntry {
    /// First instant (µs since the epoch, UTC) these prices apply; `None` = always.
    pub effective_from: Option<i64>,
    /// Rates below every tier.
    pub base: Rates,
    /// Tiers, ascending by threshold.
    pub tiers: Vec<Tier>,
}

/// A model's price history, ascending by `effective_from` (`None` first).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Schedule {
    entries: Vec<PriceEntry>,
}

/// Token usage of one request, as in the `requests` table.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Usage {
    /// The whole prompt (cached and cache-write tokens included).
    pub prompt: i64,
    /// Prompt tokens read from a cache.
    pub cached: i64,
    /// Prompt tokens written to a cache.
    pub cache_write: i64,
    /// Completion tokens.
    pub completion: i64,
}

/// The cost of one request in USD, by part.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Cost {
    /// Uncached prompt tokens.
    pub input: f64,
    /// Cache reads.
    pub cached_input: f64,
    /// Cache writes.
    pub cache_write: f64,
    /// Completion tokens.
    pub output: f64,
}

impl Cost {
    /// The request's total cost.
    pub fn total(&self) -> f64 {
        self.input + self.cached_input + self.cache_write + self.output
    }
}

impl Schedule {
    /// Every entry, ascending by `effective_from` (`None` first).
    pub fn entries(&self) -> &[PriceEntry] {
        &self.entries
    }

    /// The entry in force at `ts` (µs): the latest `effective_from <= ts`.
    pub fn at(&self, ts: i64) -> Option<&PriceEntry> {
        self.entries.iter().rev().find(|e| e.effective_from.is_none_or(|from| from <= ts))
    }
}

impl PriceEntry {
    /// The rates for a request with `prompt` tokens: the highest tier it exceeds, else the base.
    pub fn rates_for(&self, prompt: i64) -> &Rates {
        self.tiers.iter().rev().find(|t| prompt > t.above_prompt_tokens).map_or(&self.base, |t| &t.rates)
    }
}

/// Prices by model: exact names first, then regular expressions (full match) in file order.
#[derive(Debug, Clone, Default)]
pub struct Pricing {
    exact: HashMap<String, Schedule>,
    patterns: Vec<(String, Schedule)>,
    compiled: Vec<Regex>,
    /// Where the prices came from (file name), for messages.
    pub origin: String,
}

impl Pricing {
    /// Loads `spec`: a TOML file, or `litellm:<file.json>` for LiteLLM's price table.
    pub fn load(spec: &str) -> Result<Self> {
        let (litellm, path) = match spec.strip_prefix("litellm:") {
            Some(p) => (true, p),
            None => (false, spec),
        };
        let text = std::fs::read_to_string(Path::new(path)).map_err(|e| Error::io(path, e))?;
        if litellm {
            Self::from_litellm_json(&text, path)
        } else {
            Self::from_toml(&text, path)
        }
    }

    /// Whether no model has a price.
    pub fn is_empty(&self) -> bool {
        self.exact.is_empty() && self.patterns.is_empty()
    }

    /// Every price history: the exact names' (in no order), then the patterns' in file order.
    pub fn schedules(&self) -> impl Iterator<Item = &Schedule> {
        self.exact.values().chain(self.patterns.iter().map(|(_, s)| s))
    }

    /// The price history that applies to `model`, if any.
    pub fn schedule(&self, model: &str) -> Option<&Schedule> {
        if let Some(s) = self.exact.get(model) {
            return Some(s);
        }
        self.compiled.iter().position(|re| re.is_match(model)).map(|i| &self.patterns[i].1)
    }

    /// The cost of a request of `model` served at `ts` (µs); `None` when no price applies.
    pub fn cost(&self, model: &str, ts: i64, usage: Usage) -> Option<Cost> {
        self.schedule(model).and_then(|s| s.at(ts)).map(|e| cost_with(e, usage))
    }

    /// Parses the TOML pricing format (see `docs/metrics.md#pricing-file`).
    pub fn from_toml(text: &str, origin: &str) -> Result<Self> {
        let file: TomlFile = toml::from_str(text).map_err(|e| config_err!("pricing file {origin}: {e}"))?;
        let mut pricing = Pricing { origin: origin.to_string(), ..Default::default() };
        for (i, m) in file.model.into_iter().enumerate() {
            let ctx = |msg: String| config_err!("pricing file {origin}, [[model]] #{}: {msg}", i + 1);
            let base = Rates {
                input: m.input,
                output: m.output,
                cached_input: m.cached_input.unwrap_or(m.input),
                cache_write: m.cache_write.unwrap_or(m.input),
            };
            let mut tiers = Vec::new();
            for t in m.tier {
                let rates = Rates {
                    input: t.input.unwrap_or(base.input),
                    output: t.output.unwrap_or(base.output),
                    cached_input: t.cached_input.unwrap_or(base.cached_input),
                    cache_write: t.cache_write.unwrap_or(base.cache_write),
                };
                tiers.push(Tier { above_prompt_tokens: t.above_prompt_tokens, rates });
            }
            let effective_from = m.effective_from.as_ref().map(parse_date).transpose().map_err(ctx)?;
            let entry = PriceEntry { effective_from, base, tiers };
            match (m.model, m.pattern) {
                (Some(name), None) => pricing.add_exact(name, entry).map_err(ctx)?,
                (None, Some(pattern)) => pricing.add_pattern(pattern, entry).map_err(ctx)?,
                _ => return Err(ctx("give exactly one of `model` (exact name) or `pattern` (regex)".into())),
            }
        }
        Ok(pricing)
    }

    /// Imports LiteLLM's `model_prices_and_context_window.json`: every key with a
    /// numeric `input_cost_per_token` becomes an exact model name; `*_above_<N>k_tokens`
    /// keys become tiers at N * 1000 prompt tokens. Prices per token become per 1M.
    pub fn from_litellm_json(text: &str, origin: &str) -> Result<Self> {
        let doc: serde_json::Value =
            serde_json::from_str(text).map_err(|source| Error::Json { path: origin.into(), source })?;
        let Some(models) = doc.as_object() else {
            return Err(config_err!("LiteLLM prices {origin}: not a JSON object"));
        };
        let mut pricing = Pricing { origin: format!("litellm:{origin}"), ..Default::default() };
        let tier_key = Regex::new(r"^(input_cost_per_token|output_cost_per_token|cache_read_input_token_cost|cache_creation_input_token_cost)_above_(\d+)k_tokens$")
            .map_err(|e| config_err!("{e}"))?;
        for (name, spec) in models {
            let per_m = |key: &str| spec.get(key).and_then(|v| v.as_f64()).map(|v| v * 1e6);
            // Entries without a token input price (images, audio, `sample_spec`) cannot price a request.
            let Some(input) = per_m("input_cost_per_token") else { continue };
            let base = Rates {
                input,
                // Embedding models have no output price: they produce no completion tokens.
                output: per_m("output_cost_per_token").unwrap_or(0.0),
                cached_input: per_m("cache_read_input_token_cost").unwrap_or(input),
                cache_write: per_m("cache_creation_input_token_cost").unwrap_or(input),
            };
            let mut tiers: Vec<Tier> = Vec::new();
            let Some(fields) = spec.as_object() else { continue };
            for (key, value) in fields {
                let (Some(caps), Some(v)) = (tier_key.captures(key), value.as_f64()) else { continue };
                let Ok(k) = caps[2].parse::<i64>() else { continue };
                let threshold = k * 1000;
                let pos = match tiers.iter().position(|t| t.above_prompt_tokens == threshold) {
                    Some(p) => p,
                    None => {
                        tiers.push(Tier { above_prompt_tokens: threshold, rates: base });
                        tiers.len() - 1
                    }
                };
                let r = &mut tiers[pos].rates;
                match &caps[1] {
                    "input_cost_per_token" => r.input = v * 1e6,
                    "output_cost_per_token" => r.output = v * 1e6,
                    "cache_read_input_token_cost" => r.cached_input = v * 1e6,
                    _ => r.cache_write = v * 1e6,
                }
            }
            let ctx = |msg: String| config_err!("LiteLLM prices {origin}, {name}: {msg}");
            pricing.add_exact(name.clone(), PriceEntry { effective_from: None, base, tiers }).map_err(ctx)?;
        }
        Ok(pricing)
    }

    fn add_exact(&mut self, name: String, entry: PriceEntry) -> std::result::Result<(), String> {
        insert_entry(self.exact.entry(name).or_default(), entry)
    }

    fn add_pattern(&mut self, pattern: String, entry: PriceEntry) -> std::result::Result<(), String> {
        if let Some(i) = self.patterns.iter().position(|(p, _)| *p == pattern) {
            return insert_entry(&mut self.patterns[i].1, entry);
        }
        // Anchored so that `gpt-4o` never prices `gpt-4o-mini`.
        let re = Regex::new(&format!("^(?:{pattern})$")).map_err(|e| format!("bad pattern {pattern:?}: {e}"))?;
        let mut schedule = Schedule::default();
        insert_entry(&mut schedule, entry)?;
        self.patterns.push((pattern, schedule));
        self.compiled.push(re);
        Ok(())
    }
}

/// A [`Pricing`] as it travels inside a distributed query plan
/// (`engine::distributed`): every rate as the bits of its `f64`, so a
/// decoded table prices bit for bit as the original.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PricingWire {
    origin: String,
    /// Exact names, sorted, each with its entries.
    exact: Vec<(String, Vec<EntryWire>)>,
    /// Patterns in file order.
    patterns: Vec<(String, Vec<EntryWire>)>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
struct EntryWire {
    effective_from: Option<i64>,
    base: [u64; 4],
    tiers: Vec<(i64, [u64; 4])>,
}

fn rates_bits(r: &Rates) -> [u64; 4] {
    [r.input.to_bits(), r.output.to_bits(), r.cached_input.to_bits(), r.cache_write.to_bits()]
}

fn rates_from_bits(b: [u64; 4]) -> Rates {
    Rates {
        input: f64::from_bits(b[0]),
        output: f64::from_bits(b[1]),
        cached_input: f64::from_bits(b[2]),
        cache_write: f64::from_bits(b[3]),
    }
}

fn schedule_wire(s: &Schedule) -> Vec<EntryWire> {
    s.entries
        .iter()
        .map(|e| EntryWire {
            effective_from: e.effective_from,
            base: rates_bits(&e.base),
            tiers: e.tiers.iter().map(|t| (t.above_prompt_tokens, rates_bits(&t.rates))).collect(),
        })
        .collect()
}

fn schedule_from_wire(entries: Vec<EntryWire>) -> Schedule {
    Schedule {
        entries: entries
            .into_iter()
            .map(|e| PriceEntry {
                effective_from: e.effective_from,
                base: rates_from_bits(e.base),
                tiers: e
                    .tiers
                    .into_iter()
                    .map(|(above_prompt_tokens, r)| Tier { above_prompt_tokens, rates: rates_from_bits(r) })
                    .collect(),
            })
            .collect(),
    }
}

impl Pricing {
    /// The table as it travels in a plan.
    pub fn to_wire(&self) -> PricingWire {
        let mut exact: Vec<(String, Vec<EntryWire>)> =
            self.exact.iter().map(|(name, s)| (name.clone(), schedule_wire(s))).collect();
        exact.sort_by(|a, b| a.0.cmp(&b.0));
        PricingWire {
            origin: self.origin.clone(),
            exact,
            patterns: self.patterns.iter().map(|(p, s)| (p.clone(), schedule_wire(s))).collect(),
        }
    }

    /// The table back from its wire form (patterns compiled again, anchored as when loaded).
    pub fn from_wire(wire: PricingWire) -> Result<Self> {
        let mut pricing = Pricing { origin: wire.origin, ..Default::default() };
        pricing.exact = wire.exact.into_iter().map(|(name, e)| (name, schedule_from_wire(e))).collect();
        for (pattern, entries) in wire.patterns {
            let re =
                Regex::new(&format!("^(?:{pattern})$")).map_err(|e| config_err!("bad pattern {pattern:?}: {e}"))?;
            pricing.patterns.push((pattern, schedule_from_wire(entries)));
            pricing.compiled.push(re);
        }
        Ok(pricing)
    }
}

/// The cost of `usage` under `entry`. `prompt_tokens` includes cached and
/// cache-write tokens (docs/metrics.md), so the uncached part is what is left;
/// it is clamped at 0 so an inconsistent log line cannot make a negative cost.
pub fn cost_with(entry: &PriceEntry, u: Usage) -> Cost {
    let r = entry.rates_for(u.prompt);
    let uncached = u.prompt.saturating_sub(u.cached).saturating_sub(u.cache_write).max(0);
    Cost {
        input: uncached as f64 * r.input / 1e6,
        cached_input: u.cached as f64 * r.cached_input / 1e6,
        cache_write: u.cache_write as f64 * r.cache_write / 1e6,
        output: u.completion as f64 * r.output / 1e6,
    }
}

/// Adds `entry` to a model's history. Every entry of either file comes
/// through here, so its rates are checked and its tiers ordered here, once.
fn insert_entry(schedule: &mut Schedule, mut entry: PriceEntry) -> std::result::Result<(), String> {
    entry.tiers.sort_by_key(|t| t.above_prompt_tokens);
    check_rates(&entry.base)?;
    for tier in &entry.tiers {
        check_rates(&tier.rates)?;
    }
    if schedule.entries.iter().any(|e| e.effective_from == entry.effective_from) {
        return Err("two prices for the same model and effective_from".into());
    }
    schedule.entries.push(entry);
    // `None` (always) sorts first, so a dated entry overrides it from its date on.
    schedule.entries.sort_by_key(|e| e.effective_from);
    Ok(())
}

/// The highest rate accepted, in USD per 1M tokens: one dollar a token, over
/// a thousand times the dearest published price. Bounding the rates keeps every
/// cost finite, even for `i64::MAX` tokens (at most about 9.2e18 USD a component).
pub const MAX_RATE_PER_1M: f64 = 1e6;

fn check_rates(r: &Rates) -> std::result::Result<(), String> {
    let all = [r.input, r.output, r.cached_input, r.cache_write];
    if all.iter().all(|v| v.is_finite() && (0.0..=MAX_RATE_PER_1M).contains(v)) {
        Ok(())
    } else {
        Err(format!("rates must be between 0 and {MAX_RATE_PER_1M} USD per 1M tokens: {r:?}"))
    }
}

/// `effective_from`: a TOML date (`2024-06-01`), a date string, or an RFC 3339 instant; dates are UTC midnight.
fn parse_date(v: &toml::Value) -> std::result::Result<i64, String> {
    let s = match v {
        toml::Value::String(s) => s.clone(),
        toml::Value::Datetime(d) => d.to_string(),
        other => return Err(format!("effective_from must be a date, got {other:?}")),
    };
    if let Ok(d) = chrono::NaiveDate::parse_from_str(&s, "%Y-%m-%d") {
        let midnight = d.and_hms_opt(0, 0, 0).ok_or_else(|| format!("bad date {s}"))?;
        return Ok(midnight.and_utc().timestamp_micros());
    }
    chrono::DateTime::parse_from_rfc3339(&s)
        .map(|t| t.timestamp_micros())
        .map_err(|e| format!("effective_from {s:?} is neither YYYY-MM-DD nor RFC 3339: {e}"))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TomlFile {
    #[serde(default)]
    model: Vec<TomlModel>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TomlModel {
    model: Option<String>,
    pattern: Option<String>,
    effective_from: Option<toml::Value>,
    input: f64,
    output: f64,
    cached_input: Option<f64>,
    cache_write: Option<f64>,
    #[serde(default)]
    tier: Vec<TomlTier>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TomlTier {
    above_prompt_tokens: i64,
    input: Option<f64>,
    output: Option<f64>,
    cached_input: Option<f64>,
    cache_write: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
[[model]]
model = "m"
input = 2.0
output = 8.0
cached_input = 0.5
cache_write = 2.5
[[model.tier]]
above_prompt_tokens = 1000
input = 4.0

[[model]]
model = "m"
effective_from = 2024-07-01
input = 1.0
output = 4.0

[[model]]
pattern = "llama-.*"
input = 0.1
output = 0.2
"#;

    #[test]
    fn exact_beats_pattern_and_history_and_tiers_apply() {
        let p = Pricing::from_toml(FILE, "t").unwrap();
        let u = Usage { prompt: 1000, cached: 100, cache_write: 200, completion: 10 };
        let june = chrono::DateTime::parse_from_rfc3339("2024-06-30T23:59:59Z").unwrap().timestamp_micros();
        let july = chrono::DateTime::parse_from_rfc3339("2024-07-01T00:00:00Z").unwrap().timestamp_micros();
        // 700 * 2 + 100 * 0.5 + 200 * 2.5 + 10 * 8 = 2030 per 1M.
        assert!((p.cost("m", june, u).unwrap().total() - 2030e-6).abs() < 1e-15);
        // Over the tier: input 4, others stay at base: 701 * 4 + 50 + 500 + 80 = 3434.
        let big = Usage { prompt: 1001, cached: 100, cache_write: 200, completion: 10 };
        assert!((p.cost("m", june, big).unwrap().total() - 3434e-6).abs() < 1e-15);
        // July: 1.0 everywhere on input (defaults), 4.0 out: 1000 * 1 + 10 * 4.
        assert!((p.cost("m", july, u).unwrap().total() - 1040e-6).abs() < 1e-15);
        assert!(p.cost("llama-3", 0, u).is_some());
        assert!(p.cost("xllama-3", 0, u).is_none(), "patterns are anchored");
        assert!(p.cost("other", 0, u).is_none());
    }

    #[test]
    fn bad_files_are_config_errors() {
        assert!(Pricing::from_toml("[[model]]\ninput = 1\noutput = 1\n", "t").is_err());
        assert!(Pricing::from_toml("[[model]]\nmodel='a'\ninput = -1\noutput = 1\n", "t").is_err());
        assert!(Pricing::from_toml("[[model]]\npattern='('\ninput = 1\noutput = 1\n", "t").is_err());
    }

    #[test]
    fn litellm_rates_are_checked_like_the_toml_ones() {
        // 2e306 per token is infinite per 1M tokens; a negative price is refused as in TOML.
        let tier = r#"{"m": {"input_cost_per_token": 1e-06, "input_cost_per_token_above_128k_tokens": 2e306}}"#;
        let negative = r#"{"m": {"input_cost_per_token": 1e-06, "output_cost_per_token": -1e-06}}"#;
        for text in [tier, negative] {
            let err = Pricing::from_litellm_json(text, "p.json").unwrap_err().to_string();
            assert!(err.contains("p.json, m: rates must be between 0 and 1000000 USD per 1M tokens"), "{err}");
        }
        assert!(Pricing::from_litellm_json(r#"{"m": {"input_cost_per_token": 1e-06}}"#, "p.json").is_ok());
    }

    #[test]
    fn rates_are_bounded_so_every_cost_is_finite() {
        // 1e305 per 1M is finite, but 1e305 * 3e5 tokens is not: refused by both loaders.
        let toml = "[[model]]\nmodel='m'\ninput = 1e305\noutput = 1\n";
        let err = Pricing::from_toml(toml, "t").unwrap_err().to_string();
        assert!(err.contains("rates must be between 0 and 1000000 USD per 1M tokens"), "{err}");
        let json = r#"{"m": {"input_cost_per_token": 1e-06, "output_cost_per_token": 1e299}}"#;
        assert!(Pricing::from_litellm_json(json, "p.json").is_err());
        // The highest rate accepted, on the most tokens a log can hold: 4 finite components.
        let max = format!("[[model]]\nmodel='m'\ninput = {MAX_RATE_PER_1M:?}\noutput = {MAX_RATE_PER_1M:?}\n");
        let p = Pricing::from_toml(&max, "t").unwrap();
        let huge = Usage { prompt: i64::MAX, cached: i64::MAX, cache_write: i64::MAX, completion: i64::MAX };
        let cost = p.cost("m", 0, huge).unwrap();
        assert!(cost.total().is_finite(), "{cost:?}");
        assert_eq!(cost.input, 0.0, "cached and cache-write tokens leave no uncached input");
        let inconsistent = Usage { prompt: i64::MAX, cached: -1, cache_write: 0, completion: 0 };
        assert!(p.cost("m", 0, inconsistent).unwrap().total().is_finite());
    }
}
