//! `--client` programs that lie, flood or point qbench at files not theirs: stand-ins written
//! as small shell scripts, run as `exec:` templates or as a `curl` found first on PATH.

use std::path::{Path, PathBuf};

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

/// Prints a zero line on the wall clock, then one request line per URL argument, each
/// claiming `$BYTES` bytes (the URL's own size when unset) and times `$START`..`$DONE` µs.
const LIAR: &str = r#"printf '{"event":"zero","unix_us":%s}\n' "$(date +%s%6N)"
for u in "$@"; do
  b=${BYTES:-${u##*/}}
  printf '{"event":"request","url":"%s","start_us":%s,"done_us":%s,"bytes":%s,"status":200}\n' \
    "$u" "${START:-10}" "${DONE:-20}" "$b"
done
"#;

fn exec(prog: &Path, tail: &str) -> String {
    format!("exec:{} {tail}", prog.display())
}

/// A program that fetches nothing yet prints a request line for each object is failed by
/// the server's view, and says so.
#[test]
fn fetch_lines_the_server_never_saw_are_failures() {
    let dir = tempfile::tempdir().unwrap();
    let liar = script(dir.path(), "liar", LIAR);
    let r = common::qbench(&[
        "--client",
        &exec(&liar, "{urls}"),
        "--proto",
        "h2",
        "--objects",
        "3x1KB",
        "--fail-if",
        "errors>0",
    ]);
    let run = run0(&r);
    assert_ne!(r.code, Some(0), "stderr: {}", r.stderr);
    assert_eq!(run["objects"]["completed"], 0, "{run}");
    assert_eq!(run["objects"]["failed"], 3);
    assert_eq!(run["payload_bytes"], 0);
    assert_eq!(run["server_view"]["requests"], 0);
    let first = run["first_error"].as_str().unwrap();
    assert!(first.contains("the server never saw"), "{first}");
}

/// A body the server handed over whole but the client claims half of (or twice) is short
/// (long), with or without --verify; a time of 2^64-1 µs is refused, not a PLT of 584,000
/// years.
#[test]
fn claimed_bytes_and_times_are_checked() {
    require!(Need::Tool("curl"));
    let dir = tempfile::tempdir().unwrap();
    // Fetches for real (the server sees it), then reports what BYTES/DONE say.
    let half = script(
        dir.path(),
        "half",
        &format!("curl -sS --http2 --cacert \"$1\" -o /dev/null \"$2\" || exit 1\nshift\n{LIAR}"),
    );
    for (env, verify, kind) in [
        (("BYTES", "500"), false, "short_body"),
        (("BYTES", "500"), true, "short_body"),
        (("BYTES", "2000"), false, "long_body"),
        (("DONE", "18446744073709551615"), false, "protocol"),
    ] {
        // Lines refused as a whole leave the object to the server's view.
        let refused = kind == "protocol";
        let mut args = vec![
            "--client",
            &*Box::leak(exec(&half, "{ca} {url}").into_boxed_str()),
            "--proto",
            "h2",
            "--objects",
            "1x1000B",
        ];
        if verify {
            args.push("--verify");
        }
        let r = common::qbench_env(&args, &[(env.0, env.1.as_ref())]);
        let run = run0(&r);
        assert_eq!(r.code, Some(1), "{env:?}: {}", r.stderr);
        assert_eq!(run["server_view"]["requests"], 1, "{env:?}: {run}");
        assert_eq!(
            run["objects"]["completed"],
            u64::from(refused),
            "{env:?}: {run}"
        );
        assert_eq!(run["errors"][kind], 1, "{env:?}: {}", run["errors"]);
        let plt = run["plt_us"].as_u64().unwrap_or(0);
        assert!(plt < 3_600_000_000, "{env:?}: PLT {plt} us");
    }
}

/// A program without timings of its own that fetched every body and then failed: the server
/// handed the bodies over, but whether the program took them in only it could say, so its
/// objects stand and the run is not clean.
#[test]
fn a_client_that_fails_after_its_fetches_leaves_the_run_unclean() {
    require!(Need::Tool("curl"));
    let dir = tempfile::tempdir().unwrap();
    let fails = script(
        dir.path(),
        "fails",
        "curl -sS --http2 --cacert \"$1\" -o /dev/null \"$2\" || exit 1\nexit 3\n",
    );
    let r = common::qbench(&[
        "--client",
        &exec(&fails, "{ca} {url}"),
        "--proto",
        "h2",
        "--objects",
        "2x1000B",
    ]);
    let run = run0(&r);
    assert_eq!(run["third_party"]["timings"], "server", "{run}");
    assert_eq!(run["objects"]["completed"], 2, "{run}");
    assert_eq!(run["errors"]["io"], 2, "one per process: {}", run["errors"]);
    assert_ne!(r.code, Some(0), "{}", r.stderr);
    let first = run["first_error"].as_str().unwrap_or_default();
    assert!(first.contains("exited with status 3"), "{first}");
}

/// Lines for URLs the run never asked for are not objects of the run.
#[test]
fn fetch_lines_for_urls_outside_the_run_are_not_counted() {
    require!(Need::Tool("curl"));
    let dir = tempfile::tempdir().unwrap();
    let extra = script(
        dir.path(),
        "extra",
        &format!(
            "ca=$1; shift\nfor u in \"$@\"; do curl -sS --http2 --cacert \"$ca\" -o /dev/null \"$u\" || exit 1; done\n\
             base=${{1%/bytes/*}}\n\
             set -- \"$@\" $(i=0; while [ $i -lt 1000 ]; do echo \"$base/bytes/7\"; i=$((i+1)); done)\n{LIAR}"
        ),
    );
    let r = common::qbench(&[
        "--client",
        &exec(&extra, "{ca} {urls}"),
        "--proto",
        "h2",
        "--objects",
        "3x1KB",
    ]);
    let run = run0(&r);
    assert_eq!(run["objects"]["completed"], 3, "{run}");
    assert_eq!(run["objects"]["failed"], 0, "{run}");
    assert_eq!(run["payload_bytes"], 3000);
    assert_eq!(run["object_latency"]["count"], 3);
    let first = run["first_error"].as_str().unwrap_or_default();
    assert!(first.contains("outside the run"), "{first}");
}

/// A `curl` first on PATH that runs the real one and pads each of its lines with `$PAD`
/// bytes, so that its output passes the 64 MiB qbench reads of a client's stdout.
fn padded_curl(dir: &Path) -> PathBuf {
    let real = qbench_testkit::which("curl").expect("curl on PATH");
    script(
        dir,
        "curl",
        &format!(
            "pad=$(head -c \"$PAD\" /dev/zero | tr '\\0' x)\n\
             {} \"$@\" | awk -v p=\"$pad\" '{{ if (substr($0, 1, 1) == \"{{\") \
             print \"{{\\\"pad\\\":\\\"\" p \"\\\",\" substr($0, 2); else print }}'\n",
            real.display()
        ),
    );
    dir.to_path_buf()
}

/// Output past the read limit is cut at a line: every whole line before it is kept, and the
/// objects whose lines lie beyond are counted as unreported, not every transfer thrown away.
#[test]
fn curl_output_past_the_limit_keeps_its_whole_lines() {
    require!(Need::Tool("curl"));
    let dir = tempfile::tempdir().unwrap();
    let bin = padded_curl(dir.path());
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    // 100 KB a line: 67,108,864 / 100,xxx bytes is 670 whole lines of 1,000.
    let r = common::qbench_env(
        &["--client", "curl", "--proto", "h2", "--objects", "1000x1B"],
        &[("PATH", path.as_ref()), ("PAD", "100000".as_ref())],
    );
    let run = run0(&r);
    assert_eq!(run["server_view"]["requests"], 1000, "{}", r.stderr);
    let ok = run["objects"]["completed"].as_u64().unwrap();
    eprintln!("{ok} of 1000 ok, {}", run["errors"]);
    assert!(
        (600..=671).contains(&ok),
        "{ok} of 1000 ok: {}",
        run["errors"]
    );
    assert_eq!(run["objects"]["failed"], 1000 - ok);
    assert_eq!(run["errors"]["io"], 1000 - ok, "{}", run["errors"]);
    let first = run["first_error"].as_str().unwrap();
    assert!(first.contains("64 MiB"), "{first}");
}

/// A client's stdout and stderr go through pipes, not files in its TMPDIR (a chatty client
/// filled it): 100 MB of each is read and dropped past the bounds, and its descriptors are
/// pipes.
#[test]
fn a_clients_output_is_never_written_to_disk() {
    let dir = tempfile::tempdir().unwrap();
    let seen = dir.path().join("fds");
    let chatty = script(
        dir.path(),
        "chatty",
        &format!(
            "head -c 100000000 /dev/zero\nhead -c 100000000 /dev/zero >&2\n\
             k=$(stat -L -c %F /proc/$$/fd/1 /proc/$$/fd/2)\nprintf '%s\\n' \"$k\" > {}\nexit 3\n",
            seen.display()
        ),
    );
    let tmp = tempfile::tempdir().unwrap();
    let r = common::qbench_env(
        &["--client", &exec(&chatty, "{urls}"), "--objects", "1x1KB"],
        &[("TMPDIR", tmp.path().as_os_str())],
    );
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    let kinds = std::fs::read_to_string(&seen).unwrap();
    assert_eq!(kinds, "fifo\nfifo\n");
    let p = &run0(&r)["third_party"]["processes"][0];
    assert_eq!(p["exit"], 3);
    // Its stderr's tail is kept, no more.
    let tail = p["stderr_tail"].as_str().unwrap();
    assert!(tail.len() <= 2048, "{}", tail.len());
}

/// `PATH` with `dir` first.
fn path_with(dir: &Path) -> String {
    format!("{}:{}", dir.display(), std::env::var("PATH").unwrap())
}

/// qbench ends (within 60 s) however its client left the files it reads.
fn within(args: &[&str], env: &[(&str, &std::ffi::OsStr)]) -> Run {
    let out = common::qbench_within_env(&[args, &["--json", "-"]].concat(), env, 60);
    assert!(out.code.is_some(), "qbench hung: {}", out.stderr);
    Run {
        code: out.code,
        stderr: out.stderr,
        json: serde_json::from_str(&out.stdout).ok(),
    }
}

/// curl's `filename_effective` is its claim, not where qbench reads a body: a FIFO there
/// once held qbench forever, and a file outside the run (as /etc/shadow) was opened and
/// read. qbench checks the files it told curl to write, and nothing else.
#[test]
fn curls_body_files_are_the_ones_qbench_named() {
    require!(Need::Tool("curl"));
    let dir = tempfile::tempdir().unwrap();
    let real = qbench_testkit::which("curl").unwrap();
    script(
        dir.path(),
        "curl",
        &format!(
            "{} \"$@\" | sed \"s|\\\"filename_effective\\\":\\\"[^\\\"]*\\\"|\\\"filename_effective\\\":\\\"$TARGET\\\"|\"\n",
            real.display()
        ),
    );
    let fifo = dir.path().join("fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a plain mkfifo on a path of the test's own directory.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let secret = dir.path().join("secret");
    std::fs::write(&secret, "not the payload").unwrap();
    let path = path_with(dir.path());
    for target in [&fifo, &secret] {
        let r = within(
            &[
                "--client",
                "curl",
                "--proto",
                "h2",
                "--objects",
                "2x1KB",
                "--verify",
            ],
            &[("PATH", path.as_ref()), ("TARGET", target.as_os_str())],
        );
        assert_eq!(r.code, Some(0), "{target:?}: {}", r.stderr);
        let run = run0(&r);
        assert_eq!(run["objects"]["completed"], 2, "{}", run["errors"]);
        assert_eq!(run["third_party"]["verified"], 2);
    }
}

/// A FIFO or a symlink out where qbench reads ngtcp2's qlog or h2load's log is refused:
/// qbench neither blocks on it nor reads what the link points at.
#[test]
fn logs_that_are_fifos_or_links_out_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let outside = dir.path().join("outside.log");
    std::fs::write(&outside, "1795819690171108\t200\t397\n").unwrap();
    // ngtcp2's example client: a FIFO as its qlog and as its download.
    script(
        dir.path(),
        "gtlsclient",
        "for a; do case $a in --qlog-dir=*) q=${a#*=};; --download=*) d=${a#*=};; esac; done\n\
         mkfifo \"$q/x.sqlog\" \"$d/1000\"\n",
    );
    // h2load: its log a FIFO, or a link to a file outside the run.
    script(
        dir.path(),
        "h2load",
        "for a; do case $a in --log-file=*) l=${a#*=};; esac; done\n\
         if [ -n \"$LINK\" ]; then ln -s \"$LINK\" \"$l\"; else mkfifo \"$l\"; fi\n",
    );
    let path = path_with(dir.path());
    let cases: [(&str, &str, Option<&Path>); 3] = [
        ("ngtcp2", "h3", None),
        ("h2load", "h2", None),
        ("h2load", "h2", Some(&outside)),
    ];
    for (client, proto, link) in cases {
        let mut env: Vec<(&str, &std::ffi::OsStr)> = vec![("PATH", path.as_ref())];
        if let Some(l) = link {
            env.push(("LINK", l.as_os_str()));
        }
        let r = within(
            &["--client", client, "--proto", proto, "--objects", "1x1KB"],
            &env,
        );
        assert_eq!(r.code, Some(1), "{client}: {}", r.stderr);
        let run = run0(&r);
        assert_eq!(run["objects"]["completed"], 0, "{client}: {run}");
        let first = run["first_error"].as_str().unwrap();
        assert!(first.contains("not a regular file"), "{client}: {first}");
    }
}

/// The Chromium driver is never the one in the source tree qbench was built from (a removed
/// checkout leaves that path to anyone, and qbench runs as root): without the variable and
/// nothing installed beside the binary, `--client chromium` is refused before any run; a
/// driver others could have written is refused too.
#[test]
fn the_chromium_driver_is_never_taken_from_the_build_tree_nor_from_others() {
    require!(Need::Tool("chromium"));
    require!(Need::PyModule("playwright"));
    let args = [
        "--client",
        "chromium",
        "--proto",
        "h2",
        "--objects",
        "1x1KB",
    ];
    let out = common::qbench_plain(&args);
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    assert!(out.stderr.contains("fetch.py: not found"), "{}", out.stderr);
    let open = tempfile::tempdir().unwrap();
    let copy = open.path().join("fetch.py");
    std::fs::copy(crate::third_party::chromium_driver(), &copy).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(open.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let out =
        common::qbench_within_env(&args, &[("QBENCH_CHROMIUM_DRIVER", copy.as_os_str())], 120);
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert!(
        out.stderr.contains("writable by group or others"),
        "{}",
        out.stderr
    );
}
