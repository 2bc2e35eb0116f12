//! Every bad-input path: a one-line error naming the flag, a non-zero exit, no report.

use crate::common;

use common::needs::{require, Need};

fn rejected(args: &[&str], flag: &str) {
    let out = common::qbench_plain(args);
    assert_eq!(out.code, Some(2), "{args:?}: {}", out.stderr);
    assert!(out.stdout.is_empty(), "{args:?} printed a report");
    let err = out.stderr;
    let first = err.lines().next().unwrap_or_default();
    assert!(first.starts_with("error:"), "{args:?}: {err}");
    assert!(
        first.contains(flag),
        "{args:?}: first line should name {flag}: {first}"
    );
}

#[test]
fn malformed_objects() {
    rejected(&["--objects", "200x5kb"], "--objects");
    rejected(&["--objects", "ax5KB"], "--objects");
    rejected(&["--objects", "200x"], "--objects");
    rejected(&["--objects", ""], "--objects");
    rejected(&["--objects", "1x5KB,,"], "--objects");
}

#[test]
fn zero_counts() {
    rejected(&["--objects", "0x5KB"], "--objects");
    rejected(&["--connections", "0"], "--connections");
    rejected(&["--runs", "0"], "--runs");
    rejected(&["--streams", "0"], "--streams");
    rejected(
        &["--url", "https://127.0.0.1:9/x", "--repeat", "0"],
        "--repeat",
    );
    rejected(&["--timeout", "0s"], "--timeout");
}

#[test]
fn unknown_or_contradictory_options() {
    rejected(&["--proto", "h4"], "--proto");
    rejected(&["--timeout", "soon"], "--timeout");
    rejected(&["--proto", "h1", "--streams", "4"], "--streams");
    rejected(&["--proto", "h2", "--0rtt"], "--0rtt");
    rejected(&["--reuse", "--resume", "--runs", "2"], "--reuse");
    rejected(
        &["--objects", "2x1KB", "--connections", "3"],
        "--connections",
    );
    rejected(&["--insecure", "--ca", "x.pem"], "--insecure");
    rejected(
        &["--url", "https://127.0.0.1:9/a", "--objects", "1x1KB"],
        "--objects",
    );
}

#[test]
fn bad_targets() {
    rejected(&["--target", "http://127.0.0.1:9"], "--target");
    rejected(&["--target", "https://127.0.0.1:9/bytes/1"], "--target");
    rejected(&["--target", "not a url"], "--target");
    rejected(&["--target", "https://127.0.0.1:99999"], "--target");
    rejected(&["--target", "https://127.0.0.1:0"], "--target");
    rejected(&["--url", "https://127.0.0.1:65536/a"], "--url");
    rejected(
        &[
            "--url",
            "https://127.0.0.1:9/a",
            "--url",
            "https://127.0.0.1:10/b",
        ],
        "--url",
    );
    rejected(
        &[
            "--target",
            "https://127.0.0.1:9",
            "--ca",
            "/nonexistent/ca.pem",
        ],
        "--ca",
    );
}

#[test]
fn connect_to_needs_a_remote() {
    rejected(&["--connect-to", "127.0.0.1:9"], "--connect-to");
    rejected(
        &["--connect-to", "nowhere", "--target", "https://localhost:9"],
        "--connect-to",
    );
}

#[test]
fn congestion_control_options() {
    rejected(&["--proto", "h2", "--cwnd-cap", "10"], "--cwnd-cap");
    rejected(&["--proto", "h1", "--initial-cwnd", "10"], "--initial-cwnd");
    rejected(&["--cwnd-cap", "0"], "--cwnd-cap");
    rejected(&["--cc", "vegas"], "--cc");
    rejected(&["--cc", "bbr", "--target", "https://127.0.0.1:9"], "--cc");
    rejected(&["--rwnd", "10"], "--rwnd");
    rejected(&["--rwnd", "5kb"], "--rwnd");
    rejected(
        &["--url", "https://127.0.0.1:9/a", "--state-graph", "x.dot"],
        "--state-graph",
    );
    rejected(&["--no-telemetry", "--plot", "x.svg"], "--plot");
}

#[test]
fn outputs_that_cannot_be_drawn() {
    let link = ["--link", "rate=10mbit"];
    rejected(
        &[
            &["compete", "--flows", "h3:1,h2:1", "--plot", "x.svg"][..],
            &link,
        ]
        .concat(),
        "--plot",
    );
    rejected(&["--no-telemetry", "--plot", "x.svg"], "--plot");
    rejected(
        &["--sample-interval", "0s", "--state-graph", "x.dot"],
        "--state-graph",
    );
    rejected(
        &[
            "compare",
            "--protos",
            "h2,h3",
            "--no-telemetry",
            "--plot",
            "x.svg",
        ],
        "--plot",
    );
    rejected(&["compare", "--protos", "h2,h3,h1"], "--protos");
}

#[test]
fn link_durations_too_long_for_a_clock() {
    rejected(&["--link", "rtt=1e30s", "--dry-run"], "--link");
    rejected(&["--link", "jitter=1e300ms", "--dry-run"], "--link");
}

#[test]
fn object_counts_that_overflow() {
    rejected(&["--objects", "18446744073709551615x1B,2x1B"], "--objects");
    rejected(&["--objects", "18446744073709551615x1B,1x1B"], "--objects");
}

#[test]
fn links_empty_repeated_or_below_tc() {
    rejected(&["--link=", "--dry-run"], "--link");
    rejected(
        &["--link", "rate=10mbit,rate=20mbit", "--dry-run"],
        "--link",
    );
    rejected(&["--link", "rate=1bit", "--dry-run"], "--link");
}

/// A rate past tc's 32-bit queue or a delay past the delay path's hour is bad input at parse
/// (exit 2, the field named), not a failure in tc's words once the namespaces are made.
#[test]
fn links_tc_or_the_delay_path_cannot_build_are_refused_at_parse() {
    for (link, field) in [
        ("rate=10tbit", "`rate`"),
        ("rtt=99999999999s", "`rtt`"),
        ("rate=1gbit,queue=100s", "`up.queue`"),
    ] {
        rejected(&["--link", link, "--dry-run"], "--link");
        let out = common::qbench_plain(&["--link", link, "--dry-run"]);
        assert!(out.stderr.contains(field), "{link}: {}", out.stderr);
    }
}

#[test]
fn outputs_that_cannot_be_written_are_refused_before_the_first_run() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    rejected(&["--json", "/nonexistent/dir/r.json"], "--json");
    rejected(&["--json", d], "--json");
    rejected(&["--plot", "/nonexistent/p.svg"], "--plot");
    let leftovers: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn a_cause_is_said_once() {
    // Without root the link is refused for that, before its trace is read.
    require!(Need::Link);
    let out = common::qbench_plain(&[
        "--link",
        "rate=trace:/nonexistent/trace.txt",
        "--objects",
        "1x1KB",
    ]);
    assert_ne!(out.code, Some(0));
    let first = out.stderr.lines().next().unwrap_or_default();
    assert!(first.contains("--link"), "{first}");
    assert_eq!(first.matches("os error 2").count(), 1, "{first}");
}

#[test]
fn telemetry_tokens_and_server_limits() {
    rejected(&["--telemetry-token", "has space"], "--telemetry-token");
    rejected(&["--telemetry-token", "x/y?z"], "--telemetry-token");
    for (flag, value) in [
        ("--idle-timeout", "0s"),
        ("--handshake-timeout", "2days"),
        ("--header-timeout", "soon"),
        ("--max-connections", "0"),
        ("--telemetry", "sometimes"),
        ("--tls-records", "small"),
        ("--tls-records", ""),
    ] {
        rejected(&["serve", flag, value], flag);
    }
}

/// The load flags: each refused with its flag named and exit 2 (usage), before anything runs.
#[test]
fn bad_loads() {
    let usage = |args: &[&str], flag: &str| {
        rejected(args, flag);
        assert_eq!(common::qbench_plain(args).code, Some(2), "{args:?}");
    };
    usage(&["--duration", "10s", "--rate", "0"], "--rate");
    usage(&["--duration", "10s", "--rate", "-5"], "--rate");
    usage(&["--duration", "10s", "--rate", "fast"], "--rate");
    usage(&["--duration", "10s", "--rate", "1e300"], "--rate");
    usage(&["--duration", "0s"], "--duration");
    usage(&["--duration", "1000years"], "--duration");
    usage(&["--duration", "5s", "--warmup", "5s"], "--warmup");
    usage(&["--duration", "5s", "--warmup", "9s"], "--warmup");
    usage(&["--rate", "100"], "--duration");
    usage(&["--warmup", "1s"], "--duration");
    usage(&["--duration", "2s", "--interval", "3s"], "--interval");
    usage(&["--duration", "2s", "--interval", "1ms"], "--interval");
    usage(
        &["--duration", "2s", "--rate", "10", "--max-inflight", "0"],
        "--max-inflight",
    );
    usage(&["--duration", "2s", "--max-inflight", "10"], "--rate");
    usage(&["--duration", "2s", "--arrivals", "poisson"], "--rate");
    usage(
        &["--duration", "2s", "--rate", "10", "--streams", "4"],
        "--streams",
    );
    usage(&["--json-stream", "-"], "--interval");
    usage(
        &["--interval", "1s", "--json-stream", "-", "--json", "-"],
        "--json-stream",
    );
    rejected(
        &[
            "compare",
            "--protos",
            "h2,h3",
            "--duration",
            "2s",
            "--metric",
            "plt",
        ],
        "--metric",
    );
    rejected(
        &["compare", "--protos", "h2,h3", "--metric", "p95"],
        "--metric",
    );
}

/// More connections than the open-file limit allows (and may raise): refused before
/// anything starts, naming the limit and what is needed.
#[test]
fn connections_beyond_the_descriptor_limit() {
    require!(Need::Tool("prlimit"));
    let out = std::process::Command::new("prlimit")
        .args(["--nofile=512:512", env!("CARGO_BIN_EXE_qbench")])
        .args([
            "--proto",
            "h2",
            "--connections",
            "1000",
            "--objects",
            "1000x1B",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("error: --connections:"), "{err}");
    assert!(err.contains("RLIMIT_NOFILE is 512"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

/// `--reorder-threshold`: 1 to 1000 packets; TCP's only behind a link (a namespace's sysctl),
/// and only for the in-process server.
#[test]
fn bad_reorder_thresholds() {
    for args in [
        &["--reorder-threshold", "0"][..],
        &["--reorder-threshold", "1001"][..],
        &["--reorder-threshold", "many"][..],
        &["--proto", "h2", "--reorder-threshold", "10"][..],
        &["--proto", "h1", "--reorder-threshold", "10"][..],
        &[
            "--target",
            "https://127.0.0.1:9",
            "--reorder-threshold",
            "10",
        ][..],
    ] {
        rejected(args, "--reorder-threshold");
        assert_eq!(common::qbench_plain(args).code, Some(2), "{args:?}");
    }
    for args in [
        &["--reorder-time-threshold", "0.5"][..],
        &["--reorder-time-threshold", "nan"][..],
        &["--proto", "h2", "--reorder-time-threshold", "2"][..],
    ] {
        rejected(args, "--reorder-time-threshold");
        assert_eq!(common::qbench_plain(args).code, Some(2), "{args:?}");
    }
}

/// `--client-cpu`: a share of one core up to the cores here; `--client-cpuset`: CPUs this
/// process may use; per side, a share or `none`.
#[test]
fn bad_client_cpu_limits() {
    let cores = std::thread::available_parallelism().unwrap().get();
    let too_many = format!("{}", cores + 1);
    let all_cpus = format!("0-{}", cores - 1);
    for args in [
        &["--client-cpu", "0"][..],
        &["--client-cpu=-0.5"][..],
        &["--client-cpu", "0.001"][..],
        &["--client-cpu", too_many.as_str()][..],
        &["--client-cpu", "half"][..],
        &["--client-cpu", "inf"][..],
    ] {
        rejected(args, "--client-cpu");
    }
    let absent = format!("{}", 4095);
    for args in [
        &["--client-cpuset", "3-1"][..],
        &["--client-cpuset", ""][..],
        &["--client-cpuset", "0,x"][..],
        &["--client-cpuset", absent.as_str()][..],
    ] {
        rejected(args, "--client-cpuset");
    }
    for args in [
        &["--server-cpu", "0"][..],
        &["--server-cpu", "rt:0.2"][..],
        &["--server-cpu", "0.2/2s"][..],
        &["--server-cpu", "0.01/50ms"][..],
        &["--server-cpu", too_many.as_str()][..],
        &["--server-cpu", "deadline:1.5"][..],
        &["--server-cpu", "steal:0.99"][..],
        &["--server-cpu", "steal:0.01"][..],
        &[
            "--server-cpu",
            "steal:0.5",
            "--client-cpuset",
            all_cpus.as_str(),
        ][..],
        &["--server-cpu", "0.2", "--url", "https://198.18.0.1/"][..],
    ] {
        rejected(args, "--server-cpu");
    }
    for args in [
        &["compare", "--a.client-cpu", "0"][..],
        &["compare", "--b.client-cpu", "nothing"][..],
    ] {
        let flag = args[1];
        rejected(args, flag);
    }
}

/// Without the right to create a cgroup (any user but root here): refused before anything is
/// changed on the host.
#[test]
fn client_cpu_needs_the_right_to_create_a_cgroup() {
    use std::os::unix::process::CommandExt as _;
    // Root, to run it as another user.
    require!(Need::Root, Need::CgroupCpu);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_qbench"))
        .args(["--client-cpu", "0.5", "--objects", "1x1KB"])
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("error: --client-cpu: cannot create a cgroup"),
        "{err}"
    );
}
