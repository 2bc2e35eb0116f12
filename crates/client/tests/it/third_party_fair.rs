//! `--client` programs held to qbench's own rules: `--timeout` is "no progress for that long"
//! for them too, their children do not outlive the run (each process has a cgroup of its
//! own), an IPv6 target is reachable, their own error is the run's, and an `exec:` program is
//! found before the first run where it will be run.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common;
use common::needs::{require, Need};
use common::Run;

fn run0(r: &Run) -> &Value {
    &r.json.as_ref().expect("a JSON report")["runs"][0]
}

/// `body` as an executable script in `dir`.
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/sh\n{body}")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

/// 2 MB over a 4 Mbit/s link takes about 4 s, four times `--timeout 1s`, and moves all the
/// while: curl fetches it whole, byte for byte, as qbench's own client does; so do h2load (its
/// inactivity timeout) and an exec client (its deadline grows with the bytes). A peer that
/// takes the connection and never answers is still given up on after `--timeout`.
#[test]
fn a_slow_transfer_that_moves_is_not_a_timeout_for_any_client() {
    require!(Need::Link);
    require!(Need::Tool("curl"));
    require!(Need::Tool("h2load"));
    for client in [
        "curl",
        "h2load",
        "exec:curl -sS --http2 --cacert {ca} -o {out}/body {url}",
    ] {
        let r = common::qbench(&[
            "--client",
            client,
            "--proto",
            "h2",
            "--objects",
            "1x2MB",
            "--timeout",
            "1s",
            "--verify",
            "--link",
            "rate=4mbit,rtt=10ms",
            "--no-calibrate",
        ]);
        let run = run0(&r);
        assert_eq!(
            r.code,
            Some(0),
            "{client}: {}: {}",
            run["first_error"],
            r.stderr
        );
        assert_eq!(run["objects"]["completed"], 1);
        assert_eq!(run["payload_bytes"], 2_000_000);
        assert_eq!(run["server_view"]["body_bytes"], 2_000_000);
        // Not killed at a deadline (a killed exec client's object, which the server handed
        // over whole, would still count).
        let p = &run["third_party"]["processes"][0];
        assert_eq!(
            (&p["exit"], &p["timed_out"]),
            (&0.into(), &false.into()),
            "{client}: {p}"
        );
        if client == "curl" {
            assert_eq!(run["third_party"]["verified"], 1);
        }
        // Its process took the link's time, longer than --timeout (an exec client's PLT is
        // the server's, which hands the body to its socket buffers sooner).
        let wall = p["wall_us"].as_u64().unwrap();
        assert!(wall > 3_000_000, "{client}: {wall} us");
    }

    // A peer that accepts and then says nothing: a stall, given up on by curl's own limits.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let held = std::thread::spawn(move || {
        let c = silent.accept();
        std::thread::sleep(Duration::from_secs(8));
        drop(c);
    });
    let started = Instant::now();
    let target = format!("https://127.0.0.1:{port}");
    let r = common::qbench(&[
        "--client",
        "curl",
        "--proto",
        "h2",
        "--target",
        &target,
        "--insecure",
        "--objects",
        "1x40MB",
        "--timeout",
        "1s",
    ]);
    let took = started.elapsed();
    common::assert_failed_with(&r, "timeout");
    let first = run0(&r)["first_error"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(first.contains("curl exited 28"), "{first}");
    // Not the 40 MB's allowance at the floor rate (320 s): curl's own 1 s without progress,
    // with a loaded machine's start-up and teardown around it.
    assert!(took < Duration::from_secs(60), "{took:?}");
    held.join().unwrap();
}

/// The v2 cgroup a process named in its `/proc/PID/cgroup`, as a path.
fn v2_dir(line: &str) -> Option<PathBuf> {
    let rel = line.trim().strip_prefix("0::")?;
    let mounts = qbench_shaper::cgroup::parse_mountinfo(
        &std::fs::read_to_string("/proc/self/mountinfo").unwrap(),
    );
    Some(mounts.v2?.join(rel.trim_start_matches('/')))
}

/// Whether `pid` is a live process (a zombie waiting for its reaper is not).
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(')').map(|(_, r)| r.trim_start().to_string()))
        .is_some_and(|r| !r.starts_with('Z'))
}

/// A child that leaves the process group (`setsid`, as Chromium's browser does) is in the
/// client's cgroup still, and goes with it; the cgroup is removed after the run.
#[test]
fn a_child_that_leaves_the_group_does_not_outlive_the_run() {
    require!(Need::Root);
    require!(Need::Tool("curl"));
    require!(Need::Tool("setsid"));
    let dir = tempfile::tempdir().unwrap();
    let (pid_file, cg_file) = (dir.path().join("pid"), dir.path().join("cg"));
    let client = script(
        dir.path(),
        "client",
        &format!(
            "setsid sh -c 'echo $$ > {p}; exec sleep 300' </dev/null >/dev/null 2>&1 &\n\
             grep '^0::' /proc/self/cgroup > {c}\n\
             exec curl -sS --http2 --cacert \"$1\" -o /dev/null \"$2\"\n",
            p = pid_file.display(),
            c = cg_file.display()
        ),
    );
    let r = common::qbench(&[
        "--client",
        &format!("exec:{} {{ca}} {{url}}", client.display()),
        "--proto",
        "h2",
        "--objects",
        "1x1KB",
    ]);
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .expect("the client started its child");
    let survived = alive(pid);
    if survived {
        // SAFETY: the test's own stray child; the test fails below.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(!survived, "the setsid child {pid} outlived the run");
    let line = std::fs::read_to_string(&cg_file).unwrap();
    let cg = v2_dir(&line).expect("a v2 cgroup");
    let name = cg.file_name().map(|n| n.to_string_lossy().into_owned());
    assert!(
        name.as_deref()
            .is_some_and(|n| n.starts_with("qb-") && n.ends_with("-client")),
        "the client ran in {line}"
    );
    assert!(!cg.exists(), "{} is removed", cg.display());
    assert!(!r.stderr.contains("no cgroup"), "{}", r.stderr);
}

/// A target on [::1]: curl is told where to connect in a form it reads (brackets).
#[test]
fn curl_reaches_an_ipv6_target() {
    require!(Need::Tool("curl"));
    let dir = tempfile::tempdir().unwrap();
    let cert = dir.path().join("cert.pem");
    let server = common::Served::start_at("serve", "[::1]:0", &[], &cert);
    assert!(server.target.contains("[::1]"), "{}", server.target);
    let r = common::qbench(&[
        "--client",
        "curl",
        "--proto",
        "h2",
        "--target",
        &server.target,
        "--ca",
        cert.to_str().unwrap(),
        "--objects",
        "2x10KB",
    ]);
    let run = run0(&r);
    assert_eq!(r.code, Some(0), "{}: {}", run["first_error"], r.stderr);
    assert_eq!(run["objects"]["completed"], 2);
    assert_eq!(run["payload_bytes"], 20_000);
    assert!(server.stop());
}

/// A `curl` first on PATH that runs the real one with `extra` after qbench's arguments.
fn curl_with(dir: &Path, extra: &str) -> String {
    let real = qbench_testkit::which("curl").expect("curl on PATH");
    script(
        dir,
        "curl",
        &format!("exec {} \"$@\" {extra}\n", real.display()),
    );
    format!("{}:{}", dir.display(), std::env::var("PATH").unwrap())
}

/// When curl fails, its exit code and message are the run's error, not what the server made
/// of it ("no handshake seen"): with its JSON line (it trusts the system's CAs, not the run's
/// self-signed certificate), and without one (it offers only TLS 1.2 ciphers the server does
/// not take, and its `-w` is emptied).
#[test]
fn curls_own_error_is_the_runs_error() {
    require!(Need::Tool("curl"));
    let dir = tempfile::tempdir().unwrap();
    let bundle = Path::new("/etc/ssl/certs/ca-certificates.crt");
    assert!(bundle.is_file(), "the system's CA bundle");
    for (extra, kind, said) in [
        (
            format!("--cacert {}", bundle.display()),
            "tls",
            "tls: curl exited 60: SSL certificate problem",
        ),
        (
            "--tls-max 1.2 --ciphers ECDHE-RSA-AES128-SHA -w ''".to_string(),
            "io",
            "curl exited with status 35: curl: (35)",
        ),
    ] {
        let path = curl_with(dir.path(), &extra);
        let r = common::qbench_env(
            &["--client", "curl", "--proto", "h2", "--objects", "1x1KB"],
            &[("PATH", path.as_ref())],
        );
        common::assert_failed_with(&r, kind);
        let first = run0(&r)["first_error"].as_str().unwrap().to_string();
        assert!(
            first.starts_with(kind) && first.contains(said),
            "{extra}: {first}"
        );
    }
}

/// `exec:./client` is the file of that name where qbench was started, checked before the
/// first run and run as that file; a file that cannot be run is refused before the first run
/// with one line naming `--client`.
#[test]
fn a_relative_exec_program_is_run_as_it_was_checked() {
    require!(Need::Tool("curl"));
    let dir = tempfile::tempdir().unwrap();
    script(
        dir.path(),
        "client",
        "exec curl -sS --http2 --cacert \"$1\" -o /dev/null \"$2\"\n",
    );
    std::fs::write(dir.path().join("plain"), "#!/bin/sh\n").unwrap();
    let run = |prog: &str| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_qbench"))
            .current_dir(dir.path())
            .args(["--client", &format!("exec:{prog} {{ca}} {{url}}")])
            .args(["--proto", "h2", "--objects", "1x1KB", "--json", "-"])
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, stdout, stderr) = run("./client");
    assert_eq!(code, Some(0), "{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["runs"][0]["objects"]["completed"], 1);
    for bad in ["./plain", "./none", "client-not-on-path"] {
        let (code, stdout, stderr) = run(bad);
        assert_eq!(code, Some(1), "{bad}: {stderr}");
        assert!(stdout.is_empty(), "{bad}: no run");
        let lines: Vec<&str> = stderr.lines().collect();
        assert_eq!(lines.len(), 1, "{bad}: {stderr}");
        assert!(lines[0].contains("--client exec:"), "{}", lines[0]);
        assert!(lines[0].contains(bad), "{}", lines[0]);
    }
}

/// A qbench killed with `kill -9` runs no destructor: its client, and the child that left its
/// group, live on in their cgroup, which `qbench-shaper cleanup` then ends and removes (its
/// owner is gone), and the client's scratch directory stays, which cleanup removes too. Only
/// this test's ids are cleaned.
#[test]
fn cleanup_ends_the_clients_of_a_killed_run() {
    require!(Need::Root);
    require!(Need::Tool("setsid"));
    let dir = tempfile::tempdir().unwrap();
    let (pid_file, cg_file) = (dir.path().join("pid"), dir.path().join("cg"));
    let cwd_file = dir.path().join("cwd");
    let client = script(
        dir.path(),
        "client",
        &format!(
            "pwd > {w}\n\
             grep '^0::' /proc/self/cgroup > {c}.part && mv {c}.part {c}\n\
             setsid sh -c 'echo $$ > {p}.part && mv {p}.part {p}; exec sleep 302' \
             </dev/null >/dev/null 2>&1 &\n\
             exec sleep 303\n",
            p = pid_file.display(),
            c = cg_file.display(),
            w = cwd_file.display()
        ),
    );
    let mut qbench = common::signalable()
        .args(["--client", &format!("exec:{} {{urls}}", client.display())])
        .args(["--proto", "h2", "--objects", "1x1KB", "--timeout", "60s"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(30);
    while !(pid_file.exists() && cg_file.exists()) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    qbench.kill().unwrap();
    qbench.wait().unwrap();
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .expect("the client started its child");
    let cg = v2_dir(&std::fs::read_to_string(&cg_file).unwrap()).expect("a v2 cgroup");
    let name = cg.file_name().unwrap().to_string_lossy().into_owned();
    let id = name
        .strip_prefix("qb-")
        .and_then(|n| n.strip_suffix("-client"))
        .unwrap_or_else(|| panic!("the client ran in {}", cg.display()))
        .to_string();
    assert!(alive(pid), "kill -9 runs no destructor: the child lives on");
    let scope = qbench_shaper::cleanup::Scope {
        force: false,
        ids: vec![id],
    };
    // The process ran in its own directory under the run's scratch directory.
    let cwd = std::fs::read_to_string(&cwd_file).unwrap();
    let scratch = Path::new(cwd.trim())
        .ancestors()
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().ends_with("-scratch"))
        })
        .unwrap_or_else(|| panic!("the client ran in {cwd}"))
        .to_path_buf();
    assert!(
        scratch.exists(),
        "kill -9 removes nothing: {}",
        scratch.display()
    );
    let scratch_id = scratch.file_name().unwrap().to_string_lossy()[3..11].to_string();
    let scratch_scope = qbench_shaper::cleanup::Scope {
        force: false,
        ids: vec![scratch_id],
    };
    let scratch_removed = qbench_shaper::scratch::cleanup(&scratch_scope).removed;
    let _ = std::fs::remove_dir_all(&scratch);
    assert_eq!(scratch_removed, [scratch.display().to_string()]);
    let removed = qbench_shaper::cgroup::cleanup(&scope).removed;
    let survived = alive(pid);
    if cg.exists() {
        // The test's own strays, ended whatever cleanup did; the test fails below.
        let _ = std::fs::write(cg.join("cgroup.kill"), "1");
        std::thread::sleep(Duration::from_millis(200));
        let _ = std::fs::remove_dir(&cg);
        let _ = std::fs::remove_file(Path::new(qbench_shaper::owner::DIR).join(&name));
    }
    assert!(!survived, "the setsid child {pid} outlived cleanup");
    assert_eq!(removed, [cg.display().to_string()]);
    assert!(!cg.exists());
}

/// Without the right to create a cgroup (any user but root here) the clients run in their
/// process groups alone, and a warning says so once, not once per process.
#[test]
fn without_a_cgroup_the_process_group_is_killed_and_a_warning_says_so_once() {
    use std::os::unix::process::CommandExt as _;
    // Root, to run it as another user.
    require!(Need::Root);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_qbench"))
        .args(["--client", "exec:sh -c 'exit 0' sh {urls}", "--proto", "h2"])
        .args([
            "--objects",
            "2x1KB",
            "--connections",
            "2",
            "--runs",
            "2",
            "--cc",
            "bbr",
        ])
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let warned = err
        .lines()
        .filter(|l| l.starts_with("warning: --client: no cgroup for the client's processes"))
        .count();
    assert_eq!(warned, 1, "{err}");
    // It ran: the program fetched nothing, which the server's view says.
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("the server never saw this request"), "{err}");
}
