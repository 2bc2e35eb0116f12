//! Measuring a link just built, before anything runs over it: an echo probe of a known count
//! of small packets from the client namespace to the server's and back (round trips, loss and
//! reordering each way), then a UDP flow each way offered faster than a fixed rate (the rate
//! that arrives). Sockets are made inside the namespaces and used from ordinary threads, so
//! nothing here changes the calling thread's namespace.

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use qbench_core::report::calibration::{
    judge, Calibration, DirectionMeasured, Flood, RttSummary, TraceSpan, L2_OVERHEAD,
};
use qbench_core::report::link::Names;
use qbench_core::spec::delivery_trace::Delivery;
use qbench_core::spec::link::{Direction, LinkSpec, RateSpec};

use crate::netns::{self, NetnsError};
use crate::rate::loop_clock;
use crate::stop::Stop;

#[derive(Debug, thiserror::Error)]
pub enum CalibrateError {
    #[error(transparent)]
    Netns(#[from] NetnsError),
    #[error("calibrating the link: {what}: {source}")]
    Socket {
        what: &'static str,
        source: std::io::Error,
    },
    #[error("stopped by a signal while {0}")]
    Stopped(&'static str),
}

fn io(what: &'static str) -> impl FnOnce(std::io::Error) -> CalibrateError {
    move |source| CalibrateError::Socket { what, source }
}

/// Echo-probe packets: enough that a 1% loss is told from 0% or 3% at 99% confidence.
pub const PROBE_PACKETS: u64 = 1000;
/// The probe never takes more than this long to send, however slow the link (fewer packets
/// then, down to [`MIN_PROBE_PACKETS`]).
pub const PROBE_TIME: Duration = Duration::from_secs(2);
pub const MIN_PROBE_PACKETS: u64 = 200;
/// Not even that many when the link is so slow that they would take longer than this (at
/// 8 kbit/s, 23 packets).
pub const MAX_PROBE_TIME: Duration = Duration::from_secs(10);
/// Share of the slowest fixed rate the probe may use, so that it never queues behind itself.
const PROBE_SHARE: f64 = 0.25;
const PROBE_BYTES: usize = 64;
const PROBE_GAP_MIN: Duration = Duration::from_micros(500);

/// Each direction's saturating flow lasts this long; its first quarter is not measured.
pub const FLOOD_TIME: Duration = Duration::from_millis(600);
/// Slow rates flood longer, so that this many packets arrive to be timed (up to
/// [`MAX_FLOOD_TIME`]); rates too slow for that in the time are not flooded.
const FLOOD_PACKETS: f64 = 50.0;
pub const MAX_FLOOD_TIME: Duration = Duration::from_secs(6);
/// How much faster than the asked rate the flow is offered (after the asked loss).
const OVERDRIVE: f64 = 1.25;

/// How long a receiver waits for stragglers: at least this, plus the direction's delay.
const IDLE: Duration = Duration::from_millis(250);
const POLL: Duration = Duration::from_millis(20);

pub(crate) fn udp_in(ns: &str, ip: &str) -> Result<UdpSocket, CalibrateError> {
    let ns = ns.to_string();
    let addr: SocketAddr = format!("{ip}:0")
        .parse()
        .map_err(|_| CalibrateError::Socket {
            what: "an address",
            source: std::io::Error::other(format!("`{ip}` is not an IPv4 address")),
        })?;
    // Threads may enter another namespace; the socket stays in the one it was made in.
    std::thread::spawn(move || -> Result<UdpSocket, CalibrateError> {
        netns::enter(&ns)?;
        let s = UdpSocket::bind(addr).map_err(io("binding a UDP socket"))?;
        s.set_read_timeout(Some(POLL))
            .map_err(io("a read timeout"))?;
        Ok(s)
    })
    .join()
    .map_err(|_| CalibrateError::Socket {
        what: "a namespace thread",
        source: std::io::Error::other("panicked"),
    })?
}

/// Linux's UDP segmentation offload and receive coalescing (linux/udp.h; the libc crate
/// defines them only for some targets).
const UDP_SEGMENT: libc::c_int = 103;
const UDP_GRO: libc::c_int = 104;
/// Datagrams per send with UDP_SEGMENT: one thread offers about ten times what it does with
/// one datagram per call.
const SEGMENTS: u64 = 32;

fn set_int(s: &UdpSocket, level: libc::c_int, opt: libc::c_int, value: libc::c_int) -> bool {
    use std::os::fd::AsRawFd;
    // SAFETY: a valid socket and a c_int option value of the right length.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            level,
            opt,
            (&value as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        ) == 0
    }
}

/// Buffers large enough that the sockets, not the link, are never what drops.
fn big_buffers(s: &UdpSocket) {
    for opt in [libc::SO_RCVBUFFORCE, libc::SO_SNDBUFFORCE] {
        set_int(s, libc::SOL_SOCKET, opt, 32 << 20);
    }
}

/// The rate a direction can be counted on: a fixed rate, a random range's minimum, a step
/// trace's slowest step, a delivery trace's mean (its outages are what it is; the probe must
/// not add a queue of its own on average).
fn usable_rate(d: &Direction) -> Option<f64> {
    let read = |path: &str| crate::rate::read_trace(path).ok();
    match d.rate.as_ref()? {
        RateSpec::Fixed { bps } => Some(bps.0 as f64),
        RateSpec::Random { min, .. } => Some(min.0 as f64),
        RateSpec::Trace { path } => read(path)
            .and_then(|t| qbench_core::spec::link::parse_trace(&t).ok())
            .and_then(|steps| steps.iter().map(|(_, r)| r.0 as f64).reduce(f64::min)),
        RateSpec::Mahimahi { path } => read(path)
            .and_then(|t| qbench_core::spec::delivery_trace::parse_mahimahi(&t).ok())
            .map(|d| d.mean().0 as f64),
    }
}

fn slowest_rate(spec: &LinkSpec) -> Option<f64> {
    spec.directions()
        .iter()
        .filter_map(|(_, d)| usable_rate(d))
        .reduce(f64::min)
}

pub(crate) fn one_way(d: &Direction) -> Duration {
    d.delay + d.jitter
}

/// Counts a stream of sequence numbers: how many, and how many came after a later one.
#[derive(Default)]
struct Arrivals {
    count: u64,
    reordered: u64,
    highest: Option<u64>,
}

impl Arrivals {
    fn see(&mut self, seq: u64) {
        self.count += 1;
        match self.highest {
            Some(h) if seq < h => self.reordered += 1,
            _ => self.highest = Some(seq),
        }
    }
}

fn word(buf: &[u8], at: usize) -> u64 {
    buf.get(at..at + 8)
        .and_then(|b| b.try_into().ok())
        .map(u64::from_be_bytes)
        .unwrap_or(0)
}

struct Probe {
    rtt: RttSummary,
    up: DirectionMeasured,
    down: DirectionMeasured,
}

/// The two ends of a measuring flow: a receiver in `to`'s namespace and a sender in `from`'s,
/// connected to it. `what` names, in errors, the receiver's address and the connecting.
fn connected_pair(
    (to, to_ip): (&str, &str),
    (from, from_ip): (&str, &str),
    what: [&'static str; 2],
) -> Result<(UdpSocket, UdpSocket), CalibrateError> {
    let rx = udp_in(to, to_ip)?;
    let tx = udp_in(from, from_ip)?;
    // A thread held off the CPU for a moment must not turn a queue into counted losses.
    big_buffers(&rx);
    big_buffers(&tx);
    tx.connect(rx.local_addr().map_err(io(what[0]))?)
        .map_err(io(what[1]))?;
    Ok((rx, tx))
}

fn echo_probe(names: &Names, spec: &LinkSpec, halt: &Stop) -> Result<Probe, CalibrateError> {
    let (server, client) = connected_pair(
        (names.server.as_str(), &names.server_addr()),
        (names.client.as_str(), &names.client_addr()),
        ["the echo address", "connecting the probe"],
    )?;
    let (gap, count) = probe_pace(spec);
    let stop = Arc::new(AtomicBool::new(false));
    let base = Instant::now();
    let echo = spawn_echo(server, stop.clone());
    let back = client.try_clone().map_err(io("the probe's socket"))?;
    let receiver = spawn_echo_receiver(back, stop.clone(), base);
    let (sent, halted) = send_probes(&client, gap, count, base, halt);
    // Stragglers for a round trip, which on a long link is long: a signal cuts it short.
    let halted = halted || halt.sleep(IDLE + (one_way(&spec.up) + one_way(&spec.down)) * 2);
    stop.store(true, Ordering::Relaxed);
    let (up, echoed) = echo.join().unwrap_or_default();
    let (down, rtts) = receiver.join().unwrap_or_default();
    if halted {
        return Err(CalibrateError::Stopped("the link was being measured"));
    }
    Ok(Probe {
        rtt: RttSummary::of(rtts),
        up: DirectionMeasured {
            probe_sent: sent,
            probe_received: up.count,
            reordered: up.reordered,
            flood: None,
        },
        down: DirectionMeasured {
            probe_sent: echoed,
            probe_received: down.count,
            reordered: down.reordered,
            flood: None,
        },
    })
}

/// The probe's spacing, so that it uses no more than its share of the slowest rate, and its
/// count: as many as fit in [`PROBE_TIME`] within the bounds.
fn probe_pace(spec: &LinkSpec) -> (Duration, u64) {
    let gap = slowest_rate(spec)
        .map(|r| {
            Duration::from_secs_f64(
                (PROBE_BYTES as u32 + L2_OVERHEAD) as f64 * 8.0 / (r * PROBE_SHARE),
            )
        })
        .unwrap_or_default()
        .max(PROBE_GAP_MIN);
    let count = ((PROBE_TIME.as_secs_f64() / gap.as_secs_f64()) as u64)
        .clamp(MIN_PROBE_PACKETS, PROBE_PACKETS)
        .min(((MAX_PROBE_TIME.as_secs_f64() / gap.as_secs_f64()) as u64).max(1));
    (gap, count)
}

/// The server's end until `stop`: sends each probe back as it came, counting what came up and
/// how many it echoed.
fn spawn_echo(server: UdpSocket, stop: Arc<AtomicBool>) -> JoinHandle<(Arrivals, u64)> {
    std::thread::spawn(move || {
        let (mut up, mut echoed) = (Arrivals::default(), 0u64);
        let mut buf = [0u8; 2048];
        while !stop.load(Ordering::Relaxed) {
            if let Ok((n, from)) = server.recv_from(&mut buf) {
                up.see(word(&buf[..n], 0));
                if server.send_to(&buf[..n], from).is_ok() {
                    echoed += 1;
                }
            }
        }
        (up, echoed)
    })
}

/// The client's receiving end until `stop`: counts the echoes that came down and times each
/// one's round trip from the send time it carries (microseconds since `base`).
fn spawn_echo_receiver(
    back: UdpSocket,
    stop: Arc<AtomicBool>,
    base: Instant,
) -> JoinHandle<(Arrivals, Vec<u64>)> {
    std::thread::spawn(move || {
        let (mut down, mut rtts) = (Arrivals::default(), Vec::new());
        let mut buf = [0u8; 2048];
        while !stop.load(Ordering::Relaxed) {
            if let Ok(n) = back.recv(&mut buf) {
                let now = base.elapsed().as_micros() as u64;
                down.see(word(&buf[..n], 0));
                rtts.push(now.saturating_sub(word(&buf[..n], 8)));
            }
        }
        (down, rtts)
    })
}

/// Sends `count` probes `gap` apart, each with its sequence number and its send time
/// (microseconds since `base`): how many were sent, and whether `halt` cut the sending short.
fn send_probes(
    client: &UdpSocket,
    gap: Duration,
    count: u64,
    base: Instant,
    halt: &Stop,
) -> (u64, bool) {
    let mut sent = 0u64;
    let mut packet = [0u8; PROBE_BYTES];
    let start = Instant::now();
    for seq in 0..count {
        let due = start + gap.mul_f64(seq as f64);
        let wait = due
            .checked_duration_since(Instant::now())
            .unwrap_or_default();
        if halt.sleep(wait) {
            return (sent, true);
        }
        packet[..8].copy_from_slice(&seq.to_be_bytes());
        packet[8..16].copy_from_slice(&(base.elapsed().as_micros() as u64).to_be_bytes());
        if client.send(&packet).is_ok() {
            sent += 1;
        }
    }
    (sent, false)
}

/// How long a flow at `rate` lasts, or `None` when too few packets would arrive to time.
fn flood_time_for(rate: f64, wire: u32) -> Option<Duration> {
    let need = Duration::from_secs_f64(FLOOD_PACKETS * f64::from(wire) * 8.0 / rate);
    (need <= MAX_FLOOD_TIME).then(|| need.max(FLOOD_TIME))
}

fn flood_time(rate: f64, wire: u32) -> Duration {
    flood_time_for(rate, wire).unwrap_or(MAX_FLOOD_TIME)
}

/// What a direction's flood is measured against: a fixed rate, or a delivery trace.
enum Target {
    Fixed(f64),
    Trace(Box<Delivery>),
}

impl Target {
    /// The direction's target, or `None` when nothing is flooded: a rate too slow to time in
    /// the longest flood, or one that varies other than by a delivery trace.
    fn of(d: &Direction, mtu: u32) -> Option<Self> {
        let t = match d.rate.as_ref()? {
            RateSpec::Fixed { bps } => Self::Fixed(bps.0 as f64),
            RateSpec::Mahimahi { path } => {
                Self::Trace(Box::new(crate::rate::read_trace(path).ok().and_then(
                    |t| qbench_core::spec::delivery_trace::parse_mahimahi(&t).ok(),
                )?))
            }
            _ => return None,
        };
        flood_time_for(t.mean(), mtu + 14).is_some().then_some(t)
    }

    fn mean(&self) -> f64 {
        match self {
            Self::Fixed(bps) => *bps,
            Self::Trace(d) => d.mean().0 as f64,
        }
    }

    /// What a delivery trace should have carried over `from..to`, the span a flood's rate was
    /// timed over (on the trace's loop clock); `None` for a fixed rate or an empty span.
    fn span(&self, from: Duration, to: Duration) -> Option<TraceSpan> {
        match self {
            Self::Trace(d) if to > from => Some(TraceSpan {
                mean_bps: d.mean().0,
                expected_bps: (d.bits_between(from, to) / (to - from).as_secs_f64()) as u64,
                span_us: (to - from).as_micros() as u64,
            }),
            _ => None,
        }
    }

    /// What the flow is offered at before the overdrive: a trace's fastest step, so that its
    /// queue never empties.
    fn offered(&self) -> f64 {
        match self {
            Self::Fixed(bps) => *bps,
            Self::Trace(d) => d.peak().0 as f64,
        }
    }
}

/// A flow from `from` to `to` offered at `OVERDRIVE` times the target's rate (as fast as one
/// thread sends, if that is less), and what arrived.
fn flood(
    (from, from_ip): (&str, String),
    (to, to_ip): (&str, String),
    d: &Direction,
    target: &Target,
    mtu: u32,
    halt: &Stop,
) -> Result<Flood, CalibrateError> {
    let (rx, tx) = connected_pair(
        (to, &to_ip),
        (from, &from_ip),
        ["the flow's address", "connecting the flow"],
    )?;
    let wire = mtu + 14;
    let payload = mtu.saturating_sub(28).max(1) as usize;
    let batch = segmentation(&tx, &rx, payload);
    let pps = target.offered() * OVERDRIVE / (1.0 - d.loss).max(0.01) / (f64::from(wire) * 8.0);
    let done = Arc::new(AtomicBool::new(false));
    let shape = FlowShape {
        payload,
        wire,
        time: flood_time(target.mean(), wire),
        idle: IDLE + one_way(d),
    };
    let receiver = spawn_flood_receiver(rx, shape, done.clone(), halt.clone());
    let (sent, elapsed) = send_flood(&tx, shape, batch, pps, halt);
    done.store(true, Ordering::Relaxed);
    let (received, received_bps, (from, to)) = receiver.join().unwrap_or_default();
    if halt.now() {
        return Err(CalibrateError::Stopped("the link was being measured"));
    }
    Ok(Flood {
        packet_bytes: wire,
        sent_packets: sent,
        sent_bps: (sent as f64 * f64::from(wire) * 8.0 / elapsed) as u64,
        received_packets: received,
        received_bps,
        trace: target.span(from, to),
    })
}

/// Datagrams per send: [`SEGMENTS`] with UDP segmentation offload, and receive coalescing on.
/// Kernels without them send and receive one datagram per call, as counted anyway.
fn segmentation(tx: &UdpSocket, rx: &UdpSocket, payload: usize) -> u64 {
    let batch = if set_int(tx, libc::SOL_UDP, UDP_SEGMENT, payload as libc::c_int) {
        SEGMENTS.min(65_000 / payload as u64).max(1)
    } else {
        1
    };
    set_int(rx, libc::SOL_UDP, UDP_GRO, 1);
    batch
}

/// A flood's datagrams and timing, as its sender and receiver share them.
#[derive(Clone, Copy)]
struct FlowShape {
    /// UDP payload bytes of each datagram.
    payload: usize,
    /// Bytes each datagram takes on the wire, as the rate is counted.
    wire: u32,
    /// How long the flow is offered.
    time: Duration,
    /// How long the receiver waits for stragglers once the sender is done.
    idle: Duration,
}

/// The flow's receiver: counts arrivals until the sender is done and the link has gone quiet
/// (or `halt`), then gives the count, the rate that arrived and the span it was timed over.
fn spawn_flood_receiver(
    rx: UdpSocket,
    shape: FlowShape,
    done: Arc<AtomicBool>,
    halt: Stop,
) -> JoinHandle<(u64, u64, (Duration, Duration))> {
    // Arrivals are timed by the kernel (`crate::stamp`), on the realtime clock; a delivery
    // trace's loop runs on the monotonic one, this far behind.
    // A kernel that refuses the stamps leaves each arrival timed when its read returns.
    let _ = crate::stamp::enable(&rx);
    let loop_offset = crate::stamp::realtime().saturating_sub(loop_clock());
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 65536];
        let (mut count, mut first, mut last) = (0u64, None::<Duration>, None::<Duration>);
        let mut from_quarter = None::<(Duration, u64)>;
        let mut seen = None::<Instant>;
        loop {
            if done.load(Ordering::Relaxed) && halt.now() {
                break;
            }
            match crate::stamp::recv(&rx, &mut buf) {
                Ok((n, stamp)) => {
                    seen = Some(Instant::now());
                    let at = stamp.unwrap_or_else(crate::stamp::realtime);
                    // A coalesced read holds several of the flow's equal datagrams.
                    count += n.div_ceil(shape.payload).max(1) as u64;
                    let f = *first.get_or_insert(at);
                    if from_quarter.is_none() && at >= f + shape.time / 4 {
                        from_quarter = Some((at, count));
                    }
                    last = Some(at.max(last.unwrap_or(at)));
                }
                Err(_) => {
                    let quiet = seen.is_none_or(|l| l.elapsed() >= shape.idle);
                    if done.load(Ordering::Relaxed) && quiet {
                        break;
                    }
                }
            }
        }
        let (bps, span) = arrived_rate(count, from_quarter, last, shape.wire, loop_offset);
        (count, bps, span)
    })
}

/// The rate that arrived from the end of the flow's first quarter (`from_quarter`: when, and
/// the count by then) to its last arrival, and that span on the delivery trace's loop clock.
fn arrived_rate(
    count: u64,
    from_quarter: Option<(Duration, u64)>,
    last: Option<Duration>,
    wire: u32,
    loop_offset: Duration,
) -> (u64, (Duration, Duration)) {
    match (from_quarter, last) {
        (Some((t0, c0)), Some(t1)) if t1 > t0 => (
            ((count - c0) as f64 * f64::from(wire) * 8.0 / (t1 - t0).as_secs_f64()) as u64,
            (
                t0.saturating_sub(loop_offset),
                t1.saturating_sub(loop_offset),
            ),
        ),
        _ => (0, (Duration::ZERO, Duration::ZERO)),
    }
}

/// Offers the flow at `pps` for its time (until `halt`), up to `batch` datagrams a send: how
/// many were sent, and over how many seconds.
fn send_flood(tx: &UdpSocket, shape: FlowShape, batch: u64, pps: f64, halt: &Stop) -> (u64, f64) {
    let payload = shape.payload;
    let packet = vec![0u8; payload * batch as usize];
    let start = Instant::now();
    let mut sent = 0u64;
    while start.elapsed() < shape.time && !halt.now() {
        let due = (start.elapsed().as_secs_f64() * pps) as u64;
        if sent >= due {
            std::thread::sleep(Duration::from_micros(200));
            continue;
        }
        let k = (due - sent).min(batch);
        // A full socket buffer (ENOBUFS) is the sender's limit, not a loss: try again.
        if tx.send(&packet[..payload * k as usize]).is_ok() {
            sent += k;
        }
    }
    (sent, start.elapsed().as_secs_f64())
}
/// Measures the link between `names`' namespaces, built from `spec`, and judges it.
pub fn calibrate(names: &Names, spec: &LinkSpec) -> Result<Calibration, CalibrateError> {
    calibrate_until(names, spec, &Stop::default())
}

/// [`calibrate`], giving up (`CalibrateError::Stopped`) within a poll of `halt` saying so.
pub fn calibrate_until(
    names: &Names,
    spec: &LinkSpec,
    halt: &Stop,
) -> Result<Calibration, CalibrateError> {
    let began = Instant::now();
    let mut probe = echo_probe(names, spec, halt)?;
    let mtu = spec.mtu.unwrap_or(1500);
    let ends = [
        (names.client.as_str(), names.client_addr()),
        (names.server.as_str(), names.server_addr()),
    ];
    if let Some(t) = Target::of(&spec.up, mtu) {
        probe.up.flood = Some(flood(
            ends[0].clone(),
            ends[1].clone(),
            &spec.up,
            &t,
            mtu,
            halt,
        )?);
    }
    if let Some(t) = Target::of(&spec.down, mtu) {
        probe.down.flood = Some(flood(
            ends[1].clone(),
            ends[0].clone(),
            &spec.down,
            &t,
            mtu,
            halt,
        )?);
    }
    let checks = judge(spec, &probe.up, &probe.down, &probe.rtt);
    Ok(Calibration {
        rtt: probe.rtt,
        up: probe.up,
        down: probe.down,
        checks,
        elapsed_ms: began.elapsed().as_millis() as u64,
    })
}
