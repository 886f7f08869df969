//! Small objects fetched whole, many requests at a time. A bucket of
//! one-request-per-object logs is mostly waiting: each GET is a round trip
//! for a few KiB. One task on the I/O runtime keeps up to `--io-concurrency`
//! GETs in flight (each retried by the client, a body cut partway asked
//! again for the rest: `source::stream_body`), their bytes held within a
//! share of the memory budget, and hands the bodies to the parser in input
//! order, so what a run writes does not depend on which answer came first.

use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};

use super::source::InputObject;
use crate::error::Result;

/// Requests in flight by default: enough to hide a cross-region round trip
/// (50 ms) behind a few hundred objects a second.
pub const DEFAULT_IO_CONCURRENCY: usize = 64;

/// The budget's unit: permits are KiB, so a budget of terabytes fits a
/// semaphore's count.
const PERMIT_BYTES: u64 = 1024;

/// An object's body fetched whole, holding its share of the bytes in flight
/// until it is dropped.
pub(crate) struct Body {
    /// The object's location, to check the order.
    pub location: String,
    /// Its stored bytes, or why they could not be read.
    pub bytes: Result<Bytes>,
    _held: Option<OwnedSemaphorePermit>,
}

/// The bodies of objects fetched whole, in their order.
pub(crate) struct Fetches {
    /// Each object's fetch, in the objects' order.
    fetches: mpsc::UnboundedReceiver<tokio::task::JoinHandle<Body>>,
    task: tokio::task::JoinHandle<()>,
}

impl Fetches {
    /// Starts fetching `objects` on `rt`, up to `concurrency` requests in
    /// flight at a time and `bytes` of bodies held (fetched, not yet handed
    /// out, or handed out and not yet dropped), as their sizes listed say;
    /// an object larger than the whole budget waits until it is alone in it.
    /// A request slot is free again as soon as its body is in, so a slow
    /// answer holds one slot, not the ones after it: bodies that came
    /// early wait for their turn within the bytes.
    pub(crate) fn start(
        objects: Vec<InputObject>,
        concurrency: usize,
        bytes: usize,
        rt: &tokio::runtime::Runtime,
    ) -> Fetches {
        let requests = Arc::new(Semaphore::new(concurrency.max(1)));
        let permits = (bytes as u64 / PERMIT_BYTES).clamp(1, u64::from(u32::MAX) / 2);
        let budget = Arc::new(Semaphore::new(permits as usize));
        let (tx, fetches) = mpsc::unbounded_channel();
        let task = rt.spawn(async move {
            for obj in objects {
                let wanted = obj.size.div_ceil(PERMIT_BYTES).clamp(1, permits) as u32;
                // Neither semaphore is ever closed: the permits always come.
                let held = Arc::clone(&budget).acquire_many_owned(wanted).await.ok();
                let request = Arc::clone(&requests).acquire_owned().await.ok();
                let fetch = tokio::spawn(async move {
                    let bytes = obj.fetch().await;
                    drop(request);
                    Body { location: obj.location, bytes, _held: held }
                });
                if tx.send(fetch).is_err() {
                    return;
                }
            }
        });
        Fetches { fetches, task }
    }

    /// The next object's body, waiting for it; `None` once every object's
    /// body was handed out. Not to be called from the runtime's threads.
    pub(crate) fn next(&mut self) -> Option<Body> {
        let fetch = self.fetches.blocking_recv()?;
        futures::executor::block_on(fetch).ok()
    }
}

impl Drop for Fetches {
    /// No more requests start; those in flight end with their answers.
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    use bytes::Bytes;
    use futures::stream::BoxStream;
    use object_store::memory::InMemory;
    use object_store::path::Path;
    use object_store::{
        CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore, ObjectStoreExt,
        PutMultipartOptions, PutOptions, PutPayload, PutResult,
    };

    use super::Fetches;
    use crate::ingest::source::objects_in;

    /// An in-memory store whose GETs take longer the earlier the object's
    /// name sorts (so answers come back in reverse order), the first one
    /// 200 ms; it counts the GETs in flight at once and keeps the order
    /// they were answered in.
    #[derive(Debug, Default)]
    struct SlowStore {
        inner: InMemory,
        in_flight: AtomicUsize,
        most_in_flight: AtomicUsize,
        answered: std::sync::Mutex<Vec<u64>>,
    }

    impl std::fmt::Display for SlowStore {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "SlowStore")
        }
    }

    #[async_trait::async_trait]
    impl ObjectStore for SlowStore {
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
            let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            self.most_in_flight.fetch_max(now, Ordering::SeqCst);
            let n: u64 = at.as_ref().trim_end_matches(".jsonl").parse().unwrap_or(0);
            let wait = if n == 0 { 200 } else { 5 * (20 - n.min(20)) };
            tokio::time::sleep(Duration::from_millis(wait)).await;
            self.in_flight.fetch_sub(1, Ordering::SeqCst);
            self.answered.lock().unwrap().push(n);
            self.inner.get_opts(at, options).await
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

    /// Twenty objects answered in reverse order come out in their own
    /// order, each with its own bytes, with as many GETs in flight as
    /// allowed (all twenty, four, or one at a time), or as the bytes allow
    /// (a budget of three objects' sizes: three). Four at a time, the slow
    /// first answer holds one request slot: the other three go on to the
    /// next objects (after 85, 90 and 95 ms, then 165), six answers before it.
    #[test]
    fn bodies_come_in_order_with_the_requests_and_bytes_allowed_in_flight() {
        let rt = crate::store::io_runtime().unwrap();
        for (concurrency, budget, most) in [(64, 1 << 20, 20), (4, 1 << 20, 4), (1, 1 << 20, 1), (64, 9 << 10, 3)] {
            let store = Arc::new(SlowStore::default());
            for n in 0..20 {
                let body = Bytes::from(format!("{n:02}\n").repeat(683)); // 2,049 bytes: 3 KiB of budget
                rt.block_on(store.inner.put(&Path::from(format!("{n:02}.jsonl")), body.into())).unwrap();
            }
            let objects = rt.block_on(objects_in(Arc::clone(&store) as Arc<dyn ObjectStore>));
            let mut fetches = Fetches::start(objects, concurrency, budget, &rt);
            let mut got = Vec::new();
            while let Some(body) = fetches.next() {
                let bytes = body.bytes.unwrap();
                got.push((body.location, bytes.len(), bytes[..2].to_vec()));
            }
            let want: Vec<_> =
                (0..20).map(|n| (format!("memory:///{n:02}.jsonl"), 2049, format!("{n:02}").into_bytes())).collect();
            assert_eq!(got, want, "{concurrency} at a time");
            assert_eq!(store.most_in_flight.load(Ordering::SeqCst), most, "{concurrency} at a time, {budget} bytes");
            let answered = store.answered.lock().unwrap().clone();
            if concurrency == 4 {
                let first = answered.iter().position(|&n| n == 0).unwrap();
                assert!(first >= 4, "answered before the first: {answered:?}");
            }
        }
    }
}
