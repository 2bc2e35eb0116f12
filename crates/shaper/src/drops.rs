//! What the emulated link itself dropped, as the kernel counts it: each router egress's root
//! qdisc counts the drops of its whole tree (tbf's full queue, netem's random loss), and the
//! userspace backend's nftables loss rules count theirs. The TUN forwarders count their own.
//! The edt backend's program drops what its queue cannot hold before fq sees it, and clsact
//! counts those drops.

use serde_json::Value;

use crate::devices::{ROUTER_TO_CLIENT, ROUTER_TO_SERVER};
use crate::exec::output_in;

pub use qbench_core::report::link::LinkDrops as Drops;

fn add(d: &mut Drops, dev: &str, n: u64) {
    match dev {
        ROUTER_TO_SERVER => d.up = d.up.saturating_add(n),
        ROUTER_TO_CLIENT => d.down = d.down.saturating_add(n),
        _ => {}
    }
}

/// Root and clsact qdiscs' drops from `tc -s -j qdisc show`; `None` if it is not that JSON.
pub fn from_tc_json(text: &str) -> Option<Drops> {
    let v: Value = serde_json::from_str(text).ok()?;
    let mut d = Drops::default();
    for q in v.as_array()? {
        if q["root"] == true || q["kind"] == "clsact" {
            add(
                &mut d,
                q["dev"].as_str().unwrap_or(""),
                q["drops"].as_u64().unwrap_or(0),
            );
        }
    }
    Some(d)
}

/// The counters of the loss rules in `nft -j list table inet qb_link` (one rule per direction,
/// matched by output interface); `None` if it is not that JSON.
pub fn from_nft_json(text: &str) -> Option<Drops> {
    let v: Value = serde_json::from_str(text).ok()?;
    let mut d = Drops::default();
    for item in v["nftables"].as_array()? {
        let Some(expr) = item["rule"]["expr"].as_array() else {
            continue;
        };
        let dev = expr.iter().find_map(|e| {
            let m = &e["match"];
            (m["left"]["meta"]["key"] == "oifname")
                .then(|| m["right"].as_str())
                .flatten()
        });
        let packets = expr.iter().find_map(|e| e["counter"]["packets"].as_u64());
        let drops = expr.iter().any(|e| e.get("drop").is_some());
        if let (Some(dev), Some(n), true) = (dev, packets, drops) {
            add(&mut d, dev, n);
        }
    }
    Some(d)
}

/// The router's drops now: qdiscs, plus the nftables loss rules when `nft` made them.
/// `None` when tc cannot be read (the counts would be wrong, not zero).
pub fn read(router_ns: &str, nft: bool) -> Option<Drops> {
    let tc = output_in(router_ns, &["tc", "-s", "-j", "qdisc", "show"])?;
    from_tc_and_nft(router_ns, &tc, nft)
}

/// The drops in `tc` (the output of `tc -s -j qdisc show`), plus the loss rules' when `nft`.
pub(crate) fn from_tc_and_nft(router_ns: &str, tc: &str, nft: bool) -> Option<Drops> {
    let mut d = from_tc_json(tc)?;
    if nft {
        let n = from_nft_json(&output_in(
            router_ns,
            &["nft", "-j", "list", "table", "inet", "qb_link"],
        )?)?;
        add(&mut d, ROUTER_TO_SERVER, n.up);
        add(&mut d, ROUTER_TO_CLIENT, n.down);
    }
    Some(d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn root_qdiscs_count_their_trees() {
        // netem at the root, tbf below: the root's drops include the child's.
        let tc = r#"[{"kind":"noqueue","handle":"0:","dev":"lo","root":true,"drops":5},
            {"kind":"netem","handle":"10:","dev":"qb-rc","root":true,"drops":26},
            {"kind":"tbf","handle":"1:","parent":"10:1","dev":"qb-rc","drops":26},
            {"kind":"tbf","handle":"1:","dev":"qb-rs","root":true,"drops":3}]"#;
        assert_eq!(from_tc_json(tc), Some(Drops { up: 3, down: 26 }));
        assert_eq!(from_tc_json("[]"), Some(Drops::default()));
        // edt: fq's own drops (horizon, limits) and the program's (a full queue), on clsact.
        let tc = r#"[{"kind":"fq","handle":"1:","dev":"qb-rs","root":true,"drops":2},
            {"kind":"clsact","handle":"ffff:","parent":"ffff:fff1","dev":"qb-rs","drops":1019}]"#;
        assert_eq!(from_tc_json(tc), Some(Drops { up: 1021, down: 0 }));
        assert_eq!(from_tc_json("Error: no such netns"), None);
    }

    #[test]
    fn nft_loss_rules_by_interface() {
        let nft = r#"{"nftables": [{"metainfo": {"version": "1.0.6"}},
            {"table": {"family": "inet", "name": "qb_link", "handle": 1}},
            {"rule": {"family": "inet", "table": "qb_link", "chain": "forward", "handle": 2, "expr": [
              {"match": {"op": "==", "left": {"meta": {"key": "oifname"}}, "right": "qb-rs"}},
              {"match": {"op": "<", "left": {"numgen": {"mode": "random", "mod": 1000000, "offset": 0}}, "right": 50000}},
              {"counter": {"packets": 7, "bytes": 700}}, {"drop": null}]}},
            {"rule": {"family": "inet", "table": "qb_link", "chain": "forward", "handle": 3, "expr": [
              {"match": {"op": "==", "left": {"meta": {"key": "oifname"}}, "right": "qb-rc"}},
              {"counter": {"packets": 11, "bytes": 1100}}, {"drop": null}]}}]}"#;
        assert_eq!(from_nft_json(nft), Some(Drops { up: 7, down: 11 }));
        assert_eq!(from_nft_json("{}"), None);
    }

    #[test]
    fn deltas_never_go_negative() {
        let (a, b) = (Drops { up: 5, down: 1 }, Drops { up: 2, down: 4 });
        assert_eq!(b.since(&a), Drops { up: 0, down: 3 });
    }

    proptest! {
        /// Whatever tc or nft print, a count or `None`, never a panic.
        #[test]
        fn any_text_parses_or_not(s in ".{0,300}") {
            let _ = from_tc_json(&s);
            let _ = from_nft_json(&s);
        }

        #[test]
        fn any_json_shape_parses_or_not(
            dev in prop::sample::select(vec!["qb-rs", "qb-rc", "lo", ""]),
            drops in prop::option::of(any::<u64>()),
            root in any::<bool>(),
        ) {
            let q = serde_json::json!([{"dev": dev, "root": root, "drops": drops}]);
            let d = from_tc_json(&q.to_string()).unwrap();
            let n = if root && dev.starts_with("qb-") { drops.unwrap_or(0) } else { 0 };
            prop_assert_eq!(d.total(), n);
        }
    }
}
