//! Object-store access shared by ingest (inputs) and the engine (datasets).
//! Credentials come only from the environment or the standard cloud config
//! that each `object_store` builder reads; they are never logged.

use std::sync::Arc;
use std::time::Duration;

use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::azure::{AzureConfigKey, MicrosoftAzureBuilder};
use object_store::gcp::{GoogleCloudStorageBuilder, GoogleConfigKey};
use object_store::http::HttpBuilder;
use object_store::local::LocalFileSystem;
use object_store::{BackoffConfig, ClientConfigKey, ObjectStore, RetryConfig};
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

/// How the object-store client retries and times out. The defaults are
/// `object_store`'s: 10 retries within 3 minutes, exponential backoff from
/// 100 ms to 15 s, requests that fail with a 5xx, a 429 (throttling) or a
/// connection error are retried; a request times out after 30 s, a
/// connection after 5 s. `tokscope run --config` sets them from its `[store]`
/// table.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// Retries of a failed request.
    pub max_retries: usize,
    /// Give up retrying a request after this long.
    pub retry_timeout: Duration,
    /// The first backoff; each next one is up to `backoff_base` times longer.
    pub backoff_initial: Duration,
    /// The longest backoff.
    pub backoff_max: Duration,
    /// Growth factor of the backoff.
    pub backoff_base: f64,
    /// A request (connect to last byte) fails after this long.
    pub timeout: Duration,
    /// Connecting fails after this long.
    pub connect_timeout: Duration,
}

impl Default for StoreOptions {
    fn default() -> Self {
        let retry = RetryConfig::default();
        StoreOptions {
            max_retries: retry.max_retries,
            retry_timeout: retry.retry_timeout,
            backoff_initial: retry.backoff.init_backoff,
            backoff_max: retry.backoff.max_backoff,
            backoff_base: retry.backoff.base,
            timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(5),
        }
    }
}

impl StoreOptions {
    fn retry(&self) -> RetryConfig {
        RetryConfig {
            max_retries: self.max_retries,
            retry_timeout: self.retry_timeout,
            backoff: BackoffConfig {
                init_backoff: self.backoff_initial,
                max_backoff: self.backoff_max,
                base: self.backoff_base,
            },
        }
    }

    /// The client settings as config keys, so they add to (rather than
    /// replace) what each builder read from the environment (`AWS_ALLOW_HTTP`, ...).
    fn client_config(&self) -> [(ClientConfigKey, String); 2] {
        let secs = |d: Duration| format!("{}ms", d.as_millis());
        [(ClientConfigKey::Timeout, secs(self.timeout)), (ClientConfigKey::ConnectTimeout, secs(self.connect_timeout))]
    }
}

/// The store serving `url`'s bucket/host, configured from the environment
/// (`AWS_*`, `GOOGLE_*`, `AZURE_*`, e.g. `AWS_ENDPOINT_URL` for an
/// S3-compatible server) and `options`.
pub fn store_for(url: &Url, options: &StoreOptions) -> Result<Arc<dyn ObjectStore>> {
    let (retry, client) = (options.retry(), options.client_config());
    let store: Arc<dyn ObjectStore> = match url.scheme() {
        "s3" | "s3a" => {
            let builder = AmazonS3Builder::from_env().with_url(url.as_str()).with_retry(retry);
            let builder = client.into_iter().fold(builder, |b, (k, v)| b.with_config(AmazonS3ConfigKey::Client(k), v));
            Arc::new(builder.build()?)
        }
        "gs" => {
            let builder = GoogleCloudStorageBuilder::from_env().with_url(url.as_str()).with_retry(retry);
            let builder = client.into_iter().fold(builder, |b, (k, v)| b.with_config(GoogleConfigKey::Client(k), v));
            Arc::new(builder.build()?)
        }
        "az" | "abfs" | "abfss" | "azure" => {
            let builder = MicrosoftAzureBuilder::from_env().with_url(url.as_str()).with_retry(retry);
            let builder = client.into_iter().fold(builder, |b, (k, v)| b.with_config(AzureConfigKey::Client(k), v));
            Arc::new(builder.build()?)
        }
        "http" | "https" => {
            if !url.username().is_empty() || url.password().is_some() {
                return Err(config_err!(
                    "user information (a name or password) in {} is not supported: serve the logs from \
                     an object store (s3://, gs://, az://) with credentials in the environment",
                    crate::redact::redact_urls(url.as_str())
                ));
            }
            let base = format!("{}://{}", url.scheme(), url.authority());
            // object_store's client is https-only unless told otherwise.
            let allow_http = (url.scheme() == "http").to_string();
            let builder =
                HttpBuilder::new().with_url(base).with_retry(retry).with_config(ClientConfigKey::AllowHttp, allow_http);
            Arc::new(client.into_iter().fold(builder, |b, (k, v)| b.with_config(k, v)).build()?)
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
