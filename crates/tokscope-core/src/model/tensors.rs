//! A checkpoint's safetensors files read as the replay decoder reads them:
//! the header of each file (names, shapes, dtypes and byte ranges of its
//! tensors, checked by the `safetensors` crate), the shard list of a sharded
//! checkpoint's index, and little-endian tensor bytes decoded to f32. The
//! decoder maps the files and keeps large matrices in their stored precision;
//! a truncated or inconsistent file is a clear error, never a panic.

use std::collections::HashMap;
use std::ops::Range;

use safetensors::{Dtype, SafeTensors};
use serde::Deserialize;

use crate::error::Result;

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

/// One tensor of a safetensors file.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorInfo {
    /// Its name.
    pub name: String,
    /// Its shape.
    pub shape: Vec<usize>,
    /// Its element type.
    pub dtype: Dtype,
    /// Its bytes within the file.
    pub range: Range<usize>,
}

/// The tensors of the bytes of one safetensors file (its header, validated
/// against the file's length by the `safetensors` crate).
pub fn tensor_infos(bytes: &[u8]) -> Result<Vec<TensorInfo>> {
    let file = SafeTensors::deserialize(bytes).map_err(|e| model_err!("not a valid safetensors file: {e}"))?;
    let base = bytes.as_ptr() as usize;
    Ok(file
        .tensors()
        .into_iter()
        .map(|(name, view)| {
            let start = view.data().as_ptr() as usize - base;
            TensorInfo {
                name,
                shape: view.shape().to_vec(),
                dtype: view.dtype(),
                range: start..start + view.data().len(),
            }
        })
        .collect())
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
    fn headers_give_each_tensor_its_byte_range() {
        let data: Vec<u8> = (0..24).collect();
        let views = [
            ("a", safetensors::tensor::TensorView::new(Dtype::F32, vec![2, 2], &data[..16]).unwrap()),
            ("b", safetensors::tensor::TensorView::new(Dtype::BF16, vec![4], &data[16..]).unwrap()),
        ];
        let bytes = safetensors::serialize(views, None).unwrap();
        let mut infos = tensor_infos(&bytes).unwrap();
        infos.sort_by(|x, y| x.name.cmp(&y.name));
        assert_eq!((infos[0].shape.clone(), infos[0].dtype), (vec![2, 2], Dtype::F32));
        assert_eq!(&bytes[infos[1].range.clone()], &data[16..]);
        assert!(tensor_infos(&bytes[..bytes.len() - 1]).is_err(), "a truncated file is refused");
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
