//! `--log-requests FILE`: one line per request, as h2load's `--log-file` has it, in TSV
//! with a header: times in microseconds from the start of the request's run, and whether the
//! request was the warm-up's (left out of the run's figures) or measured.

use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use qbench_core::ObjectOutcome;

use crate::error::{self, ConfigError};

const HEADER: &str =
    "run\tconnection\tstream\tintended_us\tstart_us\tttfb_us\tend_us\tbytes\tstatus\terror\twarmup\turl\n";

pub(crate) struct RequestLog {
    out: Mutex<BufWriter<Box<dyn Write + Send>>>,
    /// A write failed: the lines after it are not written (a log with a gap reads as whole).
    failed: AtomicBool,
}

/// Where a request's line belongs: its run, and when that run started.
#[derive(Clone)]
pub(crate) struct LogTo {
    pub log: Arc<RequestLog>,
    pub run: u32,
    pub run_start: Duration,
    /// Told once if the log loses a line.
    pub lost: crate::observe::Observing,
    /// The run's warm-up ends here (nanoseconds on the run's clock): a request started, or
    /// due, before it is the warm-up's, as the recorder counts it. A held load's is unknown
    /// (the maximum) until every connection is up; a run without a held load has none (0).
    pub warm_end: Arc<AtomicU64>,
}

impl RequestLog {
    pub(crate) fn create(path: &Path) -> Result<Arc<Self>, ConfigError> {
        let bad =
            |e: std::io::Error| error::bad("--log-requests", format!("{}: {e}", path.display()));
        let out = crate::output::target::open_stream(path)
            .map_err(|e| error::bad("--log-requests", e.to_string()))?;
        let mut out = BufWriter::new(out);
        out.write_all(HEADER.as_bytes()).map_err(bad)?;
        Ok(Arc::new(Self {
            out: Mutex::new(out),
            failed: AtomicBool::new(false),
        }))
    }

    pub(crate) fn flush(&self) -> std::io::Result<()> {
        match self.out.lock() {
            Ok(_) if self.failed.load(Ordering::Relaxed) => Ok(()),
            Ok(mut out) => out.flush().inspect_err(|_| {
                self.failed.store(true, Ordering::Relaxed);
            }),
            Err(_) => Ok(()),
        }
    }
}

/// A value, or `-` where there is none.
fn field(out: &mut impl Write, v: Option<impl std::fmt::Display>) -> std::io::Result<()> {
    match v {
        Some(v) => write!(out, "{v}\t"),
        None => out.write_all(b"-\t"),
    }
}

impl LogTo {
    /// The held load's warm-up ends at `at`, as the recorder is told.
    pub(crate) fn warm_until(&self, at: Duration) {
        let ns = u64::try_from(at.as_nanos()).unwrap_or(u64::MAX);
        self.warm_end.store(ns, Ordering::Release);
    }

    /// The line of one request on connection `conn`, formatted straight into the buffer: the
    /// client's own thread pays for it, so nothing is allocated per line.
    pub(crate) fn line(&self, conn: u64, url: &impl std::fmt::Display, o: &ObjectOutcome) {
        let us = |t: Duration| t.saturating_sub(self.run_start).as_micros();
        let Ok(mut out) = self.log.out.lock() else {
            return;
        };
        if self.log.failed.load(Ordering::Relaxed) {
            return;
        }
        let out = &mut *out;
        let written = (|| -> std::io::Result<()> {
            write!(out, "{}\t{conn}\t", self.run)?;
            field(out, o.stream)?;
            field(out, o.intended.map(us))?;
            write!(out, "{}\t", us(o.sent))?;
            field(out, o.headers.map(|h| h.saturating_sub(o.sent).as_micros()))?;
            write!(out, "{}\t{}\t", us(o.done), o.body_bytes)?;
            field(out, o.status)?;
            field(out, o.error.as_deref().map(|(k, _)| k))?;
            let start = o.intended.unwrap_or(o.sent);
            let warm = start < Duration::from_nanos(self.warm_end.load(Ordering::Acquire));
            writeln!(out, "{}\t{url}", u8::from(warm))
        })();
        if let Err(e) = written {
            self.log.failed.store(true, Ordering::Relaxed);
            crate::output::lost::record(&self.lost, "--log-requests", e);
        }
    }
}
