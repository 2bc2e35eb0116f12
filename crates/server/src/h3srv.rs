//! HTTP/3 over quinn.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::Method;
use qbench_core::wire::CONN_WINDOW;

use crate::options::ServerOptions;
use crate::payload::Chunks;
use crate::routes::{route, Body};
use crate::telemetry::watch_quic;

/// quinn transport settings for the sending side of bulk transfers.
pub fn transport(opts: &ServerOptions) -> quinn::TransportConfig {
    let mut t = quinn::TransportConfig::default();
    t.max_concurrent_bidi_streams(quinn::VarInt::from_u32(opts.max_streams));
    // Room for the peer's control and QPACK streams (and a little slack).
    t.max_concurrent_uni_streams(quinn::VarInt::from_u32(16));
    t.max_idle_timeout(Some(
        Duration::from_secs(30)
            .try_into()
            .expect("30 s fits a QUIC idle timeout"),
    ));
    t.send_window(u64::from(CONN_WINDOW));
    t.congestion_controller_factory(crate::cc::quic_factory(
        opts.cc,
        opts.initial_window_bytes(),
        opts.cwnd_cap.map(u64::from),
    ));
    t
}

pub async fn serve(endpoint: quinn::Endpoint, opts: Arc<ServerOptions>, early_data: bool) {
    while let Some(incoming) = endpoint.accept().await {
        let opts = opts.clone();
        tokio::spawn(async move {
            let conn = match incoming.accept() {
                Ok(connecting) if early_data => match connecting.into_0rtt() {
                    Ok((conn, _accepted)) => conn,
                    Err(connecting) => match connecting.await {
                        Ok(c) => c,
                        Err(_) => return,
                    },
                },
                Ok(connecting) => match connecting.await {
                    Ok(c) => c,
                    Err(_) => return,
                },
                Err(_) => return,
            };
            serve_connection(conn, opts).await;
        });
    }
}

async fn serve_connection(conn: quinn::Connection, opts: Arc<ServerOptions>) {
    // The cap in bytes is reported at the connection's MTU by the sampler's controller view.
    let cap = opts
        .cwnd_cap
        .map(|p| u64::from(p) * u64::from(conn.stats().path.current_mtu));
    let telemetry = watch_quic(&conn, opts.cc.as_str(), cap, opts.sample_interval);
    let built = h3::server::builder()
        .max_field_section_size(u64::from(opts.max_header_bytes))
        .build::<_, Bytes>(h3_quinn::Connection::new(conn))
        .await;
    let Ok(mut h3conn) = built else { return };
    // Ends on peer close, H3_NO_ERROR or a connection error; nothing to report server-side.
    while let Ok(Some(resolver)) = h3conn.accept().await {
        let (opts, telemetry) = (opts.clone(), telemetry.clone());
        tokio::spawn(async move {
            let Ok((req, mut stream)) = resolver.resolve_request().await else {
                return;
            };
            let r = route(req.method(), req.uri().path(), opts.max_object);
            let (head, body) = r.respond(telemetry.as_ref());
            if stream.send_response(head).await.is_err() {
                return;
            }
            if req.method() != Method::HEAD {
                match body {
                    Body::Payload(n) => {
                        for chunk in Chunks::new(n) {
                            if stream.send_data(chunk).await.is_err() {
                                return;
                            }
                        }
                    }
                    Body::Bytes(b) => {
                        if stream.send_data(b).await.is_err() {
                            return;
                        }
                    }
                }
            }
            let _ = stream.finish().await;
        });
    }
}
