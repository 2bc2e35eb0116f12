//! The router's per-direction impairments as tc and nftables commands: tbf for the rate and
//! its bottleneck queue, netem for delay, jitter and loss (netem backend), an nftables rule
//! for loss (userspace backend).

use std::time::Duration;

use qbench_core::spec::link::{Direction, LinkSpec, RateSpec};
use qbench_core::units::Rate;

use crate::cmd::Cmd;
use crate::devices::{ROUTER_TO_CLIENT, ROUTER_TO_SERVER};
use qbench_core::report::link::Names;

/// netem's handle when it is the root qdisc; the rate's tbf then hangs off its only class.
pub const NETEM_HANDLE: &str = "10:";
pub const NETEM_CLASS: &str = "10:1";
/// netem's own queue in packets. It holds packets only while they are being delayed: the
/// bottleneck queue is tbf's, in bytes, below it.
pub const NETEM_LIMIT: &str = "100000";
/// With `reorder=off`, netem is given this rate so that each packet leaves no earlier than the
/// one before it (netem schedules from the last queued packet when it has a rate); a 1500-byte
/// packet takes 12 ns at it, so it never limits the link.
pub const NETEM_ORDER_RATE: &str = "1000gbit";

/// tbf's burst: enough for the timer granularity at this rate, at least a few full packets.
pub fn tbf_burst(rate: Rate, mtu: u32) -> u64 {
    let per_ms = rate.0 / 8 / 1000;
    per_ms.max(u64::from(mtu) * 4)
}

/// Bytes of an Ethernet header: what a veth's qdisc counts beyond the IP packet.
const ETH_HLEN: u32 = 14;

/// tbf's peak bucket, there only to make tbf cut every GSO super-packet into its segments as
/// it queues them (it does for any packet longer than the peak bucket), so that a full queue
/// drops, and the root qdisc counts, packets as the senders and receivers see them rather
/// than super-packets of up to 45. The peak rate is far above the rate, so it never limits.
pub fn segmenting_peak(rate: Rate, mtu: u32) -> [String; 4] {
    let peak = rate.0.saturating_mul(2).max(1_000_000_000_000);
    [
        "peakrate".into(),
        format!("{peak}bit"),
        "mtu".into(),
        (mtu + ETH_HLEN).to_string(),
    ]
}

/// Queue in bytes when the spec sets none: 50 ms at the rate, at least 64 KiB.
pub fn default_queue(rate: Rate) -> u64 {
    (rate.0 / 8 / 20).max(64 * 1024)
}

/// Whether the netem backend puts a netem qdisc on this direction.
pub fn has_netem(d: &Direction) -> bool {
    d.needs_delay_path() || d.loss > 0.0
}

fn attach(under_netem: bool) -> [&'static str; 3] {
    if under_netem {
        ["parent", NETEM_CLASS, "handle"]
    } else {
        ["root", "handle", ""]
    }
}

/// The rate's tbf, at the root or (`under_netem`) as netem's child, so that its byte limit is
/// the queue that fills: as netem's parent it would only ever see netem's packet queue.
pub fn tbf(ns: &str, dev: &str, d: &Direction, mtu: u32, under_netem: bool) -> Option<Cmd> {
    let rate = d.rate.as_ref()?.peak().or(match d.rate.as_ref()? {
        RateSpec::Trace { .. } | RateSpec::Mahimahi { .. } => Some(Rate(1_000_000_000)),
        _ => None,
    })?;
    let limit = d
        .queue
        .map_or_else(|| default_queue(rate), |q| q.bytes_at(rate))
        .max(u64::from(mtu) * 2);
    let (r, b, l) = (
        format!("{}bit", rate.0),
        tbf_burst(rate, mtu).to_string(),
        limit.to_string(),
    );
    let mut argv = vec!["tc", "qdisc", "replace", "dev", dev];
    argv.extend(attach(under_netem).iter().filter(|a| !a.is_empty()));
    argv.extend(["1:", "tbf", "rate", &r, "burst", &b, "limit", &l]);
    let peak = segmenting_peak(rate, mtu);
    argv.extend(peak.iter().map(String::as_str));
    Some(Cmd::new(Some(ns), &argv))
}

fn us(d: Duration) -> String {
    format!("{}us", d.as_micros())
}

/// netem's delay and its spread for a link's `delay` and `jitter`: qbench's jitter adds
/// uniformly 0..=jitter to the delay, netem's spreads it either side of the mean, so the mean
/// moves up by half the jitter and the delay is never below the one asked for.
pub fn netem_delay(delay: Duration, jitter: Duration) -> (Duration, Duration) {
    let j = jitter.as_micros() as u64;
    let half_down = Duration::from_micros(j / 2);
    let half_up = Duration::from_micros(j - j / 2);
    (delay + half_up, half_down)
}

/// netem as the root of one direction's egress: delay, jitter and loss.
pub fn netem(ns: &str, dev: &str, d: &Direction) -> Option<Cmd> {
    if !has_netem(d) {
        return None;
    }
    let (mean, spread) = netem_delay(d.delay, d.jitter);
    let mut argv: Vec<String> = [
        "tc",
        "qdisc",
        "replace",
        "dev",
        dev,
        "root",
        "handle",
        NETEM_HANDLE,
        "netem",
        "limit",
        NETEM_LIMIT,
        "delay",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    argv.push(us(mean));
    if !spread.is_zero() {
        argv.push(us(spread));
    }
    if d.loss > 0.0 {
        argv.push("loss".into());
        argv.push(format!("{}%", d.loss * 100.0));
    }
    if !d.jitter.is_zero() && !d.reorders() {
        argv.push("rate".into());
        argv.push(NETEM_ORDER_RATE.into());
    }
    let a: Vec<&str> = argv.iter().map(String::as_str).collect();
    Some(Cmd::new(Some(ns), &a))
}

/// The userspace backend's loss: a random drop in the router's forward chain.
pub fn nft_loss(names: &Names, link: &LinkSpec) -> Option<Cmd> {
    let mut rules = String::new();
    for (dev, d) in [(ROUTER_TO_SERVER, &link.up), (ROUTER_TO_CLIENT, &link.down)] {
        if d.loss > 0.0 {
            // numgen draws 0..999999 per packet; matching oifname counts each packet once,
            // also when it crosses the router twice through the TUN path.
            let threshold = (d.loss * 1_000_000.0).round() as u64;
            // nft refuses a threshold beyond the draw's range: a sure loss drops every packet.
            let draw = if threshold >= 1_000_000 {
                String::new()
            } else {
                format!("numgen random mod 1000000 < {threshold} ")
            };
            rules.push_str(&format!("    oifname \"{dev}\" {draw}counter drop\n"));
        }
    }
    if rules.is_empty() {
        return None;
    }
    let script = format!(
        "table inet qb_link {{\n  chain forward {{\n    type filter hook forward priority 0; policy accept;\n{rules}  }}\n}}\n"
    );
    Some(Cmd {
        ns: Some(names.router.clone()),
        argv: vec!["nft".into(), "-f".into(), "-".into()],
        stdin: Some(script),
    })
}

/// A `tc -batch -` line for a new rate on one direction's tbf (at the root, or under netem).
/// The burst must stay that of the schedule's peak rate: a packet queued under a larger burst
/// would never fit a smaller bucket, and tbf would stall behind it for good.
pub fn rate_change_line(
    dev: &str,
    rate: Rate,
    peak: Rate,
    queue_bytes: u64,
    mtu: u32,
    under_netem: bool,
) -> String {
    let at = if under_netem {
        format!("parent {NETEM_CLASS} handle")
    } else {
        "root handle".to_string()
    };
    format!(
        "qdisc change dev {dev} {at} 1: tbf rate {}bit burst {} limit {} {}\n",
        rate.0,
        tbf_burst(peak, mtu),
        queue_bytes.max(u64::from(mtu) * 2),
        segmenting_peak(rate, mtu).join(" ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn rate_change_targets_the_tbf_where_it_is() {
        let l = rate_change_line("qb-rs", Rate(10_000_000), Rate(20_000_000), 1, 1500, true);
        assert_eq!(
            l,
            "qdisc change dev qb-rs parent 10:1 handle 1: tbf rate 10000000bit burst 6000 limit 3000 peakrate 1000000000000bit mtu 1514\n"
        );
        let l = rate_change_line("qb-rs", Rate(10_000_000), Rate(20_000_000), 1, 1500, false);
        assert!(
            l.starts_with("qdisc change dev qb-rs root handle 1: tbf"),
            "{l}"
        );
    }

    /// A peak bucket of one full frame makes tbf segment every GSO super-packet, so that its
    /// drops are packets; the peak stays above the rate, which tc requires.
    #[test]
    fn tbf_segments_super_packets_at_any_rate() {
        for (rate, mtu) in [("20mbit", 1500), ("400gbit", 9000), ("1mbit", 1280)] {
            let d: LinkSpec = format!("rate={rate}").parse().unwrap();
            let c = tbf("ns", "qb-rs", &d.up, mtu, false).unwrap();
            let at = |k: &str| {
                c.argv
                    .iter()
                    .position(|a| a == k)
                    .map(|i| c.argv[i + 1].clone())
            };
            assert_eq!(at("mtu"), Some((mtu + 14).to_string()), "{c}");
            let bits = |v: String| v.trim_end_matches("bit").parse::<u64>().unwrap();
            assert!(
                bits(at("peakrate").unwrap()) > bits(at("rate").unwrap()),
                "{c}"
            );
            assert!(
                at("burst").unwrap().parse::<u32>().unwrap() >= mtu + 14,
                "{c}"
            );
        }
    }

    #[test]
    fn reorder_off_keeps_order_with_a_rate() {
        let d: LinkSpec = "rtt=40ms,jitter=10ms,reorder=off".parse().unwrap();
        let c = netem("ns", "qb-rs", &d.up).unwrap();
        assert!(
            c.argv.ends_with(&["rate".into(), NETEM_ORDER_RATE.into()]),
            "{c}"
        );
        let d: LinkSpec = "rtt=40ms,jitter=10ms".parse().unwrap();
        let c = netem("ns", "qb-rs", &d.up).unwrap();
        assert!(!c.argv.contains(&"rate".to_string()), "{c}");
    }

    #[test]
    fn a_sure_loss_drops_without_a_draw() {
        let spec: LinkSpec = "up.loss=100%".parse().unwrap();
        let script = nft_loss(&Names::new("ID"), &spec).unwrap().stdin.unwrap();
        assert!(
            script.contains("oifname \"qb-rs\" counter drop"),
            "{script}"
        );
    }

    proptest! {
        /// Any loss the spec accepts gives a rule nft takes: a draw threshold within the
        /// draw's range, or a plain drop for a sure loss.
        #[test]
        fn nft_loss_thresholds_stay_in_the_draws_range(p in 0.0f64..=1.0) {
            let spec: LinkSpec = format!("up.loss={p}").parse().unwrap();
            let names = Names::new("ID");
            if let Some(c) = nft_loss(&names, &spec) {
                let script = c.stdin.unwrap();
                let rule = script.lines().find(|l| l.contains("drop")).unwrap();
                match rule.split("< ").nth(1) {
                    Some(rest) => {
                        let t: u64 = rest.split(' ').next().unwrap().parse().unwrap();
                        prop_assert!(t < 1_000_000, "{rule}");
                    }
                    None => prop_assert!(p * 1_000_000.0 >= 999_999.5, "{rule}"),
                }
            }
        }

        /// netem's uniform spread around its mean stays within [delay, delay + jitter].
        #[test]
        fn netem_delay_covers_the_asked_range(d in 0u64..10_000_000, j in 0u64..10_000_000) {
            let (mean, spread) = netem_delay(Duration::from_micros(d), Duration::from_micros(j));
            prop_assert!(mean >= spread);
            prop_assert!(mean - spread >= Duration::from_micros(d));
            prop_assert!(mean + spread <= Duration::from_micros(d + j));
            prop_assert!((mean + spread) - (mean - spread) + Duration::from_micros(1) >= Duration::from_micros(j));
        }
    }
}
