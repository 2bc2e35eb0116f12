//! A peer announcing an HTTP/3 header section larger than its receiver takes: `qbench serve`
//! refuses the stream at the HEADERS frame's header, without waiting for (and buffering) the
//! rest, and qbench's client fails a response head announced so, at once. The stack's own
//! bound on a HEADERS frame's compressed bytes is 16 MiB; the server's is `--max-header-bytes`,
//! the client's the 64 KiB response-head bound.

use crate::common::h3peer::{client_config, quic_server};
use crate::common::{qbench_within, Served};

use std::time::Duration;

/// A QUIC connection to the server on `port`, made within 10 s.
async fn connect(port: u16, ca: &std::path::Path) -> Result<quinn::Connection, String> {
    let ep = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = format!("127.0.0.1:{port}").parse().unwrap();
    let connecting = ep
        .connect_with(
            client_config(ca, quinn::TransportConfig::default()),
            addr,
            "localhost",
        )
        .map_err(|e| e.to_string())?;
    tokio::time::timeout(Duration::from_secs(10), connecting)
        .await
        .map_err(|_| "handshake: nothing within 10 s".to_string())?
        .map_err(|e| e.to_string())
}

/// A HEADERS frame (type 0x01) announcing `announced` bytes as a QUIC varint in its four-byte
/// form (below 2^30), then a field section prefix (required insert count 0, base 0) and
/// `sent` literal bytes.
fn headers_frame(announced: u32, sent: usize) -> Vec<u8> {
    assert!(announced < 1 << 30);
    let mut frame = vec![0x01];
    frame.extend_from_slice(&(0x8000_0000 | announced).to_be_bytes());
    frame.extend_from_slice(&[0x00, 0x00]);
    frame.resize(frame.len() + sent, b'a');
    frame
}

/// One request stream's HEADERS frame announcing `announced` bytes, of which only `sent`
/// follow. What came back within `wait`: the server's error code on the stream (its
/// STOP_SENDING, or its reset of the response), or why nothing did.
fn announce_headers(
    port: u16,
    ca: &std::path::Path,
    announced: u32,
    sent: usize,
    wait: Duration,
) -> Result<u64, String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let conn = connect(port, ca).await?;
        let (mut send, mut recv) = conn.open_bi().await.map_err(|e| e.to_string())?;
        let frame = headers_frame(announced, sent);
        send.write_all(&frame).await.map_err(|e| e.to_string())?;
        let refused = async {
            tokio::select! {
                stopped = send.stopped() => match stopped {
                    Ok(Some(code)) => Ok(code.into_inner()),
                    Err(quinn::StoppedError::ConnectionLost(e)) => closed_with(e),
                    other => Err(format!("stopped: {other:?}")),
                },
                read = recv.read_to_end(1 << 20) => match read {
                    Err(quinn::ReadToEndError::Read(quinn::ReadError::Reset(code))) => {
                        Ok(code.into_inner())
                    }
                    Err(quinn::ReadToEndError::Read(quinn::ReadError::ConnectionLost(e))) => {
                        closed_with(e)
                    }
                    other => Err(format!("response: {other:?}")),
                },
            }
        };
        tokio::time::timeout(wait, refused)
            .await
            .map_err(|_| format!("nothing within {wait:?}"))?
    })
}

/// The server closed the whole connection: its HTTP/3 error code.
fn closed_with(e: quinn::ConnectionError) -> Result<u64, String> {
    match e {
        quinn::ConnectionError::ApplicationClosed(c) => Ok(c.error_code.into_inner()),
        other => Err(format!("connection lost: {other}")),
    }
}

/// `qbench serve` on h3 with `--max-header-bytes 4096`: its directory (which holds the CA the
/// clients trust), the CA's path, the server and its port.
fn serve_h3_with_4k_heads() -> (tempfile::TempDir, std::path::PathBuf, Served, u16) {
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    let served = Served::start(&["--protocols", "h3", "--max-header-bytes", "4096"], &ca);
    let port: u16 = served.target.rsplit(':').next().unwrap().parse().unwrap();
    (dir, ca, served, port)
}

#[test]
fn an_h3_header_section_above_the_limit_is_refused_at_its_frame_header() {
    let (_dir, ca, _served, port) = serve_h3_with_4k_heads();
    // 1 MB announced, 1 KB sent: the rest never comes, so only a refusal at the frame's
    // header answers within the wait (the server's idle timeout is 30 s).
    let code = announce_headers(port, &ca, 1_000_000, 1000, Duration::from_secs(3))
        .unwrap_or_else(|e| panic!("a 1 MB header section announced: {e}"));
    // H3_EXCESSIVE_LOAD, H3_FRAME_ERROR or H3_REQUEST_REJECTED: an HTTP/3 error, not a hang.
    assert!((0x100..=0x110).contains(&code), "error code {code:#x}");
    // Within the limit, the same frame is awaited: nothing comes back until it is whole.
    let waited = announce_headers(port, &ca, 3000, 1000, Duration::from_millis(1500));
    assert!(
        waited
            .as_ref()
            .is_err_and(|e| e.starts_with("nothing within")),
        "a 3 KB header section announced: {waited:?}"
    );
}

/// qbench's QUIC glue under http3, on the stream the server refuses: its unframed write carries
/// the frame, and its `poll_stopped` gives the server's answer (it closes the connection with
/// H3_EXCESSIVE_LOAD), and the same again when asked a second time: quinn's wait is made anew,
/// not polled past its end.
#[test]
fn the_glue_gives_the_servers_refusal_each_time_it_is_asked() {
    use h3::quic::{BidiStream as _, OpenStreams as _, SendStream as _, SendStreamUnframed as _};
    use std::future::poll_fn;
    let (_dir, ca, _served, port) = serve_h3_with_4k_heads();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let codes = rt.block_on(async {
        let conn = connect(port, &ca).await.unwrap();
        let mut glue = qbench_stack::h3_zero_copy::Connection::new(conn);
        let bidi = poll_fn(|cx| glue.poll_open_bidi(cx)).await.unwrap();
        let (mut send, _recv) = bidi.split();
        // HEADERS announcing 1 MB, as above, then 100 bytes of it.
        let mut buf = bytes::Bytes::from(headers_frame(1_000_000, 100));
        while bytes::Buf::has_remaining(&buf) {
            poll_fn(|cx| send.poll_send(cx, &mut buf)).await.unwrap();
        }
        let mut codes = Vec::new();
        for _ in 0..2 {
            let stopped =
                tokio::time::timeout(Duration::from_secs(3), poll_fn(|cx| send.poll_stopped(cx)));
            codes.push(format!("{:?}", stopped.await.expect("stopped within 3 s")));
        }
        codes
    });
    assert!(codes[0].contains("H3_EXCESSIVE_LOAD"), "{codes:?}");
    assert_eq!(codes[1], codes[0]);
}

/// A QUIC server on 127.0.0.1 that speaks just enough HTTP/3 to lie: its control stream
/// with empty SETTINGS, then, on every request stream, a HEADERS frame announcing 1 MB of
/// which it sends 1 KB, and nothing more; the stream stays open. Writes its certificate to
/// `ca`; stops with its runtime.
fn announcing_origin(ca: &std::path::Path) -> (u16, tokio::runtime::Runtime) {
    let (ep, rt) = quic_server(ca);
    let port = ep.local_addr().unwrap().port();
    rt.spawn(async move {
        while let Some(incoming) = ep.accept().await {
            tokio::spawn(async move {
                let Ok(conn) = incoming.await else { return };
                let Ok(mut control) = conn.open_uni().await else {
                    return;
                };
                // Stream type 0x00 (control), then SETTINGS (type 0x04) of length 0.
                if control.write_all(&[0x00, 0x04, 0x00]).await.is_err() {
                    return;
                }
                // The client's control and QPACK streams, read and kept open.
                let c = conn.clone();
                tokio::spawn(async move {
                    while let Ok(mut uni) = c.accept_uni().await {
                        tokio::spawn(async move {
                            while let Ok(Some(_)) = uni.read_chunk(4096, true).await {}
                        });
                    }
                });
                let mut held = Vec::new();
                while let Ok((mut send, mut recv)) = conn.accept_bi().await {
                    if recv.read_to_end(64 * 1024).await.is_err()
                        || send
                            .write_all(&headers_frame(1_000_000, 1000))
                            .await
                            .is_err()
                    {
                        return;
                    }
                    held.push((send, recv));
                }
                drop(control);
            });
        }
    });
    (port, rt)
}

/// An origin announcing a response head far above the client's bound fails the request at
/// the HEADERS frame's header, as an HTTP/3 error: without the bound qbench waits for the
/// rest until its own timeout (20 s here) and counts a timeout.
#[test]
fn a_response_head_announced_above_the_clients_bound_fails_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("origin.pem");
    let (port, _origin) = announcing_origin(&ca);
    let out = qbench_within(
        &[
            "--proto",
            "h3",
            "--url",
            &format!("https://localhost:{port}/x"),
            "--connect-to",
            &format!("127.0.0.1:{port}"),
            "--ca",
            ca.to_str().unwrap(),
            "--timeout",
            "20s",
            "--json",
            "-",
        ],
        60,
    );
    assert_eq!(out.code, Some(1), "stderr: {}", out.stderr);
    let r: serde_json::Value = serde_json::from_str(&out.stdout).expect("the partial report");
    let errors = r["summary"]["errors"].as_object().expect("errors by kind");
    // http3's refusal: "encoded field section length 1000000 exceeds local limit 65536".
    assert_eq!(
        errors.get("protocol").and_then(|v| v.as_u64()),
        Some(1),
        "{errors:?}; stderr: {}",
        out.stderr
    );
    assert_eq!(errors.len(), 1, "{errors:?}");
}
