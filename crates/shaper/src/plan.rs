//! LinkSpec -> the exact commands that build the topology and its impairments. Pure: the
//! executor runs the list, `--dry-run` prints it.

use qbench_core::spec::link::LinkSpec;
use serde::Serialize;

pub use crate::cmd::Cmd;
pub use crate::devices::{
    CLIENT_IF, ROUTER_TO_CLIENT, ROUTER_TO_SERVER, SERVER_IF, TUN_DOWN, TUN_UP,
};
use crate::qdisc;
use crate::tun_path::tun_path;

/// Addresses from the benchmarking range 198.18.0.0/15 (RFC 2544).
pub const CLIENT_ADDR: &str = "198.18.1.2";
pub const ROUTER_CLIENT_SIDE: &str = "198.18.1.1";
pub const ROUTER_SERVER_SIDE: &str = "198.18.2.1";
pub const SERVER_ADDR: &str = "198.18.2.2";

/// The server's address at the far end of a chain (`--link-b`): the second segment's.
pub fn chain_server_addr() -> String {
    Names::beyond("0", &Names::new("0")).server_addr()
}

/// The UDP/TCP buffer sizes set inside the endpoint namespaces, so they are not the bottleneck.
pub const ENDPOINT_SYSCTLS: &[(&str, &str)] = &[
    ("net.ipv4.tcp_rmem", "4096 131072 67108864"),
    ("net.ipv4.tcp_wmem", "4096 65536 67108864"),
];

pub use qbench_core::report::link::{Backend, Names};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum Offloads {
    /// Leave GSO/TSO/GRO as the kernel sets them on veth.
    Default,
    On,
    Off,
}

/// The offloads a link gets. With loss in either direction and no explicit choice, off: netem,
/// nftables and the forwarder drop whole skbs, and a GSO super-packet (up to 64 KiB of TCP
/// segments, or quinn's ten datagrams) would be lost at once, making loss bursty and less
/// frequent than asked, and differently so for TCP and QUIC.
pub fn effective_offloads(asked: Offloads, link: &LinkSpec) -> Offloads {
    if asked == Offloads::Default && (link.up.loss > 0.0 || link.down.loss > 0.0) {
        Offloads::Off
    } else {
        asked
    }
}

/// What the plan needs besides the link.
#[derive(Debug, Clone)]
pub struct PlanOptions {
    pub backend: Backend,
    pub offloads: Offloads,
    /// nftables is present (else the userspace forwarder drops packets itself).
    pub nft: bool,
    /// TCP cwnd cap in packets, applied on the server's route toward the client.
    pub tcp_cwnd_cap: Option<u32>,
    /// TCP initial window in packets, on the same route.
    pub tcp_initial_cwnd: Option<u32>,
    /// `net.ipv4.tcp_reordering` in the server's namespace (per namespace since Linux 4.x).
    pub tcp_reordering: Option<u32>,
    /// Where the edt backend's per-direction objects are written before tc loads them.
    pub edt_objects: std::path::PathBuf,
}

/// A veth end's hardware address, made from its IPv4 address (locally administered, and
/// unique on its segment), so that the plan names it before the device exists.
fn mac(addr: &str) -> String {
    let o: Vec<u8> = addr.split('.').filter_map(|x| x.parse().ok()).collect();
    let at = |i: usize| o.get(i).copied().unwrap_or(0);
    format!(
        "02:00:{:02x}:{:02x}:{:02x}:{:02x}",
        at(0),
        at(1),
        at(2),
        at(3)
    )
}

/// Namespaces, veths, addresses, routes and forwarding: the topology without impairments.
fn topology(n: &Names, mtu: Option<u32>, offloads: Offloads) -> Vec<Cmd> {
    let (c, r, s) = (n.client.as_str(), n.router.as_str(), n.server.as_str());
    let mut v: Vec<Cmd> = n
        .own()
        .iter()
        .map(|ns| Cmd::new(None, &["ip", "netns", "add", ns]))
        .collect();
    v.extend(veth_pairs(n));
    let ends = [
        (c, CLIENT_IF, n.client_addr()),
        (r, ROUTER_TO_CLIENT, n.router_client_side()),
        (r, ROUTER_TO_SERVER, n.router_server_side()),
        (s, SERVER_IF, n.server_addr()),
    ];
    let neighbours = fixed_neighbours(n);
    let routes = routes(n);
    let in_ns = |cmds: &[Cmd], ns: &str| -> Vec<Cmd> {
        cmds.iter()
            .filter(|c| c.argv.get(2).map(String::as_str) == Some(ns))
            .cloned()
            .collect()
    };
    // One namespace after the other, its offloads first: the executor sends a namespace's
    // consecutive `ip` commands to one `ip -batch`, and `ethtool` between them would split it.
    for ns in [c, r, s] {
        let here = ends.iter().filter(|(at, ..)| *at == ns);
        v.extend(
            here.clone()
                .filter_map(|(_, dev, _)| offload(ns, dev, offloads)),
        );
        for (_, dev, addr) in here {
            v.extend(veth_end(ns, dev, addr, mtu));
        }
        if n.own().iter().any(|o| o.as_str() == ns) {
            v.push(Cmd::new(
                None,
                &["ip", "-n", ns, "link", "set", "dev", "lo", "up"],
            ));
        }
        v.extend(in_ns(&neighbours, ns));
        v.extend(in_ns(&routes, ns));
    }
    v.push(Cmd::new(
        Some(r),
        &["sysctl", "-qw", "net.ipv4.ip_forward=1"],
    ));
    v.extend(endpoint_sysctls(n));
    v
}

/// The router's two veth pairs, one toward each end, with the ends' hardware addresses.
fn veth_pairs(n: &Names) -> Vec<Cmd> {
    [
        (
            ROUTER_TO_CLIENT,
            n.router_client_side(),
            CLIENT_IF,
            n.client_addr(),
            n.client.as_str(),
        ),
        (
            ROUTER_TO_SERVER,
            n.router_server_side(),
            SERVER_IF,
            n.server_addr(),
            n.server.as_str(),
        ),
    ]
    .into_iter()
    .map(|(router_if, router_addr, peer_if, peer_addr, peer_ns)| {
        Cmd::new(
            None,
            &[
                "ip",
                "-n",
                &n.router,
                "link",
                "add",
                router_if,
                "address",
                &mac(&router_addr),
                "type",
                "veth",
                "peer",
                "name",
                peer_if,
                "address",
                &mac(&peer_addr),
                "netns",
                peer_ns,
            ],
        )
    })
    .collect()
}

/// One veth end's offloads, when asked to change them.
fn offload(ns: &str, dev: &str, offloads: Offloads) -> Option<Cmd> {
    let st = match offloads {
        Offloads::Default => return None,
        Offloads::On => "on",
        Offloads::Off => "off",
    };
    Some(Cmd::new(
        Some(ns),
        &[
            "ethtool",
            "-K",
            dev,
            "gso",
            st,
            "tso",
            st,
            "gro",
            st,
            "tx-udp-segmentation",
            st,
        ],
    ))
}

/// One veth end: its address, its MTU if asked, then up.
fn veth_end(ns: &str, dev: &str, addr: &str, mtu: Option<u32>) -> Vec<Cmd> {
    let mut v = vec![Cmd::new(
        None,
        &[
            "ip",
            "-n",
            ns,
            "addr",
            "add",
            &format!("{addr}/24"),
            "dev",
            dev,
        ],
    )];
    if let Some(m) = mtu {
        v.push(Cmd::new(
            None,
            &[
                "ip",
                "-n",
                ns,
                "link",
                "set",
                "dev",
                dev,
                "mtu",
                &m.to_string(),
            ],
        ));
    }
    v.push(Cmd::new(
        None,
        &["ip", "-n", ns, "link", "set", "dev", dev, "up"],
    ));
    v
}

/// Fixed neighbours: no ARP crosses the emulated link. netem's loss drops every packet of its
/// device, ARP included, and a lost try held a fresh link's first packets for a second.
fn fixed_neighbours(n: &Names) -> Vec<Cmd> {
    let (c, r, s) = (n.client.as_str(), n.router.as_str(), n.server.as_str());
    [
        (c, CLIENT_IF, n.router_client_side()),
        (r, ROUTER_TO_CLIENT, n.client_addr()),
        (r, ROUTER_TO_SERVER, n.server_addr()),
        (s, SERVER_IF, n.router_server_side()),
    ]
    .into_iter()
    .map(|(ns, dev, peer)| {
        Cmd::new(
            None,
            &[
                "ip",
                "-n",
                ns,
                "neigh",
                "replace",
                &peer,
                "lladdr",
                &mac(&peer),
                "dev",
                dev,
                "nud",
                "permanent",
            ],
        )
    })
    .collect()
}

/// The ends' routes through the router.
fn routes(n: &Names) -> Vec<Cmd> {
    // A chain's middle host keeps its default route toward the client; only the far server's
    // subnet goes this way.
    let toward_server = if n.shares_client {
        n.server_net()
    } else {
        "default".to_string()
    };
    [
        (n.client.as_str(), toward_server, n.router_client_side()),
        (
            n.server.as_str(),
            "default".to_string(),
            n.router_server_side(),
        ),
    ]
    .into_iter()
    .map(|(ns, dest, via)| Cmd::new(None, &["ip", "-n", ns, "route", "add", &dest, "via", &via]))
    .collect()
}

/// [`ENDPOINT_SYSCTLS`] in each end's namespace; a chain's middle host, a segment's client
/// too, keeps the ones its own segment set.
fn endpoint_sysctls(n: &Names) -> Vec<Cmd> {
    let ends: Vec<&str> = if n.shares_client {
        vec![&n.server]
    } else {
        vec![&n.client, &n.server]
    };
    let mut v = Vec::new();
    for ns in ends {
        for (k, val) in ENDPOINT_SYSCTLS {
            v.push(Cmd::new(
                Some(ns),
                &["sysctl", "-qw", &format!("{k}={val}")],
            ));
        }
    }
    v
}

/// Every command that brings the link up, in order.
pub fn up(names: &Names, link: &LinkSpec, opts: &PlanOptions) -> Vec<Cmd> {
    let mtu = link.mtu.unwrap_or(1500);
    let mut v = topology(names, link.mtu, effective_offloads(opts.offloads, link));
    let r = names.router.as_str();
    let dirs = [(ROUTER_TO_SERVER, &link.up), (ROUTER_TO_CLIENT, &link.down)];
    match opts.backend {
        Backend::Netem => {
            for (dev, d) in dirs {
                let n = qdisc::netem(r, dev, d);
                let under_netem = n.is_some();
                v.extend(n);
                v.extend(qdisc::rate(r, dev, d, mtu, under_netem));
            }
        }
        Backend::Edt => {
            for ((dev, d), name) in dirs.into_iter().zip(["up", "down"]) {
                let obj = crate::edt::object_path(&opts.edt_objects, name);
                v.extend(crate::edt::commands(r, dev, d, mtu, &obj));
            }
            v.extend(qdisc::nft_loss(names, link));
        }
        Backend::Userspace => {
            for (dev, d) in dirs {
                v.extend(qdisc::rate(r, dev, d, mtu, false));
            }
            if opts.nft {
                v.extend(qdisc::nft_loss(names, link));
            }
            if link.up.needs_delay_path()
                || link.down.needs_delay_path()
                || (!opts.nft && (link.up.loss > 0.0 || link.down.loss > 0.0))
            {
                v.extend(tun_path(names));
            }
        }
    }
    if let Some(n) = opts.tcp_reordering {
        v.push(Cmd::new(
            Some(names.server.as_str()),
            &["sysctl", "-qw", &format!("net.ipv4.tcp_reordering={n}")],
        ));
    }
    if opts.tcp_cwnd_cap.is_some() || opts.tcp_initial_cwnd.is_some() {
        v.extend(tcp_route_metrics(
            names,
            opts.tcp_cwnd_cap,
            opts.tcp_initial_cwnd,
        ));
    }
    v
}

/// The TCP congestion-window cap (a locked `cwnd` metric) and initial window (`initcwnd`) on
/// the server's route toward the client. The kernel applies a locked cwnd through its TCP
/// metrics cache, so the cache is flushed here and the first connection afterwards primes it.
pub fn tcp_route_metrics(n: &Names, cap: Option<u32>, initcwnd: Option<u32>) -> Vec<Cmd> {
    let s = n.server.as_str();
    let mut argv: Vec<String> = [
        "ip",
        "-n",
        s,
        "route",
        "replace",
        &n.client_net(),
        "via",
        &n.router_server_side(),
        "dev",
        SERVER_IF,
    ]
    .iter()
    .map(|a| a.to_string())
    .collect();
    if let Some(c) = cap {
        argv.extend(["cwnd".into(), "lock".into(), c.to_string()]);
    }
    if let Some(i) = initcwnd {
        argv.extend(["initcwnd".into(), i.to_string()]);
    }
    vec![
        Cmd {
            ns: None,
            argv,
            stdin: None,
        },
        Cmd::new(None, &["ip", "-n", s, "tcp_metrics", "flush", "all"]),
    ]
}

/// Tearing down is deleting the namespaces: every veth, TUN, qdisc and nft table in them goes.
pub fn down(names: &Names) -> Vec<Cmd> {
    names
        .own()
        .iter()
        .map(|ns| Cmd::new(None, &["ip", "netns", "del", ns]))
        .collect()
}

/// Joins two segments into one path through the middle host (`far` is beyond `near`): the
/// routers learn the subnets at the far ends, and the middle host forwards what is not its
/// own, so a client can also reach the far server directly, across both segments.
pub fn chain(near: &Names, far: &Names) -> Vec<Cmd> {
    vec![
        Cmd::new(
            None,
            &[
                "ip",
                "-n",
                &near.router,
                "route",
                "add",
                &far.server_net(),
                "via",
                &near.server_addr(),
            ],
        ),
        Cmd::new(
            None,
            &[
                "ip",
                "-n",
                &far.router,
                "route",
                "add",
                &near.client_net(),
                "via",
                &far.client_addr(),
            ],
        ),
        Cmd::new(
            Some(&near.server),
            &["sysctl", "-qw", "net.ipv4.ip_forward=1"],
        ),
    ]
}

/// The shell script `--dry-run` prints.
pub fn script(cmds: &[Cmd]) -> String {
    let mut s = String::from("#!/bin/sh\nset -e\n");
    for c in cmds {
        s.push_str(&c.to_string());
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(backend: Backend) -> PlanOptions {
        PlanOptions {
            backend,
            offloads: Offloads::Default,
            nft: true,
            tcp_cwnd_cap: None,
            tcp_initial_cwnd: None,
            tcp_reordering: None,
            edt_objects: "/tmp/qbench-edt-ID".into(),
        }
    }

    #[test]
    fn userspace_plan() {
        let link: LinkSpec = "rate=100mbit,rtt=36ms,loss=1%,up.rate=10mbit"
            .parse()
            .unwrap();
        insta::assert_snapshot!(script(&up(
            &Names::new("a1b2"),
            &link,
            &opts(Backend::Userspace)
        )));
    }

    /// Starting a program is most of a link's set-up time: each namespace's `ip` commands
    /// stay together for one `ip -batch`, and nothing else is started but what must be.
    #[test]
    fn a_plan_starts_few_programs() {
        let link: LinkSpec = "rtt=40ms,loss=1%".parse().unwrap();
        let mut o = opts(Backend::Userspace);
        o.offloads = Offloads::Off;
        let plan = up(&Names::new("a1b2"), &link, &o);
        // 3 `ip netns add`, the router's veth pairs, then per namespace its offloads and one
        // batch (the router has two ethtools), nft's loss rules, and three batches for the two TUNs (a
        // TUN's sysctls come between its creation and its `up`); the sysctls are written in place.
        assert_eq!(plan.len(), 52, "{}", script(&plan));
        assert_eq!(
            crate::exec::programs(&plan),
            3 + 1 + 2 + 3 + 2 + 1 + 3,
            "{}",
            script(&plan)
        );
    }

    #[test]
    fn netem_plan_and_cap() {
        let link: LinkSpec = "rate=5mbit,rtt=112ms,jitter=10ms,queue=30KB"
            .parse()
            .unwrap();
        let mut o = opts(Backend::Netem);
        o.tcp_cwnd_cap = Some(430);
        o.offloads = Offloads::Off;
        insta::assert_snapshot!(script(&up(&Names::new("ff00"), &link, &o)));
    }

    /// The plan crates/client/tests/it/netem_kernel.rs runs on a kernel with netem (in a VM)
    /// and compares with this snapshot, command for command.
    #[test]
    fn netem_kernel_plan() {
        let link: LinkSpec =
            "rate=20mbit,rtt=40ms,jitter=4ms,loss=1%,queue=30KB,up.rate=5mbit,up.reorder=off"
                .parse()
                .unwrap();
        insta::assert_snapshot!(script(&up(&Names::new("ID"), &link, &opts(Backend::Netem))));
    }

    #[test]
    fn edt_plan() {
        let link: LinkSpec = "rate=10gbit,rtt=2ms,loss=0.1%,up.rate=1gbit"
            .parse()
            .unwrap();
        insta::assert_snapshot!(script(&up(&Names::new("e1"), &link, &opts(Backend::Edt))));
    }

    /// Each fixed neighbour names the address its peer's device was given, on a chain's
    /// second segment too.
    #[test]
    fn fixed_neighbours_match_the_devices() {
        let near = Names::new("n1");
        let far = Names::beyond("f1", &near);
        for n in [&near, &far] {
            let text = script(&topology(n, None, Offloads::Default));
            for ip in [
                n.client_addr(),
                n.router_client_side(),
                n.router_server_side(),
                n.server_addr(),
            ] {
                let m = mac(&ip);
                assert!(text.contains(&format!("address {m}")), "{ip}: {text}");
                assert!(text.contains(&format!("{ip} lladdr {m}")), "{ip}: {text}");
            }
            assert_eq!(text.matches(" nud permanent").count(), 4, "{text}");
        }
        assert_ne!(mac(&near.server_addr()), mac(&far.server_addr()));
    }

    #[test]
    fn rate_only_needs_no_tun() {
        let link: LinkSpec = "rate=1gbit".parse().unwrap();
        let cmds = up(&Names::new("1"), &link, &opts(Backend::Userspace));
        assert!(!cmds.iter().any(|c| c.argv.contains(&"tuntap".to_string())));
        assert!(cmds.iter().any(|c| c.argv.contains(&"tbf".to_string())));
    }

    #[test]
    fn names_we_own() {
        assert!(Names::is_ours("qb-a1b2-r"));
        assert!(!Names::is_ours("qb-a1b2-x"));
        assert!(!Names::is_ours("docker0"));
        assert!(!Names::is_ours("qb--c"));
        assert!(!Names::is_ours("qb-zz-c"));
        assert_eq!(down(&Names::new("a1")).len(), 3);
    }
}
