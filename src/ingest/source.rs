//! Input resolution and reading: local paths, directories, globs and
//! object-store URLs become [`InputObject`]s; each opens as a synchronous,
//! decompressed byte stream (gzip and zstd detected by their magic bytes; a
//! Parquet file, also detected by its magic, reads as one JSON line per row),
//! except a local file stored as is, whose lines are read in blocks at their
//! positions by several threads ([`InputObject::reader`]).

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt;
use object_store::{GetOptions, GetRange, ObjectStore, ObjectStoreExt};

use tokscope_core::file_blocks::read_full_at;
use tokscope_core::reader::{Reader, ReaderBuilder};

use crate::error::{Error, Result};
use crate::store::{self, StoreOptions};

/// One input file or object, with the identity the manifest records.
#[derive(Clone)]
pub struct InputObject {
    /// Display location: an absolute local path or the object URL.
    pub location: String,
    /// Size in bytes (compressed, as stored).
    pub size: u64,
    /// Version marker: modification time (and ETag for objects).
    pub version: String,
    kind: ObjectKind,
}

#[derive(Clone)]
enum ObjectKind {
    Local(PathBuf),
    Remote { store: Arc<dyn ObjectStore>, path: object_store::path::Path },
}

impl std::fmt::Debug for InputObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "InputObject({})", self.location)
    }
}

/// Names that are never inputs: hidden files and tokscope's own side files.
fn is_hidden(name: &str) -> bool {
    name.starts_with('.') || name.starts_with('_')
}

fn has_glob(s: &str) -> bool {
    s.contains(['*', '?', '['])
}

/// Resolves command-line inputs to a sorted, de-duplicated list of objects.
/// The inputs in a store (a HEAD, or a listing, each) are resolved up to
/// `concurrency` at a time; the first error, in the inputs' order, is the
/// result's.
pub fn resolve_inputs(
    inputs: &[String],
    options: &StoreOptions,
    concurrency: usize,
    rt: &tokio::runtime::Runtime,
) -> Result<Vec<InputObject>> {
    Ok(resolve_inputs_after(inputs, options, concurrency, &ListedUpTo::new(), rt)?.0)
}

/// Per input in a store, the last key its listing gave (keys sort as the
/// store lists them): where the next listing of it may start.
pub type ListedUpTo = std::collections::BTreeMap<String, String>;

/// [`resolve_inputs`], each input in a store that `after` names listed from
/// after that key only (S3's `start-after`: where a layout sorts by time,
/// the objects written since); such a listing may find nothing. Also gives
/// the last key each input in a store listed.
pub fn resolve_inputs_after(
    inputs: &[String],
    options: &StoreOptions,
    concurrency: usize,
    after: &ListedUpTo,
    rt: &tokio::runtime::Runtime,
) -> Result<(Vec<InputObject>, ListedUpTo)> {
    let in_store = |input: &String| store::is_url(input) && !input.starts_with("file://");
    let resolving = futures::stream::iter(inputs.iter().filter(|i| in_store(i)))
        .map(|input| resolve_remote(input, options, after.get(input).map(String::as_str)))
        .buffered(concurrency.max(1));
    let mut remote = rt.block_on(resolving.collect::<Vec<_>>()).into_iter();
    let (mut out, mut listed) = (Vec::new(), ListedUpTo::new());
    for input in inputs {
        if in_store(input) {
            let objects = remote.next().ok_or_else(|| internal_err!("{input} was not resolved"))??;
            if let Some(last) = objects.iter().filter_map(InputObject::key).max() {
                listed.insert(input.clone(), last.to_string());
            }
            out.extend(objects);
        } else {
            let local = input.strip_prefix("file://").unwrap_or(input);
            out.extend(resolve_local(local)?);
        }
    }
    out.sort_by(|a, b| a.location.cmp(&b.location));
    out.dedup_by(|a, b| a.location == b.location);
    Ok((out, listed))
}

fn local_object(path: &Path) -> Result<InputObject> {
    let abs = std::fs::canonicalize(path).map_err(|e| Error::io(path.display(), e))?;
    let meta = std::fs::metadata(&abs).map_err(|e| Error::io(abs.display(), e))?;
    let mtime = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_nanos().to_string())
        .unwrap_or_default();
    Ok(InputObject {
        location: abs.display().to_string(),
        size: meta.len(),
        version: mtime,
        kind: ObjectKind::Local(abs),
    })
}

fn walk_dir(dir: &Path, out: &mut Vec<InputObject>) -> Result<()> {
    let mut entries: Vec<_> =
        std::fs::read_dir(dir).map_err(|e| Error::io(dir.display(), e))?.filter_map(|e| e.ok()).collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = entry.file_name();
        if is_hidden(&name.to_string_lossy()) {
            continue;
        }
        let path = entry.path();
        if path.is_dir() {
            walk_dir(&path, out)?;
        } else if path.is_file() {
            out.push(local_object(&path)?);
        }
    }
    Ok(())
}

fn resolve_local(input: &str) -> Result<Vec<InputObject>> {
    let mut out = Vec::new();
    if has_glob(input) {
        let paths = glob::glob(input).map_err(|e| config_err!("bad glob {input:?}: {e}"))?;
        for p in paths {
            let p = p.map_err(|e| Error::io(input, e.into()))?;
            if p.is_file() {
                out.push(local_object(&p)?);
            }
        }
        if out.is_empty() {
            return Err(Error::NotFound {
                what: format!("no input matches {input:?}"),
                hint: "check the pattern; `*` does not cross `/` (use `dir/**/*.jsonl` for subdirectories)".into(),
            });
        }
    } else {
        let path = Path::new(input);
        if path.is_dir() {
            walk_dir(path, &mut out)?;
            if out.is_empty() {
                return Err(Error::NotFound {
                    what: format!("no input file in {input}"),
                    hint: "files whose names start with `.` or `_` are skipped; check the path".into(),
                });
            }
        } else if !path.exists() {
            return Err(Error::NotFound {
                what: format!("no input at {input}: no such file or directory"),
                hint: "check the path (quote globs so tokscope expands them, not the shell)".into(),
            });
        } else {
            out.push(local_object(path)?);
        }
    }
    Ok(out)
}

async fn resolve_remote(input: &str, options: &StoreOptions, after: Option<&str>) -> Result<Vec<InputObject>> {
    let url = store::parse_url(input)?;
    let store = store::store_for(&url, options)?;
    // The location names the object without the URL's user information
    // (a password) or query string (a pre-signed signature): it is stored in
    // `source_file` and the manifest, and the store keeps the credentials.
    let mut bare = url.clone();
    let _ = bare.set_password(None);
    let _ = bare.set_username("");
    let base = bare[..url::Position::BeforePath].to_string();
    let full_path =
        percent_encoding::percent_decode_str(url.path().trim_start_matches('/')).decode_utf8_lossy().into_owned();
    let make = |meta: object_store::ObjectMeta| InputObject {
        location: format!("{base}/{}", meta.location),
        size: meta.size,
        version: format!("{}|{}", meta.last_modified.to_rfc3339(), meta.e_tag.clone().unwrap_or_default()),
        kind: ObjectKind::Remote { store: Arc::clone(&store), path: meta.location },
    };
    // A glob lists from the prefix before its first wildcard and filters.
    let (prefix, pattern) = if has_glob(&full_path) {
        let cut = full_path.find(['*', '?', '[']).unwrap_or(full_path.len());
        let prefix = full_path[..cut].rsplit_once('/').map(|(p, _)| p.to_string()).unwrap_or_default();
        let pat = glob::Pattern::new(&full_path).map_err(|e| config_err!("bad glob {input:?}: {e}"))?;
        (prefix, Some(pat))
    } else {
        (full_path.trim_end_matches('/').to_string(), None)
    };
    // A bucket root (`s3://bucket/`) or a trailing slash always means "list".
    let mut head_error = None;
    if pattern.is_none() && !full_path.is_empty() && !full_path.ends_with('/') {
        // A single object, unless the name is a prefix (a "directory").
        let path = store::object_path(&url)?;
        match store.head(&path).await {
            Ok(meta) => return Ok(vec![make(meta)]),
            Err(e) => head_error = Some(e),
        }
    }
    let prefix_path = if prefix.is_empty() { None } else { Some(object_store::path::Path::from(prefix.as_str())) };
    let mut listing = match after {
        Some(key) => store.list_with_offset(prefix_path.as_ref(), &object_store::path::Path::from(key)),
        None => store.list(prefix_path.as_ref()),
    };
    let mut out = Vec::new();
    while let Some(meta) = listing.next().await {
        // When the name is neither an object nor a listable prefix, the
        // object's error says more (a web server lists nothing: no WebDAV).
        let meta = meta.map_err(|e| match head_error.take() {
            Some(head) => Error::store_at(format!("reading {input}"))(head),
            None => Error::store_at(format!("listing {input}"))(e),
        })?;
        let loc = meta.location.to_string();
        if loc.split('/').any(is_hidden) {
            continue;
        }
        if pattern.as_ref().is_none_or(|p| p.matches(&loc)) {
            out.push(make(meta));
        }
    }
    if out.is_empty() && after.is_none() {
        return Err(Error::NotFound {
            what: format!("no object matches {input:?}"),
            hint:
                "check the bucket, the prefix and the pattern (objects whose names start with `.` or `_` are skipped)"
                    .into(),
        });
    }
    Ok(out)
}

/// Every object in `store` as an input named `memory:///<path>`, in order.
#[cfg(test)]
pub(crate) async fn objects_in(store: Arc<dyn ObjectStore>) -> Vec<InputObject> {
    let mut listing = store.list(None);
    let mut out = Vec::new();
    while let Some(meta) = listing.next().await {
        let meta = meta.expect("the test store lists");
        out.push(InputObject {
            location: format!("memory:///{}", meta.location),
            size: meta.size,
            version: meta.e_tag.clone().unwrap_or_default(),
            kind: ObjectKind::Remote { store: Arc::clone(&store), path: meta.location },
        });
    }
    out.sort_by(|a, b| a.location.cmp(&b.location));
    out
}

/// Objects in a store of at most this many bytes are fetched whole, many at
/// a time, and split in memory; larger ones are streamed. Small enough that
/// `--io-concurrency` of them fit any budget, large enough for the one-object-
/// per-request loggers (LiteLLM's payloads, Helicone's batches).
pub const WHOLE_OBJECT_BYTES: u64 = 1 << 20;

/// Times in a row an object's body may fail, each failure followed by a
/// request for the rest of it, before the failure is the input's.
const BODY_RESUMES: usize = 3;

/// Streams the object at `path` into `tx` until its end, the receiver's
/// drop, or a failure. A body that fails partway (a connection reset, or
/// the client's request timeout, which also runs while a reader waits its
/// turn with its queue full, see `read_ahead`) is asked for again from the
/// first byte not received, of the same version (its ETag): up to
/// [`BODY_RESUMES`] times in a row without a byte in between. An object
/// without an ETag is not resumed, so that bytes of two versions are never
/// joined.
async fn stream_object(
    store: Arc<dyn ObjectStore>,
    path: object_store::path::Path,
    tx: SyncSender<std::io::Result<Bytes>>,
) {
    stream_body(store.as_ref(), &path, |item| send(tx.clone(), item)).await
}

/// [`stream_object`]'s requests, each piece of the body (or the error that
/// ends it) handed to `deliver`, which says whether to go on.
async fn stream_body<D, F>(store: &dyn ObjectStore, path: &object_store::path::Path, mut deliver: D)
where
    D: FnMut(std::io::Result<Bytes>) -> F,
    F: std::future::Future<Output = bool>,
{
    let (mut received, mut etag, mut size, mut failures) = (0u64, None, None, 0);
    loop {
        let options = GetOptions {
            range: (received > 0).then_some(GetRange::Offset(received)),
            if_match: etag.clone(),
            ..Default::default()
        };
        let mut stream = match store.get_opts(path, options).await {
            Ok(res) => {
                etag = etag.or(res.meta.e_tag.clone());
                size = size.or(Some(res.meta.size));
                res.into_stream()
            }
            Err(e) => {
                deliver(Err(std::io::Error::other(e))).await;
                return;
            }
        };
        let failure = loop {
            match stream.next().await {
                // A body that ends short of the object's size without an
                // error (a connection closed early) is cut all the same.
                None => match size.filter(|&size| received < size) {
                    Some(size) => {
                        let source = format!("the body ended after {received} of {size} bytes").into();
                        break object_store::Error::Generic { store: "object store", source };
                    }
                    None => return,
                },
                Some(Ok(bytes)) if bytes.is_empty() => {}
                Some(Ok(bytes)) => {
                    received += bytes.len() as u64;
                    failures = 0;
                    if !deliver(Ok(bytes)).await {
                        return;
                    }
                }
                Some(Err(e)) => break e,
            }
        };
        // Every byte came before the failure: nothing is left to ask for.
        if size.is_some_and(|size| received >= size) {
            return;
        }
        failures += 1;
        if etag.is_none() || failures > BODY_RESUMES {
            deliver(Err(std::io::Error::other(failure))).await;
            return;
        }
    }
}

/// The body of the object at `path`, whole: requested as [`stream_object`]
/// does (a body cut partway asked again for the rest, of the same version).
async fn fetch_body(store: &dyn ObjectStore, path: &object_store::path::Path) -> std::io::Result<Bytes> {
    let (mut parts, mut failure) = (Vec::new(), None);
    stream_body(store, path, |item| {
        match item {
            Ok(bytes) => parts.push(bytes),
            Err(e) => failure = Some(e),
        }
        std::future::ready(true)
    })
    .await;
    if let Some(e) = failure {
        return Err(e);
    }
    Ok(match parts.len() {
        1 => parts.swap_remove(0),
        _ => Bytes::from(parts.concat()),
    })
}

/// Hands `item` to the blocking reader without blocking the runtime; false
/// once the reader is gone.
async fn send(tx: SyncSender<std::io::Result<Bytes>>, item: std::io::Result<Bytes>) -> bool {
    tokio::task::spawn_blocking(move || tx.send(item).is_ok()).await.unwrap_or(false)
}

/// Reads an object-store stream through a bounded channel, so a synchronous
/// parser can pull it with bounded memory.
struct ChannelReader {
    rx: Receiver<std::io::Result<Bytes>>,
    current: Bytes,
}

impl Read for ChannelReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.current.is_empty() {
            match self.rx.recv() {
                Ok(Ok(b)) => self.current = b,
                Ok(Err(e)) => return Err(e),
                Err(_) => return Ok(0),
            }
        }
        let n = buf.len().min(self.current.len());
        buf[..n].copy_from_slice(&self.current[..n]);
        self.current = self.current.slice(n..);
        Ok(n)
    }
}

impl InputObject {
    /// Opens the object and starts `reader` over it: a regular local file
    /// stored as is (no compression, not Parquet) with its blocks read at
    /// their positions ([`ReaderBuilder::build_file`]), anything else as
    /// the decompressed stream [`InputObject::open`] gives.
    pub fn reader(&self, reader: ReaderBuilder, rt: &tokio::runtime::Runtime) -> Result<Reader> {
        let ObjectKind::Local(p) = &self.kind else {
            return Ok(reader.build(self.open(rt)?, &self.location));
        };
        let file = File::open(p).map_err(|e| Error::io(p.display(), e))?;
        let plain = stored_as_is(&file);
        if let Some(meta) = file.metadata().ok().filter(|m| plain && m.is_file()) {
            return Ok(reader.build_file(file, meta.len(), &self.location));
        }
        Ok(reader.build(decompress(Box::new(file)).map_err(|e| Error::io(&self.location, e))?, &self.location))
    }

    /// The object's key in its store (`None`: a local file).
    pub fn key(&self) -> Option<&str> {
        match &self.kind {
            ObjectKind::Remote { path, .. } => Some(path.as_ref()),
            ObjectKind::Local(_) => None,
        }
    }

    /// Whether the object is fetched whole, many at a time ([`super::fetch`]),
    /// rather than streamed: an object in a store of at most
    /// [`WHOLE_OBJECT_BYTES`] as listed.
    pub fn fetched_whole(&self) -> bool {
        matches!(self.kind, ObjectKind::Remote { .. }) && self.size <= WHOLE_OBJECT_BYTES
    }

    /// The object's stored bytes, whole (see [`InputObject::fetched_whole`]).
    pub(crate) async fn fetch(&self) -> Result<Bytes> {
        let body = match &self.kind {
            ObjectKind::Remote { store, path } => fetch_body(store.as_ref(), path).await,
            ObjectKind::Local(p) => tokio::fs::read(p).await.map(Bytes::from),
        };
        body.map_err(|e| Error::io(&self.location, e))
    }

    /// `reader` over the object's stored bytes `body` (from
    /// [`InputObject::fetch`]): split before this returns, on this thread,
    /// when stored as is; decompressed (or read as Parquet) on a splitting
    /// thread otherwise, since what a compressed body inflates to is not
    /// bounded by its size.
    pub(crate) fn reader_over(&self, body: Bytes, reader: ReaderBuilder) -> Result<Reader> {
        if Encoding::of(&body) == Encoding::Plain {
            return Ok(reader.build_in_memory(body, &self.location));
        }
        let input = decompress(Box::new(std::io::Cursor::new(body))).map_err(|e| Error::io(&self.location, e))?;
        Ok(reader.build(input, &self.location))
    }

    /// Whether [`InputObject::reader`] may read the object in blocks on
    /// reading threads: a local file larger than one of `reader`'s chunks
    /// and stored as is (its first bytes read here, as the reader will; a
    /// file that cannot be opened is not, and fails when it is read). It is,
    /// unless its head turns out to be one JSON document.
    pub fn may_read_in_blocks(&self, reader: &ReaderBuilder) -> bool {
        match &self.kind {
            ObjectKind::Local(p) => {
                reader.reads_in_blocks(self.size) && File::open(p).is_ok_and(|file| stored_as_is(&file))
            }
            ObjectKind::Remote { .. } => false,
        }
    }

    /// Opens the object as a decompressed byte stream.
    pub fn open(&self, rt: &tokio::runtime::Runtime) -> Result<Box<dyn Read + Send>> {
        let raw: Box<dyn Read + Send> = match &self.kind {
            ObjectKind::Local(p) => Box::new(File::open(p).map_err(|e| Error::io(p.display(), e))?),
            ObjectKind::Remote { store, path } => {
                let (tx, rx) = sync_channel(16);
                rt.spawn(stream_object(Arc::clone(store), path.clone(), tx));
                Box::new(ChannelReader { rx, current: Bytes::new() })
            }
        };
        decompress(raw).map_err(|e| Error::io(&self.location, e))
    }
}

/// Whether a file's first bytes say it is stored as is: not compressed, not
/// Parquet. A file whose first bytes cannot be read counts as stored as is:
/// the read fails again, and is reported, as the input is read.
fn stored_as_is(file: &File) -> bool {
    let mut magic = [0; 4];
    let read = read_full_at(file, &mut magic, 0).unwrap_or(0);
    Encoding::of(&magic[..read]) == Encoding::Plain
}

/// Wraps a stream in a gzip (multi-member) or zstd decoder when its first
/// bytes are that format's magic number, or reads a Parquet file as JSON
/// lines ([`ParquetLines`]).
pub fn decompress(raw: Box<dyn Read + Send>) -> std::io::Result<Box<dyn Read + Send>> {
    let mut reader = BufReader::with_capacity(1 << 20, raw);
    Ok(match Encoding::of(reader.fill_buf()?) {
        Encoding::Gzip => Box::new(flate2::read::MultiGzDecoder::new(reader)),
        Encoding::Zstd => Box::new(zstd::stream::read::Decoder::with_buffer(reader)?),
        Encoding::Parquet => Box::new(ParquetLines::new(reader)?),
        Encoding::Plain => Box::new(reader),
    })
}

/// How an input's bytes are stored, as its first bytes (magic numbers) say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Encoding {
    Gzip,
    Zstd,
    Parquet,
    Plain,
}

impl Encoding {
    fn of(head: &[u8]) -> Encoding {
        if head.starts_with(&[0x1f, 0x8b]) {
            Encoding::Gzip
        } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
            Encoding::Zstd
        } else if head.starts_with(b"PAR1") {
            Encoding::Parquet
        } else {
            Encoding::Plain
        }
    }
}

/// A Parquet file read as JSON lines, one per row in file order (arrow-json's
/// writer: nulls left out, nested columns as JSON objects and arrays,
/// timestamps as RFC 3339 text), so every JSON-lines format reads exports
/// written as Parquet (Langfuse's blob-storage exports) and a row's
/// `source_line` is its 1-based row number. Parquet keeps its footer at the
/// end, so the file is held in memory (compressed) while its row groups are
/// decoded one batch at a time.
struct ParquetLines {
    batches: parquet::arrow::arrow_reader::ParquetRecordBatchReader,
    lines: Vec<u8>,
    pos: usize,
}

impl ParquetLines {
    fn new(mut reader: impl Read) -> std::io::Result<Self> {
        let mut file = Vec::new();
        reader.read_to_end(&mut file)?;
        let batches = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(Bytes::from(file))
            .and_then(|b| b.with_batch_size(4096).build())
            .map_err(|e| std::io::Error::other(format!("not a readable Parquet file: {e}")))?;
        Ok(ParquetLines { batches, lines: Vec::new(), pos: 0 })
    }
}

impl Read for ParquetLines {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.pos == self.lines.len() {
            let Some(batch) = self.batches.next() else { return Ok(0) };
            let batch = batch.map_err(|e| std::io::Error::other(format!("reading a Parquet row group: {e}")))?;
            self.lines.clear();
            self.pos = 0;
            let mut writer = arrow::json::LineDelimitedWriter::new(&mut self.lines);
            writer
                .write(&batch)
                .and_then(|()| writer.finish())
                .map_err(|e| std::io::Error::other(format!("a Parquet row as JSON: {e}")))?;
        }
        let n = buf.len().min(self.lines.len() - self.pos);
        buf[..n].copy_from_slice(&self.lines[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::io::Read;
    use std::sync::{Arc, Mutex};

    use bytes::Bytes;
    use futures::stream::{BoxStream, StreamExt};
    use object_store::memory::InMemory;
    use object_store::path::Path;
    use object_store::{
        CopyOptions, GetOptions, GetResult, GetResultPayload, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
        ObjectStoreExt, PutMultipartOptions, PutOptions, PutPayload, PutResult,
    };

    use tokscope_core::reader::ReaderBuilder;

    use super::{fetch_body, resolve_inputs, stream_object, ChannelReader, InputObject, ObjectKind, BODY_RESUMES};

    /// A local file larger than one chunk may be read in blocks unless its
    /// first bytes say it is compressed or Parquet; a smaller one, or an
    /// object in a store however large, never is.
    #[test]
    fn only_local_files_larger_than_a_chunk_and_stored_as_is_may_be_read_in_blocks() {
        let rt = crate::store::io_runtime().unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a-larger.jsonl"), [b'\n'; 1001]).unwrap();
        std::fs::write(dir.path().join("b-one-chunk.jsonl"), [b'\n'; 1000]).unwrap();
        // Larger than a chunk, but gzip's, zstd's and Parquet's first bytes (the
        // names say nothing: the bytes decide, as for the reader).
        for (name, magic) in
            [("c-gzip.log", &b"\x1f\x8b"[..]), ("d-zstd.log", b"\x28\xb5\x2f\xfd"), ("e-parquet.log", b"PAR1")]
        {
            std::fs::write(dir.path().join(name), [magic, &[b'\n'; 1001][..]].concat()).unwrap();
        }
        let reader = ReaderBuilder::new().with_chunk_bytes(1000);
        let local = resolve_inputs(&[dir.path().display().to_string()], &Default::default(), 1, &rt).unwrap();
        let may = local.iter().map(|o| o.may_read_in_blocks(&reader)).collect::<Vec<_>>();
        assert_eq!(may, [true, false, false, false, false]);
        // One removed after listing: not read in blocks, and its error left to the read.
        std::fs::remove_file(dir.path().join("a-larger.jsonl")).unwrap();
        assert!(!local[0].may_read_in_blocks(&reader));
        let remote = InputObject {
            location: "memory:///large".into(),
            size: 1 << 30,
            version: String::new(),
            kind: ObjectKind::Remote { store: Arc::new(InMemory::new()), path: Path::from("large") },
        };
        assert!(!remote.may_read_in_blocks(&reader));
    }

    /// An in-memory store whose bodies fail partway: the n-th request's body
    /// stops with an error after `cuts[n]` bytes (`None`: whole), and the
    /// object is replaced by `replacement` once a body has failed.
    #[derive(Debug)]
    struct CutBodies {
        inner: InMemory,
        cuts: Mutex<VecDeque<Option<usize>>>,
        replacement: Mutex<Option<Bytes>>,
        requests: Mutex<Vec<GetOptions>>,
        /// Bodies end at their cut without an error.
        silent: bool,
    }

    impl std::fmt::Display for CutBodies {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "CutBodies")
        }
    }

    #[async_trait::async_trait]
    impl ObjectStore for CutBodies {
        async fn put_opts(&self, at: &Path, payload: PutPayload, opts: PutOptions) -> object_store::Result<PutResult> {
            self.inner.put_opts(at, payload, opts).await
        }

        async fn put_multipart_opts(
            &self,
            at: &Path,
            opts: PutMultipartOptions,
        ) -> object_store::Result<Box<dyn MultipartUpload>> {
            self.inner.put_multipart_opts(at, opts).await
        }

        async fn get_opts(&self, at: &Path, options: GetOptions) -> object_store::Result<GetResult> {
            self.requests.lock().unwrap().push(options.clone());
            let res = self.inner.get_opts(at, options).await?;
            let cut = self.cuts.lock().unwrap().pop_front().flatten();
            let Some(cut) = cut else { return Ok(res) };
            let (meta, range, attributes) = (res.meta.clone(), res.range.clone(), res.attributes.clone());
            let body = res.bytes().await?;
            let head = body.slice(..cut.min(body.len()));
            let replacement = self.replacement.lock().unwrap().take();
            if let Some(new) = replacement {
                self.inner.put(at, new.into()).await?;
            }
            let failure = object_store::Error::Generic { store: "test", source: "connection reset".into() };
            let stream = match self.silent {
                true => futures::stream::iter([Ok(head)]).boxed(),
                false => futures::stream::iter([Ok(head), Err(failure)]).boxed(),
            };
            Ok(GetResult { payload: GetResultPayload::Stream(stream), meta, range, attributes })
        }

        fn delete_stream(
            &self,
            locations: BoxStream<'static, object_store::Result<Path>>,
        ) -> BoxStream<'static, object_store::Result<Path>> {
            self.inner.delete_stream(locations)
        }

        fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
            self.inner.list(prefix)
        }

        async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
            self.inner.list_with_delimiter(prefix).await
        }

        async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> object_store::Result<()> {
            self.inner.copy_opts(from, to, options).await
        }
    }

    /// Reads object `a` of a store holding `content` whose bodies are cut
    /// as `cuts` says (replaced by `replacement` at the first cut), through
    /// `stream_object`: the bytes read and the error that ended them, and
    /// the requests the store saw.
    fn read(
        content: &[u8],
        cuts: &[Option<usize>],
        replacement: Option<&[u8]>,
    ) -> (Vec<u8>, Option<String>, Vec<GetOptions>) {
        let rt = crate::store::io_runtime().unwrap();
        let store = Arc::new(CutBodies {
            inner: InMemory::new(),
            cuts: Mutex::new(cuts.iter().copied().collect()),
            replacement: Mutex::new(replacement.map(Bytes::copy_from_slice)),
            requests: Mutex::new(Vec::new()),
            silent: false,
        });
        let path = Path::from("a");
        rt.block_on(store.inner.put(&path, Bytes::copy_from_slice(content).into())).unwrap();
        let (tx, rx) = std::sync::mpsc::sync_channel(16);
        rt.spawn(stream_object(Arc::clone(&store) as Arc<dyn ObjectStore>, path, tx));
        let mut reader = ChannelReader { rx, current: Bytes::new() };
        let (mut got, mut buf) = (Vec::new(), [0u8; 3]);
        let error = loop {
            match reader.read(&mut buf) {
                Ok(0) => break None,
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) => break Some(e.to_string()),
            }
        };
        let requests = store.requests.lock().unwrap().clone();
        (got, error, requests)
    }

    /// A body cut partway is asked again from the first byte not received,
    /// of the version first read, as often as it makes progress.
    #[test]
    fn a_body_cut_partway_is_resumed_from_where_it_stopped() {
        let content: Vec<u8> = (0..200u8).collect();
        let cuts = [Some(5), Some(7), Some(0), Some(100), None];
        let (got, error, requests) = read(&content, &cuts, None);
        assert_eq!((got, error), (content, None));
        let offsets: Vec<_> = requests.iter().map(|r| r.range.clone()).collect();
        use object_store::GetRange::Offset;
        assert_eq!(offsets, vec![None, Some(Offset(5)), Some(Offset(12)), Some(Offset(12)), Some(Offset(112))]);
        assert!(requests[0].if_match.is_none() && requests[1..].iter().all(|r| r.if_match.is_some()), "{requests:?}");
    }

    /// An object fetched whole is asked for again from where its body was
    /// cut, as one streamed is, here where a body ends short of the
    /// object's size without an error: the bytes come whole, once each.
    #[test]
    fn a_body_fetched_whole_is_resumed_from_where_it_stopped() {
        let rt = crate::store::io_runtime().unwrap();
        let content: Vec<u8> = (0..200u8).collect();
        let store = CutBodies {
            inner: InMemory::new(),
            cuts: Mutex::new([Some(5), Some(0), Some(100), None].into_iter().collect()),
            replacement: Mutex::new(None),
            requests: Mutex::new(Vec::new()),
            silent: true,
        };
        let path = Path::from("a");
        rt.block_on(store.inner.put(&path, Bytes::copy_from_slice(&content).into())).unwrap();
        let got = rt.block_on(fetch_body(&store, &path)).unwrap();
        assert_eq!(got, content);
        assert_eq!(store.requests.lock().unwrap().len(), 4);
    }

    /// A body that fails after its last byte is whole: nothing more is asked.
    #[test]
    fn a_body_that_fails_after_its_last_byte_is_whole() {
        let content: Vec<u8> = (0..50u8).collect();
        let (got, error, requests) = read(&content, &[Some(50)], None);
        assert_eq!((got, error, requests.len()), (content, None, 1));
    }

    /// A body that fails again and again without a byte in between ends
    /// the input with its error after `BODY_RESUMES` requests for the rest.
    #[test]
    fn a_body_that_keeps_failing_without_progress_ends_the_input() {
        let content: Vec<u8> = (0..50u8).collect();
        let cuts: Vec<_> = std::iter::once(Some(10)).chain(std::iter::repeat(Some(0))).take(10).collect();
        let (got, error, requests) = read(&content, &cuts, None);
        assert_eq!(got, content[..10]);
        assert!(error.as_deref().is_some_and(|e| e.contains("connection reset")), "{error:?}");
        assert_eq!(requests.len(), 1 + BODY_RESUMES);
    }

    /// An object replaced while its body was cut is not resumed from the
    /// new version: the bytes of two versions are never joined.
    #[test]
    fn a_body_is_never_resumed_from_another_version() {
        let content: Vec<u8> = (0..50u8).collect();
        let (got, error, requests) = read(&content, &[Some(10), None], Some(b"an entirely different object"));
        assert_eq!(got, content[..10]);
        assert!(error.as_deref().is_some_and(|e| e.to_lowercase().contains("precondition")), "{error:?}");
        assert_eq!(requests.len(), 2);
    }
}
