//! `tokscope replay` as a library procedure: select suspected truncations
//! from `requests`, replay them in parallel, and write `replay_verdicts`.
//!
//! Batching: suspects run in parallel with rayon (one task per request, the
//! model shared read-only), as many at once as the threads and the memory
//! available allow (each holds its KV cache and prefill activations:
//! [`kv_cache::sequence_bytes`]); within a request, prompt + logged output is
//! one prefill (every projection a matrix-matrix product over all positions),
//! and the greedy continuation reuses that KV cache one token per step.

use rayon::prelude::*;
use serde::Serialize;

use super::kv_cache;
use super::verdict::{replay_batch, replay_suspect, ReplayOptions, Suspect, Verdict};
use super::verdicts::{self, RunInfo};
use super::ReplayModel;
use crate::dataset::DatasetRoot;
use crate::error::Result;
use crate::progress::Progress;

/// Which requests to replay, and how.
#[derive(Debug, Clone)]
pub struct ReplayRun {
    /// SQL predicate over `requests` choosing the suspects; `None`: the default
    /// (`eos_status = 'implicit_truncation'` with a prompt and an output).
    pub predicate: Option<String>,
    /// Replay at most this many suspects (in request_id order).
    pub limit: Option<usize>,
    /// Threshold, continuation budget, repeats.
    pub options: ReplayOptions,
    /// The checkpoint's name, stored in `replay_verdicts.model`.
    pub model_name: String,
    /// Show progress over the suspects on a terminal ([`crate::progress`]).
    pub progress: bool,
}

/// What a replay run did.
#[derive(Debug, Default, Serialize)]
pub struct ReplaySummary {
    /// Suspects selected and replayed.
    pub suspects: usize,
    /// Verdict counts.
    pub natural_stop: usize,
    /// Verdict counts.
    pub confirmed_truncation: usize,
    /// Verdict counts.
    pub prompt_truncated: usize,
    /// Verdict counts.
    pub error: usize,
    /// Suspects whose repeated decodes differed (`repeat` 2 or more).
    pub nondeterministic: usize,
    /// Their request ids.
    pub nondeterministic_requests: Vec<String>,
    /// The backend used.
    pub device: String,
    /// The replayed checkpoint.
    pub model: String,
    /// The verdict file written (none when there were no suspects).
    pub written: Option<String>,
    /// Wall time of the run.
    pub elapsed_s: f64,
}

/// Replays the suspects of `dataset` and writes their verdicts.
pub fn replay_dataset(
    replay: &ReplayModel,
    dataset: &DatasetRoot,
    run: &ReplayRun,
    rt: &tokio::runtime::Runtime,
) -> Result<ReplaySummary> {
    let options = run.options;
    if !(0.0..=1.0).contains(&options.threshold) {
        return Err(config_err!("--threshold {} is not a probability in [0, 1]", options.threshold));
    }
    if options.repeat == 0 {
        return Err(config_err!("--repeat must be at least 1"));
    }
    let started = std::time::Instant::now();
    let replayed_at_micros = chrono::Utc::now().timestamp_micros();
    let suspects = rt.block_on(verdicts::select_suspects(dataset, run.predicate.as_deref(), run.limit))?;
    let progress = Progress::items(run.progress, suspects.len() as u64, "suspects");
    let mut rows = Vec::with_capacity(suspects.len());
    if options.batch > 1 {
        // One batch at a time, its matrix products on every thread.
        for group in suspects.chunks(suspects_at_once(replay, &suspects, &options, options.batch)) {
            rows.extend(replay_batch(replay, group, &options));
            progress.inc(group.len() as u64);
        }
    } else {
        // One suspect per thread.
        let at_once = suspects_at_once(replay, &suspects, &options, crate::resources::threads());
        for group in suspects.chunks(at_once) {
            rows.par_extend(group.par_iter().map(|s| {
                let row = replay_suspect(replay, s, &options);
                progress.inc(1);
                row
            }));
        }
    }
    drop(progress);
    let mut summary = ReplaySummary {
        suspects: rows.len(),
        device: replay.device.label(),
        model: run.model_name.clone(),
        ..Default::default()
    };
    for row in &rows {
        match row.verdict {
            Verdict::NaturalStop => summary.natural_stop += 1,
            Verdict::ConfirmedTruncation => summary.confirmed_truncation += 1,
            Verdict::PromptTruncated => summary.prompt_truncated += 1,
            Verdict::Error => summary.error += 1,
        }
        if row.deterministic == Some(false) {
            summary.nondeterministic += 1;
            summary.nondeterministic_requests.push(row.request_id.clone());
        }
    }
    if !rows.is_empty() {
        let info = RunInfo {
            model: summary.model.clone(),
            device: summary.device.clone(),
            threshold: options.threshold,
            replayed_at_micros,
        };
        let batch = verdicts::to_batch(&rows, &info)?;
        summary.written = Some(verdicts::write_verdicts(dataset, &batch, rt)?);
    }
    summary.elapsed_s = started.elapsed().as_secs_f64();
    Ok(summary)
}

/// How many suspects replay at once: `at_most` (one per thread, or the
/// batch size), fewer where half the
/// memory available would not hold that many of the longest suspect's
/// sequences (its logged text at about two bytes a token, plus the
/// continuation, within the context window).
fn suspects_at_once(replay: &ReplayModel, suspects: &[Suspect], options: &ReplayOptions, at_most: usize) -> usize {
    let config = replay.model.config();
    let longest = suspects
        .iter()
        .map(|s| s.prompt.as_deref().map_or(0, str::len) + s.model_output.as_deref().map_or(0, str::len))
        .max()
        .unwrap_or(0);
    let tokens = (longest / 2 + options.max_new_tokens + 2).min(config.max_position_embeddings.max(1));
    let each = kv_cache::sequence_bytes(config, tokens).max(1) as u64;
    let budget = crate::resources::memory_share(0.5, 256 << 20, u64::MAX);
    ((budget / each) as usize).clamp(1, at_most.max(1))
}
