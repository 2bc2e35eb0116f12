//! The plan's userspace delay path on the router: one TUN per direction, policy routing into
//! it, and a blackhole fallback so that a dead forwarder drops traffic instead of passing it
//! unimpaired.

use qbench_core::report::link::Names;

use crate::cmd::Cmd;
use crate::devices::{ROUTER_TO_CLIENT, ROUTER_TO_SERVER, TUN_DOWN, TUN_UP};

const TABLE_UP: &str = "100";
const TABLE_DOWN: &str = "101";

/// Every command of the delay path: reverse-path filtering off, then each direction's TUN
/// and the routing into it.
pub(crate) fn tun_path(n: &Names) -> Vec<Cmd> {
    let r = n.router.as_str();
    let mut v = rp_filter_off(r);
    for (tun, from, table) in [
        (TUN_UP, ROUTER_TO_CLIENT, TABLE_UP),
        (TUN_DOWN, ROUTER_TO_SERVER, TABLE_DOWN),
    ] {
        v.extend(tun_device(r, tun));
        v.extend(tun_routes(r, tun, from, table));
    }
    v
}

/// Reverse-path filtering off on the router's veths (and, by `default`, on the TUNs made
/// after): a packet the forwarder writes back comes in on a TUN, not on the device its source
/// is routed through, and would be dropped.
fn rp_filter_off(r: &str) -> Vec<Cmd> {
    ["all", "default", ROUTER_TO_CLIENT, ROUTER_TO_SERVER]
        .into_iter()
        .map(|key| {
            Cmd::new(
                Some(r),
                &["sysctl", "-qw", &format!("net.ipv4.conf.{key}.rp_filter=0")],
            )
        })
        .collect()
}

/// One direction's TUN device on the router, up, with room to queue and IPv4 only.
fn tun_device(r: &str, tun: &str) -> Vec<Cmd> {
    vec![
        Cmd::new(
            None,
            &[
                "ip", "-n", r, "tuntap", "add", "dev", tun, "mode", "tun", "vnet_hdr",
            ],
        ),
        Cmd::new(
            None,
            &[
                "ip",
                "-n",
                r,
                "link",
                "set",
                "dev",
                tun,
                "txqueuelen",
                "10000",
            ],
        ),
        Cmd::new(
            Some(r),
            &[
                "sysctl",
                "-qw",
                &format!("net.ipv6.conf.{tun}.disable_ipv6=1"),
            ],
        ),
        Cmd::new(
            Some(r),
            &["sysctl", "-qw", &format!("net.ipv4.conf.{tun}.rp_filter=0")],
        ),
        Cmd::new(None, &["ip", "-n", r, "link", "set", "dev", tun, "up"]),
    ]
}

/// What comes in on `from` is looked up in `table`, whose default route is the TUN; the
/// blackhole behind it, at a worse metric, takes over when the TUN is gone.
fn tun_routes(r: &str, tun: &str, from: &str, table: &str) -> Vec<Cmd> {
    vec![
        Cmd::new(
            None,
            &[
                "ip",
                "-n",
                r,
                "route",
                "add",
                "blackhole",
                "default",
                "table",
                table,
                "metric",
                "100",
            ],
        ),
        Cmd::new(
            None,
            &[
                "ip", "-n", r, "route", "add", "default", "dev", tun, "table", table, "metric",
                "10",
            ],
        ),
        Cmd::new(
            None,
            &[
                "ip", "-n", r, "rule", "add", "iif", from, "lookup", table, "pref", "100",
            ],
        ),
    ]
}
