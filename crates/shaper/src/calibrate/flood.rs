//! Each direction's rate, measured: a UDP flow offered faster than the rate (after the
//! direction's loss) for a fixed time, and the rate that arrived after its first quarter,
//! timed by the kernel's receive stamps. A flood whose rate misses its check is repeated.

use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use qbench_core::report::calibration::{flood_check, Flood, FloodAttempt, TraceSpan};
use qbench_core::spec::delivery_trace::Delivery;
use qbench_core::spec::link::{Direction, RateSpec};

use super::sockets::{connected_pair, one_way, set_int, CalibrateError, IDLE};
use crate::rate::loop_clock;
use crate::stop::Stop;

/// Each direction's saturating flow lasts this long; its first quarter is not measured.
pub const FLOOD_TIME: Duration = Duration::from_millis(600);
/// Slow rates flood longer, so that this many packets arrive to be timed (up to
/// [`MAX_FLOOD_TIME`]); rates too slow for that in the time are not flooded.
const FLOOD_PACKETS: f64 = 50.0;
pub const MAX_FLOOD_TIME: Duration = Duration::from_secs(6);
/// How much faster than the asked rate the flow is offered (after the asked loss).
const OVERDRIVE: f64 = 1.25;

/// Linux's UDP segmentation offload and receive coalescing (linux/udp.h; the libc crate
/// defines them only for some targets).
const UDP_SEGMENT: libc::c_int = 103;
const UDP_GRO: libc::c_int = 104;
/// Datagrams per send with UDP_SEGMENT: one thread offers about ten times what it does with
/// one datagram per call.
const SEGMENTS: u64 = 32;

/// How long a flow at `rate` lasts, or `None` when too few packets would arrive to time.
fn flood_time_for(rate: f64, wire: u32) -> Option<Duration> {
    let need = Duration::from_secs_f64(FLOOD_PACKETS * f64::from(wire) * 8.0 / rate);
    (need <= MAX_FLOOD_TIME).then(|| need.max(FLOOD_TIME))
}

fn flood_time(rate: f64, wire: u32) -> Duration {
    flood_time_for(rate, wire).unwrap_or(MAX_FLOOD_TIME)
}

/// What a direction's flood is measured against: a fixed rate, or a delivery trace.
pub(super) enum Target {
    Fixed(f64),
    Trace(Box<Delivery>),
}

impl Target {
    /// The direction's target, or `None` when nothing is flooded: a rate too slow to time in
    /// the longest flood, or one that varies other than by a delivery trace.
    pub(super) fn of(d: &Direction, mtu: u32) -> Option<Self> {
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

/// A direction's flood, repeated while its rate misses the check (at most
/// `FLOOD_ATTEMPTS` floods): a pause of a busy machine's spoils one flood, a wrong link
/// misses each. The last flood is kept with what the earlier ones measured.
pub(super) fn measured_flood(
    from: (&str, String),
    to: (&str, String),
    (dir, d): (&str, &Direction),
    target: &Target,
    mtu: u32,
    halt: &Stop,
) -> Result<Flood, CalibrateError> {
    repeat_while_missed(dir, d, offered_bps(target, d), || {
        flood(from.clone(), to.clone(), d, target, mtu, halt)
    })
}

/// Floods from `next` until one meets its check or is not worth repeating.
fn repeat_while_missed(
    dir: &str,
    d: &Direction,
    offered_bps: f64,
    mut next: impl FnMut() -> Result<Flood, CalibrateError>,
) -> Result<Flood, CalibrateError> {
    let mut missed = Vec::new();
    loop {
        let mut f = next()?;
        f.missed_before = std::mem::take(&mut missed);
        let met = flood_check(dir, d, &f).is_none_or(|c| c.ok);
        if met || !f.worth_repeating(offered_bps) {
            return Ok(f);
        }
        missed = std::mem::take(&mut f.missed_before);
        missed.push(FloodAttempt {
            sent_bps: f.sent_bps,
            received_bps: f.received_bps,
        });
    }
}

/// What a flood offers, in bits per second on the wire: the target's rate, overdriven and
/// raised by the direction's loss so that the rate still arrives full.
fn offered_bps(target: &Target, d: &Direction) -> f64 {
    target.offered() * OVERDRIVE / (1.0 - d.loss).max(0.01)
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
    let pps = offered_bps(target, d) / (f64::from(wire) * 8.0);
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
        missed_before: Vec::new(),
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

#[cfg(test)]
mod tests {
    use super::*;
    use qbench_core::report::calibration::FLOOD_ATTEMPTS;
    use qbench_core::units::Rate;

    fn fixed(bps: u64) -> Direction {
        Direction {
            rate: Some(RateSpec::Fixed { bps: Rate(bps) }),
            ..Direction::default()
        }
    }

    fn arrived(sent_bps: u64, received_bps: u64) -> Flood {
        Flood {
            packet_bytes: 1514,
            sent_bps,
            received_bps,
            ..Flood::default()
        }
    }

    /// Runs the repeat over scripted floods: the flood kept and how many were taken.
    fn over(d: &Direction, script: &[(u64, u64)]) -> (Flood, usize) {
        let mut taken = 0;
        let f = repeat_while_missed("down", d, 25e6, || {
            taken += 1;
            Ok(arrived(script[taken - 1].0, script[taken - 1].1))
        })
        .unwrap();
        (f, taken)
    }

    #[test]
    fn a_flood_that_meets_its_rate_is_not_repeated() {
        let (f, n) = over(&fixed(20_000_000), &[(25_000_000, 19_900_000)]);
        assert_eq!((n, f.missed_before.len()), (1, 0));
    }

    #[test]
    fn a_missed_flood_is_repeated_and_the_misses_are_kept_in_order() {
        let script = [
            (25_000_000, 18_700_000),
            (24_000_000, 18_000_000),
            (25_000_000, 20_100_000),
        ];
        let (f, n) = over(&fixed(20_000_000), &script);
        assert_eq!(n, 3);
        assert_eq!(f.received_bps, 20_100_000);
        let rates: Vec<u64> = f.missed_before.iter().map(|a| a.received_bps).collect();
        assert_eq!(rates, [18_700_000, 18_000_000]);
    }

    #[test]
    fn a_link_that_misses_every_time_stands_missed_after_the_last_flood() {
        let (f, n) = over(&fixed(20_000_000), &[(25_000_000, 23_400_000); 5]);
        assert_eq!(n, FLOOD_ATTEMPTS);
        assert_eq!(f.missed_before.len(), FLOOD_ATTEMPTS - 1);
        let c = flood_check("down", &fixed(20_000_000), &f).unwrap();
        assert!(!c.ok);
        assert!(c.note.unwrap().contains("missed in all 3 floods"));
    }

    #[test]
    fn a_sender_far_below_the_rate_is_not_repeated() {
        // The machine offered 10 of the 25 Mbit/s wanted: a repeat would not lift it.
        let (f, n) = over(&fixed(20_000_000), &[(10_000_000, 9_900_000); 3]);
        assert_eq!((n, f.missed_before.len()), (1, 0));
    }

    #[test]
    fn a_rate_no_flood_checks_is_taken_as_it_came() {
        let d = Direction {
            rate: Some(RateSpec::Random {
                min: Rate(1_000_000),
                max: Rate(2_000_000),
                period: Duration::from_secs(1),
            }),
            ..Direction::default()
        };
        let (_, n) = over(&d, &[(1, 1); 3]);
        assert_eq!(n, 1);
    }
}
