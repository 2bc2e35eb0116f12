//! Live intervals: one line each on stderr and, with `--json-stream`, one JSON object each
//! (a line of its own, flushed as it ends, like iperf3's `--json-stream`).

use std::io::{BufWriter, Write};
use std::sync::{Arc, Mutex};

use anyhow::Context;
use qbench_core::report::load::{IntervalLine, IntervalRecord};

use super::text::run::interval_line;
use super::Dest;

/// The `--json-stream` file, device or FIFO; `None` once a write failed.
type JsonOut = Mutex<Option<BufWriter<Box<dyn Write + Send>>>>;

/// Where each interval goes.
pub struct IntervalOut {
    /// `--interval`: how long a full interval is.
    every: std::time::Duration,
    json: Option<JsonOut>,
    json_stdout: bool,
    /// Whether each interval is printed (`--interval` given, not only implied by another flag).
    print: bool,
}

impl IntervalOut {
    /// Creates (truncates) the `--json-stream` file, or opens the device it names; checked
    /// writable before this.
    pub fn open(
        json_stream: Option<&str>,
        every: std::time::Duration,
        print: bool,
    ) -> anyhow::Result<Arc<Self>> {
        let (json, json_stdout) = match json_stream.map(Dest::parse) {
            None => (None, false),
            Some(Dest::Stdout) => (None, true),
            Some(Dest::File(p)) => {
                let f = qbench_engine::files::open_stream(&p).context("--json-stream")?;
                (Some(Mutex::new(Some(BufWriter::new(f)))), false)
            }
        };
        Ok(Arc::new(Self {
            every,
            json,
            json_stdout,
            print,
        }))
    }

    /// Prints interval `r` of run `run` and streams it.
    pub fn emit(&self, run: u32, r: &IntervalRecord) {
        if self.print {
            crate::tell!("{}", interval_line(run, r, self.every));
        }
        if !self.json_stdout && self.json.is_none() {
            return;
        }
        let text = match serde_json::to_string(&IntervalLine { run, interval: r }) {
            Ok(t) => t + "\n",
            Err(e) => {
                crate::tell!("warning: --json-stream: {e}");
                return;
            }
        };
        if self.json_stdout {
            crate::console::out(&text);
        }
        if let Some(m) = &self.json {
            let mut guard = m.lock().expect("json stream lock");
            let failed = guard
                .as_mut()
                .map(|w| w.write_all(text.as_bytes()).and_then(|()| w.flush()));
            if let Some(Err(e)) = failed {
                qbench_engine::files::record_lost(&crate::console::Stderr, "--json-stream", e);
                *guard = None;
            }
        }
    }
}
