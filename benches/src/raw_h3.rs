//! The floor for small objects over HTTP/3, for `raw-requests --proto h3`: quinn and the h3
//! crate over qbench's own zero-copy glue (`qbench_stack::h3_zero_copy`), qbench's TLS and the
//! stream window its client sets, one endpoint (UDP socket and driver) per connection as
//! qbench's client has, and nothing else: no timers, no records, no clock reads.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use anyhow::{Context, Result};
use bytes::{Buf, Bytes};

/// What one share of a run fetches: `connections` of its own, `streams` loops on each.
pub struct Share<'a> {
    pub target: SocketAddr,
    pub uri: &'a http::Uri,
    pub connections: u32,
    pub streams: u32,
    /// Requests of this share.
    pub total: u64,
}

/// The client's QUIC settings as qbench's h3 transport makes them by default.
pub fn client_config(tls: rustls::ClientConfig) -> Result<quinn::ClientConfig> {
    let crypto =
        quinn::crypto::rustls::QuicClientConfig::try_from(tls).context("QUIC TLS configuration")?;
    let mut t = quinn::TransportConfig::default();
    t.stream_receive_window(quinn::VarInt::from_u32(qbench_core::wire::STREAM_WINDOW));
    let mut c = quinn::ClientConfig::new(Arc::new(crypto));
    c.transport_config(Arc::new(t));
    Ok(c)
}

/// One endpoint on a UDP socket of its own, with qbench's socket buffers.
fn endpoint() -> Result<quinn::Endpoint> {
    use socket2::{Domain, Protocol, Socket, Type};
    let local: SocketAddr = "0.0.0.0:0".parse().expect("literal");
    let s = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
    let _ = s.set_recv_buffer_size(qbench_core::wire::UDP_BUFFER);
    let _ = s.set_send_buffer_size(qbench_core::wire::UDP_BUFFER);
    s.bind(&local.into())?;
    Ok(quinn::Endpoint::new(
        quinn::EndpointConfig::default(),
        None,
        s.into(),
        Arc::new(quinn::TokioRuntime),
    )?)
}

/// Connection `k` of the share takes its own part of `share.total` ([`crate::part`]), as qbench
/// spreads a run's objects over its connections, and its streams take the next of them.
pub async fn run(share: Share<'_>, config: quinn::ClientConfig) -> Result<u64> {
    let mut tasks = tokio::task::JoinSet::new();
    let mut endpoints = Vec::new();
    for k in 0..share.connections {
        let ep = endpoint().context("a QUIC endpoint")?;
        let conn = ep
            .connect_with(config.clone(), share.target, "localhost")?
            .await
            .with_context(|| format!("QUIC handshake with {}", share.target))?;
        let (mut driver, send) = qbench_stack::h3_zero_copy::client_builder(
            qbench_core::wire::MAX_RESPONSE_HEADER_BYTES,
        )
        .build::<_, _, Bytes>(qbench_stack::h3_zero_copy::Connection::new(conn))
        .await
        .context("HTTP/3 connection setup")?;
        tokio::spawn(async move {
            let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
        });
        endpoints.push(ep);
        let (next, total) = (
            Arc::new(AtomicU64::new(0)),
            crate::part(share.total, share.connections, k),
        );
        for _ in 0..share.streams {
            let (mut send, uri, next) = (send.clone(), share.uri.clone(), next.clone());
            tasks.spawn(async move {
                let mut done = 0u64;
                while next.fetch_add(1, Ordering::Relaxed) < total {
                    let req = http::Request::get(uri.clone()).body(())?;
                    let mut stream = send.send_request(req).await?;
                    match stream.finish().await {
                        Err(h3::error::StreamError::RemoteTerminate { .. }) | Ok(()) => {}
                        Err(e) => return Err(e.into()),
                    }
                    stream.recv_response().await?;
                    while let Some(mut chunk) = stream.recv_data().await? {
                        chunk.advance(chunk.remaining());
                    }
                    done += 1;
                }
                anyhow::Ok(done)
            });
        }
    }
    let mut done = 0;
    while let Some(r) = tasks.join_next().await {
        done += r.context("a stream's task")??;
    }
    for ep in &endpoints {
        ep.close(0u32.into(), b"done");
    }
    Ok(done)
}
