//! Model prices for the `cost` job and the `price_usd` UDF: a TOML pricing
//! file (format in `docs/metrics.md#pricing-file`) or LiteLLM's
//! `model_prices_and_context_window.json`, imported directly; by default a
//! dated snapshot of LiteLLM's table compiled into the binary
//! (`config/litellm/`), parsed the first time a price is looked up.
//!
//! Prices are USD per 1M tokens. A model's prices keep their history
//! (`effective_from`), so re-running a job over old logs prices each request
//! at the rates in force when it was served.

use std::collections::HashMap;
use std::path::Path;
use std::sync::LazyLock;

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

/// LiteLLM's price table as bundled (`config/litellm/README.md`: its provenance and licence).
pub const BUNDLED_LITELLM_JSON: &str = include_str!("../../../config/litellm/model_prices_and_context_window.json");

/// The bundled table's release and date, as `--help` and the docs name it.
pub const BUNDLED_SNAPSHOT: &str = "LiteLLM 1.110.2, 2026-11-20";

/// `--pricing none`: no prices at all (every request is unpriced).
pub const NO_PRICES: &str = "none";

/// The bundled table, parsed once per process on its first lookup (3.4 MB of
/// JSON: a command that prices nothing does not pay for it).
static BUNDLED_TABLE: LazyLock<PriceTable> = LazyLock::new(|| {
    // The file is part of the binary, not input: `bundled_table_parses_and_prices_real_model_names` loads it.
    Pricing::from_litellm_json(BUNDLED_LITELLM_JSON, "bundled")
        .map(|p| p.table_owned())
        .unwrap_or_else(|e| panic!("the bundled LiteLLM price table does not load: {e}"))
});

/// Prices by model: exact names first, then regular expressions (full match) in file order.
#[derive(Debug, Clone, Default)]
struct PriceTable {
    exact: HashMap<String, Schedule>,
    patterns: Vec<(String, Schedule)>,
    compiled: Vec<Regex>,
}

/// A price table: one loaded from a file, none, or the bundled snapshot of LiteLLM's.
#[derive(Debug, Clone, Default)]
pub struct Pricing {
    loaded: PriceTable,
    /// The bundled table (`loaded` is then empty).
    bundled: bool,
    /// Where the prices came from (file name), for messages.
    pub origin: String,
}

impl Pricing {
    /// The bundled snapshot of LiteLLM's table (the default without `--pricing`).
    pub fn bundled() -> Self {
        Pricing { bundled: true, origin: format!("bundled LiteLLM prices ({BUNDLED_SNAPSHOT})"), ..Default::default() }
    }

    /// No prices: every request is unpriced (`--pricing none`).
    pub fn none() -> Self {
        Pricing { origin: NO_PRICES.to_string(), ..Default::default() }
    }

    /// Whether this is the bundled table.
    pub fn is_bundled(&self) -> bool {
        self.bundled
    }

    fn table(&self) -> &PriceTable {
        if self.bundled {
            &BUNDLED_TABLE
        } else {
            &self.loaded
        }
    }

    fn table_owned(self) -> PriceTable {
        self.loaded
    }

    /// Loads `spec`: `none`, a TOML file, or `litellm:<file.json>` for LiteLLM's price table.
    pub fn load(spec: &str) -> Result<Self> {
        if spec == NO_PRICES {
            return Ok(Self::none());
        }
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
        let t = self.table();
        t.exact.is_empty() && t.patterns.is_empty()
    }

    /// Every price history: the exact names' (in no order), then the patterns' in file order.
    pub fn schedules(&self) -> impl Iterator<Item = &Schedule> {
        let t = self.table();
        t.exact.values().chain(t.patterns.iter().map(|(_, s)| s))
    }

    /// The price history that applies to `model`, if any: the name as logged
    /// (an exact name, then the first pattern matching it whole), else the
    /// same for the name without its first `/`-separated part, and so on
    /// (`openai/gpt-4o` is priced as `gpt-4o` when the table has no
    /// `openai/gpt-4o`; docs/metrics.md, "Model names").
    pub fn schedule(&self, model: &str) -> Option<&Schedule> {
        let table = self.table();
        let mut name = model;
        loop {
            if let Some(s) = table.exact.get(name) {
                return Some(s);
            }
            if let Some(i) = table.compiled.iter().position(|re| re.is_match(name)) {
                return Some(&table.patterns[i].1);
            }
            name = name.split_once('/')?.1;
        }
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
            // LiteLLM's documentation of its own fields, with zero prices: not a model.
            if name == "sample_spec" {
                continue;
            }
            let per_m = |key: &str| spec.get(key).and_then(|v| v.as_f64()).map(|v| v * 1e6);
            // Entries without a token input price (images, audio) cannot price a request.
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
        insert_entry(self.loaded.exact.entry(name).or_default(), entry)
    }

    fn add_pattern(&mut self, pattern: String, entry: PriceEntry) -> std::result::Result<(), String> {
        let table = &mut self.loaded;
        if let Some(i) = table.patterns.iter().position(|(p, _)| *p == pattern) {
            return insert_entry(&mut table.patterns[i].1, entry);
        }
        // Anchored so that `gpt-4o` never prices `gpt-4o-mini`.
        let re = Regex::new(&format!("^(?:{pattern})$")).map_err(|e| format!("bad pattern {pattern:?}: {e}"))?;
        let mut schedule = Schedule::default();
        insert_entry(&mut schedule, entry)?;
        table.patterns.push((pattern, schedule));
        table.compiled.push(re);
        Ok(())
    }
}

/// A [`Pricing`] as it travels inside a distributed query plan
/// (`engine::distributed`): every rate as the bits of its `f64`, so a
/// decoded table prices bit for bit as the original.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PricingWire {
    origin: String,
    /// The bundled table, which every tokscope binary holds: sent as this flag alone.
    bundled: bool,
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
        let table = &self.loaded;
        let mut exact: Vec<(String, Vec<EntryWire>)> =
            table.exact.iter().map(|(name, s)| (name.clone(), schedule_wire(s))).collect();
        exact.sort_by(|a, b| a.0.cmp(&b.0));
        PricingWire {
            origin: self.origin.clone(),
            bundled: self.bundled,
            exact,
            patterns: table.patterns.iter().map(|(p, s)| (p.clone(), schedule_wire(s))).collect(),
        }
    }

    /// The table back from its wire form (patterns compiled again, anchored as when loaded).
    pub fn from_wire(wire: PricingWire) -> Result<Self> {
        let mut pricing = Pricing { origin: wire.origin, bundled: wire.bundled, ..Default::default() };
        let table = &mut pricing.loaded;
        table.exact = wire.exact.into_iter().map(|(name, e)| (name, schedule_from_wire(e))).collect();
        for (pattern, entries) in wire.patterns {
            let re =
                Regex::new(&format!("^(?:{pattern})$")).map_err(|e| config_err!("bad pattern {pattern:?}: {e}"))?;
            table.patterns.push((pattern, schedule_from_wire(entries)));
            table.compiled.push(re);
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

    /// The cost of 1000 uncached prompt and 100 completion tokens, at any time.
    fn thousand_and_hundred(p: &Pricing, model: &str) -> Option<f64> {
        p.cost(model, 0, Usage { prompt: 1000, cached: 0, cache_write: 0, completion: 100 }).map(|c| c.total())
    }

    #[test]
    fn bundled_table_parses_and_prices_real_model_names() {
        let p = Pricing::bundled();
        assert!(p.is_bundled() && !p.is_empty());
        // Rates per token read off config/litellm/model_prices_and_context_window.json by hand.
        // Names as tests/data/real/ logs them: gpt-4o-mini 1.5e-7 / 6e-7 (LiteLLM, OTel, Langfuse),
        // claude-sonnet-4-5-20250929 3e-6 / 1.5e-5 (Anthropic's SDK fixtures).
        let cases: [(&str, Option<f64>); 4] = [
            ("gpt-4o-mini", Some(1000.0 * 1.5e-7 + 100.0 * 6e-7)),
            ("gpt-4o-mini-2024-07-18", Some(1000.0 * 1.5e-7 + 100.0 * 6e-7)),
            ("claude-sonnet-4-5-20250929", Some(1000.0 * 3e-6 + 100.0 * 1.5e-5)),
            // Names tokscope makes up for logs without one: never a price.
            ("otel:otel_vllm", None),
        ];
        for (model, want) in cases {
            let got = thousand_and_hundred(&p, model);
            assert!(got.zip(want).is_some_and(|(g, w)| (g - w).abs() <= 1e-15 * w) || got == want, "{model}: {got:?}");
        }
        // LiteLLM documents its fields under `sample_spec`, with zero prices: not a model.
        assert_eq!(thousand_and_hundred(&p, "sample_spec"), None);
    }

    #[test]
    fn a_provider_prefix_is_dropped_only_when_the_whole_name_has_no_price() {
        let p = Pricing::bundled();
        let close = |model: &str, want: f64| {
            let got = thousand_and_hundred(&p, model).unwrap_or(f64::NAN);
            assert!((got - want).abs() <= 1e-15 * want, "{model}: {got} != {want}");
        };
        // `azure/gpt-4-turbo` has its own key (1.1e-5 / 3.3e-5), dearer than `gpt-4-turbo` (1e-5 / 3e-5).
        close("azure/gpt-4-turbo", 1000.0 * 1.1e-5 + 100.0 * 3.3e-5);
        close("openai/gpt-4-turbo", 1000.0 * 1e-5 + 100.0 * 3e-5);
        close("anthropic/claude-sonnet-4-5-20250929", 1000.0 * 3e-6 + 100.0 * 1.5e-5);
        // Two parts dropped: no `bedrock/us-east-1/...` nor `us-east-1/...` key, `anthropic.claude-...` has one.
        close("bedrock/us-east-1/anthropic.claude-3-5-sonnet-20240620-v1:0", 1000.0 * 3e-6 + 100.0 * 1.5e-5);
        // A prefix never reaches a longer name, and case is as logged.
        assert_eq!(thousand_and_hundred(&p, "openai/"), None);
        assert_eq!(thousand_and_hundred(&p, "GPT-4O-MINI"), None);
        // The rule is the lookup's, so TOML tables follow it too (exact name, then pattern, per name).
        let toml = Pricing::from_toml("[[model]]\npattern = 'llama-.*'\ninput = 1.0\noutput = 1.0\n", "t").unwrap();
        assert!(toml.cost("vllm/llama-3", 0, Usage::default()).is_some());
        assert!(toml.cost("vllm/xllama-3", 0, Usage::default()).is_none());
    }

    #[test]
    fn pricing_none_prices_nothing() {
        let p = Pricing::load("none").unwrap();
        assert!(p.is_empty() && !p.is_bundled());
        assert_eq!(thousand_and_hundred(&p, "gpt-4o-mini"), None);
    }

    #[test]
    fn the_bundled_table_travels_as_a_flag() {
        let wire = Pricing::bundled().to_wire();
        assert!(wire.bundled && wire.exact.is_empty());
        let back = Pricing::from_wire(wire).unwrap();
        assert_eq!(
            thousand_and_hundred(&back, "gpt-4o-mini"),
            thousand_and_hundred(&Pricing::bundled(), "gpt-4o-mini")
        );
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
