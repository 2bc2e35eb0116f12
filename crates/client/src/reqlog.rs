//! `--log-requests FILE`: one line per request, as h2load's `--log-file` has it, in TSV
//! with a header: times in microseconds from the start of the request's run.

use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use qbench_core::ObjectOutcome;

use crate::config::ConfigError;

const HEADER: &str =
    "run\tconnection\tstream\tintended_us\tstart_us\tttfb_us\tend_us\tbytes\tstatus\terror\turl\n";

pub(crate) struct RequestLog {
    out: Mutex<BufWriter<std::fs::File>>,
}

/// Where a request's line belongs: its run, and when that run started.
#[derive(Clone)]
pub(crate) struct LogTo {
    pub(crate) log: Arc<RequestLog>,
    pub(crate) run: u32,
    pub(crate) run_start: Duration,
}

impl RequestLog {
    pub(crate) fn create(path: &Path) -> Result<Arc<Self>, ConfigError> {
        let bad = |e: std::io::Error| ConfigError {
            flag: "--log-requests",
            message: format!("{}: {e}", path.display()),
        };
        let mut out = BufWriter::new(std::fs::File::create(path).map_err(bad)?);
        out.write_all(HEADER.as_bytes()).map_err(bad)?;
        Ok(Arc::new(Self {
            out: Mutex::new(out),
        }))
    }

    pub(crate) fn flush(&self) -> std::io::Result<()> {
        match self.out.lock() {
            Ok(mut out) => out.flush(),
            Err(_) => Ok(()),
        }
    }
}

impl LogTo {
    /// The line of one request on connection `conn`.
    pub(crate) fn line(&self, conn: u64, url: &str, o: &ObjectOutcome) {
        let us = |t: Duration| t.saturating_sub(self.run_start).as_micros().to_string();
        let opt = |v: Option<String>| v.unwrap_or_else(|| "-".into());
        let line = format!(
            "{}\t{conn}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{url}\n",
            self.run,
            opt(o.stream.map(|s| s.to_string())),
            opt(o.intended.map(us)),
            us(o.sent),
            opt(o
                .headers
                .map(|h| h.saturating_sub(o.sent).as_micros().to_string())),
            us(o.done),
            o.body_bytes,
            opt(o.status.map(|s| s.to_string())),
            opt(o.error.as_ref().map(|(k, _)| k.to_string())),
        );
        if let Ok(mut out) = self.log.out.lock() {
            let _ = out.write_all(line.as_bytes());
        }
    }
}
