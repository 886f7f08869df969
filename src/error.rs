//! The library's one error type. Binaries wrap it in `anyhow`; library code
//! returns [`Result`] and attaches the context (file, line, table) where the
//! error happens, so a message always says where to look.
//!
//! Construct errors with the macros [`config_err!`](crate::config_err),
//! [`model_err!`](crate::model_err) and [`internal_err!`](crate::internal_err)
//! (like DataFusion's `plan_err!`), or with `?` from the wrapped error types.

use std::path::PathBuf;

use datafusion::error::DataFusionError;

/// Everything that can go wrong inside tokscope.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading or writing a file or object failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or object concerned.
        path: String,
        /// The underlying I/O error.
        source: std::io::Error,
    },
    /// The command line, a configuration file or a dataset is invalid.
    #[error("{0}")]
    Config(String),
    /// Something named does not exist: a dataset, a table of a dataset.
    #[error("{what}")]
    NotFound {
        /// What is missing, and where.
        what: String,
        /// What to do about it.
        hint: String,
    },
    /// A data file the dataset's file list names is not there: deleted
    /// outside tokscope, or (for a reader that opened the dataset before)
    /// replaced by a compaction committed since; see [`Error::is_vanished_file`].
    #[error(
        "dataset file {path} is gone: the dataset's file list (_files.json) names it, so it was deleted outside \
         tokscope (to read what remains, delete _files.json: the next ingest or compact writes it again from the \
         files present)"
    )]
    Gone {
        /// The file.
        path: String,
    },
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
    /// Writing a dataset file failed (a full disk, a read-only directory).
    #[error("writing {path}: {source}")]
    Write {
        /// The file being written (its hidden temporary name).
        path: String,
        /// Parquet's error, with the I/O error inside.
        source: parquet::errors::ParquetError,
    },
    /// DataFusion failed to plan or run a query. Shown as the innermost
    /// error's own message, once (DataFusion wraps and repeats it).
    #[error("sql: {}", sql_message(.0))]
    Sql(#[source] DataFusionError),
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
    /// A job on a Ballista cluster cannot finish: the scheduler or an
    /// executor was lost, a task failed on an executor, or the job made no
    /// progress for the client's job timeout. Nothing was printed or written.
    #[error("{what}")]
    Cluster {
        /// What happened, naming the scheduler or the executor.
        what: String,
        /// What to do about it.
        hint: String,
    },
    /// Another process holds the dataset's writer lease.
    #[error("dataset {dataset} is being written by {holder}")]
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

impl From<DataFusionError> for Error {
    fn from(e: DataFusionError) -> Self {
        // tokscope's own errors raised inside DataFusion (a table the dataset
        // lacks, a UDF's configuration) come back out as themselves.
        match e {
            DataFusionError::External(inner) => match inner.downcast::<Error>() {
                Ok(ours) => *ours,
                Err(other) => Error::Sql(DataFusionError::External(other)),
            },
            e => Error::Sql(e),
        }
    }
}

impl From<tokscope_core::Error> for Error {
    fn from(e: tokscope_core::Error) -> Self {
        // The core's variants that have a twin here become the twin, so a
        // caller matches one `Error::Config` whichever crate raised it.
        match e {
            tokscope_core::Error::Io { path, source } => Error::Io { path, source },
            tokscope_core::Error::Config(m) => Error::Config(m),
            tokscope_core::Error::Json { path, source } => Error::Json { path, source },
            tokscope_core::Error::Model(m) => Error::Model(m),
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
    /// Whether this is a data file that vanished under a reader: a file the
    /// dataset's list named when the reader opened it, gone when read (a
    /// commit replaced it since: see [`crate::engine::retry_vanished`]).
    pub fn is_vanished_file(&self) -> bool {
        match self {
            Error::Gone { .. } => true,
            Error::Store(object_store::Error::NotFound { .. }) => true,
            Error::StoreAt { source: object_store::Error::NotFound { .. }, .. } => true,
            Error::Sql(e) => names_a_missing_file(e),
            Error::Parquet(e) => chain_has_not_found(e) || names_a_missing_object(&e.to_string()),
            _ => false,
        }
    }

    /// Wraps an I/O error with the path it concerns.
    pub fn io(path: impl std::fmt::Display, source: std::io::Error) -> Self {
        Error::Io { path: path.to_string(), source }
    }

    /// Wraps an object-store error with the object or prefix it concerns.
    pub fn store_at(location: impl std::fmt::Display) -> impl FnOnce(object_store::Error) -> Self {
        let location = location.to_string();
        move |source| Error::StoreAt { location, source }
    }

    /// What to do about the error, where tokscope knows.
    pub fn hint(&self) -> Option<String> {
        match self {
            Error::NotFound { hint, .. } | Error::Cluster { hint, .. } => Some(hint.clone()),
            Error::Write { .. } => Some(
                "make room or fix the permissions of the dataset's directory, then run again: the files of this \
                 run were removed and the dataset is as the last complete run left it"
                    .into(),
            ),
            Error::LeaseBusy { .. } => Some(
                "wait for that run to finish, or let this one wait for it: `[lease] wait_s` in the run config \
                 (`--lease-wait` for ingest); a dead holder's lease expires by itself"
                    .into(),
            ),
            Error::Sql(e) => match e.find_root() {
                DataFusionError::SQL(..) => {
                    Some("the SQL dialect is DataFusion's (docs: datafusion.apache.org/user-guide/sql)".into())
                }
                DataFusionError::ResourcesExhausted(_) => {
                    Some("raise the memory limit, or narrow the query (fewer columns, a WHERE on date)".into())
                }
                _ => None,
            },
            _ => None,
        }
    }
}

/// The message of the error DataFusion's chain ends in, without the
/// wrappers' prefixes, backtraces and repeats.
fn sql_message(e: &DataFusionError) -> String {
    let root = e.find_root();
    let text = match root {
        DataFusionError::SQL(parser, _) => {
            let text = parser.to_string();
            format!("syntax error: {}", text.strip_prefix("sql parser error: ").unwrap_or(&text))
        }
        DataFusionError::SchemaError(schema, _) => schema.to_string(),
        DataFusionError::NotImplemented(m) => format!("not supported: {m}"),
        DataFusionError::External(inner) => inner.to_string(),
        DataFusionError::Plan(_)
        | DataFusionError::Execution(_)
        | DataFusionError::Configuration(_)
        | DataFusionError::ResourcesExhausted(_) => root.message().into_owned(),
        other => other.to_string(),
    };
    text.split(DataFusionError::BACK_TRACE_SEP).next().unwrap_or_default().trim_end().to_string()
}

/// Whether a query's error is a file it read that was not there (an object
/// store's or the file system's "not found", typed or as text).
pub(crate) fn names_a_missing_file(e: &DataFusionError) -> bool {
    chain_has_not_found(e) || names_a_missing_object(&e.to_string())
}

/// Whether a message carries an object store's "not found" for an object:
/// DataFusion's Parquet source turns the store's error into text when it
/// fetches a file's footer ("Failed to fetch metadata for file ...: Object
/// Store error: Object at location ... not found"), so no typed cause is left.
pub(crate) fn names_a_missing_object(message: &str) -> bool {
    message.contains("Object at location") && message.contains(" not found")
}

/// Whether an object store's or the file system's "not found" is among the
/// causes of `e`.
fn chain_has_not_found(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(e);
    while let Some(err) = cause {
        if matches!(err.downcast_ref::<object_store::Error>(), Some(object_store::Error::NotFound { .. })) {
            return true;
        }
        if err.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::NotFound) {
            return true;
        }
        cause = err.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::Error;

    #[test]
    fn a_file_gone_under_a_reader_is_told_from_other_errors() {
        let gone = object_store::Error::NotFound { path: "ds/requests/x.parquet".into(), source: "404".into() };
        assert!(Error::Store(gone).is_vanished_file());
        assert!(Error::Gone { path: "x".into() }.is_vanished_file());
        let flattened = datafusion::error::DataFusionError::Execution(
            "Parquet error: Failed to fetch metadata for file ds/x.parquet: Object Store error: Object at location \
             ds/x.parquet not found: No such file or directory (os error 2)"
                .into(),
        );
        assert!(Error::Sql(flattened).is_vanished_file());
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
        let wrapped = datafusion::error::DataFusionError::External(Box::new(io));
        assert!(Error::Sql(wrapped).is_vanished_file());
        assert!(!Error::Config("bad".into()).is_vanished_file());
        assert!(!Error::NotFound { what: "no dataset".into(), hint: String::new() }.is_vanished_file());
        let other = datafusion::error::DataFusionError::Plan("table not found".into());
        assert!(!Error::Sql(other).is_vanished_file());
    }
}
