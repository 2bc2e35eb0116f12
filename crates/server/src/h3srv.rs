//! HTTP/3 over quinn.

use std::net::SocketAddr;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;

use bytes::{Buf, Bytes};
use futures_util::stream::{FuturesUnordered, StreamExt};
use futures_util::FutureExt;
use h3::error::Code;
use h3::server::RequestStream;
use qbench_core::wire::CONN_WINDOW;

use crate::options::ServerOptions;
use crate::relay::{self, UpstreamConn};
use crate::request::{Answer, Drained, MAX_REQUEST_BODY};
use crate::routes::Body;
use crate::shared::{Shared, Stats};
use crate::tcpsrv::{REQUEST_CONN_WINDOW, REQUEST_STREAM_WINDOW};
use crate::telemetry::{watch_quic, ConnTelemetry};
use crate::truth::{Answering, ConnMark};
use qbench_stack::payload::Chunks;
use std::time::Instant;

type Stream = RequestStream<qbench_stack::h3_zero_copy::BidiStream, Bytes>;

/// quinn transport settings for the sending side of bulk transfers.
pub fn transport(opts: &ServerOptions) -> quinn::TransportConfig {
    let mut t = quinn::TransportConfig::default();
    t.max_concurrent_bidi_streams(quinn::VarInt::from_u32(opts.max_streams));
    // Room for the peer's control and QPACK streams (and a little slack).
    t.max_concurrent_uni_streams(quinn::VarInt::from_u32(16));
    // Checked by the option parser: at most a day, far below QUIC's 2^62 ms.
    t.max_idle_timeout(quinn::IdleTimeout::try_from(opts.idle_timeout).ok());
    t.stream_receive_window(quinn::VarInt::from_u32(REQUEST_STREAM_WINDOW));
    t.receive_window(quinn::VarInt::from_u32(REQUEST_CONN_WINDOW));
    t.send_window(u64::from(CONN_WINDOW));
    t.congestion_controller_factory(crate::cc::quic_factory(
        opts.cc,
        opts.initial_window_bytes(),
        opts.cwnd_cap.map(u64::from),
    ));
    if let Some(n) = opts.reorder_threshold {
        t.packet_threshold(n);
    }
    if let Some(r) = opts.reorder_time_threshold {
        t.time_threshold(r as f32);
    }
    qbench_stack::quic_knobs::apply(&mut t, &opts.quic);
    t
}

pub async fn serve(endpoint: quinn::Endpoint, shared: Arc<Shared>) {
    while let Some(incoming) = endpoint.accept().await {
        let Some(slot) = shared.admit(incoming.remote_address()) else {
            incoming.refuse();
            continue;
        };
        let shared = shared.clone();
        let seen = shared.truth.connection(
            incoming.remote_address(),
            Some(&incoming.orig_dst_cid()),
            Instant::now(),
        );
        tokio::spawn(async move {
            if let Some((conn, rest)) = handshake(incoming, &shared, seen).await {
                serve_connection(conn, rest, &shared, seen).await;
            }
            drop(slot);
        });
    }
}

/// The rest of a handshake the connection is served before (0.5-RTT): its end within
/// `--handshake-timeout`, or the deadline.
type Rest = Pin<Box<tokio::time::Timeout<quinn::ZeroRttAccepted>>>;

/// The connection once the client's ClientHello is in (answering 0-RTT requests at 0.5-RTT),
/// with the rest of its handshake, or once the handshake is complete; `None` if it fails or
/// misses `--handshake-timeout`.
async fn handshake(
    incoming: quinn::Incoming,
    shared: &Arc<Shared>,
    seen: Option<ConnMark>,
) -> Option<(quinn::Connection, Option<Rest>)> {
    let qlogged = shared.qlog.as_ref().and_then(|q| {
        let (stream, _) = q.dir.next(Some(incoming.remote_address()))?;
        let mut t = transport(&shared.opts);
        t.qlog_stream(Some(stream));
        let mut sc = q.base.clone();
        sc.transport_config(Arc::new(t));
        Some(Arc::new(sc))
    });
    let mut connecting = match qlogged {
        Some(sc) => incoming.accept_with(sc).ok()?,
        None => incoming.accept().ok()?,
    };
    let deadline = tokio::time::Instant::now() + shared.opts.handshake_timeout;
    // 0.5-RTT (answering 0-RTT requests before the client's Finished) must wait for the
    // client's transport parameters: quinn applies them only once the whole ClientHello is in
    // (with an ML-KEM key share it spans two Initial packets), and never wakes an `open_uni`
    // (h3's control and QPACK streams) that found no stream credit before then. A negotiated
    // ALPN shows the ClientHello was processed; SNI alone, which also makes the handshake data
    // ready, may come from a ClientHello answered with a retry.
    let half_rtt = tokio::time::timeout_at(deadline, connecting.handshake_data())
        .await
        .is_ok_and(|hs| {
            hs.is_ok_and(|hs| {
                hs.downcast::<quinn::crypto::rustls::HandshakeData>()
                    .is_ok_and(|hs| hs.protocol.is_some())
            })
        });
    let early = if half_rtt {
        connecting.into_0rtt()
    } else {
        Err(connecting)
    };
    match early {
        Ok((conn, done)) => Some((
            conn,
            Some(Box::pin(tokio::time::timeout_at(deadline, done))),
        )),
        Err(connecting) => match tokio::time::timeout_at(deadline, connecting).await {
            Ok(Ok(c)) => {
                shared.truth.handshake(seen, Instant::now());
                Some((c, None))
            }
            Ok(Err(_)) => None,
            Err(_) => {
                Stats::bump(&shared.stats.handshake_timeouts);
                None
            }
        },
    }
}

/// The rest of the handshake ended: the truth log gets its moment, or the connection is
/// closed at the deadline.
fn finished(
    ended: Result<bool, tokio::time::error::Elapsed>,
    conn: &quinn::Connection,
    shared: &Shared,
    seen: Option<ConnMark>,
) {
    match ended {
        Ok(_) => shared.truth.handshake(seen, Instant::now()),
        Err(_) => {
            Stats::bump(&shared.stats.handshake_timeouts);
            conn.close(0u32.into(), b"handshake timeout");
        }
    }
}

/// `work` to its end, while the rest of the handshake, if any, is watched (and taken once it
/// ends).
async fn watching<T>(
    rest: &mut Option<Rest>,
    conn: &quinn::Connection,
    shared: &Shared,
    seen: Option<ConnMark>,
    work: impl std::future::Future<Output = T>,
) -> T {
    tokio::pin!(work);
    if let Some(r) = rest.as_mut() {
        tokio::select! {
            biased;
            ended = r => {
                finished(ended, conn, shared, seen);
                *rest = None;
            }
            out = &mut work => return out,
        }
    }
    work.await
}

/// Serves the connection's requests. The rest of a 0.5-RTT handshake is watched by this task,
/// ahead of its requests: quinn hands over 1-RTT requests only once the handshake is complete,
/// so its end is in the truth log before the requests that followed it. (Watched by a task of
/// its own, it could run after the run had read the log, which then had the connection's
/// requests but not its handshake.)
async fn serve_connection(
    conn: quinn::Connection,
    mut rest: Option<Rest>,
    shared: &Arc<Shared>,
    seen: Option<ConnMark>,
) {
    let opts = &shared.opts;
    let peer = conn.remote_address();
    // The cap in bytes is reported at the connection's MTU by the sampler's controller view.
    let cap = opts
        .cwnd_cap
        .map(|p| u64::from(p) * u64::from(conn.stats().path.current_mtu));
    let telemetry = watch_quic(
        &conn,
        shared.udp.clone(),
        opts.cc.as_str(),
        cap,
        opts.sample_interval,
        &shared.stats,
    );
    shared.truth.telemetry(
        seen,
        telemetry
            .clone()
            .map(|t| t as Arc<dyn crate::truth::Sender>),
    );
    let mut builder = h3::server::builder();
    // The compressed section a conforming encoder sends is no larger than the section it
    // decodes to; without this bound the stack buffers up to 16 MiB of a HEADERS frame per
    // stream before decoding it. A frame announcing more is refused at its header.
    let limit = opts.max_header_bytes;
    builder
        .max_field_section_size(u64::from(limit))
        .max_qpack_decode_buffer_size(usize::try_from(limit).unwrap_or(usize::MAX));
    let build =
        builder.build::<_, Bytes>(qbench_stack::h3_zero_copy::Connection::new(conn.clone()));
    let built = watching(&mut rest, &conn, shared, seen, build).await;
    let Ok(mut h3conn) = built else { return };
    let upstream = Arc::new(UpstreamConn::default());
    // The requests run on the connection's task, as HTTP/2's do (`crate::h2_conn_task`): one
    // worker at a time takes the connection's lock. h3's `accept` only takes a stream once
    // it is ready, so a turn of the loop may drop it.
    let mut requests = FuturesUnordered::new();
    loop {
        tokio::select! {
            biased;
            ended = async { rest.as_mut().expect("guarded").await }, if rest.is_some() => {
                finished(ended, &conn, shared, seen);
                rest = None;
            }
            Some(()) = requests.next(), if !requests.is_empty() => {}
            accepted = h3conn.accept() => {
                // Ends on peer close, H3_NO_ERROR or a connection error; nothing to report
                // server-side.
                let Ok(Some(resolver)) = accepted else { break };
                let (shared, telemetry) = (shared.clone(), telemetry.clone());
                let upstream = upstream.clone();
                let answer = async move {
                    let Ok((req, stream)) = resolver.resolve_request().await else {
                        return;
                    };
                    let (parts, ()) = req.into_parts();
                    let on = Where {
                        peer,
                        seen,
                        telemetry: telemetry.as_ref(),
                    };
                    request(stream, &parts, on, &shared, &upstream).await;
                };
                // A panic ends its request only, as it would end a task of its own.
                requests.push(AssertUnwindSafe(answer).catch_unwind().map(|_| ()));
            }
        }
    }
    // Requests accepted before the end still finish (bounded by the idle timeout).
    let drained = async { while requests.next().await.is_some() {} };
    watching(&mut rest, &conn, shared, seen, drained).await;
    // A handshake that ends after the connection's last request (or with the connection).
    if let Some(r) = rest {
        finished(r.await, &conn, shared, seen);
    }
}

/// The connection a request came on.
struct Where<'a> {
    peer: SocketAddr,
    seen: Option<ConnMark>,
    telemetry: Option<&'a Arc<ConnTelemetry>>,
}

/// Reads the request to its end (bounded), then answers it.
async fn request(
    mut stream: Stream,
    req: &http::request::Parts,
    on: Where<'_>,
    shared: &Shared,
    upstream: &UpstreamConn,
) {
    let drained = drain(&mut stream).await;
    if drained == Drained::Broken {
        return;
    }
    if drained == Drained::TooLarge {
        // RFC 9114 4.1: a server that answers before the request ends asks the client to stop
        // sending with H3_NO_ERROR.
        stream.stop_sending(Code::H3_NO_ERROR);
    }
    shared.stall.wait().await;
    if let Some(up) = relay::target(shared, req, drained) {
        // Boxed for the same reason as in tcpsrv: the relay's future would otherwise size
        // every request's task.
        Box::pin(relay_to(stream, up, upstream, req)).await;
        return;
    }
    let mut seen = Answering::new(
        shared.truth.clone(),
        shared
            .truth
            .request(on.seen, req.uri.path(), Instant::now()),
    );
    let mut a = Answer::new(req, on.peer, drained, shared, on.telemetry);
    a.head
        .headers_mut()
        .insert(http::header::DATE, crate::routes::date());
    let status = a.head.status().as_u16();
    if stream.send_response(a.head).await.is_err() {
        return;
    }
    seen.head(status);
    match a.body {
        Body::Payload(n) => {
            for chunk in Chunks::new(n) {
                let len = chunk.len() as u64;
                if stream.send_data(chunk).await.is_err() {
                    return;
                }
                seen.bytes += len;
            }
        }
        Body::Bytes(b) if b.is_empty() => {}
        Body::Bytes(b) => {
            let len = b.len() as u64;
            if stream.send_data(b).await.is_err() {
                return;
            }
            seen.bytes += len;
        }
    }
    seen.complete = stream.finish().await.is_ok();
}

/// Streams the origin's answer to the client as it arrives; a broken upstream stream resets
/// the client's, so that a truncated body is never taken for a whole one.
async fn relay_to(
    mut stream: Stream,
    up: &relay::Upstream,
    conn: &UpstreamConn,
    req: &http::request::Parts,
) {
    let mut body = match up.fetch(conn, req).await {
        Ok((head, body)) => {
            if stream.send_response(head).await.is_err() {
                return;
            }
            body
        }
        Err(e) => {
            let (head, text) = relay::failure(&e);
            if stream.send_response(head).await.is_ok() && stream.send_data(text).await.is_ok() {
                let _ = stream.finish().await;
            }
            return;
        }
    };
    while let Some(chunk) = body.next_chunk().await {
        match chunk {
            Ok(d) => {
                if stream.send_data(d).await.is_err() {
                    return;
                }
            }
            Err(_) => {
                stream.stop_stream(Code::H3_INTERNAL_ERROR);
                return;
            }
        }
    }
    let _ = stream.finish().await;
}

async fn drain(stream: &mut Stream) -> Drained {
    let mut seen = 0u64;
    loop {
        match stream.recv_data().await {
            Ok(None) => return Drained::Complete,
            Ok(Some(d)) => {
                seen += d.remaining() as u64;
                if seen > MAX_REQUEST_BODY {
                    return Drained::TooLarge;
                }
            }
            Err(_) => return Drained::Broken,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// quinn keeps `packet_threshold` private; its Debug form is where the setting shows.
    #[test]
    fn reorder_threshold_reaches_quinn() {
        let mut opts = ServerOptions::loopback();
        assert!(format!("{:?}", transport(&opts)).contains("packet_threshold: 3,"));
        opts.reorder_threshold = Some(57);
        opts.reorder_time_threshold = Some(2.5);
        let t = format!("{:?}", transport(&opts));
        assert!(
            t.contains("packet_threshold: 57,") && t.contains("time_threshold: 2.5,"),
            "{t}"
        );
    }
}
