//! Noise measured instead of ignored: what else the machine did while a run was measured.
//! On a virtual machine the hypervisor may hand the CPU to other guests (steal time, seen at
//! 33% on the machine this was written on); a round measured then measures the neighbours.

use serde::{Deserialize, Serialize};

/// Steal above this share of the machine's CPU time during a run flags it as noisy, unless
/// `--steal-threshold` says otherwise.
pub const STEAL_THRESHOLD_PCT: f64 = 10.0;

/// CPU time other work on the machine took during a run (its busy share beyond qbench's own
/// process), above which the run is flagged as noisy: it competed for the cores it measured.
/// Kernel work done for qbench outside its threads (softirq networking, the link's qdiscs)
/// counts as other work, so the bar sits well above the few percent an idle machine shows.
pub const BUSY_OTHERS_THRESHOLD_PCT: f64 = 25.0;

/// The machine's CPU time counters from `/proc/stat`'s `cpu` line (clock ticks, all CPUs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuStat {
    /// user + nice + system + irq + softirq (guest time is inside user).
    pub busy: u64,
    /// idle + iowait.
    pub idle: u64,
    pub steal: u64,
    /// `procs_running`: tasks runnable when read.
    pub procs_running: Option<u32>,
}

impl CpuStat {
    fn total(&self) -> u64 {
        self.busy
            .saturating_add(self.idle)
            .saturating_add(self.steal)
    }
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum NoiseError {
    #[error("/proc/stat has no `cpu` line")]
    NoCpuLine,
    #[error("/proc/stat: `cpu` line `{0}`: expected at least 8 counters")]
    BadCpuLine(String),
}

/// Reads the text of `/proc/stat`.
pub fn parse_proc_stat(text: &str) -> Result<CpuStat, NoiseError> {
    let line = text
        .lines()
        .find(|l| l.split_whitespace().next() == Some("cpu"))
        .ok_or(NoiseError::NoCpuLine)?;
    let n: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(str::parse)
        .collect::<Result<_, _>>()
        .map_err(|_| NoiseError::BadCpuLine(line.chars().take(120).collect()))?;
    let [user, nice, system, idle, iowait, irq, softirq, steal, ..] = n[..] else {
        return Err(NoiseError::BadCpuLine(line.chars().take(120).collect()));
    };
    let sum = |v: &[u64]| v.iter().fold(0u64, |a, b| a.saturating_add(*b));
    let procs_running = text
        .lines()
        .find_map(|l| l.strip_prefix("procs_running "))
        .and_then(|v| v.trim().parse().ok());
    Ok(CpuStat {
        busy: sum(&[user, nice, system, irq, softirq]),
        idle: sum(&[idle, iowait]),
        steal,
        procs_running,
    })
}

/// What the machine and the link did during one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunNoise {
    /// CPU time the hypervisor gave to other guests, in percent of the machine's.
    pub steal_pct: f64,
    /// CPU time any process on the machine (qbench included) was busy, in percent.
    pub busy_pct: f64,
    /// Runnable tasks when the run ended.
    pub procs_running: Option<u32>,
    /// Of `busy_pct`, what was not qbench's own process (its client, in-process server, link
    /// forwarders and proxy threads): other processes, and kernel work outside any thread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busy_others_pct: Option<f64>,
    /// Clock ticks (of all CPUs, usually 100 per second each) the shares are counted in: the
    /// shares of a run of a few ticks are coarse.
    pub ticks: u64,
    /// The userspace link's forwarders over this run (with `--link`, backend userspace):
    /// packets, bytes, drops and reorders counted during the run, and the queue's high-water
    /// mark since the link was built.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub forwarders: Vec<(String, ForwarderStats)>,
    /// What the link's qdiscs and loss rules dropped during this run (with `--link`, either
    /// backend): a full queue, random loss.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_drops: Option<LinkDrops>,
    /// Steal above its threshold, or other work above [`BUSY_OTHERS_THRESHOLD_PCT`]: the
    /// round measured the neighbours too.
    pub noisy: bool,
    /// What made it noisy.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub causes: Vec<NoiseCause>,
}

/// Why a run was flagged as noisy, with the share (percent of the machine's CPU time).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum NoiseCause {
    Steal(f64),
    BusyOthers(f64),
}

impl std::fmt::Display for NoiseCause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Steal(p) => write!(f, "{p:.0}% steal"),
            Self::BusyOthers(p) => write!(f, "{p:.0}% of the machine busy with other work"),
        }
    }
}

impl RunNoise {
    /// `None` when no tick passed between the two readings (a run under 10 ms).
    pub fn between(before: &CpuStat, after: &CpuStat, steal_threshold_pct: f64) -> Option<Self> {
        let ticks = after
            .total()
            .checked_sub(before.total())
            .filter(|t| *t > 0)?;
        let total = ticks as f64;
        let pct = |a: u64, b: u64| b.saturating_sub(a) as f64 / total * 100.0;
        let steal_pct = pct(before.steal, after.steal);
        let noisy = steal_pct > steal_threshold_pct;
        Some(Self {
            steal_pct,
            busy_pct: pct(before.busy, after.busy),
            procs_running: after.procs_running,
            busy_others_pct: None,
            ticks,
            forwarders: Vec::new(),
            link_drops: None,
            noisy,
            causes: if noisy {
                vec![NoiseCause::Steal(steal_pct)]
            } else {
                Vec::new()
            },
        })
    }

    /// Takes qbench's own CPU seconds over the run out of the machine's busy share: what is
    /// left is other work, which flags the run when above [`BUSY_OTHERS_THRESHOLD_PCT`].
    /// `hz` is the clock ticks per second of `/proc/stat` (USER_HZ).
    pub fn count_own(&mut self, own_cpu_s: f64, hz: u64) {
        let own_pct = own_cpu_s * hz as f64 / self.ticks as f64 * 100.0;
        let others = (self.busy_pct - own_pct).max(0.0);
        self.busy_others_pct = Some(others);
        if others > BUSY_OTHERS_THRESHOLD_PCT {
            self.noisy = true;
            self.causes.push(NoiseCause::BusyOthers(others));
        }
    }
}

/// A noisy round: the larger steal share of its runs and what made them noisy.
#[derive(Debug, Clone, PartialEq)]
pub struct NoisyRound {
    pub steal_pct: f64,
    pub causes: Vec<NoiseCause>,
}

/// When any of a round's runs was noisy, why; `None` for a clean round (or one with no
/// noise recorded).
pub fn noisy_round(runs: &[Option<RunNoise>]) -> Option<NoisyRound> {
    let present = runs.iter().flatten();
    present.clone().any(|n| n.noisy).then(|| NoisyRound {
        steal_pct: present.clone().map(|n| n.steal_pct).fold(0.0, f64::max),
        causes: present.flat_map(|n| n.causes.iter().copied()).collect(),
    })
}

/// Losses of one run as the senders declared them and as the link made them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Losses {
    /// Packets the servers' senders declared lost (QUIC) or retransmitted (TCP), from the
    /// last telemetry sample of each connection.
    pub declared: u64,
    /// Packets the link dropped on their way to the client during the run (the servers'
    /// senders' packets, the ones they declare lost): its qdiscs and loss rules, and the
    /// userspace path's down forwarder.
    pub dropped: u64,
    /// Datagrams a full receive buffer dropped at the client's socket during the run (its
    /// namespace's `RcvbufErrors`; a GRO batch counts once): the senders' packets that the
    /// link carried and the client never read. 0 over TCP or without a link's namespace.
    pub socket: u64,
}

impl Losses {
    /// Declared losses the link did not make: packets that were only overtaken (reordering)
    /// or late, or dropped outside the link (a socket buffer, the endpoints' veths).
    pub fn spurious(&self) -> u64 {
        self.declared.saturating_sub(self.dropped)
    }

    /// `declared` beside what `noise` says the link dropped toward the client.
    pub fn with_noise(declared: u64, noise: &RunNoise) -> Option<Self> {
        let f = &noise.forwarders;
        if f.is_empty() && noise.link_drops.is_none() {
            return None;
        }
        let forwarded: u64 = f
            .iter()
            .filter(|(name, _)| name == FORWARDER_DOWN)
            .map(|(_, s)| s.dropped)
            .sum();
        Some(Self {
            declared,
            socket: 0,
            dropped: forwarded + noise.link_drops.map_or(0, |d| d.down),
        })
    }
}

/// Counters of each forwarder between two snapshots (by name); the queue's high-water mark is
/// the later one's.
pub fn forwarder_deltas(
    before: &[(String, ForwarderStats)],
    after: &[(String, ForwarderStats)],
) -> Vec<(String, ForwarderStats)> {
    after
        .iter()
        .map(|(name, a)| {
            let b = before
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, s)| s.clone())
                .unwrap_or_default();
            let stats = ForwarderStats {
                packets: a.packets.saturating_sub(b.packets),
                writes: a.writes.saturating_sub(b.writes),
                bytes: a.bytes.saturating_sub(b.bytes),
                dropped: a.dropped.saturating_sub(b.dropped),
                max_queue: a.max_queue,
                reordered: a.reordered.saturating_sub(b.reordered),
                late: std::array::from_fn(|i| a.late[i].saturating_sub(b.late[i])),
            };
            (name.clone(), stats)
        })
        .collect()
}

/// The userspace forwarder (its TUN device) of the down direction, server -> client.
pub const FORWARDER_DOWN: &str = "qb-tdn";

/// Packets the emulated link itself dropped, per direction: its qdiscs (a full tbf queue,
/// netem's random loss) and the userspace backend's nftables loss rules. The forwarders of
/// the userspace path count theirs apart.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct LinkDrops {
    /// Client -> server.
    pub up: u64,
    /// Server -> client.
    pub down: u64,
}

impl LinkDrops {
    pub fn since(&self, before: &Self) -> Self {
        Self {
            up: self.up.saturating_sub(before.up),
            down: self.down.saturating_sub(before.down),
        }
    }

    pub fn total(&self) -> u64 {
        self.up.saturating_add(self.down)
    }
}

/// Counters of one forwarder. `packets` and `dropped` are packets on the wire: a GSO
/// super-packet counts as its segments, as its receiver and sender see them. `bytes` excludes
/// the vnet header. `dropped` covers random loss, queue overflow, failed writes and packets
/// still queued when the forwarder stopped. `reordered` counts reads (a super-packet as one)
/// scheduled to leave before a read that arrived earlier. `late` counts packets written past
/// their due time by more than [`LATE_STEPS_US`] (1 ms, 10 ms, 100 ms): the delay line's own
/// lag, which the link's spec did not ask for.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ForwarderStats {
    pub packets: u64,
    /// Writes back into the TUN: a super-packet as one.
    #[serde(default)]
    pub writes: u64,
    pub bytes: u64,
    pub dropped: u64,
    pub max_queue: usize,
    pub reordered: u64,
    #[serde(default)]
    pub late: [u64; 3],
}

/// The lateness steps of [`ForwarderStats::late`], in microseconds past the due time.
pub const LATE_STEPS_US: [u64; 3] = [1_000, 10_000, 100_000];

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const STAT: &str = "cpu  4705 356 584 3699176 23060 0 277 1200 0 0\n\
cpu0 1393280 32966 572056 13343292 6130 0 17875 0 23933 0\n\
intr 1462898\nctxt 115315133\nbtime 1748000000\nprocesses 2389\nprocs_running 3\n\
procs_blocked 0\n";

    #[test]
    fn reads_the_cpu_line_and_runnable_tasks() {
        let s = parse_proc_stat(STAT).unwrap();
        assert_eq!(s.busy, 4705 + 356 + 584 + 277);
        assert_eq!(s.idle, 3_699_176 + 23_060);
        assert_eq!((s.steal, s.procs_running), (1200, Some(3)));
        // Kernels before 2.6.11 had no steal column.
        assert!(matches!(
            parse_proc_stat("cpu 1 2 3 4 5 6 7\n"),
            Err(NoiseError::BadCpuLine(_))
        ));
        assert_eq!(parse_proc_stat("intr 5\n"), Err(NoiseError::NoCpuLine));
        assert!(parse_proc_stat("cpu 1 2 x 4 5 6 7 8\n").is_err());
    }

    #[test]
    fn shares_over_a_run_and_the_threshold() {
        let before = CpuStat {
            busy: 1000,
            idle: 5000,
            steal: 100,
            procs_running: Some(1),
        };
        let after = CpuStat {
            busy: 1500,
            idle: 5300,
            steal: 300,
            procs_running: Some(4),
        };
        let n = RunNoise::between(&before, &after, STEAL_THRESHOLD_PCT).unwrap();
        assert_eq!((n.steal_pct, n.busy_pct, n.ticks), (20.0, 50.0, 1000));
        assert!(n.noisy);
        assert!(!RunNoise::between(&before, &after, 25.0).unwrap().noisy);
        assert_eq!(RunNoise::between(&after, &after, 10.0), None);
        // Counters going backwards (another boot) are no run at all.
        assert_eq!(RunNoise::between(&after, &before, 10.0), None);
    }

    #[test]
    fn other_work_on_the_machine_flags_a_run_and_qbench_own_does_not() {
        let before = CpuStat {
            busy: 0,
            idle: 0,
            steal: 0,
            procs_running: None,
        };
        // 2 CPUs for 5 s at 100 ticks/s: 1,000 ticks, 900 busy.
        let after = CpuStat {
            busy: 900,
            idle: 100,
            ..before
        };
        let mut own = RunNoise::between(&before, &after, 10.0).unwrap();
        own.count_own(8.0, 100);
        assert!(!own.noisy, "{own:?}");
        assert_eq!(own.busy_others_pct, Some(10.0));
        let mut busy = RunNoise::between(&before, &after, 10.0).unwrap();
        busy.count_own(2.0, 100);
        assert!(busy.noisy);
        assert_eq!(busy.causes, vec![NoiseCause::BusyOthers(70.0)]);
        assert_eq!(
            busy.causes[0].to_string(),
            "70% of the machine busy with other work"
        );
        // More CPU than the machine's busy share (ticks are coarse): no other work, not less.
        let mut over = RunNoise::between(&before, &after, 10.0).unwrap();
        over.count_own(20.0, 100);
        assert_eq!(over.busy_others_pct, Some(0.0));
    }

    #[test]
    fn a_round_is_noisy_when_either_run_is() {
        let n = |steal_pct, noisy| RunNoise {
            steal_pct,
            busy_pct: 50.0,
            procs_running: None,
            ticks: 100,
            forwarders: Vec::new(),
            link_drops: None,
            noisy,
            busy_others_pct: None,
            causes: Vec::new(),
        };
        let steal = |r: Option<NoisyRound>| r.map(|r| r.steal_pct);
        assert_eq!(
            steal(noisy_round(&[Some(n(3.0, false)), Some(n(40.0, true))])),
            Some(40.0)
        );
        assert_eq!(steal(noisy_round(&[Some(n(30.0, true)), None])), Some(30.0));
        assert_eq!(
            noisy_round(&[Some(n(3.0, false)), Some(n(5.0, false))]),
            None
        );
        assert_eq!(noisy_round(&[None, None]), None);
    }

    #[test]
    fn spurious_losses_are_declared_minus_dropped() {
        let l = Losses {
            declared: 105,
            dropped: 5,
            socket: 0,
        };
        assert_eq!(l.spurious(), 100);
        let none = Losses {
            declared: 2,
            dropped: 9,
            socket: 0,
        };
        assert_eq!(none.spurious(), 0);
    }

    #[test]
    fn the_links_drops_toward_the_client_are_the_senders_losses() {
        let fwd = |dropped| ForwarderStats {
            dropped,
            ..ForwarderStats::default()
        };
        let mut n = RunNoise {
            steal_pct: 0.0,
            busy_pct: 0.0,
            procs_running: None,
            ticks: 100,
            forwarders: Vec::new(),
            link_drops: None,
            noisy: false,
            busy_others_pct: None,
            causes: Vec::new(),
        };
        assert_eq!(Losses::with_noise(7, &n), None, "no link, no count");
        n.link_drops = Some(LinkDrops { up: 40, down: 3 });
        assert_eq!(
            Losses::with_noise(7, &n),
            Some(Losses {
                declared: 7,
                dropped: 3,
                socket: 0,
            })
        );
        n.forwarders = vec![("qb-tup".into(), fwd(100)), (FORWARDER_DOWN.into(), fwd(2))];
        assert_eq!(Losses::with_noise(7, &n).unwrap().dropped, 5);
    }

    #[test]
    fn forwarder_counters_over_a_run() {
        let s = |packets, max_queue| ForwarderStats {
            packets,
            writes: packets / 2,
            bytes: packets * 1000,
            dropped: 1,
            max_queue,
            reordered: 0,
            late: [packets / 10, 0, 0],
        };
        let d = forwarder_deltas(
            &[("down".into(), s(10, 5))],
            &[("down".into(), s(25, 9)), ("up".into(), s(3, 1))],
        );
        assert_eq!(d[0].1.packets, 15);
        assert_eq!(
            (d[0].1.bytes, d[0].1.dropped, d[0].1.max_queue),
            (15_000, 0, 9)
        );
        assert_eq!(d[1].1.packets, 3);
    }

    proptest! {
        #[test]
        fn proc_stat_parser_never_panics(text in "(cpu|procs_running)?[ 0-9a-z\\n]{0,80}") {
            let _ = parse_proc_stat(&text);
        }
    }
}
