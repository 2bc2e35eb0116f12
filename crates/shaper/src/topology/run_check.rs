//! A link's counters taken around each run, and the run's check against the link's spec.

use std::time::Instant;

use qbench_core::report::link::ForwarderStats;
use qbench_core::report::link_run::{DelayLineCpu, LinkCounters, LinkDirectionRun, LinkRun};
use qbench_core::spec::link::{Direction, RateSpec};
use qbench_core::units::Rate;

use super::Topology;
use crate::devices::{TUN_DOWN, TUN_UP};
use crate::plan::Backend;
use crate::qdisc::tbf_burst;

/// The link at one moment: its counters, what its rates had allowed, its delay line's.
#[derive(Debug, Clone)]
pub struct LinkSnapshot {
    at: Instant,
    counters: Option<LinkCounters>,
    /// Bits each direction's rate had allowed by then (up, down), and its fastest rate so far;
    /// `None` without a rate.
    allowed_bits: [Option<(f64, Rate)>; 2],
    forwarders: Vec<(String, ForwarderStats)>,
}

impl LinkSnapshot {
    pub fn counters(&self) -> Option<&LinkCounters> {
        self.counters.as_ref()
    }

    pub fn forwarders(&self) -> &[(String, ForwarderStats)] {
        &self.forwarders
    }
}

impl Topology {
    /// What the link's counters say now. Reading them runs `tc` (and `ip`, with a delay line):
    /// take it outside any CPU reading of the run.
    pub fn snapshot(&self) -> LinkSnapshot {
        let nft_loss = matches!(self.backend, Backend::Userspace | Backend::Edt)
            && self.caps.nft
            && (self.link.up.loss > 0.0 || self.link.down.loss > 0.0);
        let at = Instant::now();
        LinkSnapshot {
            at,
            counters: crate::counters::read(
                &self.names.router,
                nft_loss,
                !self.forwarders.is_empty(),
            ),
            allowed_bits: [
                self.allowed_bits("up", &self.link.up, at),
                self.allowed_bits("down", &self.link.down, at),
            ],
            forwarders: self.forwarder_stats(),
        }
    }

    /// Bits `d`'s rate has allowed by `at`: a fixed rate over the time since the link was
    /// built, a changing one as its controller wrote it.
    fn allowed_bits(&self, name: &str, d: &Direction, at: Instant) -> Option<(f64, Rate)> {
        match d.rate.as_ref()? {
            RateSpec::Fixed { bps } => Some((
                bps.0 as f64 * at.saturating_duration_since(self.built).as_secs_f64(),
                *bps,
            )),
            _ => self.rates.as_ref()?.allowed_bits(name),
        }
    }

    /// The run between two snapshots, judged; `None` when the counters could not be read.
    /// `delay_line`: the busiest delay-line thread over the run, when there is one.
    pub fn run_check(
        &self,
        before: &LinkSnapshot,
        after: &LinkSnapshot,
        delay_line: Option<DelayLineCpu>,
    ) -> Option<LinkRun> {
        let c = after.counters?.since(&before.counters?);
        let mtu = self.link.mtu.unwrap_or(1500);
        let dir = |i: usize, counters, tun: &str| {
            // A step's bucket can leave at once on top of what the rate allows over the run.
            let allowed = after.allowed_bits[i]
                .zip(before.allowed_bits[i])
                .map(|((a, peak), (b, _))| ((a - b).max(0.0) / 8.0) as u64 + tbf_burst(peak, mtu));
            let fwd = |s: &[(String, ForwarderStats)]| {
                s.iter().find(|(n, _)| n == tun).map(|(_, f)| f.clone())
            };
            let line = fwd(&after.forwarders).map(|a| {
                let b = fwd(&before.forwarders).unwrap_or_default();
                let late = std::array::from_fn(|k| a.late[k].saturating_sub(b.late[k]));
                (a.packets.saturating_sub(b.packets), late)
            });
            LinkDirectionRun {
                counters,
                allowed_bytes: allowed,
                delayed_packets: line.map(|l| l.0),
                late: line.map(|l| l.1),
            }
        };
        Some(
            LinkRun {
                seconds: after.at.saturating_duration_since(before.at).as_secs_f64(),
                up: dir(0, c.up, TUN_UP),
                down: dir(1, c.down, TUN_DOWN),
                delay_line: delay_line.filter(|_| !self.forwarders.is_empty()),
                shortfalls: Vec::new(),
            }
            .judge(),
        )
    }
}
