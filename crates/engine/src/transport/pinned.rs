//! Single-threaded runtimes, one per client thread, each owning a share of the connections
//! with their drivers and request tasks. An HTTP/2 connection is one lock shared by its
//! driver task and its streams' tasks; a multi-threaded runtime runs those on different
//! threads, so every request moved that lock's cache line between cores. On 2 cores the bare
//! h2 crate took 7.6-8.6 CPU-us per request on a 2-worker runtime and 4.5-5.1 pinned this way.

use std::sync::Arc;
use std::thread::JoinHandle;

use tokio::runtime::Handle;
use tokio::sync::oneshot;

/// Runs on each pinned thread before its runtime starts (e.g. joining the client's cgroup).
pub(crate) type OnStart = Arc<dyn Fn() + Send + Sync>;

thread_local! {
    /// The index of the pinned runtime this thread runs, if it runs one.
    static INDEX: std::cell::Cell<Option<usize>> = const { std::cell::Cell::new(None) };
}

/// Which pinned runtime the calling thread runs (`handle(i)` for `i % threads()` equal to
/// it), or `None` on any other thread.
pub(crate) fn current_index() -> Option<usize> {
    INDEX.with(std::cell::Cell::get)
}

pub(crate) struct Pinned {
    handles: Vec<Handle>,
    stops: Vec<oneshot::Sender<()>>,
    threads: Vec<JoinHandle<()>>,
}

impl Pinned {
    /// `n` threads named as the client runtime's, each running its own runtime until `self`
    /// is dropped.
    pub(crate) fn start(n: usize, on_start: Option<OnStart>) -> std::io::Result<Self> {
        // `handle` picks by index modulo the count: never zero of them.
        let n = n.max(1);
        let mut pinned = Self {
            handles: Vec::with_capacity(n),
            stops: Vec::with_capacity(n),
            threads: Vec::with_capacity(n),
        };
        for index in 0..n {
            let (stop_tx, stop_rx) = oneshot::channel::<()>();
            let (handle_tx, handle_rx) = std::sync::mpsc::channel();
            let on_start = on_start.clone();
            let thread = std::thread::Builder::new()
                .name("qbench-client".into())
                .spawn(move || {
                    INDEX.with(|i| i.set(Some(index)));
                    if let Some(f) = on_start {
                        f();
                    }
                    let rt = match tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                    {
                        Ok(rt) => rt,
                        Err(e) => {
                            let _ = handle_tx.send(Err(e));
                            return;
                        }
                    };
                    let _ = handle_tx.send(Ok(rt.handle().clone()));
                    // Runs the connections' tasks until told to stop; they are dropped with
                    // the runtime, on this thread.
                    rt.block_on(async {
                        let _ = stop_rx.await;
                    });
                })?;
            pinned.threads.push(thread);
            pinned.stops.push(stop_tx);
            let handle = handle_rx.recv().map_err(|_| {
                std::io::Error::other("a pinned client thread ended at its start")
            })??;
            pinned.handles.push(handle);
        }
        Ok(pinned)
    }

    /// The runtime of connection `ci`.
    pub(crate) fn handle(&self, ci: usize) -> &Handle {
        &self.handles[ci % self.handles.len()]
    }

    pub(crate) fn threads(&self) -> usize {
        self.handles.len()
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        for stop in self.stops.drain(..) {
            let _ = stop.send(());
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Connection i's tasks all run on one thread, connection i+n's on the same one, and the
    /// threads end with the pool.
    #[test]
    fn each_connection_runs_on_one_thread() {
        let pool = Pinned::start(2, None).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let ids: Vec<std::thread::ThreadId> = rt.block_on(async {
            let mut ids = Vec::new();
            for ci in 0..4 {
                let id = pool
                    .handle(ci)
                    .spawn(async move {
                        tokio::task::yield_now().await;
                        assert_eq!(current_index(), Some(ci % 2));
                        std::thread::current().id()
                    })
                    .await
                    .unwrap();
                ids.push(id);
            }
            ids
        });
        assert_eq!(ids[0], ids[2]);
        assert_eq!(ids[1], ids[3]);
        assert_ne!(ids[0], ids[1]);
        assert_ne!(ids[0], std::thread::current().id());
        assert_eq!(current_index(), None);
        let handle = pool.handle(0).clone();
        drop(pool);
        assert!(
            rt.block_on(handle.spawn(async {})).is_err(),
            "the runtime is gone"
        );
    }
}
