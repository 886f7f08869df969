//! Replay: run logged prompts through a real Llama-family decoder to get
//! what the model itself says about them. The decoder, its devices and the
//! verdict on one suspect are the `tokscope-model` crate's (re-exported
//! here); this module selects suspects from a dataset's `requests`
//! ([`verdicts`]), replays them in parallel and stores `replay_verdicts`
//! ([`run`]): the whole `tokscope replay`.
//!
//! ```no_run
//! use tokscope::replay::{DeviceRequest, ReplayModel};
//! let replay = ReplayModel::load("models/tiny-stories-a".as_ref(), DeviceRequest::Auto)?;
//! let (prompt_ids, greedy) = replay.greedy("Once upon a time,", 40)?;
//! println!("{} -> {}", prompt_ids.len(), replay.tokenizer.decode(&greedy.greedy_ids)?);
//! # Ok::<(), tokscope::Error>(())
//! ```

pub mod run;
pub mod verdicts;

pub use tokscope_model::replay::*;
