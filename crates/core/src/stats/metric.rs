//! What the rounds of a comparison compare: one figure per run, with a direction. A run's
//! figure (`Metric::of`) is read in `report`, beside the run report it reads.

use serde::{Deserialize, Serialize};

use crate::spec::load::Load;

/// One figure per run. Latencies are in microseconds (an open loop's count from the intended
/// start), goodput in bit/s, the request rate in completions per second of the measured time.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum Metric {
    /// Page load time (not for a held load, which has no page).
    #[default]
    Plt,
    Goodput,
    Rps,
    P50,
    P99,
    P999,
    /// A video's time to start (session start to playback), us.
    Start,
    /// A video's stalled time over its played time.
    Rebuffer,
    /// A video's mean bitrate, bit/s.
    Bitrate,
    /// The share of a video downloaded (with a watch time).
    Loaded,
}

impl Metric {
    pub const ALL: [Self; 10] = [
        Self::Plt,
        Self::Goodput,
        Self::Rps,
        Self::P50,
        Self::P99,
        Self::P999,
        Self::Start,
        Self::Rebuffer,
        Self::Bitrate,
        Self::Loaded,
    ];

    /// What a comparison uses unless told: PLT for a page, the tail at a fixed rate, and
    /// goodput for a closed loop (which runs as fast as the server answers).
    pub fn default_for(load: Option<&Load>) -> Self {
        match load {
            None => Self::Plt,
            Some(l) if l.rate.is_some() => Self::P99,
            Some(_) => Self::Goodput,
        }
    }

    /// As `default_for`, and a video session is judged by its time to start, which every
    /// session that plays has (its download time is paced by playback, and its rebuffer
    /// ratio is often zero on both sides).
    pub fn default_for_spec(spec: &crate::spec::RunSpec) -> Self {
        match spec.video {
            Some(_) => Self::Start,
            None => Self::default_for(spec.load.as_ref()),
        }
    }

    /// Why this metric cannot judge runs of this kind, if it cannot.
    pub fn check(self, load: Option<&Load>) -> Result<(), String> {
        if self == Self::Plt && load.is_some() {
            return Err("a held load (--duration) has no page load time: choose goodput, rps, p50, p99 or p999".into());
        }
        Ok(())
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Plt => "plt",
            Self::Goodput => "goodput",
            Self::Rps => "rps",
            Self::P50 => "p50",
            Self::P99 => "p99",
            Self::P999 => "p999",
            Self::Start => "start",
            Self::Rebuffer => "rebuffer",
            Self::Bitrate => "bitrate",
            Self::Loaded => "loaded",
        }
    }

    /// A video's figure, which only a video session has.
    pub fn is_video(self) -> bool {
        matches!(
            self,
            Self::Start | Self::Rebuffer | Self::Bitrate | Self::Loaded
        )
    }

    /// How a table heads the figure.
    pub fn title(self) -> &'static str {
        match self {
            Self::Plt => "PLT",
            Self::Goodput => "goodput",
            Self::Rps => "requests/s",
            Self::P50 => "p50 latency",
            Self::P99 => "p99 latency",
            Self::P999 => "p99.9 latency",
            Self::Start => "time to start",
            Self::Rebuffer => "rebuffer ratio",
            Self::Bitrate => "mean bitrate",
            Self::Loaded => "video loaded",
        }
    }

    pub fn unit(self) -> &'static str {
        match self {
            Self::Goodput => "bit/s",
            Self::Rps => "req/s",
            Self::Bitrate => "bit/s",
            Self::Rebuffer | Self::Loaded => "ratio",
            _ => "us",
        }
    }

    pub fn higher_is_better(self) -> bool {
        matches!(
            self,
            Self::Goodput | Self::Rps | Self::Bitrate | Self::Loaded
        )
    }

    /// A value for people: ms, Mbit/s or req/s.
    pub fn show(self, v: f64) -> String {
        match self {
            Self::Goodput | Self::Bitrate => format!("{:.2} Mbit/s", v / 1e6),
            Self::Rebuffer | Self::Loaded => format!("{:.2}%", v * 100.0),
            Self::Rps => format!("{v:.1} req/s"),
            _ => format!("{:.2} ms", v / 1000.0),
        }
    }
}

impl std::fmt::Display for Metric {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Metric {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|m| m.name() == s.trim())
            .ok_or_else(|| {
                format!("`{s}` is not plt, goodput, rps, p50, p99, p999, start, rebuffer, bitrate or loaded")
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_defaults_follow_the_load() {
        for m in Metric::ALL {
            assert_eq!(m.name().parse::<Metric>(), Ok(m));
            assert_eq!(
                serde_json::to_string(&m).unwrap(),
                format!("\"{}\"", m.name())
            );
        }
        assert!("p95".parse::<Metric>().unwrap_err().contains("`p95`"));
        let mut l = Load {
            duration: std::time::Duration::from_secs(10),
            warmup: std::time::Duration::ZERO,
            rate: None,
            arrivals: Default::default(),
            max_inflight: 1,
        };
        assert_eq!(Metric::default_for(None), Metric::Plt);
        assert_eq!(Metric::default_for(Some(&l)), Metric::Goodput);
        assert!(Metric::Plt.check(Some(&l)).is_err());
        l.rate = Some(100.0);
        assert_eq!(Metric::default_for(Some(&l)), Metric::P99);
        assert!(Metric::P99.check(Some(&l)).is_ok() && Metric::Plt.check(None).is_ok());
        let mut spec = crate::spec::RunSpec::default();
        assert_eq!(Metric::default_for_spec(&spec), Metric::Plt);
        spec.video = Some(crate::video::VideoSpec::new(vec![crate::Rate(1_000_000)]));
        assert_eq!(Metric::default_for_spec(&spec), Metric::Start);
    }

    proptest::proptest! {
        #[test]
        fn metric_parser_never_panics(s in "\\PC{0,20}") {
            let _ = s.parse::<Metric>();
        }
    }
}
