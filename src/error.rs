//! The library's one error type. Binaries wrap it in `anyhow`; library code
//! returns [`Result`] and attaches the context (file, line, table) where the
//! error happens, so a message always says where to look.

use std::path::PathBuf;

/// Everything that can go wrong inside tokscope.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading an input (local file or object) failed.
    #[error("reading {path}: {source}")]
    Io {
        /// The file or object being read or written.
        path: String,
        /// The underlying I/O error.
        source: std::io::Error,
    },
    /// An input could not be parsed as a whole (not a single line: those go to `rejects`).
    #[error("ingesting {file}: {message}")]
    Ingest {
        /// The input file or object URL.
        file: String,
        /// What was wrong.
        message: String,
    },
    /// The command line or a configuration file is invalid.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// An object-store operation failed.
    #[error("object store: {0}")]
    Store(#[from] object_store::Error),
    /// Arrow failed to build or convert a batch.
    #[error("arrow: {0}")]
    Arrow(#[from] arrow::error::ArrowError),
    /// Parquet failed to read or write.
    #[error("parquet: {0}")]
    Parquet(#[from] parquet::errors::ParquetError),
    /// DataFusion failed to plan or run a query.
    #[error("sql: {0}")]
    Sql(#[from] datafusion::error::DataFusionError),
    /// JSON (de)serialisation of a side file failed.
    #[error("json {path}: {source}")]
    Json {
        /// The file being read or written.
        path: PathBuf,
        /// The underlying error.
        source: serde_json::Error,
    },
    /// The replay decoder failed (model loading, tokenizer, numerics).
    #[error("model: {0}")]
    Model(String),
}

/// Shorthand for results carrying [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Builds an [`Error::Config`] from a format string, like DataFusion's `plan_err!`.
#[macro_export]
macro_rules! config_err {
    ($($arg:tt)*) => { $crate::error::Error::Config(format!($($arg)*)) };
}

impl Error {
    /// Wraps an I/O error with the path it concerns.
    pub fn io(path: impl std::fmt::Display, source: std::io::Error) -> Self {
        Error::Io { path: path.to_string(), source }
    }
}
