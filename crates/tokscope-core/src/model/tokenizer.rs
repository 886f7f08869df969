//! Text to token ids and back, through the model's own `tokenizer.json`, so
//! replayed prompts see exactly the ids the serving stack would have fed.

use std::path::Path;

use crate::error::{Error, Result};

/// A Hugging Face tokenizer plus the BOS convention of its model.
pub struct PromptTokenizer {
    inner: tokenizers::Tokenizer,
    bos_token_id: Option<u32>,
}

impl std::fmt::Debug for PromptTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PromptTokenizer").field("bos_token_id", &self.bos_token_id).finish_non_exhaustive()
    }
}

/// Token ids with each token's byte span `(start, end)` in the text.
pub type IdsWithSpans = (Vec<u32>, Vec<(usize, usize)>);

impl PromptTokenizer {
    /// Loads `tokenizer.json` from a model directory; `bos_token_id` comes from the model config.
    pub fn from_dir(dir: &Path, bos_token_id: Option<u32>) -> Result<Self> {
        let path = dir.join("tokenizer.json");
        let bytes = std::fs::read(&path).map_err(|e| Error::io(path.display(), e))?;
        Self::from_json(&bytes, bos_token_id).map_err(|e| model_err!("{}: {e}", path.display()))
    }

    /// Parses the bytes of a `tokenizer.json`. The JSON is checked first:
    /// the `tokenizers` crate panics on some malformed files instead of
    /// returning an error (found by fuzzing), and any panic it still raises
    /// becomes an error here.
    pub fn from_json(bytes: &[u8], bos_token_id: Option<u32>) -> Result<Self> {
        serde_json::from_slice::<serde::de::IgnoredAny>(bytes).map_err(|e| model_err!("not valid JSON: {e}"))?;
        let inner = guarded(|| tokenizers::Tokenizer::from_bytes(bytes))?.map_err(|e| model_err!("{e}"))?;
        Ok(PromptTokenizer { inner, bos_token_id })
    }

    /// Ids of a prompt, BOS first when the model has one. Many tokenizer.json
    /// post-processors (like the reference model's) do not add BOS although
    /// the model was trained with it, so it is added here unless already there.
    /// Special tokens written in the text (`<|user|>`, `</s>`) map to their ids.
    pub fn encode_prompt(&self, text: &str) -> Result<Vec<u32>> {
        let mut ids = self.encode_raw(text, true)?;
        if let Some(bos) = self.bos_token_id {
            if ids.first() != Some(&bos) {
                ids.insert(0, bos);
            }
        }
        Ok(ids)
    }

    /// Ids of a continuation appended to a prompt: no BOS, no post-processing.
    pub fn encode_continuation(&self, text: &str) -> Result<Vec<u32>> {
        self.encode_raw(text, false)
    }

    /// Ids of `text` without BOS, with each token's byte span in `text`. Replay
    /// uses the spans to say where a context-window cut falls in the text.
    pub fn encode_with_offsets(&self, text: &str) -> Result<IdsWithSpans> {
        let encoding = guarded(|| self.inner.encode(text, false))?.map_err(|e| model_err!("tokenizing: {e}"))?;
        Ok((encoding.get_ids().to_vec(), encoding.get_offsets().to_vec()))
    }

    /// The text of every special added token (`<s>`, `</s>`, `<|user|>`, ...).
    pub fn special_token_texts(&self) -> Vec<String> {
        let decoder = self.inner.get_added_tokens_decoder();
        decoder.values().filter(|t| t.special).map(|t| t.content.clone()).collect()
    }

    /// The vocabulary string of one id (`</s>` for EOS), if the id exists.
    pub fn token_text(&self, id: u32) -> Option<String> {
        self.inner.id_to_token(id)
    }

    fn encode_raw(&self, text: &str, add_special_tokens: bool) -> Result<Vec<u32>> {
        let encoding =
            guarded(|| self.inner.encode(text, add_special_tokens))?.map_err(|e| model_err!("tokenizing: {e}"))?;
        Ok(encoding.get_ids().to_vec())
    }

    /// Text of `ids` with special tokens (BOS, EOS, chat markers) left out,
    /// like transformers' `decode(ids, skip_special_tokens=True)`.
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        guarded(|| self.inner.decode(ids, true))?.map_err(|e| model_err!("detokenizing: {e}"))
    }
}

/// Runs a call into the `tokenizers` crate, turning a panic (a crafted or
/// corrupt tokenizer.json can make it index out of bounds) into an error.
fn guarded<T>(call: impl FnOnce() -> T) -> Result<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(call)).map_err(|panic| {
        let why = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        model_err!("the tokenizer failed on this tokenizer.json ({why})")
    })
}
