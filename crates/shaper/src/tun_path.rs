//! The plan's userspace delay path on the router: one TUN per direction, policy routing into
//! it, and a blackhole fallback so that a dead forwarder drops traffic instead of passing it
//! unimpaired.

use qbench_core::report::link::Names;

use crate::cmd::Cmd;
use crate::devices::{ROUTER_TO_CLIENT, ROUTER_TO_SERVER, TUN_DOWN, TUN_UP};

const TABLE_UP: &str = "100";
const TABLE_DOWN: &str = "101";

/// The userspace delay path: one TUN per direction, policy routing into it, and a blackhole
/// fallback so that a dead forwarder drops traffic instead of passing it unimpaired.
pub(crate) fn tun_path(n: &Names) -> Vec<Cmd> {
    let r = n.router.as_str();
    let mut v = Vec::new();
    for key in ["all", "default", ROUTER_TO_CLIENT, ROUTER_TO_SERVER] {
        v.push(Cmd::new(
            Some(r),
            &["sysctl", "-qw", &format!("net.ipv4.conf.{key}.rp_filter=0")],
        ));
    }
    for (tun, from, table) in [
        (TUN_UP, ROUTER_TO_CLIENT, TABLE_UP),
        (TUN_DOWN, ROUTER_TO_SERVER, TABLE_DOWN),
    ] {
        v.push(Cmd::new(
            None,
            &[
                "ip", "-n", r, "tuntap", "add", "dev", tun, "mode", "tun", "vnet_hdr",
            ],
        ));
        v.push(Cmd::new(
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
        ));
        v.push(Cmd::new(
            Some(r),
            &[
                "sysctl",
                "-qw",
                &format!("net.ipv6.conf.{tun}.disable_ipv6=1"),
            ],
        ));
        v.push(Cmd::new(
            Some(r),
            &["sysctl", "-qw", &format!("net.ipv4.conf.{tun}.rp_filter=0")],
        ));
        v.push(Cmd::new(
            None,
            &["ip", "-n", r, "link", "set", "dev", tun, "up"],
        ));
        v.push(Cmd::new(
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
        ));
        v.push(Cmd::new(
            None,
            &[
                "ip", "-n", r, "route", "add", "default", "dev", tun, "table", table, "metric",
                "10",
            ],
        ));
        v.push(Cmd::new(
            None,
            &[
                "ip", "-n", r, "rule", "add", "iif", from, "lookup", table, "pref", "100",
            ],
        ));
    }
    v
}
