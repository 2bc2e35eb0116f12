//! Per-connection sender telemetry: a task samples the congestion controller every interval
//! (quinn's stats and our controller wrapper, or the kernel's TCP_INFO) and keeps a timeline
//! the client fetches with `GET /_qbench/telemetry` over the same connection.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use qbench_core::telemetry::{CcSample, Timeline};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use crate::cc::Instrumented;

/// TCP reports an unset ssthresh as this many segments.
const TCP_INFINITE_SSTHRESH: u32 = 0x7fff_ffff;

enum Source {
    Quic(quinn::Connection),
    /// The raw fd while the socket is open; -1 once `Tracked` is dropped.
    Tcp(Mutex<RawFd>),
}

pub struct ConnTelemetry {
    source: Source,
    started: Instant,
    timeline: Mutex<Timeline>,
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
            started: Instant::now(),
            timeline: Mutex::new(Timeline {
                transport: transport.into(),
                cc: cc.into(),
                cwnd_cap_bytes: cap,
                interval_us: interval.as_micros() as u64,
                samples: Vec::new(),
                truncated: false,
            }),
        })
    }

    /// A sample and, for QUIC, the cap in bytes at the current MTU.
    fn sample(&self) -> Option<(CcSample, Option<u64>)> {
        let t_us = self.started.elapsed().as_micros() as u64;
        match &self.source {
            Source::Quic(conn) => conn
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

    /// Takes one more sample, then returns everything so far.
    pub fn snapshot(&self) -> Timeline {
        if let Some(s) = self.sample() {
            self.record(s);
        }
        self.timeline.lock().expect("timeline lock").clone()
    }

    fn record(&self, (s, cap): (CcSample, Option<u64>)) {
        let mut tl = self.timeline.lock().expect("timeline lock");
        if cap.is_some() {
            tl.cwnd_cap_bytes = cap;
        }
        tl.push(s);
    }

    fn spawn_sampler(self: &Arc<Self>, interval: Duration) {
        let me = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            loop {
                tick.tick().await;
                let Some(t) = me.upgrade() else { return };
                match t.sample() {
                    Some(s) => t.record(s),
                    None => return,
                }
            }
        });
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
        lost_packets: stats.path.lost_packets,
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

fn tcp_info(fd: RawFd) -> Option<libc::tcp_info> {
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
    cc: &str,
    cap: Option<u64>,
    interval: Duration,
) -> Option<Arc<ConnTelemetry>> {
    if interval.is_zero() {
        return None;
    }
    let t = ConnTelemetry::new(Source::Quic(conn.clone()), "quic", cc, cap, interval);
    t.spawn_sampler(interval);
    Some(t)
}

/// A TCP stream whose telemetry stops reading the fd before the fd is closed.
pub struct Tracked {
    telemetry: Option<Arc<ConnTelemetry>>,
    inner: TcpStream,
}

impl Drop for Tracked {
    fn drop(&mut self) {
        if let Some(t) = &self.telemetry {
            if let Source::Tcp(fd) = &t.source {
                *fd.lock().expect("fd lock") = -1;
            }
        }
    }
}

impl Tracked {
    pub fn telemetry(&self) -> Option<Arc<ConnTelemetry>> {
        self.telemetry.clone()
    }
}

/// Starts sampling a TCP connection (unless `interval` is zero) and wraps its stream.
pub fn watch_tcp(stream: TcpStream, cc: &str, cap: Option<u64>, interval: Duration) -> Tracked {
    let telemetry = (!interval.is_zero()).then(|| {
        let fd = Mutex::new(stream.as_raw_fd());
        let t = ConnTelemetry::new(Source::Tcp(fd), "tcp", cc, cap, interval);
        t.spawn_sampler(interval);
        t
    });
    Tracked {
        telemetry,
        inner: stream,
    }
}

impl AsyncRead for Tracked {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Tracked {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// The JSON body of `GET /_qbench/telemetry`.
pub fn body(t: Option<&Arc<ConnTelemetry>>) -> Option<bytes::Bytes> {
    t.map(|t| bytes::Bytes::from(serde_json::to_vec(&t.snapshot()).expect("timeline serializes")))
}
