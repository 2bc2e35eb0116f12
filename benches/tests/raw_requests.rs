//! `raw-requests`, the stacks' floor for small objects: against an in-process qbench-server,
//! over HTTP/2 and HTTP/3, pinned and not, it fetches exactly the requests it is asked for
//! and says so in its line.

use std::process::Command;

use qbench_server::{InProcess, ServerOptions};

fn raw_requests(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_raw-requests"))
        .args(args)
        .output()
        .expect("raw-requests runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn each_protocol_fetches_exactly_the_requests_asked() {
    let server = InProcess::start(ServerOptions::loopback(), 2).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, server.cert_pem()).unwrap();
    let target = server.local_addr().to_string();
    for proto in ["h2", "h3"] {
        for pin in [false, true] {
            let mut args = vec![
                "--proto",
                proto,
                "--target",
                &target,
                "--ca",
                ca.to_str().unwrap(),
                "--requests",
                "1001",
                "--connections",
                "3",
                "--streams",
                "4",
                "--threads",
                "2",
                "--runs",
                "2",
            ];
            if pin {
                args.push("--pin");
            }
            let (code, out, err) = raw_requests(&args);
            assert_eq!(code, Some(0), "{proto} pin={pin}: {err}");
            let lines: Vec<&str> = out.lines().collect();
            assert_eq!(lines.len(), 3, "{out}");
            for l in &lines[..2] {
                let f: Vec<&str> = l.split('\t').collect();
                assert_eq!(f[0], proto, "{l}");
                assert_eq!(f[1], "1001", "every request once, across connections: {l}");
            }
            assert!(lines[2].starts_with("median\t"), "{out}");
        }
    }
}

#[test]
fn bad_input_is_one_line_and_no_panic() {
    let (code, _, err) = raw_requests(&[
        "--proto",
        "h3",
        "--target",
        "127.0.0.1:9",
        "--ca",
        "/dev/zero",
    ]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.starts_with("raw-requests: --ca"), "{err}");
    let (code, _, err) = raw_requests(&["--proto", "h4", "--target", "127.0.0.1:9", "--ca", "x"]);
    assert_eq!(code, Some(2), "{err}");
}
