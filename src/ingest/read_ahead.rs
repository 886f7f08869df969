//! Inputs opened and read ahead of the one being parsed. Reading an input is
//! one thread (its splitter, which also inflates gzip and zstd), and waiting
//! for an object store's first bytes is a round trip: with many inputs, the
//! next ones are opened on threads of their own and their splitters fill
//! their queues while the current input is parsed. Inputs are still handed
//! out, and parsed, one after another in their order, so what a run writes
//! does not depend on how far it reads ahead. Small objects in a store are
//! not opened on threads: [`Fetches`] fetches them whole, many at a time,
//! and each is split in memory when its turn comes.

use std::collections::VecDeque;
use std::thread::{Scope, ScopedJoinHandle};

use tokscope_core::reader::{Reader, ReaderBuilder};

use super::fetch::Fetches;
use super::source::InputObject;
use crate::error::Result;

/// Name of the threads that open inputs ahead (`top -H`, `ps -L`).
pub const OPENER_THREAD: &str = "ingest-open";

/// Yields a [`Reader`] per input object, in order, keeping up to `depth`
/// more inputs opened (and their splitters reading) ahead of it. An input
/// that cannot be opened yields its error in its place.
pub(crate) struct ReadAhead<'scope, 'env> {
    scope: &'scope Scope<'scope, 'env>,
    objects: std::slice::Iter<'env, InputObject>,
    opened: VecDeque<Opening<'scope, 'env>>,
    reader: ReaderBuilder,
    rt: &'env tokio::runtime::Runtime,
    depth: usize,
    fetches: Option<Fetches>,
}

/// How the small objects in a store are fetched: requests and bytes in flight.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Fetching {
    /// GETs in flight at most (`--io-concurrency`).
    pub concurrency: usize,
    /// Bytes of bodies held at most ([`super::MemoryPlan::fetch_bytes`]).
    pub bytes: usize,
}

/// An input on its way to a reader.
enum Opening<'scope, 'env> {
    /// Being opened on a thread of its own.
    Ahead(ScopedJoinHandle<'scope, Result<Reader>>),
    /// Opened on the caller's thread when its turn comes (nothing is read
    /// ahead, or its thread could not start).
    InTurn(&'env InputObject),
    /// Fetched whole by [`Fetches`], split on the caller's thread when its turn comes.
    Fetched(&'env InputObject),
}

impl<'scope, 'env> ReadAhead<'scope, 'env> {
    /// Readers built by `reader` over `objects`, opened on threads of
    /// `scope`, those fetched whole ([`InputObject::fetched_whole`]) as
    /// `fetching` says.
    pub(crate) fn new(
        scope: &'scope Scope<'scope, 'env>,
        objects: &'env [InputObject],
        reader: ReaderBuilder,
        rt: &'env tokio::runtime::Runtime,
        depth: usize,
        fetching: Fetching,
    ) -> Self {
        let whole: Vec<InputObject> = objects.iter().filter(|o| o.fetched_whole()).cloned().collect();
        let fetches = (!whole.is_empty()).then(|| Fetches::start(whole, fetching.concurrency, fetching.bytes, rt));
        ReadAhead { scope, objects: objects.iter(), opened: VecDeque::new(), reader, rt, depth, fetches }
    }
}

impl Iterator for ReadAhead<'_, '_> {
    type Item = Result<Reader>;

    fn next(&mut self) -> Option<Result<Reader>> {
        while self.opened.len() <= self.depth {
            let Some(obj) = self.objects.next() else { break };
            if obj.fetched_whole() {
                self.opened.push_back(Opening::Fetched(obj));
                continue;
            }
            if self.depth == 0 {
                self.opened.push_back(Opening::InTurn(obj));
                break;
            }
            let (reader, rt) = (self.reader.clone(), self.rt);
            let open = move || open(reader, obj, rt);
            let thread = std::thread::Builder::new().name(OPENER_THREAD.into()).spawn_scoped(self.scope, open);
            self.opened.push_back(thread.map_or(Opening::InTurn(obj), Opening::Ahead));
        }
        Some(match self.opened.pop_front()? {
            Opening::Ahead(thread) => {
                thread.join().unwrap_or_else(|_| Err(internal_err!("the thread opening an input panicked")))
            }
            Opening::InTurn(obj) => open(self.reader.clone(), obj, self.rt),
            Opening::Fetched(obj) => match self.fetches.as_mut().and_then(Fetches::next) {
                Some(body) if body.location == obj.location => {
                    body.bytes.and_then(|b| obj.reader_over(b, self.reader.clone()))
                }
                _ => Err(internal_err!("the body of {} did not come in its turn", obj.location)),
            },
        })
    }
}

/// Opens `obj` and builds its reader (whose splitter starts reading).
fn open(reader: ReaderBuilder, obj: &InputObject, rt: &tokio::runtime::Runtime) -> Result<Reader> {
    obj.reader(reader, rt)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::OpenOptionsExt;
    use std::path::Path;
    use std::time::{Duration, Instant};

    use tokscope_core::reader::{LineCounts, Reader, ReaderBuilder};

    use super::{Fetching, ReadAhead};
    use crate::error::Result;
    use crate::ingest::source::{resolve_inputs, InputObject};

    const FETCHING: Fetching = Fetching { concurrency: 4, bytes: 1 << 20 };

    fn resolve(paths: &[&Path], rt: &tokio::runtime::Runtime) -> Vec<InputObject> {
        let inputs: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
        resolve_inputs(&inputs, &Default::default(), 1, rt).unwrap()
    }

    /// The lines a reader reads to its end.
    fn lines(reader: Result<Reader>) -> Result<u64> {
        let mut reader = reader?;
        let mut counts = LineCounts::default();
        for slices in &mut reader {
            slices?.iter().for_each(|s| counts.add(&s.counts));
        }
        reader.finish()?;
        Ok(counts.lines_read)
    }

    /// Readers come in the inputs' order however far they are read ahead,
    /// each with its own input's lines, and an input that cannot be opened
    /// gives its error in its place, the inputs around it their readers.
    #[test]
    fn readers_come_in_order_and_a_failed_open_in_its_place() {
        let dir = tempfile::tempdir().unwrap();
        let rt = crate::store::io_runtime().unwrap();
        let line = "{\"ts\":\"2024-06-01T00:00:00Z\",\"model\":\"m\",\"prompt_tokens\":3,\"completion_tokens\":2}\n";
        let paths: Vec<_> = (1..=5).map(|n| dir.path().join(format!("{n}.jsonl"))).collect();
        for depth in [0, 1, 2, 8] {
            for (n, path) in paths.iter().enumerate() {
                std::fs::write(path, line.repeat(n + 1)).unwrap();
            }
            let objects = resolve(&paths.iter().map(|p| p.as_path()).collect::<Vec<_>>(), &rt);
            // Gone between listing and reading.
            std::fs::remove_file(&paths[2]).unwrap();
            let got: Vec<Result<u64>> = std::thread::scope(|scope| {
                ReadAhead::new(scope, &objects, ReaderBuilder::new(), &rt, depth, FETCHING).map(lines).collect()
            });
            let got: Vec<_> = got.into_iter().map(|r| r.map_err(|e| e.to_string())).collect();
            assert_eq!(got.len(), 5, "depth {depth}: {got:?}");
            for (n, result) in got.iter().enumerate() {
                match result {
                    Ok(lines) => assert!(n != 2 && *lines == n as u64 + 1, "depth {depth}: {got:?}"),
                    Err(e) => assert!(n == 2 && e.contains("3.jsonl"), "depth {depth}: {got:?}"),
                }
            }
        }
    }

    /// Whether a FIFO's writing end opens without waiting: only while its
    /// reading end is open, that is, once the input is being opened.
    fn open_for_writing(fifo: &Path) -> Option<std::fs::File> {
        std::fs::OpenOptions::new().write(true).custom_flags(libc::O_NONBLOCK).open(fifo).ok()
    }

    /// Read `depth` ahead, the inputs after the one handed out are opened
    /// before their turn (FIFOs here, which open once both ends are); read
    /// none ahead, the next is not touched until it is asked for.
    #[test]
    fn the_next_inputs_are_opened_before_their_turn() {
        let dir = tempfile::tempdir().unwrap();
        let rt = crate::store::io_runtime().unwrap();
        let first = dir.path().join("1.jsonl");
        std::fs::write(&first, "{\"ts\":\"2024-06-01T00:00:00Z\",\"model\":\"m\"}\n").unwrap();
        let fifos: Vec<_> = (2..=3).map(|n| dir.path().join(format!("{n}.jsonl"))).collect();
        for fifo in &fifos {
            let path = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
            // SAFETY: a valid NUL-terminated path; mkfifo reads it only.
            assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o600) }, 0, "mkfifo {fifo:?}");
        }
        let objects = resolve(&[first.as_path(), fifos[0].as_path(), fifos[1].as_path()], &rt);

        std::thread::scope(|scope| {
            let mut readers = ReadAhead::new(scope, &objects, ReaderBuilder::new(), &rt, 0, FETCHING);
            assert_eq!(lines(readers.next().unwrap()).unwrap(), 1);
            std::thread::sleep(Duration::from_millis(200));
            assert!(fifos.iter().all(|f| open_for_writing(f).is_none()), "opened though nothing is read ahead");
        });

        std::thread::scope(|scope| {
            let mut readers = ReadAhead::new(scope, &objects, ReaderBuilder::new(), &rt, 2, FETCHING);
            assert_eq!(lines(readers.next().unwrap()).unwrap(), 1);
            for (n, fifo) in fifos.iter().enumerate() {
                let started = Instant::now();
                let mut writer = loop {
                    if let Some(w) = open_for_writing(fifo) {
                        break w;
                    }
                    assert!(started.elapsed() < Duration::from_secs(20), "{fifo:?} not opened ahead");
                    std::thread::sleep(Duration::from_millis(10));
                };
                let line = "{\"ts\":\"2024-06-01T00:00:00Z\",\"model\":\"m\"}\n".repeat(n + 2);
                std::io::Write::write_all(&mut writer, line.as_bytes()).unwrap();
            }
            let rest: Vec<u64> = readers.map(|r| lines(r).unwrap()).collect();
            assert_eq!(rest, vec![2, 3]);
        });
    }
}
