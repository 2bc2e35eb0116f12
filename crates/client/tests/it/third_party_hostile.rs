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

