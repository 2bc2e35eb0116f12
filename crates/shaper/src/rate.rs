//! Variable bandwidth: one long-lived `tc -batch -` in the router namespace receives a new htb
//! class rate for each direction every period (random in a range) or at each step of a trace
//! file (`qdisc::htb` says why htb and not tbf).

use std::io::Write;
use std::os::unix::process::CommandExt as _;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use qbench_core::spec::delivery_trace::parse_mahimahi;
use qbench_core::spec::link::{parse_trace, LinkError, Queue, RateSpec};
use qbench_core::units::Rate;
use rand::Rng;

use crate::qdisc::{default_queue, rate_change_lines};

#[derive(Debug, thiserror::Error)]
pub enum RateError {
    #[error("reading rate trace {path}: {source}")]
    Read {
        path: String,
        source: qbench_core::spec::input::InputError,
    },
    #[error("rate trace {path}: {source}")]
    Parse { path: String, source: LinkError },
    #[error("starting `tc -batch -`: {0}")]
    Spawn(std::io::Error),
}

pub use qbench_core::report::link::RateChange;

/// A direction whose rate varies: its egress device and how it varies.
pub struct Varying {
    pub direction: &'static str,
    pub dev: &'static str,
    pub queue: Option<Queue>,
    schedule: Schedule,
}

enum Schedule {
    Random {
        min: Rate,
        max: Rate,
        period: Duration,
    },
    Steps(Vec<(Duration, Rate)>),
    /// Steps that start again every period (a delivery trace).
    Looped {
        steps: Vec<(Duration, Rate)>,
        period: Duration,
    },
}

/// A trace file's text, read within the limit: a FIFO or /dev/zero states no size.
pub(crate) fn read_trace(path: &str) -> Result<String, RateError> {
    std::fs::File::open(path)
        .map_err(qbench_core::spec::input::InputError::from)
        .and_then(|f| {
            qbench_core::spec::input::read_text_capped(
                f,
                qbench_core::spec::input::MAX_TRACE_BYTES,
                "a rate trace",
            )
        })
        .map_err(|source| RateError::Read {
            path: path.to_string(),
            source,
        })
}

impl Varying {
    /// A delivery trace's loop runs on [`loop_clock`], other schedules from their start.
    fn looped(&self) -> bool {
        matches!(self.schedule, Schedule::Looped { .. })
    }

    /// `None` for a fixed rate. Trace files are read and checked here, before any change.
    pub fn new(
        direction: &'static str,
        dev: &'static str,
        spec: &RateSpec,
        queue: Option<Queue>,
    ) -> Result<Option<Self>, RateError> {
        let schedule = match spec {
            RateSpec::Fixed { .. } => return Ok(None),
            RateSpec::Random { min, max, period } => Schedule::Random {
                min: *min,
                max: *max,
                period: *period,
            },
            RateSpec::Trace { path } => {
                let steps = parse_trace(&read_trace(path)?).map_err(|source| RateError::Parse {
                    path: path.clone(),
                    source,
                })?;
                Schedule::Steps(steps)
            }
            RateSpec::Mahimahi { path } => {
                let d = parse_mahimahi(&read_trace(path)?).map_err(|source| RateError::Parse {
                    path: path.clone(),
                    source,
                })?;
                Schedule::Looped {
                    steps: d.steps,
                    period: d.period,
                }
            }
        };
        Ok(Some(Self {
            direction,
            dev,
            queue,
            schedule,
        }))
    }

    /// The rate due at `t` since start, and when the next change is due.
    fn rate_at(&self, t: Duration, rng: &mut impl Rng) -> (Rate, Option<Duration>) {
        match &self.schedule {
            Schedule::Random { min, max, period } => {
                let r = rng.gen_range(min.0..=max.0);
                (Rate(r), Some(t + *period))
            }
            Schedule::Steps(steps) => {
                let end = |i: usize| steps.get(i + 1).map(|(at, _)| *at);
                let due = |i: usize| end(i).map(|e| e - lead(steps[i], e));
                let mut i = steps.iter().rposition(|(at, _)| *at <= t).unwrap_or(0);
                if due(i).is_some_and(|d| d <= t) {
                    i += 1;
                }
                (steps[i].1, due(i))
            }
            Schedule::Looped { steps, period } => {
                let into = Duration::from_nanos((t.as_nanos() % period.as_nanos().max(1)) as u64);
                let mut began = t - into;
                let end = |i: usize| steps.get(i + 1).map_or(*period, |(at, _)| *at);
                let due = |i: usize| end(i) - lead(steps[i], end(i));
                let mut i = steps.iter().rposition(|(at, _)| *at <= into).unwrap_or(0);
                if due(i) <= into {
                    i += 1;
                    if i == steps.len() {
                        (i, began) = (0, began + *period);
                    }
                }
                (steps[i].1, Some(began + due(i)))
            }
        }
    }
}

/// The clock a delivery trace's loop runs on: the machine's monotonic clock, so that whoever
/// measures the link (calibration) knows where in the loop a moment fell.
pub fn loop_clock() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid clock id and a timespec to write into.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// A frame at the default MTU as tc counts it, in bits.
const FRAME_BITS: f64 = 1514.0 * 8.0;
/// How much earlier the change after a held step is written (see [`lead`]).
const EARLY: Duration = Duration::from_millis(5);

/// How much before `end` the change after the step `(at, rate)` is written. htb's tokens are
/// time owed: a step that carries at most one packet (a delivery trace's gap is one, owed by
/// the packet before it) is held by what that packet owes until it ends, and a change during
/// the hold alters nothing. Written at the end instead, a change a moment late would let the
/// next packet owe the whole step again; written early, it is in place when the hold ends.
fn lead((at, rate): (Duration, Rate), end: Duration) -> Duration {
    let len = end.saturating_sub(at);
    if rate.0 as f64 * len.as_secs_f64() <= FRAME_BITS {
        (len / 2).min(EARLY)
    } else {
        Duration::ZERO
    }
}

/// Rate changes a report lists: a delivery trace changes every 10 ms for as long as the link
/// is up, and the list must stay bounded. Later changes are applied, not listed.
pub const MAX_RECORDED_CHANGES: usize = 20_000;

pub struct RateController {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    changes: Arc<Mutex<Vec<RateChange>>>,
    accrued: Arc<Mutex<Vec<Accrual>>>,
    child: Arc<Mutex<Child>>,
}

/// What one direction's changing rate has allowed since it was set up: the bits of every
/// step written so far, and the step in force. Unlike the listed changes, it has no cap.
#[derive(Debug, Clone, Copy)]
struct Accrual {
    direction: &'static str,
    bits_before: f64,
    since: Instant,
    rate: Rate,
    /// The fastest step so far: its bucket is the most the class can send at once.
    peak: Rate,
}

impl Accrual {
    fn at(&self, now: Instant) -> f64 {
        self.bits_before
            + self.rate.0 as f64 * now.saturating_duration_since(self.since).as_secs_f64()
    }
}

/// Writes the new rate, and the queue at it when that differs from the one set before.
fn write_line(
    stdin: &mut ChildStdin,
    v: &Varying,
    rate: Rate,
    mtu: u32,
    last_queue: &mut Option<u64>,
) -> std::io::Result<()> {
    let queue = v
        .queue
        .map_or_else(|| default_queue(rate), |q| q.bytes_at(rate))
        .max(u64::from(mtu) * 2);
    let changed = (*last_queue != Some(queue)).then_some(queue);
    *last_queue = Some(queue);
    stdin.write_all(rate_change_lines(v.dev, rate, changed, mtu).as_bytes())?;
    stdin.flush()
}

/// The longest the controller sleeps without looking at its stop flag.
const MAX_SLEEP: Duration = Duration::from_millis(50);

impl RateController {
    pub fn start(router_ns: &str, dirs: Vec<Varying>, mtu: u32) -> Result<Option<Self>, RateError> {
        if dirs.is_empty() {
            return Ok(None);
        }
        let mut child = Command::new("tc")
            .args(["-n", router_ns, "-force", "-batch", "-"])
            // Out of our process group, as every command the shaper runs (see `exec::run`).
            .process_group(0)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(RateError::Spawn)?;
        let mut stdin = child.stdin.take().expect("piped stdin");
        let stop = Arc::new(AtomicBool::new(false));
        let changes = Arc::new(Mutex::new(Vec::new()));
        let accrued = Arc::new(Mutex::new(Vec::<Accrual>::new()));
        let (stop2, changes2, accrued2) = (stop.clone(), changes.clone(), accrued.clone());
        let thread = std::thread::spawn(move || {
            let start = Instant::now();
            let anchor = loop_clock();
            let mut rng = rand::thread_rng();
            let mut due: Vec<Option<Duration>> = vec![Some(Duration::ZERO); dirs.len()];
            let mut queues: Vec<Option<u64>> = vec![None; dirs.len()];
            while !stop2.load(Ordering::Relaxed) {
                let now = start.elapsed();
                for ((v, next), queue) in dirs.iter().zip(due.iter_mut()).zip(queues.iter_mut()) {
                    if next.is_some_and(|n| n <= now) {
                        let base = if v.looped() { anchor } else { Duration::ZERO };
                        let (rate, following) = v.rate_at(now + base, &mut rng);
                        let following = following.map(|f| f.saturating_sub(base));
                        if write_line(&mut stdin, v, rate, mtu, queue).is_err() {
                            return;
                        }
                        accrue(&accrued2, v.direction, rate);
                        let mut changes = changes2.lock().expect("changes lock");
                        if changes.len() < MAX_RECORDED_CHANGES {
                            changes.push(RateChange {
                                t_ms: now.as_millis() as u64,
                                direction: v.direction.to_string(),
                                rate_bps: rate.0,
                            });
                        }
                        drop(changes);
                        *next = following;
                    }
                }
                // Asleep until the next change is due: a fixed tick would start every window
                // up to a tick late, and a 10 ms window by up to half its length.
                let wake = due.iter().flatten().min().copied();
                let sleep = wake.map_or(MAX_SLEEP, |w| w.saturating_sub(start.elapsed()));
                std::thread::sleep(sleep.min(MAX_SLEEP));
            }
        });
        Ok(Some(Self {
            stop,
            thread: Some(thread),
            changes,
            accrued,
            child: Arc::new(Mutex::new(child)),
        }))
    }

    pub fn changes(&self) -> Vec<RateChange> {
        self.changes.lock().expect("changes lock").clone()
    }

    /// Bits `direction`'s rates have allowed from their first step until now, as written, and
    /// its fastest step; `None` for a direction this controller does not change.
    pub fn allowed_bits(&self, direction: &str) -> Option<(f64, Rate)> {
        let now = Instant::now();
        let a = self.accrued.lock().unwrap_or_else(|e| e.into_inner());
        a.iter()
            .find(|a| a.direction == direction)
            .map(|a| (a.at(now), a.peak))
    }
}

/// Books a new step of `direction` at `rate` from now on.
fn accrue(accrued: &Mutex<Vec<Accrual>>, direction: &'static str, rate: Rate) {
    let now = Instant::now();
    let mut all = accrued.lock().unwrap_or_else(|e| e.into_inner());
    match all.iter_mut().find(|a| a.direction == direction) {
        Some(a) => {
            *a = Accrual {
                direction,
                bits_before: a.at(now),
                since: now,
                rate,
                peak: Rate(a.peak.0.max(rate.0)),
            }
        }
        None => all.push(Accrual {
            direction,
            bits_before: 0.0,
            since: now,
            rate,
            peak: rate,
        }),
    }
}

impl Drop for RateController {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        // Closing stdin (dropped with the thread) ends tc; reap it.
        if let Ok(mut c) = self.child.lock() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_rates_stay_in_range_and_steps_follow_the_trace() {
        let spec: RateSpec = RateSpec::Random {
            min: Rate(50),
            max: Rate(150),
            period: Duration::from_secs(1),
        };
        let v = Varying::new("down", "qb-rc", &spec, None).unwrap().unwrap();
        let mut rng = rand::thread_rng();
        for _ in 0..100 {
            let (r, next) = v.rate_at(Duration::from_secs(3), &mut rng);
            assert!((50..=150).contains(&r.0));
            assert_eq!(next, Some(Duration::from_secs(4)));
        }
        let steps = Varying {
            direction: "up",
            dev: "qb-rs",
            queue: None,
            schedule: Schedule::Steps(vec![
                (Duration::ZERO, Rate(10)),
                (Duration::from_secs(2), Rate(20)),
            ]),
        };
        // 10 bit/s for 2 s carries no packet: the next rate is written 5 ms early.
        assert_eq!(
            steps.rate_at(Duration::from_secs(1), &mut rng),
            (Rate(10), Some(Duration::from_millis(1_995)))
        );
        assert_eq!(
            steps.rate_at(Duration::from_secs(5), &mut rng),
            (Rate(20), None)
        );
        assert!(
            Varying::new("up", "x", &RateSpec::Fixed { bps: Rate(1) }, None)
                .unwrap()
                .is_none()
        );
    }
}

#[cfg(test)]
mod looped_tests {
    use super::*;

    #[test]
    fn a_delivery_trace_starts_again_every_period() {
        let ms = Duration::from_millis;
        let v = Varying {
            direction: "down",
            dev: "qb-rc",
            queue: None,
            schedule: Schedule::Looped {
                steps: vec![(ms(0), Rate(24_000_000)), (ms(200), Rate(8_000))],
                period: ms(400),
            },
        };
        let mut rng = rand::thread_rng();
        assert_eq!(
            v.rate_at(ms(0), &mut rng),
            (Rate(24_000_000), Some(ms(200)))
        );
        // The gap carries no packet: the next period's rate is written 5 ms early.
        assert_eq!(v.rate_at(ms(250), &mut rng), (Rate(8_000), Some(ms(395))));
        // 1005 ms is 205 ms into the third period (the gap); 1210 ms is 10 ms into the fourth.
        assert_eq!(
            v.rate_at(ms(1_005), &mut rng),
            (Rate(8_000), Some(ms(1_195)))
        );
        assert_eq!(
            v.rate_at(ms(1_210), &mut rng),
            (Rate(24_000_000), Some(ms(1_400)))
        );
    }

    /// A step that carries at most one packet hands over early: 1 packet in 190 ms ends 5 ms
    /// before the next step starts, and the next step's rate is due from then on.
    #[test]
    fn a_held_step_hands_over_early() {
        let ms = Duration::from_millis;
        let v = Varying {
            direction: "down",
            dev: "qb-rc",
            queue: None,
            schedule: Schedule::Looped {
                steps: vec![(ms(0), Rate(24_000_000)), (ms(10), Rate(63_000))],
                period: ms(200),
            },
        };
        let mut rng = rand::thread_rng();
        assert_eq!(v.rate_at(ms(5), &mut rng), (Rate(24_000_000), Some(ms(10))));
        assert_eq!(v.rate_at(ms(12), &mut rng), (Rate(63_000), Some(ms(195))));
        // Within the lead, the rate is the next loop's first.
        assert_eq!(
            v.rate_at(ms(196), &mut rng),
            (Rate(24_000_000), Some(ms(210)))
        );
        let steps = Varying {
            direction: "up",
            dev: "qb-rs",
            queue: None,
            schedule: Schedule::Steps(vec![(ms(0), Rate(16_000)), (ms(1_000), Rate(20))]),
        };
        // 16 kbit/s for a second carries more than a packet: no lead.
        assert_eq!(
            steps.rate_at(ms(0), &mut rng),
            (Rate(16_000), Some(ms(1_000)))
        );
    }
}
