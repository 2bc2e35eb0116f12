//! Whose clock measured a run's times, and the checks that keep a figure from being read
//! against the wrong one: two sides timed at different places are never judged against each
//! other, and a goodput above what the link lets through is never shown plain.

use serde::{Deserialize, Serialize};

use crate::report::third_party::TimingSource;
use crate::report::RunReport;
use crate::spec::link::{LinkSpec, RateSpec};
use crate::units::Rate;

/// Whose clock a run's times (handshakes, TTFB, object latencies, PLT, goodput) are.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum WhoseClock {
    /// qbench's own client, on the run's monotonic clock.
    Qbench,
    /// A third-party client's own account of its requests, placed on the run's clock.
    Program,
    /// The server's view: the client reported no times of its own, so an object runs from
    /// the server reading its request to handing its last byte to its kernel.
    Server,
}

impl WhoseClock {
    pub fn of(run: &RunReport) -> Self {
        match run.third_party.as_ref().map(|t| t.timings) {
            None => Self::Qbench,
            Some(TimingSource::Client) => Self::Program,
            Some(TimingSource::Server) => Self::Server,
        }
    }

    /// qbench's clock and a program's own both stand at the client and time the same events
    /// (a request sent, its bytes received); the server's stands a link away and sees others
    /// (a request read, bytes handed to its kernel), so its times are not comparable to them.
    pub fn at_client(self) -> bool {
        self != Self::Server
    }

    /// In words, for a run of `program` (`None`: qbench's own client).
    pub fn words(self, program: Option<&str>) -> String {
        match (self, program) {
            (Self::Qbench, _) => "qbench's client".into(),
            (Self::Program, Some(p)) => format!("{p}'s own account"),
            (Self::Program, None) => "the client program's own account".into(),
            (Self::Server, Some(p)) => format!("the server's view ({p} reported no times)"),
            (Self::Server, None) => "the server's view".into(),
        }
    }
}

/// Every clock a side's runs were timed by, in order, each once.
pub fn clocks_of(runs: &[RunReport]) -> Vec<WhoseClock> {
    let mut all: Vec<WhoseClock> = runs.iter().map(WhoseClock::of).collect();
    all.sort();
    all.dedup();
    all
}

/// Whose clock a side's runs were timed by, in words: "curl's own account", or each clock
/// with its runs when they differ.
pub fn side_words(runs: &[RunReport]) -> String {
    let program = runs
        .iter()
        .find_map(|r| r.third_party.as_ref())
        .map(|t| t.client.name().to_string());
    let clocks = clocks_of(runs);
    if clocks.len() <= 1 {
        let c = clocks.first().copied().unwrap_or(match program {
            Some(_) => WhoseClock::Program,
            None => WhoseClock::Qbench,
        });
        return c.words(program.as_deref());
    }
    let parts: Vec<String> = clocks
        .iter()
        .map(|c| {
            let n = runs.iter().filter(|r| WhoseClock::of(r) == *c).count();
            format!("{} ({n} runs)", c.words(program.as_deref()))
        })
        .collect();
    parts.join(", ")
}

/// Why two sides' times cannot be judged against each other: `None` when every run of both
/// was timed at the same place (all at the client, or all by the server's view).
pub fn mismatch(a: &[RunReport], b: &[RunReport]) -> Option<String> {
    let mut places: Vec<bool> = a
        .iter()
        .chain(b)
        .map(|r| WhoseClock::of(r).at_client())
        .collect();
    places.sort();
    places.dedup();
    (places.len() > 1).then(|| {
        format!(
            "A's times are {}, B's {}: measured at different places, no figure of one side \
             can be judged against the other's",
            side_words(a),
            side_words(b)
        )
    })
}

/// The most the link lets through to the client, bit/s: its downstream rate (a random
/// rate's maximum); `None` without a rate, or with a trace's.
pub fn link_ceiling(link: &LinkSpec) -> Option<Rate> {
    match link.down.rate.as_ref()? {
        r @ (RateSpec::Fixed { .. } | RateSpec::Random { .. }) => r.peak(),
        RateSpec::Trace { .. } | RateSpec::Mahimahi { .. } => None,
    }
}

/// A warning when `goodput_bps` is above what `link` lets through: no client receives faster
/// than its link delivers, so such a figure was timed elsewhere (a server's view counts bytes
/// handed to its own kernel, long before they cross the link) or the transfer fit in the
/// rate limiter's initial bucket.
pub fn goodput_beyond_link(goodput_bps: f64, link: &LinkSpec, clock: WhoseClock) -> Option<String> {
    let ceiling = link_ceiling(link)?;
    // NaN is above nothing.
    if goodput_bps.partial_cmp(&(ceiling.0 as f64)) != Some(std::cmp::Ordering::Greater) {
        return None;
    }
    let why = match clock {
        WhoseClock::Server => {
            "its times are the server's view, not a client's: it is no transfer rate"
        }
        _ => {
            "no client receives faster than its link: the transfer fit in the rate \
              limiter's initial bucket, or its times are wrong"
        }
    };
    Some(format!(
        "goodput {} is above the link's {}: {why}",
        Rate(goodput_bps.round() as u64),
        ceiling
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client_program::ClientProgram;
    use crate::report::third_party::ThirdPartyRun;

    fn run(timing: Option<TimingSource>) -> RunReport {
        timed(timing, 1000)
    }

    /// A run of 4 objects taking `lat` us each, timed by `timing` (`None`: qbench).
    fn timed(timing: Option<TimingSource>, lat: u64) -> RunReport {
        let mut r = crate::report::diff::tests::run(4, lat, 0);
        r.third_party = timing.map(|timings| ThirdPartyRun {
            client: ClientProgram::Curl,
            version: None,
            timings,
            verified: 0,
            unverified: 0,
            processes: Vec::new(),
            notes: Vec::new(),
        });
        r
    }

    #[test]
    fn sides_timed_at_different_places_are_not_judged() {
        let (q, p, s) = (
            run(None),
            run(Some(TimingSource::Client)),
            run(Some(TimingSource::Server)),
        );
        let one = std::slice::from_ref;
        assert_eq!(mismatch(one(&q), one(&p)), None);
        assert_eq!(mismatch(one(&s), one(&s)), None);
        let line = mismatch(one(&s), one(&p)).expect("server vs client");
        assert!(
            line.starts_with(
                "A's times are the server's view (curl reported no times), B's curl's own account"
            ),
            "{line}"
        );
        assert!(!line.contains('\n'));
        // One run of a side falling back to the server's view is enough.
        let line = mismatch(&[q.clone(), q], &[p.clone(), s]).expect("one run differs");
        assert!(
            line.contains("curl's own account (1 runs), the server's view"),
            "{line}"
        );
    }

    /// The reviewer's case: the server's view of one side against a client's own account of
    /// the other gives a verdict for the same program; shown, it is no longer judged.
    #[test]
    fn a_comparison_of_sides_on_different_clocks_has_no_verdict() {
        use crate::report::compare::{Comparison, Undecided, Verdict};
        use crate::stats::effect::Test;
        use crate::stats::metric::Metric;
        let side =
            |t, lat: u64| -> Vec<RunReport> { (0..10).map(|i| timed(Some(t), lat + i)).collect() };
        let (server, client) = (
            side(TimingSource::Server, 1_000),
            side(TimingSource::Client, 9_000),
        );
        let alike = Comparison::of(
            &client,
            &side(TimingSource::Client, 1_000),
            Metric::P50,
            Test::MannWhitney,
        );
        assert_eq!(alike.verdict, Verdict::BFaster);
        let c = Comparison::of(&server, &client, Metric::P50, Test::MannWhitney);
        assert_eq!(c.verdict, Verdict::Inconclusive);
        assert_eq!((c.p, c.effect.is_none(), c.diff_pct), (None, true, None));
        assert!(c.a.median.is_some() && c.b.median.is_some(), "figures kept");
        let Some(Undecided::ClocksDiffer { a, b, why }) = &c.undecided else {
            panic!("{:?}", c.undecided)
        };
        assert_eq!(
            (a.as_slice(), b.as_slice()),
            (&[WhoseClock::Server][..], &[WhoseClock::Program][..])
        );
        assert!(why.contains("server's view"), "{why}");
        let text = c.undecided.as_ref().unwrap().explain(c.test);
        assert!(text.starts_with("not judged: A's times are"), "{text}");
        let json = serde_json::to_string(&c).unwrap();
        assert!(json.contains(r#""reason":"clocks_differ""#), "{json}");
        assert_eq!(serde_json::from_str::<Comparison>(&json).unwrap(), c);
    }

    #[test]
    fn goodput_above_the_link_is_flagged() {
        let link: LinkSpec = "rate=50mbit,delay=50ms".parse().unwrap();
        assert_eq!(link_ceiling(&link), Some(Rate(50_000_000)));
        assert_eq!(
            goodput_beyond_link(47e6, &link, WhoseClock::Qbench),
            None,
            "below the rate"
        );
        assert_eq!(goodput_beyond_link(50e6, &link, WhoseClock::Qbench), None);
        let w = goodput_beyond_link(22e9, &link, WhoseClock::Server).expect("22 Gbit/s");
        assert!(w.starts_with("goodput 22"), "{w}");
        assert!(w.contains("above the link's 50"), "{w}");
        assert!(w.contains("server's view"), "{w}");
        assert!(goodput_beyond_link(50.1e6, &link, WhoseClock::Program).is_some());
        // NaN is never above anything; no rate, no ceiling.
        assert_eq!(
            goodput_beyond_link(f64::NAN, &link, WhoseClock::Qbench),
            None
        );
        let delay_only: LinkSpec = "delay=50ms".parse().unwrap();
        assert_eq!(
            goodput_beyond_link(1e12, &delay_only, WhoseClock::Server),
            None
        );
    }
}
