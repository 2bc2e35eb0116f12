//! HTTP/2 and HTTP/1.1 over TLS over TCP, picked by ALPN.

use std::convert::Infallible;
use std::sync::Arc;

use http::{Method, Request, Response};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use crate::body::PayloadBody;
use crate::cc::set_tcp;
use crate::options::ServerOptions;
use crate::payload::Chunks;
use crate::routes::{route, Body};
use crate::telemetry::{watch_tcp, ConnTelemetry};
use qbench_core::wire::{ALPN_H2, CONN_WINDOW, STREAM_WINDOW};

fn respond(
    req: &Request<Incoming>,
    opts: &ServerOptions,
    telemetry: Option<&Arc<ConnTelemetry>>,
) -> Response<PayloadBody> {
    let r = route(req.method(), req.uri().path(), opts.max_object);
    let (head, body) = r.respond(telemetry);
    let (parts, ()) = head.into_parts();
    let body = match body {
        _ if req.method() == Method::HEAD => PayloadBody::Once(None),
        Body::Payload(n) => PayloadBody::Chunks(Chunks::new(n)),
        Body::Bytes(b) => PayloadBody::Once(Some(b)),
    };
    Response::from_parts(parts, body)
}

pub async fn serve(listener: TcpListener, acceptor: TlsAcceptor, opts: Arc<ServerOptions>) {
    loop {
        let Ok((tcp, _peer)) = listener.accept().await else {
            continue;
        };
        let _ = tcp.set_nodelay(true);
        // Checked at start-up; a failure here would only mean the kernel changed under us.
        let _ = set_tcp(&tcp, opts.cc);
        let acceptor = acceptor.clone();
        let opts = opts.clone();
        tokio::spawn(async move {
            let tracked = watch_tcp(tcp, opts.cc.tcp_name(), None, opts.sample_interval);
            let telemetry = tracked.telemetry();
            let Ok(tls) = acceptor.accept(tracked).await else {
                return;
            };
            let is_h2 = tls.get_ref().1.alpn_protocol() == Some(ALPN_H2);
            let io = TokioIo::new(tls);
            let svc_opts = opts.clone();
            let svc = service_fn(move |req: Request<Incoming>| {
                let resp = respond(&req, &svc_opts, telemetry.as_ref());
                async move { Ok::<_, Infallible>(resp) }
            });
            if is_h2 {
                let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                    .initial_stream_window_size(STREAM_WINDOW)
                    .initial_connection_window_size(CONN_WINDOW)
                    .max_concurrent_streams(opts.max_streams)
                    .max_header_list_size(opts.max_header_bytes)
                    .max_send_buf_size(4 * 1024 * 1024)
                    .serve_connection(io, svc)
                    .await;
            } else {
                let _ = hyper::server::conn::http1::Builder::new()
                    .max_buf_size(opts.max_header_bytes.max(8192) as usize)
                    .serve_connection(io, svc)
                    .await;
            }
        });
    }
}
