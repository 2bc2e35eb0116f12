//! qlog files, one per QUIC connection, written by quinn's own qlog support (JSON-SEQ, the
//! `.sqlog` files qvis reads). Shared by the server and the client.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Instant;

type Buffered = Arc<Mutex<BufWriter<File>>>;

/// Every qlog file of this process still being written: quinn drops a connection's writer
/// (and so flushes it) only once the connection is gone, which a process ending after its
/// runs does not wait for.
static OPEN: Mutex<Vec<Weak<Mutex<BufWriter<File>>>>> = Mutex::new(Vec::new());

/// Writes what every open qlog file holds in its buffer (at the end of a run, and at exit).
pub fn flush_all() {
    let Ok(mut open) = OPEN.lock() else {
        return;
    };
    open.retain(|w| match w.upgrade() {
        Some(w) => {
            if let Ok(mut w) = w.lock() {
                let _ = w.flush();
            }
            true
        }
        None => false,
    });
}

/// A buffered file that `flush_all` can reach.
struct Shared(Buffered);

impl Write for Shared {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .map_err(|_| std::io::Error::other("qlog writer poisoned"))?
            .write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0
            .lock()
            .map_err(|_| std::io::Error::other("qlog writer poisoned"))?
            .flush()
    }
}

/// Where one side's connections write their qlog files, and which connections do.
#[derive(Debug)]
pub struct QlogDir {
    dir: PathBuf,
    sample: f64,
    side: &'static str,
    next: AtomicU64,
}

/// Whether connection `n` is kept at `sample`: spread evenly (the golden-ratio sequence), so
/// that any run of connections keeps the asked share, and the same ones on every run.
pub fn sampled(n: u64, sample: f64) -> bool {
    sample >= 1.0 || (n as f64 * 0.618_033_988_749_894_9).fract() < sample
}

impl QlogDir {
    /// `side`: `client` or `server`, the first word of every file name.
    pub fn new(dir: &Path, sample: f64, side: &'static str) -> Self {
        Self {
            dir: dir.to_path_buf(),
            sample,
            side,
            next: AtomicU64::new(0),
        }
    }

    /// The qlog stream of the next connection, if it is sampled, and its file:
    /// `SIDE-PID-N[-PEER].sqlog`, N counting this process's connections on this side in the
    /// order they were opened.
    pub fn next(&self, peer: Option<std::net::SocketAddr>) -> Option<(quinn::QlogStream, PathBuf)> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        if !sampled(n, self.sample) {
            return None;
        }
        let peer = peer.map_or(String::new(), |p| {
            format!("-{}", p).replace([':', '[', ']'], "_")
        });
        let name = format!("{}-{}-{n:06}{peer}.sqlog", self.side, std::process::id());
        let path = self.dir.join(name);
        let file: Buffered = Arc::new(Mutex::new(BufWriter::new(File::create(&path).ok()?)));
        if let Ok(mut open) = OPEN.lock() {
            open.push(Arc::downgrade(&file));
        }
        let mut config = quinn::QlogConfig::default();
        config
            .writer(Box::new(Shared(file)))
            .title(Some(format!("qbench {} connection {n}", self.side)))
            .start_time(Instant::now());
        config.into_stream().map(|s| (s, path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sampling_keeps_the_share_asked_for() {
        for p in [0.0, 0.1, 0.25, 0.5, 0.9, 1.0] {
            let kept = (0..10_000).filter(|&n| sampled(n, p)).count();
            assert!((kept as f64 - p * 10_000.0).abs() <= 2.0, "{p}: {kept}");
        }
    }
}
