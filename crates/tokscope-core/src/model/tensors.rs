//! A checkpoint's tensors: safetensors files (one, or the shards of an
//! index) read into f32 by name, each taken out once with the shape the
//! model's config implies. Conversion from f16/bf16 happens here, so the
//! forward pass sees only f32; a truncated or inconsistent file is a clear
//! error naming it, never a panic.

use std::collections::HashMap;
use std::path::Path;

use safetensors::{Dtype, SafeTensors};
use serde::Deserialize;

use crate::error::{Error, Result};

/// `weight_map` of a sharded checkpoint: tensor name to shard file.
#[derive(Deserialize)]
struct ShardIndex {
    weight_map: HashMap<String, String>,
}

/// The distinct shard files named by an index's text, in a stable order.
pub fn shard_files(index_json: &str) -> Result<Vec<String>> {
    let parsed: ShardIndex = serde_json::from_str(index_json).map_err(|e| model_err!("shard index: {e}"))?;
    let mut files: Vec<String> = parsed.weight_map.into_values().collect();
    files.sort();
    files.dedup();
    // Shards are files beside the index: no path may leave the model directory.
    if let Some(bad) = files.iter().find(|f| f.is_empty() || f.contains(['/', '\\']) || *f == "..") {
        return Err(model_err!("shard index names {bad:?}, not a file beside it"));
    }
    Ok(files)
}

/// Tensors converted to f32, keyed by name. Shards are converted one at a time
/// so peak memory is one shard's bytes plus the f32 model, not every shard at once.
#[derive(Debug, Default)]
pub struct TensorStore {
    tensors: HashMap<String, (Vec<usize>, Vec<f32>)>,
}

impl TensorStore {
    /// `model.safetensors` of `dir`, or every shard named by `model.safetensors.index.json`.
    pub fn from_dir(dir: &Path) -> Result<Self> {
        let mut tensors = TensorStore::default();
        let single = dir.join("model.safetensors");
        let index = dir.join("model.safetensors.index.json");
        if single.exists() {
            tensors.load_file(&single)?;
        } else if index.exists() {
            let text = std::fs::read_to_string(&index).map_err(|e| Error::io(index.display(), e))?;
            for shard in shard_files(&text).map_err(|e| model_err!("{}: {e}", index.display()))? {
                tensors.load_file(&dir.join(shard))?;
            }
        } else {
            return Err(model_err!(
                "{}: neither model.safetensors nor model.safetensors.index.json found",
                dir.display()
            ));
        }
        Ok(tensors)
    }

    /// Adds the tensors of one safetensors file.
    pub fn load_file(&mut self, path: &Path) -> Result<()> {
        let bytes = std::fs::read(path).map_err(|e| Error::io(path.display(), e))?;
        self.load_bytes(&bytes).map_err(|e| model_err!("{}: {e}", path.display()))
    }

    /// Adds the tensors of the bytes of one safetensors file.
    pub fn load_bytes(&mut self, bytes: &[u8]) -> Result<()> {
        let file = SafeTensors::deserialize(bytes).map_err(|e| model_err!("not a valid safetensors file: {e}"))?;
        for (name, view) in file.tensors() {
            let data = to_f32(view.dtype(), view.data()).map_err(|e| model_err!("tensor {name}: {e}"))?;
            self.tensors.insert(name, (view.shape().to_vec(), data));
        }
        Ok(())
    }

    /// Whether a tensor of that name is present (and not taken yet).
    pub fn contains(&self, name: &str) -> bool {
        self.tensors.contains_key(name)
    }

    /// Removes a tensor, checking it has exactly the shape the config implies.
    pub fn take(&mut self, name: &str, shape: &[usize]) -> Result<Vec<f32>> {
        let (found, data) =
            self.tensors.remove(name).ok_or_else(|| model_err!("tensor {name} missing from checkpoint"))?;
        if found != shape {
            return Err(model_err!("tensor {name} has shape {found:?}, config implies {shape:?}"));
        }
        Ok(data)
    }
}

/// Converts little-endian tensor bytes to f32. Byte slices inside a safetensors
/// file need not be 4-byte aligned, so values are decoded, not reinterpreted.
pub fn to_f32(dtype: Dtype, bytes: &[u8]) -> Result<Vec<f32>> {
    let values = match dtype {
        Dtype::F32 => bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect(),
        Dtype::F16 => bytes.chunks_exact(2).map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32()).collect(),
        Dtype::BF16 => bytes.chunks_exact(2).map(|b| half::bf16::from_le_bytes([b[0], b[1]]).to_f32()).collect(),
        other => return Err(model_err!("unsupported dtype {other:?} (expected F32, F16 or BF16)")),
    };
    Ok(values)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_precision_bytes_convert_to_f32() {
        // 1.5 in f16 is 0x3E00, in bf16 0x3FC0 (little-endian on disk).
        assert_eq!(to_f32(Dtype::F16, &[0x00, 0x3E]).unwrap(), vec![1.5]);
        assert_eq!(to_f32(Dtype::BF16, &[0xC0, 0x3F]).unwrap(), vec![1.5]);
        assert_eq!(to_f32(Dtype::F32, &1.5f32.to_le_bytes()).unwrap(), vec![1.5]);
    }

    #[test]
    fn integer_tensors_are_refused() {
        assert!(to_f32(Dtype::I64, &[0; 8]).is_err());
    }

    #[test]
    fn shards_stay_beside_their_index() {
        let index = |f: &str| format!(r#"{{"weight_map": {{"a": "{f}", "b": "x.safetensors"}}}}"#);
        assert_eq!(shard_files(&index("x.safetensors")).unwrap(), vec!["x.safetensors"]);
        assert!(shard_files(&index("../../etc/passwd")).is_err());
        assert!(shard_files(&index("/etc/passwd")).is_err());
    }
}
