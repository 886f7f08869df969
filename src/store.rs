//! Object-store access shared by ingest (inputs) and the engine (datasets).
//! Credentials come only from the environment or the standard cloud config
//! that each `object_store` builder reads; they are never logged.

use std::sync::Arc;

use object_store::aws::AmazonS3Builder;
use object_store::azure::MicrosoftAzureBuilder;
use object_store::gcp::GoogleCloudStorageBuilder;
use object_store::http::HttpBuilder;
use object_store::local::LocalFileSystem;
use object_store::ObjectStore;
use url::Url;

use crate::error::{Error, Result};

/// True when `input` names an object-store URL rather than a local path.
pub fn is_url(input: &str) -> bool {
    input.contains("://")
}

/// Parses a URL, mapping errors to a config error that names the input.
pub fn parse_url(input: &str) -> Result<Url> {
    Url::parse(input).map_err(|e| config_err!("invalid URL {input:?}: {e}"))
}

/// The store serving `url`'s bucket/host, configured from the environment
/// (`AWS_*`, `GOOGLE_*`, `AZURE_*`, e.g. `AWS_ENDPOINT_URL` for an S3-compatible server).
pub fn store_for(url: &Url) -> Result<Arc<dyn ObjectStore>> {
    let store: Arc<dyn ObjectStore> = match url.scheme() {
        "s3" | "s3a" => Arc::new(AmazonS3Builder::from_env().with_url(url.as_str()).build()?),
        "gs" => Arc::new(GoogleCloudStorageBuilder::from_env().with_url(url.as_str()).build()?),
        "az" | "abfs" | "abfss" | "azure" => {
            Arc::new(MicrosoftAzureBuilder::from_env().with_url(url.as_str()).build()?)
        }
        "http" | "https" => {
            let base = format!("{}://{}", url.scheme(), url.authority());
            Arc::new(HttpBuilder::new().with_url(base).build()?)
        }
        "file" => Arc::new(LocalFileSystem::new()),
        other => return Err(config_err!("unsupported URL scheme {other:?} in {url}")),
    };
    Ok(store)
}

/// The object path of `url` inside its store (percent-decoded).
pub fn object_path(url: &Url) -> Result<object_store::path::Path> {
    let raw = url.path().trim_start_matches('/');
    let decoded = percent_encoding::percent_decode_str(raw).decode_utf8_lossy();
    object_store::path::Path::parse(&decoded).map_err(|e| config_err!("invalid object path in {url}: {e}"))
}

/// A small multi-threaded runtime for object-store I/O from synchronous code.
pub fn io_runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Error::io("tokio runtime", e))
}
