//! The library's one error type. Binaries wrap it in `anyhow`; library code
//! returns [`Result`] and attaches the context (file, line, table) where the
//! error happens, so a message always says where to look.
//!
//! Construct errors with the macros [`config_err!`](crate::config_err),
//! [`model_err!`](crate::model_err) and [`internal_err!`](crate::internal_err)
//! (like DataFusion's `plan_err!`), or with `?` from the wrapped error types.

use std::path::PathBuf;

/// Everything that can go wrong inside tokscope.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading or writing a file or object failed.
    #[error("reading {path}: {source}")]
    Io {
        /// The file or object concerned.
        path: String,
        /// The underlying I/O error.
        source: std::io::Error,
    },
    /// The command line, a configuration file or a dataset is invalid.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// An object-store operation failed.
    #[error("object store: {0}")]
    Store(#[from] object_store::Error),
    /// An object-store operation on a known object or prefix failed (after the client's retries).
    #[error("object store, {location}: {source}")]
    StoreAt {
        /// The object or prefix, as a URL.
        location: String,
        /// The store's error.
        source: object_store::Error,
    },
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
    /// Another process holds the dataset's writer lease.
    #[error("dataset {dataset} is being written by {holder}; wait for it to finish, or raise the lease wait")]
    LeaseBusy {
        /// The dataset.
        dataset: String,
        /// Who holds the lease.
        holder: String,
    },
    /// A bug or a broken invariant inside tokscope (a thread that panicked):
    /// never the user's input.
    #[error("internal error: {0}")]
    Internal(String),
}

/// Shorthand for results carrying [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl From<tokscope_core::Error> for Error {
    fn from(e: tokscope_core::Error) -> Self {
        // The core's variants that have a twin here become the twin, so a
        // caller matches one `Error::Config` whichever crate raised it.
        match e {
            tokscope_core::Error::Io { path, source } => Error::Io { path, source },
            tokscope_core::Error::Config(m) => Error::Config(m),
            tokscope_core::Error::Json { path, source } => Error::Json { path, source },
            tokscope_core::Error::Arrow(e) => Error::Arrow(e),
            tokscope_core::Error::Internal(m) => Error::Internal(m),
        }
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

impl Error {
    /// Wraps an I/O error with the path it concerns.
    pub fn io(path: impl std::fmt::Display, source: std::io::Error) -> Self {
        Error::Io { path: path.to_string(), source }
    }

    /// Wraps an object-store error with the object or prefix it concerns.
    pub fn store_at(location: impl std::fmt::Display) -> impl FnOnce(object_store::Error) -> Self {
        let location = location.to_string();
        move |source| Error::StoreAt { location, source }
    }
}
