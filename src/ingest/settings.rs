//! How an ingest reads its inputs and writes its files, as typed values:
//! `tokscope ingest`'s flags parse straight into them, and a run file's
//! `[ingest]` table (`pipeline::config::IngestConfig`) converts its strings
//! into the same; [`IngestSettings::reader`] builds the core's reader.

use std::path::PathBuf;

use parquet::basic::Compression;
use tokscope_core::attribution::AttributeMap;
use tokscope_core::derive::{ContextBins, DeriveSettings, EosMarkers, VariantMap};
use tokscope_core::formats::{Format, TimeUnit};
use tokscope_core::reader::ReaderBuilder;
use tokscope_core::redact::{Redaction, Redactor};

use crate::error::Result;
use crate::resources::MemoryBudget;

/// Every setting of an ingest, with the defaults of `tokscope ingest`.
#[derive(Debug, Clone)]
pub struct IngestSettings {
    /// A forced input format (`None`: detected per file).
    pub format: Option<Format>,
    /// Context-bin edges over `prompt_tokens`.
    pub bins: ContextBins,
    /// A JSON file of extra EOS markers.
    pub eos_markers: Option<PathBuf>,
    /// The model of records that log none.
    pub model: Option<String>,
    /// Start of traces with relative timestamps, microseconds since the epoch.
    pub base_time_micros: i64,
    /// How prompts, outputs and rejected lines are stored.
    pub redact: Redaction,
    /// Longer lines are rejected unread (`None`: the reader's default).
    pub max_line_bytes: Option<usize>,
    /// The unit of durations logged as bare numbers.
    pub time_unit: TimeUnit,
    /// A JSON file of rules mapping models to experiment arms.
    pub variants: Option<PathBuf>,
    /// The user's own fields sent to attribution columns (`--attribute`).
    pub attributes: AttributeMap,
    /// The Parquet codec of the files written.
    pub compression: Compression,
    /// Most memory the ingest may hold.
    pub memory_limit: MemoryBudget,
    /// Most requests to the store in flight at once.
    pub io_concurrency: usize,
}

impl Default for IngestSettings {
    fn default() -> Self {
        Self {
            format: None,
            bins: ContextBins::default(),
            eos_markers: None,
            model: None,
            base_time_micros: 0,
            redact: Redaction::default(),
            max_line_bytes: None,
            time_unit: TimeUnit::default(),
            variants: None,
            attributes: AttributeMap::default(),
            compression: crate::dataset::writer::default_compression(),
            memory_limit: MemoryBudget::Auto,
            io_concurrency: super::fetch::DEFAULT_IO_CONCURRENCY,
        }
    }
}

impl IngestSettings {
    /// The core's reader for these settings: the marker and variant files
    /// are read here, and the redaction key from the environment.
    pub fn reader(&self) -> Result<ReaderBuilder> {
        let markers = match &self.eos_markers {
            Some(path) => EosMarkers::from_file(path)?,
            None => EosMarkers::default(),
        };
        let variants = match &self.variants {
            Some(path) => VariantMap::from_file(path)?,
            None => VariantMap::default(),
        };
        let redaction = Redactor::from_env(self.redact)?;
        let mut reader = ReaderBuilder::new()
            .with_format(self.format)
            .with_derive_settings(DeriveSettings {
                bins: self.bins.clone(),
                markers,
                redaction,
                variants,
                attributes: self.attributes.clone(),
            })
            .with_default_model(self.model.clone())
            .with_base_time_micros(self.base_time_micros)
            .with_time_unit(self.time_unit);
        if let Some(max) = self.max_line_bytes {
            reader = reader.with_max_line_bytes(max);
        }
        Ok(reader)
    }
}

/// Parses an RFC 3339 time into microseconds since the epoch (`--base-time`).
pub fn parse_base_time(text: &str) -> Result<i64> {
    Ok(chrono::DateTime::parse_from_rfc3339(text)
        .map_err(|e| config_err!("base time {text:?} is not RFC 3339: {e}"))?
        .timestamp_micros())
}
