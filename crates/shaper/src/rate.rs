//! Variable bandwidth: one long-lived `tc -batch -` in the router namespace receives a new tbf
//! rate for each direction every period (random in a range) or at each step of a trace file.

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

use crate::qdisc::{default_queue, rate_change_line};

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
    /// The tbf is netem's child (netem backend, with delay or loss on this direction).
    pub under_netem: bool,
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
    /// The highest rate the schedule sets.
    fn peak(&self) -> Rate {
        match &self.schedule {
            Schedule::Random { max, .. } => *max,
            Schedule::Steps(steps) | Schedule::Looped { steps, .. } => {
                steps.iter().map(|(_, r)| *r).max().unwrap_or(Rate(1))
            }
        }
    }

    /// `None` for a fixed rate. Trace files are read and checked here, before any change.
    pub fn new(
        direction: &'static str,
        dev: &'static str,
        spec: &RateSpec,
        queue: Option<Queue>,
        under_netem: bool,
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
            under_netem,
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
                let i = steps.iter().rposition(|(at, _)| *at <= t).unwrap_or(0);
                (steps[i].1, steps.get(i + 1).map(|(at, _)| *at))
            }
            Schedule::Looped { steps, period } => {
                let into = Duration::from_nanos((t.as_nanos() % period.as_nanos().max(1)) as u64);
                let began = t - into;
                let i = steps.iter().rposition(|(at, _)| *at <= into).unwrap_or(0);
                let next = steps.get(i + 1).map_or(*period, |(at, _)| *at);
                (steps[i].1, Some(began + next))
            }
        }
    }
}

/// Rate changes a report lists: a delivery trace changes every 10 ms for as long as the link
/// is up, and the list must stay bounded. Later changes are applied, not listed.
pub const MAX_RECORDED_CHANGES: usize = 20_000;

pub struct RateController {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    changes: Arc<Mutex<Vec<RateChange>>>,
    child: Arc<Mutex<Child>>,
}

fn write_line(stdin: &mut ChildStdin, v: &Varying, rate: Rate, mtu: u32) -> std::io::Result<()> {
    let queue = v
        .queue
        .map_or_else(|| default_queue(rate), |q| q.bytes_at(rate));
    stdin
        .write_all(rate_change_line(v.dev, rate, v.peak(), queue, mtu, v.under_netem).as_bytes())?;
    stdin.flush()
}

impl RateController {
    pub fn start(router_ns: &str, dirs: Vec<Varying>, mtu: u32) -> Result<Option<Self>, RateError> {
        if dirs.is_empty() {
            return Ok(None);
        }
        let mut child = Command::new("ip")
            .args(["netns", "exec", router_ns, "tc", "-force", "-batch", "-"])
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
        let (stop2, changes2) = (stop.clone(), changes.clone());
        let thread = std::thread::spawn(move || {
            let start = Instant::now();
            let mut rng = rand::thread_rng();
            let mut due: Vec<Option<Duration>> = vec![Some(Duration::ZERO); dirs.len()];
            while !stop2.load(Ordering::Relaxed) {
                let now = start.elapsed();
                for (v, next) in dirs.iter().zip(due.iter_mut()) {
                    if next.is_some_and(|n| n <= now) {
                        let (rate, following) = v.rate_at(now, &mut rng);
                        if write_line(&mut stdin, v, rate, mtu).is_err() {
                            return;
                        }
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
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        Ok(Some(Self {
            stop,
            thread: Some(thread),
            changes,
            child: Arc::new(Mutex::new(child)),
        }))
    }

    pub fn changes(&self) -> Vec<RateChange> {
        self.changes.lock().expect("changes lock").clone()
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
        let v = Varying::new("down", "qb-rc", &spec, None, false)
            .unwrap()
            .unwrap();
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
            under_netem: false,
            schedule: Schedule::Steps(vec![
                (Duration::ZERO, Rate(10)),
                (Duration::from_secs(2), Rate(20)),
            ]),
        };
        assert_eq!(
            steps.rate_at(Duration::from_secs(1), &mut rng),
            (Rate(10), Some(Duration::from_secs(2)))
        );
        assert_eq!(
            steps.rate_at(Duration::from_secs(5), &mut rng),
            (Rate(20), None)
        );
        assert!(
            Varying::new("up", "x", &RateSpec::Fixed { bps: Rate(1) }, None, false)
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
            under_netem: false,
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
        assert_eq!(v.rate_at(ms(250), &mut rng), (Rate(8_000), Some(ms(400))));
        // 1005 ms is 205 ms into the third period (the gap); 1210 ms is 10 ms into the fourth.
        assert_eq!(
            v.rate_at(ms(1_005), &mut rng),
            (Rate(8_000), Some(ms(1_200)))
        );
        assert_eq!(
            v.rate_at(ms(1_210), &mut rng),
            (Rate(24_000_000), Some(ms(1_400)))
        );
        assert_eq!(v.peak(), Rate(24_000_000));
    }
}
