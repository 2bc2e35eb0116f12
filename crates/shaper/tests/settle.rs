//! A link is handed over only once it has carried a datagram each way (root, as CI), and its
//! neighbours are fixed when it is built, so no ARP crosses the emulated link. A link that
//! drops everything one way is not waited for, and builds all the same.

mod common;

use std::process::Command;
use std::time::Duration;

use common::needs::{require, Need};
use qbench_shaper::{BackendChoice, Topology, TopologyOptions};

fn neighbour(ns: &str, addr: &str) -> String {
    let out = Command::new("ip")
        .args(["-n", ns, "neigh", "show", addr])
        .output()
        .expect("ip runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_link_is_handed_over_once_it_has_carried_an_echo() {
    require!(Need::Link);
    let opts = TopologyOptions::plain(BackendChoice::Userspace);
    let topo = Topology::up("rtt=40ms,loss=20%".parse().unwrap(), &opts).expect("link up");
    let took = topo.settled().expect("a link losing 20% carries an echo");
    // No echo comes back sooner than the delay it crosses.
    assert!(took >= Duration::from_millis(40), "{took:?}");
    let n = topo.names();
    for (ns, addr) in [
        (&n.client, n.router_client_side()),
        (&n.router, n.server_addr()),
        (&n.server, n.router_server_side()),
        (&n.router, n.client_addr()),
    ] {
        let entry = neighbour(ns, &addr);
        assert!(
            entry.contains("lladdr") && entry.contains("PERMANENT"),
            "{ns} has no fixed neighbour {addr}: {entry:?}"
        );
    }
    drop(topo);

    let topo = Topology::up("up.loss=100%".parse().unwrap(), &opts).expect("link up");
    assert_eq!(topo.settled(), None);
}
