//! TLS and QUIC failures say what to do: an untrusted certificate suggests --ca, a name the
//! certificate lacks suggests --connect-to, a CA certificate used as the server's own (what
//! `openssl req -x509` makes by default, which rustls refuses as CaUsedAsEndEntity) says how
//! to make a proper one, and a QUIC handshake that hears nothing mentions UDP filtering.

use crate::common;

use common::needs::{require, Need};
use common::{qbench_plain, Served};

/// The last stderr line of a run that must fail, for h2 and h3 alike.
fn failure(args: &[&str]) -> String {
    let r = qbench_plain(
        &[
            args,
            &["--objects", "2x1KB", "--no-telemetry", "--timeout", "30s"],
        ]
        .concat(),
    );
    assert_eq!(r.code, Some(1), "{args:?}: {}", r.stderr);
    r.stderr
        .trim_end()
        .lines()
        .last()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn certificate_failures_name_the_flag_that_helps() {
    let dir = tempfile::tempdir().unwrap();
    let cert = dir.path().join("cert.pem");
    let server = Served::start(&[], &cert);
    let port = server.target.rsplit(':').next().unwrap().to_string();
    let ca = cert.to_str().unwrap();
    let renamed = format!("https://qbench.test:{port}");
    let to = format!("127.0.0.1:{port}");
    for proto in ["h2", "h3"] {
        let line = failure(&["--proto", proto, "--target", &server.target]);
        assert!(
            line.contains("UnknownIssuer") && line.contains("hint:") && line.contains("--ca FILE"),
            "{line}"
        );
        let line = failure(&[
            "--proto",
            proto,
            "--target",
            &renamed,
            "--connect-to",
            &to,
            "--ca",
            ca,
        ]);
        assert!(
            line.contains("not valid for name") && line.contains("--connect-to"),
            "{line}"
        );
    }
    assert!(server.stop());
}

#[test]
fn a_ca_certificate_as_the_servers_own_is_explained() {
    require!(Need::Tool("openssl"));
    let dir = tempfile::tempdir().unwrap();
    let (key, crt) = (dir.path().join("k.pem"), dir.path().join("c.pem"));
    let made = std::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "2",
        ])
        .args([
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost,IP:127.0.0.1",
        ])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&crt)
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let server = Served::start(
        &[
            "--cert",
            crt.to_str().unwrap(),
            "--key",
            key.to_str().unwrap(),
        ],
        &dir.path().join("out.pem"),
    );
    for proto in ["h2", "h3"] {
        let line = failure(&[
            "--proto",
            proto,
            "--target",
            &server.target,
            "--ca",
            crt.to_str().unwrap(),
        ]);
        assert!(
            line.contains("CaUsedAsEndEntity") && line.contains("CA:FALSE"),
            "{line}"
        );
    }
    assert!(server.stop());
}

#[test]
fn a_silent_quic_handshake_mentions_udp() {
    // A port nobody listens on over UDP: no QUIC packet comes back.
    let port = std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let r = qbench_plain(&[
        "--proto",
        "h3",
        "--target",
        &format!("https://127.0.0.1:{port}"),
        "--insecure",
        "--objects",
        "1x1KB",
        "--timeout",
        "1s",
    ]);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    let line = r.stderr.trim_end().lines().last().unwrap_or_default();
    assert!(
        line.contains("no progress") && line.contains("UDP"),
        "{line}"
    );
}
