//! The core's error type. The `tokscope` crate converts each variant into its
//! twin in `tokscope::Error`, so callers of either crate match one type.

use std::path::PathBuf;

/// What can go wrong in the engine-free core. Bad input lines are not errors:
/// they become rows of the `rejects` table.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading a file failed.
    #[error("reading {path}: {source}")]
    Io {
        /// The file concerned.
        path: String,
        /// The underlying I/O error.
        source: std::io::Error,
    },
    /// A configuration value or file is invalid.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// A JSON configuration file could not be read.
    #[error("json {path}: {source}")]
    Json {
        /// The file being read.
        path: PathBuf,
        /// The underlying error.
        source: serde_json::Error,
    },
    /// A model directory's files are invalid (config.json, tokenizer.json, safetensors).
    #[error("model: {0}")]
    Model(String),
    /// Arrow failed to build a batch.
    #[error("arrow: {0}")]
    Arrow(#[from] arrow_schema::ArrowError),
    /// A bug or a broken invariant inside tokscope (a thread that panicked, a
    /// builder in an impossible state): never the user's input.
    #[error("internal error: {0}")]
    Internal(String),
}

/// Shorthand for results carrying [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Wraps an I/O error with the path it concerns.
    pub fn io(path: impl std::fmt::Display, source: std::io::Error) -> Self {
        Error::Io { path: path.to_string(), source }
    }
}

/// Builds an [`Error::Config`] from a format string, like DataFusion's `plan_err!`.
#[macro_export]
macro_rules! config_err {
    ($($arg:tt)*) => { $crate::error::Error::Config(format!($($arg)*)) };
}

/// Builds an [`Error::Model`] from a format string.
#[macro_export]
macro_rules! model_err {
    ($($arg:tt)*) => { $crate::error::Error::Model(format!($($arg)*)) };
}

/// Builds an [`Error::Internal`] from a format string.
#[macro_export]
macro_rules! internal_err {
    ($($arg:tt)*) => { $crate::error::Error::Internal(format!($($arg)*)) };
}
