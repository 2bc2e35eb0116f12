//! The link as measured against the link as asked. The shaper measures (an echo probe of a
//! known count of packets, then a saturating flow each way); this module holds what it found
//! and judges it against the spec with stated tolerances, so that the judgement is pure and
//! the same in `qbench-shaper check`, in a run's report and in tests.

use serde::{Deserialize, Serialize};
use statrs::distribution::{Binomial, DiscreteCDF};

use crate::spec::link::{Direction, LinkSpec, RateSpec, MIN_RATE_BPS};
use crate::units::Rate;

/// A fixed rate is met when the saturating flow's delivered rate (counted as tc counts it:
/// Ethernet, IP and UDP headers included) is within this fraction of it.
pub const RATE_TOLERANCE: f64 = 0.03;

/// A delivery trace is met when the saturating flow's delivered rate is within this fraction
/// of what the trace's schedule carries over the span measured, or within two packets over
/// the span when that is more (a span of a slow trace holds few whole packets).
pub const TRACE_RATE_TOLERANCE: f64 = 0.06;

/// The echo probe's median round trip may differ from the asked one by this much, or by
/// [`DELAY_TOLERANCE_REL`] of it when that is more: a veth pair and a busy 2-core machine
/// add tens to hundreds of microseconds of their own.
pub const DELAY_TOLERANCE_US: u64 = 500;
pub const DELAY_TOLERANCE_REL: f64 = 0.05;

/// Losses outside this central binomial interval (for the probe's count and the asked
/// probability) miss the request: a link that is right misses it once in a hundred checks.
pub const LOSS_CONFIDENCE: f64 = 0.99;

/// Headers below the UDP payload that tc's rate counts on a veth: Ethernet 14, IPv4 20, UDP 8.
pub const L2_OVERHEAD: u32 = 42;

/// What the echo probe saw of round trips, in microseconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RttSummary {
    pub samples: u64,
    pub min_us: u64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
}

impl RttSummary {
    /// From round trips in microseconds, in any order.
    pub fn of(mut us: Vec<u64>) -> Self {
        if us.is_empty() {
            return Self::default();
        }
        us.sort_unstable();
        let at = |q: f64| us[((us.len() - 1) as f64 * q).round() as usize];
        Self {
            samples: us.len() as u64,
            min_us: us[0],
            p50_us: at(0.5),
            p99_us: at(0.99),
            max_us: us[us.len() - 1],
        }
    }
}

/// A saturating UDP flow through one direction: what its sender offered and what arrived,
/// both as tc counts bytes ([`L2_OVERHEAD`] per packet).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Flood {
    /// Bytes per packet on the wire, headers included.
    pub packet_bytes: u32,
    pub sent_packets: u64,
    pub sent_bps: u64,
    /// Packets that arrived, and the rate at which they did after the first quarter of the
    /// flow (tbf's burst and the filling queue pass in it).
    pub received_packets: u64,
    pub received_bps: u64,
    /// A delivery trace's direction: what its schedule carries over the span measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<TraceSpan>,
    /// Earlier floods of this direction whose rate missed the check, oldest first: the check
    /// stands on this flood, the last. A pause of a busy machine's spoils one flood; a link
    /// that is wrong misses every time.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missed_before: Vec<FloodAttempt>,
}

/// What one earlier flood of a direction offered and delivered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FloodAttempt {
    pub sent_bps: u64,
    pub received_bps: u64,
}

/// How many floods measure a direction whose rate misses its check, at most.
pub const FLOOD_ATTEMPTS: usize = 3;

impl Flood {
    /// Whether a flood that missed its check is worth repeating: not when its sender offered
    /// under half the rate it wanted (`want_bps`), a limit of the machine's that a repeat does
    /// not lift.
    pub fn worth_repeating(&self, want_bps: f64) -> bool {
        self.missed_before.len() + 1 < FLOOD_ATTEMPTS && self.sent_bps as f64 >= want_bps / 2.0
    }

    /// The check's note on the floods before this one, if any missed.
    fn repeats_note(&self, ok: bool) -> Option<String> {
        if self.missed_before.is_empty() {
            return None;
        }
        let rates: Vec<String> = self
            .missed_before
            .iter()
            .map(|a| Rate(a.received_bps).to_string())
            .collect();
        Some(if ok {
            format!(
                "measured again: {} earlier flood(s) delivered {}",
                rates.len(),
                rates.join(", ")
            )
        } else {
            format!(
                "missed in all {} floods (earlier ones delivered {})",
                rates.len() + 1,
                rates.join(", ")
            )
        })
    }
}

/// Joins a check's own note and the floods' note.
fn notes(own: Option<String>, repeats: Option<String>) -> Option<String> {
    match (own, repeats) {
        (Some(a), Some(b)) => Some(format!("{a}; {b}")),
        (a, b) => a.or(b),
    }
}

/// What a delivery trace (`rate=mahimahi:FILE`) carries where a flood was measured: its loop
/// runs on the machine's monotonic clock, so the span's place in it is known.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TraceSpan {
    /// The trace's mean over its whole period.
    pub mean_bps: u64,
    /// The trace's mean over the span the flood's rate was measured in.
    pub expected_bps: u64,
    /// That span's length.
    pub span_us: u64,
}

/// One direction as measured.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DirectionMeasured {
    /// Echo-probe packets sent toward this direction's receiver, and those that arrived.
    pub probe_sent: u64,
    pub probe_received: u64,
    /// Probe packets that arrived after one sent later than them.
    pub reordered: u64,
    /// `None` when no flow was sent (the rate varies over time, so there is nothing fixed to
    /// meet).
    pub flood: Option<Flood>,
}

/// One field of the spec, asked against measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LinkCheck {
    /// The spec's field: `rtt`, `up.rate`, `down.loss`, `up.reorder`...
    pub field: String,
    pub asked: String,
    pub measured: String,
    pub tolerance: String,
    pub ok: bool,
    /// Why a check could not confirm the field (e.g. the probe could not offer the rate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The field cannot be measured on this link (a direction that drops every packet
    /// carries no probe): neither confirmed nor missed, and `note` says why.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unmeasurable: bool,
}

impl LinkCheck {
    /// One line for a warning or an error: the field, both values and the tolerance.
    pub fn line(&self) -> String {
        let mut s = format!(
            "link field `{}`: measured {}, asked {} (allowed: {})",
            self.field, self.measured, self.asked, self.tolerance
        );
        if let Some(n) = &self.note {
            s.push_str("; ");
            s.push_str(n);
        }
        s
    }
}

/// What calibration measured, and the verdict on each field.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Calibration {
    pub rtt: RttSummary,
    /// Client -> server.
    pub up: DirectionMeasured,
    /// Server -> client.
    pub down: DirectionMeasured,
    pub checks: Vec<LinkCheck>,
    /// How long calibration took.
    pub elapsed_ms: u64,
}

impl Calibration {
    pub fn misses(&self) -> impl Iterator<Item = &LinkCheck> {
        self.checks.iter().filter(|c| !c.ok && !c.unmeasurable)
    }

    /// The fields no probe could measure on this link.
    pub fn unmeasurable(&self) -> impl Iterator<Item = &LinkCheck> {
        self.checks.iter().filter(|c| c.unmeasurable)
    }
}

fn ms(us: u64) -> String {
    format!("{:.2} ms", us as f64 / 1000.0)
}

/// The central `LOSS_CONFIDENCE` interval of losses among `n` packets each lost with `p`.
pub fn loss_interval(n: u64, p: f64) -> (u64, u64) {
    if n == 0 || p <= 0.0 {
        return (0, 0);
    }
    if p >= 1.0 {
        return (n, n);
    }
    let Ok(b) = Binomial::new(p, n) else {
        return (0, n);
    };
    let tail = (1.0 - LOSS_CONFIDENCE) / 2.0;
    (quantile(&b, n, tail), quantile(&b, n, 1.0 - tail))
}

/// The least k with P(X <= k) >= q, by bisection on the CDF (statrs' own inverse panics for
/// some small p, e.g. 0.05% of 1000).
fn quantile(b: &Binomial, n: u64, q: f64) -> u64 {
    let (mut lo, mut hi) = (0u64, n);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if b.cdf(mid) >= q {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    lo
}

fn rtt_check(spec: &LinkSpec, rtt: &RttSummary) -> LinkCheck {
    let us = |d: std::time::Duration| d.as_micros() as u64;
    let delay = us(spec.up.delay) + us(spec.down.delay);
    let jitter = us(spec.up.jitter) + us(spec.down.jitter);
    // Jitter adds 0..=jitter uniformly to each direction's delay: the sum's median is the
    // middle, and with reordering off a packet also waits for the one before it.
    let median = delay + jitter / 2;
    let tol = DELAY_TOLERANCE_US.max((median as f64 * DELAY_TOLERANCE_REL) as u64) + jitter / 2;
    let floor = DELAY_TOLERANCE_US.max((delay as f64 * DELAY_TOLERANCE_REL) as u64);
    // Under a rate that varies (down to a trace's outages), queueing moves the median: the
    // fastest round trip is what the delay alone sets.
    let varying = spec.directions().iter().any(|(_, d)| {
        d.rate
            .as_ref()
            .is_some_and(|r| !matches!(r, RateSpec::Fixed { .. }))
    });
    let ok = rtt.samples > 0
        && rtt.min_us + floor >= delay
        && if varying {
            rtt.min_us <= delay + tol
        } else {
            rtt.p50_us.abs_diff(median) <= tol
        };
    LinkCheck {
        field: "rtt".into(),
        asked: if jitter > 0 {
            format!("{} + 0..{} jitter", ms(delay), ms(jitter))
        } else {
            ms(delay)
        },
        measured: if rtt.samples == 0 {
            "no echo".into()
        } else {
            format!("median {}, min {}", ms(rtt.p50_us), ms(rtt.min_us))
        },
        tolerance: if varying {
            format!(
                "min within {} above the delay, not below (the rate varies)",
                ms(tol)
            )
        } else {
            format!("median within {}, min not below the delay", ms(tol))
        },
        ok,
        note: None,
        unmeasurable: false,
    }
}

fn loss_check(dir: &str, d: &Direction, m: &DirectionMeasured) -> LinkCheck {
    let lost = m.probe_sent.saturating_sub(m.probe_received);
    let (lo, hi) = loss_interval(m.probe_sent, d.loss);
    let pct = |k: u64| {
        if m.probe_sent == 0 {
            0.0
        } else {
            k as f64 * 100.0 / m.probe_sent as f64
        }
    };
    LinkCheck {
        field: format!("{dir}.loss"),
        asked: format!("{}%", d.loss * 100.0),
        measured: format!("{lost} of {} packets ({:.2}%)", m.probe_sent, pct(lost)),
        tolerance: format!(
            "{lo}..={hi} lost, the binomial's central {}%",
            LOSS_CONFIDENCE * 100.0
        ),
        ok: m.probe_sent > 0 && (lo..=hi).contains(&lost),
        note: (m.probe_sent == 0).then(|| "no probe packet reached this direction".into()),
        unmeasurable: false,
    }
}

fn rate_check(dir: &str, asked: Rate, flood: &Flood) -> LinkCheck {
    let got = flood.received_bps as f64;
    let want = asked.0 as f64;
    let ok = (got - want).abs() <= want * RATE_TOLERANCE;
    // A sender that could not offer more than the rate cannot show that the link holds it:
    // the machine, not the link, set what arrived.
    let short = (flood.sent_bps as f64) < want * (1.0 + RATE_TOLERANCE);
    // All it offered arrived, as much as the rate: the link was never pushed to its limit,
    // so the rate is neither confirmed nor missed, unless an earlier flood that offered more
    // than the rate missed it (that miss stands).
    let earlier_miss = flood
        .missed_before
        .iter()
        .any(|a| a.sent_bps as f64 >= want * (1.0 + RATE_TOLERANCE));
    let unmeasurable = short && ok && !earlier_miss;
    let note = if unmeasurable {
        Some(format!(
            "the link carried all the probe could offer ({}{}), within {}% of the rate; only a probe offering more shows that the link holds the rate, and this machine cannot send more",
            Rate(flood.sent_bps),
            match flood.missed_before.len() {
                0 => String::new(),
                n => format!(", as none of the {} floods before it could", n),
            },
            RATE_TOLERANCE * 100.0
        ))
    } else {
        notes(
            short.then(|| {
                format!(
                    "the probe could offer only {}: this machine cannot fill the link",
                    Rate(flood.sent_bps)
                )
            }),
            flood.repeats_note(ok && !short),
        )
    };
    LinkCheck {
        field: format!("{dir}.rate"),
        asked: asked.to_string(),
        measured: Rate(flood.received_bps).to_string(),
        tolerance: format!("within {}%", RATE_TOLERANCE * 100.0),
        ok: ok && !short,
        note,
        unmeasurable,
    }
}

/// A delivery trace's direction: the flood's delivered rate against the trace's rate over the
/// same span (both as tc counts bytes).
pub fn trace_rate_check(dir: &str, flood: &Flood, t: &TraceSpan) -> LinkCheck {
    let (got, want) = (flood.received_bps as f64, t.expected_bps as f64);
    let span = (t.span_us as f64 / 1e6).max(1e-6);
    let packets = 2.0 * f64::from(flood.packet_bytes) * 8.0 / span;
    let allowed = (want * TRACE_RATE_TOLERANCE).max(packets);
    // The flood must offer more than the trace carries there, else the sender set the rate.
    let short = (flood.sent_bps as f64) < want * (1.0 + TRACE_RATE_TOLERANCE);
    // No step goes below the floor, so a trace whose mean is under it is carried faster
    // than it asks, however close the flood came to the floored steps.
    let below_floor = t.mean_bps < MIN_RATE_BPS;
    let ok = (got - want).abs() <= allowed && !short && !below_floor;
    LinkCheck {
        field: format!("{dir}.rate"),
        asked: format!(
            "trace mean {}, {} over the {:.2} s measured",
            Rate(t.mean_bps),
            Rate(t.expected_bps),
            span
        ),
        measured: Rate(flood.received_bps).to_string(),
        tolerance: format!(
            "within {}% or two packets over the span ({})",
            TRACE_RATE_TOLERANCE * 100.0,
            Rate(allowed as u64)
        ),
        ok,
        note: notes(
            if below_floor {
                Some(format!(
                    "the trace's mean is below the {} the link can be set to, so the link carries more than the trace",
                    Rate(MIN_RATE_BPS)
                ))
            } else {
                short.then(|| {
                    format!(
                        "the probe could offer only {}: this machine cannot fill the link",
                        Rate(flood.sent_bps)
                    )
                })
            },
            flood.repeats_note(ok),
        ),
        unmeasurable: false,
    }
}

/// The check of a direction's rate by its flood, when the spec's rate is one a flood checks
/// (a fixed rate, or a delivery trace the flood's span was placed in).
pub fn flood_check(dir: &str, d: &Direction, f: &Flood) -> Option<LinkCheck> {
    match &d.rate {
        Some(RateSpec::Fixed { bps }) => Some(rate_check(dir, *bps, f)),
        Some(RateSpec::Mahimahi { .. }) => f.trace.as_ref().map(|t| trace_rate_check(dir, f, t)),
        _ => None,
    }
}

/// The checks of every field the spec sets. Rates that vary over time are not checked, but a
/// delivery trace's delivered rate is, when a flood measured it.
pub fn judge(
    spec: &LinkSpec,
    up: &DirectionMeasured,
    down: &DirectionMeasured,
    rtt: &RttSummary,
) -> Vec<LinkCheck> {
    let mut checks = vec![rtt_check(spec, rtt)];
    for (dir, d, m) in [("up", &spec.up, up), ("down", &spec.down, down)] {
        checks.push(loss_check(dir, d, m));
        checks.extend(m.flood.as_ref().and_then(|f| flood_check(dir, d, f)));
        if !d.reorders() {
            checks.push(LinkCheck {
                field: format!("{dir}.reorder"),
                asked: "off".into(),
                measured: format!("{} of {} packets reordered", m.reordered, m.probe_received),
                tolerance: "none".into(),
                ok: m.reordered == 0,
                note: None,
                unmeasurable: false,
            });
        }
    }
    unmeasurable_past_total_loss(spec, up, down, &mut checks);
    checks
}

/// A direction that drops every packet (`loss=100%`) carries no probe: its rate and order
/// cannot be measured, nor the round trip, nor what the other direction does to echoes that
/// never come. Those checks are neither confirmed nor missed; the loss itself still is.
fn unmeasurable_past_total_loss(
    spec: &LinkSpec,
    up: &DirectionMeasured,
    down: &DirectionMeasured,
    checks: &mut [LinkCheck],
) {
    let dead: Vec<&str> = [("up", &spec.up), ("down", &spec.down)]
        .into_iter()
        .filter(|(_, d)| d.loss >= 1.0)
        .map(|(n, _)| n)
        .collect();
    let Some(first) = dead.first() else {
        return;
    };
    let why = format!("{first} drops every packet (loss=100%), so no probe crosses it");
    for c in checks.iter_mut() {
        let (dir, what) = c.field.split_once('.').unwrap_or(("", c.field.as_str()));
        let probed = match dir {
            "up" => up.probe_sent > 0,
            "down" => down.probe_sent > 0,
            _ => false,
        };
        let cannot = match what {
            "rtt" => true,
            "loss" => !probed,
            _ => dead.contains(&dir) || !probed,
        };
        if cannot && !c.ok {
            c.unmeasurable = true;
            c.note = Some(why.clone());
        }
    }
}

#[cfg(test)]
mod tests;
