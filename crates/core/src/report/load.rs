//! What a held load adds to a run report: the measured window, achieved rates, late and
//! dropped requests, the two latency histograms of an open loop, and the interval series.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::errors::ErrorCounts;
use crate::histogram::{HistogramError, HistogramExport, LatencyHistogram};
use crate::spec::load::LATE_AFTER;
use crate::stats::Stats;

fn us(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// How the load was applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LoadMode {
    /// `--streams` requests per connection kept in flight for the duration.
    Closed,
    /// Requests started at intended times, whatever the responses do.
    Open,
}

/// One run's held load. Every count covers requests started (open loop: due) in the
/// measured window; requests of the warm-up are counted apart and nowhere else.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LoadReport {
    pub mode: LoadMode,
    /// Measured window: the duration less the warm-up, or less where a stop (a signal,
    /// `--fail-early`) ended the load first: the rates are per second of it.
    pub window_us: u64,
    /// When the measured window began, from the run's start (connecting and the warm-up
    /// come before it): shards' windows are laid on one time line by it.
    #[serde(default)]
    pub window_start_us: u64,
    /// Requests sent in the window (open loop: and due; dropped ones are not sent).
    #[serde(default)]
    pub sent: u64,
    pub warmup_requests: u64,
    pub target_rate: Option<f64>,
    /// Requests sent in the window, per second of it.
    pub achieved_rate: f64,
    /// Requests completed, per second from the window's start to the last byte.
    pub completed_rate: f64,
    /// Open loop: requests sent more than 2 ms (`LATE_AFTER`) after their intended start.
    pub late: u64,
    /// Open loop: requests due in the window and never sent: due while `--max-inflight` were
    /// in flight, or counted in `dropped_late`.
    pub dropped: u64,
    /// Open loop: of `dropped`, those the client could not send within `MAX_LAG` (1 s) of
    /// their intended start, or still unsent when the window ended: the client was past its
    /// capacity.
    #[serde(default)]
    pub dropped_late: u64,
    /// Open loop: actual send minus intended start, of every request sent.
    pub lag: Option<HistogramExport>,
    /// Open loop: the client's own part of `lag`, from the intended start to when the client
    /// took the request up, before any wait for a stream or its connection. Where `lag` is
    /// far above it, the connections held the requests (the server's stream limit), not the
    /// client. Absent from reports written before it was recorded, and from a merge of
    /// shards any of which is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_lag: Option<HistogramExport>,
    /// Open loop: requests the client itself took up more than 2 ms (`LATE_AFTER`) after
    /// their intended start (of `late`).
    #[serde(default)]
    pub client_late: u64,
    /// Open loop: actual send -> last byte. The run's `object_latency` is measured from the
    /// intended start instead, so that a stall shows up in it (no coordinated omission).
    pub service_time: Option<HistogramExport>,
}

/// One `--interval`: what completed in it. Its histogram adds up exactly with the others'.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct IntervalRecord {
    pub start_us: u64,
    pub end_us: u64,
    /// The interval began before the warm-up ended.
    pub warmup: bool,
    pub completed: u64,
    pub failed: u64,
    pub dropped: u64,
    pub payload_bytes: u64,
    /// Requests on the wire or due and waiting when the interval ended.
    pub in_flight: u64,
    pub errors: ErrorCounts,
    pub latency: HistogramExport,
    /// Time to first byte of the requests that ended in it (absent from reports written
    /// before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttfb: Option<HistogramExport>,
    /// Open loop: how late the requests that ended in it were sent, after they were due.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_lag: Option<HistogramExport>,
}

/// One line of `--json-stream`: interval `interval` of run `run`.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct IntervalLine<'a> {
    pub run: u32,
    #[serde(flatten)]
    pub interval: &'a IntervalRecord,
}

impl IntervalRecord {
    pub fn seconds(&self) -> f64 {
        self.end_us.saturating_sub(self.start_us) as f64 / 1e6
    }
}

/// Accumulates one interval.
#[derive(Debug, Default)]
pub(crate) struct IntervalAcc {
    pub(crate) completed: u64,
    pub(crate) failed: u64,
    pub(crate) dropped: u64,
    pub(crate) bytes: u64,
    pub(crate) errors: ErrorCounts,
    pub(crate) latency: LatencyHistogram,
    pub(crate) ttfb: LatencyHistogram,
    /// Open loop only: a closed loop's requests are never late.
    pub(crate) lag: Option<LatencyHistogram>,
    /// Requests in it that belong to the warm-up, left out of the run's figures.
    pub(crate) warmup: u64,
}

impl IntervalAcc {
    pub(crate) fn take(
        &mut self,
        start_us: u64,
        end_us: u64,
        warmup: bool,
        in_flight: u64,
    ) -> IntervalRecord {
        let acc = std::mem::take(self);
        IntervalRecord {
            start_us,
            end_us,
            warmup,
            completed: acc.completed,
            failed: acc.failed,
            dropped: acc.dropped,
            payload_bytes: acc.bytes,
            in_flight,
            errors: acc.errors,
            latency: HistogramExport::from(&acc.latency),
            ttfb: Some(HistogramExport::from(&acc.ttfb)),
            start_lag: acc.lag.as_ref().map(HistogramExport::from),
        }
    }
}

/// Accumulates a run's load figures; the recorder owns it.
#[derive(Debug)]
pub(crate) struct LoadAcc {
    pub(crate) mode: LoadMode,
    /// Offset on the caller's clock where the warm-up ends.
    pub(crate) measure_from: Duration,
    pub(crate) window: Duration,
    pub(crate) target_rate: Option<f64>,
    pub(crate) warmup_requests: u64,
    pub(crate) sent: u64,
    pub(crate) late: u64,
    pub(crate) dropped: u64,
    pub(crate) dropped_late: u64,
    pub(crate) lag: LatencyHistogram,
    pub(crate) client_late: u64,
    pub(crate) client_lag: LatencyHistogram,
    pub(crate) service: LatencyHistogram,
}

impl LoadAcc {
    pub(crate) fn new(measure_from: Duration, window: Duration, target_rate: Option<f64>) -> Self {
        Self {
            mode: if target_rate.is_some() {
                LoadMode::Open
            } else {
                LoadMode::Closed
            },
            measure_from,
            window,
            target_rate,
            warmup_requests: 0,
            sent: 0,
            late: 0,
            dropped: 0,
            dropped_late: 0,
            lag: LatencyHistogram::new(),
            client_late: 0,
            client_lag: LatencyHistogram::new(),
            service: LatencyHistogram::new(),
        }
    }

    /// A request started (or was due) at `start`: false if it belongs to the warm-up.
    pub(crate) fn measured(&mut self, start: Duration) -> bool {
        self.measured_n(start, 1)
    }

    /// `n` requests started (or due) at `start` or, all on the same side of the warm-up's
    /// end, after it: false if they belong to the warm-up.
    pub(crate) fn measured_n(&mut self, start: Duration, n: u64) -> bool {
        let m = start >= self.measure_from;
        if !m {
            self.warmup_requests = self.warmup_requests.saturating_add(n);
        }
        m
    }

    pub(crate) fn sent(
        &mut self,
        intended: Option<Duration>,
        began: Duration,
        sent: Duration,
        done: Duration,
        ok: bool,
    ) {
        self.sent += 1;
        if let Some(i) = intended {
            let lag = sent.saturating_sub(i);
            self.lag.record(lag);
            if lag > LATE_AFTER {
                self.late += 1;
            }
            // Taken up no later than sent: a clock read before another.
            let own = began.min(sent).saturating_sub(i);
            self.client_lag.record(own);
            if own > LATE_AFTER {
                self.client_late += 1;
            }
            if ok {
                self.service.record(done.saturating_sub(sent));
            }
        }
    }

    pub(crate) fn finish(
        self,
        completed: u64,
        last_byte: Option<Duration>,
        run_start: Duration,
    ) -> LoadReport {
        let window = self.window.as_secs_f64();
        let until_last =
            last_byte.map_or(0.0, |l| l.saturating_sub(self.measure_from).as_secs_f64());
        let per = |n: u64, over: f64| if over > 0.0 { n as f64 / over } else { 0.0 };
        let open = self.mode == LoadMode::Open;
        LoadReport {
            mode: self.mode,
            window_us: us(self.window),
            window_start_us: us(self.measure_from.saturating_sub(run_start)),
            sent: self.sent,
            warmup_requests: self.warmup_requests,
            target_rate: self.target_rate,
            achieved_rate: per(self.sent, window),
            completed_rate: per(completed, window.max(until_last)),
            late: self.late,
            dropped: self.dropped,
            dropped_late: self.dropped_late,
            lag: open.then(|| HistogramExport::from(&self.lag)),
            client_lag: open.then(|| HistogramExport::from(&self.client_lag)),
            client_late: self.client_late,
            service_time: open.then(|| HistogramExport::from(&self.service)),
        }
    }
}

/// The load figures of all runs: rates over runs, the histograms merged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LoadSummary {
    pub achieved_rate: Stats,
    pub completed_rate: Stats,
    pub late: u64,
    pub dropped: u64,
    #[serde(default)]
    pub dropped_late: u64,
    pub lag: Option<HistogramExport>,
    /// The client's own part of `lag` (`LoadReport::client_lag`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_lag: Option<HistogramExport>,
    #[serde(default)]
    pub client_late: u64,
    pub service_time: Option<HistogramExport>,
}

impl LoadSummary {
    pub fn of<'a>(
        loads: impl Iterator<Item = &'a LoadReport>,
    ) -> Result<Option<Self>, HistogramError> {
        let all: Vec<&LoadReport> = loads.collect();
        if all.is_empty() {
            return Ok(None);
        }
        let merge = |f: &dyn Fn(&LoadReport) -> Option<&HistogramExport>| {
            let mut h: Option<LatencyHistogram> = None;
            for l in &all {
                if let Some(e) = f(l) {
                    h.get_or_insert_with(LatencyHistogram::new)
                        .merge(&e.histogram()?)?;
                }
            }
            Ok::<_, HistogramError>(h.as_ref().map(HistogramExport::from))
        };
        let rates = |f: &dyn Fn(&LoadReport) -> f64| all.iter().map(|l| f(l)).collect::<Vec<_>>();
        Ok(Some(Self {
            achieved_rate: Stats::of(&rates(&|l| l.achieved_rate)),
            completed_rate: Stats::of(&rates(&|l| l.completed_rate)),
            late: all.iter().map(|l| l.late).sum(),
            dropped: all.iter().map(|l| l.dropped).sum(),
            dropped_late: all.iter().map(|l| l.dropped_late).sum(),
            lag: merge(&|l| l.lag.as_ref())?,
            client_lag: merge(&|l| l.client_lag.as_ref())?,
            client_late: all.iter().map(|l| l.client_late).sum(),
            service_time: merge(&|l| l.service_time.as_ref())?,
        }))
    }
}
