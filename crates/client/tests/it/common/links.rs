//! Emulated links built with the shaper library, and what ping measures across them.

use std::process::Command;

use qbench_shaper::BackendChoice;

/// The link namespaces on the machine, except other tests' own fixtures, the links other
/// processes on the host hold (another suite, a CI job, a held load) and the instant
/// namespaces of capability probes (a `--dry-run` beside this test makes one): what this test
/// and its children made, and whatever was left behind.
pub(crate) fn ours() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir("/run/netns")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| {
                    n.starts_with("qb-")
                        && !n.starts_with("qb-test")
                        && !n.starts_with("qb-fwdtest")
                        && !qbench_testkit::others::not_judged(n)
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// `ping ARGS 198.18.2.2` from namespace `ns`: its standard output.
pub(crate) fn ping(ns: &str, args: &[&str]) -> String {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "ping"])
        .args(args)
        .arg("198.18.2.2")
        .output()
        .expect("ping runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs `f` with the client namespace of a link the shaper builds with `backend`.
pub(crate) fn with_link<T>(spec: &str, backend: BackendChoice, f: impl FnOnce(&str) -> T) -> T {
    let opts = qbench_shaper::TopologyOptions::plain(backend);
    let topo = qbench_shaper::Topology::up(spec.parse().unwrap(), &opts).expect("link up (root)");
    f(&topo.names().client)
}

/// `qbench --proto PROTO --objects OBJECTS --link LINK EXTRA... --json -`
pub(crate) fn fetch_over(proto: &str, objects: &str, link: &str, extra: &[&str]) -> super::Run {
    let args = ["--proto", proto, "--objects", objects, "--link", link];
    super::qbench(&[&args[..], extra].concat())
}

/// The round-trip times ping printed, in milliseconds, in the order the replies came.
pub(crate) fn rtts(ping_out: &str) -> Vec<f64> {
    ping_out
        .lines()
        .filter_map(|l| l.split("time=").nth(1))
        .filter_map(|t| t.split_whitespace().next()?.parse().ok())
        .collect()
}

/// How many echoes came back, from ping's summary line.
pub(crate) fn received(ping_out: &str) -> f64 {
    ping_out
        .split(" received")
        .next()
        .and_then(|s| s.rsplit(", ").next())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or_else(|| panic!("no summary: {ping_out}"))
}

/// Replies that came after one with a higher sequence number: packets the link reordered.
pub(crate) fn inversions(ping_out: &str) -> usize {
    let seqs: Vec<u64> = ping_out
        .lines()
        .filter_map(|l| l.split("icmp_seq=").nth(1))
        .filter_map(|t| t.split_whitespace().next()?.parse().ok())
        .collect();
    late(&seqs)
}

/// Sequence numbers that came after a higher one.
pub(crate) fn late(seqs: &[u64]) -> usize {
    let mut highest = 0;
    let mut late = 0;
    for &s in seqs {
        if s < highest {
            late += 1;
        }
        highest = highest.max(s);
    }
    late
}

pub(crate) fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    assert!(n > 0, "no samples");
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

/// Echoes lost over `n` sent with probability `p` of loss each way: within four standard
/// deviations of the binomial's mean (1 in 15,000 false alarms).
pub(crate) fn assert_binomial(lost: f64, n: f64, p_each_way: f64) {
    let p = 1.0 - (1.0 - p_each_way) * (1.0 - p_each_way);
    let sigma = (p * (1.0 - p) / n).sqrt();
    assert!(
        (lost / n - p).abs() < 4.0 * sigma,
        "lost {:.4}, expected {p:.4} +- {:.4}",
        lost / n,
        4.0 * sigma
    );
}

/// Each direction of a calibrated link: its flood arrived within `rate_tol` of `bps` (or of
/// what a sender too slow to fill the link offered, less `loss`), its echo probe lost a
/// binomial share of `loss` (4.5 standard deviations either side, one direction alone,
/// unlike `assert_binomial`), and the check of each of `fields` passed.
pub(crate) fn assert_directions(
    c: &qbench_core::report::calibration::Calibration,
    bps: f64,
    rate_tol: f64,
    loss: f64,
    fields: &[&str],
) {
    for (dir, m) in [("up", &c.up), ("down", &c.down)] {
        let f = m.flood.as_ref().expect("a fixed rate is flooded");
        let got = f.received_bps as f64;
        // A sender slower than the link (a loaded machine, an emulated CPU) cannot fill it:
        // then what it offered, less the link's loss, is what the link must carry.
        let carried = bps.min(f.sent_bps as f64 * (1.0 - loss));
        assert!((got / carried - 1.0).abs() < rate_tol, "{dir}: {f:?}");
        let (n, lost) = (
            m.probe_sent as f64,
            (m.probe_sent - m.probe_received) as f64,
        );
        assert!(n >= 800.0, "{dir}: {m:?}");
        assert!(
            (lost - n * loss).abs() <= 4.5 * (n * loss * (1.0 - loss)).sqrt(),
            "{dir}: {m:?}"
        );
        for field in fields {
            let k = c
                .checks
                .iter()
                .find(|k| k.field == format!("{dir}.{field}"))
                .unwrap();
            // A rate missed only because the sender could not fill the link was judged above
            // by what it offered: a link that carried less would have failed there.
            let slow_sender = *field == "rate"
                && (k.unmeasurable
                    || k.note
                        .as_deref()
                        .is_some_and(|n| n.contains("this machine cannot fill the link")));
            assert!(k.ok || slow_sender, "{k:?}");
        }
    }
}

/// The edt backend's per-direction objects still in the temporary directory: tc loads them
/// from there and the shaper removes them once loaded.
pub(crate) fn edt_objects_left() -> Vec<String> {
    std::fs::read_dir(std::env::temp_dir())
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("qbench-edt-"))
                .collect()
        })
        .unwrap_or_default()
}

/// What the kernel holds for a link whose calibration saw a direction carry nothing: each
/// namespace's neighbours and routes, and the router's qdiscs with their counters. Printed
/// while the link still exists, so that a failure says where its packets stopped.
pub(crate) fn dead_direction_state(
    topo: &qbench_shaper::Topology,
    c: &qbench_core::report::calibration::Calibration,
) -> Option<String> {
    let dead = |m: &qbench_core::report::calibration::DirectionMeasured| {
        m.probe_sent > 0 && m.probe_received == 0
            || m.flood.as_ref().is_some_and(|f| f.received_packets == 0)
    };
    if !dead(&c.up) && !dead(&c.down) {
        return None;
    }
    let n = topo.names();
    let mut out = format!("settled after {:?}\n", topo.settled());
    for (ns, args) in [
        (&n.client, &["neigh", "show"][..]),
        (&n.router, &["neigh", "show"]),
        (&n.server, &["neigh", "show"]),
        (&n.client, &["route", "show"]),
        (&n.router, &["-s", "link", "show"]),
    ] {
        let o = Command::new("ip").arg("-n").arg(ns).args(args).output();
        out += &format!("ip -n {ns} {}:\n", args.join(" "));
        out += &o.map_or_else(
            |e| e.to_string(),
            |o| String::from_utf8_lossy(&o.stdout).into(),
        );
    }
    let o = Command::new("tc")
        .args(["-n", &n.router, "-s", "qdisc", "show"])
        .output();
    out += &format!("tc -n {} -s qdisc show:\n", n.router);
    out += &o.map_or_else(
        |e| e.to_string(),
        |o| String::from_utf8_lossy(&o.stdout).into(),
    );
    Some(out)
}
