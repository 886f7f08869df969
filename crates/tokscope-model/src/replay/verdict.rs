//! Verdicts on suspected silent truncations: does the model itself say the
//! logged output was finished? One request is replayed by teacher forcing the
//! prompt plus the logged output in a single batched prefill, reading
//! P(EOS) at the cut, then decoding greedily a few tokens further.
//!
//! Definitions (also in docs/replay.md):
//! - `p_eos_at_cut` = P(EOS | prompt, logged output), the softmax mass of all EOS ids.
//! - `natural_stop`: `p_eos_at_cut >= threshold`.
//! - `confirmed_truncation`: `p_eos_at_cut < threshold` (the model would have continued).
//! - `prompt_truncated`: prompt + output tokens exceed `max_position_embeddings`;
//!   the serving stack cannot have seen the whole prompt, nothing is replayed.
//! - `error`: the request cannot be replayed (null or empty prompt, tokenizer failure).

pub use tokscope_core::catalog::replay_verdicts::{Verdict, VerdictRow};

use super::{GreedyDecode, ReplayModel};
use crate::error::Result;

/// Default `--threshold`: P(EOS) at or above it makes the cut a natural stop.
pub const DEFAULT_THRESHOLD: f64 = 0.5;
/// Greedy tokens decoded past the cut to show what the model would have said.
pub const CONTINUATION_TOKENS: usize = 16;

/// A request selected for replay.
#[derive(Debug, Clone, PartialEq)]
pub struct Suspect {
    /// `requests.request_id`.
    pub request_id: String,
    /// The logged prompt text (null when the log has none).
    pub prompt: Option<String>,
    /// The logged output, raw (special tokens kept).
    pub model_output: Option<String>,
}

/// Settings of one replay run.
#[derive(Debug, Clone, Copy)]
pub struct ReplayOptions {
    /// P(EOS) at or above this is a natural stop.
    pub threshold: f64,
    /// Greedy tokens decoded after the cut (capped by the context window).
    pub max_new_tokens: usize,
    /// Times each suspect is decoded; with 2 or more, runs are compared bit for bit.
    pub repeat: usize,
    /// Suspects decoded together in one batch ([`replay_batch`]); 1 replays
    /// each alone. Verdicts do not depend on it.
    pub batch: usize,
}

impl Default for ReplayOptions {
    fn default() -> Self {
        ReplayOptions { threshold: DEFAULT_THRESHOLD, max_new_tokens: CONTINUATION_TOKENS, repeat: 1, batch: 1 }
    }
}

/// Replays one suspect. Never fails: a request that cannot be replayed gets an
/// `error` verdict with its reason, so one bad row does not stop a batch.
pub fn replay_suspect(replay: &ReplayModel, suspect: &Suspect, options: &ReplayOptions) -> VerdictRow {
    match try_replay(replay, suspect, options) {
        Ok(row) => row,
        Err(e) => VerdictRow::error(&suspect.request_id, e.to_string()),
    }
}

/// Replays `suspects` as one batch: each is prepared alone (tokenized,
/// checked against the context window), those left to decode are decoded
/// together ([`ReplayModel::greedy_ids_batch`]), `repeat` times. The rows
/// equal [`replay_suspect`]'s one by one; when the batch cannot run (one
/// sequence it cannot take), each suspect is replayed alone, so only that one
/// gets an `error` verdict.
pub fn replay_batch(replay: &ReplayModel, suspects: &[Suspect], options: &ReplayOptions) -> Vec<VerdictRow> {
    let prepared: Vec<Result<Prepared>> = suspects.iter().map(|s| prepare(replay, s, options)).collect();
    let pending: Vec<(&[u32], usize)> = prepared
        .iter()
        .filter_map(|p| match p {
            Ok(Prepared::Decode { ids, budget, .. }) => Some((ids.as_slice(), *budget)),
            _ => None,
        })
        .collect();
    let runs: Result<Vec<Vec<GreedyDecode>>> =
        (0..options.repeat.max(1)).map(|_| replay.greedy_ids_batch(&pending)).collect();
    let Ok(runs) = runs else {
        return suspects.iter().map(|s| replay_suspect(replay, s, options)).collect();
    };
    // Each run's decodes in suspect order, taken (not copied) one suspect at a time.
    let mut runs: Vec<_> = runs.into_iter().map(Vec::into_iter).collect();
    prepared
        .into_iter()
        .zip(suspects)
        .map(|(p, suspect)| {
            let row = match p {
                Ok(Prepared::Done(row)) => Ok(row),
                Ok(Prepared::Decode { row, .. }) => {
                    // A run short of this suspect leaves no decodes: `finish` says so.
                    let repeats: Vec<GreedyDecode> =
                        runs.iter_mut().map(Iterator::next).collect::<Option<_>>().unwrap_or_default();
                    finish(replay, row, repeats, options)
                }
                Err(e) => Err(e),
            };
            row.unwrap_or_else(|e| VerdictRow::error(&suspect.request_id, e.to_string()))
        })
        .collect()
}

/// A suspect ready to decode, or already judged without decoding.
enum Prepared {
    Done(VerdictRow),
    Decode { row: VerdictRow, ids: Vec<u32>, budget: usize },
}

fn try_replay(replay: &ReplayModel, suspect: &Suspect, options: &ReplayOptions) -> Result<VerdictRow> {
    match prepare(replay, suspect, options)? {
        Prepared::Done(row) => Ok(row),
        Prepared::Decode { row, ids, budget } => {
            let repeats =
                (0..options.repeat.max(1)).map(|_| replay.greedy_ids(&ids, budget)).collect::<Result<Vec<_>>>()?;
            finish(replay, row, repeats, options)
        }
    }
}

/// The verdict of a decoded suspect from its decodes (`repeat` of them, the
/// first one kept; later ones compared with it bit for bit).
fn finish(
    replay: &ReplayModel,
    mut row: VerdictRow,
    repeats: Vec<GreedyDecode>,
    options: &ReplayOptions,
) -> Result<VerdictRow> {
    let mut repeats = repeats.into_iter();
    let first = repeats.next().ok_or_else(|| model_err!("no decode of {}", row.request_id))?;
    let mut deterministic = None;
    for again in repeats {
        let same = again.greedy_ids == first.greedy_ids
            && again.p_eos.len() == first.p_eos.len()
            && again.p_eos.iter().zip(&first.p_eos).all(|(a, b)| a.to_bits() == b.to_bits());
        deterministic = Some(deterministic.unwrap_or(true) && same);
    }
    let p_eos = first.p_eos.first().copied().unwrap_or(f64::NAN);
    row.verdict = if p_eos >= options.threshold { Verdict::NaturalStop } else { Verdict::ConfirmedTruncation };
    row.reason = None;
    row.p_eos_at_cut = Some(p_eos);
    row.continuation = Some(replay.tokenizer.decode(&first.greedy_ids)?);
    row.continuation_ended_with_eos = Some(first.ended_with_eos);
    row.deterministic = deterministic;
    Ok(row)
}

/// Tokenizes a suspect and checks it against the context window: its
/// verdict when that settles it, else the ids to decode and the budget.
fn prepare(replay: &ReplayModel, suspect: &Suspect, options: &ReplayOptions) -> Result<Prepared> {
    let id = &suspect.request_id;
    let Some(prompt) = suspect.prompt.as_deref() else {
        return Ok(Prepared::Done(VerdictRow::error(id, "prompt is null")));
    };
    if prompt.trim().is_empty() {
        return Ok(Prepared::Done(VerdictRow::error(id, "empty prompt")));
    }
    let Some(raw_output) = suspect.model_output.as_deref() else {
        return Ok(Prepared::Done(VerdictRow::error(id, "model_output is null")));
    };
    let config = replay.model.config();
    let eos_texts: Vec<String> = config.eos_token_ids.iter().filter_map(|&e| replay.tokenizer.token_text(e)).collect();
    let output = strip_eos_marker(raw_output, &eos_texts);
    let specials = replay.tokenizer.special_token_texts();

    let prompt_ids = replay.tokenizer.encode_prompt(prompt)?;
    let (output_ids, output_offsets) = replay.tokenizer.encode_with_offsets(output)?;
    let total = prompt_ids.len() + output_ids.len();
    let window = config.max_position_embeddings;
    let mut row = VerdictRow {
        prompt_tokens_replayed: prompt_ids.len() as i64,
        output_tokens_replayed: output_ids.len() as i64,
        ..VerdictRow::error(id, "")
    };
    if total > window {
        // The cut that matters is where the window ends: the first token that
        // did not fit. Find it in whichever text (prompt or output) holds it.
        let (text, offsets, index) = if window < prompt_ids.len() {
            let (_, prompt_offsets) = replay.tokenizer.encode_with_offsets(prompt)?;
            // encode_prompt may have put a BOS first that the raw encoding lacks.
            let shift = prompt_ids.len() - prompt_offsets.len();
            (prompt, prompt_offsets, window.saturating_sub(shift))
        } else {
            (output, output_offsets, window - prompt_ids.len())
        };
        let (in_special, in_char) = cut_inside_window(text, &offsets, index, &specials);
        row.verdict = Verdict::PromptTruncated;
        row.reason = Some(format!("prompt + output is {total} tokens; the context window is {window}"));
        row.cut_in_special_token = in_special;
        row.cut_in_utf8_char = in_char;
        return Ok(Prepared::Done(row));
    }
    // The logged text ends at the cut: inspect its tail (the prompt when the output is empty).
    let tail = if output.is_empty() { prompt } else { output };
    row.cut_in_special_token = ends_inside_special(tail, &specials);
    row.cut_in_utf8_char = tail.ends_with(char::REPLACEMENT_CHARACTER);

    let ids: Vec<u32> = prompt_ids.iter().chain(&output_ids).copied().collect();
    // Every decoded token is run once more for its P(EOS), so stay inside the window.
    let budget = options.max_new_tokens.min(window - total);
    Ok(Prepared::Decode { row, ids, budget })
}

/// Removes one trailing EOS marker text (`</s>`), so a complete output whose
/// stop was logged is scored at the same cut as one whose stop was dropped.
pub fn strip_eos_marker<'a>(output: &'a str, eos_texts: &[String]) -> &'a str {
    eos_texts.iter().filter(|m| !m.is_empty()).find_map(|m| output.strip_suffix(m.as_str())).unwrap_or(output)
}

/// Whether `text` ends with a proper prefix (two bytes or more, so a lone `<`
/// in prose does not count) of a special delimiter: the log was cut inside it.
pub fn ends_inside_special(text: &str, specials: &[String]) -> bool {
    specials.iter().any(|s| (2..s.len()).filter(|&n| s.is_char_boundary(n)).any(|n| text.ends_with(&s[..n])))
}

/// Where the context window ends inside `text` (token `index` is the first that
/// did not fit; `offsets` are byte spans): `(inside a special delimiter,
/// inside a UTF-8 character)`. A byte-level tokenizer can split a character over
/// two tokens; both then report the character's span, so they overlap.
pub fn cut_inside_window(text: &str, offsets: &[(usize, usize)], index: usize, specials: &[String]) -> (bool, bool) {
    let Some(&(cut, _)) = offsets.get(index) else {
        return (false, false);
    };
    let in_char = !text.is_char_boundary(cut)
        || index.checked_sub(1).and_then(|i| offsets.get(i)).is_some_and(|&(_, prev_end)| prev_end > cut);
    let in_special = specials
        .iter()
        .filter(|s| !s.is_empty())
        .any(|s| text.match_indices(s.as_str()).any(|(start, m)| start < cut && cut < start + m.len()));
    (in_special, in_char)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn specials() -> Vec<String> {
        vec!["<|user|>".into(), "</s>".into()]
    }

    #[test]
    fn a_trailing_eos_marker_is_stripped_once() {
        let eos = vec!["</s>".to_string()];
        assert_eq!(strip_eos_marker("done.</s>", &eos), "done.");
        assert_eq!(strip_eos_marker("done.</s></s>", &eos), "done.</s>");
        assert_eq!(strip_eos_marker("not done", &eos), "not done");
    }

    #[test]
    fn a_tail_inside_a_delimiter_is_flagged() {
        assert!(ends_inside_special("hello <|us", &specials()));
        assert!(ends_inside_special("bye </", &specials()));
        assert!(!ends_inside_special("a < b", &specials()));
        assert!(!ends_inside_special("complete <|user|>", &specials()));
    }

    #[test]
    fn window_cuts_inside_delimiters_and_characters_are_flagged() {
        // "ab<|user|>cd" cut at byte 4 (inside the delimiter).
        let text = "ab<|user|>cd";
        let offsets = [(0, 2), (2, 4), (4, 10), (10, 12)];
        assert_eq!(cut_inside_window(text, &offsets, 2, &specials()), (true, false));
        assert_eq!(cut_inside_window(text, &offsets, 3, &specials()), (false, false));
        // "é" split over two byte-level tokens that both span the character.
        let text = "xé";
        let offsets = [(0, 1), (1, 3), (1, 3)];
        assert_eq!(cut_inside_window(text, &offsets, 2, &specials()), (false, true));
        assert_eq!(cut_inside_window(text, &offsets, 1, &specials()), (false, false));
        // Past the end: nothing to flag.
        assert_eq!(cut_inside_window(text, &offsets, 9, &specials()), (false, false));
    }

    #[test]
    fn verdict_names_are_the_stored_values() {
        let names: Vec<_> =
            [Verdict::NaturalStop, Verdict::ConfirmedTruncation, Verdict::PromptTruncated, Verdict::Error]
                .iter()
                .map(|v| v.as_str())
                .collect();
        assert_eq!(names, ["natural_stop", "confirmed_truncation", "prompt_truncated", "error"]);
    }
}
