//! quic-go's HTTP/3 client (a stack nobody here wrote) against the server, with Go's default
//! X25519MLKEM768 key share: its ClientHello spans two Initial packets, which once left the
//! server waiting forever for stream credit it already had (see h3srv::handshake).

use crate::common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::needs::{require, which, Need};

/// Building the client fetches quic-go from the Go module proxy the first time.
const BUILD_LIMIT: Duration = Duration::from_secs(600);

/// Runs `cmd` to its end, killing it past `limit`; its stdout.
fn run_within(cmd: &mut Command, limit: Duration) -> String {
    let mut child = cmd.stdout(Stdio::piped()).spawn().expect("spawn");
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut out = String::new();
            std::io::Read::read_to_string(child.stdout.as_mut().unwrap(), &mut out).unwrap();
            assert!(status.success(), "{cmd:?}: {status}; stdout: {out}");
            return out;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{cmd:?} still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn quic_go_with_a_two_packet_client_hello_never_hangs() {
    require!(Need::Tool("go"));
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../interop/quicgo");
    let bin = Path::new(env!("CARGO_TARGET_TMPDIR")).join("quicgo");
    run_within(
        Command::new(which("go").unwrap())
            .current_dir(&src)
            .args(["build", "-o"])
            .arg(&bin)
            .arg("."),
        BUILD_LIMIT,
    );
    // Two worker threads, so two sockets on the port: quic-go's packets find their connection's
    // endpoint through the group's steering, not only through the kernel's hash.
    let server = common::server_on(2, |_| {});
    assert_eq!(server.udp_sockets(), 2);
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, server.cert_pem()).unwrap();
    const FETCHES: u64 = 20;
    const CONCURRENT: u64 = 50;
    const SIZE: u64 = 1_000_000;
    // Each request has 10 s; a hang shows as "hung" in the summary, not as a stuck test.
    let out = run_within(
        Command::new(&bin)
            .arg("-url-base")
            .arg(format!("https://{}", server.local_addr()))
            .arg("-ca")
            .arg(&ca)
            .args(["-size", &SIZE.to_string()])
            .args(["-fetches", &FETCHES.to_string()])
            .args(["-concurrent", &CONCURRENT.to_string()])
            .args(["-timeout", "10s", "-mlkem=true"]),
        Duration::from_secs(300),
    );
    let summary: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(summary["hung"], 0, "{summary}");
    assert_eq!(summary["errors"], 0, "{summary}");
    assert_eq!(summary["ok"], FETCHES + CONCURRENT, "{summary}");
    assert_eq!(summary["bytes"], (FETCHES + CONCURRENT) * SIZE, "{summary}");
}
