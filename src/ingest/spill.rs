//! Rows that wait for their row group on local disk instead of in memory.
//! When the rows buffered per partition go over ingest's budget, the
//! largest partitions write theirs to an Arrow IPC file (LZ4-compressed)
//! in the run's spill directory; the writer thread that later encodes the
//! row group reads them back one batch at a time. A tighter budget costs
//! this round trip, never smaller row groups. Files are removed once every
//! segment in them has been read (or the run ends).

use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::ipc::reader::FileReader;
use arrow::ipc::writer::{FileWriter, IpcWriteOptions};
use arrow::ipc::CompressionType;

use crate::error::{Error, Result};

/// The run's spill directory under the system's temporary directory,
/// created on the first spill and removed with everything in it when the
/// run ends.
pub struct SpillDir {
    dir: PathBuf,
    next: AtomicUsize,
}

impl SpillDir {
    /// A directory named after the run (not created yet).
    pub fn new(run_id: &str) -> SpillDir {
        SpillDir { dir: std::env::temp_dir().join(format!("tokscope-spill-{run_id}")), next: AtomicUsize::new(0) }
    }

    /// Writes `batches` (one partition's, all of the same schema) to a new
    /// file; returns it with the rows of each batch, in order.
    pub fn write(&self, batches: &[RecordBatch]) -> Result<Arc<SpillFile>> {
        std::fs::create_dir_all(&self.dir).map_err(|e| Error::io(self.dir.display(), e))?;
        let path = self.dir.join(format!("{:06}.arrow", self.next.fetch_add(1, Ordering::Relaxed)));
        let file = File::create(&path).map_err(|e| Error::io(path.display(), e))?;
        // The file exists from here on: dropping `spilled` removes it on any error below.
        let spilled = SpillFile { path };
        let Some(first) = batches.first() else { return Err(internal_err!("nothing to spill")) };
        let options = IpcWriteOptions::default().try_with_compression(Some(CompressionType::LZ4_FRAME))?;
        let mut writer = FileWriter::try_new_with_options(BufWriter::new(file), &first.schema(), options)?;
        for batch in batches {
            writer.write(batch)?;
        }
        writer.finish()?;
        writer.into_inner()?.into_inner().map_err(|e| Error::io(spilled.path.display(), e.into_error()))?;
        Ok(Arc::new(spilled))
    }
}

impl Drop for SpillDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// One spill file; removed when the last segment that reads it is dropped.
#[derive(Debug)]
pub struct SpillFile {
    path: PathBuf,
}

impl SpillFile {
    fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for SpillFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Reads the batches of spill files back, keeping the last file open so
/// consecutive segments of one file read its footer once.
#[derive(Default)]
pub struct SpillReader {
    open: Option<(Arc<SpillFile>, FileReader<BufReader<File>>)>,
}

impl SpillReader {
    /// Batch `index` of `file`.
    pub fn read(&mut self, file: &Arc<SpillFile>, index: usize) -> Result<RecordBatch> {
        if !self.open.as_ref().is_some_and(|(open, _)| Arc::ptr_eq(open, file)) {
            let f = File::open(file.path()).map_err(|e| Error::io(file.path().display(), e))?;
            self.open = Some((file.clone(), FileReader::try_new(BufReader::new(f), None)?));
        }
        let Some((_, reader)) = self.open.as_mut() else { return Err(internal_err!("spill reader vanished")) };
        reader.set_index(index)?;
        let batch = reader.next().ok_or_else(|| internal_err!("{} has no batch {index}", file.path().display()))?;
        Ok(batch?)
    }

    /// Lets go of the open file (so it can be removed once unused).
    pub fn close(&mut self) {
        self.open = None;
    }
}
