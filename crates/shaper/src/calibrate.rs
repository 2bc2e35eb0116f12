//! Measuring a link just built, before anything runs over it: an echo probe of a known count
//! of small packets from the client namespace to the server's and back (round trips, loss and
//! reordering each way), then a UDP flow each way offered faster than a fixed rate (the rate
//! that arrives). Sockets are made inside the namespaces and used from ordinary threads, so
//! nothing here changes the calling thread's namespace.

mod flood;
mod sockets;

use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use qbench_core::report::calibration::{
    judge, Calibration, DirectionMeasured, RttSummary, L2_OVERHEAD,
};
use qbench_core::report::link::Names;
use qbench_core::spec::link::{Direction, LinkSpec, RateSpec};

use crate::stop::Stop;
use flood::{measured_flood, Target};
pub use flood::{FLOOD_TIME, MAX_FLOOD_TIME};
pub use sockets::CalibrateError;
use sockets::{connected_pair, io, IDLE};
pub(crate) use sockets::{one_way, udp_in};

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
        probe.up.flood = Some(measured_flood(
            ends[0].clone(),
            ends[1].clone(),
            ("up", &spec.up),
            &t,
            mtu,
            halt,
        )?);
    }
    if let Some(t) = Target::of(&spec.down, mtu) {
        probe.down.flood = Some(measured_flood(
            ends[1].clone(),
            ends[0].clone(),
            ("down", &spec.down),
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
