//! What an emulated link did during one run, by its own counters, and whether it carried the
//! run as its spec asks. Calibration measures the link once, before the first run; a link on a
//! busy machine can pass it and still fall behind later (a delay line starved of CPU adds delay
//! nobody asked for and caps the rate below the spec's), so every run is checked on its own.

use serde::{Deserialize, Serialize};

/// One direction's bottleneck as the kernel counts it at the router's egress: the root qdisc
/// (the rate's tbf or htb, netem above it) and the loss rules, plus the TUN device that feeds
/// the userspace delay line. Counters since the link was built; runs take differences.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct EgressCounters {
    /// Bytes and packets that left the egress, as tc counts them (frames with their
    /// Ethernet header, which is what the rate limits).
    pub bytes: u64,
    pub packets: u64,
    /// Times the rate limiter held a packet back: the link was the bottleneck then.
    pub overlimits: u64,
    /// Packets the qdiscs and loss rules dropped (a full queue, random loss).
    pub dropped: u64,
    /// Packets the kernel dropped because the delay line's TUN queue was full: the delay line
    /// fell behind. Always 0 on the kernel backends.
    pub tun_dropped: u64,
}

impl EgressCounters {
    pub fn since(&self, before: &Self) -> Self {
        Self {
            bytes: self.bytes.saturating_sub(before.bytes),
            packets: self.packets.saturating_sub(before.packets),
            overlimits: self.overlimits.saturating_sub(before.overlimits),
            dropped: self.dropped.saturating_sub(before.dropped),
            tun_dropped: self.tun_dropped.saturating_sub(before.tun_dropped),
        }
    }
}

/// Both directions' counters at one moment.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct LinkCounters {
    /// Toward the server.
    pub up: EgressCounters,
    /// Toward the client.
    pub down: EgressCounters,
}

impl LinkCounters {
    pub fn since(&self, before: &Self) -> Self {
        Self {
            up: self.up.since(&before.up),
            down: self.down.since(&before.down),
        }
    }
}

/// One direction over one run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LinkDirectionRun {
    #[serde(flatten)]
    pub counters: EgressCounters,
    /// What the direction's rate allowed over the run: its rate (or its trace's rates as
    /// applied) times the run's time, plus one bucket. `null` without a rate.
    pub allowed_bytes: Option<u64>,
    /// Packets the delay line carried, and of them those it wrote more than 1, 10 and 100 ms
    /// past their due time (userspace backend only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delayed_packets: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub late: Option<[u64; 3]>,
}

/// The busiest of the delay line's threads over the run (userspace backend).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DelayLineCpu {
    /// Share of the run on a CPU (1.0: a whole core all the time).
    pub busiest: f64,
    /// Share of the run it was runnable but waiting for a CPU.
    pub waiting: f64,
}

/// Why a link could not carry a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LinkShortfall {
    /// The delay line wrote packets late: they waited longer than the spec's delay.
    Late {
        direction: String,
        over_1ms: u64,
        over_10ms: u64,
        of: u64,
    },
    /// The delay line's TUN queue overflowed: drops the spec did not ask for.
    TunDropped { direction: String, packets: u64 },
    /// More left the link than its rate allows over the run.
    OverRate {
        direction: String,
        bytes: u64,
        allowed: u64,
    },
    /// A delay-line thread waited for a CPU, or had none to spare, for much of the run:
    /// packets waited in the TUN's queue before it read them, which no counter times.
    Starved { busiest: f64, waiting: f64 },
}

impl std::fmt::Display for LinkShortfall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Late {
                direction,
                over_1ms,
                over_10ms,
                of,
            } => write!(
                f,
                "its delay line wrote {over_1ms} of {of} packets {direction} over 1 ms late \
                 ({over_10ms} over 10 ms)"
            ),
            Self::TunDropped { direction, packets } => write!(
                f,
                "its delay line fell behind and the kernel dropped {packets} packets \
                 {direction} before it read them"
            ),
            Self::OverRate {
                direction,
                bytes,
                allowed,
            } => write!(
                f,
                "it carried {bytes} bytes {direction} where its rate allows {allowed}"
            ),
            Self::Starved { busiest, waiting } => write!(
                f,
                "its delay line was starved of CPU (busiest thread {:.0}% on a CPU, {:.0}% \
                 waiting for one)",
                busiest * 100.0,
                waiting * 100.0
            ),
        }
    }
}

/// Packets over 1 ms late, as a share of those carried, that make a run the link's: a wake-up
/// a millisecond late now and then is a busy machine's (up to 7% of a 20 Mbit/s run's
/// packets were, on a 2-core machine with two builds beside it), a quarter is not.
pub const LATE_1MS_SHARE: f64 = 0.25;
/// Packets over 10 ms late, as a share: a 10 ms stall is a whole RTT on many links.
pub const LATE_10MS_SHARE: f64 = 0.01;
/// How far above its allowance a direction may carry (rounding, tc's own accounting).
pub const OVER_RATE_SLACK: f64 = 0.03;
/// A delay-line thread waiting for a CPU this share of the run, or on one this share.
pub const STARVED_WAITING: f64 = 0.20;
pub const STARVED_BUSY: f64 = 0.90;

/// What the link did during one run, and why it could not carry it when it could not.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LinkRun {
    /// The time the counters cover, by the monotonic clock (the run, bookkeeping aside).
    pub seconds: f64,
    /// Toward the server.
    pub up: LinkDirectionRun,
    /// Toward the client.
    pub down: LinkDirectionRun,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_line: Option<DelayLineCpu>,
    /// Empty when the link carried the run as its spec asks.
    pub shortfalls: Vec<LinkShortfall>,
}

impl LinkRun {
    /// Whether the link carried the run as asked.
    pub fn carried(&self) -> bool {
        self.shortfalls.is_empty()
    }

    /// Judges the counters against the thresholds above and fills `shortfalls`.
    pub fn judge(mut self) -> Self {
        let mut out = Vec::new();
        for (name, d) in [
            ("toward the server", &self.up),
            ("toward the client", &self.down),
        ] {
            let direction = name.to_string();
            if let (Some(of), Some(late)) = (d.delayed_packets, d.late) {
                let share = |n: u64| n as f64 / of.max(1) as f64;
                if share(late[0]) > LATE_1MS_SHARE || share(late[1]) > LATE_10MS_SHARE {
                    out.push(LinkShortfall::Late {
                        direction: direction.clone(),
                        over_1ms: late[0],
                        over_10ms: late[1],
                        of,
                    });
                }
            }
            if d.counters.tun_dropped > 0 {
                out.push(LinkShortfall::TunDropped {
                    direction: direction.clone(),
                    packets: d.counters.tun_dropped,
                });
            }
            if let Some(allowed) = d.allowed_bytes {
                if d.counters.bytes as f64 > allowed as f64 * (1.0 + OVER_RATE_SLACK) {
                    out.push(LinkShortfall::OverRate {
                        direction,
                        bytes: d.counters.bytes,
                        allowed,
                    });
                }
            }
        }
        if let Some(c) = self.delay_line {
            if c.waiting >= STARVED_WAITING || c.busiest >= STARVED_BUSY {
                out.push(LinkShortfall::Starved {
                    busiest: c.busiest,
                    waiting: c.waiting,
                });
            }
        }
        self.shortfalls = out;
        self
    }

    /// One line: why the link could not carry the run; `None` when it could.
    pub fn why(&self) -> Option<String> {
        (!self.carried()).then(|| {
            self.shortfalls
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn dir(bytes: u64, allowed: Option<u64>, packets: u64, late: [u64; 3]) -> LinkDirectionRun {
        LinkDirectionRun {
            counters: EgressCounters {
                bytes,
                packets,
                ..Default::default()
            },
            allowed_bytes: allowed,
            delayed_packets: Some(packets),
            late: Some(late),
        }
    }

    fn run(up: LinkDirectionRun, down: LinkDirectionRun, cpu: Option<(f64, f64)>) -> LinkRun {
        LinkRun {
            seconds: 1.0,
            up,
            down,
            delay_line: cpu.map(|(busiest, waiting)| DelayLineCpu { busiest, waiting }),
            shortfalls: Vec::new(),
        }
        .judge()
    }

    #[test]
    fn a_link_within_its_rate_and_on_time_carried_the_run() {
        let r = run(
            dir(1000, Some(125_000), 20, [0; 3]),
            dir(120_000, Some(125_000), 10_000, [2499, 99, 0]),
            Some((0.5, 0.1)),
        );
        assert!(r.carried(), "{:?}", r.shortfalls);
        assert_eq!(r.why(), None);
    }

    #[test]
    fn each_shortfall_is_named() {
        let late = run(
            dir(0, None, 0, [0; 3]),
            dir(0, None, 1000, [251, 0, 0]),
            None,
        );
        assert!(matches!(
            late.shortfalls[..],
            [LinkShortfall::Late { over_1ms: 251, .. }]
        ));
        assert!(late
            .why()
            .unwrap()
            .contains("251 of 1000 packets toward the client"));
        let stalls = run(
            dir(0, None, 0, [0; 3]),
            dir(0, None, 5000, [60, 60, 0]),
            None,
        );
        assert!(matches!(
            stalls.shortfalls[..],
            [LinkShortfall::Late { .. }]
        ));
        let over = run(
            dir(0, None, 0, [0; 3]),
            dir(104, Some(100), 1, [0; 3]),
            None,
        );
        assert!(matches!(
            over.shortfalls[..],
            [LinkShortfall::OverRate { bytes: 104, .. }]
        ));
        let starved = run(
            dir(0, None, 0, [0; 3]),
            dir(0, None, 0, [0; 3]),
            Some((0.3, 0.25)),
        );
        assert!(starved.why().unwrap().contains("25% waiting"));
        let mut d = dir(0, None, 0, [0; 3]);
        d.counters.tun_dropped = 3;
        let dropped = run(d, dir(0, None, 0, [0; 3]), None);
        assert!(dropped
            .why()
            .unwrap()
            .contains("3 packets toward the server"));
    }

    #[test]
    fn counters_subtract_without_wrapping() {
        let a = LinkCounters {
            up: EgressCounters {
                bytes: 10,
                ..Default::default()
            },
            down: EgressCounters {
                packets: 5,
                ..Default::default()
            },
        };
        let d = LinkCounters::default().since(&a);
        assert_eq!(d, LinkCounters::default());
    }

    proptest! {
        /// Any counters judge to a verdict, never a panic; a run within every threshold
        /// carries.
        #[test]
        fn any_counters_judge(
            bytes in any::<u64>(), allowed in proptest::option::of(any::<u64>()),
            packets in any::<u64>(), late in any::<[u64; 3]>(),
            busiest in 0.0f64..2.0, waiting in 0.0f64..2.0,
        ) {
            let r = run(dir(bytes, allowed, packets, late), dir(0, None, 0, [0; 3]),
                Some((busiest, waiting)));
            let quiet = late == [0; 3] && allowed.is_none_or(|a| bytes <= a)
                && busiest < STARVED_BUSY && waiting < STARVED_WAITING;
            if quiet {
                prop_assert!(r.carried());
            }
        }
    }
}
