//! The manifest of ingested objects (`_manifest.jsonl` in the dataset): one
//! JSON line per object and run, keyed by location, size and version
//! (modification time, plus ETag for objects). Re-running ingest over the
//! same inputs skips listed objects, so no row is written twice.
//!
//! A bucket logged one object per request holds millions of them, so a run
//! holds no entry: it reads the manifest as a stream into a set of each
//! key's digest (16 bytes an entry), and a commit appends its new entries to
//! a local manifest instead of rewriting it. A crash while appending leaves
//! at most a torn last line: it is not an entry (reading skips it, the next
//! append cuts it), and the commit record still names its entries, so
//! recovery appends them again. A manifest in an object store, which has no
//! append, is rewritten whole, its old bytes copied as they are.

use std::collections::HashSet;
use std::io::{BufRead, Seek, Write};

use serde::{Deserialize, Serialize};
use twox_hash::XxHash3_128;

use super::{DatasetRoot, MANIFEST};
use crate::error::{Error, Result};

/// One ingested object.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ManifestEntry {
    /// Input location.
    pub location: String,
    /// Stored size.
    pub size: u64,
    /// Modification time / ETag.
    pub version: String,
    /// The run that ingested it.
    pub run_id: String,
    /// Rows it produced.
    pub rows_written: u64,
    /// Lines rejected.
    pub lines_rejected: u64,
}

/// What identifies an entry, read without the rest of its line.
#[derive(Deserialize)]
struct EntryKey<'a> {
    #[serde(borrow)]
    location: std::borrow::Cow<'a, str>,
    size: u64,
    #[serde(borrow)]
    version: std::borrow::Cow<'a, str>,
}

/// The object versions a dataset's manifest lists, each known by a 128-bit
/// digest (XXH3-128) of its location, size and version, seeded at random
/// per process: a chance collision among a billion entries is about 1e-21,
/// and names cannot be crafted to collide with a seed they never see (the
/// digests are never stored).
#[derive(Debug)]
pub struct Manifest {
    keys: HashSet<u128>,
    seed: u64,
    scratch: Vec<u8>,
}

impl Default for Manifest {
    fn default() -> Self {
        Manifest { keys: HashSet::new(), seed: rand::random(), scratch: Vec::new() }
    }
}

impl Manifest {
    /// Reads the dataset's manifest (empty when there is none yet): a local
    /// one line by line, one in an object store whole. A last line without
    /// its newline that does not parse is a torn append, not an entry.
    pub fn load(dataset: &DatasetRoot, rt: &tokio::runtime::Runtime) -> Result<Self> {
        let mut m = Manifest::default();
        match dataset {
            DatasetRoot::Local(dir) => {
                let path = dir.join(MANIFEST);
                let file = match std::fs::File::open(&path) {
                    Ok(f) => f,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(m),
                    Err(e) => return Err(Error::io(path.display(), e)),
                };
                let mut reader = std::io::BufReader::with_capacity(1 << 20, file);
                let mut line = Vec::new();
                loop {
                    line.clear();
                    if reader.read_until(b'\n', &mut line).map_err(|e| Error::io(path.display(), e))? == 0 {
                        break;
                    }
                    m.add_line(&line)?;
                }
            }
            DatasetRoot::Remote { .. } => {
                if let Some(bytes) = dataset.read_side_file(MANIFEST, rt)? {
                    for line in bytes.split_inclusive(|&b| b == b'\n') {
                        m.add_line(line)?;
                    }
                }
            }
        }
        Ok(m)
    }

    fn digest(&mut self, location: &str, size: u64, version: &str) -> u128 {
        let key = &mut self.scratch;
        key.clear();
        key.extend_from_slice(&(location.len() as u64).to_le_bytes());
        key.extend_from_slice(location.as_bytes());
        key.extend_from_slice(&size.to_le_bytes());
        key.extend_from_slice(version.as_bytes());
        XxHash3_128::oneshot_with_seed(self.seed, key)
    }

    fn add_line(&mut self, line: &[u8]) -> Result<()> {
        if line.trim_ascii().is_empty() {
            return Ok(());
        }
        match serde_json::from_slice::<EntryKey>(line) {
            Ok(k) => {
                let digest = self.digest(&k.location, k.size, &k.version);
                self.keys.insert(digest);
                Ok(())
            }
            Err(_) if !line.ends_with(b"\n") => Ok(()),
            Err(source) => Err(Error::Json { path: MANIFEST.into(), source }),
        }
    }

    /// Whether this exact object version was ingested before.
    pub fn contains(&mut self, location: &str, size: u64, version: &str) -> bool {
        let digest = self.digest(location, size, version);
        self.keys.contains(&digest)
    }

    /// Object versions listed.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether none is listed.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Adds `entries` to the dataset's manifest, those of them it does not
    /// list already (so a commit applied twice adds its entries once).
    pub fn append(
        &mut self,
        dataset: &DatasetRoot,
        entries: &[ManifestEntry],
        rt: &tokio::runtime::Runtime,
    ) -> Result<()> {
        let mut lines = Vec::new();
        for e in entries {
            let digest = self.digest(&e.location, e.size, &e.version);
            if self.keys.insert(digest) {
                serde_json::to_writer(&mut lines, e).map_err(|source| Error::Json { path: MANIFEST.into(), source })?;
                lines.push(b'\n');
            }
        }
        if lines.is_empty() {
            return Ok(());
        }
        match dataset {
            DatasetRoot::Local(dir) => {
                std::fs::create_dir_all(dir).map_err(|e| Error::io(dir.display(), e))?;
                let path = dir.join(MANIFEST);
                let io = |e| Error::io(path.display(), e);
                let mut file =
                    std::fs::OpenOptions::new().create(true).read(true).append(true).open(&path).map_err(io)?;
                cut_torn_line(&mut file).map_err(io)?;
                file.write_all(&lines).map_err(io)
            }
            DatasetRoot::Remote { .. } => {
                let mut bytes = dataset.read_side_file(MANIFEST, rt)?.unwrap_or_default();
                if bytes.last().is_some_and(|&b| b != b'\n') {
                    bytes.push(b'\n');
                }
                bytes.extend_from_slice(&lines);
                dataset.write_side_file(MANIFEST, bytes, rt)
            }
        }
    }
}

/// Cuts a file back to its last newline: what follows it is a line whose
/// append was torn by a crash.
fn cut_torn_line(file: &mut std::fs::File) -> std::io::Result<()> {
    let len = file.metadata()?.len();
    let mut end = len;
    let mut block = vec![0u8; 64 << 10];
    while end > 0 {
        let start = end.saturating_sub(block.len() as u64);
        let part = &mut block[..(end - start) as usize];
        file.seek(std::io::SeekFrom::Start(start))?;
        std::io::Read::read_exact(file, part)?;
        if let Some(at) = part.iter().rposition(|&b| b == b'\n') {
            end = start + at as u64 + 1;
            break;
        }
        end = start;
    }
    if end < len {
        file.set_len(end)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{Manifest, ManifestEntry};
    use crate::dataset::{DatasetRoot, MANIFEST};

    fn entry(location: &str, version: &str) -> ManifestEntry {
        ManifestEntry {
            location: location.into(),
            size: 10,
            version: version.into(),
            run_id: "r".into(),
            rows_written: 1,
            lines_rejected: 0,
        }
    }

    /// Entries are appended once each, whatever is appended twice; the
    /// file keeps its earlier lines byte for byte, and a version not listed
    /// (another ETag, another size) is not taken for one listed.
    #[test]
    fn entries_are_appended_once_and_read_back_by_their_keys() {
        let rt = crate::store::io_runtime().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let dataset = DatasetRoot::Local(dir.path().to_path_buf());
        let mut m = Manifest::load(&dataset, &rt).unwrap();
        m.append(&dataset, &[entry("s3://b/a.json", "t|e1"), entry("s3://b/b.json", "t|e1")], &rt).unwrap();
        let first = std::fs::read(dir.path().join(MANIFEST)).unwrap();
        let mut m = Manifest::load(&dataset, &rt).unwrap();
        m.append(&dataset, &[entry("s3://b/a.json", "t|e1"), entry("s3://b/c.json", "t|e1")], &rt).unwrap();
        let text = std::fs::read_to_string(dir.path().join(MANIFEST)).unwrap();
        assert!(text.as_bytes().starts_with(&first));
        let locations: Vec<&str> = text.lines().map(|l| l.split('"').nth(3).unwrap()).collect();
        assert_eq!(locations, ["s3://b/a.json", "s3://b/b.json", "s3://b/c.json"]);
        let mut m = Manifest::load(&dataset, &rt).unwrap();
        assert_eq!(m.len(), 3);
        assert!(m.contains("s3://b/a.json", 10, "t|e1"));
        assert!(!m.contains("s3://b/a.json", 10, "t|e2") && !m.contains("s3://b/a.json", 11, "t|e1"));
    }

    /// A last line torn by a crash while appending is no entry: reading
    /// skips it, and the next append cuts it before adding its lines; a
    /// broken line that is not last is an error.
    #[test]
    fn a_torn_last_line_is_skipped_then_cut() {
        let rt = crate::store::io_runtime().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let dataset = DatasetRoot::Local(dir.path().to_path_buf());
        let whole = "{\"location\":\"a\",\"size\":1,\"version\":\"v\",\"run_id\":\"r\",\"rows_written\":1,\"lines_rejected\":0}\n";
        std::fs::write(dir.path().join(MANIFEST), format!("{whole}{{\"location\":\"b\",\"si")).unwrap();
        let mut m = Manifest::load(&dataset, &rt).unwrap();
        assert_eq!(m.len(), 1);
        m.append(&dataset, &[entry("c", "v")], &rt).unwrap();
        let text = std::fs::read_to_string(dir.path().join(MANIFEST)).unwrap();
        let want = format!(
            "{whole}{{\"location\":\"c\",\"size\":10,\"version\":\"v\",\"run_id\":\"r\",\"rows_written\":1,\"lines_rejected\":0}}\n"
        );
        assert_eq!(text, want);
        std::fs::write(dir.path().join(MANIFEST), format!("{{\"location\":\"b\",\"si\n{whole}")).unwrap();
        assert!(Manifest::load(&dataset, &rt).is_err());
    }
}
