//! Emulated link specifications: `rate=100mbit,rtt=36ms,loss=1%`, with per-direction
//! overrides (`up.rate=10mbit`, `down.delay=5ms`) and variable rates
//! (`rate=50..150mbit/1s`, `rate=trace:FILE`). "up" is client -> server.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::link_bounds::{MAX_DELAY, MAX_QUEUE_BYTES, MAX_RATE_BPS};
use crate::units::{ByteSize, Rate, UnitError};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LinkError {
    #[error("link field `{field}`: {message}")]
    Field { field: String, message: String },
    #[error("link: `{0}` is not FIELD=VALUE")]
    Syntax(String),
    #[error("link: unknown field `{0}` (rate, rtt, delay, jitter, loss, reorder, queue, mtu; up./down. prefixes)")]
    Unknown(String),
    #[error("rate trace line {line}: {message}")]
    Trace { line: usize, message: String },
    #[error("link: empty spec (give at least one field, e.g. rate=10mbit)")]
    Empty,
    #[error("link field `{0}` is given twice")]
    Twice(String),
}

pub(crate) fn field_err(field: &str, message: impl fmt::Display) -> LinkError {
    LinkError::Field {
        field: field.into(),
        message: message.to_string(),
    }
}

/// A rate that may change over time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RateSpec {
    Fixed {
        bps: Rate,
    },
    /// Uniformly random in [min, max], drawn anew every `period` (IMC'17 Figure 11).
    Random {
        min: Rate,
        max: Rate,
        #[serde(with = "dur_us")]
        #[schemars(with = "u64")]
        period: Duration,
    },
    /// (time since start, rate) steps read from a file.
    Trace {
        path: String,
    },
    /// A packet-delivery trace in Mahimahi's format, looping (`spec::delivery_trace`).
    Mahimahi {
        path: String,
    },
}

impl RateSpec {
    /// The highest rate the link can take, for sizing queues and checking backends.
    pub fn peak(&self) -> Option<Rate> {
        match self {
            Self::Fixed { bps } => Some(*bps),
            Self::Random { max, .. } => Some(*max),
            Self::Trace { .. } | Self::Mahimahi { .. } => None,
        }
    }
}

/// Queue size at the bottleneck, in bytes or as time at the link rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Queue {
    Bytes(ByteSize),
    #[serde(with = "dur_us")]
    #[schemars(with = "u64")]
    Time(Duration),
}

impl Queue {
    pub fn bytes_at(&self, rate: Rate) -> u64 {
        match self {
            Self::Bytes(b) => b.0,
            Self::Time(t) => (rate.0 as f64 / 8.0 * t.as_secs_f64()).round() as u64,
        }
    }
}

mod dur_us {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(d.as_micros() as u64)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_micros)
    }
}

/// One direction of the link, as the router's egress toward that direction's receiver applies it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Direction {
    pub rate: Option<RateSpec>,
    #[serde(with = "dur_us")]
    #[schemars(with = "u64")]
    pub delay: Duration,
    #[serde(with = "dur_us")]
    #[schemars(with = "u64")]
    pub jitter: Duration,
    /// Whether jitter may reorder packets (netem's behaviour); `None` = yes when jitter > 0.
    pub reorder: Option<bool>,
    /// Drop probability, 0..=1.
    pub loss: f64,
    pub queue: Option<Queue>,
}

impl Direction {
    pub fn reorders(&self) -> bool {
        self.reorder.unwrap_or(!self.jitter.is_zero())
    }

    pub fn needs_delay_path(&self) -> bool {
        !self.delay.is_zero() || !self.jitter.is_zero()
    }
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LinkSpec {
    /// Client -> server.
    pub up: Direction,
    /// Server -> client.
    pub down: Direction,
    pub mtu: Option<u32>,
    /// The text it was parsed from, for reports.
    pub text: String,
}

pub(crate) fn parse_duration(field: &str, v: &str) -> Result<Duration, LinkError> {
    let v = v.trim();
    let (num, mult) = if let Some(n) = v.strip_suffix("us") {
        (n, 1e-6)
    } else if let Some(n) = v.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = v.strip_suffix('s') {
        (n, 1.0)
    } else {
        return Err(field_err(field, format!("`{v}` needs a unit: us, ms or s")));
    };
    let x: f64 = num
        .parse()
        .map_err(|_| field_err(field, format!("`{v}` is not a duration")))?;
    if !(x.is_finite() && x >= 0.0) {
        return Err(field_err(field, format!("`{v}` must be zero or more")));
    }
    Duration::try_from_secs_f64(x * mult)
        .map_err(|_| field_err(field, format!("`{v}` is too long")))
}

/// The slowest link rate: tc counts whole bytes per second, and below about a kilobyte per
/// second a full-size packet takes longer to send than any timeout here allows.
pub const MIN_RATE_BPS: u64 = 8_000;

fn parse_rate(field: &str, v: &str) -> Result<Rate, LinkError> {
    let r: Rate = v.parse().map_err(|e: UnitError| field_err(field, e))?;
    if r.0 < MIN_RATE_BPS {
        return Err(field_err(field, "must be at least 8kbit"));
    }
    if r.0 > MAX_RATE_BPS {
        return Err(field_err(
            field,
            "must be at most 400gbit (tc counts a queue in 32 bits)",
        ));
    }
    Ok(r)
}

fn parse_rate_spec(field: &str, v: &str) -> Result<RateSpec, LinkError> {
    if let Some(path) = v.strip_prefix("trace:") {
        if path.is_empty() {
            return Err(field_err(field, "trace: needs a file path"));
        }
        return Ok(RateSpec::Trace { path: path.into() });
    }
    if let Some(path) = v.strip_prefix("mahimahi:") {
        if path.is_empty() {
            return Err(field_err(field, "mahimahi: needs a file path"));
        }
        return Ok(RateSpec::Mahimahi { path: path.into() });
    }
    let Some((lo, rest)) = v.split_once("..") else {
        return Ok(RateSpec::Fixed {
            bps: parse_rate(field, v)?,
        });
    };
    let (hi, period) = rest
        .split_once('/')
        .ok_or_else(|| field_err(field, "a range needs a period: MIN..MAXunit/PERIOD"))?;
    let max = parse_rate(field, hi)?;
    // `50..150mbit`: the lower bound borrows the upper bound's unit when it has none.
    let lo_full = if lo.chars().all(|c| c.is_ascii_digit() || c == '.') {
        let unit: String = hi
            .chars()
            .skip_while(|c| c.is_ascii_digit() || *c == '.')
            .collect();
        format!("{lo}{unit}")
    } else {
        lo.to_string()
    };
    let min = parse_rate(field, &lo_full)?;
    if min > max {
        return Err(field_err(field, "range minimum exceeds its maximum"));
    }
    let period = parse_duration(field, period)?;
    if period.is_zero() {
        return Err(field_err(field, "period must be more than 0"));
    }
    Ok(RateSpec::Random { min, max, period })
}

fn parse_loss(field: &str, v: &str) -> Result<f64, LinkError> {
    let (num, scale) = match v.strip_suffix('%') {
        Some(n) => (n, 0.01),
        None => (v, 1.0),
    };
    let x: f64 = num.parse().map_err(|_| {
        field_err(
            field,
            format!("`{v}` is not a probability (e.g. 1% or 0.01)"),
        )
    })?;
    let p = x * scale;
    if !(0.0..=1.0).contains(&p) {
        return Err(field_err(field, format!("`{v}` is outside 0..100%")));
    }
    Ok(p)
}

fn parse_queue(field: &str, v: &str) -> Result<Queue, LinkError> {
    if v.ends_with('s') && !v.ends_with("B") {
        return Ok(Queue::Time(parse_duration(field, v)?));
    }
    let b: ByteSize = v.parse().map_err(|e: UnitError| field_err(field, e))?;
    if b.0 == 0 {
        return Err(field_err(field, "must be more than 0"));
    }
    if b.0 > MAX_QUEUE_BYTES {
        return Err(field_err(
            field,
            format!("`{v}` is more than {MAX_QUEUE_BYTES} bytes (tc counts a queue in 32 bits)"),
        ));
    }
    Ok(Queue::Bytes(b))
}

fn parse_bool(field: &str, v: &str) -> Result<bool, LinkError> {
    match v {
        "on" | "yes" | "true" | "1" => Ok(true),
        "off" | "no" | "false" | "0" => Ok(false),
        _ => Err(field_err(field, format!("`{v}` is not on/off"))),
    }
}

fn apply(d: &mut Direction, key: &str, field: &str, v: &str) -> Result<(), LinkError> {
    match key {
        "rate" => d.rate = Some(parse_rate_spec(field, v)?),
        "delay" => d.delay = bounded(field, v, MAX_DELAY)?,
        "jitter" => d.jitter = bounded(field, v, MAX_DELAY)?,
        "loss" => d.loss = parse_loss(field, v)?,
        "reorder" => d.reorder = Some(parse_bool(field, v)?),
        "queue" => d.queue = Some(parse_queue(field, v)?),
        _ => return Err(LinkError::Unknown(field.into())),
    }
    Ok(())
}

impl FromStr for LinkSpec {
    type Err = LinkError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut spec = Self {
            text: s.trim().to_string(),
            ..Self::default()
        };
        // Both-direction fields first, so `up.`/`down.` overrides win wherever they appear.
        let mut overrides = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (k, v) = item
                .split_once('=')
                .ok_or_else(|| LinkError::Syntax(item.into()))?;
            let (k, v) = (k.trim(), v.trim());
            // `rtt` is `delay` counted both ways: the same field under two names.
            let canonical = if k == "rtt" { "delay" } else { k };
            if !seen.insert(canonical.to_string()) {
                return Err(LinkError::Twice(k.to_string()));
            }
            if let Some(key) = k.strip_prefix("up.") {
                overrides.push((true, key.to_string(), k.to_string(), v.to_string()));
            } else if let Some(key) = k.strip_prefix("down.") {
                overrides.push((false, key.to_string(), k.to_string(), v.to_string()));
            } else if k == "rtt" {
                let half = bounded(k, v, MAX_DELAY * 2)? / 2;
                spec.up.delay = half;
                spec.down.delay = half;
            } else if k == "mtu" {
                let m: u32 = v
                    .parse()
                    .map_err(|_| field_err(k, format!("`{v}` is not a whole number")))?;
                if !(576..=65535).contains(&m) {
                    return Err(field_err(k, "must be between 576 and 65535"));
                }
                spec.mtu = Some(m);
            } else {
                apply(&mut spec.up, k, k, v)?;
                apply(&mut spec.down, k, k, v)?;
            }
        }
        if seen.is_empty() {
            return Err(LinkError::Empty);
        }
        for (up, key, field, v) in overrides {
            let d = if up { &mut spec.up } else { &mut spec.down };
            apply(d, &key, &field, &v)?;
        }
        check_bounds(&spec)?;
        Ok(spec)
    }
}

impl LinkSpec {
    /// Round-trip time the link adds.
    pub fn added_rtt(&self) -> Duration {
        self.up.delay + self.down.delay
    }

    pub fn directions(&self) -> [(&'static str, &Direction); 2] {
        [("up", &self.up), ("down", &self.down)]
    }
}

/// Parses a rate trace: one `SECONDS RATE` pair per line (`#` comments), times increasing.
pub fn parse_trace(text: &str) -> Result<Vec<(Duration, Rate)>, LinkError> {
    let mut out: Vec<(Duration, Rate)> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let err = |m: String| LinkError::Trace {
            line: i + 1,
            message: m,
        };
        let mut parts = line.split_whitespace();
        let (Some(t), Some(r), None) = (parts.next(), parts.next(), parts.next()) else {
            return Err(err("expected `SECONDS RATE`".into()));
        };
        let t: f64 = t
            .parse()
            .map_err(|_| err(format!("`{t}` is not seconds")))?;
        if !(t.is_finite() && t >= 0.0) {
            return Err(err(format!("`{t}` is not a time")));
        }
        let r = parse_rate("rate", r).map_err(|e| err(e.to_string()))?;
        let at = Duration::try_from_secs_f64(t)
            .map_err(|_| err(format!("`{t}` seconds is too long")))?;
        if out.last().is_some_and(|(prev, _)| *prev >= at) {
            return Err(err("times must increase".into()));
        }
        out.push((at, r));
    }
    if out.is_empty() {
        return Err(LinkError::Trace {
            line: 0,
            message: "no entries".into(),
        });
    }
    Ok(out)
}

/// A duration of at most `max`.
fn bounded(field: &str, v: &str, max: Duration) -> Result<Duration, LinkError> {
    let d = parse_duration(field, v)?;
    if d > max {
        return Err(field_err(
            field,
            format!(
                "`{v}` is more than {}s, the longest the link holds a packet",
                max.as_secs()
            ),
        ));
    }
    Ok(d)
}

/// What each field allows alone can still be too much together: a direction's delay and
/// jitter, a queue given as time at a fast rate.
fn check_bounds(spec: &LinkSpec) -> Result<(), LinkError> {
    for (name, d) in spec.directions() {
        if d.delay + d.jitter > MAX_DELAY {
            return Err(field_err(
                &format!("{name}.jitter"),
                format!(
                    "delay {:?} plus jitter {:?} is more than {}s, the longest the link holds a packet",
                    d.delay,
                    d.jitter,
                    MAX_DELAY.as_secs()
                ),
            ));
        }
        let peak = d.rate.as_ref().and_then(RateSpec::peak);
        if let (Some(q @ Queue::Time(t)), Some(rate)) = (d.queue, peak) {
            if q.bytes_at(rate) > MAX_QUEUE_BYTES {
                return Err(field_err(
                    &format!("{name}.queue"),
                    format!(
                        "{t:?} at {rate} is more than {MAX_QUEUE_BYTES} bytes (tc counts a queue in 32 bits)"
                    ),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_papers_links() {
        let l: LinkSpec = "rate=100mbit,rtt=36ms,loss=1%".parse().unwrap();
        assert_eq!(
            l.up.rate,
            Some(RateSpec::Fixed {
                bps: Rate(100_000_000)
            })
        );
        assert_eq!(l.up.delay, Duration::from_millis(18));
        assert_eq!(l.down.delay, Duration::from_millis(18));
        assert_eq!(l.added_rtt(), Duration::from_millis(36));
        assert!((l.down.loss - 0.01).abs() < 1e-12);

        let v: LinkSpec = "rate=50..150mbit/1s".parse().unwrap();
        assert_eq!(
            v.down.rate,
            Some(RateSpec::Random {
                min: Rate(50_000_000),
                max: Rate(150_000_000),
                period: Duration::from_secs(1)
            })
        );
        let j: LinkSpec = "rtt=112ms,jitter=10ms".parse().unwrap();
        assert!(j.up.reorders());
        let q: LinkSpec = "rate=5mbit,queue=30KB,down.queue=50ms".parse().unwrap();
        assert_eq!(q.up.queue.unwrap().bytes_at(Rate(5_000_000)), 30_000);
        assert_eq!(q.down.queue.unwrap().bytes_at(Rate(5_000_000)), 31_250);
    }

    #[test]
    fn direction_overrides_win_in_any_order() {
        let l: LinkSpec = "up.rate=10mbit,rate=100mbit,down.delay=5ms,delay=1ms,mtu=1400"
            .parse()
            .unwrap();
        assert_eq!(
            l.up.rate,
            Some(RateSpec::Fixed {
                bps: Rate(10_000_000)
            })
        );
        assert_eq!(
            l.down.rate,
            Some(RateSpec::Fixed {
                bps: Rate(100_000_000)
            })
        );
        assert_eq!(l.up.delay, Duration::from_millis(1));
        assert_eq!(l.down.delay, Duration::from_millis(5));
        assert_eq!(l.mtu, Some(1400));
    }

    #[test]
    fn bad_fields_are_named() {
        insta::assert_snapshot!([
            "rate=fast",
            "rate=100mbps",
            "rtt=36",
            "loss=150%",
            "bandwidth=1gbit",
            "rate",
            "rate=150..50mbit/1s",
            "rate=50..150mbit",
            "up.colour=red",
            "mtu=100",
            "queue=0B",
            "reorder=maybe",
        ]
        .iter()
        .map(|s| format!("{s}: {}", s.parse::<LinkSpec>().unwrap_err()))
        .collect::<Vec<_>>()
        .join("\n"));
    }

    #[test]
    fn empty_repeated_and_tiny_are_refused() {
        assert!(matches!("".parse::<LinkSpec>(), Err(LinkError::Empty)));
        assert!(matches!(" , ".parse::<LinkSpec>(), Err(LinkError::Empty)));
        for twice in [
            "rate=10mbit,rate=20mbit",
            "rtt=10ms,delay=5ms",
            "up.rate=1mbit,up.rate=2mbit",
        ] {
            assert!(
                matches!(twice.parse::<LinkSpec>(), Err(LinkError::Twice(_))),
                "{twice}"
            );
        }
        assert!("rate=10mbit,up.rate=20mbit".parse::<LinkSpec>().is_ok());
        let tiny = "rate=1bit".parse::<LinkSpec>().unwrap_err().to_string();
        assert!(tiny.contains("`rate`") && tiny.contains("8kbit"), "{tiny}");
        assert!("rate=8kbit".parse::<LinkSpec>().is_ok());
        let line = parse_trace("0 10mbit\n1e300 5mbit\n")
            .unwrap_err()
            .to_string();
        assert!(line.contains("line 2"), "{line}");
    }

    #[test]
    fn traces() {
        let t = parse_trace("# t rate\n0 10mbit\n1.5 20mbit\n").unwrap();
        assert_eq!(
            t,
            vec![
                (Duration::ZERO, Rate(10_000_000)),
                (Duration::from_millis(1500), Rate(20_000_000))
            ]
        );
        assert!(parse_trace("1 10mbit\n0 5mbit").is_err());
        assert!(parse_trace("").is_err());
        assert!(parse_trace("0 10mb").is_err());
    }

    proptest::proptest! {
        #[test]
        fn link_parser_never_panics(s in "\\PC{0,60}") {
            let _ = s.parse::<LinkSpec>();
            let _ = parse_trace(&s);
        }

        #[test]
        fn link_fields_with_any_number_never_panic(
            field in proptest::sample::select(vec![
                "rate", "rtt", "delay", "jitter", "loss", "queue", "mtu", "up.rate", "down.delay",
            ]),
            num in proptest::num::f64::ANY,
            unit in proptest::sample::select(vec!["", "s", "ms", "us", "mbit", "gbit", "%", "KB", "..10mbit/1s"]),
        ) {
            let _ = format!("{field}={num}{unit}").parse::<LinkSpec>();
            let _ = format!("{field}={num:e}{unit}").parse::<LinkSpec>();
        }

        #[test]
        fn trace_lines_with_any_time_never_panic(
            t in proptest::num::f64::ANY,
            rate in proptest::sample::select(vec!["5mbit", "0bit", "1e300gbit", "x"]),
        ) {
            let _ = parse_trace(&format!("{t} {rate}\n"));
            let _ = parse_trace(&format!("0 1mbit\n{t:e} {rate}\n"));
        }
    }
}
