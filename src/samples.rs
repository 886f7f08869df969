//! The bundled `sample_logs/`, compiled into the binary so that `tokscope run`
//! works from any directory with no input, server or bucket.

use std::path::PathBuf;

use crate::error::{Error, Result};

/// `(file name, contents)` of every bundled sample.
pub const SAMPLE_LOGS: &[(&str, &[u8])] = &[
    ("canonical.jsonl", include_bytes!("../sample_logs/canonical.jsonl")),
    ("openai_chat.jsonl", include_bytes!("../sample_logs/openai_chat.jsonl")),
    ("openai_batch.jsonl", include_bytes!("../sample_logs/openai_batch.jsonl")),
    ("anthropic.jsonl", include_bytes!("../sample_logs/anthropic.jsonl")),
    ("tgi.jsonl", include_bytes!("../sample_logs/tgi.jsonl")),
    ("azure_conv_head.csv", include_bytes!("../sample_logs/azure_conv_head.csv")),
    ("mooncake_head.jsonl", include_bytes!("../sample_logs/mooncake_head.jsonl")),
    ("otel.jsonl", include_bytes!("../sample_logs/otel.jsonl")),
    ("openai_responses.jsonl", include_bytes!("../sample_logs/openai_responses.jsonl")),
    ("openai_stream.sse", include_bytes!("../sample_logs/openai_stream.sse")),
    ("helicone.jsonl", include_bytes!("../sample_logs/helicone.jsonl")),
    ("langfuse.jsonl", include_bytes!("../sample_logs/langfuse.jsonl")),
    ("litellm.jsonl", include_bytes!("../sample_logs/litellm.jsonl")),
    ("litellm_spendlogs.csv", include_bytes!("../sample_logs/litellm_spendlogs.csv")),
    ("profile.jsonl", include_bytes!("../sample_logs/profile.jsonl")),
    ("vllm.jsonl", include_bytes!("../sample_logs/vllm.jsonl")),
];

/// The example pricing file, used by `tokscope run` on the bundled samples
/// when no `--pricing` is given, so the demo report shows costs.
pub const EXAMPLE_PRICING: &str = include_str!("../config/pricing.example.toml");

/// Writes the samples to a directory under the system temp dir and returns it.
pub fn extract() -> Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("tokscope-sample-logs-{}", env!("CARGO_PKG_VERSION")));
    std::fs::create_dir_all(&dir).map_err(|e| Error::io(dir.display(), e))?;
    for (name, bytes) in SAMPLE_LOGS {
        let path = dir.join(name);
        if std::fs::read(&path).ok().as_deref() != Some(*bytes) {
            std::fs::write(&path, bytes).map_err(|e| Error::io(path.display(), e))?;
        }
    }
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_of_sample_logs_is_bundled() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/sample_logs");
        let mut on_disk: Vec<String> = std::fs::read_dir(dir)
            .expect("sample_logs/")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        on_disk.sort();
        let mut bundled: Vec<String> = SAMPLE_LOGS.iter().map(|(name, _)| name.to_string()).collect();
        bundled.sort();
        assert_eq!(bundled, on_disk, "list every file of sample_logs/ in SAMPLE_LOGS");
    }
}
