//! The client's own load over a run: whether it kept up, or the run's figures measure the
//! client rather than the server.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use qbench_core::stats::saturation::{ClientLoad, StartLag};
use qbench_core::{HistogramExport, LatencyHistogram, RunReport};
use tokio::task::JoinSet;

use crate::measure::cpu::{client_threads, thread_loads, ThreadTime};

/// The client's own load over a run, to tell whether it kept up: its threads' CPU time and
/// how late its runtime runs a timer.
pub(super) struct ClientWatch {
    threads: Vec<ThreadTime>,
    wall: std::time::Instant,
    runtime_lag: Arc<Mutex<LatencyHistogram>>,
}

impl ClientWatch {
    /// Reads the threads' CPU time and starts the runtime's probe among `side_tasks`.
    pub(super) fn start(side_tasks: &mut JoinSet<()>) -> Self {
        let watch = Self {
            threads: client_threads(),
            wall: std::time::Instant::now(),
            runtime_lag: Arc::new(Mutex::new(LatencyHistogram::new())),
        };
        side_tasks.spawn(probe(watch.runtime_lag.clone()));
        watch
    }

    /// The client's load since `start`; a held load's start lag in `report` counts too.
    pub(super) fn judge(&self, report: &RunReport) -> ClientLoad {
        let loads = thread_loads(&self.threads, &client_threads(), self.wall.elapsed());
        // Closed loops have no intended start: no lag and nothing late. Of an open loop's
        // start lag, only the part before the client took a request up is the client's: a
        // request that then waited for a stream or its connection waited for the link's or
        // the server's limit.
        let start = report.load.as_ref().and_then(|l| {
            l.client_lag.as_ref().map(|h| StartLag {
                p99_us: h.summary.p99_us,
                late: l.client_late,
                sent: l.sent,
            })
        });
        ClientLoad::judge(
            loads,
            HistogramExport::from(&*self.runtime_lag.lock().expect("probe lock")),
            start,
        )
    }
}

/// How late the client's runtime runs a 10 ms timer: its scheduling lag.
async fn probe(lag: Arc<Mutex<LatencyHistogram>>) {
    let every = Duration::from_millis(10);
    loop {
        let due = tokio::time::Instant::now() + every;
        tokio::time::sleep_until(due).await;
        let late = tokio::time::Instant::now().saturating_duration_since(due);
        lag.lock().expect("probe lock").record(late);
    }
}
