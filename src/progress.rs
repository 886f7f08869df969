//! Progress of long commands (ingest, replay, mediate, trace, export) on
//! stderr: one bar per run, drawn only when stderr is a terminal and the
//! command was not asked to be quiet, so logs, pipes and cron mail stay clean.
//! A bar clears itself when the run ends, failed runs included.
//!
//! ```
//! let progress = tokscope::progress::Progress::items(true, 3, "prompts");
//! for _ in 0..3 {
//!     progress.inc(1);
//! }
//! ```

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressStyle};

/// A progress bar, or nothing when progress is not shown.
#[derive(Debug, Default)]
pub struct Progress {
    bar: Option<ProgressBar>,
}

impl Progress {
    /// No bar.
    pub fn hidden() -> Self {
        Progress { bar: None }
    }

    /// Whether a run asked for progress (`enabled`, i.e. not `--quiet`) shows it:
    /// only on a terminal.
    pub fn shown(enabled: bool) -> bool {
        enabled && std::io::stderr().is_terminal()
    }

    /// A bar over `total` bytes (ingest: bytes read, rate, a message).
    pub fn bytes(enabled: bool, total: u64) -> Self {
        Self::with_template(enabled, total, "{spinner} {bytes}/{total_bytes} {bytes_per_sec} {wide_msg}")
    }

    /// A bar over `total` items of a kind (`what`: "suspects", "prompts", "cells").
    pub fn items(enabled: bool, total: u64, what: &str) -> Self {
        let template =
            format!("{{spinner}} [{{bar:30}}] {{pos}}/{{len}} {what} {{elapsed}} (eta {{eta}}) {{wide_msg}}");
        Self::with_template(enabled, total, &template)
    }

    fn with_template(enabled: bool, total: u64, template: &str) -> Self {
        if !Self::shown(enabled) {
            return Self::hidden();
        }
        let bar = ProgressBar::new(total);
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.enable_steady_tick(std::time::Duration::from_millis(200));
        Progress { bar: Some(bar) }
    }

    /// Whether a bar is drawn.
    pub fn is_shown(&self) -> bool {
        self.bar.is_some()
    }

    /// Counts `n` more done.
    pub fn inc(&self, n: u64) {
        if let Some(bar) = &self.bar {
            bar.inc(n);
        }
    }

    /// The text after the counts.
    pub fn set_message(&self, message: impl Into<String>) {
        if let Some(bar) = &self.bar {
            bar.set_message(message.into());
        }
    }

    /// Runs `f` (which may print on stderr) with the bar hidden.
    pub fn suspend<R>(&self, f: impl FnOnce() -> R) -> R {
        match &self.bar {
            Some(bar) => bar.suspend(f),
            None => f(),
        }
    }

    /// Prints `line` on stderr above the bar (or plainly when there is none).
    pub fn println(&self, line: impl AsRef<str>) {
        match &self.bar {
            Some(bar) => bar.suspend(|| eprintln!("{}", line.as_ref())),
            None => eprintln!("{}", line.as_ref()),
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}

/// The decoder's long work (a causal-tracing grid) counts on the bar.
impl tokscope_model::progress::ProgressSink for Progress {
    fn begin(&self, total: u64, _what: &str) {
        if let Some(bar) = &self.bar {
            bar.set_length(total);
        }
    }

    fn inc(&self, n: u64) {
        Progress::inc(self, n);
    }
}
