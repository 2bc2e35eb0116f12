//! The link's own counters of each direction, read with one `tc` and one `ip` call: what left
//! each router egress (bytes, packets), how often its rate limiter held a packet back, what
//! its qdiscs and loss rules dropped, and what the kernel dropped at the TUN of the userspace
//! delay line because the line fell behind. Read around every run, they say whether the link
//! carried the run as its spec asks.

use serde_json::Value;

use crate::devices::{ROUTER_TO_CLIENT, ROUTER_TO_SERVER, TUN_DOWN, TUN_UP};
use qbench_core::report::link_run::{EgressCounters, LinkCounters};

fn direction<'a>(c: &'a mut LinkCounters, dev: &str) -> Option<&'a mut EgressCounters> {
    match dev {
        ROUTER_TO_SERVER | TUN_UP => Some(&mut c.up),
        ROUTER_TO_CLIENT | TUN_DOWN => Some(&mut c.down),
        _ => None,
    }
}

/// Egress bytes and packets (the root qdisc's: netem's when it is the root, whose child is the
/// rate), overlimits of every qdisc on the device (tbf's and htb's are the rate's), and the
/// drops of the TUNs' own qdiscs, from `tc -s -j qdisc show`; `None` if it is not that JSON.
/// The egress's drops are [`crate::drops`]'s.
pub fn from_tc_json(text: &str) -> Option<LinkCounters> {
    let v: Value = serde_json::from_str(text).ok()?;
    let mut c = LinkCounters::default();
    for q in v.as_array()? {
        let dev = q["dev"].as_str().unwrap_or("");
        let n = |k: &str| q[k].as_u64().unwrap_or(0);
        let Some(d) = direction(&mut c, dev) else {
            continue;
        };
        if dev == TUN_UP || dev == TUN_DOWN {
            // The TUN's own qdisc holds what waits for the delay line's reader.
            d.tun_dropped = d.tun_dropped.saturating_add(n("drops"));
            continue;
        }
        d.overlimits = d.overlimits.saturating_add(n("overlimits"));
        if q["root"] == true {
            d.bytes = d.bytes.saturating_add(n("bytes"));
            d.packets = d.packets.saturating_add(n("packets"));
        }
    }
    Some(c)
}

/// What the kernel dropped at each delay line's TUN (its transmit side: packets on their way
/// to the line's reader), from `ip -s -j link show`; `None` if it is not that JSON.
pub fn tun_drops_from_ip_json(text: &str) -> Option<LinkCounters> {
    let v: Value = serde_json::from_str(text).ok()?;
    let mut c = LinkCounters::default();
    for l in v.as_array()? {
        let name = l["ifname"].as_str().unwrap_or("");
        if name != TUN_UP && name != TUN_DOWN {
            continue;
        }
        if let Some(d) = direction(&mut c, name) {
            let n = l["stats64"]["tx"]["dropped"].as_u64().unwrap_or(0);
            d.tun_dropped = d.tun_dropped.saturating_add(n);
        }
    }
    Some(c)
}

/// Every counter of the router now; `None` when tc cannot be read (the figures would be
/// wrong, not zero). `nft`: the loss rules are nftables' and count their own drops; `tun`:
/// the userspace delay line's TUN devices exist.
pub fn read(router_ns: &str, nft: bool, tun: bool) -> Option<LinkCounters> {
    let tc = crate::exec::output_in(router_ns, &["tc", "-s", "-j", "qdisc", "show"])?;
    let mut c = from_tc_json(&tc)?;
    let drops = crate::drops::from_tc_and_nft(router_ns, &tc, nft)?;
    c.up.dropped = drops.up;
    c.down.dropped = drops.down;
    if tun {
        let ip = crate::exec::output_in(router_ns, &["ip", "-s", "-j", "link", "show"])?;
        let t = tun_drops_from_ip_json(&ip)?;
        c.up.tun_dropped = c.up.tun_dropped.saturating_add(t.up.tun_dropped);
        c.down.tun_dropped = c.down.tun_dropped.saturating_add(t.down.tun_dropped);
    }
    Some(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn egress_counts_the_root_and_overlimits_of_every_qdisc() {
        // A varying rate: htb at the root, a fast tbf below its class.
        let tc = r#"[{"kind":"htb","handle":"1:","dev":"qb-rc","root":true,"bytes":9000,
              "packets":6,"drops":0,"overlimits":40},
            {"kind":"tbf","handle":"2:","parent":"1:1","dev":"qb-rc","bytes":9000,"packets":6,
              "overlimits":2},
            {"kind":"tbf","handle":"1:","dev":"qb-rs","root":true,"bytes":300,"packets":5,
              "overlimits":0},
            {"kind":"noqueue","dev":"lo","root":true,"bytes":77,"packets":1},
            {"kind":"pfifo_fast","dev":"qb-tdn","root":true,"bytes":9000,"packets":6,"drops":4},
            {"kind":"pfifo_fast","dev":"qb-tup","root":true,"bytes":300,"packets":5}]"#;
        let c = from_tc_json(tc).unwrap();
        assert_eq!(
            (c.down.bytes, c.down.packets, c.down.overlimits),
            (9000, 6, 42)
        );
        assert_eq!((c.up.bytes, c.up.packets, c.up.overlimits), (300, 5, 0));
        assert_eq!((c.up.tun_dropped, c.down.tun_dropped), (0, 4));
        assert_eq!(from_tc_json("nope"), None);
    }

    #[test]
    fn tun_drops_are_the_tun_transmit_side() {
        let ip = r#"[{"ifname":"qb-tup","stats64":{"tx":{"dropped":3},"rx":{"dropped":9}}},
            {"ifname":"qb-tdn","stats64":{"tx":{"dropped":12}}},
            {"ifname":"qb-rc","stats64":{"tx":{"dropped":100}}}]"#;
        let c = tun_drops_from_ip_json(ip).unwrap();
        assert_eq!((c.up.tun_dropped, c.down.tun_dropped), (3, 12));
        assert_eq!(tun_drops_from_ip_json("{}"), None);
    }

    proptest! {
        /// Whatever tc or ip print, counters or `None`, never a panic.
        #[test]
        fn any_text_parses_or_not(s in ".{0,300}") {
            let _ = from_tc_json(&s);
            let _ = tun_drops_from_ip_json(&s);
        }

        #[test]
        fn any_numbers_add_without_wrapping(a in any::<u64>(), b in any::<u64>()) {
            let q = serde_json::json!([
                {"dev": "qb-rs", "root": true, "bytes": a, "overlimits": a},
                {"dev": "qb-rs", "root": true, "bytes": b, "overlimits": b}]);
            let c = from_tc_json(&q.to_string()).unwrap();
            prop_assert_eq!(c.up.bytes, a.saturating_add(b));
        }
    }
}
