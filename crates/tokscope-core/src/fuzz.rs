//! The fuzz targets' entry points: one function per parser, taking arbitrary
//! bytes and asserting what must hold for any input (no panic, bounded work,
//! line accounting that reconciles). `fuzz/` (cargo-fuzz, nightly) calls them
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

/// A pricing TOML file: prices or a configuration error; any prices it
/// yields give finite, non-negative costs.
pub fn pricing_toml(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(pricing) = Pricing::from_toml(text, "fuzz.toml") {
        check_costs(&pricing);
    }
}

/// LiteLLM's price table (JSON), like [`pricing_toml`].
pub fn litellm_json(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(pricing) = Pricing::from_litellm_json(text, "fuzz.json") {
        check_costs(&pricing);
    }
}

fn check_costs(pricing: &Pricing) {
    let typical = Usage { prompt: 300_000, cached: 1_000, cache_write: 2_000, completion: 500 };
    let most = Usage { prompt: i64::MAX, cached: 0, cache_write: 0, completion: i64::MAX };
    for model in ["m", "gpt-4o", "a", ""] {
        for ts in [i64::MIN, 0, 1_717_200_000_000_000, i64::MAX] {
            for usage in [typical, most] {
                if let Some(cost) = pricing.cost(model, ts, usage) {
                    assert!(cost.total().is_finite(), "{cost:?}");
                }
            }
        }
    }
}

/// An architectures TOML file (entries pointing at a `config.json` resolve
/// against a directory that has none: an error, not a read elsewhere).
pub fn architectures_toml(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let mut architectures = Architectures::default();
    if architectures.add_toml(text, Path::new("/nonexistent-fuzz-dir"), "fuzz.toml").is_ok() {
        for model in ["m", "llama-3.1-8b-instruct", ""] {
            if let Some(arch) = architectures.get(model) {
                let _ = arch.bytes_per_token();
            }
        }
    }
}

/// A Hugging Face `config.json`, read both as the replay decoder's shape
/// ([`crate::model::config::ModelConfig`]) and as a KV-cache shape
/// ([`crate::architectures::from_hf_config_json`]); an accepted config's
/// derived widths are computed without overflow.
#[cfg(feature = "model")]
pub fn hf_config(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(config) = crate::model::config::ModelConfig::from_json(text) {
        let _ = (config.group_size(), config.q_width(), config.kv_width());
        let _ = config.check_sequence(usize::MAX, 1);
    }
    if let Ok(arch) = crate::architectures::from_hf_config_json(text, Path::new("config.json")) {
        let _ = arch.bytes_per_token();
    }
}

/// A `tokenizer.json`; an accepted tokenizer encodes and decodes text.
#[cfg(feature = "model")]
pub fn tokenizer_json(data: &[u8]) {
    if let Ok(tokenizer) = crate::model::tokenizer::PromptTokenizer::from_json(data, Some(0)) {
        if let Ok(ids) = tokenizer.encode_prompt("Once upon a time, </s> <s> héllo 世界") {
            let _ = tokenizer.decode(&ids);
        }
        let _ = tokenizer.encode_with_offsets("ab ba");
        let _ = tokenizer.special_token_texts();
    }
}

/// A safetensors file as the decoder reads it: its header, then each
/// tensor's bytes decoded to f32 (or an error).
#[cfg(feature = "model")]
pub fn safetensors(data: &[u8]) {
    if let Ok(infos) = crate::model::tensors::tensor_infos(data) {
        for info in infos {
            let _ = crate::model::tensors::to_f32(info.dtype, &data[info.range]);
        }
    }
}
