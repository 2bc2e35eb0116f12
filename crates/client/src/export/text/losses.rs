//! What the senders declared lost beside what the link dropped, in words that attribute each
//! part only to what can have caused it.

use qbench_core::stats::noise::Losses;
use qbench_core::Stats;

use super::numbers::count;

/// One side's losses: the median per run of what its senders declared and the link dropped.
/// `None` without telemetry or a link's counters.
pub(super) fn describe(runs: &[Losses]) -> Option<String> {
    let med = |f: fn(&Losses) -> u64| {
        Stats::of(&runs.iter().map(|x| f(x) as f64).collect::<Vec<_>>())
            .median
            .map(|m| m.round() as u64)
    };
    let (declared, dropped) = (med(|x| x.declared)?, med(|x| x.dropped)?);
    let socket = med(|x| x.socket).unwrap_or(0);
    let d = count(declared);
    let l = count(dropped);
    let at_socket = match socket {
        0 => String::new(),
        n => format!(
            "; {} datagrams were dropped by the client's full receive buffer (a GRO batch counts once)",
            count(n)
        ),
    };
    Some(if declared > dropped {
        let rest = match socket {
            0 => "the other {} arrived reordered or late, or were dropped outside the link",
            _ => "of the other {}, those not dropped there arrived reordered or late, or were dropped elsewhere",
        }
        .replace("{}", &count(declared - dropped));
        format!("{d} declared lost, {l} of them dropped by the link{at_socket}; {rest}")
    } else if dropped > declared {
        format!(
            "{d} declared lost, {l} dropped by the link{at_socket}; {} were never declared (acknowledgements and other packets a sender does not retransmit, or losses not yet detected at the end)",
            count(dropped - declared)
        )
    } else if declared == 0 {
        format!("none declared lost, none dropped by the link{at_socket}")
    } else {
        format!("{d} declared lost, all {l} dropped by the link{at_socket}")
    })
}

/// A run's (or the median run's) losses for its summary: the senders' beside the link's when
/// telemetry came back, else what the link dropped each way.
pub(super) fn summary(report: &qbench_core::Report) -> Option<String> {
    let l: Vec<Losses> = report.runs.iter().filter_map(Losses::of).collect();
    if let Some(s) = describe(&l) {
        let per = if report.runs.len() > 1 {
            " (median run)"
        } else {
            ""
        };
        return Some(format!("{s}{per}"));
    }
    let drops: Vec<_> = report
        .runs
        .iter()
        .filter_map(|r| r.noise.as_ref()?.link_drops)
        .collect();
    let med = |f: fn(&qbench_core::report::link::LinkDrops) -> u64| {
        Stats::of(&drops.iter().map(|d| f(d) as f64).collect::<Vec<_>>())
            .median
            .map(|m| m.round() as u64)
    };
    let (down, up) = (med(|d| d.down)?, med(|d| d.up)?);
    let per = if drops.len() > 1 { ", median run" } else { "" };
    Some(format!(
        "the link dropped {} packets toward the client, {} toward the server{per}",
        count(down),
        count(up)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(declared: u64, dropped: u64) -> Losses {
        Losses {
            declared,
            dropped,
            socket: 0,
        }
    }

    #[test]
    fn each_part_is_named_for_what_can_cause_it() {
        assert_eq!(
            describe(&[l(209, 200)]).unwrap(),
            "209 declared lost, 200 of them dropped by the link; the other 9 arrived reordered or late, or were dropped outside the link"
        );
        let more_dropped = describe(&[l(100, 130)]).unwrap();
        assert!(
            more_dropped
                .starts_with("100 declared lost, 130 dropped by the link; 30 were never declared"),
            "{more_dropped}"
        );
        assert!(!more_dropped.contains("reordered"), "{more_dropped}");
        assert_eq!(
            describe(&[l(5, 5)]).unwrap(),
            "5 declared lost, all 5 dropped by the link"
        );
        assert_eq!(
            describe(&[l(0, 0)]).unwrap(),
            "none declared lost, none dropped by the link"
        );
        assert_eq!(describe(&[]), None);
    }

    /// Drops at the client's socket are named apart from the link's and counted in datagrams.
    #[test]
    fn a_full_receive_buffers_drops_are_named_apart() {
        let with = |declared, dropped, socket| Losses {
            declared,
            dropped,
            socket,
        };
        assert_eq!(
            describe(&[with(477, 0, 400)]).unwrap(),
            "477 declared lost, 0 of them dropped by the link; 400 datagrams were dropped by the \
             client's full receive buffer (a GRO batch counts once); of the other 477, those not \
             dropped there arrived reordered or late, or were dropped elsewhere"
        );
        assert_eq!(
            describe(&[with(0, 0, 3)]).unwrap(),
            "none declared lost, none dropped by the link; 3 datagrams were dropped by the \
             client's full receive buffer (a GRO batch counts once)"
        );
    }

    #[test]
    fn the_median_run_is_shown() {
        let s = describe(&[l(10, 10), l(2000, 1990), l(30, 30)]).unwrap();
        assert!(s.starts_with("30 declared lost, all 30"), "{s}");
    }
}
