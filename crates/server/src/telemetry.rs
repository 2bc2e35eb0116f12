//! Per-connection sender telemetry: a task samples the congestion controller every interval
//! (quinn's stats and our controller wrapper, or the kernel's TCP_INFO) and keeps a timeline
//! the client fetches with `GET /_qbench/telemetry` over the same connection.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use qbench_core::report::telemetry::{CcSample, Timeline};

use crate::cc::Instrumented;
use crate::shared::Stats;

/// Samples a connection keeps; at this many, every other one is dropped and the interval
/// doubles, so a long-lived connection costs at most this many samples (about 1.5 MB).
pub const KEPT_SAMPLES: usize = 8192;

/// Samples per second all of a server's samplers take together. Each sample reads the
/// connection's state under its lock: at 10,000 QUIC connections sampled every 10 ms, the
/// samplers took 60% of the server's CPU, and under CPU contention the rest starved.
pub const SAMPLES_PER_S: u64 = 20_000;

/// How long a sampler whose own interval is `own_us` waits while `samplers` are running: its
/// interval, or longer once the samplers together would pass [`SAMPLES_PER_S`].
pub fn budget_wait_us(own_us: u64, samplers: usize) -> u64 {
    own_us.max((samplers as u64).saturating_mul(1_000_000) / SAMPLES_PER_S)
}

/// TCP reports an unset ssthresh as this many segments.
const TCP_INFINITE_SSTHRESH: u32 = 0x7fff_ffff;

enum Source {
    Quic(quinn::Connection, Option<Arc<std::net::UdpSocket>>),
    /// The raw fd while the socket is open; -1 once `Tracked` is dropped.
    Tcp(Mutex<RawFd>),
}

pub struct ConnTelemetry {
    source: Source,
    started: Instant,
    timeline: Mutex<Timeline>,
    /// Current sampling interval; it doubles each time the samples are thinned.
    interval_us: AtomicU64,
    /// A telemetry body of this connection exists (in a response not yet fully sent).
    busy: Arc<AtomicBool>,
    /// QUIC counters at the last telemetry fetch.
    quic_reported: Mutex<qbench_core::spec::quic_knobs::QuicStats>,
    /// The server's counters, once a sampler counts this connection in `samplers`.
    counted: OnceLock<Arc<Stats>>,
}

impl Drop for ConnTelemetry {
    fn drop(&mut self) {
        if let Some(stats) = self.counted.get() {
            stats.samplers.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

impl ConnTelemetry {
    fn new(
        source: Source,
        transport: &str,
        cc: &str,
        cap: Option<u64>,
        interval: Duration,
    ) -> Arc<Self> {
        Arc::new(Self {
            source,
            interval_us: AtomicU64::new(interval.as_micros() as u64),
            busy: Arc::default(),
            quic_reported: Mutex::default(),
            counted: OnceLock::new(),
            started: Instant::now(),
            timeline: Mutex::new(Timeline {
                transport: transport.into(),
                cc: cc.into(),
                cwnd_cap_bytes: cap,
                cwnd_cap_packets: None,
                interval_us: interval.as_micros() as u64,
                samples: Vec::new(),
                truncated: false,
                quic: None,
            }),
        })
    }

    /// A sample and, for QUIC, the cap in bytes at the current MTU.
    fn sample(&self) -> Option<(CcSample, Option<u64>)> {
        let t_us = self.started.elapsed().as_micros() as u64;
        match &self.source {
            Source::Quic(conn, _) => conn
                .close_reason()
                .is_none()
                .then(|| quic_sample(conn, t_us)),
            Source::Tcp(fd) => {
                let fd = fd.lock().expect("fd lock");
                if *fd < 0 {
                    return None;
                }
                tcp_sample(*fd, t_us).map(|s| (s, None))
            }
        }
    }

    /// The JSON of everything so far plus one fresh sample, or `None` while an earlier body
    /// of this connection still exists: at most one copy of the timeline per connection.
    pub fn body(&self) -> Option<Bytes> {
        if self.busy.swap(true, Ordering::Acquire) {
            return None;
        }
        if let Some(s) = self.sample() {
            self.record(s);
        }
        let json = {
            let mut tl = self.timeline.lock().expect("timeline lock");
            if let Source::Quic(conn, sock) = &self.source {
                // Each fetch reports what happened since the previous one: one run's worth.
                let now = qbench_stack::quic_knobs::stats(conn, sock.as_deref());
                let mut last = self.quic_reported.lock().expect("stats lock");
                tl.quic = Some(now.since(&last));
                *last = now;
            }
            serde_json::to_vec(&*tl).expect("timeline serializes")
        };
        Some(Bytes::from_owner(Held {
            json,
            busy: self.busy.clone(),
        }))
    }

    fn record(&self, (s, cap): (CcSample, Option<u64>)) {
        let mut tl = self.timeline.lock().expect("timeline lock");
        if cap.is_some() {
            tl.cwnd_cap_bytes = cap;
        }
        if tl.samples.len() >= KEPT_SAMPLES {
            let mut i = 0;
            tl.samples.retain(|_| {
                i += 1;
                i % 2 == 1
            });
            tl.interval_us = tl.interval_us.saturating_mul(2);
            self.interval_us.store(tl.interval_us, Ordering::Relaxed);
        }
        tl.push(s);
    }

    /// Samples every interval, or less often while many connections are sampled (see
    /// [`SAMPLES_PER_S`]); the samples' timestamps show the spacing. The count drops when this
    /// telemetry does, not when the sampler next wakes: a closed connection's sampler may
    /// sleep a long wait, and must not stretch everyone else's meanwhile.
    fn spawn_sampler(self: &Arc<Self>, stats: Arc<Stats>) {
        let me = Arc::downgrade(self);
        if self.counted.set(stats.clone()).is_err() {
            return;
        }
        stats.samplers.fetch_add(1, Ordering::Relaxed);
        tokio::spawn(async move {
            while let Some(own) = me.upgrade().map(|t| t.interval_us.load(Ordering::Relaxed)) {
                let wait = budget_wait_us(own, stats.samplers.load(Ordering::Relaxed));
                tokio::time::sleep(Duration::from_micros(wait)).await;
                let Some(t) = me.upgrade() else { break };
                match t.sample() {
                    Some(s) => t.record(s),
                    None => break,
                }
            }
        });
    }

    /// Stops reading the TCP socket: called before its fd is closed.
    pub(crate) fn detach(&self) {
        if let Source::Tcp(fd) = &self.source {
            *fd.lock().expect("fd lock") = -1;
        }
    }
}

fn quic_sample(conn: &quinn::Connection, t_us: u64) -> (CcSample, Option<u64>) {
    let stats = conn.stats();
    let cc = conn.congestion_state();
    let metrics = cc.metrics();
    let inst = cc.into_any().downcast::<Instrumented>().ok();
    let cap = inst.as_ref().and_then(|i| i.cap_bytes());
    let sample = CcSample {
        t_us,
        cwnd_bytes: stats.path.cwnd,
        in_flight_bytes: inst.as_ref().map(|i| i.in_flight),
        ssthresh_bytes: metrics.ssthresh.filter(|&t| t < u64::MAX / 2),
        srtt_us: stats.path.rtt.as_micros() as u64,
        min_rtt_us: Some(stats.path.min_rtt.as_micros() as u64),
        mss_bytes: u64::from(stats.path.current_mtu),
        // quinn counts its lost MTU probes apart; they were packets on the wire all the same.
        lost_packets: stats
            .path
            .lost_packets
            .saturating_add(stats.path.lost_plpmtud_probes),
        retransmitted_packets: None,
        congestion_events: Some(stats.path.congestion_events),
        timeouts: inst.as_ref().map(|i| i.persistent_congestion),
        bytes_sent: stats.udp_tx.bytes,
        pacing_bps: metrics.pacing_rate,
        delivery_bps: None,
        app_limited: inst.as_ref().map(|i| i.app_limited),
        tcp_ca_state: None,
    };
    (sample, cap)
}

pub(crate) fn tcp_info(fd: RawFd) -> Option<libc::tcp_info> {
    // SAFETY: tcp_info is plain data; the kernel fills at most `len` bytes of it.
    unsafe {
        let mut info: libc::tcp_info = std::mem::zeroed();
        let mut len = size_of::<libc::tcp_info>() as libc::socklen_t;
        let rc = libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        );
        (rc == 0).then_some(info)
    }
}

/// The round trip the kernel measured on a just accepted connection: its one sample then is
/// the handshake's (SYN-ACK sent, ACK received). `None` without one (the SYN-ACK was sent
/// again, and Karn's rule leaves it unmeasured).
pub(crate) fn handshake_rtt(fd: RawFd) -> Option<Duration> {
    let i = tcp_info(fd)?;
    (i.tcpi_rtt > 0).then(|| Duration::from_micros(u64::from(i.tcpi_rtt)))
}

fn tcp_sample(fd: RawFd, t_us: u64) -> Option<CcSample> {
    let i = tcp_info(fd)?;
    let mss = u64::from(i.tcpi_snd_mss.max(1));
    // Bytes, not segments x MSS: loopback segments are often far below the 64 KB MSS.
    let in_flight = i
        .tcpi_bytes_sent
        .saturating_sub(i.tcpi_bytes_retrans)
        .saturating_sub(i.tcpi_bytes_acked);
    Some(CcSample {
        t_us,
        cwnd_bytes: u64::from(i.tcpi_snd_cwnd) * mss,
        in_flight_bytes: Some(in_flight),
        ssthresh_bytes: (i.tcpi_snd_ssthresh < TCP_INFINITE_SSTHRESH)
            .then(|| u64::from(i.tcpi_snd_ssthresh) * mss),
        srtt_us: u64::from(i.tcpi_rtt),
        min_rtt_us: Some(u64::from(i.tcpi_min_rtt)),
        mss_bytes: mss,
        // TCP_INFO has no cumulative loss counter; retransmissions stand in for it.
        lost_packets: u64::from(i.tcpi_total_retrans),
        retransmitted_packets: Some(u64::from(i.tcpi_total_retrans)),
        congestion_events: None,
        timeouts: Some(u64::from(i.tcpi_total_rto)),
        bytes_sent: i.tcpi_bytes_sent,
        pacing_bps: Some(i.tcpi_pacing_rate.saturating_mul(8)),
        delivery_bps: Some(i.tcpi_delivery_rate.saturating_mul(8)),
        app_limited: None,
        tcp_ca_state: Some(i.tcpi_ca_state),
    })
}

/// Starts sampling a QUIC connection; `None` when `interval` is zero (telemetry off).
pub fn watch_quic(
    conn: &quinn::Connection,
    sock: Option<Arc<std::net::UdpSocket>>,
    cc: &str,
    cap: Option<u64>,
    interval: Duration,
    stats: &Arc<Stats>,
) -> Option<Arc<ConnTelemetry>> {
    if interval.is_zero() {
        return None;
    }
    let t = ConnTelemetry::new(Source::Quic(conn.clone(), sock), "quic", cc, cap, interval);
    t.spawn_sampler(stats.clone());
    Some(t)
}

/// Starts sampling the TCP socket `fd`; the caller must `detach` before the fd is closed.
pub fn watch_tcp(
    fd: RawFd,
    cc: &str,
    interval: Duration,
    stats: &Arc<Stats>,
) -> Option<Arc<ConnTelemetry>> {
    if interval.is_zero() {
        return None;
    }
    let t = ConnTelemetry::new(Source::Tcp(Mutex::new(fd)), "tcp", cc, None, interval);
    t.spawn_sampler(stats.clone());
    Some(t)
}

/// Releases the connection's telemetry for the next request once the last reference to the
/// body's bytes is gone, wherever the transport buffered them.
struct Held {
    json: Vec<u8>,
    busy: Arc<AtomicBool>,
}

impl AsRef<[u8]> for Held {
    fn as_ref(&self) -> &[u8] {
        &self.json
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.busy.store(false, Ordering::Release);
    }
}

impl crate::truth::Sender for ConnTelemetry {
    fn timeline(&self) -> Option<Bytes> {
        self.body()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn closed_tcp() -> Arc<ConnTelemetry> {
        let source = Source::Tcp(Mutex::new(-1));
        ConnTelemetry::new(source, "tcp", "cubic", None, Duration::from_millis(10))
    }

    fn sample(t_us: u64) -> (CcSample, Option<u64>) {
        let s = CcSample {
            t_us,
            ..CcSample::default()
        };
        (s, None)
    }

    #[test]
    fn a_long_connection_keeps_a_bounded_thinned_timeline() {
        let t = closed_tcp();
        // Fed as the sampler feeds it: one sample per current interval.
        let mut now = 0;
        for _ in 0..4 * KEPT_SAMPLES {
            t.record(sample(now));
            now += t.interval_us.load(Ordering::Relaxed);
        }
        let tl = t.timeline.lock().unwrap();
        assert!(tl.samples.len() <= KEPT_SAMPLES, "{}", tl.samples.len());
        assert!(tl.samples.len() > KEPT_SAMPLES / 2, "{}", tl.samples.len());
        let factor = tl.interval_us / 10_000;
        assert!(factor > 1 && factor.is_power_of_two(), "{}", tl.interval_us);
        assert_eq!(t.interval_us.load(Ordering::Relaxed), tl.interval_us);
        assert_eq!(tl.samples[0].t_us, 0, "the start is kept");
        assert!(tl.samples.windows(2).all(|w| w[0].t_us < w[1].t_us));
        let last = tl.samples.last().unwrap().t_us;
        assert!(now - last <= 2 * tl.interval_us, "the end is kept");
    }

    #[test]
    fn many_samplers_share_a_budget() {
        assert_eq!(budget_wait_us(10_000, 1), 10_000);
        assert_eq!(
            budget_wait_us(10_000, 200),
            10_000,
            "200 at 10 ms is the budget"
        );
        assert_eq!(budget_wait_us(10_000, 201), 10_050);
        assert_eq!(budget_wait_us(10_000, 10_000), 500_000);
        assert_eq!(budget_wait_us(0, usize::MAX), u64::MAX / SAMPLES_PER_S);
    }

    /// A sampler counts while its connection's telemetry lives, however long it sleeps.
    #[tokio::test(start_paused = true)]
    async fn the_count_drops_with_the_telemetry_not_with_the_sampler() {
        let stats = Arc::new(Stats::default());
        let (a, b) = (closed_tcp(), closed_tcp());
        a.spawn_sampler(stats.clone());
        a.spawn_sampler(stats.clone());
        b.spawn_sampler(stats.clone());
        assert_eq!(
            stats.samplers.load(Ordering::Relaxed),
            2,
            "one per connection"
        );
        drop(a);
        assert_eq!(
            stats.samplers.load(Ordering::Relaxed),
            1,
            "before its sampler wakes"
        );
        drop(b);
        assert_eq!(stats.samplers.load(Ordering::Relaxed), 0);
        // The sleeping samplers then find their telemetry gone and end.
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(stats.samplers.load(Ordering::Relaxed), 0);
    }

    proptest::proptest! {
        #[test]
        fn the_budget_never_shortens_the_interval(own in 0u64..u64::MAX / 2, n in 0usize..1_000_000) {
            let w = budget_wait_us(own, n);
            proptest::prop_assert!(w >= own);
            proptest::prop_assert!(w <= own.max(n as u64 * 1_000_000 / SAMPLES_PER_S));
            proptest::prop_assert!(n as u64 * 1_000_000 / w.max(1) <= SAMPLES_PER_S || w == own);
        }
    }

    #[test]
    fn one_body_exists_at_a_time() {
        let t = closed_tcp();
        t.record(sample(1));
        let first = t.body().expect("the first body");
        assert!(t.body().is_none(), "a second while the first lives");
        let slice = first.slice(1..);
        drop(first);
        assert!(t.body().is_none(), "a slice still holds it");
        drop(slice);
        let again = t.body().expect("free again");
        let tl: Timeline = serde_json::from_slice(&again).unwrap();
        assert_eq!(tl.samples.len(), 1);
    }
}
