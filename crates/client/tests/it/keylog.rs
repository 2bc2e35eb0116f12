//! `--keylog` (and SSLKEYLOGFILE) on both ends: a loopback capture by tshark, decrypted with
//! the client's key log and with the server's, shows the HTTP/1.1, HTTP/2 and HTTP/3 requests;
//! without a key log it shows none.

use crate::common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::needs::{require, Need};
use common::{qbench_plain, Served};

/// tshark capturing loopback traffic of one port into a file, until dropped.
struct Capture(std::process::Child, u16, std::path::PathBuf);

impl Capture {
    fn start(port: &str, file: &Path) -> Self {
        let mut cmd = Command::new("tshark");
        common::at_terminal(&mut cmd);
        let mut child = cmd
            .args(["-i", "lo", "-f", &format!("port {port}"), "-w"])
            .arg(file)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // tshark says when it captures; nothing is sent before that.
        let err = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                if line.contains("Capturing on") {
                    let _ = tx.send(());
                }
            }
        });
        rx.recv_timeout(Duration::from_secs(30))
            .expect("tshark started capturing");
        let capture = Self(child, port.parse().unwrap(), file.to_path_buf());
        // dumpcap says so a moment before its filter is in place, and on a busy machine
        // that moment can be long: a probe seen in the file shows it is.
        capture.seen_probe();
        capture
    }

    /// Sends UDP probes to the captured port until the file grows with one (bounded): every
    /// packet before it was captured and written too. The servers drop the probe.
    fn seen_probe(&self) {
        let size = || std::fs::metadata(&self.2).map_or(0, |m| m.len());
        let before = size();
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while size() == before {
            assert!(std::time::Instant::now() < deadline, "tshark saw no probe");
            socket.send_to(b"probe", ("127.0.0.1", self.1)).unwrap();
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Stops the capture (SIGINT, as at a terminal) once all sent so far is in the file, and
    /// waits for the file to be complete.
    fn stop(mut self) {
        self.seen_probe();
        // SAFETY: plain kill(2) on our own child.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGINT) };
        let _ = self.0.wait();
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Packets of `file` that match `filter` once decrypted with `keylog` (none: no key log).
fn matching(file: &Path, keylog: Option<&Path>, filter: &str) -> usize {
    let mut cmd = Command::new("tshark");
    cmd.arg("-r").arg(file).args(["-Y", filter]);
    if let Some(k) = keylog {
        cmd.arg("-o")
            .arg(format!("tls.keylog_file:{}", k.display()));
    }
    let out = cmd.stderr(Stdio::null()).output().unwrap();
    String::from_utf8_lossy(&out.stdout).lines().count()
}

#[test]
fn captures_decrypt_with_either_sides_key_log() {
    // Root, to capture.
    require!(Need::Root, Need::Tool("tshark"));
    let dir = tempfile::tempdir().unwrap();
    let (cert, server_log, client_log) = (
        dir.path().join("cert.pem"),
        dir.path().join("server.keys"),
        dir.path().join("client.keys"),
    );
    let server = Served::start(&["--keylog", server_log.to_str().unwrap()], &cert);
    let port = server.target.rsplit(':').next().unwrap().to_string();
    let pcap = dir.path().join("cap.pcapng");
    let capture = Capture::start(&port, &pcap);
    for proto in ["h1", "h2", "h3"] {
        let r = qbench_plain(&[
            "--proto",
            proto,
            "--target",
            &server.target,
            "--ca",
            cert.to_str().unwrap(),
            "--objects",
            "3x2KB",
            "--keylog",
            client_log.to_str().unwrap(),
        ]);
        assert_eq!(r.code, Some(0), "{proto}: {}", r.stderr);
    }
    // Through SSLKEYLOGFILE instead of the flag: the same file, appended to.
    let before = std::fs::read_to_string(&client_log)
        .unwrap()
        .lines()
        .count();
    let r = Command::new(env!("CARGO_BIN_EXE_qbench"))
        .args([
            "--proto",
            "h2",
            "--target",
            &server.target,
            "--ca",
            cert.to_str().unwrap(),
            "--objects",
            "1x1KB",
        ])
        .env("SSLKEYLOGFILE", &client_log)
        .output()
        .unwrap();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let after = std::fs::read_to_string(&client_log).unwrap();
    assert!(after.lines().count() > before);
    assert!(
        after.lines().all(|l| l.split(' ').count() == 3),
        "NSS key log lines"
    );
    capture.stop();
    assert!(server.stop());

    let h1 = "http.request.uri contains \"/bytes/\"";
    let h2 = "http2.header.value contains \"/bytes/\"";
    let h3 = "http3.frame_type == 1";
    for keys in [&client_log, &server_log] {
        assert!(
            matching(&pcap, Some(keys), h1) >= 1,
            "h1 with {}",
            keys.display()
        );
        assert!(
            matching(&pcap, Some(keys), h2) >= 1,
            "h2 with {}",
            keys.display()
        );
        assert!(
            matching(&pcap, Some(keys), h3) >= 1,
            "h3 with {}",
            keys.display()
        );
    }
    for filter in [h1, h2, h3] {
        assert_eq!(matching(&pcap, None, filter), 0, "{filter} without keys");
    }
}

#[test]
fn an_unwritable_key_log_is_refused() {
    let r = qbench_plain(&["--objects", "1x1KB", "--keylog", "/nonexistent/dir/keys"]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(
        r.stderr
            .starts_with("error: --keylog: /nonexistent/dir/keys"),
        "{}",
        r.stderr
    );
}

/// Lines of `log` with a connection's application traffic secret: one per TLS connection.
fn connections_logged(log: &Path) -> usize {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with("CLIENT_TRAFFIC_SECRET_0 "))
        .count()
}

/// A comparison's two sides log to the one key log: every connection of each, on TCP and on
/// QUIC.
#[test]
fn a_comparison_logs_both_sides_keys() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("keys.log");
    let r = qbench_plain(&[
        "compare",
        "--protos",
        "h2,h3",
        "--objects",
        "2x1KB",
        "--connections",
        "2",
        "--rounds",
        "2",
        "--warmup-rounds",
        "0",
        "--keylog",
        log.to_str().unwrap(),
    ]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    // Two rounds of two sides, two connections each.
    assert_eq!(connections_logged(&log), 8, "{}", r.stderr);
}

/// A competition's flows, one of each protocol, all log to the one key log.
#[test]
fn a_competition_logs_every_flows_keys() {
    require!(Need::Link);
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("keys.log");
    let r = qbench_plain(&[
        "compete",
        "--flows",
        "h1:1,h2:1,h3:1",
        "--objects",
        "2x1KB",
        "--link",
        "rate=100mbit,rtt=2ms",
        "--keylog",
        log.to_str().unwrap(),
    ]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(connections_logged(&log), 3, "{}", r.stderr);
}
