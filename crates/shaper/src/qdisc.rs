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

/// The rate's qdiscs, at the root or (`under_netem`) as netem's child: tbf for a fixed rate,
/// [`htb`] for one that varies.
pub fn rate(ns: &str, dev: &str, d: &Direction, mtu: u32, under_netem: bool) -> Vec<Cmd> {
    match d.rate {
        Some(RateSpec::Fixed { .. }) => tbf(ns, dev, d, mtu, under_netem).into_iter().collect(),
        Some(_) => htb(ns, dev, d, mtu, under_netem),
        None => Vec::new(),
    }
}

/// The rate a varying direction starts at, until the rate controller sets the first of its
/// schedule (a trace's rates are read only then).
fn starting_rate(d: &Direction) -> Option<Rate> {
    d.rate.as_ref()?.peak().or(match d.rate.as_ref()? {
        RateSpec::Trace { .. } | RateSpec::Mahimahi { .. } => Some(Rate(1_000_000_000)),
        _ => None,
    })
}

/// The bottleneck queue in bytes at `rate`: the spec's, or the default.
pub fn queue_bytes(d: &Direction, rate: Rate, mtu: u32) -> u64 {
    d.queue
        .map_or_else(|| default_queue(rate), |q| q.bytes_at(rate))
        .max(u64::from(mtu) * 2)
}

/// The rate's tbf, at the root or (`under_netem`) as netem's child, so that its byte limit is
/// the queue that fills: as netem's parent it would only ever see netem's packet queue.
pub fn tbf(ns: &str, dev: &str, d: &Direction, mtu: u32, under_netem: bool) -> Option<Cmd> {
    let rate = starting_rate(d)?;
    let limit = queue_bytes(d, rate, mtu);
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

/// The rate of the queue below a varying rate's htb class: far above any link's, so that it
/// only holds the queue and cuts super-packets into segments.
pub const QUEUE_TBF_RATE: Rate = Rate(100_000_000_000);

/// A varying rate: one htb class (`1:1`) whose rate the rate controller changes, and below
/// it a tbf far faster than the link that holds the byte queue and segments super-packets as
/// the fixed rate's tbf does. tbf refills its bucket whenever it is changed, so a tbf changed
/// every 10 ms would let a burst through at each change (measured: an alternating 24 Mbit/s
/// trace delivered 27.4 Mbit/s); htb keeps what its class owes across a change.
pub fn htb(ns: &str, dev: &str, d: &Direction, mtu: u32, under_netem: bool) -> Vec<Cmd> {
    let Some(rate) = starting_rate(d) else {
        return Vec::new();
    };
    let mut root = vec!["tc", "qdisc", "replace", "dev", dev];
    root.extend(attach(under_netem).iter().filter(|a| !a.is_empty()));
    root.extend(["1:", "htb", "default", "1"]);
    let class = format!("tc {}", htb_class_line("add", dev, rate, mtu));
    let queue = format!(
        "tc {}",
        queue_line("add", dev, queue_bytes(d, rate, mtu), mtu)
    );
    let split = |line: &str| Cmd::new(Some(ns), &line.split_whitespace().collect::<Vec<_>>());
    vec![Cmd::new(Some(ns), &root), split(&class), split(&queue)]
}

/// The htb class of a varying rate at `rate`, for `tc` (`op` is add or change). The bucket is
/// the fixed rate's for the same rate: enough for the timer's granularity.
fn htb_class_line(op: &str, dev: &str, rate: Rate, mtu: u32) -> String {
    let burst = tbf_burst(rate, mtu);
    format!(
        "class {op} dev {dev} parent 1: classid 1:1 htb rate {r}bit ceil {r}bit burst {burst} cburst {burst} quantum {}",
        mtu + ETH_HLEN,
        r = rate.0
    )
}

/// The queue below a varying rate's htb class, for `tc` (`op` is add or change).
fn queue_line(op: &str, dev: &str, queue_bytes: u64, mtu: u32) -> String {
    format!(
        "qdisc {op} dev {dev} parent 1:1 handle 2: tbf rate {}bit burst {} limit {} {}",
        QUEUE_TBF_RATE.0,
        tbf_burst(QUEUE_TBF_RATE, mtu),
        queue_bytes.max(u64::from(mtu) * 2),
        segmenting_peak(QUEUE_TBF_RATE, mtu).join(" ")
    )
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

/// `tc -batch -` lines for a new rate on one direction's htb class, and for its queue when
/// that changes too (`queue_bytes` is `Some`).
pub fn rate_change_lines(dev: &str, rate: Rate, queue_bytes: Option<u64>, mtu: u32) -> String {
    let mut s = htb_class_line("change", dev, rate, mtu);
    s.push('\n');
    if let Some(q) = queue_bytes {
        s.push_str(&queue_line("change", dev, q, mtu));
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn rate_changes_target_the_htb_class_and_its_queue() {
        let l = rate_change_lines("qb-rs", Rate(10_000_000), Some(3000), 1500);
        assert_eq!(
            l,
            "class change dev qb-rs parent 1: classid 1:1 htb rate 10000000bit ceil 10000000bit burst 6000 cburst 6000 quantum 1514\n\
             qdisc change dev qb-rs parent 1:1 handle 2: tbf rate 100000000000bit burst 12500000 limit 3000 peakrate 1000000000000bit mtu 1514\n"
        );
        let l = rate_change_lines("qb-rs", Rate(10_000_000), None, 1500);
        assert_eq!(l.lines().count(), 1, "{l}");
    }

    /// A varying rate is an htb class with the queue below it, at the root or under netem;
    /// the class's first rate is the schedule's highest, or 1 Gbit/s for a trace not read yet.
    #[test]
    fn a_varying_rate_is_an_htb_class() {
        let d: LinkSpec = "rate=20..40mbit/1s".parse().unwrap();
        let text = |v: Vec<Cmd>| v.iter().map(|c| c.to_string()).collect::<Vec<_>>();
        let root = text(rate("ns", "qb-rs", &d.up, 1500, false));
        assert_eq!(root.len(), 3, "{root:?}");
        assert!(
            root[0].ends_with("tc qdisc replace dev qb-rs root handle 1: htb default 1"),
            "{root:?}"
        );
        assert!(
            root[1].contains("class add dev qb-rs parent 1: classid 1:1 htb rate 40000000bit"),
            "{root:?}"
        );
        assert!(
            root[2].contains("qdisc add dev qb-rs parent 1:1 handle 2: tbf"),
            "{root:?}"
        );
        let under = text(rate("ns", "qb-rs", &d.up, 1500, true));
        assert!(under[0].contains(" parent 10:1 handle 1: htb"), "{under:?}");
        let d: LinkSpec = "rate=mahimahi:/x".parse().unwrap();
        let t = text(rate("ns", "qb-rc", &d.down, 1500, false));
        assert!(t[1].contains("rate 1000000000bit"), "{t:?}");
        let d: LinkSpec = "rate=1mbit".parse().unwrap();
        let f = text(rate("ns", "qb-rc", &d.down, 1500, false));
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(f[0].contains("root handle 1: tbf rate 1000000bit"), "{f:?}");
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
