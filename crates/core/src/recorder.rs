//! The sans-IO recorder: transports tell it what happened and when (`now` is a monotonic
//! offset chosen by the caller); it never reads a clock, so it is tested with hand-built times.

use std::time::Duration;

use crate::errors::{ErrorCounts, ErrorKind};
use crate::histogram::{HistogramExport, LatencyHistogram};
pub use crate::report::connection::{ConnectionRecord, HandshakeInfo};
use crate::report::load::{IntervalAcc, IntervalRecord, LoadAcc};
use crate::report::{ObjectCounts, RunReport};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ConnId(usize);

/// How one object fetch went, as measured by a transport.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectOutcome {
    /// Open loop: when the request was due. Latency counts from here, whatever delayed it.
    pub intended: Option<Duration>,
    /// When the client took the request up, before any wait for a stream or its connection;
    /// `None`: at `sent`. An open loop's start lag up to here is the client's own; from here
    /// to `sent` the connection held the request (a server's stream limit, an h1 connection
    /// busy with another request).
    pub began: Option<Duration>,
    /// Request sent.
    pub sent: Duration,
    /// Response headers received.
    pub headers: Option<Duration>,
    /// Last body byte received, or the moment of failure.
    pub done: Duration,
    /// Payload bytes received.
    pub body_bytes: u64,
    /// Why it failed. Boxed, as failures are rare: an outcome is moved several times on its
    /// way from the transport to the recorder, and at 128 bytes or less each move is a few
    /// inline stores, not a call to memcpy (the unboxed pair made it 144).
    pub error: Option<Box<(ErrorKind, String)>>,
    /// The response's status, when its head arrived.
    pub status: Option<u16>,
    /// The request's stream on its connection (h2, h3); `None` for h1.
    pub stream: Option<u64>,
}

#[derive(Debug)]
pub struct Recorder {
    index: u32,
    started: Duration,
    requested: u64,
    conns: Vec<ConnectionRecord>,
    completed: u64,
    failed: u64,
    retried: u64,
    first_request: Option<Duration>,
    last_byte: Option<Duration>,
    payload_bytes: u64,
    latency: LatencyHistogram,
    ttfb: LatencyHistogram,
    errors: ErrorCounts,
    first_error: Option<String>,
    load: Option<LoadAcc>,
    interval: IntervalAcc,
    /// Whether anything asks for intervals: without, each object is counted in the run's
    /// figures only, two histogram records fewer (of four) for a small object.
    ticking: bool,
    interval_start: Duration,
    intervals: Vec<IntervalRecord>,
}

/// One object in the interval `iv`, started (or due, in an open loop) at `start`.
fn interval_object(iv: &mut IntervalAcc, o: &ObjectOutcome, start: Duration) {
    iv.bytes = iv.bytes.saturating_add(o.body_bytes);
    if let Some(h) = o.headers {
        iv.ttfb.record(h.saturating_sub(o.sent));
    }
    if let Some(i) = o.intended {
        iv.lag
            .get_or_insert_with(LatencyHistogram::new)
            .record(o.sent.saturating_sub(i));
    }
    match o.error.as_deref() {
        None => {
            iv.completed += 1;
            iv.latency.record(o.done.saturating_sub(start));
        }
        Some((kind, _)) => {
            iv.failed += 1;
            iv.errors.add(*kind);
        }
    }
}

fn us(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

impl Recorder {
    /// `now` is when the client starts connecting: the start of page load time.
    pub fn new(index: u32, requested: u64, now: Duration) -> Self {
        Self {
            index,
            started: now,
            requested,
            conns: Vec::new(),
            completed: 0,
            failed: 0,
            retried: 0,
            first_request: None,
            last_byte: None,
            payload_bytes: 0,
            latency: LatencyHistogram::new(),
            ttfb: LatencyHistogram::new(),
            errors: ErrorCounts::default(),
            first_error: None,
            load: None,
            interval: IntervalAcc::default(),
            ticking: true,
            interval_start: now,
            intervals: Vec::new(),
        }
    }

    /// Whether intervals will be asked of it (`--interval` and all that implies one). Without,
    /// objects go to the run's figures only, and an interval asked anyway holds none.
    pub fn ticking(mut self, ticking: bool) -> Self {
        self.ticking = ticking;
        self
    }

    /// A held load: requests started (or due) before `measure_from` are the warm-up's, and
    /// rates are per second of `window`; `target_rate` makes it an open loop.
    pub fn hold(&mut self, measure_from: Duration, window: Duration, target_rate: Option<f64>) {
        self.load = Some(LoadAcc::new(measure_from, window, target_rate));
    }

    /// The held load's warm-up ends at `at` (once every connection is up).
    pub fn measure_from(&mut self, at: Duration) {
        if let Some(l) = &mut self.load {
            l.measure_from = at;
        }
    }

    /// The held load was stopped at `at` (a signal, `--fail-early`): its window ends there,
    /// and its rates are per second of what was held, not of the duration asked for.
    pub fn stopped_at(&mut self, at: Duration) {
        if let Some(l) = &mut self.load {
            l.window = l.window.min(at.saturating_sub(l.measure_from));
        }
    }

    /// Open loop: a request due at `intended` was not sent (`--max-inflight` reached).
    pub fn dropped(&mut self, intended: Duration) {
        self.dropped_n(intended, 1);
    }

    /// Open loop: `n` requests due from `intended` on (all on one side of the warm-up's end)
    /// were not sent: `--max-inflight` were in flight.
    pub fn dropped_n(&mut self, intended: Duration, n: u64) {
        self.drop_n(intended, n);
    }

    /// Open loop: `n` requests due from `intended` on (all on one side of the warm-up's end)
    /// were not sent: the client was more than `MAX_LAG` behind, or the window had ended.
    pub fn dropped_late(&mut self, intended: Duration, n: u64) {
        if self.drop_n(intended, n) {
            if let Some(l) = &mut self.load {
                l.dropped_late = l.dropped_late.saturating_add(n);
            }
        }
    }

    /// Counts `n` dropped requests; true if they are measured ones, not the warm-up's.
    fn drop_n(&mut self, intended: Duration, n: u64) -> bool {
        self.interval.dropped = self.interval.dropped.saturating_add(n);
        let Some(l) = &mut self.load else {
            return false;
        };
        if l.measured_n(intended, n) {
            l.dropped = l.dropped.saturating_add(n);
            true
        } else {
            self.interval.warmup = self.interval.warmup.saturating_add(n);
            false
        }
    }

    /// Ends the current interval at `now`, with `in_flight` requests outstanding.
    pub fn interval(&mut self, now: Duration, in_flight: u64) -> IntervalRecord {
        // Warm-up only where a warm-up's requests were left out: before the connections are
        // up nothing counts yet, but without `--warmup` no request is sent then either.
        let warmup = self.interval.warmup > 0
            && self
                .load
                .as_ref()
                .is_some_and(|l| self.interval_start < l.measure_from);
        let (start, end) = (
            us(self.since_start(self.interval_start)),
            us(self.since_start(now)),
        );
        let rec = self.interval.take(start, end, warmup, in_flight);
        self.interval_start = now;
        self.intervals.push(rec.clone());
        rec
    }

    fn since_start(&self, now: Duration) -> Duration {
        now.saturating_sub(self.started)
    }

    pub fn connection_started(&mut self, now: Duration) -> ConnId {
        self.conns.push(ConnectionRecord {
            started_us: us(self.since_start(now)),
            handshake_us: None,
            info: HandshakeInfo::default(),
            error: None,
            server_max_streams: None,
            peak_streams: 0,
            quic: None,
            reopened: false,
        });
        ConnId(self.conns.len() - 1)
    }

    /// A connection opened at `now` in place of one the server closed.
    pub fn connection_reopened(&mut self, now: Duration) -> ConnId {
        let id = self.connection_started(now);
        self.conns[id.0].reopened = true;
        id
    }

    /// `n` requests were sent again on a new connection (`ObjectCounts::retried`).
    pub fn retried(&mut self, n: u64) {
        self.retried = self.retried.saturating_add(n);
    }

    /// A connection reused from an earlier run: no handshake in this run.
    pub fn connection_reused(&mut self, info: HandshakeInfo) -> ConnId {
        self.conns.push(ConnectionRecord {
            started_us: 0,
            handshake_us: None,
            info,
            error: None,
            server_max_streams: None,
            peak_streams: 0,
            quic: None,
            reopened: false,
        });
        ConnId(self.conns.len() - 1)
    }

    /// What a connection learnt of the server's stream limit, and how many of its requests
    /// were on the wire at once.
    pub fn streams(&mut self, id: ConnId, server_max: Option<u64>, peak: u64) {
        let c = &mut self.conns[id.0];
        c.server_max_streams = server_max;
        c.peak_streams = peak;
    }

    /// What the client's QUIC stack did on a connection during the run.
    pub fn quic(&mut self, id: ConnId, stats: Option<crate::spec::quic_knobs::QuicStats>) {
        self.conns[id.0].quic = stats;
    }

    pub fn handshake_done(&mut self, id: ConnId, now: Duration, info: HandshakeInfo) {
        let started = self.started + Duration::from_micros(self.conns[id.0].started_us);
        let c = &mut self.conns[id.0];
        c.handshake_us = Some(us(now.saturating_sub(started)));
        c.info = info;
    }

    pub fn connection_failed(&mut self, id: ConnId, kind: ErrorKind, message: &str) {
        self.conns[id.0].error = Some(kind);
        self.error(kind, message);
    }

    /// A failure not tied to one object or connection (e.g. a closing error).
    pub fn error(&mut self, kind: ErrorKind, message: &str) {
        self.errors.add(kind);
        if self.first_error.is_none() {
            self.first_error = Some(format!("{kind}: {message}"));
        }
    }

    pub fn object(&mut self, o: ObjectOutcome) {
        let start = o.intended.unwrap_or(o.sent);
        if self.ticking {
            interval_object(&mut self.interval, &o, start);
        }
        if let Some(l) = &mut self.load {
            if !l.measured(start) {
                self.interval.warmup += 1;
                return;
            }
            l.sent(
                o.intended,
                o.began.unwrap_or(o.sent),
                o.sent,
                o.done,
                o.error.is_none(),
            );
        }
        self.first_request = Some(self.first_request.map_or(o.sent, |f| f.min(o.sent)));
        self.payload_bytes = self.payload_bytes.saturating_add(o.body_bytes);
        if let Some(h) = o.headers {
            self.ttfb.record(h.saturating_sub(o.sent));
        }
        match o.error.map(|e| *e) {
            None => {
                self.completed += 1;
                self.latency.record(o.done.saturating_sub(start));
                self.last_byte = Some(self.last_byte.map_or(o.done, |l| l.max(o.done)));
            }
            Some((kind, message)) => {
                self.failed += 1;
                self.error(kind, &message);
            }
        }
    }

    /// A session that decides as it goes how many objects it fetches (a video) says at its
    /// end how many it requested.
    pub fn set_requested(&mut self, n: u64) {
        self.requested = n;
    }

    pub fn finish(mut self, now: Duration) -> RunReport {
        let load = self.load.take().map(|l| {
            // Every measured request was sent or dropped: the held load's own count.
            self.requested = l.sent + l.dropped;
            let dropped = l.dropped;
            (
                l.finish(self.completed, self.last_byte, self.started),
                dropped,
            )
        });
        let not_started = self.requested.saturating_sub(self.completed + self.failed);
        let complete = match &load {
            // Dropped requests are a result of the load, counted and shown, not an error.
            Some((_, dropped)) => self.errors.is_empty() && not_started == *dropped,
            None => self.completed == self.requested && self.errors.is_empty(),
        };
        let plt_us = (complete && load.is_none())
            .then(|| self.last_byte.map(|l| us(self.since_start(l))))
            .flatten();
        let goodput_bps = match (self.first_request, self.last_byte) {
            (Some(f), Some(l)) if l > f && self.payload_bytes > 0 => {
                Some(self.payload_bytes as f64 * 8.0 / (l - f).as_secs_f64())
            }
            _ => None,
        };
        let handshakes: Vec<u64> = self.conns.iter().filter_map(|c| c.handshake_us).collect();
        let offset = |t: Option<Duration>| t.map(|t| us(self.since_start(t)));
        RunReport {
            started_unix_us: None,
            first_request_us: offset(self.first_request),
            last_byte_us: offset(self.last_byte),
            index: self.index,
            complete,
            duration_us: us(self.since_start(now)),
            handshake_us: (!handshakes.is_empty())
                .then(|| handshakes.iter().sum::<u64>() / handshakes.len() as u64),
            plt_us,
            goodput_bps,
            payload_bytes: self.payload_bytes,
            objects: ObjectCounts {
                requested: self.requested,
                completed: self.completed,
                failed: self.failed,
                not_started,
                retried: self.retried,
            },
            connections: self.conns,
            errors: self.errors,
            first_error: self.first_error,
            object_latency: HistogramExport::from(&self.latency),
            ttfb: HistogramExport::from(&self.ttfb),
            cpu: None,
            client_cpu: None,
            server_cpu: None,
            proxy: None,
            digests: None,
            telemetry: None,
            cc_states: None,
            load: load.map(|(l, _)| l),
            intervals: self.intervals,
            client: None,
            spread: None,
            noise: None,
            link_check: None,
            net: None,
            video: None,
            page: None,
            third_party: None,
            server_program: None,
            server_view: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    fn ok(sent: u64, headers: u64, done: u64, bytes: u64) -> ObjectOutcome {
        ObjectOutcome {
            intended: None,
            began: None,
            sent: ms(sent),
            headers: Some(ms(headers)),
            done: ms(done),
            body_bytes: bytes,
            error: None,
            status: Some(200),
            stream: None,
        }
    }

    #[test]
    fn a_recorder_asked_for_no_intervals_counts_objects_in_the_run_only() {
        for ticking in [true, false] {
            let mut r = Recorder::new(0, 2, ms(1000)).ticking(ticking);
            r.object(ok(1010, 1015, 1030, 1000));
            r.object(ObjectOutcome {
                error: Some(Box::new((ErrorKind::Timeout, "slow".into()))),
                ..ok(1011, 1016, 1040, 0)
            });
            let iv = r.interval(ms(1050), 0);
            let n = u64::from(ticking);
            assert_eq!((iv.completed, iv.failed), (n, n), "ticking: {ticking}");
            assert_eq!((iv.payload_bytes, iv.latency.summary.count), (1000 * n, n));
            let rep = r.finish(ms(1050));
            assert_eq!((rep.objects.completed, rep.objects.failed), (1, 1));
            assert_eq!(
                (rep.payload_bytes, rep.object_latency.summary.count),
                (1000, 1)
            );
        }
    }

    #[test]
    fn complete_run_has_plt_goodput_and_histograms() {
        let mut r = Recorder::new(0, 2, ms(1000));
        let c = r.connection_started(ms(1000));
        r.handshake_done(c, ms(1010), HandshakeInfo::default());
        r.object(ok(1010, 1015, 1030, 1000));
        r.object(ok(1011, 1016, 1040, 1500));
        let rep = r.finish(ms(1041));
        assert!(rep.complete);
        assert_eq!(rep.handshake_us, Some(10_000));
        assert_eq!(rep.plt_us, Some(40_000));
        assert_eq!(rep.payload_bytes, 2500);
        // 2500 B over 30 ms (first request 1010 -> last byte 1040).
        let g = rep.goodput_bps.unwrap();
        assert!((g - 2500.0 * 8.0 / 0.030).abs() < 1e-6, "{g}");
        assert_eq!(rep.object_latency.summary.count, 2);
        assert_eq!(rep.ttfb.summary.count, 2);
        // HdrHistogram reports the highest value equivalent at 3 significant digits.
        assert!((5000..=5005).contains(&rep.ttfb.summary.max_us.unwrap()));
        assert_eq!(rep.duration_us, 41_000);
    }

    #[test]
    fn byte_sums_saturate_instead_of_wrapping() {
        // A third-party client's claims are not bounded by what a transport can carry.
        let mut r = Recorder::new(0, 2, ms(0));
        r.object(ok(1, 2, 3, u64::MAX / 2 + 1));
        r.object(ok(1, 2, 3, u64::MAX / 2 + 1));
        assert_eq!(r.finish(ms(4)).payload_bytes, u64::MAX);
    }

    #[test]
    fn an_outcome_is_small_enough_to_move_without_memcpy() {
        // x86-64's baseline (16-byte stores, at most 8 of them per copy) is the bound: past
        // it, each of the moves from transport to recorder is a call.
        assert!(size_of::<ObjectOutcome>() <= 128);
    }

    #[test]
    fn failures_make_run_incomplete_and_are_counted_by_kind() {
        let mut r = Recorder::new(3, 4, ms(0));
        let c = r.connection_started(ms(0));
        r.handshake_done(c, ms(1), HandshakeInfo::default());
        r.object(ok(1, 2, 3, 10));
        r.object(ObjectOutcome {
            intended: None,
            began: None,
            sent: ms(1),
            headers: Some(ms(2)),
            done: ms(4),
            body_bytes: 5,
            error: Some(Box::new((ErrorKind::ShortBody, "5 of 10 bytes".into()))),
            status: None,
            stream: None,
        });
        r.error(ErrorKind::Reset, "stream reset");
        let rep = r.finish(ms(5));
        assert!(!rep.complete);
        assert_eq!(rep.index, 3);
        assert_eq!(rep.plt_us, None);
        assert_eq!(rep.objects.completed, 1);
        assert_eq!(rep.objects.failed, 1);
        assert_eq!(rep.objects.not_started, 2);
        assert_eq!(rep.errors.0[&ErrorKind::ShortBody], 1);
        assert_eq!(rep.errors.0[&ErrorKind::Reset], 1);
        assert_eq!(
            rep.first_error.as_deref(),
            Some("short_body: 5 of 10 bytes")
        );
        assert_eq!(rep.object_latency.summary.count, 1);
        assert_eq!(rep.payload_bytes, 15);
    }

    #[test]
    fn an_interval_is_warm_up_only_when_a_warm_up_was_left_out_of_it() {
        // Without a warm-up: the first interval starts before the connections are up, but
        // every request in it counts.
        let mut r = Recorder::new(0, 0, ms(0));
        r.hold(Duration::MAX, ms(3000), None);
        r.measure_from(ms(10));
        r.object(ok(10, 12, 20, 100));
        let first = r.interval(ms(1000), 0);
        assert!(!first.warmup);
        assert_eq!(first.completed, 1);
        assert_eq!(r.finish(ms(1000)).objects.completed, 1);

        // With one: its requests are in the interval and out of the totals.
        let mut r = Recorder::new(0, 0, ms(0));
        r.hold(Duration::MAX, ms(3000), None);
        r.measure_from(ms(1500));
        r.object(ok(10, 12, 20, 100));
        let first = r.interval(ms(1000), 0);
        assert!(first.warmup);
        r.object(ok(1600, 1602, 1610, 100));
        assert!(!r.interval(ms(2000), 0).warmup);
        let rep = r.finish(ms(2000));
        assert_eq!(rep.objects.completed, 1);
        assert_eq!(rep.load.unwrap().warmup_requests, 1);
    }

    /// Due at 0, taken up at 3 ms, sent at 10 ms: the start lag is 10 ms and the client's
    /// own 3 ms, both late; taken up at 1 ms, only the start lag is late.
    #[test]
    fn the_clients_part_of_the_start_lag_ends_where_it_took_the_request_up() {
        let mut r = Recorder::new(0, 0, ms(0));
        r.hold(Duration::MAX, ms(1000), Some(100.0));
        r.measure_from(ms(0));
        for began in [3, 1] {
            r.object(ObjectOutcome {
                intended: Some(ms(0)),
                began: Some(ms(began)),
                ..ok(10, 12, 20, 100)
            });
        }
        let l = r.finish(ms(20)).load.unwrap();
        assert_eq!((l.late, l.client_late), (2, 1));
        let (all, own) = (l.lag.unwrap().summary, l.client_lag.unwrap().summary);
        // At 3 significant digits a maximum reads as the highest equivalent value.
        let near =
            |v: Option<u64>, want: u64| v.is_some_and(|v| (want..=want + want / 100).contains(&v));
        assert!(
            near(all.min_us, 10_000) && near(all.max_us, 10_000),
            "{all:?}"
        );
        assert!(
            near(own.min_us, 1_000) && near(own.max_us, 3_000),
            "{own:?}"
        );
    }

    #[test]
    fn failed_connection_counts_once() {
        let mut r = Recorder::new(0, 200, ms(0));
        let c = r.connection_started(ms(0));
        r.connection_failed(c, ErrorKind::Refused, "connection refused");
        let rep = r.finish(ms(1));
        assert_eq!(rep.errors.total(), 1);
        assert_eq!(rep.objects.not_started, 200);
        assert_eq!(rep.goodput_bps, None);
        assert_eq!(rep.connections[0].error, Some(ErrorKind::Refused));
        let json = serde_json::to_string(&rep).unwrap();
        assert!(!json.contains("NaN"));
    }
}
