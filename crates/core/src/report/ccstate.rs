//! Congestion-control states inferred from sender samples, after IMC'17 ("Taking a Long Look
//! at QUIC", Figures 3 and 13): fraction of time per state and transition probabilities.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::report::telemetry::{tcp_ca, CcSample, Timeline};

#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
pub enum CcState {
    Init,
    SlowStart,
    CongestionAvoidance,
    /// The window sits at the configured cap (the paper's CA-Maxed).
    CaMaxed,
    ApplicationLimited,
    Recovery,
    /// Retransmission timeout (TCP Loss state) or persistent congestion (QUIC).
    RetransmissionTimeout,
}

impl CcState {
    pub fn name(self) -> &'static str {
        match self {
            Self::Init => "Init",
            Self::SlowStart => "SlowStart",
            Self::CongestionAvoidance => "CongestionAvoidance",
            Self::CaMaxed => "CA-Maxed",
            Self::ApplicationLimited => "ApplicationLimited",
            Self::Recovery => "Recovery",
            Self::RetransmissionTimeout => "RetransmissionTimeout",
        }
    }
}

/// ssthresh values at or above this mean "not set yet" (TCP reports 0x7fffffff segments).
const SSTHRESH_UNSET: u64 = 1 << 40;

fn increased(now: Option<u64>, before: Option<u64>) -> bool {
    matches!((now, before), (Some(n), Some(b)) if n > b)
}

/// The state of each sample, given the one before it.
pub fn classify(samples: &[CcSample], cap: Option<u64>) -> Vec<CcState> {
    let mut out = Vec::with_capacity(samples.len());
    let mut prev: Option<&CcSample> = None;
    for s in samples {
        let state = if s.bytes_sent == 0 {
            CcState::Init
        } else if s.tcp_ca_state == Some(tcp_ca::LOSS)
            || increased(s.timeouts, prev.and_then(|p| p.timeouts))
        {
            CcState::RetransmissionTimeout
        } else if matches!(s.tcp_ca_state, Some(tcp_ca::RECOVERY | tcp_ca::CWR))
            || increased(s.congestion_events, prev.and_then(|p| p.congestion_events))
        {
            CcState::Recovery
        } else if cap.is_some_and(|c| s.cwnd_bytes >= c.saturating_sub(s.mss_bytes)) {
            CcState::CaMaxed
        } else if s.app_limited == Some(true)
            || s.in_flight_bytes
                .is_some_and(|f| f.saturating_mul(2) < s.cwnd_bytes)
        {
            CcState::ApplicationLimited
        } else {
            match s.ssthresh_bytes.filter(|&t| t < SSTHRESH_UNSET) {
                Some(t) if s.cwnd_bytes >= t => CcState::CongestionAvoidance,
                // Below ssthresh, or no loss yet: still in (initial) slow start.
                _ => CcState::SlowStart,
            }
        };
        out.push(state);
        prev = Some(s);
    }
    out
}

/// Time share per state and transition probabilities between distinct consecutive states.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StateMachine {
    /// Fraction of the observed time spent in each state (sums to 1 when anything was seen).
    pub time_fraction: BTreeMap<CcState, f64>,
    /// `transitions[a][b]`: probability that leaving `a` goes to `b`.
    pub transitions: BTreeMap<CcState, BTreeMap<CcState, f64>>,
    pub transition_counts: BTreeMap<CcState, BTreeMap<CcState, u64>>,
}

impl StateMachine {
    /// One machine over several timelines (e.g. all connections of a run).
    pub fn infer(timelines: &[&Timeline]) -> Self {
        let mut time: BTreeMap<CcState, f64> = BTreeMap::new();
        let mut counts: BTreeMap<CcState, BTreeMap<CcState, u64>> = BTreeMap::new();
        for tl in timelines {
            let states = classify(&tl.samples, tl.cwnd_cap_bytes);
            for (i, st) in states.iter().enumerate() {
                // A sample stands for the interval up to the next one.
                let dt = match tl.samples.get(i + 1) {
                    Some(next) => next.t_us.saturating_sub(tl.samples[i].t_us),
                    None => tl.interval_us,
                };
                *time.entry(*st).or_default() += dt as f64;
                if let Some(next) = states.get(i + 1) {
                    if next != st {
                        *counts.entry(*st).or_default().entry(*next).or_default() += 1;
                    }
                }
            }
        }
        let total: f64 = time.values().sum();
        let time_fraction = time
            .into_iter()
            .filter(|_| total > 0.0)
            .map(|(k, v)| (k, v / total))
            .collect();
        let transitions = counts
            .iter()
            .map(|(from, tos)| {
                let n: u64 = tos.values().sum();
                let probs = tos
                    .iter()
                    .map(|(to, c)| (*to, *c as f64 / n as f64))
                    .collect();
                (*from, probs)
            })
            .collect();
        Self {
            time_fraction,
            transitions,
            transition_counts: counts,
        }
    }

    /// Graphviz: time share on nodes, transition probability on edges.
    pub fn to_dot(&self, title: &str) -> String {
        let mut d = String::new();
        let _ = writeln!(d, "digraph cc {{");
        let _ = writeln!(
            d,
            "  label=\"{}\"; labelloc=t; rankdir=LR;",
            title.replace('"', "'")
        );
        let _ = writeln!(d, "  node [shape=ellipse, fontname=\"Helvetica\"];");
        for (st, frac) in &self.time_fraction {
            let _ = writeln!(
                d,
                "  \"{0}\" [label=\"{0}\\n{1:.1}%\", penwidth={2:.2}];",
                st.name(),
                frac * 100.0,
                1.0 + 4.0 * frac
            );
        }
        for (from, tos) in &self.transitions {
            for (to, p) in tos {
                let _ = writeln!(
                    d,
                    "  \"{}\" -> \"{}\" [label=\"{p:.2}\"];",
                    from.name(),
                    to.name()
                );
            }
        }
        d.push_str("}\n");
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u64 = 1000;

    fn s(t_ms: u64, cwnd_pkts: u64) -> CcSample {
        CcSample {
            t_us: t_ms * 1000,
            cwnd_bytes: cwnd_pkts * MSS,
            in_flight_bytes: Some(cwnd_pkts * MSS),
            mss_bytes: MSS,
            bytes_sent: 1 + t_ms,
            ..CcSample::default()
        }
    }

    fn timeline(samples: Vec<CcSample>, cap: Option<u64>) -> Timeline {
        Timeline {
            transport: "tcp".into(),
            cc: "cubic".into(),
            cwnd_cap_bytes: cap,
            cwnd_cap_packets: None,
            interval_us: 10_000,
            samples,
            truncated: false,
            quic: None,
        }
    }

    /// A hand-built TCP trace: idle, slow start, loss recovery, congestion avoidance,
    /// an RTO, and the application running dry.
    fn tcp_trace() -> Vec<CcSample> {
        let mut v = vec![CcSample {
            bytes_sent: 0,
            ..s(0, 10)
        }];
        v.push(s(10, 20));
        v.push(s(20, 40));
        v.push(CcSample {
            tcp_ca_state: Some(tcp_ca::RECOVERY),
            ..s(30, 40)
        });
        v.push(CcSample {
            ssthresh_bytes: Some(28 * MSS),
            ..s(40, 28)
        });
        v.push(CcSample {
            ssthresh_bytes: Some(28 * MSS),
            ..s(50, 29)
        });
        v.push(CcSample {
            tcp_ca_state: Some(tcp_ca::LOSS),
            ssthresh_bytes: Some(14 * MSS),
            ..s(60, 1)
        });
        v.push(CcSample {
            ssthresh_bytes: Some(14 * MSS),
            ..s(70, 8)
        });
        v.push(CcSample {
            ssthresh_bytes: Some(14 * MSS),
            in_flight_bytes: Some(MSS),
            ..s(80, 16)
        });
        v
    }

    #[test]
    fn classifies_every_tcp_state() {
        use CcState::*;
        let states = classify(&tcp_trace(), None);
        assert_eq!(
            states,
            vec![
                Init,
                SlowStart,
                SlowStart,
                Recovery,
                CongestionAvoidance,
                CongestionAvoidance,
                RetransmissionTimeout,
                SlowStart,
                ApplicationLimited
            ]
        );
    }

    #[test]
    fn quic_events_and_cap() {
        use CcState::*;
        let cap = Some(30 * MSS);
        let q = |t, cwnd, ev, pc, app| CcSample {
            congestion_events: Some(ev),
            timeouts: Some(pc),
            app_limited: Some(app),
            in_flight_bytes: None,
            ..s(t, cwnd)
        };
        let samples = vec![
            q(0, 10, 0, 0, false),
            q(10, 30, 0, 0, false),
            q(20, 30, 0, 0, false),
            q(30, 20, 1, 0, false),
            q(40, 2, 1, 1, false),
            q(50, 4, 1, 1, true),
        ];
        assert_eq!(
            classify(&samples, cap),
            vec![
                SlowStart,
                CaMaxed,
                CaMaxed,
                Recovery,
                RetransmissionTimeout,
                ApplicationLimited
            ]
        );
    }

    #[test]
    fn fractions_and_transition_probabilities() {
        use CcState::*;
        let tl = timeline(tcp_trace(), None);
        let m = StateMachine::infer(&[&tl]);
        let total: f64 = m.time_fraction.values().sum();
        assert!((total - 1.0).abs() < 1e-9);
        // 9 samples, 10 ms apart; the last one counts one interval: 90 ms in all.
        assert!((m.time_fraction[&SlowStart] - 30.0 / 90.0).abs() < 1e-9);
        assert!((m.time_fraction[&CongestionAvoidance] - 20.0 / 90.0).abs() < 1e-9);
        // SlowStart is left twice: to Recovery and to ApplicationLimited.
        assert_eq!(m.transitions[&SlowStart][&Recovery], 0.5);
        assert_eq!(m.transitions[&SlowStart][&ApplicationLimited], 0.5);
        assert_eq!(m.transitions[&Recovery][&CongestionAvoidance], 1.0);
        assert_eq!(m.transition_counts[&Init][&SlowStart], 1);
        let dot = m.to_dot("h2 cubic");
        assert!(
            dot.contains("\"SlowStart\" -> \"Recovery\" [label=\"0.50\"]"),
            "{dot}"
        );
        assert!(dot.contains("SlowStart\\n33.3%"), "{dot}");
    }

    #[test]
    fn empty_timeline_has_no_nan() {
        let m = StateMachine::infer(&[&timeline(vec![], None)]);
        assert!(m.time_fraction.is_empty());
        assert!(!serde_json::to_string(&m).unwrap().contains("NaN"));
    }
}
