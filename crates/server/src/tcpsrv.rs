//! HTTP/2 and HTTP/1.1 over TLS over TCP, picked by ALPN.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use http::{Request, Response};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

use crate::body::{PayloadBody, Traced};
use crate::cc::set_tcp;
use crate::coalesce::{Coalesced, Gate};
use crate::conn_io::Tracked;
use crate::h2_conn_task::{ConnTask, Streams};
use crate::records::{Records, TcpWindow};
use crate::relay::{self, UpstreamConn};
use crate::request::{drain_body, Answer};
use crate::shared::{Shared, Stats};
use crate::telemetry::{watch_tcp, ConnTelemetry};
use crate::truth::{Answering, ConnMark};
use qbench_core::wire::ALPN_H2;
use qbench_stack::fdlimit::{classify, AcceptError, Burst, ACCEPT_BACKOFF};
use std::time::Instant;

/// Receive windows for request bodies: requests are GETs, so these only bound what a peer can
/// make the server buffer (responses use the client's windows, not these).
pub const REQUEST_STREAM_WINDOW: u32 = 64 * 1024;
pub const REQUEST_CONN_WINDOW: u32 = 1024 * 1024;

/// Response bytes hyper buffers per HTTP/2 stream ahead of the peer's flow control.
const SEND_BUFFER: usize = 4 * 1024 * 1024;

/// The connection a request came on.
#[derive(Clone)]
struct Where {
    peer: SocketAddr,
    seen: Option<ConnMark>,
    telemetry: Option<Arc<ConnTelemetry>>,
}

async fn answer(
    req: Request<Incoming>,
    on: &Where,
    shared: &Shared,
    upstream: &UpstreamConn,
) -> Response<Traced> {
    let (parts, body) = req.into_parts();
    let drained = drain_body(body).await;
    shared.stall.wait().await;
    if let Some(up) = relay::target(shared, &parts, drained) {
        // Boxed: the relay's client future is kilobytes, and every request's task would
        // otherwise carry (and tokio copy) it, relayed or not.
        let (head, body) = match Box::pin(up.fetch(upstream, &parts)).await {
            Ok((head, body)) => (head, PayloadBody::Relay(body)),
            Err(e) => {
                let (head, text) = relay::failure(&e);
                (head, PayloadBody::Once(Some(text)))
            }
        };
        let (head, ()) = head.into_parts();
        return Response::from_parts(head, body.into());
    }
    let seen = Answering::new(
        shared.truth.clone(),
        shared
            .truth
            .request(on.seen, parts.uri.path(), Instant::now()),
    );
    let a = Answer::new(&parts, on.peer, drained, shared, on.telemetry.as_ref());
    let head = a.head;
    let status = head.status().as_u16();
    let (parts, ()) = head.into_parts();
    let body = Traced::new(PayloadBody::from(a.body), seen, status);
    Response::from_parts(parts, body)
}

pub async fn serve(listener: TcpListener, acceptor: TlsAcceptor, shared: Arc<Shared>) {
    let mut burst = Burst::default();
    loop {
        let (tcp, peer) = match listener.accept().await {
            Ok(a) => a,
            Err(e) => {
                let kind = classify(&e);
                if kind != AcceptError::Connection {
                    if burst.fail() {
                        crate::note!(
                            "qbench-server: accept failed ({e}); retrying every {} ms{}",
                            ACCEPT_BACKOFF.as_millis(),
                            if kind == AcceptError::Exhausted {
                                " until descriptors free up (see ulimit -n)"
                            } else {
                                ""
                            }
                        );
                    }
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                }
                continue;
            }
        };
        if let Some(n) = burst.ok() {
            crate::note!("qbench-server: accepting again after {n} failed accepts");
        }
        let Some(slot) = shared.admit(peer) else {
            continue;
        };
        let acceptor = acceptor.clone();
        let shared = shared.clone();
        tokio::spawn(async move {
            connection(tcp, peer, acceptor, &shared).await;
            drop(slot);
        });
    }
}

async fn connection(tcp: TcpStream, peer: SocketAddr, acceptor: TlsAcceptor, shared: &Arc<Shared>) {
    let seen = note_connection(&tcp, peer, shared);
    let _ = tcp.set_nodelay(true);
    // Checked at start-up; a failure here would only mean the kernel changed under us.
    let _ = set_tcp(&tcp, shared.opts.cc);
    let io = Tracked::new(tcp);
    let activity = io.activity();
    let Some(mut tls) = handshake(io, acceptor, shared).await else {
        return;
    };
    shared.truth.handshake(seen, Instant::now());
    let telemetry = watch(&mut tls, seen, shared);
    let on = Where {
        peer,
        seen,
        telemetry,
    };
    serve_http(tls, on, shared, activity).await;
}

/// The server's record of a new connection (when it keeps one), with the round trip the
/// kernel measured over the TCP handshake.
fn note_connection(tcp: &TcpStream, peer: SocketAddr, shared: &Shared) -> Option<ConnMark> {
    let seen = shared.truth.connection(peer, None, Instant::now());
    if seen.is_some() {
        use std::os::fd::AsRawFd;
        if let Some(rtt) = crate::telemetry::handshake_rtt(tcp.as_raw_fd()) {
            shared.truth.handshake_rtt(seen, rtt);
        }
    }
    seen
}

/// The TLS handshake, within `--handshake-timeout` (counted when it runs out); `None` if it
/// failed or timed out.
async fn handshake(
    io: Tracked,
    acceptor: TlsAcceptor,
    shared: &Shared,
) -> Option<TlsStream<Tracked>> {
    match tokio::time::timeout(shared.opts.handshake_timeout, acceptor.accept(io)).await {
        Ok(Ok(tls)) => Some(tls),
        Ok(Err(_)) => None,
        Err(_) => {
            Stats::bump(&shared.stats.handshake_timeouts);
            None
        }
    }
}

/// Starts sampling the connection's TCP state, only now that the handshake is done: a peer
/// that never finishes costs no sampler.
fn watch(
    tls: &mut TlsStream<Tracked>,
    seen: Option<ConnMark>,
    shared: &Shared,
) -> Option<Arc<ConnTelemetry>> {
    let opts = &shared.opts;
    let io = tls.get_mut().0;
    let telemetry = watch_tcp(
        io.fd(),
        opts.cc.tcp_name(),
        opts.sample_interval,
        &shared.stats,
    );
    io.set_telemetry(telemetry.clone());
    shared.truth.telemetry(
        seen,
        telemetry
            .clone()
            .map(|t| t as Arc<dyn crate::truth::Sender>),
    );
    telemetry
}

/// Serves HTTP/2 or HTTP/1.1, as ALPN chose, until the connection ends or sits idle.
async fn serve_http(
    tls: TlsStream<Tracked>,
    on: Where,
    shared: &Arc<Shared>,
    activity: qbench_stack::activity::Activity,
) {
    let opts = &shared.opts;
    let is_h2 = tls.get_ref().1.alpn_protocol() == Some(ALPN_H2);
    let fd = tls.get_ref().0.fd();
    let tls = Records::new(tls, TcpWindow(fd), opts.tls_records);
    let svc_shared = shared.clone();
    let upstream = Arc::new(UpstreamConn::default());
    let svc = service_fn(move |req: Request<Incoming>| {
        let (shared, on) = (svc_shared.clone(), on.clone());
        let upstream = upstream.clone();
        async move { Ok::<_, Infallible>(answer(req, &on, &shared, &upstream).await) }
    });
    let idle = activity.idle(opts.idle_timeout);
    if is_h2 {
        let (streams, gate) = (Streams::default(), Gate::default());
        let conn = hyper::server::conn::http2::Builder::new(streams.executor())
            .timer(TokioTimer::new())
            .initial_stream_window_size(REQUEST_STREAM_WINDOW)
            .initial_connection_window_size(REQUEST_CONN_WINDOW)
            .max_concurrent_streams(opts.max_streams)
            .max_header_list_size(opts.max_header_bytes)
            .max_send_buf_size(match shared.upstream {
                // A proxy's bodies are copies, not slices of the shared payload: all of a
                // connection's streams together hold what one upstream connection may.
                Some(_) => relay::client_side_buffer(opts.max_streams),
                None => SEND_BUFFER,
            })
            .serve_connection(TokioIo::new(Coalesced::new(tls, gate.clone())), svc);
        let task = ConnTask::new(conn, streams, gate);
        until_idle(task, |t| t.conn().graceful_shutdown(), idle, &shared.stats).await;
    } else {
        let conn = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(opts.header_timeout)
            .max_buf_size(opts.max_header_bytes.max(8192) as usize)
            .serve_connection(TokioIo::new(tls), svc);
        tokio::pin!(conn);
        until_idle(
            conn,
            |c| c.as_mut().graceful_shutdown(),
            idle,
            &shared.stats,
        )
        .await;
    }
}

/// Serves `conn` until it ends or `idle` fires; then asks it to close gracefully (h2 GOAWAY),
/// for at most `LINGER`.
async fn until_idle<C: Future + Unpin>(
    mut conn: C,
    graceful_shutdown: impl FnOnce(&mut C),
    idle: impl Future<Output = ()>,
    stats: &Stats,
) {
    tokio::select! {
        _ = &mut conn => return,
        () = idle => {}
    }
    Stats::bump(&stats.idle_closes);
    graceful_shutdown(&mut conn);
    let _ = tokio::time::timeout(crate::conn_io::LINGER, conn).await;
}
