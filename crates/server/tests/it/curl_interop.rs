//! curl (a client nobody here wrote) against the server over HTTP/2 and HTTP/1.1: bodies
//! byte-exact, and a POST answered 405 without the framing error curl 7.88 reported when the
//! server answered before reading the request body.

use crate::common;

use std::process::Command;

use common::needs::{require, Need};
use qbench_core::wire::check_payload;

fn curl(server: &qbench_server::InProcess, ca: &std::path::Path, args: &[&str]) -> (i32, Vec<u8>) {
    let out = Command::new("curl")
        .args(["--silent", "--show-error", "--max-time", "20", "--cacert"])
        .arg(ca)
        .args(args)
        .arg(format!("https://localhost:{}/", server.local_addr().port()))
        .output()
        .unwrap();
    (out.status.code().unwrap_or(-1), out.stdout)
}

#[test]
fn curl_fetches_byte_exact_and_gets_405_for_a_post() {
    require!(Need::Tool("curl"));
    let s = common::server(|_| {});
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, s.cert_pem()).unwrap();
    let resolve = format!("localhost:{}:127.0.0.1", s.local_addr().port());
    for version in ["--http2", "--http1.1"] {
        let (code, body) = curl(
            &s,
            &ca,
            &[
                version,
                "--resolve",
                &resolve,
                "--request-target",
                "/bytes/1000003",
            ],
        );
        assert_eq!(code, 0, "{version}");
        assert_eq!(body.len(), 1_000_003, "{version}");
        assert_eq!(check_payload(0, &body), Ok(()), "{version}");
        for _ in 0..10 {
            let (code, status) = curl(
                &s,
                &ca,
                &[
                    version,
                    "--resolve",
                    &resolve,
                    "-d",
                    "x",
                    "-o",
                    "/dev/null",
                    "-w",
                    "%{http_code}",
                ],
            );
            assert_eq!(
                (code, status.as_slice()),
                (0, &b"405"[..]),
                "{version} POST"
            );
        }
    }
}
