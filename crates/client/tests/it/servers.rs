//! `--server`: third-party servers behind the same link as qbench-server, each checked byte
//! for byte (`--verify` against the payload pattern qbench writes into their files), and
//! servers that exit, never listen or ignore SIGTERM, each a failed run that leaves nothing.

use std::ffi::OsStr;
use std::path::Path;

use serde_json::Value;

use crate::common;
use common::needs::{require, Need};
use common::Run;

fn run0(r: &Run) -> &Value {
    &r.json.as_ref().expect("a JSON report")["runs"][0]
}

/// What `tmp` holds: the run's directories must all be gone.
fn left_in(tmp: &Path) -> Vec<String> {
    std::fs::read_dir(tmp)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

/// Processes whose command line holds `mark`.
fn running_with(mark: &str) -> Vec<String> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(cmd) = std::fs::read(e.path().join("cmdline")) {
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            if cmd.contains(mark) && !cmd.contains("cargo") && !cmd.contains("/it-") {
                found.push(cmd);
            }
        }
    }
    found
}

/// Whether the kernel lets a network namespace's default TCP congestion control be `cc`: the
/// host's default, or one of its allowed list.
fn namespace_may_take(cc: &str) -> bool {
    let read = |k: &str| std::fs::read_to_string(format!("/proc/sys/net/ipv4/{k}")).unwrap();
    read("tcp_congestion_control").trim() == cc
        || read("tcp_allowed_congestion_control")
            .split_whitespace()
            .any(|a| a == cc)
}

/// 20 x 100 KB from `server` over `proto` across a 20 ms link, verified, with its own TMPDIR.
fn fetch(server: &str, proto: &str, env: &[(&str, &OsStr)], tmp: &Path) -> Run {
    let mut env = env.to_vec();
    env.push(("TMPDIR", tmp.as_os_str()));
    let args = [
        "--server",
        server,
        "--proto",
        proto,
        "--objects",
        "20x100KB",
        "--verify",
        "--link",
        "rtt=20ms",
    ];
    common::qbench_env(&args, &env)
}

fn serves_verified(server: &str, protos: &[&str], env: &[(&str, &OsStr)]) {
    let links = common::links::ours();
    for proto in protos {
        // Under a hostile name: no path is quoted into a configuration, and every word of a
        // command line reaches the program as it is.
        let dir = tempfile::tempdir().unwrap();
        let tmp = dir.path().join("a b'\"$(touch x)`id`");
        std::fs::create_dir(&tmp).unwrap();
        let r = fetch(server, proto, env, &tmp);
        common::assert_complete(&r, 1, 20, 2_000_000);
        let s = &run0(&r)["server_program"];
        let name = server.split(':').next().unwrap();
        assert_eq!(s["name"], name, "{proto}: {s}");
        // Stopped within the grace; how it ended is the server's own (hypercorn may exit 1
        // on an SSL error as its connections close), and then its stderr's tail says why.
        let ended = s["ended"].as_str().unwrap();
        assert_ne!(ended, "killed", "{server} {proto}: {s}");
        if ended != "exit 0" && ended != "signal 15" {
            assert!(s["stderr_tail"].is_string(), "{server} {proto}: {s}");
        }
        assert!(s["max_rss_kib"].as_u64().unwrap() > 0, "{proto}: {s}");
        // Behind the link a TCP server runs the run's congestion control, as qbench-server,
        // where the kernel lets a namespace take it; where not, the record says so.
        let cc = s["unmatched"]
            .as_array()
            .unwrap()
            .iter()
            .find(|u| u["setting"] == "cc: cubic");
        if *proto != "h3" {
            match namespace_may_take("cubic") {
                true => assert!(cc.is_none(), "{server} {proto}: {s}"),
                false => assert!(
                    cc.unwrap()["instead"]
                        .as_str()
                        .unwrap()
                        .contains("the server namespace's default"),
                    "{server} {proto}: {s}"
                ),
            }
        }
        assert!(s["ready_us"].as_u64().unwrap() > 0, "{proto}: {s}");
        let cpu = &run0(&r)["cpu"]["server"];
        assert!(cpu["user_s"].as_f64().unwrap() + cpu["sys_s"].as_f64().unwrap() > 0.0);
        // The server's namespace's own counters, beside the client's.
        assert!(run0(&r)["net"]["server"].is_object(), "{}", run0(&r)["net"]);
        assert_eq!(left_in(&tmp), Vec::<String>::new(), "{server} {proto}");
        assert!(!dir.path().join("x").exists());
    }
    assert_eq!(common::links::ours(), links);
}

#[test]
fn caddy_serves_h1_h2_h3_behind_a_link() {
    require!(Need::Link, Need::Tool("caddy"));
    serves_verified("caddy", &["h1", "h2", "h3"], &[]);
}

#[test]
fn nginx_serves_h1_h2_behind_a_link_and_is_refused_h3() {
    require!(Need::Link, Need::Tool("nginx"));
    serves_verified("nginx", &["h1", "h2"], &[]);
    let out = common::qbench_plain(&["--server", "nginx", "--proto", "h3"]);
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert_eq!(
        out.stderr.trim(),
        "error: --server: nginx does not serve h3; it serves h1 and h2"
    );
}

#[test]
fn ngtcp2_serves_h3_behind_a_link() {
    require!(Need::Link, Need::Tool("gtlsserver"));
    serves_verified("ngtcp2", &["h3"], &[]);
}

#[test]
fn quic_go_serves_h3_behind_a_link() {
    require!(Need::Link, Need::Tool("go"));
    let bin = common::go_build("servers/quicgo", "qbench-quicgo-server");
    serves_verified(
        "quic-go",
        &["h3"],
        &[("QBENCH_QUICGO_SERVER", bin.as_os_str())],
    );
}

#[test]
fn hypercorn_serves_h1_h2_h3_behind_a_link() {
    require!(Need::Link, Need::Tool("hypercorn"));
    let app = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../servers/hypercorn/qbench_files.py");
    let app = app.canonicalize().unwrap();
    serves_verified(
        "hypercorn",
        &["h1", "h2", "h3"],
        &[("QBENCH_HYPERCORN_APP", app.as_os_str())],
    );
}

#[test]
fn a_template_gets_every_path_as_one_word() {
    require!(Need::Link, Need::Tool("gtlsserver"));
    // ngtcp2's example server, spelled out: {root}, {key} and {cert} under a hostile TMPDIR.
    let t = "exec:gtlsserver -q -d {root} {addr} {port} {key} {cert}";
    serves_verified(t, &["h3"], &[]);
}

/// A server that fails: the run is failed with the reason, the report still written, and
/// nothing left running or on disk.
fn fails(template: &str, mark: &str, more: &[&str]) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let server = format!("exec:{template}");
    let mut args = vec!["--server", &server, "--proto", "h2", "--objects", "2x1KB"];
    args.extend_from_slice(more);
    let r = common::qbench_report_within(&args, &[("TMPDIR", dir.path().as_os_str())], 60);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert_eq!(r.json.as_ref().unwrap()["complete"], false);
    assert_eq!(left_in(dir.path()), Vec::<String>::new(), "{template}");
    assert_eq!(running_with(mark), Vec::<String>::new(), "{template}");
    r
}

#[test]
fn a_server_that_exits_at_once_fails_the_run_with_its_reason() {
    let r = fails(
        "sh -c 'echo no config here >&2; exit 3' {port}",
        "no config here",
        &[],
    );
    let e = run0(&r)["first_error"].as_str().unwrap();
    assert!(
        e.contains("ended (exit 3) before it listened: no config here"),
        "{e}"
    );
    assert!(r.stderr.contains("exit 3"), "{}", r.stderr);
}

#[test]
fn a_server_that_never_listens_is_stopped() {
    // `sleep` takes the port as a fraction of a second: a mark no other process has.
    let r = fails("sleep 1000.{port}7", "sleep 1000.", &[]);
    let e = run0(&r)["first_error"].as_str().unwrap();
    assert!(e.contains("did not listen on TCP port"), "{e}");
}

#[test]
fn a_server_that_ignores_sigterm_is_killed_after_the_grace() {
    require!(Need::Tool("python3"));
    // Listens, answers nothing (the run times out), and ignores SIGTERM.
    let py = "import signal,socket,sys,time; signal.signal(signal.SIGTERM, signal.SIG_IGN); \
              s = socket.socket(); s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(); \
              time.sleep(600)";
    let t = format!("python3 -c '{py}' {{addr}} {{port}} stubborn-server-mark");
    let r = fails(&t, "stubborn-server-mark", &["--timeout", "1s"]);
    let s = &run0(&r)["server_program"];
    assert_eq!(s["ended"], "killed", "{s}");
}

#[test]
fn what_a_server_cannot_take_is_refused_before_the_first_run() {
    common::refused(&["--server", "apache"], "--server");
    common::refused(&["--server", "exec:srv -d {root}"], "--server");
    common::refused(&["--server", "quic-go", "--proto", "h2"], "--server");
    common::refused(
        &["--server", "caddy", "--target", "https://198.18.2.2:4433"],
        "--server",
    );
    common::refused(&["--server", "caddy", "--cc", "bbr"], "--cc");
    common::refused(
        &["--server", "quic-go", "--proto", "h3", "--cc", "bbr"],
        "--cc",
    );
    common::refused(
        &["--server", "nginx", "--proto", "h2", "--server-cpu", "0.5"],
        "--server-cpu",
    );
    common::refused(
        &["compare", "--b.server", "nginx", "--proto", "h3"],
        "--server",
    );
}

#[test]
fn a_tcp_servers_congestion_control_is_the_runs_in_its_namespace() {
    require!(Need::Link);
    // The server says what its namespace's default is, and ends: the reason carries it.
    let say = "exec:sh -c 'cat /proc/sys/net/ipv4/tcp_congestion_control >&2; exit 7' {port}";
    let host = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control").unwrap();
    // `--cc` as given, and the kernel's name of it.
    for (cc, want) in [
        (None, "cubic"),
        (Some("cubic"), "cubic"),
        (Some("newreno"), "reno"),
        (Some("bbr"), "bbr"),
    ] {
        let mut args = vec![
            "--server",
            say,
            "--proto",
            "h2",
            "--objects",
            "1x1KB",
            "--link",
            "rtt=2ms",
        ];
        if let Some(c) = cc {
            args.extend(["--cc", c]);
        }
        if !namespace_may_take(want) && cc.is_some() {
            // Asked for, and the kernel would not let the namespace take it: bad input.
            common::refused(&args, "--cc");
            continue;
        }
        let r = common::qbench(&args);
        assert_eq!(r.code, Some(1), "{}", r.stderr);
        let e = run0(&r)["first_error"].as_str().unwrap();
        // The default the kernel would not take stays the host's, and is recorded.
        let seen = if namespace_may_take(want) {
            want
        } else {
            host.trim()
        };
        assert!(
            e.ends_with(&format!("before it listened: {seen}")),
            "{cc:?}: {e}"
        );
    }
    // Without a link it would be the host's, which qbench does not write.
    common::refused(
        &["--server", "nginx", "--proto", "h2", "--cc", "bbr"],
        "--cc",
    );
}

#[test]
fn third_party_clients_fetch_from_third_party_servers() {
    require!(
        Need::Link,
        Need::Tool("go"),
        Need::Tool("curl"),
        Need::Tool("h2load"),
        Need::Tool("gtlsclient"),
        Need::Tool("gtlsserver"),
        Need::Tool("nginx"),
        Need::Tool("caddy")
    );
    let client = common::go_build("clients/quicgo", "qbench-quicgo");
    let server = common::go_build("servers/quicgo", "qbench-quicgo-server");
    let env = [
        ("QBENCH_QUICGO", client.as_os_str()),
        ("QBENCH_QUICGO_SERVER", server.as_os_str()),
    ];
    // Each client on the run's certificate of the server's; curl, ngtcp2 and quic-go's bodies
    // checked byte for byte, h2load's counted (it keeps none).
    for (client, server, proto, verified) in [
        ("curl", "nginx", "h2", 10),
        ("h2load", "caddy", "h2", 0),
        ("ngtcp2", "quic-go", "h3", 10),
        ("quic-go", "ngtcp2", "h3", 10),
    ] {
        let args = [
            "--client",
            client,
            "--server",
            server,
            "--proto",
            proto,
            "--objects",
            "10x100KB",
            "--verify",
            "--link",
            "rtt=10ms",
        ];
        let r = common::qbench_env(&args, &env);
        assert_eq!(r.code, Some(0), "{client} {server}: {}", r.stderr);
        let run = run0(&r);
        assert_eq!(run["objects"]["completed"], 10, "{client} {server}: {run}");
        assert_eq!(run["payload_bytes"], 1_000_000, "{client} {server}");
        let tp = &run["third_party"];
        assert_eq!(tp["verified"], verified, "{client} {server}: {tp}");
        // No server's view to place the client's times by: they are its own, and say so.
        assert_eq!(tp["timings"], "client", "{client} {server}: {tp}");
        assert!(run["server_view"].is_null());
        assert_eq!(run["server_program"]["name"], server);
    }
}
