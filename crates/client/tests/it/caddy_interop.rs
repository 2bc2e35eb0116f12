//! Interop: qbench against Debian's caddy serving files over HTTP/1.1, HTTP/2 and HTTP/3 on
//! loopback.

use crate::common;

use std::net::{TcpListener, UdpSocket};
use std::process::{Command, Stdio};

use common::needs::{require, Need};
use common::peers::{file_bytes, localhost_cert, sha256_hex, which, Peer};
use common::{assert_complete, qbench};

/// A port free on both TCP and UDP, so caddy can serve h3 and h2 on the same number.
fn free_port_pair() -> u16 {
    loop {
        let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = tcp.local_addr().unwrap().port();
        if UdpSocket::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

#[test]
fn caddy_serves_files_over_h1_h2_h3() {
    require!(Need::Tool("caddy"));
    let caddy = which("caddy").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let www = dir.path().join("www");
    std::fs::create_dir(&www).unwrap();
    let big_body = file_bytes(2_000_000, 7);
    let small_body = file_bytes(5_000, 11);
    std::fs::write(www.join("big.bin"), &big_body).unwrap();
    std::fs::write(www.join("small.bin"), &small_body).unwrap();

    let (cert, key) = localhost_cert(dir.path());

    let port = free_port_pair();
    let caddyfile = dir.path().join("Caddyfile");
    std::fs::write(
        &caddyfile,
        format!(
            "{{\n\tadmin off\n\tauto_https off\n\tservers {{\n\t\tprotocols h1 h2 h3\n\t}}\n}}\n\
             https://localhost:{port} {{\n\tbind 127.0.0.1\n\ttls {cert} {key}\n\troot * {www}\n\tfile_server\n}}\n",
            cert = cert.display(),
            key = key.display(),
            www = www.display(),
        ),
    )
    .unwrap();
    let home = dir.path().to_str().unwrap();
    let child = Command::new(caddy)
        .args(["run", "--adapter", "caddyfile", "--config"])
        .arg(&caddyfile)
        .env("HOME", home)
        .env("XDG_DATA_HOME", home)
        .env("XDG_CONFIG_HOME", home)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let _guard = Peer::listening(child, "caddy", &[port]);

    let big = format!("https://localhost:{port}/big.bin");
    let small = format!("https://localhost:{port}/small.bin");
    let connect = format!("127.0.0.1:{port}");
    let fetch = |proto: &str, more: &[&str]| {
        let base = [
            "--proto",
            proto,
            "--url",
            &big,
            "--url",
            &small,
            "--connect-to",
            &connect,
            "--ca",
            cert.to_str().unwrap(),
            "--verify",
        ];
        qbench(&[&base[..], more].concat())
    };
    for proto in ["h3", "h2", "h1"] {
        let r = fetch(proto, &["--repeat", "3"]);
        assert_complete(&r, 1, 6, 3 * 2_005_000);
        // Byte-identical: every fetch hashed to the file's own digest.
        let digests = &r.json.as_ref().unwrap()["runs"][0]["digests"];
        assert_eq!(digests[&big], sha256_hex(&big_body), "{proto}");
        assert_eq!(digests[&small], sha256_hex(&small_body), "{proto}");
        let conn = &r.json.as_ref().unwrap()["runs"][0]["connections"][0];
        // What caddy advertised: Go's h2 server 250 streams, quic-go 100.
        let limit = &conn["server_max_streams"];
        match proto {
            "h1" => assert!(limit.is_null(), "{proto}: {limit}"),
            _ => assert_eq!(limit.as_u64(), Some(if proto == "h2" { 250 } else { 100 })),
        }
        assert!(
            conn["peak_streams"].as_u64().unwrap() >= 1,
            "{proto}: {conn}"
        );
        let alpn = &conn["alpn"];
        let want = match proto {
            "h3" => "h3",
            "h2" => "h2",
            _ => "http/1.1",
        };
        assert_eq!(alpn, want);
        // A held load cycles through the URLs, every body checked against content-length.
        // Few streams: the requests in flight at the end are finished, 2 MB each.
        let streams = if proto == "h1" { "1" } else { "4" };
        let r = fetch(proto, &["--streams", streams, "--duration", "1s"]);
        assert_eq!(r.code, Some(0), "{proto}: {}", r.stderr);
        let run = &r.json.as_ref().unwrap()["runs"][0];
        assert_eq!(run["complete"], true, "{proto}");
        let done = run["objects"]["completed"].as_u64().unwrap();
        assert!(done >= 2, "{proto}: {done}");
        let digests = &run["digests"];
        assert_eq!(digests[&big], sha256_hex(&big_body), "{proto}");
        // Connections pinned to two client threads (h3: each with an endpoint made on its
        // thread) fetch the same bytes from a third-party server.
        let r = fetch(
            proto,
            &[
                "--repeat",
                "4",
                "--connections",
                "3",
                "--client-threads",
                "2",
            ],
        );
        assert_complete(&r, 1, 8, 4 * 2_005_000);
        let run = &r.json.as_ref().unwrap()["runs"][0];
        assert_eq!(run["digests"][&big], sha256_hex(&big_body), "{proto}");
        assert_eq!(run["digests"][&small], sha256_hex(&small_body), "{proto}");
        assert_eq!(run["spread"]["client_threads"], 2, "{proto}");
        assert_eq!(run["spread"]["client_sockets"], 3, "{proto}");
    }

    // Two shards of the h3 fetches against caddy add up to the whole, digests and all.
    let dir = tempfile::tempdir().unwrap();
    let mut merge = vec!["merge".to_string(), "-o".into()];
    let merged = dir.path().join("merged.json");
    merge.push(merged.display().to_string());
    for i in 0..2 {
        let shard = format!("{i}/2");
        let r = fetch(
            "h3",
            &["--repeat", "3", "--connections", "2", "--shard", &shard],
        );
        assert_eq!(r.code, Some(0), "shard {shard}: {}", r.stderr);
        let file = dir.path().join(format!("shard-{i}.json"));
        std::fs::write(&file, serde_json::to_vec(r.json.as_ref().unwrap()).unwrap()).unwrap();
        merge.push(file.display().to_string());
    }
    let args: Vec<&str> = merge.iter().map(String::as_str).collect();
    let m = common::qbench_plain(&args);
    assert_eq!(m.code, Some(0), "{}", m.stderr);
    let j: serde_json::Value = serde_json::from_slice(&std::fs::read(&merged).unwrap()).unwrap();
    let run = &j["runs"][0];
    assert_eq!(run["objects"]["completed"], 6);
    assert_eq!(run["payload_bytes"], 3 * 2_005_000);
    assert_eq!(run["digests"][&big], sha256_hex(&big_body));
    assert_eq!(run["digests"][&small], sha256_hex(&small_body));
}
