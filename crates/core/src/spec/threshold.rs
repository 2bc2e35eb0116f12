//! `--fail-if EXPR`: a condition on a finished run's figures that fails the command, as a
//! load generator in CI is expected to (k6's thresholds, hyperfine's exit codes).
//!
//! `METRIC OP VALUE`, with `OP` one of `>`, `>=`, `<`, `<=`, and the value in the metric's
//! own unit: `p99>50ms`, `ttfb.p90>=20ms`, `errors>0`, `errors>0.1%`, `rate<19000`,
//! `goodput<900mbit`, `plt>2s`, `handshake>100ms`.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::units::Rate;

/// A percentile or other figure of a latency histogram.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Figure {
    P50,
    P90,
    P99,
    P999,
    Max,
    Mean,
}

impl Figure {
    const ALL: [(&'static str, Self); 6] = [
        ("p50", Self::P50),
        ("p90", Self::P90),
        ("p99", Self::P99),
        ("p999", Self::P999),
        ("max", Self::Max),
        ("mean", Self::Mean),
    ];

    fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(_, f)| *f == self)
            .map_or("", |(n, _)| n)
    }
}

/// What a threshold looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case", tag = "metric", content = "figure")]
pub enum Metric {
    /// Object latency (request sent to last byte) over all runs' merged histogram.
    Latency(Figure),
    /// Time to first byte over all runs' merged histogram.
    Ttfb(Figure),
    /// Errors of every kind, counted.
    Errors,
    /// Failed objects as a share of objects that ended (completed or failed).
    ErrorShare,
    /// Objects per second, the median over runs.
    Rate,
    /// Goodput in bit/s, the median over runs.
    Goodput,
    /// Page load time, the median over runs.
    Plt,
    /// Handshake time, the median over runs.
    Handshake,
    /// `compare`: B is worse than A by the comparison's metric, significantly (the verdict),
    /// by this many percent of A or more (the effect's estimate).
    BWorse,
    /// `compare`: A is worse than B, likewise.
    AWorse,
}

impl Metric {
    /// Judged on a comparison (`compare`), not on a single benchmark's report.
    pub fn of_comparison(self) -> bool {
        matches!(self, Self::BWorse | Self::AWorse)
    }
}

/// The comparison that fails the command when it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub enum Op {
    #[serde(rename = ">")]
    Above,
    #[serde(rename = ">=")]
    AtLeast,
    #[serde(rename = "<")]
    Below,
    #[serde(rename = "<=")]
    AtMost,
}

impl Op {
    pub fn holds(self, observed: f64, limit: f64) -> bool {
        match self {
            Self::Above => observed > limit,
            Self::AtLeast => observed >= limit,
            Self::Below => observed < limit,
            Self::AtMost => observed <= limit,
        }
    }

    fn text(self) -> &'static str {
        match self {
            Self::Above => ">",
            Self::AtLeast => ">=",
            Self::Below => "<",
            Self::AtMost => "<=",
        }
    }
}

/// One `--fail-if` condition: fails the command when `metric op limit` holds. The limit is in
/// the metric's unit: microseconds for times, bit/s for goodput, objects per second for the
/// rate, a count or a percentage for errors.
#[derive(Debug, Clone, PartialEq)]
pub struct Threshold {
    pub metric: Metric,
    pub op: Op,
    pub limit: f64,
    /// As the user wrote it, for messages and the report.
    pub text: String,
}

impl Threshold {
    /// The unit `limit` and an observed value are in.
    pub fn unit(&self) -> &'static str {
        match self.metric {
            Metric::Latency(_) | Metric::Ttfb(_) | Metric::Plt | Metric::Handshake => "us",
            Metric::Errors => "errors",
            Metric::ErrorShare | Metric::BWorse | Metric::AWorse => "%",
            Metric::Rate => "objects/s",
            Metric::Goodput => "bit/s",
        }
    }
}

impl fmt::Display for Threshold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ThresholdError {
    #[error("`{0}`: write METRIC OP VALUE with OP one of >, >=, <, <= (e.g. p99>50ms)")]
    NoOp(String),
    #[error("`{0}`: unknown metric `{1}` (use p50, p90, p99, p999, max, mean, ttfb.p99 and the like, errors, rate, goodput, plt, handshake; for compare a-worse, b-worse)")]
    Metric(String, String),
    #[error("`{0}`: `{1}` is not a time (e.g. 50ms, 2s)")]
    Time(String, String),
    #[error("`{0}`: `{1}` is not a rate (e.g. 900mbit)")]
    Rate(String, String),
    #[error("`{0}`: `{1}` is not a number, or a percentage with errors")]
    Number(String, String),
    #[error("`{0}`: a-worse and b-worse take > or >= and a percentage (e.g. b-worse>5%)")]
    Worse(String),
}

fn metric(expr: &str, name: &str) -> Result<Metric, ThresholdError> {
    let figure = |n: &str| Figure::ALL.iter().find(|(k, _)| *k == n).map(|(_, f)| *f);
    let name = name.trim().to_ascii_lowercase();
    let m = match name.as_str() {
        "errors" => Metric::Errors,
        "rate" => Metric::Rate,
        "goodput" => Metric::Goodput,
        "plt" => Metric::Plt,
        "handshake" => Metric::Handshake,
        "b-worse" => Metric::BWorse,
        "a-worse" => Metric::AWorse,
        n => {
            let (family, fig) = match n.split_once('.') {
                Some(("latency", f)) => (Metric::Latency as fn(Figure) -> Metric, f),
                Some(("ttfb", f)) => (Metric::Ttfb as fn(Figure) -> Metric, f),
                Some(_) => ((Metric::Latency as fn(Figure) -> Metric), ""),
                None => (Metric::Latency as fn(Figure) -> Metric, n),
            };
            match figure(fig) {
                Some(f) => family(f),
                None => return Err(ThresholdError::Metric(expr.into(), name.clone())),
            }
        }
    };
    Ok(m)
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

impl FromStr for Threshold {
    type Err = ThresholdError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let text = s.trim().to_string();
        let at = text
            .find(['<', '>'])
            .ok_or_else(|| ThresholdError::NoOp(text.clone()))?;
        let (name, rest) = text.split_at(at);
        let (op, value) = match rest.strip_prefix(">=") {
            Some(v) => (Op::AtLeast, v),
            None => match rest.strip_prefix("<=") {
                Some(v) => (Op::AtMost, v),
                None => match rest.strip_prefix('>') {
                    Some(v) => (Op::Above, v),
                    None => (Op::Below, &rest[1..]),
                },
            },
        };
        let value = value.trim();
        if name.trim().is_empty() || value.is_empty() || value.contains(['<', '>', '=']) {
            return Err(ThresholdError::NoOp(text));
        }
        let mut metric = metric(&text, name)?;
        let number = |v: &str| -> Result<f64, ThresholdError> {
            v.parse::<f64>()
                .ok()
                .filter(|x| x.is_finite() && *x >= 0.0)
                .ok_or_else(|| ThresholdError::Number(text.clone(), v.into()))
        };
        let limit = match metric {
            Metric::Latency(_) | Metric::Ttfb(_) | Metric::Plt | Metric::Handshake => {
                humantime::parse_duration(value)
                    .map(micros)
                    .map_err(|_| ThresholdError::Time(text.clone(), value.into()))?
            }
            Metric::Goodput => value
                .parse::<Rate>()
                .map(|r| r.0 as f64)
                .map_err(|_| ThresholdError::Rate(text.clone(), value.into()))?,
            Metric::Rate => number(value.strip_suffix("/s").unwrap_or(value))?,
            Metric::BWorse | Metric::AWorse => {
                let pct = value.strip_suffix('%').map(str::trim);
                match (op, pct) {
                    (Op::Above | Op::AtLeast, Some(p)) => number(p)?,
                    _ => return Err(ThresholdError::Worse(text.clone())),
                }
            }
            Metric::Errors | Metric::ErrorShare => match value.strip_suffix('%') {
                Some(p) => {
                    metric = Metric::ErrorShare;
                    let p = number(p.trim())?;
                    if p > 100.0 {
                        return Err(ThresholdError::Number(text.clone(), value.into()));
                    }
                    p
                }
                None => number(value)?,
            },
        };
        Ok(Self {
            metric,
            op,
            limit,
            text: text.clone(),
        })
    }
}

impl Metric {
    /// The metric's name as `--fail-if` spells it.
    pub fn name(self) -> String {
        match self {
            Self::Latency(f) => f.name().to_string(),
            Self::Ttfb(f) => format!("ttfb.{}", f.name()),
            Self::Errors | Self::ErrorShare => "errors".into(),
            Self::Rate => "rate".into(),
            Self::Goodput => "goodput".into(),
            Self::Plt => "plt".into(),
            Self::Handshake => "handshake".into(),
            Self::BWorse => "b-worse".into(),
            Self::AWorse => "a-worse".into(),
        }
    }
}

impl Op {
    /// `>` and the like, as written.
    pub fn as_str(self) -> &'static str {
        self.text()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Threshold {
        s.parse().unwrap()
    }

    #[test]
    fn each_metric_reads_its_own_unit() {
        let p = t("p99>50ms");
        assert_eq!(
            (p.metric, p.op, p.limit),
            (Metric::Latency(Figure::P99), Op::Above, 50_000.0)
        );
        let p = t(" ttfb.p90 >= 1s ");
        assert_eq!(
            (p.metric, p.op, p.limit),
            (Metric::Ttfb(Figure::P90), Op::AtLeast, 1e6)
        );
        assert_eq!(t("latency.max<=2s").metric, Metric::Latency(Figure::Max));
        let e = t("errors>0");
        assert_eq!((e.metric, e.limit), (Metric::Errors, 0.0));
        let e = t("errors>0.1%");
        assert_eq!((e.metric, e.limit), (Metric::ErrorShare, 0.1));
        assert_eq!(e.unit(), "%");
        let r = t("rate<19000");
        assert_eq!(
            (r.metric, r.op, r.limit),
            (Metric::Rate, Op::Below, 19_000.0)
        );
        assert_eq!(t("rate<19000/s").limit, 19_000.0);
        assert_eq!(t("goodput<900mbit").limit, 900e6);
        assert_eq!(t("plt>2s").metric, Metric::Plt);
        assert_eq!(t("handshake<=100ms").op, Op::AtMost);
        assert_eq!(t("P99>1ms").metric.name(), "p99");
        assert_eq!(t("ttfb.p999>1ms").metric.name(), "ttfb.p999");
        let w = t("b-worse>5%");
        assert_eq!(
            (w.metric, w.op, w.limit, w.unit()),
            (Metric::BWorse, Op::Above, 5.0, "%")
        );
        assert!(w.metric.of_comparison() && !t("p99>1s").metric.of_comparison());
        assert_eq!(t("a-worse>=0%").metric, Metric::AWorse);
    }

    #[test]
    fn bad_expressions_name_what_is_wrong() {
        for (bad, says) in [
            ("p99", "METRIC OP VALUE"),
            ("p99=5ms", "METRIC OP VALUE"),
            (">5ms", "METRIC OP VALUE"),
            ("p99>", "METRIC OP VALUE"),
            ("p99>>5ms", "METRIC OP VALUE"),
            ("p98>5ms", "unknown metric `p98`"),
            ("ttfb.rate>5", "unknown metric"),
            ("p99>5", "not a time"),
            ("goodput<5MB", "not a rate"),
            ("rate<fast", "not a number"),
            ("rate<-1", "not a number"),
            ("errors>150%", "not a number"),
            ("errors>NaN", "not a number"),
            ("b-worse<5%", "take > or >="),
            ("b-worse>5", "take > or >="),
        ] {
            let e = bad.parse::<Threshold>().unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
            assert!(e.contains(&format!("`{}`", bad.trim())), "{bad}: {e}");
        }
    }

    #[test]
    fn ops_hold_as_written() {
        assert!(Op::Above.holds(2.0, 1.0) && !Op::Above.holds(1.0, 1.0));
        assert!(Op::AtLeast.holds(1.0, 1.0) && !Op::AtLeast.holds(0.5, 1.0));
        assert!(Op::Below.holds(0.5, 1.0) && !Op::Below.holds(1.0, 1.0));
        assert!(Op::AtMost.holds(1.0, 1.0) && !Op::AtMost.holds(1.5, 1.0));
    }

    proptest::proptest! {
        #[test]
        fn any_text_is_a_threshold_or_an_error(s in "\\PC{0,40}") {
            let _ = s.parse::<Threshold>();
        }

        #[test]
        fn near_misses_are_a_threshold_or_an_error(
            m in "(p|ttfb\\.p|errors|rate|goodput|plt|handshake|latency\\.)[0-9a-z.]{0,4}",
            op in "[<>=]{1,3}",
            v in "[0-9.]{0,8}(ms|s|us|%|mbit|/s|)",
        ) {
            if let Ok(t) = format!("{m}{op}{v}").parse::<Threshold>() {
                proptest::prop_assert!(t.limit.is_finite() && t.limit >= 0.0);
            }
        }
    }
}
