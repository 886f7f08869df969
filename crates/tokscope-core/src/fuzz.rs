//! The fuzz targets' entry points: one function per parser, taking arbitrary
//! bytes and asserting what must hold for any input (no panic, bounded work,
//! line accounting that reconciles) and for whatever a parser accepts (costs
//! finite and non-negative, shapes in range, token spans within the text,
//! tensors of their shape's length). `fuzz/` (cargo-fuzz, nightly) calls them
//! from one small binary each; `tests/fuzz_corpus.rs` replays every kept
//! corpus file and crash reproducer through [`run`] on stable, so a fixed
//! crash stays fixed.
//!
//! A target's name is its binary `fuzz/src/bin/<name>.rs` and its corpus
//! `fuzz/corpus/<name>/`. Every input format gets `format_<name>`
//! ([`format_line`]) from the registry: adding a format's target is one file.

use std::io::{Cursor, Read};

use std::path::Path;

use crate::architectures::Architectures;
use crate::formats::{Format, Framing};
use crate::lines::LineSplitter;
use crate::pricing::{Pricing, Usage};
use crate::reader::{LineCounts, ReaderBuilder};

/// A target's entry point: any bytes in, a panic when an invariant breaks.
pub type Entry = fn(&[u8]);

/// The targets that are not one per format, each with its entry point.
pub static TARGETS: &[(&str, Entry)] = &[
    ("detect", detect),
    ("lines", lines),
    ("reader", reader),
    ("pricing_toml", pricing_toml),
    ("litellm_json", litellm_json),
    ("architectures_toml", architectures_toml),
    #[cfg(feature = "model")]
    ("hf_config", hf_config),
    #[cfg(feature = "model")]
    ("tokenizer_json", tokenizer_json),
    #[cfg(feature = "model")]
    ("safetensors", safetensors),
];

/// Prefix of the per-format targets: `format_<format name>`.
pub const FORMAT_PREFIX: &str = "format_";

/// Every target's name: [`TARGETS`], then `format_<name>` per registered format.
pub fn target_names() -> Vec<String> {
    let fixed = TARGETS.iter().map(|(name, _)| name.to_string());
    fixed.chain(Format::names().into_iter().map(|f| format!("{FORMAT_PREFIX}{f}"))).collect()
}

/// Runs `target` on `data`; `false` when no target has that name.
pub fn run(target: &str, data: &[u8]) -> bool {
    if let Some((_, entry)) = TARGETS.iter().find(|(name, _)| *name == target) {
        entry(data);
        return true;
    }
    match target.strip_prefix(FORMAT_PREFIX) {
        Some(format) if format.parse::<Format>().is_ok() => {
            format_line(format, data);
            true
        }
        _ => false,
    }
}

/// Bytes read as a file of `format` (a registered name): detection of the
/// head and of the first line, then the whole reader with the format forced
/// (its framing, CSV header, event pairing, every derived column and the
/// Arrow builders), checked by [`read_checked`]; whatever the bytes, rows and
/// rejects that reconcile, never a panic.
pub fn format_line(format: &str, data: &[u8]) {
    let Ok(format) = format.parse::<Format>() else { panic!("{format} is not a registered format") };
    let _ = Format::detect_head(data);
    let first = data.split(|&b| b == b'\n').next().unwrap_or_default();
    if !first.trim_ascii().is_empty() {
        let _ = Format::detect(first);
    }
    read_checked(data, Some(format), 64 * 1024, 1 << 20);
}

/// Format detection over every registered format, on any bytes.
pub fn detect(line: &[u8]) {
    if let Some(format) = Format::detect(line) {
        assert!(Format::names().contains(&format.name()));
    }
}

/// Reads `data` in pieces of `piece` bytes (at least 1), the way a
/// decompressor hands out bytes, so buffer refills fall anywhere.
struct Pieces<'d> {
    data: &'d [u8],
    piece: usize,
}

impl Read for Pieces<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.piece.min(buf.len()).min(self.data.len());
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

/// The three leading bytes that configure a target, and the input after them.
fn settings(data: &[u8]) -> ([u8; 3], &[u8]) {
    let mut cfg = [0u8; 3];
    let n = data.len().min(3);
    cfg[..n].copy_from_slice(&data[..n]);
    (cfg, &data[n..])
}

/// The line splitter, with chunk size, line limit and read size taken from
/// the first three bytes: every line comes back once, in order, with its
/// number and offset, cut exactly when longer than the limit, and a chunk
/// holds more than the chunk size plus the longest line kept. The expected lines are
/// computed here independently (split on `\n`, BOM dropped from the first
/// line, one `\r` before the `\n` dropped).
pub fn lines(data: &[u8]) {
    let (cfg, input) = settings(data);
    let chunk_bytes = 1 + cfg[0] as usize * 8;
    let max_line = 1 + cfg[1] as usize * 4;
    let keep = 1 + (cfg[2] as usize % 64);
    let reader = Pieces { data: input, piece: 1 + cfg[2] as usize * 3 };
    // Every other chunk's buffer goes back to be read into again, with its old bytes.
    let (spare, spare_rx) = std::sync::mpsc::sync_channel(2);
    let mut split = LineSplitter::new(reader, chunk_bytes, max_line, keep).with_spare_buffers(spare_rx);
    let mut got = Vec::new();
    let mut recycle = false;
    while let Some(chunk) = split.next_chunk() {
        assert!(chunk.stream_error.is_none());
        assert!(!chunk.lines.is_empty(), "no empty chunks");
        // Memory is bounded by the chunk size plus the longest line kept.
        assert!(chunk.data.len() <= chunk_bytes + max_line.max(keep), "chunk of {} bytes", chunk.data.len());
        for span in &chunk.lines {
            got.push((span.line_no, span.byte_offset, span.original_len, chunk.data[span.start..span.end].to_vec()));
        }
        recycle = !recycle;
        if recycle {
            let _ = spare.try_send(chunk.data);
        }
    }
    assert_eq!(split.bytes_read(), input.len() as u64);

    let mut offset = 0u64;
    let mut expected = Vec::new();
    let mut rest = input;
    while !rest.is_empty() {
        let (raw, consumed) = match rest.iter().position(|&b| b == b'\n') {
            Some(i) => (&rest[..i], i + 1),
            None => (rest, rest.len()),
        };
        let line_no = expected.len() as u64 + 1;
        let line = if raw.len() > max_line {
            // A cut line keeps its head: the snippet size, never the whole line.
            (raw.len() as u64, raw[..keep.min(max_line)].to_vec())
        } else {
            let mut l = raw;
            if line_no == 1 {
                l = l.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(l);
            }
            l = l.strip_suffix(b"\r").unwrap_or(l);
            (l.len() as u64, l.to_vec())
        };
        expected.push((line_no, offset, line.0, line.1));
        offset += consumed as u64;
        rest = &rest[consumed..];
    }
    assert_eq!(got, expected);
}

/// The whole reader over arbitrary bytes, with chunk size, line limit and
/// format (or detection) from the first three bytes; see [`read_checked`].
pub fn reader(data: &[u8]) {
    let (cfg, input) = settings(data);
    let formats: Vec<Format> = Format::all().collect();
    let format = match cfg[2] as usize % (formats.len() + 1) {
        0 => None,
        i => Some(formats[i - 1]),
    };
    read_checked(input, format, 1 + cfg[0] as usize * 16, 1 + cfg[1] as usize * 16);
}

/// Reads `input` (as `format`, or detected) and checks the accounting: the
/// counts reconcile (`lines_read = lines_ingested + lines_rejected`), every
/// newline-framed line is read or skipped, every byte is consumed, and the
/// batches hold exactly the rows the counts say (one `rejects` row per
/// rejected line or record).
pub fn read_checked(input: &[u8], format: Option<Format>, chunk_bytes: usize, max_line_bytes: usize) -> LineCounts {
    let mut reader = ReaderBuilder::new()
        .with_format(format)
        .with_chunk_bytes(chunk_bytes)
        .with_max_line_bytes(max_line_bytes)
        .build(Cursor::new(input.to_vec()), "fuzz.log");
    let mut counts = LineCounts::default();
    let (mut rows, mut tokens, mut profiles, mut rejects) = (0, 0, 0, 0);
    for slices in &mut reader {
        let Ok(slices) = slices else { panic!("a chunk of any bytes parses into rows and rejects") };
        for slice in slices {
            counts.add(&slice.counts);
            for (table, dated) in slice.into_batches() {
                let n = dated.batch.num_rows() as u64;
                match table.name {
                    "tokens" => tokens += n,
                    "profiles" => profiles += n,
                    "rejects" => rejects += n,
                    _ => rows += n,
                }
            }
        }
    }
    let framing = reader.framing();
    let bytes = reader.finish().ok();
    assert_eq!(bytes, Some(input.len() as u64));
    assert!(counts.reconciles(), "{counts:?}");
    if framing == Framing::Lines {
        let n_lines =
            input.iter().filter(|&&b| b == b'\n').count() as u64 + (input.last().is_some_and(|&b| b != b'\n')) as u64;
        assert_eq!(counts.lines_read + counts.lines_skipped, n_lines, "{counts:?}");
    }
    assert_eq!(rows, counts.rows_written, "{counts:?}");
    assert_eq!((tokens, profiles), (counts.tokens_written, counts.profiles_written), "{counts:?}");
    assert_eq!(rejects, counts.lines_rejected + counts.records_rejected, "{counts:?}");
    counts
}

/// A pricing TOML file: prices or a configuration error; see [`check_prices`].
pub fn pricing_toml(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(pricing) = Pricing::from_toml(text, "fuzz.toml") {
        check_prices(&pricing);
    }
}

/// LiteLLM's price table (JSON), like [`pricing_toml`].
pub fn litellm_json(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(pricing) = Pricing::from_litellm_json(text, "fuzz.json") {
        check_prices(&pricing);
    }
}

/// Every entry of every model's history (exact names and patterns alike):
/// its rates within `0..=MAX_RATE_PER_1M`, its tiers ascending, the entries
/// in `effective_from` order with each in force from its own date, and every
/// cost it gives finite and non-negative, part by part and in total: for no
/// tokens, typical usage, `i64::MAX` of every count, cache counts larger than
/// the prompt, and prompts at and just above every tier's threshold.
fn check_prices(pricing: &Pricing) {
    use crate::pricing::{cost_with, Rates, MAX_RATE_PER_1M};
    let rates_in_range = |r: &Rates| {
        [r.input, r.output, r.cached_input, r.cache_write].iter().all(|v| (0.0..=MAX_RATE_PER_1M).contains(v))
    };
    let max = i64::MAX;
    let usages = [
        Usage::default(),
        Usage { prompt: 300_000, cached: 1_000, cache_write: 2_000, completion: 500 },
        Usage { prompt: max, cached: 0, cache_write: 0, completion: max },
        Usage { prompt: max, cached: max, cache_write: max, completion: max },
        Usage { prompt: 10, cached: 1_000, cache_write: 1_000, completion: 0 },
    ];
    for schedule in pricing.schedules() {
        let entries = schedule.entries();
        assert!(!entries.is_empty(), "a model without a price");
        assert!(entries.windows(2).all(|w| w[0].effective_from < w[1].effective_from), "{entries:?}");
        for entry in entries {
            if let Some(from) = entry.effective_from {
                assert_eq!(schedule.at(from), Some(entry), "the entry in force from {from}");
            }
            assert!(rates_in_range(&entry.base), "{entry:?}");
            assert!(entry.tiers.iter().all(|t| rates_in_range(&t.rates)), "{entry:?}");
            assert!(entry.tiers.windows(2).all(|w| w[0].above_prompt_tokens <= w[1].above_prompt_tokens), "{entry:?}");
            let at_tiers =
                entry.tiers.iter().flat_map(|t| [t.above_prompt_tokens, t.above_prompt_tokens.saturating_add(1)]);
            let tier_usages = at_tiers.map(|p| p.max(0)).map(|prompt| Usage {
                prompt,
                cached: prompt / 2,
                cache_write: 1,
                completion: 1,
            });
            for usage in usages.into_iter().chain(tier_usages) {
                let cost = cost_with(entry, usage);
                let parts = [cost.input, cost.cached_input, cost.cache_write, cost.output, cost.total()];
                assert!(parts.iter().all(|c| c.is_finite() && *c >= 0.0), "{usage:?} under {entry:?}: {cost:?}");
            }
        }
    }
}

/// An architectures TOML file (entries pointing at a `config.json` resolve
/// against a directory that has none: an error, not a read elsewhere); an
/// accepted file's shapes checked by [`check_arch`].
pub fn architectures_toml(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let mut architectures = Architectures::default();
    if architectures.add_toml(text, Path::new("/nonexistent-fuzz-dir"), "fuzz.toml").is_ok() {
        let looked_up = ["m", "llama-3.1-8b-instruct", ""].into_iter().filter_map(|model| architectures.get(model));
        for arch in architectures.shapes().chain(looked_up) {
            check_arch(arch);
        }
    }
}

/// A KV-cache shape: an element size tokscope knows, a tensor-parallel degree
/// of at least 1, and bytes per token finite and non-negative, whole or per
/// GPU, one GPU's share never more than the whole.
fn check_arch(arch: &crate::architectures::Arch) {
    assert!([0.5, 1.0, 2.0, 4.0].contains(&arch.bytes_per_elem), "{arch:?}");
    assert!(arch.tensor_parallel.is_none_or(|tp| tp >= 1), "{arch:?}");
    let whole = arch.bytes_per_token();
    assert!(whole.is_finite() && whole >= 0.0, "{arch:?}: {whole}");
    for tp in [1, 3, arch.tensor_parallel_or(0), u64::MAX] {
        let share = arch.bytes_per_token_per_gpu(tp);
        assert!(share.is_finite() && share >= 0.0 && share <= whole, "{arch:?} over {tp} GPUs: {share} of {whole}");
    }
}

/// A Hugging Face `config.json`, read both as the replay decoder's shape
/// ([`crate::model::config::ModelConfig`]) and as a KV-cache shape
/// ([`crate::architectures::from_hf_config_json`], checked by [`check_arch`]).
/// An accepted decoder config has the fields it validates in range (positive
/// widths and vocabulary, query heads a multiple of the key/value heads, an
/// even head width, a finite non-negative norm epsilon, a finite positive RoPE
/// theta), widths that fit in `usize`, and a context window that refuses an
/// empty sequence and one a position past its end.
#[cfg(feature = "model")]
pub fn hf_config(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(config) = crate::model::config::ModelConfig::from_json(text) {
        let (heads, kv_heads, head_dim) = (config.num_attention_heads, config.num_key_value_heads, config.head_dim);
        assert!(config.hidden_size > 0 && config.vocab_size > 0 && heads > 0 && kv_heads > 0, "{config:?}");
        assert_eq!(heads % kv_heads, 0, "{config:?}");
        assert!(head_dim > 0 && head_dim % 2 == 0, "{config:?}");
        assert!(config.rms_norm_eps.is_finite() && config.rms_norm_eps >= 0.0, "{config:?}");
        assert!(config.rope_theta.is_finite() && config.rope_theta > 0.0, "{config:?}");
        // The key/value heads are at most the query heads: both widths fit when the query width does.
        assert!(heads.checked_mul(head_dim).is_some(), "query width overflows: {config:?}");
        let _ = (config.q_width(), config.kv_width());
        assert_eq!(config.group_size() * kv_heads, heads);
        let window = config.max_position_embeddings;
        assert!(config.check_sequence(0, 0).is_err());
        assert!(window == usize::MAX || config.check_sequence(window, 1).is_err(), "{config:?}");
        assert!(config.check_sequence(usize::MAX, 1).is_err() || window == usize::MAX);
        if window > 0 {
            assert!(config.check_sequence(0, window).is_ok(), "{config:?}");
        }
    }
    if let Ok(arch) = crate::architectures::from_hf_config_json(text, Path::new("config.json")) {
        check_arch(&arch);
    }
}

/// Texts every accepted tokenizer encodes: empty, ASCII, special-token
/// markers, multi-byte characters (two, three and four bytes) and control
/// characters.
#[cfg(feature = "model")]
const TOKENIZER_TEXTS: &[&str] = &["", "ab ba", "Once upon a time, </s> <s> héllo 世界 🙂\n\t  end\u{0}"];

/// A `tokenizer.json`. An accepted tokenizer's encoding of each text of
/// [`TOKENIZER_TEXTS`] has one byte span per id, each within the text and
/// starting no earlier than the one before; a prompt starts with the BOS id
/// (0 here); and its ids decode.
#[cfg(feature = "model")]
pub fn tokenizer_json(data: &[u8]) {
    let Ok(tokenizer) = crate::model::tokenizer::PromptTokenizer::from_json(data, Some(0)) else { return };
    for text in TOKENIZER_TEXTS {
        if let Ok((ids, spans)) = tokenizer.encode_with_offsets(text) {
            assert_eq!(ids.len(), spans.len(), "{text:?}");
            for (i, &(start, end)) in spans.iter().enumerate() {
                assert!(start <= end && end <= text.len(), "{text:?}: span {i} is {start}..{end}");
            }
            assert!(spans.windows(2).all(|w| w[0].0 <= w[1].0), "{text:?}: spans out of order: {spans:?}");
        }
        if let Ok(ids) = tokenizer.encode_prompt(text) {
            assert_eq!(ids.first(), Some(&0), "{text:?}: the prompt does not start with BOS");
            let _ = tokenizer.decode(&ids);
        }
    }
    let _ = tokenizer.special_token_texts();
}

/// A safetensors file as the decoder reads it: its header, then each
/// tensor's bytes decoded to f32 (or an error). An accepted file's tensors
/// lie one after another from the end of the header to the end of the file,
/// each as many bytes as its shape and dtype take; a tensor that decodes
/// gives one value per element of its shape, each the value its bytes store.
#[cfg(feature = "model")]
pub fn safetensors(data: &[u8]) {
    use safetensors::Dtype;
    let Ok(mut infos) = crate::model::tensors::tensor_infos(data) else { return };
    infos.sort_by_key(|info| (info.range.start, info.range.end));
    // The header: its length (8 bytes, little-endian), then that many bytes of JSON.
    let Some(&length) = data.first_chunk::<8>() else { panic!("a file of {} bytes accepted", data.len()) };
    let mut next = 8 + u64::from_le_bytes(length) as usize;
    for info in &infos {
        assert_eq!(info.range.start, next, "{} does not follow the tensor before it", info.name);
        next = info.range.end;
        let stored = &data[info.range.clone()];
        let Ok(values) = crate::model::tensors::to_f32(info.dtype, stored) else {
            assert!(![Dtype::F32, Dtype::F16, Dtype::BF16].contains(&info.dtype), "{info:?} does not decode");
            continue;
        };
        let elements = info.shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
        assert_eq!(Some(values.len()), elements, "{}: {} values for shape {:?}", info.name, values.len(), info.shape);
        let width = if info.dtype == Dtype::F32 { 4 } else { 2 };
        assert_eq!(stored.len(), values.len() * width, "{info:?}");
        for (value, bytes) in values.iter().zip(stored.chunks_exact(width)) {
            let expected = match *bytes {
                [a, b, c, d] => f32::from_le_bytes([a, b, c, d]),
                [a, b] if info.dtype == Dtype::F16 => f16_value(u16::from_le_bytes([a, b])),
                [a, b] => f32::from_bits(u32::from(u16::from_le_bytes([a, b])) << 16),
                _ => unreachable!("chunks of 2 or 4 bytes"),
            };
            let same = value.to_bits() == expected.to_bits() || (value.is_nan() && expected.is_nan());
            assert!(same, "{}: {value} decoded from {bytes:?}, which store {expected}", info.name);
        }
    }
    assert_eq!(next, data.len(), "the tensors end before the file");
}

/// The value of IEEE half-precision bits, from their definition: sign,
/// five exponent bits (bias 15), ten fraction bits; subnormals, infinities and NaN.
#[cfg(feature = "model")]
fn f16_value(bits: u16) -> f32 {
    let sign = if bits >> 15 == 1 { -1.0 } else { 1.0 };
    let exponent = i32::from((bits >> 10) & 0x1f);
    let fraction = f32::from(bits & 0x3ff);
    sign * match exponent {
        0 => fraction / 1024.0 * 2f32.powi(-14),
        31 if fraction == 0.0 => f32::INFINITY,
        31 => f32::NAN,
        e => (1.0 + fraction / 1024.0) * 2f32.powi(e - 15),
    }
}
