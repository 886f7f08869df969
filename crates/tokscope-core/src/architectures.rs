//! Model architectures for the `kv_cache` job and the `kv_cache_bytes` UDF:
//! how many bytes of KV cache one token occupies. Read from a TOML file
//! (`config/architectures.toml` is bundled), whose entries may point at a
//! Hugging Face `config.json` instead of spelling the shape out.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use regex::Regex;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The architectures file bundled with tokscope.
pub const BUNDLED: &str = include_str!("../../../config/architectures.toml");

/// The shape that sizes a model's KV cache.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Arch {
    /// Decoder layers.
    pub layers: u64,
    /// Key/value heads (grouped-query attention).
    pub kv_heads: u64,
    /// Width of one head.
    pub head_dim: u64,
    /// Bytes per cached element (2 for bf16/fp16, 1 for fp8, 0.5 for 4-bit).
    pub bytes_per_elem: f64,
    /// Tensor-parallel degree the model is served with (GPUs sharing its KV
    /// heads), when the architectures file says.
    pub tensor_parallel: Option<u64>,
}

impl Arch {
    /// KV-cache bytes per token: keys and values (2) for every layer and KV head.
    /// Computed in f64 (exact for every real model), so a shape whose element
    /// count overflows `u64` still gives a finite number.
    pub fn bytes_per_token(&self) -> f64 {
        self.bytes_per_token_with(self.kv_heads)
    }

    fn bytes_per_token_with(&self, kv_heads: u64) -> f64 {
        2.0 * self.layers as f64 * kv_heads as f64 * self.head_dim as f64 * self.bytes_per_elem
    }

    /// The tensor-parallel degree to size per-GPU memory with: `requested`
    /// when it is at least 1, else the file's `tensor_parallel`, else 1.
    pub fn tensor_parallel_or(&self, requested: u64) -> u64 {
        if requested >= 1 {
            requested
        } else {
            self.tensor_parallel.unwrap_or(1).max(1)
        }
    }

    /// KV-cache bytes per token on one GPU of `tp` (at least 1): tensor
    /// parallelism splits the KV heads across GPUs, `ceil(kv_heads / tp)`
    /// each, so a GPU holds at least one head (heads are replicated when
    /// `tp > kv_heads`).
    pub fn bytes_per_token_per_gpu(&self, tp: u64) -> f64 {
        self.bytes_per_token_with(self.kv_heads.div_ceil(tp.max(1)))
    }
}

/// Architectures by model: exact names first, then regular expressions (full match) in file order.
#[derive(Debug, Clone, Default)]
pub struct Architectures {
    exact: HashMap<String, Arch>,
    patterns: Vec<(Pattern, Arch)>,
}

/// A `pattern` entry's anchored regular expression (`^(?:p)$`). Compiling
/// the bundled file's patterns was most of what loading it cost, and so a
/// sixth of a fresh `SELECT count(*)` process, which never looks a model up:
/// the bundled patterns (every one compiles: `every_bundled_pattern_compiles`)
/// are compiled when a model is first looked up. A user's file has its
/// patterns compiled when it is read, so a bad one is an error at once.
#[derive(Debug, Clone)]
struct Pattern {
    source: String,
    re: OnceLock<Option<Regex>>,
}

impl Pattern {
    fn compiled(source: String) -> std::result::Result<Self, regex::Error> {
        let re = Regex::new(&source)?;
        Ok(Pattern { source, re: OnceLock::from(Some(re)) })
    }

    fn deferred(source: String) -> Self {
        Pattern { source, re: OnceLock::new() }
    }

    fn is_match(&self, model: &str) -> bool {
        self.re.get_or_init(|| Regex::new(&self.source).ok()).as_ref().is_some_and(|re| re.is_match(model))
    }
}

/// When a file's patterns are compiled (see [`Pattern`]).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Compile {
    Now,
    AtFirstUse,
}

const BUNDLED_ORIGIN: &str = "config/architectures.toml (bundled)";

impl Architectures {
    /// The bundled architectures (`config/architectures.toml`).
    pub fn bundled() -> Result<Self> {
        let mut a = Self::default();
        a.add(BUNDLED, Path::new("."), BUNDLED_ORIGIN, Compile::AtFirstUse)?;
        Ok(a)
    }

    /// The bundled architectures with `path`'s entries taking precedence.
    pub fn load_over_bundled(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path.display(), e))?;
        let mut a = Self::default();
        a.add_toml(&text, path.parent().unwrap_or(Path::new(".")), &path.display().to_string())?;
        a.add(BUNDLED, Path::new("."), BUNDLED_ORIGIN, Compile::AtFirstUse)?;
        Ok(a)
    }

    /// Every shape: the exact names' (in no order), then the patterns' in file order.
    pub fn shapes(&self) -> impl Iterator<Item = &Arch> {
        self.exact.values().chain(self.patterns.iter().map(|(_, a)| a))
    }

    /// The architecture of `model`, if known.
    pub fn get(&self, model: &str) -> Option<&Arch> {
        self.exact.get(model).or_else(|| self.patterns.iter().find(|(p, _)| p.is_match(model)).map(|(_, a)| a))
    }

    /// Adds a TOML file's entries after those already present (earlier entries win);
    /// `config` paths are relative to `base`.
    pub fn add_toml(&mut self, text: &str, base: &Path, origin: &str) -> Result<()> {
        self.add(text, base, origin, Compile::Now)
    }

    fn add(&mut self, text: &str, base: &Path, origin: &str, compile: Compile) -> Result<()> {
        let file: File = toml::from_str(text).map_err(|e| config_err!("architectures {origin}: {e}"))?;
        for (i, m) in file.model.into_iter().enumerate() {
            let ctx = |msg: String| config_err!("architectures {origin}, [[model]] #{}: {msg}", i + 1);
            let arch = match &m.config {
                Some(cfg) => {
                    let path = base.join(cfg);
                    let mut a = from_hf_config(&path)?;
                    if let Some(d) = &m.dtype {
                        a.bytes_per_elem = dtype_bytes(d).map_err(ctx)?;
                    }
                    a
                }
                None => {
                    let (Some(layers), Some(kv_heads), Some(head_dim)) = (m.layers, m.kv_heads, m.head_dim) else {
                        return Err(ctx(
                            "give `layers`, `kv_heads` and `head_dim`, or `config` (a Hugging Face config.json)".into(),
                        ));
                    };
                    let bytes_per_elem = dtype_bytes(m.dtype.as_deref().unwrap_or("bf16")).map_err(ctx)?;
                    Arch { layers, kv_heads, head_dim, bytes_per_elem, tensor_parallel: None }
                }
            };
            if m.tensor_parallel == Some(0) {
                return Err(ctx("`tensor_parallel` must be at least 1".into()));
            }
            let arch = Arch { tensor_parallel: m.tensor_parallel, ..arch };
            match (m.model, m.pattern) {
                (Some(name), None) => {
                    self.exact.entry(name).or_insert(arch);
                }
                (None, Some(p)) => {
                    let source = format!("^(?:{p})$");
                    let pattern = match compile {
                        Compile::Now => {
                            Pattern::compiled(source).map_err(|e| ctx(format!("bad pattern {p:?}: {e}")))?
                        }
                        Compile::AtFirstUse => Pattern::deferred(source),
                    };
                    self.patterns.push((pattern, arch));
                }
                _ => return Err(ctx("give exactly one of `model` (exact name) or `pattern` (regex)".into())),
            }
        }
        Ok(())
    }
}

/// [`Architectures`] as they travel inside a distributed query plan: the
/// resolved shapes (Hugging Face configs already read), floats as bits.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ArchitecturesWire {
    /// Exact names, sorted.
    exact: Vec<(String, [u64; 5])>,
    /// Anchored patterns (`^(?:p)$`) in order.
    patterns: Vec<(String, [u64; 5])>,
}

/// An architecture as five words: the shape, the element size's bits and the
/// tensor-parallel degree (0 for none: a given degree is at least 1).
fn arch_bits(a: &Arch) -> [u64; 5] {
    [a.layers, a.kv_heads, a.head_dim, a.bytes_per_elem.to_bits(), a.tensor_parallel.unwrap_or(0)]
}

fn arch_from_bits(b: [u64; 5]) -> Arch {
    Arch {
        layers: b[0],
        kv_heads: b[1],
        head_dim: b[2],
        bytes_per_elem: f64::from_bits(b[3]),
        tensor_parallel: (b[4] != 0).then_some(b[4]),
    }
}

impl Architectures {
    /// The shapes as they travel in a plan.
    pub fn to_wire(&self) -> ArchitecturesWire {
        let mut exact: Vec<(String, [u64; 5])> = self.exact.iter().map(|(n, a)| (n.clone(), arch_bits(a))).collect();
        exact.sort_by(|a, b| a.0.cmp(&b.0));
        ArchitecturesWire {
            exact,
            patterns: self.patterns.iter().map(|(p, a)| (p.source.clone(), arch_bits(a))).collect(),
        }
    }

    /// The shapes back from their wire form.
    pub fn from_wire(wire: ArchitecturesWire) -> Result<Self> {
        let mut a = Architectures {
            exact: wire.exact.into_iter().map(|(n, b)| (n, arch_from_bits(b))).collect(),
            ..Default::default()
        };
        for (source, b) in wire.patterns {
            let pattern = Pattern::compiled(source).map_err(|e| config_err!("bad pattern: {e}"))?;
            a.patterns.push((pattern, arch_from_bits(b)));
        }
        Ok(a)
    }
}

/// Reads the KV-cache shape from a Hugging Face `config.json`: `num_hidden_layers`,
/// `num_key_value_heads` (default `num_attention_heads`), `head_dim` (default
/// `hidden_size / num_attention_heads`) and `torch_dtype` / `dtype` (default bf16).
pub fn from_hf_config(path: &Path) -> Result<Arch> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path.display(), e))?;
    from_hf_config_json(&text, path)
}

/// [`from_hf_config`] on the text of a `config.json` read from `path`.
pub fn from_hf_config_json(text: &str, path: &Path) -> Result<Arch> {
    let c: HfConfig = serde_json::from_str(text).map_err(|source| Error::Json { path: PathBuf::from(path), source })?;
    let bad = |m: &str| config_err!("{}: {m}", path.display());
    if c.num_attention_heads == 0 {
        return Err(bad("num_attention_heads is 0"));
    }
    let head_dim = match (c.head_dim, c.hidden_size) {
        (Some(d), _) => d,
        (None, Some(h)) => h / c.num_attention_heads,
        (None, None) => return Err(bad("needs head_dim or hidden_size")),
    };
    let dtype = c.torch_dtype.or(c.dtype).unwrap_or_else(|| "bfloat16".into());
    Ok(Arch {
        layers: c.num_hidden_layers,
        kv_heads: c.num_key_value_heads.unwrap_or(c.num_attention_heads),
        head_dim,
        bytes_per_elem: dtype_bytes(&dtype).map_err(|m| bad(&m))?,
        tensor_parallel: None,
    })
}

fn dtype_bytes(d: &str) -> std::result::Result<f64, String> {
    Ok(match d.to_ascii_lowercase().as_str() {
        "float32" | "fp32" | "f32" => 4.0,
        "bfloat16" | "bf16" | "float16" | "fp16" | "f16" | "half" => 2.0,
        "fp8" | "float8" | "float8_e4m3fn" | "float8_e5m2" | "int8" => 1.0,
        "int4" | "fp4" | "nf4" => 0.5,
        other => return Err(format!("unknown dtype {other:?} (float32, bf16, fp16, fp8, int8, int4)")),
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    model: Vec<Entry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    model: Option<String>,
    pattern: Option<String>,
    layers: Option<u64>,
    kv_heads: Option<u64>,
    head_dim: Option<u64>,
    dtype: Option<String>,
    config: Option<String>,
    tensor_parallel: Option<u64>,
}

#[derive(Deserialize)]
struct HfConfig {
    num_hidden_layers: u64,
    num_attention_heads: u64,
    num_key_value_heads: Option<u64>,
    head_dim: Option<u64>,
    hidden_size: Option<u64>,
    torch_dtype: Option<String>,
    dtype: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundled_file_knows_llama_8b() {
        let a = Architectures::bundled().unwrap();
        let l = a.get("llama-3.1-8b-instruct").unwrap();
        // 2 * 32 layers * 8 heads * 128 dims * 2 bytes = 131072 bytes per token.
        assert_eq!(l.bytes_per_token(), 131072.0);
        assert!(a.get("no-such-model").is_none());
    }

    #[test]
    fn every_bundled_pattern_compiles() {
        let mut a = Architectures::default();
        a.add(BUNDLED, Path::new("."), BUNDLED_ORIGIN, Compile::Now).unwrap();
        let deferred = Architectures::bundled().unwrap();
        assert_eq!(a.patterns.len(), deferred.patterns.len());
        assert!(!a.patterns.is_empty());
        // Compiled at first use, the same names match the same entries.
        for model in ["llama-3.1-8b-instruct", "meta-llama/Llama-3-70B", "Qwen2.5-7B-Instruct", "gpt-x"] {
            assert_eq!(a.get(model), deferred.get(model), "{model}");
        }
        assert!(deferred.patterns.iter().all(|(p, _)| p.re.get().is_some_and(Option::is_some)));
    }

    #[test]
    fn a_bad_pattern_in_a_file_is_an_error_when_it_is_read() {
        let mut a = Architectures::default();
        let toml = "[[model]]\npattern = \"llama-(3\"\nlayers = 1\nkv_heads = 1\nhead_dim = 1\n";
        let e = a.add_toml(toml, Path::new("."), "mine.toml").unwrap_err().to_string();
        assert!(e.contains("mine.toml") && e.contains("bad pattern"), "{e}");
    }

    #[test]
    fn tensor_parallelism_splits_kv_heads() {
        let mut a = Architectures::default();
        let toml =
            "[[model]]\nmodel = \"m\"\nlayers = 2\nkv_heads = 8\nhead_dim = 4\ndtype = \"fp8\"\ntensor_parallel = 4\n";
        a.add_toml(toml, Path::new("."), "test").unwrap();
        let m = a.get("m").unwrap();
        // Per token: 2 * 2 layers * 8 heads * 4 dims * 1 byte = 128 bytes; per GPU of 4: 2 heads = 32 bytes.
        assert_eq!((m.bytes_per_token(), m.tensor_parallel_or(0)), (128.0, 4));
        assert_eq!(m.bytes_per_token_per_gpu(m.tensor_parallel_or(0)), 32.0);
        // tp = 3 does not divide 8: the largest share, 3 heads; tp = 16 replicates: 1 head.
        assert_eq!((m.bytes_per_token_per_gpu(3), m.bytes_per_token_per_gpu(16)), (48.0, 16.0));
        assert_eq!(m.tensor_parallel_or(2), 2);
        assert!(a
            .add_toml(
                "[[model]]\nmodel = \"z\"\nlayers = 1\nkv_heads = 1\nhead_dim = 1\ntensor_parallel = 0\n",
                Path::new("."),
                "t"
            )
            .is_err());
    }
}
