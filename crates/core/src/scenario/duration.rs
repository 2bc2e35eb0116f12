//! How long a cell's transfers take at the least, from its spec alone: a held load's time, or
//! its bytes at the link's rate with a round trip for each run's handshake and first request.
//! What `qbench sweep --dry-run` states for each cell; link setup, calibration and a client
//! slower than the link come on top.

use std::time::Duration;

use super::CellSpec;
use crate::spec::workload::Workload;
use crate::spec::RunSpec;

/// One run of `spec` at the least; `None` where nothing bounds it but the machine (no rate
/// toward the client, or objects a page or video decides).
pub fn run_time(spec: &RunSpec) -> Option<Duration> {
    if let Some(l) = &spec.load {
        return Some(l.warmup.saturating_add(l.duration));
    }
    if spec.video.is_some() || spec.page.is_some() {
        return None;
    }
    let link = spec.link.as_ref()?;
    let bps = link.down.rate.as_ref()?.peak()?.0;
    let bytes = spec.objects.clone().unwrap_or_default().total_bytes();
    let transfer = bytes as f64 * 8.0 / bps.max(1) as f64;
    let rtt = link.up.delay.saturating_add(link.down.delay);
    let one = Duration::try_from_secs_f64(transfer).ok()?;
    let runs = spec.runs.max(1);
    one.saturating_add(rtt.saturating_mul(2)).checked_mul(runs)
}

/// A cell at the least and at the most (they differ where the rounds stop on their own),
/// with `warmup_rounds` before the measured ones; `None` where a run has no bound.
pub fn cell_time(cell: &CellSpec, warmup_rounds: u32) -> Option<(Duration, Duration)> {
    match cell {
        CellSpec::Compare(c) => {
            let (a, b) = c.sides();
            let round = run_time(&a)?.saturating_add(run_time(&b)?);
            let (least, most) = match &c.auto_rounds {
                Some(auto) => (auto.min, auto.max),
                None => (c.rounds, c.rounds),
            };
            let with = |n: u32| round.saturating_mul(n.saturating_add(warmup_rounds));
            Some((with(least), with(most)))
        }
        CellSpec::Compete(c) => {
            // The flows share one bottleneck: all their objects at its rate.
            let flows: u64 = c.flows.iter().map(|(_, n)| u64::from(*n)).sum();
            let mut all = c.base.clone();
            if all.load.is_none() {
                let w = all.objects.clone().unwrap_or_default();
                let groups = w
                    .groups()
                    .iter()
                    .map(|g| format!("{}x{}B", g.count.saturating_mul(flows), g.size.0))
                    .collect::<Vec<_>>()
                    .join(",");
                all.objects = Some(groups.parse::<Workload>().ok()?);
            }
            let t = run_time(&all)?;
            Some((t, t))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::CompareSpec;

    fn spec(link: Option<&str>, objects: &str) -> RunSpec {
        RunSpec {
            link: link.map(|l| l.parse().unwrap()),
            objects: Some(objects.parse().unwrap()),
            ..RunSpec::default()
        }
    }

    #[test]
    fn a_run_takes_its_bytes_at_the_rate_and_two_round_trips() {
        let s = spec(Some("rate=100mbit,rtt=20ms"), "1x100MB");
        assert_eq!(run_time(&s), Some(Duration::from_millis(8_040)));
        assert_eq!(run_time(&spec(None, "1x100MB")), None);
        assert_eq!(run_time(&spec(Some("rtt=20ms"), "1x100MB")), None);
    }

    #[test]
    fn a_comparison_counts_both_sides_of_every_round_and_its_warm_up() {
        let base = spec(Some("rate=100mbit"), "1x100MB");
        let c = CompareSpec {
            base,
            protos: (crate::Protocol::H2, crate::Protocol::H3),
            rounds: 3,
            auto_rounds: None,
            a: Default::default(),
            b: Default::default(),
        };
        let eight = Duration::from_secs(8);
        assert_eq!(
            cell_time(&CellSpec::Compare(c), 1),
            Some((eight * 8, eight * 8))
        );
    }
}
